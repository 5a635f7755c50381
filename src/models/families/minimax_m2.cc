// MiniMax-M2 (minimax_m2): sigmoid scores; e_score_correction_bias (a buffer of the block, not of its gate) added
// for choosing only; no groups; the unbiased scores of the chosen experts always renormalized (MiniMaxM2TopKRouter
// divides by their sum, without an epsilon: a sum of sigmoids is never 0); no scaling factor, no shared expert;
// expert size intermediate_size, num_local_experts experts; experts run act(gate x) * up x with act = hidden_act,
// stored as Mixtral's w1 (gate), w3 (up), w2 (down) under block_sparse_moe.
// Every layer is MoE.
// MiniMax-M3 (minimax_m3_vl, as released: its language model, keys under text_config, tensors under
// language_model.model.layers.) is M2's router (weights
// always renormalized, no epsilon) whose routed output is times routed_scaling_factor (2.0: the same as scaling the
// weights), beside a shared MLP of shared_intermediate_size (3072); routed and shared experts run gpt-oss's clamped
// SwiGLU without biases, (clamp(up, +-L) + 1) * g * sigmoid(alpha g), g = min(gate, L), alpha swiglu_alpha (1.702),
// L swiglu_limit (7), whatever hidden_act says. MoE where mlp_layer_types says "sparse" (absent: where the legacy
// moe_layer_freq list is non-zero, else every layer); the block under block_sparse_moe with w1 / w3 / w2 experts and
// shared_experts.gate_proj / up_proj / down_proj.
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

class MiniMaxM2 final : public FamilyBase {
 public:
  explicit MiniMaxM2(const HfConfig& c) : FamilyBase(c, "minimax_m2", read_common_fields(c)) {}

 private:
  void fill(int64_t layer, MoELayerSpec& s) const override {
    s.hidden = c_.integer({"intermediate_size"});
    s.num_experts = c_.integer({"num_local_experts", "num_experts"});
    s.router.scoring = RouterScoring::kSigmoid;
    s.router.selection_bias = true;
    s.router.normalize = true;
    s.activation = read_hidden_act(c_);
    // The released names, which transformers' conversion keeps on save: Mixtral's block_sparse_moe and w1/w3/w2.
    const std::string p = layer_prefix(layer) + "block_sparse_moe.";
    s.router_weight = p + "gate.weight";
    s.selection_bias = p + "e_score_correction_bias";
    s.experts_prefix = p + "experts.";
    s.gate_name = "w1";
    s.up_name = "w3";
    s.down_name = "w2";
  }
};

class MiniMaxM3 final : public FamilyBase {
 public:
  MiniMaxM3(const HfConfig& text, std::string_view name, std::string layers)
      : FamilyBase(text, name, read_common_fields(text)), layers_(std::move(layers)) {
    const int64_t n = text.integer({"num_hidden_layers"});
    std::vector<std::string> fallback(static_cast<size_t>(n), "sparse");
    if (text.is_list("moe_layer_freq"))
      for (int64_t l = 0; l < n; ++l)
        fallback[static_cast<size_t>(l)] = text.integer_per_layer_or("moe_layer_freq", l, 1) != 0 ? "sparse" : "dense";
    layer_types_ = read_layer_types(text, name, n, std::move(fallback), {"dense", "sparse"});
  }

 private:
  std::string dense_reason(int64_t layer) const override {
    return layer_types_[static_cast<size_t>(layer)] == "sparse"
               ? ""
               : "mlp_layer_types[" + std::to_string(layer) + "] is \"dense\"";
  }
  void fill(int64_t layer, MoELayerSpec& s) const override {
    s.hidden = c_.integer_or({"intermediate_size"}, 3072);
    s.num_experts = c_.integer_or({"num_local_experts", "num_experts"}, 128);
    s.router.scoring = RouterScoring::kSigmoid;
    s.router.selection_bias = true;
    s.router.normalize = true;
    s.router.scaling_factor = c_.number_or({"routed_scaling_factor"}, 2.0);
    s.activation = ExpertActivation::kClampedSwiGLU;
    s.swiglu_alpha = c_.number_or({"swiglu_alpha"}, 1.702);
    s.swiglu_limit = c_.number_or({"swiglu_limit"}, 7.0);
    if (!(s.swiglu_limit > 0)) fail(c_.label(), ": swiglu_limit=", s.swiglu_limit, " must be positive");
    const std::string p = layers_ + std::to_string(layer) + ".block_sparse_moe.";
    s.router_weight = p + "gate.weight";
    s.selection_bias = p + "e_score_correction_bias";
    s.experts_prefix = p + "experts.";
    s.gate_name = "w1";
    s.up_name = "w3";
    s.down_name = "w2";
    s.shared.hidden = c_.integer_or({"shared_intermediate_size"}, 3072);
    s.shared.prefix = p + "shared_experts.";
  }

  std::string layers_;
  std::vector<std::string> layer_types_;
};

}  // namespace

HYMOE_MODEL_FAMILY(minimax_m3_vl) {
  return std::make_unique<MiniMaxM3>(text_config_of(config, "minimax_m3_vl"), "minimax_m3_vl",
                                     "language_model.model.layers.");
}
HYMOE_MODEL_FAMILY(minimax_m2) {
  return std::make_unique<MiniMaxM2>(config);
}

}  // namespace hymoe
