// llama.cpp's reading of a GGUF MoE model, per architecture: which keys it reads (with their exact types), which
// settings its graph hard-codes, and the tensor names and shapes of a MoE block. Each architecture is one
// declaration below (kArchitectures); the code reads whatever the declarations say. The facts are llama.cpp's
// (0ce8cd11 for llama, qwen2moe, qwen3moe, olmoe, deepseek2, gpt-oss, as tests/data/conformance/gguf/README.md
// records them; 0c1e57098, the peer harness's version, for the others: src/models/<arch>.cpp there).
#include "hymoe/gguf_moe.h"

#include <algorithm>
#include <array>
#include <optional>

#include "hymoe/error.h"
#include "hymoe/quant_formats.h"

namespace hymoe {
namespace {

// Where the routed experts' hidden size H comes from.
enum class HiddenRule {
  kExpertKey,             // expert_feed_forward_length
  kExpertKeyOrFfnOverK,   // that, else feed_forward_length / expert_used_count (qwen2moe, qwen3moe)
  kFeedForwardLength,     // feed_forward_length (llama, olmoe)
};
// The shared expert: none, or its hidden size.
enum class SharedRule {
  kNone,
  kSharedLength,            // expert_shared_feed_forward_length, else feed_forward_length
  kCountTimesHidden,        // expert_shared_count * H (deepseek2, glm4moe, dots1)
  kCountTimesSharedLength,  // expert_shared_count * (expert_shared_feed_forward_length, else H) (bailingmoe2)
  kSharedLengthOrNone,      // expert_shared_feed_forward_length; none where it is absent or 0 (ernie4_5-moe)
  kExpertHidden,            // the routed experts' H (llama4)
  kSharedLengthOrHidden,    // expert_shared_feed_forward_length where present and not 0, else H; always (exaone-moe)
  kAtLeastOneTimesHidden,   // max(expert_shared_count, 1) * H (kimi-linear: a count of 0 still builds one)
  kCountedLengthOrCount,    // none where expert_shared_count (optional) is 0, else expert_shared_feed_forward_length
                            // where present and not 0, else count * H (cohere2moe)
  kSharedLengthOrAtLeastOneTimesHidden,  // expert_shared_feed_forward_length where not 0, else
                                         // max(expert_shared_count (required), 1) * H (bailingmoe3)
};
// The gating function: fixed by the graph, or expert_gating_func (1 softmax, 2 sigmoid, 3 softmax over the
// selected logits) with what an absent key (or 0, llama.cpp's NONE) means.
enum class GatingRule {
  kSoftmax,
  kSigmoid,             // llama4
  kSoftmaxWeight,       // gpt-oss
  kKeyOrSoftmax,        // deepseek2 (its V2 files have no key)
  kKeyOrSigmoid,        // glm4moe
  kKeyRequired,         // dots1, bailingmoe2: llama.cpp aborts on NONE
};

struct GgufArchitecture {
  std::string_view name;
  HiddenRule hidden = HiddenRule::kExpertKey;
  SharedRule shared = SharedRule::kNone;
  bool shared_optional = false;  // qwen3next: a block may have no shared expert tensors
  bool shared_gate = false;      // sigmoid(ffn_gate_inp_shexp . x) scales the shared expert (qwen2moe, qwen3next)
  bool shared_fused_up = false;  // granite_swa: ffn_up_shexp [D, 2Hs] holds the shared gate rows, then the up rows
  GatingRule gating = GatingRule::kSoftmax;
  std::optional<bool> norm_weights;  // fixed by the graph, or expert_weights_norm (default false)
  bool reads_scale = false;          // expert_weights_scale (else no scale)
  bool selection_bias = false;       // exp_probs_b.bias: added to the scores for the selection only
  std::string_view selection_bias_name = "exp_probs_b.bias";  // hy_v3 names it without the suffix
  bool selection_bias_required = false;  // the graph's loader requires it (else optional)
  bool leading_dense = false;        // leading_dense_block_count: blocks below it are dense
  bool moe_layer_step = false;       // interleave_moe_layer_step (required): block b is MoE iff (b + 1) % step == 0
  bool merged_gate_up = false;       // ffn_gate_up_exps read in place of ffn_gate_exps and ffn_up_exps where present
  bool biases = false;               // gpt-oss: router and expert biases, clamped SwiGLU (alpha 1.702, limit 7)
  bool weight_before_ffn = false;    // llama4: the weights multiply the experts' inputs
  bool swiglu_oai = false;           // minimax-m3: gpt-oss's clamped SwiGLU without biases, routed and shared
  bool ungated_relu2 = false;        // nemotron_h_moe: no gate tensors, relu(up x)^2 (LLM_FFN_RELU_SQR)
  bool hash_layers = false;          // deepseek4: hash_layer_count (required) leading blocks routed by token id
  bool shared_average = false;       // cohere2moe: the output is (routed + shared) / 2 where there is a shared expert
  enum class Clamp { kNone, kOptional, kRequired } swiglu_clamp = Clamp::kNone;  // swiglu_clamp_exp, per block
  bool clamp_after_silu = false;     // min(silu(g), L) * clamp(u, +-L) (step35, bailingmoe3), not ggml_swiglu_clamp
  enum class SharedClamp { kNone, kOwnKey, kOwnKeyElseRouted } shared_swiglu_clamp = SharedClamp::kNone;
  std::string_view fixed;            // what the graph hard-codes, for listings
};

constexpr std::string_view kReadFromMetadata =
    "gating, normalization and scale read from metadata; ungated shared expert";
constexpr std::array<GgufArchitecture, 53> kArchitectures = {{
    {.name = "llama", .hidden = HiddenRule::kFeedForwardLength, .norm_weights = true,
     .fixed = "softmax gating, normalized weights, no scale, no shared expert"},
    {.name = "qwen2moe", .hidden = HiddenRule::kExpertKeyOrFfnOverK, .shared = SharedRule::kSharedLength,
     .shared_gate = true, .norm_weights = false,
     .fixed = "softmax gating, weights not normalized, no scale, sigmoid-gated shared expert"},
    {.name = "qwen3moe", .hidden = HiddenRule::kExpertKeyOrFfnOverK, .norm_weights = true,
     .fixed = "softmax gating, normalized weights, no scale, no shared expert"},
    {.name = "olmoe", .hidden = HiddenRule::kFeedForwardLength, .norm_weights = false,
     .fixed = "softmax gating, weights not normalized, no scale, no shared expert"},
    {.name = "deepseek2", .shared = SharedRule::kCountTimesHidden, .gating = GatingRule::kKeyOrSoftmax,
     .reads_scale = true, .selection_bias = true, .leading_dense = true, .merged_gate_up = true,
     .fixed = kReadFromMetadata},
    {.name = "gpt-oss", .gating = GatingRule::kSoftmaxWeight, .norm_weights = false, .biases = true,
     .fixed = "softmax over the top-k logits (SOFTMAX_WEIGHT), weights not normalized, no scale, router and expert "
              "biases, clamped SwiGLU (alpha 1.702, limit 7), no shared expert"},
    {.name = "glm4moe", .shared = SharedRule::kCountTimesHidden, .gating = GatingRule::kKeyOrSigmoid,
     .reads_scale = true, .selection_bias = true, .leading_dense = true,
     .fixed = "gating (sigmoid without the key), normalization and scale read from metadata; ungated shared expert"},
    {.name = "dots1", .shared = SharedRule::kCountTimesHidden, .gating = GatingRule::kKeyRequired,
     .reads_scale = true, .selection_bias = true, .leading_dense = true, .fixed = kReadFromMetadata},
    {.name = "bailingmoe2", .shared = SharedRule::kCountTimesSharedLength, .gating = GatingRule::kKeyRequired,
     .reads_scale = true, .selection_bias = true, .leading_dense = true, .fixed = kReadFromMetadata},
    {.name = "qwen3vlmoe", .norm_weights = true,
     .fixed = "softmax gating, normalized weights, no scale, no shared expert"},
    {.name = "hunyuan-moe", .shared = SharedRule::kSharedLength, .norm_weights = true,
     .fixed = "softmax gating, normalized weights, no scale, ungated shared expert"},
    {.name = "qwen3next", .shared = SharedRule::kSharedLength, .shared_optional = true, .shared_gate = true,
     .norm_weights = true, .merged_gate_up = true,
     .fixed = "softmax gating, normalized weights, no scale, sigmoid-gated shared expert where the block has one"},
    {.name = "ernie4_5-moe", .shared = SharedRule::kSharedLengthOrNone, .norm_weights = true, .selection_bias = true,
     .leading_dense = true, .moe_layer_step = true,
     .fixed = "softmax gating, normalized weights, no scale, ungated shared expert where the metadata sizes one"},
    {.name = "deepseek", .shared = SharedRule::kCountTimesHidden, .norm_weights = false, .reads_scale = true,
     .leading_dense = true, .fixed = "softmax gating, weights not normalized, scale read; ungated shared expert"},
    {.name = "bailingmoe", .shared = SharedRule::kCountTimesHidden, .reads_scale = true, .leading_dense = true,
     .fixed = "softmax gating; normalization and scale read from metadata; ungated shared expert"},
    {.name = "llada-moe", .hidden = HiddenRule::kExpertKeyOrFfnOverK, .norm_weights = false,
     .fixed = "softmax gating, weights not normalized, no scale, no shared expert"},
    {.name = "granitemoe", .hidden = HiddenRule::kFeedForwardLength, .shared = SharedRule::kSharedLengthOrNone,
     .norm_weights = true,
     .fixed = "softmax gating, normalized weights, no scale, ungated shared expert where the metadata sizes one"},
    {.name = "llama4", .shared = SharedRule::kExpertHidden, .gating = GatingRule::kSigmoid, .norm_weights = false,
     .moe_layer_step = true, .weight_before_ffn = true,
     .fixed = "sigmoid gating, weights not normalized, no scale, each weight multiplied into its expert's input, "
              "ungated shared expert of the experts' size"},
    {.name = "qwen35moe", .hidden = HiddenRule::kExpertKeyOrFfnOverK, .shared = SharedRule::kSharedLength,
     .shared_gate = true, .norm_weights = true, .merged_gate_up = true,
     .fixed = "softmax gating, normalized weights, no scale, sigmoid-gated shared expert"},
    // Phi-3.5-MoE as llama.cpp runs it (phi3's graph): softmax top-k renormalized, not transformers' sparsemixer.
    {.name = "phimoe", .hidden = HiddenRule::kFeedForwardLength, .norm_weights = true,
     .fixed = "softmax gating, normalized weights, no scale, no shared expert (llama.cpp's graph, not the "
              "sparsemixer of transformers' PhiMoE)"},
    // The rest of llama.cpp 0c1e57098's architectures whose MoE call is one of the shapes above (src/models/<arch>.cpp
    // there). Where a graph picks its MoE blocks by the router's presence (jamba, mimo2), so does hymoe.
    {.name = "dbrx", .hidden = HiddenRule::kFeedForwardLength, .norm_weights = true,
     .fixed = "softmax gating, normalized weights, no scale, no shared expert"},
    {.name = "mistral3", .hidden = HiddenRule::kFeedForwardLength, .norm_weights = true,
     .fixed = "softmax gating, normalized weights, no scale, no shared expert"},
    {.name = "jamba", .hidden = HiddenRule::kFeedForwardLength, .norm_weights = false,
     .fixed = "softmax gating, weights not normalized, no scale, no shared expert; MoE where a block has a router"},
    {.name = "rnd1", .hidden = HiddenRule::kExpertKeyOrFfnOverK, .norm_weights = true,
     .fixed = "softmax gating, normalized weights, no scale, no shared expert"},
    {.name = "minimax-m2", .hidden = HiddenRule::kFeedForwardLength, .gating = GatingRule::kKeyRequired,
     .norm_weights = true, .selection_bias = true,
     .fixed = "gating read from metadata, normalized weights, no scale, no shared expert"},
    {.name = "mimo2", .gating = GatingRule::kSigmoid, .norm_weights = true, .selection_bias = true,
     .fixed = "sigmoid gating, normalized weights, no scale, no shared expert; MoE where a block has a router"},
    {.name = "lfm2moe", .gating = GatingRule::kKeyRequired, .norm_weights = true, .selection_bias = true,
     .leading_dense = true, .fixed = "gating read from metadata, normalized weights, no scale, no shared expert"},
    {.name = "deepseek32", .shared = SharedRule::kCountTimesHidden, .gating = GatingRule::kKeyRequired,
     .reads_scale = true, .selection_bias = true, .leading_dense = true, .fixed = kReadFromMetadata},
    {.name = "glm-dsa", .shared = SharedRule::kCountTimesHidden, .gating = GatingRule::kKeyOrSigmoid,
     .reads_scale = true, .selection_bias = true, .leading_dense = true,
     .fixed = "gating (sigmoid without the key), normalization and scale read from metadata; ungated shared expert"},
    {.name = "afmoe", .shared = SharedRule::kCountTimesHidden, .gating = GatingRule::kKeyOrSigmoid,
     .reads_scale = true, .selection_bias = true, .leading_dense = true,
     .fixed = "gating (sigmoid without the key), normalization and scale read from metadata; ungated shared "
              "expert (the graph's ffn_post_norm after the block is outside it)"},
    {.name = "kimi-linear", .shared = SharedRule::kAtLeastOneTimesHidden, .gating = GatingRule::kKeyRequired,
     .norm_weights = true, .reads_scale = true, .selection_bias = true, .leading_dense = true,
     .fixed = "gating and scale read from metadata, normalized weights; ungated shared expert"},
    {.name = "exaone-moe", .shared = SharedRule::kSharedLengthOrHidden, .gating = GatingRule::kKeyRequired,
     .reads_scale = true, .selection_bias = true, .leading_dense = true, .fixed = kReadFromMetadata},
    // Cohere2-MoE: the block runs in parallel with attention on the same normed input (the caller's x here).
    {.name = "cohere2moe", .shared = SharedRule::kCountedLengthOrCount, .gating = GatingRule::kKeyOrSigmoid,
     .reads_scale = true, .leading_dense = true, .merged_gate_up = true, .shared_average = true,
     .fixed = "gating (sigmoid without the key), normalization and scale read from metadata; a shared expert where "
              "expert_shared_count > 0, averaged with the routed output: (routed + shared) / 2"},
    {.name = "qwen4exp", .hidden = HiddenRule::kExpertKeyOrFfnOverK, .shared = SharedRule::kSharedLength,
     .shared_gate = true, .norm_weights = true, .merged_gate_up = true,
     .fixed = "softmax gating, normalized weights, no scale, sigmoid-gated shared expert"},
    // Granite 4's hybrid: granitemoe's block (the residual multiplier after it is outside the block).
    {.name = "granitehybrid", .hidden = HiddenRule::kFeedForwardLength, .shared = SharedRule::kSharedLengthOrNone,
     .norm_weights = true,
     .fixed = "softmax gating, normalized weights, no scale, ungated shared expert where the metadata sizes one"},
    {.name = "mellum", .norm_weights = true, .fixed = "softmax gating, normalized weights, no scale, no shared expert"},
    // MiniMax-Text-01: the graph passes an exp_probs_b it never loads, so there is none.
    {.name = "minimax-01", .hidden = HiddenRule::kFeedForwardLength, .norm_weights = true,
     .fixed = "softmax gating, normalized weights, no scale, no shared expert"},
    {.name = "dots3note", .shared = SharedRule::kCountTimesHidden, .gating = GatingRule::kKeyRequired,
     .reads_scale = true, .selection_bias = true, .selection_bias_required = true, .leading_dense = true,
     .fixed = kReadFromMetadata},
    // Laguna: its shared expert's width is expert_shared_feed_forward_length, else expert_shared_count (default 1)
    // times H; hymoe takes H when the length is absent, which differs only for a file without the length and with a
    // count other than 1 (its converter always writes the length).
    {.name = "laguna", .shared = SharedRule::kSharedLengthOrHidden, .gating = GatingRule::kKeyOrSigmoid,
     .reads_scale = true, .selection_bias = true, .selection_bias_required = true, .leading_dense = true,
     .fixed = "gating (sigmoid without the key), normalization and scale read from metadata; ungated shared expert"},
    // Hunyuan-V3: its selection bias is blk.N.exp_probs_b, without the .bias suffix; MoE where a block has a router.
    {.name = "hy_v3", .shared = SharedRule::kSharedLengthOrHidden, .gating = GatingRule::kKeyOrSigmoid,
     .reads_scale = true, .selection_bias = true, .selection_bias_name = "exp_probs_b", .merged_gate_up = true,
     .fixed = "gating (sigmoid without the key), normalization and scale read from metadata; ungated shared expert; "
              "the selection bias exp_probs_b; MoE where a block has a router"},
    // The SwiGLU limits of ggml_swiglu_clamp, per block (the Hugging Face families' limited SwiGLU).
    {.name = "maple", .norm_weights = true, .swiglu_clamp = GgufArchitecture::Clamp::kRequired,
     .fixed = "softmax gating, normalized weights, no scale, no shared expert; SwiGLU limited per block "
              "(swiglu_clamp_exp, required)"},
    {.name = "hy_v4", .shared = SharedRule::kCountTimesHidden, .gating = GatingRule::kKeyRequired,
     .reads_scale = true, .selection_bias = true, .leading_dense = true,
     .swiglu_clamp = GgufArchitecture::Clamp::kOptional,
     .fixed = "gating, normalization and scale read from metadata; the routed experts' SwiGLU limited per block "
              "(swiglu_clamp_exp), an ungated shared expert without a limit"},
    {.name = "glm5-next", .shared = SharedRule::kCountTimesHidden, .gating = GatingRule::kKeyOrSigmoid,
     .reads_scale = true, .selection_bias = true, .selection_bias_required = true, .leading_dense = true,
     .swiglu_clamp = GgufArchitecture::Clamp::kOptional,
     .shared_swiglu_clamp = GgufArchitecture::SharedClamp::kOwnKeyElseRouted,
     .fixed = "gating (sigmoid without the key), normalization and scale read from metadata; routed and shared "
              "SwiGLU limited per block (swiglu_clamp_exp; swiglu_clamp_shexp, else the routed limit)"},
    {.name = "minimax-m3", .shared = SharedRule::kCountTimesHidden, .gating = GatingRule::kKeyRequired,
     .reads_scale = true, .selection_bias = true, .selection_bias_required = true, .leading_dense = true,
     .swiglu_oai = true,
     .fixed = "gating, normalization and scale read from metadata; routed and ungated shared experts run the clamped "
              "SwiGLU (alpha 1.702, limit 7) without biases"},
    // Granite 4 with sliding-window attention: granitemoe's block whose shared expert keeps gate and up in one tensor.
    {.name = "granite_swa", .hidden = HiddenRule::kFeedForwardLength, .shared = SharedRule::kSharedLengthOrNone,
     .shared_fused_up = true, .norm_weights = true, .merged_gate_up = true,
     .fixed = "softmax gating, normalized weights, no scale, an ungated shared expert where the metadata sizes one, "
              "its gate and up rows in ffn_up_shexp"},
    // Nemotron 3 Nano (nemotron_h_moe): ungated relu^2 experts and shared expert, fixed sigmoid gating; MoE where a
    // block has a router (the hybrid's other blocks are Mamba, attention or MLP).
    {.name = "nemotron_h_moe", .shared = SharedRule::kSharedLengthOrNone, .gating = GatingRule::kSigmoid,
     .reads_scale = true, .selection_bias = true, .selection_bias_required = true, .ungated_relu2 = true,
     .fixed = "sigmoid gating, normalization and scale read from metadata; experts and shared expert without a "
              "gate, relu(up x)^2; MoE where a block has a router"},
    // MiniCPM's MoE variant (minicpm: granite's graph; its loader reads no shared-expert key, so there is none).
    {.name = "minicpm", .hidden = HiddenRule::kFeedForwardLength, .norm_weights = true,
     .fixed = "softmax gating, normalized weights, no scale, no shared expert (granite's graph)"},
    // DeepSeek-OCR (deepseek2-ocr: deepseek2's graph without MLA, its keys read as deepseek2 reads them) and Mistral 4
    // (mistral4: deepseek2's loader and graph).
    {.name = "deepseek2-ocr", .shared = SharedRule::kCountTimesHidden, .gating = GatingRule::kKeyOrSoftmax,
     .reads_scale = true, .selection_bias = true, .leading_dense = true, .merged_gate_up = true,
     .fixed = kReadFromMetadata},
    {.name = "mistral4", .shared = SharedRule::kCountTimesHidden, .gating = GatingRule::kKeyOrSoftmax,
     .reads_scale = true, .selection_bias = true, .leading_dense = true, .merged_gate_up = true,
     .fixed = kReadFromMetadata},
    // DeepSeek-V4: its MoE blocks past the hash-routed ones (gating 4, sqrt-softplus, from the required key).
    {.name = "deepseek4", .shared = SharedRule::kCountTimesHidden, .gating = GatingRule::kKeyRequired,
     .reads_scale = true, .selection_bias = true, .selection_bias_required = true, .hash_layers = true,
     .swiglu_clamp = GgufArchitecture::Clamp::kRequired,
     .shared_swiglu_clamp = GgufArchitecture::SharedClamp::kOwnKeyElseRouted,
     .fixed = "gating (4: sqrt-softplus), normalization and scale read from metadata; routed and shared SwiGLU "
              "limited per block; the first hash_layer_count blocks route by token id and are not run"},
    // The SwiGLU clamped after the silu, llama.cpp's form for the architectures outside ggml_swiglu_clamp's list.
    {.name = "step35", .shared = SharedRule::kSharedLengthOrNone, .gating = GatingRule::kKeyOrSigmoid,
     .reads_scale = true, .selection_bias = true, .swiglu_clamp = GgufArchitecture::Clamp::kOptional,
     .clamp_after_silu = true, .shared_swiglu_clamp = GgufArchitecture::SharedClamp::kOwnKey,
     .fixed = "gating (sigmoid without the key), normalization and scale read from metadata; ungated shared expert; "
              "SwiGLU clamped after the silu per block (swiglu_clamp_exp, swiglu_clamp_shexp); MoE where a block has "
              "a router"},
    {.name = "bailingmoe3", .shared = SharedRule::kSharedLengthOrAtLeastOneTimesHidden,
     .gating = GatingRule::kKeyRequired, .reads_scale = true, .selection_bias = true,
     .selection_bias_required = true, .leading_dense = true, .swiglu_clamp = GgufArchitecture::Clamp::kOptional,
     .clamp_after_silu = true, .shared_swiglu_clamp = GgufArchitecture::SharedClamp::kOwnKey,
     .fixed = "gating, normalization and scale read from metadata; ungated shared expert; SwiGLU clamped after the "
              "silu per block (swiglu_clamp_exp, swiglu_clamp_shexp)"},
    // Snowflake Arctic: the MoE call's input is the block input normed by ffn_norm_exps; the dense residual FFN beside
    // it reads the post-attention stream, so like attention it is the caller's, outside the block.
    {.name = "arctic", .hidden = HiddenRule::kFeedForwardLength, .norm_weights = true,
     .fixed = "softmax gating, normalized weights, no scale, no shared expert (the graph's dense residual FFN, on "
              "another input, is outside the block)"},
}};

std::string key(const GgufMoeConfig& c, std::string_view name) { return c.architecture + "." + std::string(name); }

std::string architecture_names() {
  std::string names;
  for (const auto& r : kArchitectures) names += (names.empty() ? "" : ", ") + std::string(r.name);
  return names;
}

const GgufArchitecture* find_architecture(std::string_view name) {
  for (const auto& r : kArchitectures)
    if (r.name == name) return &r;
  return nullptr;
}

}  // namespace

std::vector<std::string> gguf_moe_architectures() {
  std::vector<std::string> names;
  for (const auto& r : kArchitectures) names.emplace_back(r.name);
  return names;
}

GgufMoeConfig read_gguf_moe_config(const GgufFile& file) {
  GgufMoeConfig c;
  const auto arch = file.get_string("general.architecture");
  if (!arch) fail(file.label(), ": missing metadata key 'general.architecture'");
  c.architecture = *arch;
  const GgufArchitecture* rules = find_architecture(c.architecture);
  if (!rules)
    fail(file.label(), ": architecture '", c.architecture, "' is not one hymoe runs (", architecture_names(), ")");
  c.fixed_by_architecture = rules->fixed;
  c.block_count = file.require_u32(key(c, "block_count"));
  c.embedding_length = file.require_u32(key(c, "embedding_length"));
  c.expert_count = file.get_u32(key(c, "expert_count")).value_or(0);
  c.expert_used_count = file.get_u32(key(c, "expert_used_count")).value_or(0);
  if (c.expert_count == 0) return c;  // a dense model: nothing more to read
  if (c.expert_used_count == 0 || c.expert_used_count > c.expert_count)
    fail(file.label(), ": metadata key '", key(c, "expert_used_count"), "' is ", c.expert_used_count,
         ", expected 1 .. expert_count = ", c.expert_count);
  const auto n_ff = file.get_u32(key(c, "feed_forward_length"));
  const auto expert_ff = file.get_u32(key(c, "expert_feed_forward_length"));
  if (rules->hidden == HiddenRule::kFeedForwardLength) {
    if (!n_ff) fail(file.label(), ": missing metadata key '", key(c, "feed_forward_length"), "'");
    c.expert_hidden = *n_ff;
    c.expert_hidden_from = key(c, "feed_forward_length");
  } else if (expert_ff) {
    c.expert_hidden = *expert_ff;
    c.expert_hidden_from = key(c, "expert_feed_forward_length");
  } else if (rules->hidden == HiddenRule::kExpertKeyOrFfnOverK && n_ff) {
    c.expert_hidden = *n_ff / c.expert_used_count;
    c.expert_hidden_from = key(c, "feed_forward_length") + " / expert_used_count";
  } else {
    fail(file.label(), ": missing metadata key '", key(c, "expert_feed_forward_length"), "'");
  }
  const auto shared_ff = [&] { return file.get_u32(key(c, "expert_shared_feed_forward_length")); };
  switch (rules->shared) {
    case SharedRule::kNone: break;
    case SharedRule::kSharedLength: c.shared_hidden = shared_ff().value_or(n_ff.value_or(0)); break;
    case SharedRule::kSharedLengthOrNone: c.shared_hidden = shared_ff().value_or(0); break;
    case SharedRule::kExpertHidden: c.shared_hidden = c.expert_hidden; break;
    case SharedRule::kSharedLengthOrHidden: {
      const uint32_t length = shared_ff().value_or(0);
      c.shared_hidden = length ? length : c.expert_hidden;
      break;
    }
    case SharedRule::kCountedLengthOrCount: {
      const uint64_t count = file.get_u32(key(c, "expert_shared_count")).value_or(0);
      const uint64_t length = shared_ff().value_or(0);
      const uint64_t hidden = count == 0 ? 0 : length ? length : count * c.expert_hidden;
      if (hidden > UINT32_MAX) fail(file.label(), ": shared expert hidden size ", hidden, " is too large");
      c.shared_hidden = static_cast<uint32_t>(hidden);
      break;
    }
    case SharedRule::kSharedLengthOrAtLeastOneTimesHidden: {
      const uint32_t length = shared_ff().value_or(0);
      const uint64_t hidden =
          length ? length : uint64_t{c.expert_hidden} * std::max(file.require_u32(key(c, "expert_shared_count")), 1u);
      if (hidden > UINT32_MAX) fail(file.label(), ": shared expert hidden size ", hidden, " is too large");
      c.shared_hidden = static_cast<uint32_t>(hidden);
      break;
    }
    case SharedRule::kAtLeastOneTimesHidden: {
      const uint64_t hidden = uint64_t{c.expert_hidden} * std::max(file.require_u32(key(c, "expert_shared_count")), 1u);
      if (hidden > UINT32_MAX) fail(file.label(), ": shared expert hidden size ", hidden, " is too large");
      c.shared_hidden = static_cast<uint32_t>(hidden);
      break;
    }
    case SharedRule::kCountTimesHidden:
    case SharedRule::kCountTimesSharedLength: {
      const uint32_t count = file.require_u32(key(c, "expert_shared_count"));
      const uint32_t each = rules->shared == SharedRule::kCountTimesSharedLength ? shared_ff().value_or(c.expert_hidden)
                                                                                 : c.expert_hidden;
      const uint64_t hidden = uint64_t{each} * count;
      if (hidden > UINT32_MAX) fail(file.label(), ": shared expert hidden size ", hidden, " is too large");
      c.shared_hidden = static_cast<uint32_t>(hidden);
      break;
    }
  }
  c.shared_gate = rules->shared_gate;
  c.shared_fused_up = rules->shared_fused_up;
  c.shared_optional = rules->shared_optional;
  c.selection_bias = rules->selection_bias;
  c.selection_bias_name = rules->selection_bias_name;
  c.selection_bias_required = rules->selection_bias_required;
  c.merged_gate_up = rules->merged_gate_up;
  if (rules->leading_dense) c.leading_dense_blocks = file.get_u32(key(c, "leading_dense_block_count")).value_or(0);
  if (rules->moe_layer_step) {
    c.moe_layer_step = file.require_u32(key(c, "interleave_moe_layer_step"));
    if (c.moe_layer_step == 0) fail(file.label(), ": metadata key '", key(c, "interleave_moe_layer_step"), "' is 0");
  }
  switch (rules->gating) {
    case GatingRule::kSoftmax: c.gating = GgufGating::kSoftmax; break;
    case GatingRule::kSigmoid: c.gating = GgufGating::kSigmoid; break;
    case GatingRule::kSoftmaxWeight: c.gating = GgufGating::kSoftmaxWeight; break;
    case GatingRule::kKeyOrSoftmax:
    case GatingRule::kKeyOrSigmoid:
    case GatingRule::kKeyRequired: {
      const std::optional<uint32_t> gating = file.get_u32(key(c, "expert_gating_func"));
      if (rules->gating == GatingRule::kKeyRequired && gating.value_or(0) == 0)
        fail(file.label(), ": metadata key '", key(c, "expert_gating_func"), "' is ",
             gating ? "0 (none)" : "missing", "; llama.cpp's ", c.architecture,
             " graph needs 1 (softmax), 2 (sigmoid), 3 (softmax over the selected logits) or 4 (sqrt-softplus)");
      const uint32_t g = gating.value_or(0) != 0 ? *gating : rules->gating == GatingRule::kKeyOrSigmoid ? 2 : 1;
      if (g == 2) {
        c.gating = GgufGating::kSigmoid;
      } else if (g == 3) {
        c.gating = GgufGating::kSoftmaxWeight;
      } else if (g == 4) {
        c.gating = GgufGating::kSqrtSoftplus;
      } else if (g > 4) {
        fail(file.label(), ": metadata key '", key(c, "expert_gating_func"), "' is ", g,
             "; hymoe runs 1 (softmax), 2 (sigmoid), 3 (softmax over the selected logits) and 4 (sqrt-softplus)");
      }
      break;
    }
  }
  c.norm_weights = rules->norm_weights ? *rules->norm_weights
                                       : file.get_bool(key(c, "expert_weights_norm")).value_or(false);
  if (rules->reads_scale) c.weights_scale = file.get_f32(key(c, "expert_weights_scale")).value_or(0.0f);
  c.biases = rules->biases;
  c.weight_before_ffn = rules->weight_before_ffn;
  c.swiglu_oai = rules->swiglu_oai;
  c.ungated_relu2 = rules->ungated_relu2;
  if (rules->hash_layers) c.hash_layer_count = file.require_u32(key(c, "hash_layer_count"));
  c.shared_average = rules->shared_average;
  c.reads_swiglu_clamp = rules->swiglu_clamp != GgufArchitecture::Clamp::kNone;
  c.swiglu_clamp_required = rules->swiglu_clamp == GgufArchitecture::Clamp::kRequired;
  c.swiglu_clamp_after_silu = rules->clamp_after_silu;
  c.shared_swiglu_clamp = rules->shared_swiglu_clamp != GgufArchitecture::SharedClamp::kNone;
  c.shared_swiglu_clamp_else_routed = rules->shared_swiglu_clamp == GgufArchitecture::SharedClamp::kOwnKeyElseRouted;
  c.group_count = file.get_u32(key(c, "expert_group_count")).value_or(0);
  c.group_used_count = file.get_u32(key(c, "expert_group_used_count")).value_or(0);
  if (c.group_count > 1) {
    if (c.expert_count % c.group_count != 0 || c.group_count >= c.expert_count)
      fail(file.label(), ": metadata key '", key(c, "expert_group_count"), "' is ", c.group_count,
           ", which does not split expert_count = ", c.expert_count, " into groups");
    if (c.group_used_count == 0 || c.group_used_count > c.group_count)
      fail(file.label(), ": metadata key '", key(c, "expert_group_used_count"), "' is ", c.group_used_count,
           ", expected 1 .. expert_group_count = ", c.group_count);
  }
  if (c.expert_hidden == 0) fail(file.label(), ": expert hidden size (", c.expert_hidden_from, ") is 0");
  return c;
}

uint64_t GgufMoeBlock::expert_bytes(uint32_t expert_count) const {
  if (split_experts()) return gate_split[0]->nbytes + up_split[0]->nbytes + down_split[0]->nbytes;
  if (gate_up_exps) return (gate_up_exps->nbytes + down_exps->nbytes) / expert_count;
  return ((gate_exps ? gate_exps->nbytes : 0) + up_exps->nbytes + down_exps->nbytes) / expert_count;
}

uint64_t GgufMoeBlock::total_bytes() const {
  uint64_t total = 0;
  for (const auto* split : {&gate_split, &up_split, &down_split})
    for (const GgufTensorInfo* t : *split) total += t->nbytes;
  for (const GgufTensorInfo* t : {router, gate_exps, up_exps, gate_up_exps, down_exps, exp_probs_b, gate_shexp, up_shexp, down_shexp,
                                  gate_inp_shexp, router_bias, gate_exps_bias, up_exps_bias, down_exps_bias})
    if (t) total += t->nbytes;
  return total;
}

bool gguf_block_is_moe(const GgufFile& file, uint32_t block) {
  return file.contains("blk." + std::to_string(block) + ".ffn_gate_inp.weight");
}

GgufMoeBlock find_gguf_moe_block(const GgufFile& file, const GgufMoeConfig& c, uint32_t block) {
  if (c.expert_count == 0) fail(file.label(), ": the model has no experts ('", key(c, "expert_count"), "' absent or 0)");
  if (block >= c.block_count)
    fail(file.label(), ": block ", block, " does not exist (", key(c, "block_count"), " = ", c.block_count, ")");
  if (block < c.leading_dense_blocks)
    fail(file.label(), ": block ", block, " is dense (", key(c, "leading_dense_block_count"), " = ",
         c.leading_dense_blocks, ")");
  if ((block + 1) % c.moe_layer_step != 0)
    fail(file.label(), ": block ", block, " is dense (", key(c, "interleave_moe_layer_step"), " = ", c.moe_layer_step,
         ": blocks b with (b + 1) % step == 0 are MoE)");
  if (block < c.hash_layer_count)
    fail(file.label(), ": block ", block, " chooses its experts by token id from ffn_gate_tid2eid (",
         key(c, "hash_layer_count"), " = ", c.hash_layer_count, "), which hymoe's layer, given only x, does not run");
  const std::string prefix = "blk." + std::to_string(block) + ".";
  const uint64_t D = c.embedding_length, H = c.expert_hidden, E = c.expert_count, Hs = c.shared_hidden;
  // A tensor with the expected ne (trailing 1s may be omitted, as ggml fills them) and a decodable type.
  auto get = [&](const std::string& name, std::array<uint64_t, 4> ne, bool required) -> const GgufTensorInfo* {
    const GgufTensorInfo* t = file.find_tensor(prefix + name);
    if (!t) {
      if (required) fail(file.label(), ": missing tensor '", prefix + name, "' of MoE block ", block);
      return nullptr;
    }
    if (t->ne != ne) {
      std::string want = "[";
      uint32_t dims = 4;
      while (dims > 1 && ne[dims - 1] == 1) --dims;
      for (uint32_t d = 0; d < dims; ++d) want += (d ? ", " : "") + std::to_string(ne[d]);
      fail(file.label(), ": tensor ", quote_for_message(t->name), " has ne = ", t->ne_text(), ", expected ", want, "] (D = ", D,
           ", H = ", H, ", E = ", E, Hs ? ", shared H = " + std::to_string(Hs) : std::string(), ")");
    }
    if (!can_dequantize(t->type))
      fail(file.label(), ": tensor ", quote_for_message(t->name), " has type ", ggml_type_name(t->type),
           ", which hymoe does not decode (", decodable_type_names(), ")");
    return t;
  };
  GgufMoeBlock b;
  b.block = block;
  b.router = get("ffn_gate_inp.weight", {D, E, 1, 1}, true);
  if (!file.find_tensor(prefix + "ffn_gate_exps.weight") && file.find_tensor(prefix + "ffn_gate.0.weight")) {
    // One tensor per expert, as llama.cpp's converter wrote early Mixtral files; llama.cpp merges each projection's
    // tensors into one of the first expert's type, for its 'llama' architecture only.
    if (c.architecture != "llama")
      fail(file.label(), ": MoE block ", block, " stores one tensor per expert ('", prefix,
           "ffn_gate.0.weight', ...), a layout llama.cpp reads for the 'llama' architecture only, not '",
           c.architecture, "'");
    auto split = [&](const char* projection, std::array<uint64_t, 4> ne, std::vector<const GgufTensorInfo*>& out) {
      for (uint64_t e = 0; e < E; ++e) {
        const GgufTensorInfo* t = get(std::string(projection) + "." + std::to_string(e) + ".weight", ne, true);
        if (e > 0 && t->type != out[0]->type)
          fail(file.label(), ": tensor ", quote_for_message(t->name), " has type ", ggml_type_name(t->type),
               " but expert 0's has type ", ggml_type_name(out[0]->type),
               ": llama.cpp merges a projection's split experts into one tensor of one type");
        out.push_back(t);
      }
    };
    split("ffn_gate", {D, H, 1, 1}, b.gate_split);
    split("ffn_up", {D, H, 1, 1}, b.up_split);
    split("ffn_down", {H, D, 1, 1}, b.down_split);
  } else if (c.merged_gate_up && file.find_tensor(prefix + "ffn_gate_up_exps.weight")) {
    b.gate_up_exps = get("ffn_gate_up_exps.weight", {D, 2 * H, E, 1}, true);
    b.down_exps = get("ffn_down_exps.weight", {H, D, E, 1}, true);
  } else {
    if (!c.ungated_relu2) b.gate_exps = get("ffn_gate_exps.weight", {D, H, E, 1}, true);
    b.up_exps = get("ffn_up_exps.weight", {D, H, E, 1}, true);
    b.down_exps = get("ffn_down_exps.weight", {H, D, E, 1}, true);
  }
  // A latent projection around the experts (nemotron_h_moe's ffn_latent_down / ffn_latent_up) changes their input
  // and output: a block that has one is refused rather than run without it.
  if (file.find_tensor(prefix + "ffn_latent_down.weight"))
    fail(file.label(), ": MoE block ", block, " projects the experts' input into a latent space ('", prefix,
         "ffn_latent_down.weight'), which hymoe's layer does not have");
  // Per-expert scales (ffn_*_exps.scale, NVFP4 files' second level) multiply the experts' outputs in the graphs that
  // pass them; hymoe does not apply them, so a block that has them is refused rather than run without.
  for (const char* projection : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps", "ffn_gate_up_exps"})
    if (file.find_tensor(prefix + projection + ".scale"))
      fail(file.label(), ": MoE block ", block, " has per-expert scales '", prefix, projection,
           ".scale', which hymoe does not apply");
  if (c.selection_bias) b.exp_probs_b = get(c.selection_bias_name, {E, 1, 1, 1}, c.selection_bias_required);
  if (c.biases) {
    b.router_bias = get("ffn_gate_inp.bias", {E, 1, 1, 1}, true);
    b.gate_exps_bias = get("ffn_gate_exps.bias", {H, E, 1, 1}, true);
    b.up_exps_bias = get("ffn_up_exps.bias", {H, E, 1, 1}, true);
    b.down_exps_bias = get("ffn_down_exps.bias", {D, E, 1, 1}, true);
  }
  if (c.reads_swiglu_clamp) {
    // build_moe_ffn clamps only where the block has separate gate and up tensors, at limits above 1e-6.
    const std::string routed_key = key(c, "swiglu_clamp_exp");
    const std::optional<float> routed = file.get_f32_of_block(routed_key, block, c.block_count);
    if (!routed && c.swiglu_clamp_required) fail(file.label(), ": missing metadata key '", routed_key, "'");
    if (routed && *routed > 1e-6f && b.gate_exps) b.swiglu_limit = *routed;
    if (c.shared_swiglu_clamp) {
      const std::optional<float> own = file.get_f32_of_block(key(c, "swiglu_clamp_shexp"), block, c.block_count);
      const float shared_limit = own ? *own : c.shared_swiglu_clamp_else_routed ? routed.value_or(0.0f) : 0.0f;
      if (shared_limit > 1e-6f) b.shared_swiglu_limit = shared_limit;
    }
  }
  // A shared expert the architecture may leave out (qwen3next) is there when its gate projection is.
  const bool shared = Hs > 0 && (!c.shared_optional || file.find_tensor(prefix + "ffn_gate_shexp.weight"));
  if (Hs > 0 && c.ungated_relu2) {
    b.up_shexp = get("ffn_up_shexp.weight", {D, Hs, 1, 1}, true);
    b.down_shexp = get("ffn_down_shexp.weight", {Hs, D, 1, 1}, true);
  } else if (Hs > 0 && c.shared_fused_up) {
    b.up_shexp = get("ffn_up_shexp.weight", {D, 2 * Hs, 1, 1}, true);
    b.down_shexp = get("ffn_down_shexp.weight", {Hs, D, 1, 1}, true);
  } else if (shared) {
    b.gate_shexp = get("ffn_gate_shexp.weight", {D, Hs, 1, 1}, true);
    b.up_shexp = get("ffn_up_shexp.weight", {D, Hs, 1, 1}, true);
    b.down_shexp = get("ffn_down_shexp.weight", {Hs, D, 1, 1}, true);
    if (c.shared_gate) b.gate_inp_shexp = get("ffn_gate_inp_shexp.weight", {D, 1, 1, 1}, true);
  }
  return b;
}

}  // namespace hymoe
