// DeepSeek-V4 (deepseek_v4): scores = ACT2FN[scoring_func](logits), sqrt(softplus) by default (or sigmoid); the
// correction bias (saved as ffn.gate.bias) added for choosing only; the chosen scores always renormalized (+1e-20),
// times routed_scaling_factor (1.5); no groups; one shared MLP as wide as the experts (moe_intermediate_size,
// n_shared_experts is not read). Routed and shared experts run silu(min(gate, L)) * clamp(up, -L, L), L =
// swiglu_limit (10). Every layer is MoE: "moe" layers route by the gate, "hash_moe" layers (mlp_layer_types; absent:
// the first num_hash_layers, default 3) choose their experts by token id from a frozen table, which a layer given
// only x cannot do, so they are refused. Tensors under model.layers.N.ffn. with experts.E.w1 / w3 / w2 and
// shared_experts.w1 / w3 / w2, as the releases name them.
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

class DeepseekV4 final : public FamilyBase {
 public:
  explicit DeepseekV4(const HfConfig& c) : FamilyBase(c, "deepseek_v4", read_common_fields(c)) {
    const int64_t n = f_.num_layers;
    const int64_t hash = c.integer_or({"num_hash_layers"}, 3);
    std::vector<std::string> fallback;
    for (int64_t l = 0; l < n; ++l) fallback.push_back(l < hash ? "hash_moe" : "moe");
    layer_types_ = read_layer_types(c, "deepseek_v4", n, std::move(fallback), {"moe", "hash_moe"}, /*padded=*/true);
  }

 private:
  void fill(int64_t layer, MoELayerSpec& s) const override {
    if (layer_types_[static_cast<size_t>(layer)] == "hash_moe")
      fail(c_.label(), ": layer ", layer, " of this deepseek_v4 model is \"hash_moe\" (mlp_layer_types): it chooses its "
           "experts by token id from ffn.gate.tid2eid, which hymoe's layer, given only x, does not run");
    s.hidden = c_.integer({"moe_intermediate_size", "intermediate_size"});
    s.num_experts = c_.integer({"n_routed_experts", "num_local_experts"});
    const std::string scoring = c_.string_or({"scoring_func"}, "sqrtsoftplus");
    if (scoring == "sqrtsoftplus")
      s.router.scoring = RouterScoring::kSqrtSoftplus;
    else if (scoring == "sigmoid")
      s.router.scoring = RouterScoring::kSigmoid;
    else
      fail(c_.label(), ": scoring_func='", scoring, "' is not one deepseek_v4 runs (sqrtsoftplus, sigmoid)");
    s.router.selection_bias = true;
    s.router.normalize = true;
    s.router.normalize_epsilon = 1e-20;
    s.router.scaling_factor = c_.number_or({"routed_scaling_factor"}, 1.5);
    if (read_hidden_act(c_) != ExpertActivation::kSwiGLU)
      fail(c_.label(), ": hidden_act='", c_.string_or({"hidden_act"}, "silu"),
           "'; deepseek_v4's limited SwiGLU runs silu, so hymoe needs hidden_act silu");
    s.activation = ExpertActivation::kLimitedSwiGLU;
    s.swiglu_limit = c_.number_or({"swiglu_limit"}, 10.0);
    if (!(s.swiglu_limit > 0)) fail(c_.label(), ": swiglu_limit=", s.swiglu_limit, " must be positive");
    const std::string p = layer_prefix(layer) + "ffn.";
    s.router_weight = p + "gate.weight";
    s.selection_bias = p + "gate.bias";
    s.experts_prefix = p + "experts.";
    s.gate_name = "w1";
    s.up_name = "w3";
    s.down_name = "w2";
    s.shared.hidden = s.hidden;
    s.shared.prefix = p + "shared_experts.";
    s.shared.gate_name = "w1";
    s.shared.up_name = "w3";
    s.shared.down_name = "w2";
  }

  std::vector<std::string> layer_types_;
};

}  // namespace

HYMOE_MODEL_FAMILY(deepseek_v4) { return std::make_unique<DeepseekV4>(config); }

}  // namespace hymoe
