// The replica planner (EPLB): replica counts by load per replica, the packing onto ranks, the deterministic
// token split, the re-balance's minimal moves, vLLM's map, and the errors.
#include "hymoe/placement/replicas.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "hymoe/error.h"

namespace hymoe::placement {
namespace {

CountTable table(std::initializer_list<std::initializer_list<double>> rows) {
  CountTable t(static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows.begin()->size()));
  int64_t l = 0;
  for (const auto& row : rows) {
    int64_t e = 0;
    for (double v : row) t.at(l, e++) = v;
    ++l;
  }
  return t;
}

// Every placement invariant: each slot holds an expert, the two maps agree, counts sum to the slots, rank loads
// are the sums of load / replicas.
void expect_consistent(const ReplicaPlacement& p, const CountTable& counts) {
  ASSERT_EQ(static_cast<int64_t>(p.layers.size()), counts.num_layers);
  for (int64_t l = 0; l < counts.num_layers; ++l) {
    const LayerReplicas& r = p.layers[static_cast<size_t>(l)];
    ASSERT_EQ(static_cast<int64_t>(r.physical_to_logical.size()), p.num_ranks * p.slots_per_rank);
    EXPECT_EQ(std::accumulate(r.logical_replica_count.begin(), r.logical_replica_count.end(), int64_t{0}),
              p.num_ranks * p.slots_per_rank);
    std::vector<double> load(static_cast<size_t>(p.num_ranks), 0.0);
    for (int64_t s = 0; s < p.num_ranks * p.slots_per_rank; ++s) {
      const int64_t e = r.physical_to_logical[static_cast<size_t>(s)];
      ASSERT_GE(e, 0);
      ASSERT_LT(e, counts.num_experts);
      const auto& slots = r.logical_to_physical[static_cast<size_t>(e)];
      EXPECT_TRUE(std::binary_search(slots.begin(), slots.end(), s));
      load[static_cast<size_t>(s / p.slots_per_rank)] +=
          counts.at(l, e) / static_cast<double>(r.logical_replica_count[static_cast<size_t>(e)]);
    }
    for (int64_t e = 0; e < counts.num_experts; ++e) {
      EXPECT_GE(r.logical_replica_count[static_cast<size_t>(e)], 1);
      EXPECT_EQ(static_cast<int64_t>(r.logical_to_physical[static_cast<size_t>(e)].size()),
                r.logical_replica_count[static_cast<size_t>(e)]);
    }
    for (int64_t k = 0; k < p.num_ranks; ++k)
      EXPECT_DOUBLE_EQ(r.rank_load[static_cast<size_t>(k)], load[static_cast<size_t>(k)]);
  }
}

// 4 experts, one hot (60 of 100), on 2 ranks of 3 slots: both spare slots go to the hot one (60/1, then 60/2 = 30
// against 20; the third replica brings it to 20 a replica), and its three replicas spread over both ranks.
TEST(Replicas, SpareSlotsGoToTheHeaviestLoadPerReplica) {
  const CountTable c = table({{60, 20, 10, 10}});
  const ReplicaPlacement p = plan_replicas(c, 2, 3);
  expect_consistent(p, c);
  EXPECT_EQ(p.layers[0].logical_replica_count, (std::vector<int64_t>{3, 1, 1, 1}));
  std::set<int64_t> ranks;
  for (int64_t s : p.layers[0].logical_to_physical[0]) ranks.insert(s / 3);
  EXPECT_EQ(ranks.size(), 2u);
  // Replica loads 20, 20, 20 (expert 0), 20, 10, 10: the heaviest-first packing splits them 50 / 50.
  EXPECT_DOUBLE_EQ(*std::max_element(p.layers[0].rank_load.begin(), p.layers[0].rank_load.end()), 50.0);
  EXPECT_DOUBLE_EQ(rank_imbalance(p)[0], 1.0);
}

// A skewed layer: replicas bring the busiest rank close to the mean, where one slot per expert cannot.
TEST(Replicas, ReplicasEvenOutTheRanks) {
  CountTable c(2, 16);
  for (int64_t e = 0; e < 16; ++e) {
    c.at(0, e) = 1000.0 / ((e + 1) * (e + 1));  // Zipf-like
    c.at(1, e) = e == 7 ? 500.0 : 10.0;         // one hot expert
  }
  const ReplicaPlacement none = plan_replicas(c, 4, 4), some = plan_replicas(c, 4, 6);
  expect_consistent(none, c);
  expect_consistent(some, c);
  for (int64_t l = 0; l < 2; ++l) {
    EXPECT_LT(rank_imbalance(some)[static_cast<size_t>(l)], rank_imbalance(none)[static_cast<size_t>(l)]);
  }
  // Zipf: 2.56 -> 1.01. One expert of 500 among fifteen of 10: 3.26 -> 1.21, the rest being the greedy counts'
  // granularity: the 8 spare slots all go to the hot expert, whose 9 replicas of 55.6 split 3/2/2/2 over 4 ranks.
  EXPECT_LT(rank_imbalance(some)[0], 1.02);
  EXPECT_LT(rank_imbalance(some)[1], 1.25);
  EXPECT_EQ(none.max_replicas(), 1);
  EXPECT_GT(some.layers[1].logical_replica_count[7], 1);
}

// A token's pair goes to replica token % count, in slot order: the same slot every time, every replica used.
TEST(Replicas, TokensSplitAmongReplicasByIndex) {
  const CountTable c = table({{60, 20, 10, 10}});
  const ReplicaPlacement p = plan_replicas(c, 2, 3);
  const auto& slots = p.layers[0].logical_to_physical[0];
  for (int64_t t = 0; t < 12; ++t) EXPECT_EQ(p.physical_slot(0, 0, t), slots[static_cast<size_t>(t % 3)]);
  EXPECT_EQ(p.physical_slot(0, 1, 5), p.layers[0].logical_to_physical[1][0]);
  // vLLM's (L, E, max_replicas) map, padded with -1.
  const std::vector<int64_t> map = p.logical_to_physical_map();
  ASSERT_EQ(map.size(), 4u * 3u);
  EXPECT_EQ(std::vector<int64_t>(map.begin(), map.begin() + 3), slots);
  EXPECT_EQ(map[3 * 1 + 1], -1);
}

// A re-balance keeps every slot whose expert still needs it: the slots that change are exactly sum max(0, new -
// old) (no placement with the new counts changes fewer); the same statistics change nothing.
TEST(Replicas, RebalanceMovesTheFewestExperts) {
  CountTable before(1, 8), after(1, 8);
  for (int64_t e = 0; e < 8; ++e) {
    before.at(0, e) = e == 0 ? 400.0 : 20.0;
    after.at(0, e) = e == 5 ? 400.0 : 20.0;
  }
  const ReplicaPlacement p = plan_replicas(before, 4, 3);
  std::vector<int64_t> moved;
  EXPECT_EQ(rebalance_replicas(p, before, &moved).layers[0].physical_to_logical, p.layers[0].physical_to_logical);
  EXPECT_EQ(moved, (std::vector<int64_t>{0}));
  const ReplicaPlacement q = rebalance_replicas(p, after, &moved);
  expect_consistent(q, after);
  const auto& old_count = p.layers[0].logical_replica_count;
  const auto& new_count = q.layers[0].logical_replica_count;
  EXPECT_EQ(new_count, plan_replicas(after, 4, 3).layers[0].logical_replica_count);
  int64_t lower_bound = 0, changed = 0;
  for (int64_t e = 0; e < 8; ++e)
    lower_bound += std::max<int64_t>(0, new_count[static_cast<size_t>(e)] - old_count[static_cast<size_t>(e)]);
  for (size_t s = 0; s < q.layers[0].physical_to_logical.size(); ++s)
    changed += q.layers[0].physical_to_logical[s] != p.layers[0].physical_to_logical[s];
  EXPECT_EQ(moved[0], lower_bound);
  EXPECT_EQ(changed, lower_bound);
  EXPECT_GT(lower_bound, 0);
}

TEST(Replicas, ErrorsNameTheValue) {
  const CountTable c = table({{1, 1, 1, 1}});
  auto error_of = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of([&] { plan_replicas(c, 0, 4); }).find("num_ranks=0 must be >= 1"), std::string::npos);
  EXPECT_NE(error_of([&] { plan_replicas(c, 1, 3); }).find("= 3 slots cannot hold the 4 experts"), std::string::npos);
  const ReplicaPlacement p = plan_replicas(c, 2, 2);
  EXPECT_NE(error_of([&] { rebalance_replicas(p, table({{1, 1, 1}})); }).find("the new statistics are (1, 3)"),
            std::string::npos);
}

}  // namespace
}  // namespace hymoe::placement
