#include "placement_flags.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>

#include "hymoe/error.h"

namespace hymoe::tool {
namespace {

// Far beyond any real machine (an hour per token-expert; a billion token-experts per layer per step), and small
// enough that the cost model's sums over layers stay finite.
constexpr double kMaxCostMicroseconds = 3.6e9;
constexpr double kMaxRoutedPerStep = 1e9;

}  // namespace

std::optional<uint64_t> PlacementFlags::expert_bytes() const {
  if (!expert_bytes_text) return std::nullopt;
  const std::string& text = *expert_bytes_text;
  const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  if (!digits && text.size() > 1 && text[0] == '-' && text.find_first_not_of("0123456789", 1) == std::string::npos)
    fail("--expert-bytes must be non-negative, got ", text);
  errno = 0;
  const unsigned long long value = digits ? std::strtoull(text.c_str(), nullptr, 10) : 0;
  if (!digits || errno == ERANGE)
    fail("--expert-bytes must be an integer in [0, ", std::numeric_limits<uint64_t>::max(), "], got ",
         quote_for_message(text));
  return static_cast<uint64_t>(value);
}

placement::BudgetSpec PlacementFlags::budget() const {
  const int given = (num_gpu_experts ? 1 : 0) + (per_layer ? 1 : 0) + (ratio ? 1 : 0);
  if (given != 1)
    fail("give the GPU budget exactly once: --num-gpu-experts N, --num-gpu-experts-per-layer N or "
         "--gpu-experts-ratio R");
  using K = placement::BudgetSpec::Kind;
  if (num_gpu_experts) return {K::kTotal, static_cast<double>(*num_gpu_experts)};
  if (per_layer) return {K::kPerLayer, static_cast<double>(*per_layer)};
  return {K::kRatio, *ratio};
}

placement::PlanOptions PlacementFlags::plan_options() const {
  if (seed < 0) fail("--seed must be non-negative, got ", seed);
  const std::optional<uint64_t> bytes_per_expert = expert_bytes();
  if (min_per_layer && *min_per_layer < 0) fail("--min-experts-per-layer must be non-negative, got ", *min_per_layer);
  if (max_per_layer && *max_per_layer < 0) fail("--max-experts-per-layer must be non-negative, got ", *max_per_layer);
  // A floor of 0 is the default spelled out (the conformance cases do); any other bound must be honoured. An unknown
  // strategy is left to the planner, whose message lists the known ones.
  const bool bounded = min_per_layer.value_or(0) > 0 || max_per_layer.has_value();
  const auto& names = placement::strategy_names();
  const auto known = std::find(names.begin(), names.end(), strategy);
  if (bounded && known != names.end() &&
      !placement::strategy_uses_layer_bounds(static_cast<placement::Strategy>(known - names.begin())))
    fail(max_per_layer ? "--max-experts-per-layer" : "--min-experts-per-layer", " has no effect with --strategy ",
         strategy, "; only score_aware_layer_balanced and critical_path take per-layer bounds");
  const std::pair<const char*, double> times[] = {{"--cpu-us-per-token-expert", cpu_us},
                                                  {"--gpu-us-per-token-expert", gpu_us},
                                                  {"--cpu-layer-overhead-us", cpu_overhead_us},
                                                  {"--gpu-layer-overhead-us", gpu_overhead_us}};
  for (const auto& [flag, v] : times)
    if (!(v >= 0 && v <= kMaxCostMicroseconds))
      fail(flag, " must be in [0, ", kMaxCostMicroseconds, "] microseconds, got ", v);
  if (!(routed_per_step > 0 && routed_per_step <= kMaxRoutedPerStep))
    fail("--routed-per-step must be in (0, ", kMaxRoutedPerStep, "], got ", routed_per_step);

  placement::PlanOptions o;
  o.alpha = alpha;
  o.min_experts_per_layer = min_per_layer.value_or(0);
  o.max_experts_per_layer = max_per_layer;
  o.seed = static_cast<uint64_t>(seed);
  o.expert_bytes = bytes_per_expert;
  o.cost.cpu_seconds_per_token_expert = cpu_us * 1e-6;
  o.cost.gpu_seconds_per_token_expert = gpu_us * 1e-6;
  o.cost.cpu_layer_overhead_seconds = cpu_overhead_us * 1e-6;
  o.cost.gpu_layer_overhead_seconds = gpu_overhead_us * 1e-6;
  o.cost.routed_per_step = routed_per_step;
  return o;
}

void add_budget_flags(CLI::App& cmd, PlacementFlags& f) {
  auto* total = cmd.add_option("--num-gpu-experts", f.num_gpu_experts, "GPU experts in total (clamped to [0, L*E])");
  auto* per = cmd.add_option("--num-gpu-experts-per-layer", f.per_layer,
                             "GPU experts per MoE layer (times the number of MoE layers)");
  auto* ratio = cmd.add_option("--gpu-experts-ratio", f.ratio, "share of all experts on the GPU, int(L*E*R)");
  total->excludes(per)->excludes(ratio);
  per->excludes(ratio);
}

void add_planner_flags(CLI::App& cmd, PlacementFlags& f) {
  cmd.add_option("--strategy", f.strategy,
                 "frequency | score_aware_layer_balanced | uniform | front-loading | random | critical_path")
      ->capture_default_str();
  cmd.add_option("--alpha", f.alpha, "EMA weight of the current statistics when --previous is given")
      ->capture_default_str();
  cmd.add_option("--min-experts-per-layer", f.min_per_layer, "balanced/critical_path: GPU experts every layer gets");
  cmd.add_option("--max-experts-per-layer", f.max_per_layer, "balanced/critical_path: at most this many per layer");
  cmd.add_option("--seed", f.seed, "random strategy's seed")->capture_default_str();
  cmd.add_option("--expert-bytes", f.expert_bytes_text, "bytes of one expert's weights (reports GPU and moved bytes)");
}

void add_cost_flags(CLI::App& cmd, PlacementFlags& f) {
  cmd.add_option("--cpu-us-per-token-expert", f.cpu_us, "cost model: CPU microseconds per routed token-expert")
      ->capture_default_str();
  cmd.add_option("--gpu-us-per-token-expert", f.gpu_us, "cost model: GPU microseconds per routed token-expert")
      ->capture_default_str();
  cmd.add_option("--cpu-layer-overhead-us", f.cpu_overhead_us, "cost model: fixed CPU microseconds per layer")
      ->capture_default_str();
  cmd.add_option("--gpu-layer-overhead-us", f.gpu_overhead_us, "cost model: fixed GPU microseconds per layer")
      ->capture_default_str();
  cmd.add_option("--routed-per-step", f.routed_per_step, "cost model: routed token-experts per layer per step (batch x top-k)")
      ->capture_default_str();
}

std::string percent(double share) { return fmt::format("{:.1f}%", 100.0 * share); }

}  // namespace hymoe::tool
