// Cohere2-MoE (cohere2_moe): Cohere2MoeTopKRouter takes the top-k logits, then weighs them by expert_selection_fn:
// "softmax" (the default) a float32 softmax over those k (not renormalized), or "sigmoid" their sigmoids divided by
// their sum where norm_topk_prob (default true). Experts of intermediate_size (Cohere2MoeConfig has no
// moe_intermediate_size) run act(gate x) * up x. num_shared_experts (default 0) shared experts form one ungated MLP
// of intermediate_size * num_shared_experts, combined by shared_expert_combination_strategy: "average" (default)
// (routed + shared) / 2, or "sum". A layer is MoE unless mlp_layer_types says "dense" (absent: the config fills it
// from first_k_dense_replace, default 0: every layer). Tensors under model.layers.N.mlp: gate.weight, one tensor
// per expert, shared_experts.*, as save_pretrained writes them.
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

class Cohere2Moe final : public FamilyBase {
 public:
  explicit Cohere2Moe(const HfConfig& c) : FamilyBase(c, "cohere2_moe", read_common_fields(c)) {
    const int64_t n = f_.num_layers;
    const int64_t first_dense = c.integer_or({"first_k_dense_replace"}, 0);
    std::vector<std::string> fallback;
    for (int64_t l = 0; l < n; ++l) fallback.push_back(l < first_dense ? "dense" : "sparse");
    layer_types_ = read_layer_types(c, "cohere2_moe", n, std::move(fallback));
    selection_ = c.string_or({"expert_selection_fn"}, "softmax");
    if (selection_ != "softmax" && selection_ != "sigmoid")
      fail(c.label(), ": 'expert_selection_fn' is '", selection_, "'; cohere2_moe knows \"softmax\" and \"sigmoid\"");
    combination_ = c.string_or({"shared_expert_combination_strategy"}, "average");
    if (combination_ != "average" && combination_ != "sum")
      fail(c.label(), ": 'shared_expert_combination_strategy' is '", combination_,
           "'; cohere2_moe knows \"average\" and \"sum\"");
  }

 private:
  std::string dense_reason(int64_t layer) const override {
    return layer_types_[static_cast<size_t>(layer)] == "dense" ? "mlp_layer_types[" + std::to_string(layer) + "] is \"dense\""
                                                               : "";
  }
  void fill(int64_t layer, MoELayerSpec& s) const override {
    s.hidden = c_.integer({"intermediate_size"});
    s.num_experts = c_.integer_or({"num_experts"}, 8);
    if (selection_ == "softmax") {
      s.router.scoring = RouterScoring::kSoftmaxOverTopKLogits;
    } else {
      s.router.scoring = RouterScoring::kSigmoid;
      s.router.normalize = c_.boolean_or({"norm_topk_prob"}, true);
    }
    s.activation = read_hidden_act(c_);
    const std::string p = layer_prefix(layer) + "mlp.";
    s.router_weight = p + "gate.weight";
    s.experts_prefix = p + "experts.";
    s.shared.hidden = s.hidden * c_.integer_or({"num_shared_experts"}, 0);
    s.shared.prefix = p + "shared_experts.";
    s.shared.average = combination_ == "average";
  }

  std::vector<std::string> layer_types_;
  std::string selection_, combination_;
};

}  // namespace

HYMOE_MODEL_FAMILY(cohere2_moe) {
  return std::make_unique<Cohere2Moe>(config);
}

}  // namespace hymoe
