// `hymoe plan`: plan GPU-resident experts from activation statistics, write PLAN.json (and a heat map), and tell
// what the plan buys on other data (--evaluate) or how every strategy compares over budgets (--sweep). Every input
// is read and checked, and the plan made, before anything is written; outputs are written atomically.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "hymoe/error.h"
#include "hymoe/output_files.h"
#include "hymoe/placement.h"
#include "hymoe/safetensors.h"
#include "placement_flags.h"

namespace hymoe::tool {
namespace {

using namespace hymoe::placement;

struct PlanFlags : PlacementFlags {
  std::vector<std::string> stats;
  std::string previous, output, svg, evaluate, plan;
  std::optional<int64_t> first_k_dense, moe_layer_freq, trace_experts;
  bool sweep = false, json = false;
};

// The statistics as the planner's score tensor: a single count file keeps its parsed rank, so a wrong one gets
// the reference's message; several files (or traces) are summed.
Tensor read_scores(const std::vector<std::string>& paths, std::optional<int64_t> trace_experts) {
  if (paths.size() == 1) {  // opened once: a pipe cannot be looked at and then read again
    StatsArray a = read_counts_array_or_trace(paths[0], trace_experts);
    return require_table(std::move(a), paths[0]).to_scores(paths[0]);  // a wrong rank: the reference's message
  }
  CountTable sum;
  for (const auto& path : paths) {
    const CountTable t = read_counts_or_trace(path, trace_experts);
    if (sum.counts.empty()) sum = t;
    else sum.add(t, path);
  }
  return sum.to_scores(paths.size() == 1 ? paths[0] : "the sum of the --stats files");
}

void print_plan(const PlacementReport& r, bool evaluated) {
  fmt::print("strategy {}: {} of {} experts on the GPU (requested {}), in-sample hit rate {} (on the planning "
             "data{})\n",
             r.strategy, r.actual_num_gpu_experts, r.num_layers * r.num_experts_per_layer, r.requested_num_gpu_experts,
             percent(r.expected_hit_rate),
             evaluated ? "" : "; not a forecast: give --evaluate HELD-OUT to see what the plan realizes on other data");
  fmt::print("per-layer GPU experts: min {}, max {}, mean {:.2f}, std {:.2f}\n", r.layer_min, r.layer_max,
             r.layer_mean, r.layer_std);
  fmt::print("predicted step time {:.1f} us (all experts on CPU: {:.1f} us)\n", r.predicted_step_seconds * 1e6,
             r.predicted_all_cpu_seconds * 1e6);
  if (r.gpu_bytes) fmt::print("GPU bytes for experts: {}\n", *r.gpu_bytes);
  if (!r.dense_layers.empty()) fmt::print("dense layers (all-GPU, outside the budget): {}\n", fmt::join(r.dense_layers, " "));
}

nlohmann::json sweep_json(const CountTable& train, const CountTable& heldout, const PlanOptions& options) {
  const std::vector<double> ratios = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9};
  nlohmann::json j = {{"strategies", strategy_names()},
                      {"all_cpu_predicted_step_seconds",
                       evaluate_mask(std::vector<uint8_t>(heldout.counts.size(), 0), heldout, options.cost)
                           .predicted_step_seconds},
                      {"rows", nlohmann::json::array()}};
  for (const auto& row : sweep_static(train, heldout, ratios, options))
    j["rows"].push_back({{"ratio", row.ratio}, {"budget", row.budget}, {"hit_rate", row.hit_rate},
                         {"oracle_hit_rate", row.oracle}, {"predicted_step_seconds", row.predicted_seconds}});
  return j;
}

void print_sweep(const CountTable& train, const CountTable& heldout, const PlanOptions& options) {
  const std::vector<double> ratios = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9};
  const auto rows = sweep_static(train, heldout, ratios, options);
  fmt::print("realized hit rate on the evaluation data, planned from the statistics:\n{:>6}", "budget");
  for (const auto& name : strategy_names()) fmt::print(" {:>13}", name.substr(0, 13));
  fmt::print(" {:>13}\n", "oracle");
  for (const auto& row : rows) {
    fmt::print("{:>6}", percent(row.ratio));
    for (double h : row.hit_rate) fmt::print(" {:>13}", percent(h));
    fmt::print(" {:>13}\n", percent(row.oracle));
  }
  fmt::print("predicted step time on the evaluation data (us, cost model; all experts on CPU: {:.1f}):\n{:>6}",
             evaluate_mask(std::vector<uint8_t>(heldout.counts.size(), 0), heldout, options.cost).predicted_step_seconds * 1e6,
             "budget");
  for (const auto& name : strategy_names()) fmt::print(" {:>13}", name.substr(0, 13));
  fmt::print("\n");
  for (const auto& row : rows) {
    fmt::print("{:>6}", percent(row.ratio));
    for (double t : row.predicted_seconds) fmt::print(" {:>13.1f}", t * 1e6);
    fmt::print("\n");
  }
}

