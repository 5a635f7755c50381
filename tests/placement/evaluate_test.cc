// Evaluation on held-out data, budget sweeps, and the replay with re-planning on synthetic traces whose answers
// are known (the real Qwen trace has no licence and stays out of the tests; docs/placement.md reports it).
#include <gtest/gtest.h>

#include <limits>

#include "hymoe/error.h"
#include "hymoe/placement.h"
#include "hymoe/rng.h"
#include "test_util.h"

namespace hymoe::test {
namespace {

using namespace hymoe::placement;

// 2 layers x 8 experts, top-2. Tokens [0, switch_at) pick experts {0, 1} at both layers, later ones {4, 5}.
RoutingTrace drifting_trace(int64_t tokens, int64_t switch_at) {
  RoutingTrace t;
  t.num_tokens = tokens;
  t.num_layers = 2;
  t.num_experts = 8;
  t.top_k = 2;
  t.layer_ids = {0, 1};
  t.steps.assign(static_cast<size_t>(tokens), -1);
  for (int64_t i = 0; i < tokens; ++i)
    for (int64_t l = 0; l < 2; ++l) {
      const int32_t base = i < switch_at ? 0 : 4;
      t.experts.push_back(base);
      t.experts.push_back(base + 1);
    }
  return t;
}

// Uniformly random routing: every re-plan sees noise, nothing to learn.
RoutingTrace noisy_trace(int64_t tokens, uint64_t seed) {
  RoutingTrace t = drifting_trace(tokens, tokens);
  Rng rng(seed);
  for (auto& e : t.experts) e = static_cast<int32_t>(rng.below(8));
  return t;
}

TEST(Evaluate, HitRatePerLayerAndOverall) {
  CountTable data(2, 2);
  data.counts = {3, 1, 0, 4};
  const Evaluation ev = evaluate_mask({1, 0, 1, 0}, data);
  EXPECT_DOUBLE_EQ(ev.hit_rate, 3.0 / 8.0);
  EXPECT_EQ(ev.layer_hit_rates, (std::vector<double>{0.75, 0.0}));
  EXPECT_DOUBLE_EQ(ev.routed, 8);
  EXPECT_THROW(evaluate_mask({1, 0, 1}, data), Error);
}

TEST(Evaluate, OracleBoundsEveryStaticPlanOnRealHeldOutData) {
  // OLMoE: plan from four text domains, score on GitHub (Apache-2.0 data, tests/data/placement).
  CountTable train;
  for (const std::string d : {"arxiv", "book", "c4", "wikipedia"}) {
    const CountTable t = read_counts(data_dir() + "/placement/olmoe_" + d + ".csv");
    if (train.counts.empty()) train = t;
    else train.add(t, d);
  }
  const CountTable github = read_counts(data_dir() + "/placement/olmoe_github.csv");
  const auto rows = sweep_static(train, github, {0.1, 0.25, 0.5});
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1].budget, 48);  // int(192 * 0.25)
  for (const auto& row : rows) {
    for (double h : row.hit_rate) EXPECT_LE(h, row.oracle + 1e-12);
    EXPECT_GT(row.hit_rate[0], row.hit_rate[4]);  // frequency beats random even across domains
  }
  // Domain transfer is poor (PROVENANCE: ~29% vs ~52% oracle at 25% across domains).
  EXPECT_LT(rows[1].hit_rate[0], 0.8 * rows[1].oracle);
}

TEST(Replay, FollowsADriftThatDefeatsAStaticPlan) {
  const RoutingTrace t = drifting_trace(256, 128);
  ReplayOptions o;
  o.budget = 4;
  o.replan_every = 16;
  o.score_from = 128;
  o.expert_bytes = 100;
  const ReplayResult r = replay(t, o);
  const Placement fixed = plan_gpu_expert_placement(t.counts(0, 128).to_scores(), 4, "frequency");
  EXPECT_EQ(evaluate_mask(fixed.mask, t.counts(128, 256)).hit_rate, 0.0);
  // The first window after the switch misses; the EMA needs a second one to overtake the hysteresis.
  EXPECT_DOUBLE_EQ(r.hit_rate, 6.0 / 8.0);
  EXPECT_EQ(r.moves, 4);  // {0,1} -> {4,5} at both layers, once
  ASSERT_TRUE(r.bytes_moved.has_value());
  EXPECT_EQ(*r.bytes_moved, 400u);
  EXPECT_EQ(r.replans, 15);
  EXPECT_EQ(r.final_mask, (std::vector<uint8_t>{0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0}));
}

