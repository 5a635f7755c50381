// The model-family registry (a table of the built-ins that CMake generates from families/*.cc, plus run-time
// registrations) and the helpers the family files share.
#include <algorithm>
#include <map>
#include <mutex>
#include <string_view>
#include <utility>

#include "hymoe/error.h"
#include "hymoe/model.h"
#include "models/family_common.h"

namespace hymoe {

// Every HYMOE_MODEL_FAMILY definition in families/*.cc, collected by CMake into model_families.inc as one
// HYMOE_FAMILY_ENTRY(model_type) line each: declared here, then named in the table.
#define HYMOE_FAMILY_ENTRY(NAME) HYMOE_MODEL_FAMILY(NAME);
#include "model_families.inc"
#undef HYMOE_FAMILY_ENTRY

namespace {

struct FamilyRegistry {
  std::mutex mutex;
  std::map<std::string, ModelFamilyFactory> entries{
#define HYMOE_FAMILY_ENTRY(NAME) {#NAME, make_##NAME##_family},
#include "model_families.inc"
#undef HYMOE_FAMILY_ENTRY
  };
};

FamilyRegistry& registry() {
  static FamilyRegistry r;
  return r;
}

// transformers' ACT2FN names hymoe runs on the experts' gate projection, in the order errors list them. Aliases
// are the same function: gelu_python writes gelu's erf formula out; gelu_python_tanh and gelu_new write out the tanh
// formula PyTorch's gelu(approximate="tanh") computes; gelu_fast is that formula with sqrt(2/pi) rounded to
// 0.7978845608, 4e-12 relative, far below float32's rounding.
constexpr std::pair<std::string_view, ExpertActivation> kHiddenActs[] = {
    {"silu", ExpertActivation::kSwiGLU},
    {"swish", ExpertActivation::kSwiGLU},
    {"gelu", ExpertActivation::kGeGLU},
    {"gelu_python", ExpertActivation::kGeGLU},
    {"gelu_pytorch_tanh", ExpertActivation::kGeGLUTanh},
    {"gelu_python_tanh", ExpertActivation::kGeGLUTanh},
    {"gelu_new", ExpertActivation::kGeGLUTanh},
    {"gelu_fast", ExpertActivation::kGeGLUTanh},
    {"relu", ExpertActivation::kReGLU},
};

std::string joined_names() {
  std::string out;
  for (const auto& name : model_family_names()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

void register_model_family(const std::string& model_type, ModelFamilyFactory factory) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  if (model_type.empty()) fail("model family registry: empty model_type");
  if (!r.entries.emplace(model_type, std::move(factory)).second)
    fail("model family registry: '", model_type, "' is already registered");
}

std::vector<std::string> model_family_names() {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::string> out;
  for (const auto& [name, f] : r.entries) out.push_back(name);
  return out;
}

std::unique_ptr<ModelFamily> make_model_family(const HfConfig& config) {
  const std::string type = config.string({"model_type"});
  ModelFamilyFactory factory;
  {
    auto& r = registry();
    std::lock_guard lock(r.mutex);
    auto it = r.entries.find(type);
    if (it != r.entries.end()) factory = it->second;
  }
  if (!factory) fail(config.label(), ": model_type '", type, "' is not a supported family (known: ", joined_names(), ")");
  return factory(config);
}

std::string expert_activation_name(ExpertActivation a) {
  switch (a) {
    case ExpertActivation::kSwiGLU: return "SwiGLU";
    case ExpertActivation::kClampedSwiGLU: return "clamped SwiGLU";
    case ExpertActivation::kLimitedSwiGLU: return "limited SwiGLU";
    case ExpertActivation::kSiluClampedSwiGLU: return "SwiGLU clamped after the silu";
    case ExpertActivation::kGeGLU: return "GeGLU (exact erf GELU)";
    case ExpertActivation::kGeGLUTanh: return "GeGLU (tanh-approximate GELU)";
    case ExpertActivation::kReGLU: return "ReGLU";
    case ExpertActivation::kSquaredReLU: return "squared ReLU, no gate";
  }
  return "?";
}

namespace family_detail {

ExpertActivation activation_named(const HfConfig& c, std::string_view key, const std::string& act) {
  std::string known;
  for (const auto& [name, activation] : kHiddenActs) {
    if (name == act) return activation;
    known += (known.empty() ? "" : ", ") + std::string(name);
  }
  fail(c.label(), ": ", key, "='", act, "' is not an expert activation hymoe runs (supported: ", known,
       "); transformers applies ACT2FN[", key, "] to the experts' gate projection");
}

ExpertActivation read_hidden_act(const HfConfig& c) {
  return activation_named(c, "hidden_act", c.string_or({"hidden_act"}, "silu"));
}

CommonFields read_common_fields(const HfConfig& c, std::initializer_list<const char*> top_k_keys) {
  CommonFields f;
  f.dim = c.integer({"hidden_size"});
  f.top_k = c.integer(top_k_keys);
  f.num_layers = c.integer({"num_hidden_layers"});
  if (f.num_layers <= 0) fail(c.label(), ": num_hidden_layers=", f.num_layers, " must be positive");
  return f;
}

void check_layer_in_range(const HfConfig& c, std::string_view family, int64_t layer, int64_t num_layers) {
  if (layer < 0 || layer >= num_layers)
    fail(c.label(), ": layer ", layer, " is out of range for this ", family, " model (num_hidden_layers=", num_layers,
         ", layers 0..", num_layers - 1, ")");
}

void fail_dense_layer(const HfConfig& c, std::string_view family, int64_t layer, const std::string& rule) {
  fail(c.label(), ": layer ", layer, " of this ", family, " model is a dense MLP, not MoE (", rule, ")");
}

std::string qwen_dense_reason(const HfConfig& c, int64_t layer, int64_t num_experts,
                              std::vector<int64_t> mlp_only_default) {
  const std::vector<int64_t> mlp_only = c.integer_list_or("mlp_only_layers", std::move(mlp_only_default));
  const int64_t step = c.integer_or({"decoder_sparse_step"}, 1);
  if (step <= 0) fail(c.label(), ": decoder_sparse_step=", step, " must be positive");
  if (std::find(mlp_only.begin(), mlp_only.end(), layer) != mlp_only.end()) return "listed in mlp_only_layers";
  if (num_experts <= 0) return "num_experts is 0";
  if ((layer + 1) % step != 0) return "(layer + 1) % decoder_sparse_step=" + std::to_string(step) + " != 0";
  return "";
}

void fill_qwen_routed(const HfConfig& c, int64_t layer, int64_t num_experts, MoELayerSpec& s, bool norm_default,
                      const std::string& layers) {
  s.hidden = c.integer({"moe_intermediate_size"});
  s.num_experts = num_experts;
  s.router.scoring = RouterScoring::kSoftmax;
  s.router.normalize = c.boolean_or({"norm_topk_prob"}, norm_default);
  s.activation = read_hidden_act(c);
  const std::string p = layers + std::to_string(layer) + ".mlp.";
  s.router_weight = p + "gate.weight";
  s.experts_prefix = p + "experts.";
}

std::vector<std::string> read_layer_types(const HfConfig& c, std::string_view family, int64_t num_layers,
                                          std::vector<std::string> fallback,
                                          std::initializer_list<std::string_view> known, bool padded) {
  std::vector<std::string> types = c.string_list_or("mlp_layer_types", std::move(fallback));
  const auto count = static_cast<int64_t>(types.size());
  if (count < num_layers || (!padded && count != num_layers))
    fail(c.label(), ": 'mlp_layer_types' has ", types.size(), " entries, expected num_hidden_layers = ", num_layers);
  if (known.size() == 0) return types;
  std::string names;  // "a", "b" and "c"
  size_t i = 0;
  for (std::string_view k : known) {
    if (i > 0) names.append(i + 1 == known.size() ? " and " : ", ");
    names.append("\"").append(k).append("\"");
    ++i;
  }
  for (int64_t l = 0; l < num_layers; ++l) {
    const std::string& t = types[static_cast<size_t>(l)];
    if (std::find(known.begin(), known.end(), t) == known.end())
      fail(c.label(), ": 'mlp_layer_types' holds '", t, "'; ", family, " knows ", names);
  }
  return types;
}

std::string layer_prefix(int64_t layer) { return "model.layers." + std::to_string(layer) + "."; }

HfConfig text_config_of(const HfConfig& c, std::string_view family) {
  std::optional<HfConfig> text = c.object("text_config");
  if (!text) fail(c.label(), ": missing object 'text_config' (the language model's keys of a ", family, " model)");
  return *text;
}

MoELayerSpec checked(const HfConfig& c, MoELayerSpec s) {
  auto positive = [&](const char* what, int64_t v) {
    if (v <= 0) fail(c.label(), ": ", what, "=", v, " must be positive");
  };
  positive("hidden_size", s.dim);
  positive("expert intermediate size", s.hidden);
  positive("number of experts", s.num_experts);
  positive("num_experts_per_tok", s.top_k);
  if (s.top_k > s.num_experts)
    fail(c.label(), ": num_experts_per_tok=", s.top_k, " exceeds the ", s.num_experts, " experts");
  const RouterOptions& r = s.router;
  if (r.group_limited) {
    if (r.n_group <= 0 || s.num_experts % r.n_group != 0)
      fail(c.label(), ": n_group=", r.n_group, " must divide the ", s.num_experts, " experts");
    if (r.top_group <= 0 || r.top_group > r.n_group)
      fail(c.label(), ": topk_group=", r.top_group, " must be in 1..n_group=", r.n_group);
    if (r.group_score == GroupScore::kTop2Sum && s.num_experts / r.n_group < 2)
      fail(c.label(), ": n_group=", r.n_group, " leaves fewer than 2 experts per group (the group score sums the top 2)");
    if (r.top_group * (s.num_experts / r.n_group) < s.top_k)
      fail(c.label(), ": topk_group=", r.top_group, " groups of ", s.num_experts / r.n_group,
           " experts cannot supply num_experts_per_tok=", s.top_k);
  }
  if (s.shared.hidden < 0) fail(c.label(), ": shared expert size ", s.shared.hidden, " is negative");
  return s;
}

}  // namespace family_detail
}  // namespace hymoe
