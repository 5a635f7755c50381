// The critical-path planner and the cost model it plans with (docs/placement.md, "Cost model").
//
// In hybrid execution a MoE layer finishes when both its CPU part and its GPU part have finished, so a step costs
// sum over layers of max(cpu_time, gpu_time). For a fixed number k of GPU experts in a layer the hottest k are
// always the best choice (they move the most work off the CPU, and the GPU side is the cheap one), so a plan is a
// vector of per-layer counts. We pick it in three steps:
//   1. greedy: start from the per-layer minimum and give each next GPU slot to the layer whose predicted time
//      falls the most (a heap over layers; exact when every layer's time is convex in k, which holds while the
//      CPU side is the bottleneck);
//   2. the same counts as the global top-k (frequency) plan, when they satisfy the bounds;
//   3. from each of these, local search with two kinds of moves until neither improves: move one slot between
//      two layers, and fill one layer completely with slots taken from the cheapest layers (a layer entirely on
//      the GPU no longer pays the CPU side's fixed overhead, a gain no single move sees).
// The best plan found is returned, so the planner is never worse than frequency under its own model.
#include <algorithm>
#include <cmath>
#include <queue>

#include "placement/strategies.h"

namespace hymoe::placement {

double predicted_layer_seconds(double gpu_share, bool cpu_has_work, bool gpu_has_work, const CostModel& cost) {
  const double cpu = cpu_has_work ? cost.cpu_layer_overhead_seconds +
                                        cost.cpu_seconds_per_token_expert * cost.routed_per_step * (1.0 - gpu_share)
                                  : 0.0;
  const double gpu = gpu_has_work
                         ? cost.gpu_layer_overhead_seconds + cost.gpu_seconds_per_token_expert * cost.routed_per_step * gpu_share
                         : 0.0;
  return std::max(cpu, gpu);
}

double predicted_step_seconds(const Tensor& scores, const std::vector<uint8_t>& mask, const CostModel& cost) {
  const int64_t layers = scores.dim(0), experts = scores.dim(1);
  double seconds = 0;
  for (int64_t l = 0; l < layers; ++l) {
    double gpu = 0, total = 0;
    for (int64_t e = 0; e < experts; ++e) {
      const double v = std::max(0.0f, scores[l * experts + e]);
      total += v;
      if (mask[static_cast<size_t>(l * experts + e)]) gpu += v;
    }
    if (total > 0) seconds += predicted_layer_seconds(gpu / total, total - gpu > 0, gpu > 0, cost);
  }
  return seconds;
}

namespace detail {
namespace {

// Per layer: time as a function of the number k of GPU experts (the hottest k), precomputed for k = 0..E.
struct LayerCurves {
  int64_t layers = 0, experts = 0;
  std::vector<double> time;  // (L, E+1)
  double at(int64_t layer, int64_t k) const { return time[static_cast<size_t>(layer * (experts + 1) + k)]; }
};

LayerCurves layer_curves(const ScoreView& s, const std::vector<std::vector<int64_t>>& orders, const CostModel& cost) {
  LayerCurves c{s.num_layers, s.num_experts, {}};
  c.time.resize(static_cast<size_t>(s.num_layers * (s.num_experts + 1)));
  for (int64_t l = 0; l < s.num_layers; ++l) {
    double total = 0;
    for (int64_t e = 0; e < s.num_experts; ++e) total += std::max(0.0f, s.at(l, e));
    double gpu = 0;
    for (int64_t k = 0; k <= s.num_experts; ++k) {
      if (k > 0) gpu += std::max(0.0f, s.at(l, orders[static_cast<size_t>(l)][static_cast<size_t>(k - 1)]));
      c.time[static_cast<size_t>(l * (s.num_experts + 1) + k)] =
          total > 0 ? predicted_layer_seconds(gpu / total, total - gpu > 0, gpu > 0, cost) : 0.0;
    }
  }
  return c;
}

double total_time(const LayerCurves& c, const std::vector<int64_t>& k) {
  double t = 0;
  for (int64_t l = 0; l < c.layers; ++l) t += c.at(l, k[static_cast<size_t>(l)]);
  return t;
}

std::vector<int64_t> greedy_counts(const LayerCurves& c, int64_t budget, int64_t lo, int64_t hi) {
  std::vector<int64_t> k(static_cast<size_t>(c.layers), lo);
  using Item = std::pair<double, int64_t>;  // (time change of one more slot, layer): smallest first, then layer
  std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
  auto push = [&](int64_t l) {
    const int64_t n = k[static_cast<size_t>(l)];
    if (n < hi) heap.emplace(c.at(l, n + 1) - c.at(l, n), l);
  };
  for (int64_t l = 0; l < c.layers; ++l) push(l);
  for (int64_t left = budget - lo * c.layers; left > 0 && !heap.empty(); --left) {
    const int64_t l = heap.top().second;
    heap.pop();
    ++k[static_cast<size_t>(l)];
    push(l);
  }
  return k;
}

// Relative improvement below which a move is not worth making (keeps the search finite and deterministic).
constexpr double kMinGain = 1e-12;

// Moves one slot between layers while that lowers the predicted time. Returns true if anything changed. The best
// move pairs the cheapest removal with the cheapest addition in another layer, so keeping the two cheapest of each
// makes an iteration O(L).
bool single_moves(const LayerCurves& c, std::vector<int64_t>& k, int64_t lo, int64_t hi) {
  bool changed = false;
  for (int64_t iter = 0; iter < 4 * (c.layers * c.experts + 1); ++iter) {
    struct Two {
      double cost[2] = {INFINITY, INFINITY};
      int64_t layer[2] = {-1, -1};
      void offer(double v, int64_t l) {
        if (v < cost[0]) cost[1] = cost[0], layer[1] = layer[0], cost[0] = v, layer[0] = l;
        else if (v < cost[1]) cost[1] = v, layer[1] = l;
      }
    } remove, add;
    for (int64_t l = 0; l < c.layers; ++l) {
      const int64_t n = k[static_cast<size_t>(l)];
      if (n > lo) remove.offer(c.at(l, n - 1) - c.at(l, n), l);
      if (n < hi) add.offer(c.at(l, n + 1) - c.at(l, n), l);
    }
    double best = INFINITY;
    int64_t from = -1, to = -1;
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b)
        if (remove.layer[a] >= 0 && add.layer[b] >= 0 && remove.layer[a] != add.layer[b] &&
            remove.cost[a] + add.cost[b] < best)
          best = remove.cost[a] + add.cost[b], from = remove.layer[a], to = add.layer[b];
    if (from < 0 || best > -kMinGain * std::max(1e-30, total_time(c, k))) break;
    --k[static_cast<size_t>(from)];
    ++k[static_cast<size_t>(to)];
    changed = true;
  }
  return changed;
}

// Tries, for every layer not yet entirely on the GPU, taking the slots it lacks from the layers where losing one
// costs least; applies the best such move if it lowers the predicted time.
bool fill_layer_moves(const LayerCurves& c, std::vector<int64_t>& k, int64_t lo, int64_t hi) {
  const double before = total_time(c, k);
  double best_time = before;
  std::vector<int64_t> best;
  for (int64_t j = 0; j < c.layers; ++j) {
    const int64_t need = hi - k[static_cast<size_t>(j)];
    if (need <= 0) continue;
    std::vector<int64_t> trial = k;
    trial[static_cast<size_t>(j)] = hi;
    using Item = std::pair<double, int64_t>;
    std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
    auto push = [&](int64_t l) {
      const int64_t n = trial[static_cast<size_t>(l)];
      if (l != j && n > lo) heap.emplace(c.at(l, n - 1) - c.at(l, n), l);
    };
    for (int64_t l = 0; l < c.layers; ++l) push(l);
    int64_t taken = 0;
    for (; taken < need && !heap.empty(); ++taken) {
      const int64_t l = heap.top().second;
      heap.pop();
      --trial[static_cast<size_t>(l)];
      push(l);
    }
    if (taken < need) continue;
    const double t = total_time(c, trial);
    if (t < best_time - kMinGain * std::max(1e-30, before)) best_time = t, best = trial;
  }
  if (best.empty()) return false;
  k = best;
  return true;
}

void local_search(const LayerCurves& c, std::vector<int64_t>& k, int64_t lo, int64_t hi) {
  for (int round = 0; round < 64; ++round) {
    const bool moved = single_moves(c, k, lo, hi);
    if (!fill_layer_moves(c, k, lo, hi) && !moved) break;
  }
}

}  // namespace

std::vector<uint8_t> critical_path_mask(const ScoreView& s, int64_t budget, int64_t min_per_layer,
                                        int64_t max_per_layer, const CostModel& cost) {
  std::vector<std::vector<int64_t>> orders;
  for (int64_t l = 0; l < s.num_layers; ++l) orders.push_back(layer_order(s, l));
  const LayerCurves curves = layer_curves(s, orders, cost);

  std::vector<std::vector<int64_t>> starts = {greedy_counts(curves, budget, min_per_layer, max_per_layer)};
  std::vector<int64_t> freq_counts(static_cast<size_t>(s.num_layers), 0);
  const std::vector<uint8_t> freq = frequency_mask(s, budget);
  for (size_t i = 0; i < freq.size(); ++i) freq_counts[i / static_cast<size_t>(s.num_experts)] += freq[i];
  const bool freq_in_bounds = std::all_of(freq_counts.begin(), freq_counts.end(),
                                          [&](int64_t n) { return n >= min_per_layer && n <= max_per_layer; });
  if (freq_in_bounds) starts.push_back(freq_counts);

  std::vector<int64_t> best;
  double best_time = 0;
  for (auto& k : starts) {
    local_search(curves, k, min_per_layer, max_per_layer);
    const double t = total_time(curves, k);
    if (best.empty() || t < best_time) best = k, best_time = t;
  }
  // A plan no faster than frequency's is frequency's, mask and all: ties between equally fast plans break the way
  // `frequency` breaks them (lower flat index), not by the order the search happened to visit them.
  if (freq_in_bounds) {
    const double freq_time = total_time(curves, freq_counts);
    if (!(best_time < freq_time - kMinGain * std::max(1e-30, freq_time))) return freq;
  }
  std::vector<uint8_t> mask(static_cast<size_t>(s.num_layers * s.num_experts), 0);
  for (int64_t l = 0; l < s.num_layers; ++l)
    for (int64_t i = 0; i < best[static_cast<size_t>(l)]; ++i)
      mask[static_cast<size_t>(l * s.num_experts + orders[static_cast<size_t>(l)][static_cast<size_t>(i)])] = 1;
  return mask;
}

}  // namespace detail
}  // namespace hymoe::placement