// The model layout flags, checked before any layer index is taken modulo the frequency.
std::optional<LayerLayout> layer_layout(const PlanFlags& f) {
  if (!f.first_k_dense && !f.moe_layer_freq) return std::nullopt;
  if (f.first_k_dense && *f.first_k_dense < 0)
    fail("--first-k-dense-replace must be non-negative, got ", *f.first_k_dense);
  if (f.moe_layer_freq && *f.moe_layer_freq < 1) fail("--moe-layer-freq must be at least 1, got ", *f.moe_layer_freq);
  return LayerLayout{f.first_k_dense.value_or(0), f.moe_layer_freq.value_or(1)};
}

int run_plan(const PlanFlags& f) {
  if (f.output.empty() && f.evaluate.empty())
    fail("nothing to do: give --output PLAN.json, or --evaluate DATA to see what a plan buys");
  if (f.sweep && f.evaluate.empty()) fail("--sweep needs --evaluate DATA (the held-out data to score on)");
  if (!f.plan.empty() && (f.sweep || !f.stats.empty()))
    fail("--plan evaluates an existing plan; it does not go with --stats or --sweep");
  OutputFiles files;
  for (const auto& path : f.stats) files.add_input("--stats", path);
  files.add_input("--previous", f.previous);
  files.add_input("--evaluate", f.evaluate);
  files.add_input("--plan", f.plan);
  files.add_output("--output", f.output);
  files.add_output("--svg", f.svg);
  files.check();
  const PlanOptions base = f.plan_options();
  const std::optional<LayerLayout> layout = layer_layout(f);
  // --sweep picks its own budgets: a budget is needed only for the plan it also prints or writes.
  const bool has_budget = f.num_gpu_experts || f.per_layer || f.ratio;
  const bool make_plan = f.plan.empty() && (!f.sweep || has_budget || !f.output.empty() || !f.svg.empty());
  const std::optional<BudgetSpec> budget_spec = make_plan ? std::optional(f.budget()) : std::nullopt;
  if (f.sweep && layout) fail("--sweep plans all layers; it does not go with --first-k-dense-replace or --moe-layer-freq");

  if (!f.plan.empty()) {  // evaluate a plan made earlier
    const PlanMask m = read_plan_file(f.plan);
    const CountTable data = read_counts_or_trace(f.evaluate, f.trace_experts);
    if (m.num_layers != data.num_layers || m.num_experts != data.num_experts)
      fail(f.plan, ": plan is (", m.num_layers, ", ", m.num_experts, ") but ", f.evaluate, " is (", data.num_layers,
           ", ", data.num_experts, "): the plan was made for a different model");
    const Evaluation ev = evaluate_mask(m.mask, data, base.cost);
    if (f.json) {
      fmt::print("{}\n", nlohmann::json{{"command", "plan"}, {"plan", f.plan}, {"evaluate", f.evaluate},
                                        {"realized_hit_rate", ev.hit_rate}, {"layer_hit_rates", ev.layer_hit_rates},
                                        {"predicted_step_seconds", ev.predicted_step_seconds},
                                        {"predicted_all_cpu_seconds", ev.predicted_all_cpu_seconds}}
                             .dump(2));
      return 0;
    }
    fmt::print("{} on {}: realized hit rate {}, predicted step time {:.1f} us (all-CPU {:.1f} us)\n", f.plan,
               f.evaluate, percent(ev.hit_rate), ev.predicted_step_seconds * 1e6, ev.predicted_all_cpu_seconds * 1e6);
    return 0;
  }
  if (f.stats.empty()) fail("--stats FILE is required (or --plan PLAN.json with --evaluate)");

  const Tensor scores = read_scores(f.stats, f.trace_experts);
  PlanOptions options = base;
  if (!f.previous.empty()) options.previous_scores = read_scores({f.previous}, f.trace_experts);
  int64_t moe_layers = scores.rank() == 2 ? scores.dim(0) : 1;
  if (layout && scores.rank() == 2) {
    moe_layers = 0;
    for (int64_t l = 0; l < scores.dim(0); ++l) moe_layers += layout->is_moe(l);
  }
  const int64_t budget =
      budget_spec ? resolve_budget(*budget_spec, moe_layers, scores.rank() == 2 ? scores.dim(1) : 0) : 0;
  const Placement plan = layout ? plan_model_placement(scores, *layout, budget, f.strategy, options)
                                : plan_gpu_expert_placement(scores, budget, f.strategy, options);
  const std::string json = plan_to_json(plan);
  const std::string svg = f.svg.empty() ? "" : heatmap_svg(plan);

  std::optional<Evaluation> ev;
  CountTable heldout;
  if (!f.evaluate.empty()) {
    heldout = read_counts_or_trace(f.evaluate, f.trace_experts);
    if (heldout.num_layers != plan.num_layers || heldout.num_experts != plan.num_experts)
      fail(f.evaluate, ": data is (", heldout.num_layers, ", ", heldout.num_experts, ") but the statistics planned "
           "from are (", plan.num_layers, ", ", plan.num_experts, ")");
    ev = evaluate_mask(plan.mask, heldout, options.cost);
  }

  files.stage("--output", json);
  files.stage("--svg", svg);
  files.commit();
  std::optional<double> oracle;
  if (ev && make_plan)
    oracle = plan_gpu_expert_placement(heldout.to_scores(f.evaluate), plan.report.actual_num_gpu_experts, "frequency")
                 .report.expected_hit_rate;
  CountTable train;
  if (f.sweep) {
    train = CountTable(scores.dim(0), scores.dim(1));
    for (int64_t i = 0; i < scores.numel(); ++i) train.counts[static_cast<size_t>(i)] = plan.scores[i];
  }
  if (f.json) {
    nlohmann::json j = {{"command", "plan"}};
    if (make_plan) {
      j["report"] = nlohmann::json::parse(json)["report"];
      j["in_sample_hit_rate"] = plan.report.expected_hit_rate;
      j["forecast"] = ev.has_value();
    }
    if (ev && make_plan)
      j["evaluation"] = {{"data", f.evaluate},
                         {"realized_hit_rate", ev->hit_rate},
                         {"layer_hit_rates", ev->layer_hit_rates},
                         {"predicted_step_seconds", ev->predicted_step_seconds},
                         {"predicted_all_cpu_seconds", ev->predicted_all_cpu_seconds},
                         {"oracle_hit_rate", *oracle}};
    if (f.sweep) j["sweep"] = sweep_json(train, heldout, base);
    if (!f.output.empty()) j["wrote"] = f.output;
    if (!f.svg.empty()) j["wrote_svg"] = f.svg;
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  if (make_plan) print_plan(plan.report, ev.has_value());
  if (ev && make_plan) {
    fmt::print("on {}: realized hit rate {} (in-sample {}), predicted step time {:.1f} us (all-CPU {:.1f} us)\n",
               f.evaluate, percent(ev->hit_rate), percent(plan.report.expected_hit_rate),
               ev->predicted_step_seconds * 1e6, ev->predicted_all_cpu_seconds * 1e6);
    fmt::print("best static plan of the same size for that data (oracle): {}\n", percent(*oracle));
  }
  if (f.sweep) print_sweep(train, heldout, base);
  if (!f.output.empty()) fmt::print("wrote {}{}\n", f.output, f.svg.empty() ? "" : " and " + f.svg);
  return 0;
}

}  // namespace

