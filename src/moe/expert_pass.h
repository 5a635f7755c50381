// The expert half of every MoE forward, written once: given a routing and its ragged batch, run the routed
// experts on exactly their rows (each row scaled by its weight), combine them in token order, and add the shared
// expert run on every token. MoELayer (training, f32 masters) and ModelMoELayer (released checkpoints, weights
// at stored precision) both call it; they differ only in how they route and how their kernels hold weights.
#pragma once

#include <cstdint>
#include <functional>

#include "kernels/ffn/grouped_ffn.h"
#include "moe/dispatch.h"

namespace hymoe {

struct ExpertPassArgs {
  const kernels::GroupedFfn* routed = nullptr;  // E groups
  const kernels::GroupedFfn* shared = nullptr;  // 1 group, or nullptr
  const float* x = nullptr;                     // (T, D)
  int64_t num_tokens = 0;
  int64_t top_k = 0;
  const Dispatch* dispatch = nullptr;
  const float* row_scale = nullptr;         // (R) per routed row, multiplying its output
  const float* input_scale = nullptr;       // (R) per routed row, multiplying its input instead (Llama 4); the
                                            // scaled rows are materialized, so row_scale must then be nullptr
  const float* shared_token_scale = nullptr;  // (T) per-token factor of the shared expert, or nullptr for 1
  bool shared_average = false;  // y = (routed + shared) / 2 (Cohere2-MoE's "average"), else routed + shared
  // Optional train-mode saves of the pre-activations: (R, H) routed, (T, H) shared; gate ones only when gated.
  float* saved_up = nullptr;
  float* saved_gate = nullptr;
  float* saved_shared_up = nullptr;
  float* saved_shared_gate = nullptr;
  float* y = nullptr;  // (T, D), overwritten
  // Called after each stage with its output, so a caller can name the stage where non-finite values appear:
  // (stage, values, count, row length, what a row is).
  std::function<void(const char*, const float*, int64_t, int64_t, const char*)> check_stage;
};

void run_expert_pass(const ExpertPassArgs& a);

}  // namespace hymoe
