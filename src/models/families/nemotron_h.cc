// Nemotron-H (nemotron_h: Nemotron 3 Nano and its kin), its MoE layers: DeepSeek-V3's router (fp32 sigmoid, the
// correction bias mixer.gate.e_score_correction_bias for choosing, n_group groups by top-2 sum (1 by default),
// renormalized iff norm_topk_prob (+1e-20), times routed_scaling_factor (1.0)), and experts without a gate:
// down(act(up x)) with act = ACT2FN[mlp_hidden_act], relu2 (relu(z)^2) being the one hymoe runs; one shared MLP of
// moe_shared_expert_intermediate_size (7688) of the same form. The layer kinds are layers_block_type ("moe",
// "linear_attention" (Mamba), "full_attention", "mlp"; legacy configs: hybrid_override_pattern, one character a layer,
// E for MoE), whose length is the layer count (num_hidden_layers is deprecated). Tensors under
// backbone.layers.N.mixer. (experts.E.up_proj / down_proj, shared_experts.up_proj / down_proj). A latent projection
// around the experts (moe_latent_size) and MLP biases are refused.
#include <limits>

#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

std::vector<std::string> layer_kinds(const HfConfig& c) {
  for (const char* key : {"layers_block_type", "layer_types"})
    if (c.has(key)) return c.string_list_or(key, {});
  if (c.has("hybrid_override_pattern")) {
    std::vector<std::string> kinds;
    for (char ch : c.string({"hybrid_override_pattern"})) {
      switch (ch) {
        case 'E': kinds.emplace_back("moe"); break;
        case 'M': kinds.emplace_back("linear_attention"); break;
        case '*': kinds.emplace_back("full_attention"); break;
        case '-': kinds.emplace_back("mlp"); break;
        default:
          fail(c.label(), ": 'hybrid_override_pattern' holds '", std::string(1, ch),
               "'; nemotron_h knows E (moe), M (Mamba), * (attention) and - (mlp)");
      }
    }
    return kinds;
  }
  return {"linear_attention", "moe", "full_attention", "mlp"};  // NemotronHConfig's default
}

CommonFields nemotron_fields(const HfConfig& c, const std::vector<std::string>& kinds) {
  CommonFields f;
  f.dim = c.integer({"hidden_size"});
  f.top_k = c.integer({"num_experts_per_tok"});
  f.num_layers = static_cast<int64_t>(kinds.size());
  if (f.num_layers == 0) fail(c.label(), ": 'layers_block_type' lists no layers");
  return f;
}

class NemotronH final : public FamilyBase {
 public:
  NemotronH(const HfConfig& c, std::vector<std::string> kinds)
      : FamilyBase(c, "nemotron_h", nemotron_fields(c, kinds)), kinds_(std::move(kinds)) {}

 private:
  std::string dense_reason(int64_t layer) const override {
    const std::string& kind = kinds_[static_cast<size_t>(layer)];
    return kind == "moe" ? "" : "layers_block_type[" + std::to_string(layer) + "] is \"" + kind + "\"";
  }
  void fill(int64_t layer, MoELayerSpec& s) const override {
    if (c_.has("moe_latent_size"))
      fail(c_.label(), ": moe_latent_size=", c_.integer({"moe_latent_size"}), " (the experts run in a projected "
           "latent space, fc1_latent_proj / fc2_latent_proj) is not something hymoe's layer has");
    if (c_.boolean_or({"mlp_bias"}, false))
      fail(c_.label(), ": mlp_bias=true (biases on the experts' projections) is not supported");
    const std::string act = c_.string_or({"mlp_hidden_act"}, "relu2");
    if (act != "relu2")
      fail(c_.label(), ": mlp_hidden_act='", act, "' is not an ungated expert activation hymoe runs (relu2)");
    s.hidden = c_.integer({"moe_intermediate_size"});
    s.num_experts = c_.integer({"n_routed_experts", "num_local_experts"});
    RouterOptions& r = s.router;
    r.scoring = RouterScoring::kSigmoid;
    r.selection_bias = true;
    r.group_limited = true;  // with n_group = topk_group = 1 a no-op
    r.n_group = c_.integer_or({"n_group"}, 1);
    r.top_group = c_.integer_or({"topk_group"}, 1);
    r.group_score = GroupScore::kTop2Sum;
    r.excluded_score = -std::numeric_limits<float>::infinity();
    r.normalize = c_.boolean_or({"norm_topk_prob"}, true);
    r.normalize_epsilon = 1e-20;
    r.scaling_factor = c_.number_or({"routed_scaling_factor"}, 1.0);
    s.activation = ExpertActivation::kSquaredReLU;
    const std::string p = "backbone.layers." + std::to_string(layer) + ".mixer.";
    s.router_weight = p + "gate.weight";
    s.selection_bias = p + "gate.e_score_correction_bias";
    s.experts_prefix = p + "experts.";
    s.gate_name = "";
    s.shared.hidden = c_.integer_or({"moe_shared_expert_intermediate_size"}, 7688);
    s.shared.prefix = p + "shared_experts.";
    s.shared.gate_name = "";
  }

  std::vector<std::string> kinds_;
};

}  // namespace

HYMOE_MODEL_FAMILY(nemotron_h) { return std::make_unique<NemotronH>(config, layer_kinds(config)); }

}  // namespace hymoe
