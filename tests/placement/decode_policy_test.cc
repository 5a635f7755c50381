// Decode-time placement policies, step-aligned replay, trace row order and the critical-path tie rule, on small
// synthetic traces whose answers are worked out by hand in the comments.
#include <gtest/gtest.h>

#include <algorithm>

#include "hymoe/error.h"
#include "hymoe/placement.h"

namespace hymoe::test {
namespace {

using namespace hymoe::placement;

// 2 layers x 8 experts, top-2. Step 0 (the prompt) has 4 tokens choosing {0, 1}; decode steps 1..16 have 2 tokens
// each choosing {4, 5}, at both layers.
RoutingTrace prompt_then_decode() {
  RoutingTrace t;
  t.num_layers = 2;
  t.num_experts = 8;
  t.top_k = 2;
  t.layer_ids = {0, 1};
  auto add = [&](int64_t step, int32_t a, int32_t b) {
    t.steps.push_back(step);
    for (int l = 0; l < 2; ++l) t.experts.push_back(a), t.experts.push_back(b);
    ++t.num_tokens;
  };
  for (int i = 0; i < 4; ++i) add(0, 0, 1);
  for (int s = 1; s <= 16; ++s) add(s, 4, 5), add(s, 4, 5);
  return t;
}

int64_t count(const std::vector<uint8_t>& m) { return std::count(m.begin(), m.end(), uint8_t{1}); }

TEST(DecodePolicy, StepsAreRunsOfEqualStepIds) {
  const RoutingTrace t = prompt_then_decode();
  const auto steps = trace_steps(t);
  ASSERT_EQ(steps.size(), 17u);
  EXPECT_EQ(steps[0], (std::pair<int64_t, int64_t>{0, 4}));
  EXPECT_EQ(steps[1], (std::pair<int64_t, int64_t>{4, 6}));
  EXPECT_EQ(step_start_at_or_after(t, 5), 6);
  EXPECT_EQ(step_start_at_or_after(t, 100), t.num_tokens);
  RoutingTrace unknown = t;
  std::fill(unknown.steps.begin(), unknown.steps.end(), -1);
  EXPECT_EQ(trace_steps(unknown).size(), static_cast<size_t>(t.num_tokens));  // one token per step
}

TEST(DecodePolicy, ScoreCacheMovesWithinItsCreditAndFollowsTheDecode) {
  DecodePolicyOptions o;
  o.budget = 4;  // uniform start: {0, 1} at each layer
  o.decay = 0.9;
  o.move_rate = 0.5;  // one move per layer every 2 steps
  const DecodeReplay r = replay_decode(prompt_then_decode(), o);
  ASSERT_EQ(r.steps.size(), 17u);
  EXPECT_EQ(r.start_mask, (std::vector<uint8_t>{1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0}));
  // Expert 4 comes in after step 2 (the coldest resident, tie -> higher id, is 1), expert 5 after step 4.
  for (size_t s = 0; s < r.steps.size(); ++s) EXPECT_EQ(r.steps[s].moves, s == 2 || s == 4 ? 2 : 0) << s;
  EXPECT_EQ(r.final_mask, (std::vector<uint8_t>{0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0}));
  // Decode hits: steps 1-2 none, steps 3-4 half of 8, steps 5-16 all 8: 104 of 128.
  const StepRangeSummary all = summarize_steps(r, 1, 17, 2);
  EXPECT_DOUBLE_EQ(all.hit_rate, 104.0 / 128.0);
  EXPECT_EQ(all.moves, 4);
  EXPECT_DOUBLE_EQ(all.moves_per_layer_per_8_steps, 8.0 * 4 / (2 * 16));
  const StepRangeSummary first = summarize_steps(r, 1, 9, 2), second = summarize_steps(r, 9, 17, 2);
  EXPECT_DOUBLE_EQ(first.hit_rate, 40.0 / 64.0);
  EXPECT_DOUBLE_EQ(second.hit_rate, 1.0);
  EXPECT_EQ(second.moves, 0);
  // The prompt step: uniform {0, 1} is exactly what the prompt chose.
  EXPECT_DOUBLE_EQ(summarize_steps(r, 0, 1, 2).hit_rate, 1.0);
}

TEST(DecodePolicy, StaticAndPromptStartNeverLearn) {
  DecodePolicyOptions o;
  o.budget = 4;
  o.policy = "static";
  o.start = "prompt";
  const DecodeReplay r = replay_decode(prompt_then_decode(), o);
  EXPECT_EQ(r.start_mask, r.final_mask);
  EXPECT_EQ(count(r.start_mask), 4);
  EXPECT_EQ(r.start_mask[0] + r.start_mask[1] + r.start_mask[8] + r.start_mask[9], 4);  // the prompt's experts
  EXPECT_DOUBLE_EQ(summarize_steps(r, 1, 17, 2).hit_rate, 0.0);
}

TEST(DecodePolicy, CostAwareMovesOnlyWhenTheTransferPaysWithinTheHorizon) {
  // Decode rate of experts 4 and 5: 2 token-experts per step each; a swap saves 2 x (200 - 10) us = 380 us per
  // step; a transfer of 1 MB at 1 GB/s takes 1000 us. Horizon 2 steps: 760 us < 1000 us, never; horizon 4:
  // 1520 us > 1000 us, both experts right after step 1 (no move credit limit).
  DecodePolicyOptions o;
  o.budget = 4;
  o.policy = "cost-aware";
  o.decay = 1;
  o.move_rate.reset();
  o.expert_bytes = 1000000;
  o.pcie_gbps = 1;
  o.horizon_steps = 2;
  const DecodeReplay never = replay_decode(prompt_then_decode(), o);
  EXPECT_EQ(summarize_steps(never, 0, 17, 2).moves, 0);
  o.horizon_steps = 4;
  const DecodeReplay pays = replay_decode(prompt_then_decode(), o);
  EXPECT_EQ(pays.steps[1].moves, 4);
  EXPECT_EQ(summarize_steps(pays, 0, 17, 2).moves, 4);
  EXPECT_DOUBLE_EQ(summarize_steps(pays, 1, 17, 2).hit_rate, 120.0 / 128.0);
}

TEST(DecodePolicy, ValidatesItsOptions) {
  const RoutingTrace t = prompt_then_decode();
  DecodePolicyOptions o;
  o.budget = 4;
  o.policy = "lru";
  EXPECT_THROW(replay_decode(t, o), Error);
  o.policy = "score-cache";
  o.decay = 0;
  EXPECT_THROW(replay_decode(t, o), Error);
  o.decay = 1;
  o.move_credit_cap = 0.5;
  EXPECT_THROW(replay_decode(t, o), Error);
  o.move_credit_cap = 1;
  o.policy = "cost-aware";  // no expert bytes
  EXPECT_THROW(replay_decode(t, o), Error);
}

TEST(ReplaySteps, ReplansOnlyOnStepBoundariesAndSplitsMoves) {
  // Steps of 3 tokens; re-plan every 2 tokens rounds up to every step (3 tokens).
  std::string csv = "token,step,layer,e1,e2\n";
  for (int tok = 0; tok < 24; ++tok)
    for (int l = 0; l < 2; ++l)
      csv += std::to_string(tok) + "," + std::to_string(tok / 3) + "," + std::to_string(l) + "," +
             (tok < 12 ? "0,1\n" : "4,5\n");
  const RoutingTrace t = parse_trace_csv(csv, "steps.csv", 8);
  ReplayOptions o;
  o.budget = 4;
  o.replan_every = 2;
  o.hysteresis = 0;
  o.ema_alpha = 1;  // plan from the last window only
  o.score_from = 13;  // rounds up to the step starting at token 15
  const ReplayResult r = replay(t, o);
  for (const auto& w : r.windows) {
    EXPECT_EQ(w.begin % 3, 0);
    EXPECT_EQ(w.end % 3, 0);
  }
  EXPECT_EQ(r.windows.size(), 8u);
  EXPECT_EQ(r.scored_from, 15);
  EXPECT_EQ(r.warmup_steps, 5);
  EXPECT_EQ(r.scored_steps, 3);
  // {0,1} -> {4,5} after step 4 (the first all-{4,5} step, tokens 12..14): a warm-up step.
  EXPECT_EQ(r.warmup_moves, 4);
  EXPECT_EQ(r.scored_moves, 0);
  EXPECT_DOUBLE_EQ(r.warmup_moves_per_layer_per_step, 4.0 / (2 * 5));
  EXPECT_DOUBLE_EQ(r.hit_rate, 1.0);
}

TEST(ReplaySteps, SmallerInitialPlanIsToppedUpToTheBudgetAndLargerIsRefused) {
  const RoutingTrace t = prompt_then_decode();
  ReplayOptions o;
  o.budget = 4;
  o.max_moves_per_replan = 1;
  o.replan_every = 1;
  o.initial_mask = std::vector<uint8_t>{0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  const ReplayResult r = replay(t, o);
  EXPECT_EQ(r.initial_experts, 1);
  EXPECT_EQ(count(r.final_mask), 4);
  // Topped up with the uniform plan ({0, 1} per layer): 4 + {0, 1} at layer 0, {0} at layer 1. Decode picks
  // {4, 5}: a capped replay reaches {4, 5} at both layers, never fewer than 4 experts.
  EXPECT_EQ(r.final_mask, (std::vector<uint8_t>{0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0}));
  o.initial_mask = std::vector<uint8_t>(16, 1);
  EXPECT_THROW(replay(t, o), Error);
}

TEST(TraceOrder, RowsInAnyOrderGiveTheSameTrace) {
  std::string header = "token,step,layer,e1,e2\n", body;
  std::vector<std::string> rows;
  for (int tok = 0; tok < 12; ++tok)
    for (int l = 0; l < 2; ++l)
      rows.push_back(std::to_string(tok) + "," + std::to_string(tok / 4) + "," + std::to_string(l) + "," +
                     std::to_string(tok % 8) + "," + std::to_string((tok + l) % 8) + "\n");
  std::string forward = header, backward = header;
  for (const auto& r : rows) forward += r;
  for (auto it = rows.rbegin(); it != rows.rend(); ++it) backward += *it;
  const RoutingTrace a = parse_trace_csv(forward, "f", 8), b = parse_trace_csv(backward, "b", 8);
  EXPECT_EQ(a.experts, b.experts);
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_EQ(a.steps, (std::vector<int64_t>{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2}));
  ReplayOptions o;
  o.budget = 4;
  o.replan_every = 4;
  o.score_from = 6;
  const ReplayResult ra = replay(a, o), rb = replay(b, o);
  EXPECT_EQ(ra.hit_rate, rb.hit_rate);
  EXPECT_EQ(ra.final_mask, rb.final_mask);
  // A token whose rows name two different steps is refused.
  EXPECT_THROW(parse_trace_csv(header + "0,0,0,1,2\n0,1,1,1,2\n", "x", 8), Error);
}

TEST(CriticalPath, BreaksTiesAsFrequencyDoes) {
  // Both layers have 75% of their routed work on their hottest expert, so putting the one GPU slot in either
  // layer predicts the same step time; frequency takes the globally hottest (layer 1, expert 0).
  Tensor scores(Shape{2, 2}, std::vector<float>{3, 1, 6, 2});
  const Placement f = plan_gpu_expert_placement(scores, 1, "frequency");
  const Placement c = plan_gpu_expert_placement(scores, 1, "critical_path");
  EXPECT_EQ(f.mask, (std::vector<uint8_t>{0, 0, 1, 0}));
  EXPECT_EQ(c.mask, f.mask);
}

TEST(StatsVerdict, SaysInSampleNotABound) {
  CountTable t(1, 8);
  t.counts = {100, 100, 1, 1, 1, 1, 1, 1};
  const StatsSummary s = summarize(t);
  EXPECT_NE(s.verdict.find("in-sample"), std::string::npos) << s.verdict;
  EXPECT_EQ(s.verdict.find("at most"), std::string::npos) << s.verdict;
  EXPECT_DOUBLE_EQ(s.in_sample_cpu_saving, (s.mean_top25 - 0.25) / 0.75);
}

}  // namespace
}  // namespace hymoe::test