Action add_plan_command(CLI::App& app) {
  auto f = std::make_shared<PlanFlags>();
  auto* cmd = app.add_subcommand("plan", "Choose the GPU-resident experts from activation statistics");
  cmd->add_option("--stats", f->stats, "count files (.json, .csv, .safetensors) or trace CSVs; several are summed")
      ->check(CLI::ExistingFile);
  cmd->add_option("--previous", f->previous, "previous scores, smoothed in with --alpha")->check(CLI::ExistingFile);
  add_budget_flags(*cmd, *f);
  add_planner_flags(*cmd, *f);
  add_cost_flags(*cmd, *f);
  cmd->add_option("--first-k-dense-replace", f->first_k_dense, "model layers before the first MoE layer (all-GPU)");
  cmd->add_option("--moe-layer-freq", f->moe_layer_freq, "every n-th layer is MoE (HF moe_layer_freq)");
  cmd->add_option("--num-experts", f->trace_experts, "experts per layer, for trace CSVs (default: largest id + 1)");
  cmd->add_option("--output", f->output, "PLAN.json to write");
  cmd->add_option("--svg", f->svg, "heat map of the scores with the GPU experts outlined");
  cmd->add_option("--evaluate", f->evaluate, "held-out counts or trace: the realized hit rate of the plan")
      ->check(CLI::ExistingFile);
  cmd->add_option("--plan", f->plan, "evaluate this existing PLAN.json instead of planning")->check(CLI::ExistingFile);
  cmd->add_flag("--sweep", f->sweep, "with --evaluate: every strategy at budgets 10%..90% against the oracle (a budget is "
                                      "needed only with --output or --svg)");
  cmd->add_flag("--json", f->json, "print one JSON object with every figure, at full precision");
  return [f] { return run_plan(*f); };
}

}  // namespace hymoe::tool
