// DeepSeek-V3 / R1 and V3-architecture models (Moonlight): float32 router, sigmoid scores; the
// e_score_correction_bias is added for choosing only; n_group groups scored by the sum of their two best biased
// scores, the topk_group best kept (others -inf); weights are the unbiased scores, renormalized with
// norm_topk_prob (+1e-20), then always times routed_scaling_factor; one ungated shared expert of
// moe_intermediate_size * n_shared_experts; routed and shared experts run act(gate x) * up x with act = hidden_act.
// Absent keys take DeepseekV3Config's defaults (first_k_dense_replace 3, n_group 8, topk_group 4, n_shared_experts 1,
// norm_topk_prob true, routed_scaling_factor 2.5). scoring_func and topk_method are ignored, as transformers does.
// GLM-4.5/4.6 (glm4_moe) is the same block (Glm4MoeTopkRouter computes what DeepseekV3TopkRouter does, with the same
// tensor names) under Glm4MoeConfig's defaults: first_k_dense_replace 1, n_group 1, topk_group 1,
// routed_scaling_factor 1.0. dots.llm1 (dots1) too, under Dots1Config's: first_k_dense_replace 0, n_group 1,
// topk_group 1, norm_topk_prob false, routed_scaling_factor 1.0, and no default for n_shared_experts (transformers
// cannot build the block without it, so hymoe requires it). DeepSeek-V3.2 (deepseek_v32) and GLM-4.7-Flash
// (glm4_moe_lite) run the same block, a layer being MoE where mlp_layer_types says "sparse" (their configs fill the
// list from first_k_dense_replace, or as ["dense"] + ["sparse"] * (n - 1) for glm4_moe_lite, when it is absent).
// Solar Open (solar_open) is V3's block on every layer (SolarOpenConfig has no dense-layer rule) under its defaults
// (n_group 1, topk_group 1, routed_scaling_factor 1.0); EXAONE-MoE (exaone_moe) under ExaoneMoeConfig's
// (num_experts and num_shared_experts for the counts, mlp_layer_types from first_k_dense_replace 1, scale 2.5), its
// checkpoints holding the bias as mlp.e_score_correction_bias.
// GLM-4.5V (glm4v_moe) runs glm4_moe's block in its language model: keys under text_config, tensors under
// model.language_model.layers. MiMo-V2-Flash (mimo_v2_flash): V3's router without a shared expert, MoE where
// mlp_layer_types says "sparse" (["dense"] + ["sparse"] * (n - 1) when absent), a null routed_scaling_factor 1.0.
// Kimi-Linear (kimi_linear): V3's block under KimiLinearConfig's own key names (num_experts, num_experts_per_token,
// num_shared_experts, num_expert_group, moe_renormalize; routed_scaling_factor 2.446), the block under
// block_sparse_moe with Mixtral's expert names (w1 gate, w3 up, w2 down). Mistral 4 (mistral4): the same groups over
// softmax scores (input dtype, no correction bias; experts of excluded groups score 0.0, not -inf), every layer from
// first_k_dense_replace 0, its experts saved fused: gate_up_proj (E, 2I, D) gate rows first, down_proj (E, D, I).
// Ling's hybrid (bailing_hybrid): V3's block under Kimi-Linear's key names, BailingHybridConfig's defaults (8 groups
// keep 4, scale 2.5, mlp_layer_types from first_k_dense_replace 2), its checkpoints naming the correction bias
// mlp.gate.expert_bias.
#include "models/family_common.h"

#include <limits>

