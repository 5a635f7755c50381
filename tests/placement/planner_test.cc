// Planner properties beyond the conformance cases: exact budgets, per-layer bounds, independence from input
// order, bit-identical reruns, the KTransformers meanings of uniform / front-loading / random, budgets and dense
// layers, and the critical-path planner against frequency under the cost model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "hymoe/error.h"
#include "hymoe/placement.h"
#include "hymoe/rng.h"
#include "test_util.h"

namespace hymoe::test {
namespace {

using namespace hymoe::placement;

// A Zipf-like table with distinct values: each layer a random permutation of 1/(rank+1) weights, times 1000.
Tensor zipf_table(int64_t layers, int64_t experts, uint64_t seed) {
  Rng rng(seed);
  Tensor t(Shape{layers, experts});
  for (int64_t l = 0; l < layers; ++l) {
    std::vector<int64_t> perm(static_cast<size_t>(experts));
    std::iota(perm.begin(), perm.end(), 0);
    for (int64_t i = experts - 1; i > 0; --i) std::swap(perm[static_cast<size_t>(i)], perm[rng.below(static_cast<uint64_t>(i + 1))]);
    for (int64_t e = 0; e < experts; ++e)
      t[l * experts + e] = static_cast<float>(1000.0 * (1.0 + 0.01 * static_cast<double>(l)) /
                                              static_cast<double>(perm[static_cast<size_t>(e)] + 1));
  }
  return t;
}

int64_t ones(const std::vector<uint8_t>& m) { return std::count(m.begin(), m.end(), uint8_t{1}); }

std::vector<int64_t> layer_counts(const Placement& p) {
  std::vector<int64_t> c(static_cast<size_t>(p.num_layers), 0);
  for (int64_t l = 0; l < p.num_layers; ++l)
    for (int64_t e = 0; e < p.num_experts; ++e) c[static_cast<size_t>(l)] += p.on_gpu(l, e);
  return c;
}

TEST(Planner, EveryStrategyPlacesExactlyTheClampedBudget) {
  const Tensor t = zipf_table(6, 10, 1);
  for (const auto& name : strategy_names())
    for (int64_t budget : {-5, 0, 1, 7, 30, 59, 60, 61, 1000}) {
      const Placement p = plan_gpu_expert_placement(t, budget, name);
      EXPECT_EQ(ones(p.mask), std::clamp<int64_t>(budget, 0, 60)) << name << " budget " << budget;
      EXPECT_EQ(p.report.actual_num_gpu_experts, std::clamp<int64_t>(budget, 0, 60));
      EXPECT_EQ(p.report.requested_num_gpu_experts, budget);
    }
}

TEST(Planner, LayerBoundsHoldForBalancedAndCriticalPath) {
  const Tensor t = zipf_table(5, 12, 2);
  for (const std::string name : {"score_aware_layer_balanced", "critical_path"})
    for (int64_t lo = 0; lo <= 3; ++lo)
      for (int64_t hi = std::max<int64_t>(lo, 1); hi <= 12; hi += 3)
        for (int64_t budget = lo * 5; budget <= hi * 5; budget += 4) {
          PlanOptions o;
          o.min_experts_per_layer = lo;
          o.max_experts_per_layer = hi;
          const Placement p = plan_gpu_expert_placement(t, budget, name, o);
          ASSERT_EQ(ones(p.mask), budget);
          for (int64_t c : layer_counts(p)) {
            EXPECT_GE(c, lo) << name;
            EXPECT_LE(c, hi) << name;
          }
        }
}

TEST(Planner, BalancedGivesEveryLayerItsHottestFirst) {
  // Layer 0 is ten times hotter everywhere: frequency gives it everything, min=1 forces one per layer, each the
  // layer's hottest.
  Tensor t(Shape{3, 4}, {100, 90, 80, 70, 1, 4, 3, 2, 5, 6, 8, 7});
  EXPECT_EQ(layer_counts(plan_gpu_expert_placement(t, 4, "frequency")), (std::vector<int64_t>{4, 0, 0}));
  PlanOptions o;
  o.min_experts_per_layer = 1;
  const Placement p = plan_gpu_expert_placement(t, 4, "score_aware_layer_balanced", o);
  EXPECT_EQ(p.mask, (std::vector<uint8_t>{1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}));
}

TEST(Planner, ScoreRankedStrategiesDoNotDependOnLayerOrder) {
  // Reversing the layers reverses the mask rows (values distinct, so no tie decides anything).
  const Tensor t = zipf_table(7, 9, 3);
  Tensor r(t.shape());
  for (int64_t l = 0; l < 7; ++l) std::copy_n(t.data() + l * 9, 9, r.data() + (6 - l) * 9);
  for (const std::string name : {"frequency", "score_aware_layer_balanced", "critical_path"}) {
    PlanOptions o;
    if (name != "frequency") o.min_experts_per_layer = 1, o.max_experts_per_layer = 5;
    const Placement a = plan_gpu_expert_placement(t, 20, name, o);
    const Placement b = plan_gpu_expert_placement(r, 20, name, o);
    for (int64_t l = 0; l < 7; ++l)
      for (int64_t e = 0; e < 9; ++e) EXPECT_EQ(a.on_gpu(l, e), b.on_gpu(6 - l, e)) << name;
    EXPECT_DOUBLE_EQ(a.report.expected_hit_rate, b.report.expected_hit_rate);
  }
}

TEST(Planner, ExpertOrderWithinALayerOnlyPermutesTheMask) {
  const Tensor t = zipf_table(4, 8, 4);
  Tensor r(t.shape());
  for (int64_t l = 0; l < 4; ++l)
    for (int64_t e = 0; e < 8; ++e) r[l * 8 + e] = t[l * 8 + (7 - e)];
  const Placement a = plan_gpu_expert_placement(t, 11, "frequency");
  const Placement b = plan_gpu_expert_placement(r, 11, "frequency");
  for (int64_t l = 0; l < 4; ++l)
    for (int64_t e = 0; e < 8; ++e) EXPECT_EQ(a.on_gpu(l, e), b.on_gpu(l, 7 - e));
}

TEST(Planner, RerunsGiveIdenticalBits) {
  const Tensor t = zipf_table(8, 16, 5);
  PlanOptions o;
  o.previous_scores = zipf_table(8, 16, 6);
  o.alpha = 0.3;
  for (const auto& name : strategy_names()) {
    const Placement a = plan_gpu_expert_placement(t, 37, name, o);
    const Placement b = plan_gpu_expert_placement(t, 37, name, o);
    EXPECT_EQ(a.mask, b.mask) << name;
    EXPECT_EQ(report_to_json(a.report), report_to_json(b.report)) << name;
    EXPECT_EQ(0, std::memcmp(a.scores.data(), b.scores.data(), sizeof(float) * 128));
  }
}

TEST(Planner, EmaIsTwoFloat32ProductsAndAFloat32Sum) {
  // 0.1f*0.7f + 0.9f*0.3f: a fused multiply-add would round once and could differ in the last bit.
  Tensor cur(Shape{1, 3}, {0.7f, 1e-8f, 3.3f}), prev(Shape{1, 3}, {0.3f, 1.0f, 7.1f});
  PlanOptions o;
  o.alpha = 0.1;
  o.previous_scores = prev;
  const Placement p = plan_gpu_expert_placement(cur, 1, "frequency", o);
  const float a = 0.1f, b = static_cast<float>(1.0 - 0.1);
  for (int i = 0; i < 3; ++i) {
    volatile float x = a * cur[i];
    volatile float y = b * prev[i];
    EXPECT_EQ(p.scores[i], x + y);
  }
  EXPECT_TRUE(p.report.previous_scores_provided);
}

TEST(Planner, UniformAndFrontLoadingUseTheLowestIds) {
  const Tensor t = zipf_table(3, 5, 7);
  const Placement u = plan_gpu_expert_placement(t, 8, "uniform");  // 8 // 3 = 2, first 2 layers one more
  EXPECT_EQ(u.mask, (std::vector<uint8_t>{1, 1, 1, 0, 0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0}));
  const Placement f = plan_gpu_expert_placement(t, 7, "front-loading");
  EXPECT_EQ(f.mask, (std::vector<uint8_t>{1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0}));
}

TEST(Planner, RandomIsSeededAndIgnoresScores) {
  const Tensor t = zipf_table(4, 8, 8);
  const Placement a = plan_gpu_expert_placement(t, 10, "random");
  EXPECT_EQ(a.mask, plan_gpu_expert_placement(zipf_table(4, 8, 99), 10, "random").mask);  // default seed 42
  PlanOptions o;
  o.seed = 7;
  EXPECT_NE(a.mask, plan_gpu_expert_placement(t, 10, "random", o).mask);
}

TEST(Planner, ReportsGpuBytesAndPredictedTime) {
  const Tensor t = zipf_table(2, 4, 9);
  PlanOptions o;
  o.expert_bytes = 1000;
  const Placement p = plan_gpu_expert_placement(t, 3, "frequency", o);
  ASSERT_TRUE(p.report.gpu_bytes.has_value());
  EXPECT_EQ(*p.report.gpu_bytes, 3000u);
  EXPECT_LT(p.report.predicted_step_seconds, p.report.predicted_all_cpu_seconds);
  // All CPU, defaults: each layer 30us + 200us * 8 routed.
  EXPECT_NEAR(p.report.predicted_all_cpu_seconds, 2 * (30e-6 + 200e-6 * 8), 1e-12);
}

TEST(Planner, CostModelOfOneLayer) {
  CostModel c;
  c.cpu_seconds_per_token_expert = 2;
  c.gpu_seconds_per_token_expert = 1;
  c.cpu_layer_overhead_seconds = 10;
  c.gpu_layer_overhead_seconds = 3;
  c.routed_per_step = 4;
  EXPECT_DOUBLE_EQ(predicted_layer_seconds(0.25, true, true, c), std::max(10 + 2 * 4 * 0.75, 3 + 1 * 4 * 0.25));
  EXPECT_DOUBLE_EQ(predicted_layer_seconds(1.0, false, true, c), 3 + 4);  // no CPU work: no CPU overhead
  EXPECT_DOUBLE_EQ(predicted_layer_seconds(0.0, true, false, c), 10 + 8);
}

TEST(Planner, CriticalPathNeverLosesToFrequencyUnderItsModel) {
  for (uint64_t seed = 10; seed < 16; ++seed) {
    const Tensor t = zipf_table(6, 16, seed);
    PlanOptions o;
    o.cost.gpu_seconds_per_token_expert = 60e-6;  // a slow GPU link makes GPU-bound layers possible
    o.cost.cpu_layer_overhead_seconds = 400e-6;
    for (int64_t budget : {6, 24, 48, 72, 90}) {
      const double freq = plan_gpu_expert_placement(t, budget, "frequency", o).report.predicted_step_seconds;
      const double cp = plan_gpu_expert_placement(t, budget, "critical_path", o).report.predicted_step_seconds;
      EXPECT_LE(cp, freq * (1 + 1e-12)) << "seed " << seed << " budget " << budget;
    }
  }
}

TEST(Planner, CriticalPathFinishesLayersThatFrequencyLeavesCpuBound) {
  // Two layers of 4 experts. Layer 0 is skewed (one hot expert), layer 1 flat. With a large fixed CPU cost per
  // layer, putting all of layer 1 on the GPU removes its CPU side entirely, which beats the global top-4.
  Tensor t(Shape{2, 4}, {100, 10, 10, 10, 33, 32, 31, 30});
  PlanOptions o;
  o.cost = CostModel{1e-6, 0.1e-6, 50e-6, 1e-6, 8};
  const Placement freq = plan_gpu_expert_placement(t, 4, "frequency", o);
  const Placement cp = plan_gpu_expert_placement(t, 4, "critical_path", o);
  EXPECT_EQ(freq.mask, (std::vector<uint8_t>{1, 0, 0, 0, 1, 1, 1, 0}));
  EXPECT_EQ(cp.mask, (std::vector<uint8_t>{0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_LT(cp.report.predicted_step_seconds, 0.9 * freq.report.predicted_step_seconds);
  EXPECT_LT(cp.report.expected_hit_rate, freq.report.expected_hit_rate);  // it trades hit rate for time
}

TEST(Planner, BudgetsResolveAsKTransformersDoes) {
  EXPECT_EQ(resolve_budget({BudgetSpec::Kind::kTotal, 17}, 4, 8), 17);
  EXPECT_EQ(resolve_budget({BudgetSpec::Kind::kPerLayer, 3}, 4, 8), 12);
  EXPECT_EQ(resolve_budget({BudgetSpec::Kind::kRatio, 0.1}, 58, 256), 1484);  // int(14848 * 0.1)
  EXPECT_EQ(resolve_budget({BudgetSpec::Kind::kRatio, 0.3}, 3, 5), 4);        // int(4.5)
  EXPECT_THROW(resolve_budget({BudgetSpec::Kind::kRatio, 1.5}, 3, 5), Error);
  EXPECT_THROW(resolve_budget({BudgetSpec::Kind::kTotal, 2.5}, 3, 5), Error);
}

TEST(Planner, DenseLayersAreAllGpuAndOutsideTheBudget) {
  const Tensor t = zipf_table(6, 4, 11);
  const LayerLayout layout{2, 2};  // layers 2 and 4 are MoE
  const Placement p = plan_model_placement(t, layout, 3, "frequency");
  EXPECT_EQ(p.num_layers, 6);
  for (int64_t l : {0, 1, 3, 5})
    for (int64_t e = 0; e < 4; ++e) EXPECT_TRUE(p.on_gpu(l, e)) << l;
  EXPECT_EQ(layer_counts(p)[2] + layer_counts(p)[4], 3);
  EXPECT_EQ(p.report.num_layers, 2);
  EXPECT_EQ(p.report.dense_layers, (std::vector<int64_t>{0, 1, 3, 5}));
}

TEST(Planner, ValidationNamesTheClampedBudgetAndFollowsTheReferenceOrder) {
  const Tensor t(Shape{4, 4}, 1.0f);
  PlanOptions o;
  o.max_experts_per_layer = 3;
  try {
    plan_gpu_expert_placement(t, 100, "score_aware_layer_balanced", o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "num_gpu_experts=16 exceeds max_experts_per_layer=3 across 4 layers; at most 12 experts "
                           "can be selected");
  }
  o.alpha = 2;  // alpha is checked before the strategy, always
  try {
    plan_gpu_expert_placement(t, 1, "nope", o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "alpha must be in [0, 1], got 2.0");
  }
  o.alpha = 0.5;
  o.previous_scores = Tensor(Shape{4, 3});
  try {
    plan_gpu_expert_placement(t, 1, "nope", o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "previous_scores shape (4, 3) must match activation_freq shape (4, 4)");
  }
  EXPECT_NO_THROW(plan_gpu_expert_placement(t, 100, "frequency", PlanOptions{0, 3}));  // frequency ignores bounds
  PlanOptions neg;
  neg.min_experts_per_layer = -1;
  EXPECT_THROW(plan_gpu_expert_placement(t, 1, "score_aware_layer_balanced", neg), Error);
  PlanOptions wide;
  wide.max_experts_per_layer = 5;
  try {
    plan_gpu_expert_placement(t, 1, "score_aware_layer_balanced", wide);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "max_experts_per_layer (5) cannot exceed num_experts_per_layer (4)");
  }
  EXPECT_THROW(plan_gpu_expert_placement(Tensor(Shape{2, 2}, {1, NAN, 2, 3}), 1, "frequency"), Error);
  for (const auto& name : strategy_names())  // an empty table is an error, not a division by zero
    EXPECT_THROW(plan_gpu_expert_placement(Tensor(Shape{0, 4}), 1, name), Error) << name;
  try {
    plan_gpu_expert_placement(t, 1, "lru");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "Unknown expert placement strategy: 'lru'. Supported strategies: ['critical_path', "
                           "'frequency', 'front-loading', 'random', 'score_aware_layer_balanced', 'uniform']");
  }
}

}  // namespace
}  // namespace hymoe::test
