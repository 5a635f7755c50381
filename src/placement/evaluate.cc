// Evaluation of plans on held-out data, budget sweeps, and trace replay with online re-planning.
#include "hymoe/placement/evaluate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "hymoe/error.h"
#include "hymoe/placement/decode_policy.h"

namespace hymoe::placement {

Evaluation evaluate_mask(const std::vector<uint8_t>& mask, const CountTable& data, const CostModel& cost) {
  if (mask.size() != data.counts.size())
    fail("plan has ", mask.size(), " mask entries but the data is (", data.num_layers, ", ", data.num_experts,
         "): the plan was made for a different model");
  Evaluation ev;
  double hits = 0;
  for (int64_t l = 0; l < data.num_layers; ++l) {
    double layer_hits = 0, layer_total = 0;
    for (int64_t e = 0; e < data.num_experts; ++e) {
      const double c = data.at(l, e);
      layer_total += c;
      if (mask[static_cast<size_t>(l * data.num_experts + e)]) layer_hits += c;
    }
    ev.layer_hit_rates.push_back(layer_total > 0 ? layer_hits / layer_total : 0.0);
    hits += layer_hits;
    ev.routed += layer_total;
  }
  ev.hit_rate = ev.routed > 0 ? hits / ev.routed : 0.0;
  const Tensor scores = data.to_scores();
  ev.predicted_step_seconds = predicted_step_seconds(scores, mask, cost);
  ev.predicted_all_cpu_seconds = predicted_step_seconds(scores, std::vector<uint8_t>(mask.size(), 0), cost);
  return ev;
}

PlanOptions sweep_plan_options(const std::string& strategy, int64_t budget, int64_t layers, const PlanOptions& base) {
  PlanOptions o = base;
  o.previous_scores.reset();
  if (strategy == "score_aware_layer_balanced") {
    o.min_experts_per_layer = std::max<int64_t>(0, budget) / layers;
    o.max_experts_per_layer.reset();
  } else if (strategy == "critical_path") {
    o.min_experts_per_layer = 0;
    o.max_experts_per_layer.reset();
  }
  return o;
}

std::vector<SweepRow> sweep_static(const CountTable& train, const CountTable& heldout, const std::vector<double>& ratios,
                                   const PlanOptions& base) {
  if (train.num_layers != heldout.num_layers || train.num_experts != heldout.num_experts)
    fail("training table is (", train.num_layers, ", ", train.num_experts, ") but held-out table is (",
         heldout.num_layers, ", ", heldout.num_experts, ")");
  const Tensor train_scores = train.to_scores(), heldout_scores = heldout.to_scores();
  std::vector<SweepRow> rows;
  for (double ratio : ratios) {
    SweepRow row;
    row.ratio = ratio;
    row.budget = resolve_budget({BudgetSpec::Kind::kRatio, ratio}, train.num_layers, train.num_experts);
    for (const std::string& name : strategy_names()) {
      const Placement p = plan_gpu_expert_placement(train_scores, row.budget, name,
                                                    sweep_plan_options(name, row.budget, train.num_layers, base));
      const Evaluation ev = evaluate_mask(p.mask, heldout, base.cost);
      row.hit_rate.push_back(ev.hit_rate);
      row.predicted_seconds.push_back(ev.predicted_step_seconds);
    }
    row.oracle = evaluate_mask(plan_gpu_expert_placement(heldout_scores, row.budget, "frequency").mask, heldout).hit_rate;
    rows.push_back(std::move(row));
  }
  return rows;
}

namespace {

// Applies at most `max_moves` admissions of `next` over `current`, best first (by smoothed count), each paired with
// the coldest eviction that keeps the per-layer bounds; a pair is made only when it raises the smoothed hit count.
std::vector<uint8_t> limit_moves(const std::vector<uint8_t>& current, const std::vector<uint8_t>& next,
                                 const std::vector<double>& smoothed, int64_t experts, int64_t max_moves,
                                 int64_t min_per_layer, int64_t max_per_layer) {
  std::vector<int64_t> admit, evict;
  for (size_t i = 0; i < current.size(); ++i) {
    if (next[i] && !current[i]) admit.push_back(static_cast<int64_t>(i));
    if (!next[i] && current[i]) evict.push_back(static_cast<int64_t>(i));
  }
  if (max_moves < 0 || static_cast<int64_t>(admit.size()) <= max_moves) return next;
  auto value = [&](int64_t i) { return smoothed[static_cast<size_t>(i)]; };
  std::stable_sort(admit.begin(), admit.end(), [&](int64_t a, int64_t b) { return value(a) > value(b); });
  std::stable_sort(evict.begin(), evict.end(), [&](int64_t a, int64_t b) { return value(a) < value(b); });
  std::vector<int64_t> per_layer(current.size() / static_cast<size_t>(experts), 0);
  for (size_t i = 0; i < current.size(); ++i) per_layer[i / static_cast<size_t>(experts)] += current[i];
  std::vector<uint8_t> out = current;
  std::vector<uint8_t> used(evict.size(), 0);
  int64_t moves = 0;
  for (int64_t a : admit) {
    if (moves == max_moves) break;
    const int64_t la = a / experts;
    for (size_t j = 0; j < evict.size(); ++j) {
      if (used[j]) continue;
      const int64_t v = evict[j], lv = v / experts;
      if (value(a) <= value(v)) break;  // evictions are ordered coldest first: no later one pays either
      if (la != lv && (per_layer[static_cast<size_t>(la)] + 1 > max_per_layer ||
                       per_layer[static_cast<size_t>(lv)] - 1 < min_per_layer))
        continue;
      used[j] = 1;
      out[static_cast<size_t>(a)] = 1;
      out[static_cast<size_t>(v)] = 0;
      ++per_layer[static_cast<size_t>(la)];
      --per_layer[static_cast<size_t>(lv)];
      ++moves;
      break;
    }
  }
  return out;
}

}  // namespace

ReplayResult replay(const RoutingTrace& trace, const ReplayOptions& options) {
  if (options.replan_every < 1) fail("replan_every must be at least 1 token, got ", options.replan_every);
  if (!(options.ema_alpha > 0.0 && options.ema_alpha <= 1.0))
    fail("ema_alpha must be in (0, 1], got ", options.ema_alpha);
  if (!(options.hysteresis >= 0.0 && options.hysteresis <= kMaxHysteresis))
    fail("hysteresis must be in [0, ", kMaxHysteresis, "], got ", options.hysteresis);
  if (options.max_moves_per_replan < -1)
    fail("max_moves_per_replan must be -1 (no cap) or non-negative, got ", options.max_moves_per_replan);
  if (options.score_from < 0 || options.score_from > trace.num_tokens)
    fail("score_from must be in [0, ", trace.num_tokens, "] (the trace's tokens), got ", options.score_from);
  parse_strategy(options.strategy);
  const int64_t L = trace.num_layers, E = trace.num_experts;
  const Tensor zeros(Shape{L, E});
  PlanOptions plan_options = options.plan;
  plan_options.previous_scores.reset();
  const int64_t max_per_layer = plan_options.max_experts_per_layer.value_or(E);

  const std::vector<uint8_t> uniform = plan_gpu_expert_placement(zeros, options.budget, "uniform").mask;
  std::vector<uint8_t> mask = uniform;
  ReplayResult result;
  if (options.initial_mask) {
    if (options.initial_mask->size() != static_cast<size_t>(L * E))
      fail("initial plan has ", options.initial_mask->size(), " entries, the trace is (", L, ", ", E, ")");
    mask = *options.initial_mask;
    int64_t held = 0;
    for (uint8_t m : mask) held += m != 0;
    if (held > options.budget)
      fail("initial plan holds ", held, " GPU experts but the budget is ", options.budget);
    result.initial_experts = held;
    // Top up with the uniform plan's experts, so the run uses the whole budget from the first token on.
    for (size_t i = 0; i < mask.size() && held < options.budget; ++i)
      if (uniform[i] && !mask[i]) mask[i] = 1, ++held;
    for (size_t i = 0; i < mask.size() && held < options.budget; ++i)
      if (!mask[i]) mask[i] = 1, ++held;
  } else {
    for (uint8_t m : mask) result.initial_experts += m;
  }

  std::vector<double> smoothed(static_cast<size_t>(L * E), 0.0);
  bool have_smoothed = false;
  double scored_hits = 0;
  // Windows end on step boundaries: a batched forward pass is never split by a re-plan.
  const auto steps = trace_steps(trace);
  result.scored_from = step_start_at_or_after(trace, options.score_from);
  for (const auto& st : steps) (st.first >= result.scored_from ? result.scored_steps : result.warmup_steps) += 1;
  size_t next_step = 0;
  while (next_step < steps.size()) {
    const int64_t begin = steps[next_step].first;
    int64_t end = begin;
    while (next_step < steps.size() && end - begin < options.replan_every) end = steps[next_step++].second;
    const bool last_window_scored = steps[next_step - 1].first >= result.scored_from;
    ReplayWindow w{begin, end, 0, 0};
    double window_hits = 0, window_routed = 0;
    for (int64_t t = begin; t < end; ++t)
      for (int64_t l = 0; l < L; ++l)
        for (int64_t k = 0; k < trace.top_k; ++k) {
          const int32_t e = trace.expert(t, l, k);
          if (e < 0 || e >= E) continue;
          const bool hit = mask[static_cast<size_t>(l * E + e)];
          window_hits += hit;
          window_routed += 1;
          if (t >= result.scored_from) scored_hits += hit, result.routed += 1;
        }
    w.hit_rate = window_routed > 0 ? window_hits / window_routed : 0.0;
    const CountTable window = trace.counts(begin, end);
    for (size_t i = 0; i < smoothed.size(); ++i)
      smoothed[i] = have_smoothed ? options.ema_alpha * window.counts[i] + (1.0 - options.ema_alpha) * smoothed[i]
                                  : window.counts[i];
    have_smoothed = true;
    if (end < trace.num_tokens) {
      // Hysteresis: residents get a head start, so an expert only moves in when it is clearly hotter.
      Tensor scores(Shape{L, E});
      for (size_t i = 0; i < smoothed.size(); ++i)
        scores[static_cast<int64_t>(i)] = static_cast<float>(smoothed[i] * (mask[i] ? 1.0 + options.hysteresis : 1.0));
      const Placement next = plan_gpu_expert_placement(scores, options.budget, options.strategy, plan_options);
      const std::vector<uint8_t> applied = limit_moves(mask, next.mask, smoothed, E, options.max_moves_per_replan,
                                                       plan_options.min_experts_per_layer, max_per_layer);
      for (size_t i = 0; i < mask.size(); ++i) w.moves += applied[i] && !mask[i];
      mask = applied;
      result.moves += w.moves;
      (last_window_scored ? result.scored_moves : result.warmup_moves) += w.moves;
      ++result.replans;
    }
    result.windows.push_back(w);
  }
  result.hit_rate = result.routed > 0 ? scored_hits / result.routed : 0.0;
  auto per_layer_step = [L](int64_t moves, int64_t n) {
    return n > 0 ? static_cast<double>(moves) / (static_cast<double>(L) * static_cast<double>(n)) : 0.0;
  };
  result.warmup_moves_per_layer_per_step = per_layer_step(result.warmup_moves, result.warmup_steps);
  result.scored_moves_per_layer_per_step = per_layer_step(result.scored_moves, result.scored_steps);
  if (options.expert_bytes) {
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(*options.expert_bytes, static_cast<uint64_t>(result.moves), &bytes))
      fail("expert_bytes=", *options.expert_bytes, " times ", result.moves, " expert moves exceeds 2^64-1 bytes");
    result.bytes_moved = bytes;
  }
  result.final_mask = mask;
  return result;
}

std::vector<TraceSweepRow> sweep_trace(const RoutingTrace& trace, const std::vector<double>& ratios,
                                       const ReplayOptions& base) {
  const int64_t half = step_start_at_or_after(trace, trace.num_tokens / 2);
  const CountTable first = trace.counts(0, half), second = trace.counts(half, trace.num_tokens);
  const std::vector<SweepRow> statics = sweep_static(first, second, ratios, base.plan);
  std::vector<TraceSweepRow> rows;
  for (const SweepRow& s : statics) {
    ReplayOptions o = base;
    o.budget = s.budget;
    o.score_from = half;
    o.plan = sweep_plan_options(o.strategy, s.budget, trace.num_layers, base.plan);
    const ReplayResult r = replay(trace, o);
    rows.push_back({s, r.hit_rate, r.moves});
  }
  return rows;
}

}  // namespace hymoe::placement