namespace hymoe {
namespace {

using namespace family_detail;

// The config class's defaults for keys a config.json may leave out, and the keys it names differently.
struct V3Defaults {
  const char* family;
  int64_t first_k_dense_replace, n_group, topk_group;  // first_k_dense_replace -1: every layer MoE, key not read
  double routed_scaling_factor;
  bool norm_topk_prob;
  int64_t n_shared_experts;  // -1: required
  bool mlp_layer_types;      // the layer rule is the config's mlp_layer_types, "dense" or "sparse" per layer
  const char* experts_key = "n_routed_experts";
  const char* shared_key = "n_shared_experts";
  const char* bias_name = "gate.e_score_correction_bias";  // under the layer's block, as the checkpoints name it
  bool text_config = false;              // the keys sit in config.json's text_config, not at the top level
  const char* layers = "model.layers.";  // the checkpoint's layer prefix
  const char* block = "mlp.";            // the MoE block under a layer
  bool shared_experts = true;            // false: the block has no shared expert (the key is not read)
  const char* top_k_key = "num_experts_per_tok";
  const char* n_group_key = "n_group";
  const char* norm_key = "norm_topk_prob";
  const char* gate_name = "gate_proj";   // the routed experts' matrices
  const char* up_name = "up_proj";
  const char* down_name = "down_proj";
  bool softmax_scores = false;           // softmax scores, no correction bias, excluded groups 0.0 (mistral4)
  bool fused_experts = false;            // gate_up_proj (E, 2I, D), down_proj (E, D, I) (mistral4)
  const char* router_name = "gate.weight";      // under the block
  const char* shared_prefix = "shared_experts.";
  const char* shared_gate_name = "gate_proj";   // the shared MLP's matrices
  const char* shared_up_name = "up_proj";
  const char* shared_down_name = "down_proj";
  const char* scale_key = "routed_scaling_factor";
  const char* first_dense_key = "first_k_dense_replace";  // nullptr: the default, read from no key
  double normalize_epsilon = 1e-20;
  const char* bias_switch_key = nullptr;   // a boolean key (default true) that turns the correction bias on
  const char* shared_hidden_key = nullptr; // the shared MLP's own width, instead of moe_intermediate_size * count
  bool limited_swiglu = false;             // silu(min(gate, swiglu_limit)) * clamp(up, +-swiglu_limit) (glm5_next)
  bool text_config_optional = false;       // text_config where it exists, else the top level (a flat config)
  bool clamp_routed_only = false;          // limited_swiglu in the routed experts only; the shared MLP runs hidden_act
  const char* experts_alias = nullptr;     // another name of the experts' count, read where experts_key is absent
  const char* shared_alias = nullptr;      // the same for the shared experts' count
  // shared_hidden_key names one shared expert's width, multiplied by the count (dots3_note), with its other name
  // and its default (-1: required).
  bool shared_hidden_times_count = false;
  const char* shared_hidden_alias = nullptr;
  int64_t shared_hidden_default = -1;
  bool moe_layer_freq = false;  // absent mlp_layer_types: also moe_layer_freq (an int f: l % f == 0; a list: entry != 0)
  bool excluded_zero = false;   // experts of excluded groups score 0.0, not -inf, under sigmoid too (axk2)
  const char* output_norm = nullptr;  // under the layer: an RMSNorm of the block's output, eps rms_norm_eps (axk1)
  bool selection_bias_optional = false;  // a checkpoint without the correction bias routes with zeros (axk1)
};
constexpr V3Defaults kDeepseekV3{"deepseek_v3", 3, 8, 4, 2.5, true, 1, false};
constexpr V3Defaults kGlm4Moe{"glm4_moe", 1, 1, 1, 1.0, true, 1, false};
constexpr V3Defaults kDots1{"dots1", 0, 1, 1, 1.0, false, -1, false};
constexpr V3Defaults kDeepseekV32{"deepseek_v32", 3, 8, 4, 2.5, true, 1, true};
constexpr V3Defaults kGlm4MoeLite{"glm4_moe_lite", 1, 1, 1, 1.8, true, 1, true};
constexpr V3Defaults kSolarOpen{"solar_open", -1, 1, 1, 1.0, true, 1, false};
constexpr V3Defaults kExaoneMoe{"exaone_moe", 1, 1, 1, 2.5, true, 1, true, "num_experts", "num_shared_experts",
                                "e_score_correction_bias"};
constexpr V3Defaults kGlm4vMoe{.family = "glm4v_moe", .first_k_dense_replace = 1, .n_group = 1, .topk_group = 1,
                               .routed_scaling_factor = 1.0, .norm_topk_prob = true, .n_shared_experts = 1,
                               .mlp_layer_types = false, .text_config = true,
                               .layers = "model.language_model.layers."};
constexpr V3Defaults kMimoV2Flash{.family = "mimo_v2_flash", .first_k_dense_replace = 1, .n_group = 1, .topk_group = 1,
                                  .routed_scaling_factor = 1.0, .norm_topk_prob = true, .n_shared_experts = 0,
                                  .mlp_layer_types = true, .shared_experts = false};
constexpr V3Defaults kKimiLinear{.family = "kimi_linear", .first_k_dense_replace = 1, .n_group = 1, .topk_group = 1,
                                 .routed_scaling_factor = 2.446, .norm_topk_prob = true, .n_shared_experts = 1,
                                 .mlp_layer_types = true, .experts_key = "num_experts",
                                 .shared_key = "num_shared_experts", .block = "block_sparse_moe.",
                                 .top_k_key = "num_experts_per_token", .n_group_key = "num_expert_group",
                                 .norm_key = "moe_renormalize", .gate_name = "w1", .up_name = "w3", .down_name = "w2"};
constexpr V3Defaults kBailingHybrid{.family = "bailing_hybrid", .first_k_dense_replace = 2, .n_group = 8,
                                    .topk_group = 4, .routed_scaling_factor = 2.5, .norm_topk_prob = true,
                                    .n_shared_experts = 1, .mlp_layer_types = true, .experts_key = "num_experts",
                                    .shared_key = "num_shared_experts", .bias_name = "gate.expert_bias",
                                    .top_k_key = "num_experts_per_token", .n_group_key = "num_expert_group",
                                    .norm_key = "moe_renormalize"};
// GLM-5 with DSA attention (glm_moe_dsa): V3's block, MoE by mlp_layer_types (from first_k_dense_replace 3).
constexpr V3Defaults kGlmMoeDsa{.family = "glm_moe_dsa", .first_k_dense_replace = 3, .n_group = 1, .topk_group = 1,
                                .routed_scaling_factor = 2.5, .norm_topk_prob = true, .n_shared_experts = 1,
                                .mlp_layer_types = true};
// Sarvam-MoE (sarvam_moe, run by Glm4MoeForCausalLM): glm4_moe's block under its defaults, the bias saved as
// mlp.gate.expert_bias.
constexpr V3Defaults kSarvamMoe{.family = "sarvam_moe", .first_k_dense_replace = 1, .n_group = 1, .topk_group = 1,
                                .routed_scaling_factor = 2.5, .norm_topk_prob = true, .n_shared_experts = 1,
                                .mlp_layer_types = false, .bias_name = "gate.expert_bias"};
// Hunyuan-V3 (hy_v3): sigmoid with the correction bias (mlp.expert_bias) and no groups, always renormalized
// (+1e-20), times router_scaling_factor (2.826); the router mlp.router.gate, the shared MLP mlp.shared_mlp.
constexpr V3Defaults kHyV3{.family = "hy_v3", .first_k_dense_replace = 1, .n_group = 1, .topk_group = 1,
                           .routed_scaling_factor = 2.826, .norm_topk_prob = true, .n_shared_experts = 1,
                           .mlp_layer_types = true, .experts_key = "num_experts", .shared_key = "num_shared_experts",
                           .bias_name = "expert_bias", .norm_key = nullptr, .router_name = "router.gate.weight",
                           .shared_prefix = "shared_mlp.", .scale_key = "router_scaling_factor"};
// AFMoE (afmoe): sigmoid with the correction bias (mlp.expert_bias), always renormalized (+1e-20), times
// route_scale (1.0); MoE from num_dense_layers (1); the router mlp.router.gate.
constexpr V3Defaults kAfmoe{.family = "afmoe", .first_k_dense_replace = 1, .n_group = 1, .topk_group = 1,
                            .routed_scaling_factor = 1.0, .norm_topk_prob = true, .n_shared_experts = 2,
                            .mlp_layer_types = false, .experts_key = "num_experts", .shared_key = "num_shared_experts",
                            .bias_name = "expert_bias", .norm_key = nullptr, .router_name = "router.gate.weight",
                            .scale_key = "route_scale", .first_dense_key = "num_dense_layers"};
// LFM2-MoE (lfm2_moe): sigmoid, the correction bias (feed_forward.expert_bias) where use_expert_bias (default true),
// renormalized with norm_topk_prob (+1e-6), times routed_scaling_factor (1.0); no shared expert; MoE from
// num_dense_layers (2); the block under feed_forward with Mixtral's expert names.
constexpr V3Defaults kLfm2Moe{.family = "lfm2_moe", .first_k_dense_replace = 2, .n_group = 1, .topk_group = 1,
                              .routed_scaling_factor = 1.0, .norm_topk_prob = true, .n_shared_experts = 0,
                              .mlp_layer_types = false, .experts_key = "num_experts", .bias_name = "expert_bias",
                              .block = "feed_forward.", .shared_experts = false, .gate_name = "w1", .up_name = "w3",
                              .down_name = "w2", .first_dense_key = "num_dense_layers", .normalize_epsilon = 1e-6,
                              .bias_switch_key = "use_expert_bias"};
// Laguna (laguna): sigmoid with the correction bias (saved as mlp.experts.e_score_correction_bias), always
// renormalized (no eps), times moe_routed_scaling_factor (1.0); one shared MLP mlp.shared_expert of
// shared_expert_intermediate_size; MoE by mlp_layer_types. A router logit softcap is refused (its factory below).
constexpr V3Defaults kLaguna{.family = "laguna", .first_k_dense_replace = 1, .n_group = 1, .topk_group = 1,
                             .routed_scaling_factor = 1.0, .norm_topk_prob = true, .n_shared_experts = 1,
                             .mlp_layer_types = true, .experts_key = "num_experts",
                             .bias_name = "experts.e_score_correction_bias", .norm_key = nullptr,
                             .shared_prefix = "shared_expert.", .scale_key = "moe_routed_scaling_factor",
                             .normalize_epsilon = 0.0, .shared_hidden_key = "shared_expert_intermediate_size"};
// GLM-5-Next (glm5_next): V3's block whose routed experts and shared MLP run silu(min(gate, swiglu_limit)) *
// clamp(up, +-swiglu_limit) (default 10), keys under text_config (or at the top level, where a flat config has
// them), layers under model.language_model.layers, MoE by mlp_layer_types (absent: the first three layers dense).
constexpr V3Defaults kGlm5Next{.family = "glm5_next", .first_k_dense_replace = 3, .n_group = 1, .topk_group = 1,
                               .routed_scaling_factor = 2.5, .norm_topk_prob = true, .n_shared_experts = 1,
                               .mlp_layer_types = true, .text_config = true,
                               .layers = "model.language_model.layers.", .limited_swiglu = true,
                               .text_config_optional = true};
// Hunyuan-V4 (hy_v4): V3's block whose routed experts (only) run silu(min(gate, swiglu_limit)) *
// clamp(up, +-swiglu_limit) (default 10) and the shared MLP plain hidden_act; experts saved fused (gate_up_proj
// (E, 2I, D), down_proj (E, D, I)), the shared MLP's gate as shared_experts.linear_gate; scale 2.827; MoE by
// mlp_layer_types (absent: layer 0 dense).
constexpr V3Defaults kHyV4{.family = "hy_v4", .first_k_dense_replace = 1, .n_group = 1, .topk_group = 1,
                           .routed_scaling_factor = 2.827, .norm_topk_prob = true, .n_shared_experts = 1,
                           .mlp_layer_types = true, .fused_experts = true, .shared_gate_name = "linear_gate",
                           .limited_swiglu = true, .clamp_routed_only = true};
// Its multimodal release (hy_v4_vl): the same block, keys under text_config, tensors still under model.layers.
constexpr V3Defaults kHyV4Vl = [] {
  V3Defaults d = kHyV4;
  d.family = "hy_v4_vl";
  d.text_config = true;
  return d;
}();
// Sarvam's MLA model (sarvam_mla, run by DeepseekV3ForCausalLM): V3's block under SarvamMLAConfig's defaults; its
// original configs name the counts num_experts and num_shared_experts, which the config class maps.
constexpr V3Defaults kSarvamMla{.family = "sarvam_mla", .first_k_dense_replace = 1, .n_group = 1, .topk_group = 1,
                                .routed_scaling_factor = 2.5, .norm_topk_prob = true, .n_shared_experts = 1,
                                .mlp_layer_types = false, .experts_alias = "num_experts",
                                .shared_alias = "num_shared_experts"};
// Beam (beam): V3's router without a shared expert, num_experts, MoE by mlp_layer_types (absent: the first
// min(3, n) layers dense; BeamConfig has no first_k_dense_replace key).
constexpr V3Defaults kBeam{.family = "beam", .first_k_dense_replace = 3, .n_group = 8, .topk_group = 4,
                           .routed_scaling_factor = 2.5, .norm_topk_prob = true, .n_shared_experts = 0,
                           .mlp_layer_types = true, .experts_key = "num_experts", .shared_experts = false,
                           .first_dense_key = nullptr};
// Kimi K2.5 (kimi_k25): DeepSeek-V3's language model under text_config (its model_type kimi_k2 or deepseek_v3),
// tensors under language_model.model.layers as the releases store them.
constexpr V3Defaults kKimiK25{.family = "kimi_k25", .first_k_dense_replace = 3, .n_group = 8, .topk_group = 4,
                              .routed_scaling_factor = 2.5, .norm_topk_prob = true, .n_shared_experts = 1,
                              .mlp_layer_types = false, .text_config = true, .layers = "language_model.model.layers."};
// Mistral Large 4 (mistral_large4): Mistral 4's softmax groups, always renormalized (+1e-20; norm_topk_prob is not a
// key of its config), keys under text_config, MoE by mlp_layer_types (absent: from first_k_dense_replace 1), saved
// under Mistral's own names: layers.N.gate, layers.N.experts.E.w1 / w3 / w2, layers.N.shared_experts.w1 / w3 / w2.
constexpr V3Defaults kMistralLarge4{.family = "mistral_large4", .first_k_dense_replace = 1, .n_group = 1,
                                    .topk_group = 1, .routed_scaling_factor = 1.0, .norm_topk_prob = true,
                                    .n_shared_experts = 1, .mlp_layer_types = true, .text_config = true,
                                    .layers = "layers.", .block = "", .norm_key = nullptr, .gate_name = "w1",
                                    .up_name = "w3", .down_name = "w2", .softmax_scores = true,
                                    .shared_gate_name = "w1", .shared_up_name = "w3", .shared_down_name = "w2"};
// dots.llm3 (dots3_note, dots3_note_text): V3's block, keys under text_config where there is one (its releases are
// flat), one shared expert shared_experts_intermediate_size (or moe_shared_expert_intermediate_size; 1536) wide
// times n_shared_experts, MoE by mlp_layer_types (absent: from first_k_dense_replace 1 and moe_layer_freq).
constexpr V3Defaults kDots3Note{.family = "dots3_note", .first_k_dense_replace = 1, .n_group = 1, .topk_group = 1,
                                .routed_scaling_factor = 1.0, .norm_topk_prob = true, .n_shared_experts = 1,
                                .mlp_layer_types = true, .text_config = true,
                                .shared_hidden_key = "shared_experts_intermediate_size", .text_config_optional = true,
                                .shared_hidden_times_count = true,
                                .shared_hidden_alias = "moe_shared_expert_intermediate_size",
                                .shared_hidden_default = 1536, .moe_layer_freq = true};
constexpr V3Defaults kDots3NoteText = [] {
  V3Defaults d = kDots3Note;
  d.family = "dots3_note_text";
  d.text_config = false;
  return d;
}();
// A.X K2 (axk2): V3's block whose excluded groups score 0.0 ("to match the reference"), groups off unless n_group is
// set (null by default), MoE by mlp_layer_types (absent: from first_k_dense_replace 1 and moe_layer_freq).
constexpr V3Defaults kAxk2{.family = "axk2", .first_k_dense_replace = 1, .n_group = 1, .topk_group = 1,
                           .routed_scaling_factor = 2.5, .norm_topk_prob = true, .n_shared_experts = 1,
                           .mlp_layer_types = true, .moe_layer_freq = true, .excluded_zero = true};
// A.X K1 (axk1): V3's block (8 groups keep 4, scale 2.5 by default) whose output, routed + shared, goes through an
// RMSNorm (post_mlp_layernorm, saved at the layer level, eps rms_norm_eps); its releases route without a correction
// bias (transformers' buffer stays zeros), so an absent one is zeros. MoE by mlp_layer_types (absent: from
// first_k_dense_replace 1 and moe_layer_freq).
constexpr V3Defaults kAxk1{.family = "axk1", .first_k_dense_replace = 1, .n_group = 8, .topk_group = 4,
                           .routed_scaling_factor = 2.5, .norm_topk_prob = true, .n_shared_experts = 1,
                           .mlp_layer_types = true, .moe_layer_freq = true,
                           .output_norm = "post_mlp_layernorm.weight", .selection_bias_optional = true};
constexpr V3Defaults kMistral4{.family = "mistral4", .first_k_dense_replace = 0, .n_group = 1, .topk_group = 1,
                               .routed_scaling_factor = 1.0, .norm_topk_prob = true, .n_shared_experts = 1,
                               .mlp_layer_types = false, .softmax_scores = true, .fused_experts = true};

// The object of config.json a family's keys sit in: the whole config, or its text_config.
HfConfig keys_of(const HfConfig& c, const V3Defaults& d) {
  if (!d.text_config || (d.text_config_optional && !c.has("text_config"))) return c;
  return text_config_of(c, d.family);
}

class DeepseekV3 final : public FamilyBase {
 public:
  DeepseekV3(const HfConfig& c, const V3Defaults& d)
      : FamilyBase(c, d.family, read_common_fields(c, {d.top_k_key})), d_(d),
        first_moe_(d.first_k_dense_replace < 0 ? 0
                   : d.first_dense_key ? c.integer_or({d.first_dense_key}, d.first_k_dense_replace)
                                       : d.first_k_dense_replace) {
    if (!d.mlp_layer_types) return;
    const int64_t n = c.integer({"num_hidden_layers"});
    std::vector<std::string> fallback;
    const bool freq_list = d.moe_layer_freq && c.is_list("moe_layer_freq");
    const int64_t freq = d.moe_layer_freq && !freq_list ? c.integer_or({"moe_layer_freq"}, 1) : 1;
    if (freq <= 0) fail(c.label(), ": moe_layer_freq=", freq, " must be positive");
    for (int64_t l = 0; l < n; ++l) {
      const bool by_freq = freq_list ? c.integer_per_layer_or("moe_layer_freq", l, 0) != 0 : l % freq == 0;
      fallback.push_back(l < first_moe_ || !by_freq ? "dense" : "sparse");
    }
    layer_types_ = read_layer_types(c, d.family, n, std::move(fallback), {"dense", "sparse"});
  }

