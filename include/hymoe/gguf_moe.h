// The MoE blocks of a GGUF model as llama.cpp reads them, for the architectures hymoe knows (one declaration each in
// src/models/gguf_moe.cc): `llama` (Mixtral), `qwen2moe`, `qwen3moe`, `olmoe`, `deepseek2`, `gpt-oss`, `glm4moe`,
// `dots1`, `bailingmoe2`, `qwen3vlmoe`, `hunyuan-moe`, `qwen3next`, `ernie4_5-moe`, `deepseek`, `bailingmoe`,
// `llada-moe`, `granitemoe` and `qwen35moe`. Reads the hyperparameters (with llama.cpp's exact key types
// and fallbacks), the routing settings each architecture fixes or reads, and finds and checks one block's
// tensors (names, shapes, decodable types). Plain data over a GgufFile; nothing is read from the tensors here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hymoe/gguf.h"

namespace hymoe {

// llama.cpp's expert gating functions: softmax over all experts, sigmoid, or SOFTMAX_WEIGHT (select on the logits,
// softmax over the K selected: gpt-oss, deepseek2's expert_gating_func 3).
enum class GgufGating { kSoftmax, kSigmoid, kSoftmaxWeight, kSqrtSoftplus };

struct GgufMoeConfig {
  std::string architecture;         // general.architecture
  uint32_t block_count = 0;
  uint32_t embedding_length = 0;    // D
  uint32_t expert_count = 0;        // E (0: a dense model)
  uint32_t expert_used_count = 0;   // K
  uint32_t expert_hidden = 0;       // H of one routed expert
  std::string expert_hidden_from;   // the key (or fallback) H came from, for listings
  uint32_t shared_hidden = 0;       // hidden size of the shared expert; 0 when the architecture has none
  bool shared_optional = false;     // qwen3next: a block without ffn_gate_shexp has none
  bool shared_fused_up = false;     // granite_swa: the shared expert's gate and up rows in one ffn_up_shexp [D, 2Hs]
  bool shared_gate = false;         // qwen2moe, qwen3next: the shared expert's output is scaled by
                                    // sigmoid(ffn_gate_inp_shexp . x)
  uint32_t leading_dense_blocks = 0;  // deepseek2, glm4moe, dots1, bailingmoe2: blocks below this are dense
  bool selection_bias = false;      // the architecture reads a selection bias (exp_probs_b) where a block has it
  std::string selection_bias_name = "exp_probs_b.bias";  // its tensor under the block (hy_v3: exp_probs_b)
  bool selection_bias_required = false;  // llama.cpp refuses a MoE block without it (dots3note, laguna)
  uint32_t moe_layer_step = 1;      // ernie4_5-moe: block b is MoE iff (b + 1) % moe_layer_step == 0
  bool merged_gate_up = false;      // deepseek2, qwen3next, qwen35moe: llama.cpp reads ffn_gate_up_exps in place
                                    // of ffn_gate_exps and ffn_up_exps where a block has it
  bool biases = false;              // gpt-oss: router and experts have biases (and the clamped SwiGLU, alpha 1.702,
                                    // limit 7, which llama.cpp's graph fixes)
  bool weight_before_ffn = false;   // llama4: each expert's input is multiplied by its weight, its output is not
  uint32_t hash_layer_count = 0;    // deepseek4: blocks below it choose their experts by token id (not run)
  bool ungated_relu2 = false;       // nemotron_h_moe: experts and shared expert without a gate, relu(up x)^2
  bool swiglu_oai = false;          // minimax-m3: the clamped SwiGLU (alpha 1.702, limit 7) without biases, in the
                                    // routed and the shared experts (LLM_FFN_SWIGLU_OAI_MOE)
  bool shared_average = false;      // cohere2moe: the output is (routed + shared) / 2 where a shared expert runs
  // A SwiGLU limit per block where L > 1e-6, read from swiglu_clamp_exp (a FLOAT32 or one per block) for the routed
  // experts with separate gate and up tensors (llama.cpp skips it on merged ones): silu(min(g, L)) * clamp(u, -L, L)
  // (ggml_swiglu_clamp: maple, hy_v4, glm5-next), or min(silu(g), L) * clamp(u, -L, L) (step35, bailingmoe3). The
  // shared expert's from swiglu_clamp_shexp (glm5-next: else the routed limit).
  bool reads_swiglu_clamp = false;
  bool swiglu_clamp_required = false;
  bool swiglu_clamp_after_silu = false;
  bool shared_swiglu_clamp = false;
  bool shared_swiglu_clamp_else_routed = false;
  // Routing, as llama.cpp's build_moe_ffn runs it for the architecture.
  GgufGating gating = GgufGating::kSoftmax;
  bool norm_weights = false;        // divide the K weights by their sum (at least 6.103515625e-5)
  float weights_scale = 0.0f;       // multiply the weights by it unless it is 0 or 1
  uint32_t group_count = 0;         // group-limited routing when > 1: E / group_count consecutive experts a group
  uint32_t group_used_count = 0;
  // Which of the settings above the architecture hard-codes (llama.cpp ignores the metadata for them).
  std::string fixed_by_architecture;
};

// The general.architecture names hymoe runs, in declaration order.
std::vector<std::string> gguf_moe_architectures();

// The config of `file`. Throws naming the file and key for an absent or unknown architecture, a key of the wrong
// type, a missing required key or inconsistent values (K > E, groups that do not divide E, ...).
GgufMoeConfig read_gguf_moe_config(const GgufFile& file);

// One MoE block's tensors. Pointers into the file's tensor list; the optional ones are nullptr when absent.
struct GgufMoeBlock {
  uint32_t block = 0;
  const GgufTensorInfo* router = nullptr;     // ffn_gate_inp, ne [D, E]
  const GgufTensorInfo* router_bias = nullptr;     // gpt-oss: ffn_gate_inp.bias, ne [E]
  const GgufTensorInfo* gate_exps_bias = nullptr;  // gpt-oss: ne [H, E]
  const GgufTensorInfo* up_exps_bias = nullptr;    // gpt-oss: ne [H, E]
  const GgufTensorInfo* down_exps_bias = nullptr;  // gpt-oss: ne [D, E]
  const GgufTensorInfo* gate_exps = nullptr;  // ne [D, H, E]
  const GgufTensorInfo* gate_up_exps = nullptr;  // merged: ne [D, 2H, E], each expert's gate rows then its up rows;
                                                 // then gate_exps and up_exps are null
  const GgufTensorInfo* up_exps = nullptr;    // ne [D, H, E]
  const GgufTensorInfo* down_exps = nullptr;  // ne [H, D, E]
  const GgufTensorInfo* exp_probs_b = nullptr;     // selection-only bias (GgufMoeConfig::selection_bias), ne [E]
  const GgufTensorInfo* gate_shexp = nullptr;      // ne [D, Hs]
  const GgufTensorInfo* up_shexp = nullptr;        // ne [D, Hs]
  const GgufTensorInfo* down_shexp = nullptr;      // ne [Hs, D]
  const GgufTensorInfo* gate_inp_shexp = nullptr;  // qwen2moe, qwen3next: ne [D] or [D, 1]
  // The older split layout (early Mixtral files, architecture llama): expert e's ffn_gate.e (ne [D, H]), ffn_up.e
  // and ffn_down.e (ne [H, D]), one ggml type per projection as llama.cpp requires; then *_exps are null.
  std::vector<const GgufTensorInfo*> gate_split, up_split, down_split;

  float swiglu_limit = 0.0f;          // the routed experts' SwiGLU limit in this block; 0: none
  float shared_swiglu_limit = 0.0f;   // the shared expert's; 0: none
  bool split_experts() const { return !gate_split.empty(); }
  uint64_t expert_bytes(uint32_t expert_count) const;  // gate + up + down of one routed expert
  uint64_t total_bytes() const;                        // every tensor above
};

// Whether block `block` of `file` holds a router (ffn_gate_inp), i.e. is a MoE block.
bool gguf_block_is_moe(const GgufFile& file, uint32_t block);
// Block `block`'s MoE tensors, checked: every required tensor present, each shape as `config` says, each type
// one hymoe decodes (quant_formats.h). Throws naming the file, tensor, shape or type at fault.
GgufMoeBlock find_gguf_moe_block(const GgufFile& file, const GgufMoeConfig& config, uint32_t block);

}  // namespace hymoe
