// Qwen3.5-MoE (qwen3_5_moe: Qwen3.5-35B-A3B, 397B-A17B), the language model's MoE blocks: the keys are those of
// config.json's text_config; every layer is MoE (Qwen3_5MoeDecoderLayer has no dense rule, whatever its attention
// kind); softmax top-k, always renormalized (Qwen3_5MoeTopKRouter has no norm_topk_prob); one shared expert of
// shared_expert_intermediate_size (Qwen3_5MoeTextConfig's default 512) scaled per token by
// sigmoid(shared_expert_gate x), as Qwen2-MoE's. save_pretrained writes the experts one per expert
// (experts.E.gate_proj / up_proj / down_proj) under model.language_model.layers.N.mlp. The text-only model
// (qwen3_5_moe_text, Qwen3_5MoeForCausalLM) has the same keys at the top level and its layers under model.layers.
// Qwen4-Exp (qwen4_exp, qwen4_exp_text) is the same block whose router renormalizes only with norm_topk_prob
// (default true), under Qwen4ExpTextConfig's defaults (512 experts, 512-wide experts and shared expert).
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

class Qwen3_5Moe final : public FamilyBase {
 public:
  Qwen3_5Moe(const HfConfig& text, std::string_view name, std::string layers, int64_t default_experts = 256,
             bool reads_norm = false)
      : FamilyBase(text, name, read_common_fields(text)),
        experts_(text.integer_or({"num_experts"}, default_experts)),
        layers_(std::move(layers)),
        reads_norm_(reads_norm) {}

 private:
  void fill(int64_t layer, MoELayerSpec& s) const override {
    s.hidden = c_.integer_or({"moe_intermediate_size"}, 512);
    s.num_experts = experts_;
    s.router.scoring = RouterScoring::kSoftmax;
    s.router.normalize = !reads_norm_ || c_.boolean_or({"norm_topk_prob"}, true);
    s.activation = read_hidden_act(c_);
    const std::string p = layers_ + std::to_string(layer) + ".mlp.";
    s.router_weight = p + "gate.weight";
    s.experts_prefix = p + "experts.";
    s.shared.hidden = c_.integer_or({"shared_expert_intermediate_size"}, 512);
    s.shared.prefix = p + "shared_expert.";
    s.shared.gate_weight = p + "shared_expert_gate.weight";
  }

  int64_t experts_;
  std::string layers_;  // "model.language_model.layers." or "model.layers."
  bool reads_norm_;     // qwen4_exp: norm_topk_prob (default true); qwen3_5_moe always renormalizes
};

}  // namespace

HYMOE_MODEL_FAMILY(qwen3_5_moe) {
  return std::make_unique<Qwen3_5Moe>(text_config_of(config, "qwen3_5_moe"), "qwen3_5_moe", "model.language_model.layers.");
}
HYMOE_MODEL_FAMILY(qwen3_5_moe_text) {
  return std::make_unique<Qwen3_5Moe>(config, "qwen3_5_moe_text", "model.layers.");
}
HYMOE_MODEL_FAMILY(qwen4_exp) {
  return std::make_unique<Qwen3_5Moe>(text_config_of(config, "qwen4_exp"), "qwen4_exp", "model.language_model.layers.",
                                     512, true);
}
HYMOE_MODEL_FAMILY(qwen4_exp_text) {
  return std::make_unique<Qwen3_5Moe>(config, "qwen4_exp_text", "model.layers.", 512, true);
}

}  // namespace hymoe
