// JetMoE (jetmoe), its MLP block (its attention is a mixture of attention heads, outside the block): top-k of the
// router's logits (mlp.router.layer, no bias), weights the softmax over those k; experts stored as released,
// mlp.input_linear.weight (E, 2I, D) whose first I rows per expert are the gate and the next I the up, and
// mlp.output_linear.weight (E, D, I); act = ACT2FN[activation_function] (its config's key, default silu) on the gate;
// no shared expert; a bias mlp.bias (D) added to every token's output. Every layer MoE, num_local_experts experts of
// intermediate_size.
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

class JetMoe final : public FamilyBase {
 public:
  explicit JetMoe(const HfConfig& c) : FamilyBase(c, "jetmoe", read_common_fields(c)) {}

 private:
  void fill(int64_t layer, MoELayerSpec& s) const override {
    s.hidden = c_.integer({"intermediate_size"});
    s.num_experts = c_.integer({"num_local_experts", "num_experts"});
    s.router.scoring = RouterScoring::kSoftmaxOverTopKLogits;
    s.activation = activation_named(c_, "activation_function", c_.string_or({"activation_function"}, "silu"));
    const std::string p = layer_prefix(layer) + "mlp.";
    s.router_weight = p + "router.layer.weight";
    s.storage = ExpertStorage::kFusedGateUpOutIn;
    s.experts_prefix = p;
    s.gate_name = "input_linear";
    s.down_name = "output_linear";
    s.output_bias = p + "bias";
  }
};

}  // namespace

HYMOE_MODEL_FAMILY(jetmoe) { return std::make_unique<JetMoe>(config); }

}  // namespace hymoe
