// OLMoE (OLMoE-1B-7B): every layer MoE; softmax top-k, renormalized only with norm_topk_prob (false in the
// release); expert size is intermediate_size; experts run act(gate x) * up x with act = hidden_act. FlexOlmo
// (flex_olmo) is the same block (FlexOlmoSparseMoeBlock) under FlexOlmoConfig's defaults, which leave no MoE key
// different (norm_topk_prob false).
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

class Olmoe final : public FamilyBase {
 public:
  Olmoe(const HfConfig& c, const char* family) : FamilyBase(c, family, read_common_fields(c)) {}

 private:
  void fill(int64_t layer, MoELayerSpec& s) const override {
    s.hidden = c_.integer({"intermediate_size"});
    s.num_experts = c_.integer({"num_experts", "num_local_experts"});
    s.router.scoring = RouterScoring::kSoftmax;
    s.router.normalize = c_.boolean_or({"norm_topk_prob"}, false);
    s.activation = read_hidden_act(c_);
    const std::string p = layer_prefix(layer) + "mlp.";
    s.router_weight = p + "gate.weight";
    s.experts_prefix = p + "experts.";
  }
};

}  // namespace

HYMOE_MODEL_FAMILY(olmoe) { return std::make_unique<Olmoe>(config, "olmoe"); }
HYMOE_MODEL_FAMILY(flex_olmo) {
  return std::make_unique<Olmoe>(config, "flex_olmo");
}

}  // namespace hymoe
