// What a plan buys on data other than what it was planned from: realized hit rates, predicted step time, budget
// sweeps of every strategy against the static oracle, and the replay of a per-token trace with online
// re-planning (EMA-smoothed counts, hysteresis, a cap on expert moves per re-plan).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hymoe/placement/planner.h"
#include "hymoe/placement/stats.h"
#include "hymoe/placement/trace.h"

namespace hymoe::placement {

struct Evaluation {
  double hit_rate = 0;                 // routed token-experts that land on GPU experts / all routed
  std::vector<double> layer_hit_rates;
  double routed = 0;                   // all routed token-experts in the data
  double predicted_step_seconds = 0;   // cost model on the data's per-layer shares
  double predicted_all_cpu_seconds = 0;
};
// `mask` is (L, E) row-major and must match the table's shape.
Evaluation evaluate_mask(const std::vector<uint8_t>& mask, const CountTable& data, const CostModel& cost = {});

// Options a sweep or a replay plans with. The balanced strategy gets an even floor, min = floor(budget / L) (each
// layer's hottest experts, the rest by global score), so it differs from `frequency` (which it equals at min = 0).
PlanOptions sweep_plan_options(const std::string& strategy, int64_t budget, int64_t layers, const PlanOptions& base);

struct SweepRow {
  double ratio = 0;
  int64_t budget = 0;
  std::vector<double> hit_rate;   // one per strategy_names() entry, planned on `train`, realized on `heldout`
  double oracle = 0;              // frequency planned on `heldout` itself: the best static plan for it
  std::vector<double> predicted_seconds;  // per strategy, cost model on `heldout`
};
// For each ratio: plan every strategy from `train`, evaluate on `heldout`.
std::vector<SweepRow> sweep_static(const CountTable& train, const CountTable& heldout, const std::vector<double>& ratios,
                                   const PlanOptions& base = {});

// Beyond this a resident never leaves anyway; the bound keeps (1 + hysteresis) x counts finite in float32.
inline constexpr double kMaxHysteresis = 1e6;

struct ReplayOptions {
  std::string strategy = "frequency";
  int64_t budget = 0;                // GPU experts (already resolved)
  int64_t replan_every = 128;        // tokens between re-plans, rounded up to the end of a step (forward pass)
  double ema_alpha = 0.5;            // weight of the newest window in the smoothed counts
  double hysteresis = 0.1;           // a resident expert's score counts (1 + hysteresis) times when re-planning;
                                     // at most kMaxHysteresis
  int64_t max_moves_per_replan = -1; // experts loaded per re-plan at most; -1 = no cap
  int64_t score_from = 0;            // tokens before this are learned from but not scored (rounded up to a step start)
  // Default: `strategy` planned on nothing (uniform). A smaller plan is topped up to the budget from the uniform
  // plan before the first token (those loads are not moves); a larger one is an error.
  std::optional<std::vector<uint8_t>> initial_mask;
  std::optional<uint64_t> expert_bytes;
  PlanOptions plan;                  // min/max per layer, seed, cost model
};
struct ReplayWindow {
  int64_t begin = 0, end = 0;  // tokens
  double hit_rate = 0;
  int64_t moves = 0;           // experts loaded at the re-plan that ended this window
};
struct ReplayResult {
  double hit_rate = 0;   // over scored tokens
  double routed = 0;     // scored routed token-experts
  int64_t moves = 0;     // experts loaded onto the GPU over the whole replay (the initial placement excluded)
  int64_t replans = 0;
  int64_t scored_from = 0;  // first scored token (a step start)
  // Moves are charged to the step after which they were made: warm-up steps are the unscored ones.
  int64_t warmup_steps = 0, scored_steps = 0, warmup_moves = 0, scored_moves = 0;
  double warmup_moves_per_layer_per_step = 0, scored_moves_per_layer_per_step = 0;
  int64_t initial_experts = 0;  // GPU experts of the start plan before it was topped up to the budget
  std::optional<uint64_t> bytes_moved;
  std::vector<ReplayWindow> windows;
  std::vector<uint8_t> final_mask;
};
ReplayResult replay(const RoutingTrace& trace, const ReplayOptions& options);

// A trace split in halves at the first step start at or after token T/2: every strategy planned on the first half and the replay (re-planning as
// `base` says, scored on the second half only), against the oracle of the second half.
struct TraceSweepRow {
  SweepRow statics;
  double replay = 0;
  int64_t replay_moves = 0;
};
std::vector<TraceSweepRow> sweep_trace(const RoutingTrace& trace, const std::vector<double>& ratios,
                                       const ReplayOptions& base);

}  // namespace hymoe::placement
