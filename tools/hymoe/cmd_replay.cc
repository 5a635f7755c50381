// `hymoe replay`: replays a per-token routing trace with online re-planning and reports the hit rate over time,
// the expert moves and the bytes they would move, next to the static plans it competes with.
#include <fmt/format.h>

#include <algorithm>

#include "commands.h"
#include "hymoe/error.h"
#include "hymoe/placement.h"
#include "placement_flags.h"
#include "replay_decode.h"

namespace hymoe::tool {
namespace {

using namespace hymoe::placement;

struct ReplayFlags : PlacementFlags {
  std::string trace, initial;
  std::optional<int64_t> num_experts;
  int64_t replan_every = 128, max_moves = -1;
  std::optional<int64_t> score_from;
  double ema_alpha = 0.5, hysteresis = 0.1;
  bool held_out_half = false, sweep = false, windows = false, json = false;
  DecodePolicyFlags decode;
  bool policy_given = false, replan_flags_given = false;
};

void print_sweep_json(const std::vector<TraceSweepRow>& rows, const ReplayOptions& base) {
  nlohmann::json j = {{"command", "replay"}, {"sweep", true}, {"policy", "replan"}, {"strategy", base.strategy},
                      {"replan_every", base.replan_every}, {"ema_alpha", base.ema_alpha},
                      {"hysteresis", base.hysteresis}, {"strategies", strategy_names()},
                      {"rows", nlohmann::json::array()}};
  for (const auto& row : rows)
    j["rows"].push_back({{"ratio", row.statics.ratio}, {"budget", row.statics.budget},
                         {"static_hit_rate", row.statics.hit_rate}, {"replay_hit_rate", row.replay},
                         {"oracle_hit_rate", row.statics.oracle}, {"replay_moves", row.replay_moves}});
  fmt::print("{}\n", j.dump(2));
}

void print_sweep(const std::vector<TraceSweepRow>& rows, const ReplayOptions& base) {
  fmt::print("hit rate on the second half of the trace; static plans from the first half, replay ({}, every {} "
             "tokens) learns online:\n{:>6}",
             base.strategy, base.replan_every, "budget");
  for (const auto& name : strategy_names()) fmt::print(" {:>13}", name.substr(0, 13));
  fmt::print(" {:>13} {:>13} {:>8}\n", "replay", "oracle", "moves");
  for (const auto& row : rows) {
    fmt::print("{:>6}", percent(row.statics.ratio));
    for (double h : row.statics.hit_rate) fmt::print(" {:>13}", percent(h));
    fmt::print(" {:>13} {:>13} {:>8}\n", percent(row.replay), percent(row.statics.oracle), row.replay_moves);
  }
}

// Every flag that needs no trace is checked before the trace is read, and the rest before anything is printed.
void check_flags(const ReplayFlags& f) {
  if (f.replan_every < 1) fail("--replan-every must be at least 1 token, got ", f.replan_every);
  if (!(f.ema_alpha > 0.0 && f.ema_alpha <= 1.0)) fail("--ema-alpha must be in (0, 1], got ", f.ema_alpha);
  if (!(f.hysteresis >= 0.0 && f.hysteresis <= kMaxHysteresis))
    fail("--hysteresis must be in [0, ", kMaxHysteresis, "], got ", f.hysteresis);
  if (f.max_moves < -1) fail("--max-moves-per-replan must be -1 (no cap) or non-negative, got ", f.max_moves);
  if (f.score_from && *f.score_from < 0) fail("--score-from must be non-negative, got ", *f.score_from);
  if (f.score_from && f.held_out_half)
    fail("--held-out-half scores the second half; it does not go with --score-from (give one of them)");
  if (f.sweep && (f.score_from || f.held_out_half))
    fail("--sweep always scores the second half; it does not go with --score-from or --held-out-half");
  if (f.sweep && !f.initial.empty()) fail("--sweep starts every budget from the uniform plan; it does not go with --initial");
  parse_strategy(f.strategy);
  if (!f.sweep || f.num_gpu_experts || f.per_layer || f.ratio) f.budget();  // --sweep picks its own budgets
}

int run_replay(const ReplayFlags& f) {
  // Without --policy, any re-plan flag selects the windowed `replan` policy; with another --policy they would be
  // ignored, so they are refused.
  const std::string policy = f.policy_given || !f.replan_flags_given ? f.decode.policy : "replan";
  if (policy != "replan") {
    if (f.replan_flags_given)
      fail("--strategy, --min/--max-experts-per-layer, --replan-every, --ema-alpha, --hysteresis, "
           "--max-moves-per-replan, --initial, --score-from, --held-out-half, --windows and --sweep belong to "
           "--policy replan, not --policy ", policy);
    const BudgetSpec budget = f.budget();
    f.plan_options();  // checks the cost-model flags before the trace is read
    const RoutingTrace trace = read_trace_csv(f.trace, f.num_experts);
    DecodePolicyFlags d = f.decode;
    d.policy = policy;
    return run_decode_policy(trace, f.trace, d, f, resolve_budget(budget, trace.num_layers, trace.num_experts), f.json);
  }
  check_flags(f);
  ReplayOptions o;
  o.plan = f.plan_options();
  const RoutingTrace trace = read_trace_csv(f.trace, f.num_experts);
  o.strategy = f.strategy;
  if (!f.sweep) o.budget = resolve_budget(f.budget(), trace.num_layers, trace.num_experts);
  o.replan_every = f.replan_every;
  o.ema_alpha = f.ema_alpha;
  o.hysteresis = f.hysteresis;
  o.max_moves_per_replan = f.max_moves;
  o.score_from = f.held_out_half ? trace.num_tokens / 2 : f.score_from.value_or(0);
  if (o.score_from > trace.num_tokens)
    fail("--score-from ", o.score_from, " is past the end of ", f.trace, " (", trace.num_tokens, " tokens)");
  o.expert_bytes = o.plan.expert_bytes;
  if (!f.initial.empty()) {
    const PlanMask m = read_plan_file(f.initial);
    if (m.num_layers != trace.num_layers || m.num_experts != trace.num_experts)
      fail(f.initial, ": plan is (", m.num_layers, ", ", m.num_experts, ") but the trace ", f.trace, " is (",
           trace.num_layers, ", ", trace.num_experts, ")");
    o.initial_mask = m.mask;
  }
  // Computed before the header is printed, so an error (a byte count that overflows) is the only output.
  std::vector<TraceSweepRow> sweep_rows;
  ReplayResult r;
  if (f.sweep) sweep_rows = sweep_trace(trace, {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}, o);
  else r = replay(trace, o);
  std::optional<double> fixed_hit, oracle_hit;
  if (!f.sweep && r.scored_from > 0 && r.scored_from < trace.num_tokens) {
    const CountTable before = trace.counts(0, r.scored_from), after = trace.counts(r.scored_from, trace.num_tokens);
    fixed_hit = evaluate_mask(plan_gpu_expert_placement(before.to_scores(), o.budget, "frequency").mask, after).hit_rate;
    oracle_hit = plan_gpu_expert_placement(after.to_scores(), o.budget, "frequency").report.expected_hit_rate;
  }
  if (f.json && f.sweep) {
    print_sweep_json(sweep_rows, o);
    return 0;
  }
  if (f.json) {
    nlohmann::json j = {{"command", "replay"}, {"trace", f.trace}, {"tokens", trace.num_tokens},
                        {"layers", trace.num_layers}, {"layer_ids", trace.layer_ids},
                        {"experts", trace.num_experts}, {"top_k", trace.top_k}, {"policy", "replan"},
                        {"strategy", o.strategy}, {"budget", o.budget}, {"initial_experts", r.initial_experts},
                        {"replan_every", o.replan_every}, {"ema_alpha", o.ema_alpha}, {"hysteresis", o.hysteresis},
                        {"max_moves_per_replan", o.max_moves_per_replan}, {"scored_from", r.scored_from},
                        {"hit_rate", r.hit_rate}, {"routed", r.routed}, {"replans", r.replans}, {"moves", r.moves},
                        {"warmup_steps", r.warmup_steps}, {"scored_steps", r.scored_steps},
                        {"warmup_moves", r.warmup_moves}, {"scored_moves", r.scored_moves},
                        {"warmup_moves_per_layer_per_step", r.warmup_moves_per_layer_per_step},
                        {"scored_moves_per_layer_per_step", r.scored_moves_per_layer_per_step},
                        {"windows", nlohmann::json::array()}};
    if (r.bytes_moved) j["bytes_moved"] = *r.bytes_moved;
    if (fixed_hit) j["static_frequency_hit_rate"] = *fixed_hit, j["oracle_hit_rate"] = *oracle_hit;
    for (const auto& w : r.windows)
      j["windows"].push_back({{"begin", w.begin}, {"end", w.end}, {"hit_rate", w.hit_rate}, {"moves", w.moves}});
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("{}: {} tokens, {} layers (model layers {}), {} experts, top-{}\n", f.trace, trace.num_tokens,
             trace.num_layers, fmt::join(trace.layer_ids, " "), trace.num_experts, trace.top_k);
  if (f.sweep) {
    print_sweep(sweep_rows, o);
    return 0;
  }
  fmt::print("replay ({}, {} GPU experts, re-plan every {} tokens rounded up to a step end, EMA alpha {}, "
             "hysteresis {}, max moves {}):\n",
             o.strategy, o.budget, o.replan_every, o.ema_alpha, o.hysteresis,
             o.max_moves_per_replan < 0 ? std::string("unlimited") : std::to_string(o.max_moves_per_replan));
  if (r.initial_experts != o.budget)
    fmt::print("  the initial plan holds {} GPU experts; topped up to {} from the uniform plan\n", r.initial_experts,
               o.budget);
  fmt::print("  hit rate {} over tokens {}..{}; over the whole trace {} re-plans, {} expert moves", percent(r.hit_rate),
             r.scored_from, trace.num_tokens, r.replans, r.moves);
  if (r.bytes_moved) fmt::print(", {} bytes moved", *r.bytes_moved);
  fmt::print("\n  moves per layer per step: {:.4f} over {} warm-up steps, {:.4f} over {} scored steps\n",
             r.warmup_moves_per_layer_per_step, r.warmup_steps, r.scored_moves_per_layer_per_step, r.scored_steps);
  if (fixed_hit)
    fmt::print("  static frequency plan from tokens 0..{}: {}; best static plan for the scored tokens (oracle): {}\n",
               r.scored_from, percent(*fixed_hit), percent(*oracle_hit));
  // Hit rate over time, at most ~24 rows (windows merged evenly).
  const size_t n = r.windows.size(), group = std::max<size_t>(1, f.windows ? 1 : (n + 23) / 24);
  fmt::print("  {:>8} {:>8} {:>9} {:>6}\n", "tokens", "to", "hit rate", "moves");
  for (size_t i = 0; i < n; i += group) {
    double hits = 0, weight = 0;
    int64_t moves = 0;
    const size_t end = std::min(n, i + group);
    for (size_t j = i; j < end; ++j) {
      const double w = static_cast<double>(r.windows[j].end - r.windows[j].begin);
      hits += r.windows[j].hit_rate * w;
      weight += w;
      moves += r.windows[j].moves;
    }
    fmt::print("  {:>8} {:>8} {:>9} {:>6}\n", r.windows[i].begin, r.windows[end - 1].end, percent(hits / weight), moves);
  }
  return 0;
}

}  // namespace

Action add_replay_command(CLI::App& app) {
  auto f = std::make_shared<ReplayFlags>();
  auto* cmd = app.add_subcommand("replay", "Replay a routing trace with online re-planning of GPU experts");
  cmd->add_option("--trace", f->trace, "per-token trace CSV")->required()->check(CLI::ExistingFile);
  cmd->add_option("--num-experts", f->num_experts, "experts per layer (default: largest id + 1)");
  add_budget_flags(*cmd, *f);
  add_planner_flags(*cmd, *f);
  add_cost_flags(*cmd, *f);
  cmd->add_option("--replan-every", f->replan_every, "tokens between re-plans")->capture_default_str();
  cmd->add_option("--ema-alpha", f->ema_alpha, "weight of the newest window in the smoothed counts")->capture_default_str();
  cmd->add_option("--hysteresis", f->hysteresis, "residents' scores count (1+H) times when re-planning")
      ->capture_default_str();
  cmd->add_option("--max-moves-per-replan", f->max_moves, "experts loaded per re-plan at most (-1: no cap)")
      ->capture_default_str();
  cmd->add_option("--score-from", f->score_from, "score only tokens from this one on (earlier ones are learned from)");
  cmd->add_flag("--held-out-half", f->held_out_half, "score the second half only and compare with a static plan "
                                                     "from the first half");
  cmd->add_option("--initial", f->initial, "PLAN.json to start from (default: uniform)")->check(CLI::ExistingFile);
  cmd->add_flag("--windows", f->windows, "print every re-plan window");
  cmd->add_flag("--sweep", f->sweep, "budgets 10%..90% (no budget flag needed): every static strategy, the replay "
                                     "and the oracle");
  cmd->add_option("--policy", f->decode.policy,
                  "replan (windowed global re-plans) | static | score-cache | cost-aware (decode-time, per step)")
      ->check(CLI::IsMember({"replan", "static", "score-cache", "cost-aware"}))
      ->capture_default_str();
  add_decode_policy_flags(*cmd, f->decode);
  cmd->add_flag("--json", f->json, "print one JSON object with every figure, at full precision");
  return [f, cmd] {
    f->policy_given = cmd->count("--policy") > 0;
    for (const char* name : {"--strategy", "--min-experts-per-layer", "--max-experts-per-layer", "--replan-every",
                             "--ema-alpha", "--hysteresis", "--max-moves-per-replan", "--initial", "--score-from",
                             "--held-out-half", "--windows", "--sweep"})
      f->replan_flags_given = f->replan_flags_given || cmd->count(name) > 0;
    return run_replay(*f);
  };
}

}  // namespace hymoe::tool
