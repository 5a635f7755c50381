// Internal: the mask builders behind plan_gpu_expert_placement, one per strategy. Inputs are already validated
// and the budget clamped to [0, L*E]; every builder returns an (L, E) row-major mask with exactly `budget` ones.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "hymoe/placement/planner.h"

namespace hymoe::placement::detail {

// A float32 (L, E) score table viewed as plain data.
struct ScoreView {
  int64_t num_layers = 0, num_experts = 0;
  std::span<const float> values;  // (L, E)
  float at(int64_t layer, int64_t expert) const { return values[static_cast<size_t>(layer * num_experts + expert)]; }
};

// Global top-`budget`, ties by lower flat index.
std::vector<uint8_t> frequency_mask(const ScoreView& s, int64_t budget);
// Per-layer floor of `min_per_layer` hottest, then greedy by (-score, layer, expert) under `max_per_layer`.
std::vector<uint8_t> layer_balanced_mask(const ScoreView& s, int64_t budget, int64_t min_per_layer,
                                         int64_t max_per_layer);
// budget // L per layer, the first budget % L layers one more; lowest expert ids.
std::vector<uint8_t> uniform_mask(const ScoreView& s, int64_t budget);
// Whole layers from layer 0 onward, lowest expert ids.
std::vector<uint8_t> front_loading_mask(const ScoreView& s, int64_t budget);
// `budget` distinct positions drawn uniformly with a seeded generator.
std::vector<uint8_t> random_mask(const ScoreView& s, int64_t budget, uint64_t seed);
// Minimizes the predicted step time under `cost` (critical_path.cc).
std::vector<uint8_t> critical_path_mask(const ScoreView& s, int64_t budget, int64_t min_per_layer,
                                        int64_t max_per_layer, const CostModel& cost);

// Experts of one layer ordered hottest first, ties by lower expert id.
std::vector<int64_t> layer_order(const ScoreView& s, int64_t layer);

}  // namespace hymoe::placement::detail
