// The --model forms of hymoe inspect, forward and bench: a released checkpoint's directory (or, for forward and
// bench, a GGUF file) in, its MoE layers described, run or timed. Kept apart from the cmd_*.cc files, which only dispatch here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hymoe::tool {

// Family, layers (dense / MoE), router settings, shared experts, dtypes, quantization and bytes.
int run_model_inspect(const std::string& dir);
// `dir` is a model directory or a GGUF file (is_gguf_model_path).
// x from `input` (F32 or BF16, (B, L, D) or (T, D)); writes y (x's shape) F32, route.indices (T, K) I64, route.weights
// (T, K) F32, router_logits (T, E) F32 and expert_counts (E) F32 to `output` atomically.
int run_model_forward(const std::string& dir, int64_t layer, const std::string& input, const std::string& output);
// Load time, resident memory against bytes on disk, then forward time per token count.
int run_model_bench(const std::string& dir, int64_t layer, const std::vector<int64_t>& tokens, int repeats, bool json);

}  // namespace hymoe::tool
