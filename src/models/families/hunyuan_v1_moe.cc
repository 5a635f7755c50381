// Hunyuan-A13B (hunyuan_v1_moe): every layer MoE; a float32 softmax over num_experts, top moe_topk (an integer,
// or one per layer), always renormalized; the experts and an ungated shared MLP (shared_mlp) all intermediate_size
// wide; router weight gate.wg. Experts run act(gate x) * up x with act = hidden_act.
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

CommonFields hunyuan_common_fields(const HfConfig& c) {
  CommonFields f;
  f.dim = c.integer({"hidden_size"});
  f.num_layers = c.integer({"num_hidden_layers"});
  if (f.num_layers <= 0) fail(c.label(), ": num_hidden_layers=", f.num_layers, " must be positive");
  f.top_k = c.integer_per_layer_or("moe_topk", 0, 1);  // per layer in fill()
  return f;
}

class HunyuanV1Moe final : public FamilyBase {
 public:
  explicit HunyuanV1Moe(const HfConfig& c) : FamilyBase(c, "hunyuan_v1_moe", hunyuan_common_fields(c)) {}

 private:
  void fill(int64_t layer, MoELayerSpec& s) const override {
    s.top_k = c_.integer_per_layer_or("moe_topk", layer, 1);
    s.hidden = c_.integer({"intermediate_size"});
    s.num_experts = c_.integer_or({"num_experts", "num_local_experts"}, 1);
    s.router.scoring = RouterScoring::kSoftmax;
    s.router.normalize = true;  // HunYuanMoEV1Gate always renormalizes
    s.activation = read_hidden_act(c_);
    const std::string p = layer_prefix(layer) + "mlp.";
    s.router_weight = p + "gate.wg.weight";
    s.experts_prefix = p + "experts.";
    s.shared.hidden = s.hidden;
    s.shared.prefix = p + "shared_mlp.";
  }
};

}  // namespace

HYMOE_MODEL_FAMILY(hunyuan_v1_moe) {
  return std::make_unique<HunyuanV1Moe>(config);
}

}  // namespace hymoe
