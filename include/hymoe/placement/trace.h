// Per-token routing traces and the activation recorder that produces counts (and optionally traces) from hymoe's
// router outputs. Plain data: the recorder takes (layer, expert ids[, scores]) batches, the layout of
// `Routing::indices` (T, K) int32, and knows nothing of the MoE layer.
//
// Trace CSV: a header naming the columns, one row per (token, layer):
//   token,step,layer,e1,...,eK[,w1,...,wK]
// `token` (alias `row`) identifies the token, `step` (alias `forward_pass`, optional) its forward pass, `layer`
// the model layer; e1..eK the selected experts (slot 1 = highest score, -1 = none) and w1..wK their scores. Other
// columns are ignored, so the vLLM logger's `row,forward_pass,row_in_forward_pass,layer,e1..e4,w1..w4` reads as is.
// Tokens are ordered by (step, token), whatever the row order of the file; a token has one step, and a (token,
// layer) pair may appear once.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hymoe/placement/stats.h"

namespace hymoe::placement {

// Entries (tokens x layers x K) a trace may hold; larger ones are rejected before allocation.
inline constexpr int64_t kMaxTraceEntries = int64_t{1} << 26;

struct RoutingTrace {
  int64_t num_tokens = 0, num_layers = 0, num_experts = 0, top_k = 0;
  std::vector<int64_t> layer_ids;  // (L) model layer of each trace layer, ascending
  std::vector<int64_t> steps;      // (T) forward pass of each token; -1 when unknown
  std::vector<int32_t> experts;    // (T, L, K); -1 = no expert (never counted)
  std::vector<float> weights;      // (T, L, K), or empty when the trace has no scores

  int32_t expert(int64_t token, int64_t layer, int64_t slot) const {
    return experts[static_cast<size_t>((token * num_layers + layer) * top_k + slot)];
  }
  // Per-(layer, expert) routed-token counts of tokens [begin, end).
  CountTable counts(int64_t begin, int64_t end) const;
  CountTable counts() const { return counts(0, num_tokens); }
};

// `num_experts`: the layer width when known; otherwise the largest id + 1. Ids >= num_experts are errors.
RoutingTrace parse_trace_csv(std::string_view text, const std::string& label,
                             std::optional<int64_t> num_experts = std::nullopt);
RoutingTrace read_trace_csv(const std::string& path, std::optional<int64_t> num_experts = std::nullopt);
std::string trace_to_csv(const RoutingTrace& trace);

// A count table from either kind of file, opened once: a count file (.json, .csv with header
// `layer,expert,count`, .safetensors), or a trace CSV (a header without `count`), whose selections are counted. A
// stream (`<(...)`, /dev/stdin) is read whole within kMaxTextFileBytes; its format is its name's, or when the name
// has no known extension, what its first bytes show. The array form keeps a count file's rank as stored.
StatsArray read_counts_array_or_trace(const std::string& path, std::optional<int64_t> num_experts = std::nullopt);
CountTable read_counts_or_trace(const std::string& path, std::optional<int64_t> num_experts = std::nullopt);

// Accumulates routed-token counts per (layer, expert) for one model. Off by default: a disabled recorder costs
// one predictable branch per call. Not thread-safe: one recorder per model, fed from the thread that runs the
// layers (or merged afterwards with CountTable::add).
class ActivationRecorder {
 public:
  ActivationRecorder(int64_t num_layers, int64_t num_experts);

  void set_enabled(bool on) { enabled_ = on; }
  bool enabled() const { return enabled_; }
  // Also keep the per-token trace (ids, and scores when given). Memory grows with tokens x layers x K.
  void set_trace_enabled(bool on) { trace_enabled_ = on; }

  // One layer's routing for a batch: `ids` is (T, K) row-major; `scores` is empty or (T, K). Ids outside
  // [0, num_experts) (padding, -1, dropped slots) are not counted; they are tallied in invalid_ids().
  void record(int64_t layer, std::span<const int32_t> ids, int64_t top_k, std::span<const float> scores = {}) {
    if (enabled_) record_enabled(layer, ids, top_k, scores);
  }

  const CountTable& counts() const { return counts_; }
  int64_t invalid_ids() const { return invalid_ids_; }
  // The trace recorded so far (tokens numbered per layer in arrival order; layers with fewer tokens are padded
  // with -1).
  RoutingTrace trace() const;
  void reset();

 private:
  void record_enabled(int64_t layer, std::span<const int32_t> ids, int64_t top_k, std::span<const float> scores);

  bool enabled_ = false, trace_enabled_ = false;
  CountTable counts_;
  int64_t invalid_ids_ = 0;
  int64_t top_k_ = 0;
  bool has_scores_ = false;
  std::vector<std::vector<int32_t>> trace_ids_;     // per layer: (T_l, K)
  std::vector<std::vector<float>> trace_scores_;    // per layer: (T_l, K) when scores were given
};

}  // namespace hymoe::placement
