// Replicated hot experts for expert parallelism (EPLB, in vLLM's vocabulary): each MoE layer's E logical experts
// are placed on R ranks of S physical slots each (R * S >= E); the spare slots hold extra replicas of the experts
// the statistics say are hot, so the ranks' expected loads even out; a token's pair with expert e goes to one of
// e's replicas, chosen deterministically from the token's index. A re-balance from new statistics moves as few
// experts as the new replica counts allow. Plain data, deterministic, no I/O (docs/placement.md, "Replicas").
#pragma once

#include <cstdint>
#include <vector>

#include "hymoe/placement/stats.h"

namespace hymoe::placement {

// One layer's placement. Physical slot p = rank * slots_per_rank + i.
struct LayerReplicas {
  std::vector<int64_t> physical_to_logical;               // (R * S): the logical expert in each slot
  std::vector<std::vector<int64_t>> logical_to_physical;  // (E): its slots, ascending
  std::vector<int64_t> logical_replica_count;             // (E), each >= 1
  std::vector<double> rank_load;                          // (R): the expected load, sum of load(e) / count(e)
};

struct ReplicaPlacement {
  int64_t num_ranks = 0, slots_per_rank = 0, num_experts = 0;
  std::vector<LayerReplicas> layers;  // (L)
  // vLLM's logical_to_physical_map: (L, E, max_replicas), padded with -1.
  std::vector<int64_t> logical_to_physical_map() const;
  int64_t max_replicas() const;
  // The slot serving token `token`'s pair with `expert` in `layer`: replica token % count, in slot order.
  int64_t physical_slot(int64_t layer, int64_t expert, int64_t token) const;
};

// Statistics and ranks to a placement. Per layer: every expert gets one replica, then each spare slot goes to the
// expert of largest load / replicas (ties: the lower id); the replicas, heaviest first (ties: expert, then
// replica), go to the least loaded rank with a free slot, preferring ranks that do not hold the expert yet (ties:
// the lower rank). Errors name the value: ranks or slots below 1, R * S < E, R * S above 2^24 slots.
ReplicaPlacement plan_replicas(const CountTable& counts, int64_t num_ranks, int64_t slots_per_rank);

// A re-balance of `current` for new statistics (same L and E): the replica counts as plan_replicas would choose
// them, each slot kept where its expert still needs that many replicas, the other slots refilled by the same
// heaviest-first rule. So the number of slots that change expert is sum over e of max(0, new count - old count),
// the fewest any placement with the new counts can have. `moved` (optional) receives that number per layer.
ReplicaPlacement rebalance_replicas(const ReplicaPlacement& current, const CountTable& counts,
                                    std::vector<int64_t>* moved = nullptr);

// max rank load / mean rank load of each layer (1 is perfect balance).
std::vector<double> rank_imbalance(const ReplicaPlacement& placement);

}  // namespace hymoe::placement
