// The replica planner (hymoe/placement/replicas.h): greedy replica counts by load per replica, then a
// heaviest-first packing onto ranks; a re-balance that keeps every slot it can.
#include "hymoe/placement/replicas.h"

#include <algorithm>
#include <numeric>

#include "hymoe/error.h"

namespace hymoe::placement {
namespace {

constexpr int64_t kMaxSlots = int64_t{1} << 24;

void check_shape(const CountTable& counts, int64_t num_ranks, int64_t slots_per_rank) {
  if (num_ranks < 1) fail("replicas: num_ranks=", num_ranks, " must be >= 1");
  if (slots_per_rank < 1) fail("replicas: slots_per_rank=", slots_per_rank, " must be >= 1");
  if (num_ranks > kMaxSlots / slots_per_rank)
    fail("replicas: num_ranks=", num_ranks, " x slots_per_rank=", slots_per_rank, " exceeds ", kMaxSlots, " slots");
  if (num_ranks * slots_per_rank < counts.num_experts)
    fail("replicas: num_ranks=", num_ranks, " x slots_per_rank=", slots_per_rank, " = ", num_ranks * slots_per_rank,
         " slots cannot hold the ", counts.num_experts, " experts of a layer (each needs one)");
}

// One layer's replica counts: one each, then every spare slot to the largest load per replica (lowest id first).
std::vector<int64_t> replica_counts(const CountTable& counts, int64_t layer, int64_t slots) {
  const int64_t E = counts.num_experts;
  std::vector<int64_t> count(static_cast<size_t>(E), 1);
  for (int64_t spare = slots - E; spare > 0; --spare) {
    int64_t best = 0;
    for (int64_t e = 1; e < E; ++e)  // a / b > c / d as a * d > c * b: exact for the counts' magnitudes
      if (counts.at(layer, e) * static_cast<double>(count[static_cast<size_t>(best)]) >
          counts.at(layer, best) * static_cast<double>(count[static_cast<size_t>(e)]))
        best = e;
    ++count[static_cast<size_t>(best)];
  }
  return count;
}

// Fills the free slots (physical_to_logical == -1) with the replicas in `needed` (expert per replica still to
// place), heaviest first, each to the least loaded rank with a free slot, preferring a rank without the expert.
void pack(const CountTable& counts, int64_t layer, int64_t R, int64_t S, const std::vector<int64_t>& count,
          std::vector<int64_t> needed, LayerReplicas& out) {
  auto load_of = [&](int64_t e) { return counts.at(layer, e) / static_cast<double>(count[static_cast<size_t>(e)]); };
  std::stable_sort(needed.begin(), needed.end(), [&](int64_t a, int64_t b) {
    const double la = load_of(a), lb = load_of(b);
    return la != lb ? la > lb : a < b;
  });
  out.rank_load.assign(static_cast<size_t>(R), 0.0);
  std::vector<int64_t> free_slots(static_cast<size_t>(R), 0);
  for (int64_t p = 0; p < R * S; ++p) {
    const int64_t e = out.physical_to_logical[static_cast<size_t>(p)];
    if (e < 0) ++free_slots[static_cast<size_t>(p / S)];
    else out.rank_load[static_cast<size_t>(p / S)] += load_of(e);
  }
  auto holds = [&](int64_t rank, int64_t e) {
    for (int64_t i = 0; i < S; ++i)
      if (out.physical_to_logical[static_cast<size_t>(rank * S + i)] == e) return true;
    return false;
  };
  for (int64_t e : needed) {
    int64_t best = -1;
    bool best_without = false;
    for (int64_t r = 0; r < R; ++r) {
      if (free_slots[static_cast<size_t>(r)] == 0) continue;
      const bool without = !holds(r, e);
      if (best < 0 || (without && !best_without) ||
          (without == best_without && out.rank_load[static_cast<size_t>(r)] < out.rank_load[static_cast<size_t>(best)])) {
        best = r;
        best_without = without;
      }
    }
    HYMOE_CHECK(best >= 0, "no free slot for expert ", e);
    for (int64_t i = 0; i < S; ++i)
      if (int64_t& slot = out.physical_to_logical[static_cast<size_t>(best * S + i)]; slot < 0) {
        slot = e;
        break;
      }
    --free_slots[static_cast<size_t>(best)];
    out.rank_load[static_cast<size_t>(best)] += load_of(e);
  }
}

void index(int64_t E, LayerReplicas& out, const std::vector<int64_t>& count) {
  out.logical_replica_count = count;
  out.logical_to_physical.assign(static_cast<size_t>(E), {});
  for (int64_t p = 0; p < static_cast<int64_t>(out.physical_to_logical.size()); ++p)
    out.logical_to_physical[static_cast<size_t>(out.physical_to_logical[static_cast<size_t>(p)])].push_back(p);
}

}  // namespace

std::vector<int64_t> ReplicaPlacement::logical_to_physical_map() const {
  const int64_t width = max_replicas();
  std::vector<int64_t> out(static_cast<size_t>(static_cast<int64_t>(layers.size()) * num_experts * width), -1);
  for (size_t l = 0; l < layers.size(); ++l)
    for (int64_t e = 0; e < num_experts; ++e) {
      const auto& slots = layers[l].logical_to_physical[static_cast<size_t>(e)];
      std::copy(slots.begin(), slots.end(), out.begin() + static_cast<int64_t>(l) * num_experts * width + e * width);
    }
  return out;
}

int64_t ReplicaPlacement::max_replicas() const {
  int64_t width = 1;
  for (const auto& l : layers)
    for (int64_t c : l.logical_replica_count) width = std::max(width, c);
  return width;
}

int64_t ReplicaPlacement::physical_slot(int64_t layer, int64_t expert, int64_t token) const {
  HYMOE_CHECK(layer >= 0 && layer < static_cast<int64_t>(layers.size()) && expert >= 0 && expert < num_experts &&
              token >= 0);
  const auto& slots = layers[static_cast<size_t>(layer)].logical_to_physical[static_cast<size_t>(expert)];
  return slots[static_cast<size_t>(token % static_cast<int64_t>(slots.size()))];
}

ReplicaPlacement plan_replicas(const CountTable& counts, int64_t num_ranks, int64_t slots_per_rank) {
  check_shape(counts, num_ranks, slots_per_rank);
  ReplicaPlacement out{num_ranks, slots_per_rank, counts.num_experts, {}};
  const int64_t slots = num_ranks * slots_per_rank;
  for (int64_t l = 0; l < counts.num_layers; ++l) {
    const std::vector<int64_t> count = replica_counts(counts, l, slots);
    std::vector<int64_t> needed;
    for (int64_t e = 0; e < counts.num_experts; ++e)
      for (int64_t j = 0; j < count[static_cast<size_t>(e)]; ++j) needed.push_back(e);
    LayerReplicas layer;
    layer.physical_to_logical.assign(static_cast<size_t>(slots), -1);
    pack(counts, l, num_ranks, slots_per_rank, count, needed, layer);
    index(counts.num_experts, layer, count);
    out.layers.push_back(std::move(layer));
  }
  return out;
}

ReplicaPlacement rebalance_replicas(const ReplicaPlacement& current, const CountTable& counts,
                                    std::vector<int64_t>* moved) {
  if (counts.num_layers != static_cast<int64_t>(current.layers.size()) || counts.num_experts != current.num_experts)
    fail("replicas: the new statistics are (", counts.num_layers, ", ", counts.num_experts,
         "); the placement has ", current.layers.size(), " layers of ", current.num_experts, " experts");
  const int64_t R = current.num_ranks, S = current.slots_per_rank;
  check_shape(counts, R, S);
  ReplicaPlacement out{R, S, counts.num_experts, {}};
  if (moved) moved->assign(static_cast<size_t>(counts.num_layers), 0);
  for (int64_t l = 0; l < counts.num_layers; ++l) {
    const std::vector<int64_t> count = replica_counts(counts, l, R * S);
    LayerReplicas layer;
    layer.physical_to_logical = current.layers[static_cast<size_t>(l)].physical_to_logical;
    std::vector<int64_t> kept(static_cast<size_t>(counts.num_experts), 0);
    for (int64_t& e : layer.physical_to_logical) {  // keep a slot while its expert needs that many replicas
      if (kept[static_cast<size_t>(e)] < count[static_cast<size_t>(e)]) ++kept[static_cast<size_t>(e)];
      else e = -1;
    }
    std::vector<int64_t> needed;
    for (int64_t e = 0; e < counts.num_experts; ++e)
      for (int64_t j = kept[static_cast<size_t>(e)]; j < count[static_cast<size_t>(e)]; ++j) needed.push_back(e);
    if (moved) (*moved)[static_cast<size_t>(l)] = static_cast<int64_t>(needed.size());
    pack(counts, l, R, S, count, needed, layer);
    index(counts.num_experts, layer, count);
    out.layers.push_back(std::move(layer));
  }
  return out;
}

std::vector<double> rank_imbalance(const ReplicaPlacement& placement) {
  std::vector<double> out;
  for (const auto& l : placement.layers) {
    const double total = std::accumulate(l.rank_load.begin(), l.rank_load.end(), 0.0);
    const double mean = total / static_cast<double>(l.rank_load.size());
    const double max = *std::max_element(l.rank_load.begin(), l.rank_load.end());
    out.push_back(mean > 0 ? max / mean : 1.0);
  }
  return out;
}

}  // namespace hymoe::placement
