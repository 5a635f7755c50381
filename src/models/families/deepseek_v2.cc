// DeepSeek-V2 / V2-Lite: float32 router, softmax over E; topk_method "greedy" or "group_limited_greedy" (groups
// scored by their best probability, experts of the other groups set to 0.0); weights = p * routed_scaling_factor
// with no renormalization (transformers ignores norm_topk_prob for V2); one ungated shared expert of
// moe_intermediate_size * n_shared_experts (default 2, transformers'), without biases (mlp_bias=true is refused);
// routed and shared experts run act(gate x) * up x with act = hidden_act. Layers >= first_k_dense_replace are MoE
// (moe_layer_freq, 1 in every release, is ignored as transformers does).
// The OCR models run the same block in their language model, keys under text_config, tensors under model.layers.:
// DeepSeek-OCR-2 (deepseek_ocr2), MoE where mlp_layer_types says "sparse" (required: its config class derives no
// default); Unlimited-OCR (unlimited_ocr), keys under text_config or, in its original configs, language_config,
// mlp_layer_types derived from first_k_dense_replace (default 1) when absent, n_group and topk_group defaulting to 1.
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

// What differs between the families that run this block.
struct V2Defaults {
  const char* family;
  enum class Keys { kTopLevel, kTextConfig, kTextOrLanguageConfig } keys = Keys::kTopLevel;
  enum class Layers { kFirstDense, kLayerTypesRequired, kLayerTypesOrFirstDense } layers = Layers::kFirstDense;
  int64_t first_k_dense_replace = 0;  // its default
  bool groups_default_one = false;    // n_group / topk_group default 1 (else group_limited_greedy requires them)
};
constexpr V2Defaults kDeepseekV2{.family = "deepseek_v2"};
constexpr V2Defaults kDeepseekOcr2{.family = "deepseek_ocr2", .keys = V2Defaults::Keys::kTextConfig,
                                   .layers = V2Defaults::Layers::kLayerTypesRequired};
constexpr V2Defaults kUnlimitedOcr{.family = "unlimited_ocr", .keys = V2Defaults::Keys::kTextOrLanguageConfig,
                                   .layers = V2Defaults::Layers::kLayerTypesOrFirstDense, .first_k_dense_replace = 1,
                                   .groups_default_one = true};

// The object of config.json the block's keys sit in.
HfConfig keys_of(const HfConfig& c, const V2Defaults& d) {
  if (d.keys == V2Defaults::Keys::kTopLevel) return c;
  if (d.keys == V2Defaults::Keys::kTextOrLanguageConfig && !c.has("text_config") && c.has("language_config"))
    return *c.object("language_config");
  return text_config_of(c, d.family);
}

class DeepseekV2 final : public FamilyBase {
 public:
  DeepseekV2(const HfConfig& c, const V2Defaults& d) : FamilyBase(c, d.family, read_common_fields(c)), d_(d) {
    const int64_t n = c.integer({"num_hidden_layers"});
    const int64_t first_moe = c.integer_or({"first_k_dense_replace"}, d.first_k_dense_replace);
    if (d.layers == V2Defaults::Layers::kFirstDense) {
      for (int64_t l = 0; l < n; ++l) layer_types_.push_back(l < first_moe ? "dense" : "sparse");
      rule_ = "first_k_dense_replace=" + std::to_string(first_moe);
      return;
    }
    if (d.layers == V2Defaults::Layers::kLayerTypesRequired && !c.has("mlp_layer_types"))
      fail(c.label(), ": missing key 'mlp_layer_types' (", d.family, " decides its MoE layers by it, \"dense\" or "
           "\"sparse\" per layer, and its config class derives no default)");
    std::vector<std::string> fallback;
    for (int64_t l = 0; l < n; ++l) fallback.push_back(l < first_moe ? "dense" : "sparse");
    layer_types_ = read_layer_types(c, d.family, n, std::move(fallback), {"dense", "sparse"});
  }

 private:
  std::string dense_reason(int64_t layer) const override {
    if (layer_types_[static_cast<size_t>(layer)] == "sparse") return "";
    return rule_.empty() ? "mlp_layer_types[" + std::to_string(layer) + "] is not \"sparse\"" : rule_;
  }
  void fill(int64_t layer, MoELayerSpec& s) const override {
    s.hidden = c_.integer({"moe_intermediate_size"});
    s.num_experts = c_.integer({"n_routed_experts"});
    RouterOptions& r = s.router;
    r.scoring = RouterScoring::kSoftmax;
    const std::string method = c_.string_or({"topk_method"}, "greedy");
    if (method == "group_limited_greedy") {
      r.group_limited = true;
      r.n_group = d_.groups_default_one ? c_.integer_or({"n_group"}, 1) : c_.integer({"n_group"});
      r.top_group = d_.groups_default_one ? c_.integer_or({"topk_group"}, 1) : c_.integer({"topk_group"});
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

  V2Defaults d_;
  std::vector<std::string> layer_types_;  // "dense" or "sparse" per layer
  std::string rule_;                      // the dense-layer rule's words where it is first_k_dense_replace
};

}  // namespace

HYMOE_MODEL_FAMILY(deepseek_v2) { return std::make_unique<DeepseekV2>(config, kDeepseekV2); }
HYMOE_MODEL_FAMILY(deepseek_ocr2) {
  return std::make_unique<DeepseekV2>(keys_of(config, kDeepseekOcr2), kDeepseekOcr2);
}
HYMOE_MODEL_FAMILY(unlimited_ocr) {
  return std::make_unique<DeepseekV2>(keys_of(config, kUnlimitedOcr), kUnlimitedOcr);
}

}  // namespace hymoe
