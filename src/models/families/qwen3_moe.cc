// Qwen3-MoE (Qwen3-30B-A3B, Qwen3-235B-A22B): softmax top-k, renormalized with norm_topk_prob (true in the
// releases), no shared expert; experts run act(gate x) * up x with act = hidden_act. Released configs say
// num_experts, transformers 5 writes num_local_experts.
// Qwen3-Omni-MoE (qwen3_omni_moe) runs the same block in its thinker's language model: the keys under
// thinker_config.text_config (Qwen3OmniMoeTextConfig: norm_topk_prob true by default), the tensors under
// thinker.model.layers.N.mlp, one per expert as save_pretrained writes them. The talker's MoE blocks are not read.
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

class Qwen3Moe final : public FamilyBase {
 public:
  Qwen3Moe(const HfConfig& c, std::string_view name, bool norm_default, std::string layers)
      : FamilyBase(c, name, read_common_fields(c)),
        experts_(c.integer({"num_experts", "num_local_experts"})),
        norm_default_(norm_default),
        layers_(std::move(layers)) {}

 private:
  std::string dense_reason(int64_t layer) const override { return qwen_dense_reason(c_, layer, experts_); }
  void fill(int64_t layer, MoELayerSpec& s) const override {
    fill_qwen_routed(c_, layer, experts_, s, norm_default_, layers_);
  }

  int64_t experts_;
  bool norm_default_;
  std::string layers_;  // "model.layers." or the thinker's "thinker.model.layers."
};

}  // namespace

HYMOE_MODEL_FAMILY(qwen3_moe) {
  return std::make_unique<Qwen3Moe>(config, "qwen3_moe", false, "model.layers.");
}

HYMOE_MODEL_FAMILY(qwen3_omni_moe) {
  std::optional<HfConfig> thinker = config.object("thinker_config");
  std::optional<HfConfig> text = thinker ? thinker->object("text_config") : std::nullopt;
  if (!text)
    fail(config.label(), ": missing object 'thinker_config.text_config' (the thinker's language model keys of a "
         "qwen3_omni_moe model)");
  return std::make_unique<Qwen3Moe>(*text, "qwen3_omni_moe", true, "thinker.model.layers.");
}

}  // namespace hymoe
