// DeepSeek-V2 / V2-Lite: float32 router, softmax over E; topk_method "greedy" or "group_limited_greedy" (groups
// scored by their best probability, experts of the other groups set to 0.0); weights = p * routed_scaling_factor
// with no renormalization (transformers ignores norm_topk_prob for V2); one ungated shared expert of
// moe_intermediate_size * n_shared_experts (default 2, transformers'), without biases (mlp_bias=true is refused);
// routed and shared experts run act(gate x) * up x with act = hidden_act. Layers >= first_k_dense_replace are MoE
// (moe_layer_freq, 1 in every release, is ignored as transformers does).
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

class DeepseekV2 final : public FamilyBase {
 public:
  explicit DeepseekV2(const HfConfig& c) : FamilyBase(c, "deepseek_v2", read_common_fields(c)), first_moe_(c.integer_or({"first_k_dense_replace"}, 0)) {}

 private:
  std::string dense_reason(int64_t layer) const override {
    return layer >= first_moe_ ? "" : "first_k_dense_replace=" + std::to_string(first_moe_);
  }
  void fill(int64_t layer, MoELayerSpec& s) const override {
    s.hidden = c_.integer({"moe_intermediate_size"});
    s.num_experts = c_.integer({"n_routed_experts"});
    RouterOptions& r = s.router;
    r.scoring = RouterScoring::kSoftmax;
    const std::string method = c_.string_or({"topk_method"}, "greedy");
    if (method == "group_limited_greedy") {
      r.group_limited = true;
      r.n_group = c_.integer({"n_group"});
      r.top_group = c_.integer({"topk_group"});
      r.group_score = GroupScore::kMax;
      r.excluded_score = 0.0f;
    } else if (method != "greedy") {
      fail(c_.label(), ": topk_method='", method, "' is not one DeepSeek-V2 knows (greedy, group_limited_greedy)");
    }
    r.normalize = false;
    r.scaling_factor = c_.number_or({"routed_scaling_factor"}, 1.0);
    s.activation = read_hidden_act(c_);
    const std::string p = layer_prefix(layer) + "mlp.";
    s.router_weight = p + "gate.weight";
    s.experts_prefix = p + "experts.";
    s.shared.hidden = s.hidden * c_.integer_or({"n_shared_experts"}, 2);  // transformers' default
    s.shared.prefix = p + "shared_experts.";
    // DeepseekV2MLP, the shared experts, gives its three projections biases when mlp_bias; no release has them.
    if (s.shared.hidden > 0 && c_.boolean_or({"mlp_bias"}, false))
      fail(c_.label(), ": mlp_bias=true (biases on the shared experts' projections) is not supported; hymoe runs "
           "DeepSeek-V2 shared experts without biases, as every release stores them");
  }

  int64_t first_moe_;
};

}  // namespace

HYMOE_MODEL_FAMILY(deepseek_v2) { return std::make_unique<DeepseekV2>(config); }

}  // namespace hymoe