 private:
  std::string dense_reason(int64_t layer) const override {
    if (d_.mlp_layer_types)
      return layer >= 0 && layer < static_cast<int64_t>(layer_types_.size()) && layer_types_[layer] == "sparse"
                 ? ""
                 : "mlp_layer_types[" + std::to_string(layer) + "] is not \"sparse\"";
    return layer >= first_moe_ ? "" : "first_k_dense_replace=" + std::to_string(first_moe_);  // 0 for solar_open
  }
  void fill(int64_t layer, MoELayerSpec& s) const override {
    s.hidden = c_.integer({"moe_intermediate_size"});
    s.num_experts = d_.experts_alias ? c_.integer({d_.experts_key, d_.experts_alias}) : c_.integer({d_.experts_key});
    RouterOptions& r = s.router;
    r.scoring = d_.softmax_scores ? RouterScoring::kSoftmax : RouterScoring::kSigmoid;
    r.selection_bias = !d_.softmax_scores && (!d_.bias_switch_key || c_.boolean_or({d_.bias_switch_key}, true));
    r.group_limited = true;  // with n_group = topk_group = 1 a no-op
    r.n_group = c_.integer_or({d_.n_group_key}, d_.n_group);
    r.top_group = c_.integer_or({"topk_group"}, d_.topk_group);
    r.group_score = GroupScore::kTop2Sum;
    r.excluded_score = d_.softmax_scores || d_.excluded_zero ? 0.0f : -std::numeric_limits<float>::infinity();
    r.normalize = d_.norm_key ? c_.boolean_or({d_.norm_key}, d_.norm_topk_prob) : d_.norm_topk_prob;
    r.normalize_epsilon = d_.normalize_epsilon;
    r.scaling_factor = c_.number_or({d_.scale_key}, d_.routed_scaling_factor);
    s.activation = read_hidden_act(c_);
    if (d_.limited_swiglu) {
      // The routed experts hard-code silu; the shared MLP applies hidden_act, plain (hy_v4) or limited too (glm5_next:
      // one activation runs both here, so it must be silu).
      if (d_.clamp_routed_only)
        s.shared.activation = s.activation;
      else if (s.activation != ExpertActivation::kSwiGLU)
        fail(c_.label(), ": hidden_act='", c_.string_or({"hidden_act"}, "silu"), "'; ", d_.family,
             "'s routed experts run silu, so hymoe runs its shared MLP with silu too and needs hidden_act silu");
      s.activation = ExpertActivation::kLimitedSwiGLU;
      s.swiglu_limit = c_.number_or({"swiglu_limit"}, 10.0);
      if (!(s.swiglu_limit > 0))
        fail(c_.label(), ": swiglu_limit=", s.swiglu_limit, " must be positive");
    }
    const std::string p = d_.layers + std::to_string(layer) + "." + d_.block;
    s.router_weight = p + d_.router_name;
    if (r.selection_bias) s.selection_bias = p + d_.bias_name;
    s.selection_bias_optional = d_.selection_bias_optional;
    if (d_.output_norm) {
      s.output_norm = d_.layers + std::to_string(layer) + "." + d_.output_norm;
      s.output_norm_eps = c_.number_or({"rms_norm_eps"}, 1e-6);
    }
    s.experts_prefix = p + "experts.";
    s.gate_name = d_.gate_name;
    s.up_name = d_.up_name;
    s.down_name = d_.down_name;
    if (d_.fused_experts) {
      s.storage = ExpertStorage::kFusedGateUpOutIn;
      s.gate_name = "gate_up_proj";
      s.fused_suffix = "";
    }
    if (d_.shared_experts && d_.shared_hidden_key) {
      const char* alias = d_.shared_hidden_alias ? d_.shared_hidden_alias : d_.shared_hidden_key;
      s.shared.hidden = d_.shared_hidden_default < 0 ? c_.integer({d_.shared_hidden_key, alias})
                                                     : c_.integer_or({d_.shared_hidden_key, alias}, d_.shared_hidden_default);
      if (d_.shared_hidden_times_count) s.shared.hidden *= c_.integer_or({d_.shared_key}, d_.n_shared_experts);
    }
    else if (d_.shared_experts)
      s.shared.hidden = s.hidden * (d_.n_shared_experts < 0 ? c_.integer({d_.shared_key})
                                    : d_.shared_alias ? c_.integer_or({d_.shared_key, d_.shared_alias}, d_.n_shared_experts)
                                                      : c_.integer_or({d_.shared_key}, d_.n_shared_experts));
    s.shared.prefix = p + d_.shared_prefix;
    s.shared.gate_name = d_.shared_gate_name;
    s.shared.up_name = d_.shared_up_name;
    s.shared.down_name = d_.shared_down_name;
  }

