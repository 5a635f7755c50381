// Qwen2-MoE (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): softmax top-k, renormalized only with norm_topk_prob (false in
// the releases), plus one shared expert of shared_expert_intermediate_size (default 5632, transformers') scaled per
// token by sigmoid(shared_expert_gate x); routed and shared experts run act(gate x) * up x with act = hidden_act.
// MoE layers follow decoder_sparse_step and mlp_only_layers. Qwen3-Next (qwen3_next) is the same block
// (Qwen3NextSparseMoeBlock) under Qwen3NextConfig's defaults: shared_expert_intermediate_size 512, norm_topk_prob
// true; its other layers' linear attention does not touch the MoE block.
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

// The config class's defaults for keys a config.json may leave out.
struct QwenSharedDefaults {
  const char* family;
  int64_t shared_expert_intermediate_size;
  bool norm_topk_prob;
};
constexpr QwenSharedDefaults kQwen2Moe{"qwen2_moe", 5632, false};
constexpr QwenSharedDefaults kQwen3Next{"qwen3_next", 512, true};

class Qwen2Moe final : public FamilyBase {
 public:
  Qwen2Moe(const HfConfig& c, const QwenSharedDefaults& d)
      : FamilyBase(c, d.family, read_common_fields(c)), d_(d), experts_(c.integer({"num_experts"})) {}

 private:
  std::string dense_reason(int64_t layer) const override { return qwen_dense_reason(c_, layer, experts_); }
  void fill(int64_t layer, MoELayerSpec& s) const override {
    fill_qwen_routed(c_, layer, experts_, s, d_.norm_topk_prob);
    const std::string p = layer_prefix(layer) + "mlp.";
    // The config class's default builds a shared expert when the key is absent (0: none).
    s.shared.hidden = c_.integer_or({"shared_expert_intermediate_size"}, d_.shared_expert_intermediate_size);
    s.shared.prefix = p + "shared_expert.";
    s.shared.gate_weight = p + "shared_expert_gate.weight";
  }

  QwenSharedDefaults d_;
  int64_t experts_;
};

}  // namespace

HYMOE_MODEL_FAMILY(qwen2_moe) {
  return std::make_unique<Qwen2Moe>(config, kQwen2Moe);
}
HYMOE_MODEL_FAMILY(qwen3_next) {
  return std::make_unique<Qwen2Moe>(config, kQwen3Next);
}

}  // namespace hymoe