TEST(Replay, MoveCapAndHysteresisLimitThrashing) {
  const RoutingTrace t = noisy_trace(2048, 3);
  ReplayOptions o;
  o.budget = 6;
  o.replan_every = 32;
  o.hysteresis = 0;
  const ReplayResult free = replay(t, o);
  o.hysteresis = 1.0;
  const ReplayResult sticky = replay(t, o);
  EXPECT_LT(sticky.moves, free.moves / 2);
  o.hysteresis = 0;
  o.max_moves_per_replan = 1;
  const ReplayResult capped = replay(t, o);
  for (const auto& w : capped.windows) EXPECT_LE(w.moves, 1);
  EXPECT_GT(capped.moves, 0);
  // Bounded strategies keep their per-layer bounds through capped re-plans.
  o.strategy = "score_aware_layer_balanced";
  o.plan.min_experts_per_layer = 2;
  o.plan.max_experts_per_layer = 4;
  o.initial_mask = std::vector<uint8_t>{1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0};
  const ReplayResult bounded = replay(t, o);
  int64_t per_layer[2] = {0, 0};
  for (size_t i = 0; i < bounded.final_mask.size(); ++i) per_layer[i / 8] += bounded.final_mask[i];
  EXPECT_EQ(per_layer[0] + per_layer[1], 6);
  for (int64_t c : per_layer) EXPECT_TRUE(c >= 2 && c <= 4) << c;
}

TEST(Replay, IsDeterministicAndValidatesItsOptions) {
  const RoutingTrace t = noisy_trace(512, 5);
  ReplayOptions o;
  o.budget = 5;
  o.replan_every = 20;
  const ReplayResult a = replay(t, o), b = replay(t, o);
  EXPECT_EQ(a.final_mask, b.final_mask);
  EXPECT_EQ(a.moves, b.moves);
  EXPECT_EQ(a.hit_rate, b.hit_rate);
  o.replan_every = 0;
  EXPECT_THROW(replay(t, o), Error);
  o.replan_every = 8;
  o.ema_alpha = 0;
  EXPECT_THROW(replay(t, o), Error);
  o.ema_alpha = 0.5;
  o.strategy = "lru";
  EXPECT_THROW(replay(t, o), Error);
  o.strategy = "frequency";
  // Values the code cannot use are refused by the library too, not only at the command line.
  auto message = [&] {
    try {
      replay(t, o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  o.hysteresis = std::numeric_limits<double>::infinity();
  EXPECT_EQ(message(), "hysteresis must be in [0, 1e+06], got inf");
  o.hysteresis = 0.1;
  o.max_moves_per_replan = -2;
  EXPECT_EQ(message(), "max_moves_per_replan must be -1 (no cap) or non-negative, got -2");
  o.max_moves_per_replan = -1;
  o.score_from = 513;
  EXPECT_EQ(message(), "score_from must be in [0, 512] (the trace's tokens), got 513");
  o.score_from = 0;
  o.expert_bytes = uint64_t{1} << 63;
  EXPECT_EQ(message().rfind("expert_bytes=9223372036854775808 times ", 0), 0u) << message();
  o.expert_bytes = 3;
  const ReplayResult c = replay(t, o);
  EXPECT_GT(c.moves, 0);
  EXPECT_EQ(c.bytes_moved, std::optional<uint64_t>(3 * static_cast<uint64_t>(c.moves)));
}

TEST(Replay, TraceSweepComparesStaticReplayAndOracle) {
  const auto rows = sweep_trace(drifting_trace(256, 128), {0.25}, ReplayOptions{"frequency", 0, 16});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].statics.budget, 4);
  EXPECT_EQ(rows[0].statics.hit_rate[0], 0.0);
  EXPECT_EQ(rows[0].statics.oracle, 1.0);
  EXPECT_DOUBLE_EQ(rows[0].replay, 0.75);
}

}  // namespace
}  // namespace hymoe::test