  V3Defaults d_;
  int64_t first_moe_;
  std::vector<std::string> layer_types_;  // mlp_layer_types, for the families that read it
};

}  // namespace

HYMOE_MODEL_FAMILY(deepseek_v3) {
  return std::make_unique<DeepseekV3>(config, kDeepseekV3);
}
// Kimi-K2 is the DeepSeek-V3 architecture under its own model_type (its config.json says "kimi_k2").
HYMOE_MODEL_FAMILY(kimi_k2) { return std::make_unique<DeepseekV3>(config, kDeepseekV3); }
HYMOE_MODEL_FAMILY(solar_open) {
  return std::make_unique<DeepseekV3>(config, kSolarOpen);
}
HYMOE_MODEL_FAMILY(exaone_moe) {
  return std::make_unique<DeepseekV3>(config, kExaoneMoe);
}
HYMOE_MODEL_FAMILY(glm4_moe) {
  return std::make_unique<DeepseekV3>(config, kGlm4Moe);
}
HYMOE_MODEL_FAMILY(dots1) { return std::make_unique<DeepseekV3>(config, kDots1); }
HYMOE_MODEL_FAMILY(deepseek_v32) {
  return std::make_unique<DeepseekV3>(config, kDeepseekV32);
}
HYMOE_MODEL_FAMILY(glm4_moe_lite) {
  return std::make_unique<DeepseekV3>(config, kGlm4MoeLite);
}
HYMOE_MODEL_FAMILY(glm4v_moe) {
  return std::make_unique<DeepseekV3>(keys_of(config, kGlm4vMoe), kGlm4vMoe);
}
HYMOE_MODEL_FAMILY(mimo_v2_flash) {
  return std::make_unique<DeepseekV3>(config, kMimoV2Flash);
}
HYMOE_MODEL_FAMILY(kimi_linear) {
  return std::make_unique<DeepseekV3>(config, kKimiLinear);
}
HYMOE_MODEL_FAMILY(bailing_hybrid) {
  return std::make_unique<DeepseekV3>(config, kBailingHybrid);
}
HYMOE_MODEL_FAMILY(glm_moe_dsa) {
  return std::make_unique<DeepseekV3>(config, kGlmMoeDsa);
}
HYMOE_MODEL_FAMILY(sarvam_moe) {
  return std::make_unique<DeepseekV3>(config, kSarvamMoe);
}
HYMOE_MODEL_FAMILY(hy_v3) { return std::make_unique<DeepseekV3>(config, kHyV3); }
HYMOE_MODEL_FAMILY(afmoe) { return std::make_unique<DeepseekV3>(config, kAfmoe); }
HYMOE_MODEL_FAMILY(lfm2_moe) {
  return std::make_unique<DeepseekV3>(config, kLfm2Moe);
}
HYMOE_MODEL_FAMILY(laguna) {
  if (const double cap = config.number_or({"moe_router_logit_softcapping"}, 0.0); cap != 0.0)
    fail(config.label(), ": moe_router_logit_softcapping=", cap,
         " (tanh softcapping of the router logits) is not a router option hymoe has; 0 turns it off");
  return std::make_unique<DeepseekV3>(config, kLaguna);
}
HYMOE_MODEL_FAMILY(glm5_next) {
  return std::make_unique<DeepseekV3>(keys_of(config, kGlm5Next), kGlm5Next);
}
HYMOE_MODEL_FAMILY(hy_v4) { return std::make_unique<DeepseekV3>(config, kHyV4); }
HYMOE_MODEL_FAMILY(hy_v4_vl) {
  return std::make_unique<DeepseekV3>(keys_of(config, kHyV4Vl), kHyV4Vl);
}
HYMOE_MODEL_FAMILY(mistral4) {
  return std::make_unique<DeepseekV3>(config, kMistral4);
}

HYMOE_MODEL_FAMILY(sarvam_mla) { return std::make_unique<DeepseekV3>(config, kSarvamMla); }
HYMOE_MODEL_FAMILY(beam) { return std::make_unique<DeepseekV3>(config, kBeam); }
HYMOE_MODEL_FAMILY(kimi_k25) { return std::make_unique<DeepseekV3>(keys_of(config, kKimiK25), kKimiK25); }
HYMOE_MODEL_FAMILY(mistral_large4) {
  return std::make_unique<DeepseekV3>(keys_of(config, kMistralLarge4), kMistralLarge4);
}

HYMOE_MODEL_FAMILY(dots3_note) { return std::make_unique<DeepseekV3>(keys_of(config, kDots3Note), kDots3Note); }
HYMOE_MODEL_FAMILY(dots3_note_text) { return std::make_unique<DeepseekV3>(config, kDots3NoteText); }
HYMOE_MODEL_FAMILY(axk2) { return std::make_unique<DeepseekV3>(config, kAxk2); }

HYMOE_MODEL_FAMILY(axk1) { return std::make_unique<DeepseekV3>(config, kAxk1); }

}  // namespace hymoe
