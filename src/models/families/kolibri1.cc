// Kolibri-1 (kolibri1): fp32 logits; the correction bias is added to the logits, not to scores, for choosing the
// top-k; the weights are the sigmoids of the chosen logits, divided by their sum iff norm_topk_prob (default false,
// no epsilon); no groups, no scale. One ungated shared MLP of shared_expert_intermediate_size (512). Every layer MoE.
// save_pretrained writes the block under model.layers.N.mlp. (gate, experts.E, shared_experts) but the bias outside
// it, as model.layers.N.moe.router.expert_bias, as the releases name it.
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

class Kolibri1 final : public FamilyBase {
 public:
  explicit Kolibri1(const HfConfig& c) : FamilyBase(c, "kolibri1", read_common_fields(c)) {}

 private:
  void fill(int64_t layer, MoELayerSpec& s) const override {
    s.hidden = c_.integer({"moe_intermediate_size"});
    s.num_experts = c_.integer({"num_local_experts", "num_experts"});
    s.router.scoring = RouterScoring::kLogitsThenSigmoid;
    s.router.selection_bias = true;
    s.router.normalize = c_.boolean_or({"norm_topk_prob"}, false);
    s.activation = read_hidden_act(c_);
    const std::string p = layer_prefix(layer);
    s.router_weight = p + "mlp.gate.weight";
    s.selection_bias = p + "moe.router.expert_bias";
    s.experts_prefix = p + "mlp.experts.";
    s.shared.hidden = c_.integer_or({"shared_expert_intermediate_size"}, 512);
    s.shared.prefix = p + "mlp.shared_experts.";
  }
};

}  // namespace

HYMOE_MODEL_FAMILY(kolibri1) { return std::make_unique<Kolibri1>(config); }

}  // namespace hymoe
