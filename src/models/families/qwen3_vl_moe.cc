// Qwen3-VL-MoE (qwen3_vl_moe: Qwen3-VL-30B-A3B, 235B-A22B), the language model's MoE blocks: the keys are those of
// config.json's text_config; softmax top-k, always renormalized (Qwen3VLMoeTextTopKRouter has no norm_topk_prob);
// Qwen2/3-MoE's layer rule; the experts fused as the releases store them, gate_up_proj (E, D, 2I) with gate columns
// first and down_proj (E, I, D) (transformers transposes both on load); under model.language_model.layers.N.mlp.
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

class Qwen3VlMoe final : public FamilyBase {
 public:
  explicit Qwen3VlMoe(const HfConfig& text)
      : FamilyBase(text, "qwen3_vl_moe", read_common_fields(text)),
        experts_(text.integer({"num_local_experts", "num_experts"})) {}

 private:
  std::string dense_reason(int64_t layer) const override { return qwen_dense_reason(c_, layer, experts_); }
  void fill(int64_t layer, MoELayerSpec& s) const override {
    s.hidden = c_.integer({"moe_intermediate_size"});
    s.num_experts = experts_;
    s.router.scoring = RouterScoring::kSoftmax;
    s.router.normalize = true;
    s.activation = read_hidden_act(c_);
    const std::string p = "model.language_model.layers." + std::to_string(layer) + ".mlp.";
    s.router_weight = p + "gate.weight";
    s.experts_prefix = p + "experts.";
    s.storage = ExpertStorage::kFusedConcatInOut;
  }

  int64_t experts_;
};

}  // namespace

HYMOE_MODEL_FAMILY(qwen3_vl_moe) {
  return std::make_unique<Qwen3VlMoe>(text_config_of(config, "qwen3_vl_moe"));
}

}  // namespace hymoe
