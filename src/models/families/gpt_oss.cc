// gpt-oss (gpt-oss-20b/120b): every layer MoE; router with bias; top-k on the logits, softmax over the K chosen;
// experts fused per layer (gate_up_proj (E, D, 2I) with gate/up columns interleaved, down_proj (E, I, D), used as
// x @ W, with biases), or MXFP4 blocks in the release; the clamped SwiGLU (alpha swiglu_alpha, limit swiglu_limit).
// hidden_act is not read: GptOssExperts computes its own gate, whatever the config says.
// OpenAI's privacy filter (openai_privacy_filter, a bidirectional token classifier) runs the same block per token under
// the same tensor names, but with gate and up concatenated (columns [0, I) gate, [I, 2I) up, and so their biases); its
// router's weights divided by top_k and its output multiplied by top_k cancel.
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

class GptOss final : public FamilyBase {
 public:
  GptOss(const HfConfig& c, std::string_view name, bool concatenated)
      : FamilyBase(c, name, read_common_fields(c, {"num_experts_per_tok", "experts_per_token"})),
        concatenated_(concatenated) {}

 private:
  void fill(int64_t layer, MoELayerSpec& s) const override {
    s.hidden = c_.integer({"intermediate_size"});
    s.num_experts = c_.integer({"num_local_experts", "num_experts"});
    s.router.scoring = RouterScoring::kSoftmaxOverTopKLogits;
    s.router.logit_bias = true;
    const std::string p = layer_prefix(layer) + "mlp.";
    s.router_weight = p + "router.weight";
    s.router_bias = p + "router.bias";
    s.activation = ExpertActivation::kClampedSwiGLU;
    s.swiglu_alpha = c_.number_or({"swiglu_alpha"}, 1.702);
    s.swiglu_limit = c_.number_or({"swiglu_limit"}, 7.0);
    s.storage = concatenated_ ? ExpertStorage::kFusedConcatInOut : ExpertStorage::kFusedInterleavedInOut;
    s.expert_biases = concatenated_;  // the interleaved storage always has them
    s.experts_prefix = p + "experts.";
  }

  bool concatenated_;
};

}  // namespace

HYMOE_MODEL_FAMILY(gpt_oss) { return std::make_unique<GptOss>(config, "gpt_oss", false); }
HYMOE_MODEL_FAMILY(openai_privacy_filter) {
  return std::make_unique<GptOss>(config, "openai_privacy_filter", true);
}

}  // namespace hymoe
