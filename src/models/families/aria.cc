// Aria (aria: its language model, keys under text_config, tensors under language_model.model.layers.; aria_text:
// the text model, keys at the top level, tensors under model.layers.): top-k of the logits, weights the softmax over
// those k (the same as a softmax over every expert renormalized); routed experts always SiLU-gated, stored as
// released: mlp.experts.fc1.weight (E, D, 2I, gate columns [0, I), up [I, 2I)) and fc2.weight (E, I, D), used as
// x @ W; a shared MLP of intermediate_size * moe_num_shared_experts (2) running ACT2FN[hidden_act], ungated. Every
// layer MoE. Keys moe_num_experts (8), moe_topk (2), intermediate_size; mlp_bias (biases on the shared MLP) refused.
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

class Aria final : public FamilyBase {
 public:
  Aria(const HfConfig& text, std::string_view name, std::string layers)
      : FamilyBase(text, name, read_common_fields(text, {"moe_topk"})), layers_(std::move(layers)) {}

 private:
  void fill(int64_t layer, MoELayerSpec& s) const override {
    s.hidden = c_.integer({"intermediate_size"});
    s.num_experts = c_.integer_or({"moe_num_experts"}, 8);
    s.router.scoring = RouterScoring::kSoftmaxOverTopKLogits;
    s.activation = ExpertActivation::kSwiGLU;  // AriaExperts hard-codes silu
    const ExpertActivation shared = read_hidden_act(c_);
    if (shared != s.activation) s.shared.activation = shared;
    if (c_.boolean_or({"mlp_bias"}, false))
      fail(c_.label(), ": mlp_bias=true (biases on the shared MLP's projections) is not supported; hymoe runs Aria's "
           "shared MLP without biases, as its releases store it");
    const std::string p = layers_ + std::to_string(layer) + ".mlp.";
    s.router_weight = p + "router.weight";
    s.storage = ExpertStorage::kFusedConcatInOut;
    s.experts_prefix = p + "experts.";
    s.in_out_gate_up = "fc1.weight";
    s.in_out_down = "fc2.weight";
    s.shared.hidden = s.hidden * c_.integer_or({"moe_num_shared_experts"}, 2);
    s.shared.prefix = p + "shared_experts.";
  }

  std::string layers_;
};

}  // namespace

HYMOE_MODEL_FAMILY(aria) {
  return std::make_unique<Aria>(text_config_of(config, "aria"), "aria", "language_model.model.layers.");
}
HYMOE_MODEL_FAMILY(aria_text) { return std::make_unique<Aria>(config, "aria_text", "model.layers."); }

}  // namespace hymoe
