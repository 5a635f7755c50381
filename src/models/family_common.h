// Helpers the family files share: the fields every family reads the same way, and layer-number checks. Kept
// to plain functions so each family file reads top to bottom as its own rules.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hymoe/error.h"
#include "hymoe/model.h"

namespace hymoe::family_detail {

// hidden_size, num_experts_per_tok and num_hidden_layers, checked positive.
struct CommonFields {
  int64_t dim = 0;
  int64_t top_k = 0;
  int64_t num_layers = 0;
};
CommonFields read_common_fields(const HfConfig& c, std::initializer_list<const char*> top_k_keys = {"num_experts_per_tok"});

// An error unless 0 <= layer < num_layers.
void check_layer_in_range(const HfConfig& c, std::string_view family, int64_t layer, int64_t num_layers);
// An error naming the family, the layer and the rule that makes it dense.
[[noreturn]] void fail_dense_layer(const HfConfig& c, std::string_view family, int64_t layer, const std::string& rule);

// The expert MLP's activation from hidden_act (transformers' default "silu" when absent): the names of
// transformers' ACT2FN that hymoe runs on the gate projection; any other is an error naming config.json, the key
// and the supported names.
ExpertActivation read_hidden_act(const HfConfig& c);
// The same for an activation name read under another key (DBRX's ffn_config.ffn_act_fn.name), named in errors.
ExpertActivation activation_named(const HfConfig& c, std::string_view key, const std::string& act);

// Qwen2/3-MoE's rule: layer i is MoE iff i is not in mlp_only_layers, num_experts > 0 and
// (i + 1) % decoder_sparse_step == 0. Returns "" for MoE, else the rule that makes it dense. mlp_only_layers
// defaults to `mlp_only_default` where the config class has one (Flint: [0, 1]).
std::string qwen_dense_reason(const HfConfig& c, int64_t layer, int64_t num_experts,
                              std::vector<int64_t> mlp_only_default = {});

// The routed half of a Qwen2/3-MoE layer: softmax router, norm_topk_prob (default `norm_default`), hidden_act,
// the gate and experts under <layers><layer>.mlp.
void fill_qwen_routed(const HfConfig& c, int64_t layer, int64_t num_experts, MoELayerSpec& s, bool norm_default = false,
                      const std::string& layers = "model.layers.");

// config.json's mlp_layer_types, one kind per layer, or `fallback` (one per layer) where it is absent: an error naming
// the key for fewer entries than num_layers, or more unless `padded` (legacy lists that run on with MTP layers'
// entries; only the first num_layers are the model's), and for an entry of those outside `known`, when given.
std::vector<std::string> read_layer_types(const HfConfig& c, std::string_view family, int64_t num_layers,
                                          std::vector<std::string> fallback,
                                          std::initializer_list<std::string_view> known = {}, bool padded = false);

// "model.layers.<layer>."
std::string layer_prefix(int64_t layer);

// config.json's text_config, where a multimodal model keeps its language model's keys; an error naming the family
// when it is absent.
HfConfig text_config_of(const HfConfig& c, std::string_view family);

// The checks every spec passes before it is handed out: positive sizes, top_k <= num_experts, groups divide E.
MoELayerSpec checked(const HfConfig& c, MoELayerSpec spec);

// What every family does the same way: range checks, the dense-layer error, the common fields of the spec and the
// final checks. A family file supplies its name, its dense-layer rule and fill(), which sets the rest.
class FamilyBase : public ModelFamily {
 public:
  FamilyBase(const HfConfig& c, std::string_view name, CommonFields f) : c_(c), f_(f), name_(name) {}
  std::string_view name() const override { return name_; }
  int64_t num_layers() const override { return f_.num_layers; }
  bool is_moe_layer(int64_t layer) const override {
    check_layer_in_range(c_, name_, layer, f_.num_layers);
    return dense_reason(layer).empty();
  }
  MoELayerSpec moe_layer(int64_t layer) const override {
    check_layer_in_range(c_, name_, layer, f_.num_layers);
    if (const std::string why = dense_reason(layer); !why.empty()) fail_dense_layer(c_, name_, layer, why);
    MoELayerSpec s;
    s.family = name_;
    s.layer = layer;
    s.dim = f_.dim;
    s.top_k = f_.top_k;
    fill(layer, s);
    return checked(c_, s);
  }

 protected:
  // "" when `layer` is MoE, else the rule that makes it dense. Default: every layer is MoE.
  virtual std::string dense_reason(int64_t /*layer*/) const { return ""; }
  // Sizes, router options, tensor names, expert activation and shared expert of MoE layer `layer`.
  virtual void fill(int64_t layer, MoELayerSpec& s) const = 0;

  HfConfig c_;
  CommonFields f_;
  std::string name_;
};

}  // namespace hymoe::family_detail

// Declares (with `;`) or defines (with a body reading `config`) the factory of the transformers model_type NAME, in
// namespace hymoe. A family is registered by its definition alone: CMake reads every line of families/*.cc that
// starts with this macro and writes the registry's table from them (src/models/CMakeLists.txt), so the family's file
// is the only place that names it.
#define HYMOE_MODEL_FAMILY(NAME) std::unique_ptr<ModelFamily> make_##NAME##_family(const HfConfig& config)
