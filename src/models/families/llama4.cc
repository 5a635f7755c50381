// Llama 4 (llama4: Scout, Maverick, the language model under text_config, names under language_model.model.;
// llama4_text: the text model alone, under model.). Llama4Router: the top-k logits' sigmoids are the weights (no
// renormalization); each chosen expert runs on the token's input times its weight (routed_in = x * score) and its
// output is added unscaled, beside an ungated shared expert of intermediate_size. The experts are fused as
// released: feed_forward.experts.gate_up_proj (E, D, 2I), gate columns first, and down_proj (E, I, D). MoE layers:
// moe_layers, else every interleave_moe_layer_step-th layer (step - 1, 2 step - 1, ...), as Llama4TextConfig
// derives them; the others are dense (intermediate_size_mlp).
#include <algorithm>

#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

class Llama4 final : public FamilyBase {
 public:
  Llama4(const HfConfig& text, std::string_view name, std::string layers_prefix)
      : FamilyBase(text, name, read_common_fields(text)), prefix_(std::move(layers_prefix)) {
    const int64_t step = c_.integer_or({"interleave_moe_layer_step"}, 1);
    if (step < 1) fail(c_.label(), ": interleave_moe_layer_step is ", step, "; it must be at least 1");
    std::vector<int64_t> derived;
    for (int64_t l = step - 1; l < f_.num_layers; l += step) derived.push_back(l);
    moe_layers_ = c_.integer_list_or("moe_layers", derived);
  }

 private:
  std::string dense_reason(int64_t layer) const override {
    if (std::find(moe_layers_.begin(), moe_layers_.end(), layer) != moe_layers_.end()) return "";
    return "not in moe_layers (given, or derived from interleave_moe_layer_step)";
  }

  void fill(int64_t layer, MoELayerSpec& s) const override {
    s.hidden = c_.integer({"intermediate_size"});
    s.num_experts = c_.integer({"num_local_experts"});
    s.router.scoring = RouterScoring::kSigmoid;
    s.router.scale_input = true;
    s.activation = read_hidden_act(c_);
    const std::string p = prefix_ + std::to_string(layer) + ".feed_forward.";
    s.router_weight = p + "router.weight";
    s.experts_prefix = p + "experts.";
    s.storage = ExpertStorage::kFusedConcatInOut;
    s.shared.hidden = s.hidden;
    s.shared.prefix = p + "shared_expert.";
  }

  std::string prefix_;
  std::vector<int64_t> moe_layers_;
};

}  // namespace

HYMOE_MODEL_FAMILY(llama4) {
  return std::make_unique<Llama4>(text_config_of(config, "llama4"), "llama4", "language_model.model.layers.");
}

HYMOE_MODEL_FAMILY(llama4_text) {
  return std::make_unique<Llama4>(config, "llama4_text", "model.layers.");
}

}  // namespace hymoe
