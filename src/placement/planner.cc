// plan_gpu_expert_placement: validation (in the reference's order, with its facts in the messages), EMA scoring
// in float32, strategy dispatch and the report. Depends on core only.
#include "hymoe/placement/planner.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <numeric>

#include "hymoe/error.h"
#include "hymoe/rng.h"
#include "placement/strategies.h"

namespace hymoe::placement {
namespace {

// Shapes appear in messages as the reference prints them, Python tuples: (4,), (2, 3). core's shape_to_string
// writes exactly that.

// Python's repr of a float: shortest round trip, always with a decimal point or exponent.
std::string python_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  std::string out(buf, end);
  if (out.find_first_of(".e") == std::string::npos) out += ".0";
  return out;
}

std::string python_list(const std::vector<std::string>& names) {
  std::string out = "[";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", '" : "'") + names[i] + "'";
  return out + "]";
}

// alpha*current + (1-alpha)*previous in float32: two rounded products and a rounded sum (no FMA; the build
// passes -ffp-contract=off), with (1-alpha) computed in double first as Python does before torch sees it.
Tensor ema_scores(const Tensor& current, const Tensor& previous, double alpha) {
  const float a = static_cast<float>(alpha);
  const float b = static_cast<float>(1.0 - alpha);
  Tensor out(current.shape());
  for (int64_t i = 0; i < current.numel(); ++i) {
    const float x = a * current[i];
    const float y = b * previous[i];
    out[i] = x + y;
  }
  return out;
}

void validate_layer_bounds(int64_t budget, int64_t layers, int64_t experts, int64_t min_per_layer,
                           int64_t max_per_layer) {
  if (min_per_layer < 0) fail("min_experts_per_layer must be non-negative, got ", min_per_layer);
  if (max_per_layer < 0) fail("max_experts_per_layer must be non-negative, got ", max_per_layer);
  if (min_per_layer > max_per_layer)
    fail("min_experts_per_layer (", min_per_layer, ") cannot exceed max_experts_per_layer (", max_per_layer, ")");
  if (max_per_layer > experts)
    fail("max_experts_per_layer (", max_per_layer, ") cannot exceed num_experts_per_layer (", experts, ")");
  if (budget < min_per_layer * layers)
    fail("num_gpu_experts=", budget, " is too small for min_experts_per_layer=", min_per_layer, " across ", layers,
         " layers; need at least ", min_per_layer * layers);
  if (budget > max_per_layer * layers)
    fail("num_gpu_experts=", budget, " exceeds max_experts_per_layer=", max_per_layer, " across ", layers,
         " layers; at most ", max_per_layer * layers, " experts can be selected");
}

PlacementReport make_report(const detail::ScoreView& s, const std::vector<uint8_t>& mask, std::string_view strategy,
                            int64_t requested, const PlanOptions& options) {
  PlacementReport r;
  r.strategy = std::string(strategy);
  r.num_layers = s.num_layers;
  r.num_experts_per_layer = s.num_experts;
  r.requested_num_gpu_experts = requested;
  double selected = 0, total = 0;
  r.per_layer_counts.assign(static_cast<size_t>(s.num_layers), 0);
  for (int64_t l = 0; l < s.num_layers; ++l)
    for (int64_t e = 0; e < s.num_experts; ++e) {
      const double v = s.at(l, e);
      total += v;
      if (mask[static_cast<size_t>(l * s.num_experts + e)]) {
        selected += v;
        ++r.per_layer_counts[static_cast<size_t>(l)];
      }
    }
  // The reference sums float32 tensors; rounding the exact-ish double sum to float32 lands within an ulp or two.
  r.selected_score = static_cast<float>(selected);
  r.total_score = static_cast<float>(total);
  r.expected_hit_rate = r.total_score == 0 ? 0.0 : r.selected_score / r.total_score;
  r.actual_num_gpu_experts = std::accumulate(r.per_layer_counts.begin(), r.per_layer_counts.end(), int64_t{0});
  if (!r.per_layer_counts.empty()) {
    r.layer_min = *std::min_element(r.per_layer_counts.begin(), r.per_layer_counts.end());
    r.layer_max = *std::max_element(r.per_layer_counts.begin(), r.per_layer_counts.end());
    const double n = static_cast<double>(r.per_layer_counts.size());
    const double mean = static_cast<double>(r.actual_num_gpu_experts) / n;
    double var = 0;
    for (int64_t c : r.per_layer_counts) var += (static_cast<double>(c) - mean) * (static_cast<double>(c) - mean);
    r.layer_mean = static_cast<float>(mean);  // the reference reports float32 statistics
    r.layer_std = static_cast<float>(std::sqrt(var / n));
  }
  r.min_experts_per_layer = options.min_experts_per_layer;
  r.max_experts_per_layer = options.max_experts_per_layer;
  r.alpha = options.alpha;
  r.previous_scores_provided = options.previous_scores.has_value();
  if (options.expert_bytes) {
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(*options.expert_bytes, static_cast<uint64_t>(r.actual_num_gpu_experts), &bytes))
      fail("expert_bytes=", *options.expert_bytes, " times ", r.actual_num_gpu_experts,
           " GPU experts exceeds 2^64-1 bytes");
    r.gpu_bytes = bytes;
  }
  return r;
}

}  // namespace

const std::vector<std::string>& strategy_names() {
  static const std::vector<std::string> names = {"frequency", "score_aware_layer_balanced", "uniform",
                                                 "front-loading", "random", "critical_path"};
  return names;
}

std::string_view strategy_name(Strategy strategy) { return strategy_names()[static_cast<size_t>(strategy)]; }

bool strategy_uses_layer_bounds(Strategy s) {
  return s == Strategy::kScoreAwareLayerBalanced || s == Strategy::kCriticalPath;
}

Strategy parse_strategy(std::string_view name) {
  const auto& names = strategy_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<Strategy>(i);
  // The reference lists its names sorted.
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  fail("Unknown expert placement strategy: ", quote_for_message(name), ". Supported strategies: ", python_list(sorted));
}

Placement plan_gpu_expert_placement(const Tensor& scores, int64_t num_gpu_experts, std::string_view strategy_text,
                                    const PlanOptions& options) {
  // The reference's order: shape, alpha, previous scores, strategy, then the balanced strategy's bounds.
  if (scores.rank() != 2)
    fail("activation_freq must be a 2D tensor of shape (num_layers, num_experts), got shape ",
         shape_to_string(scores.shape()));
  if (!(options.alpha >= 0.0 && options.alpha <= 1.0))
    fail("alpha must be in [0, 1], got ", python_float(options.alpha));
  if (options.previous_scores && options.previous_scores->shape() != scores.shape())
    fail("previous_scores shape ", shape_to_string(options.previous_scores->shape()),
         " must match activation_freq shape ", shape_to_string(scores.shape()));
  const Strategy strategy = parse_strategy(strategy_text);

  const int64_t layers = scores.dim(0), experts = scores.dim(1);
  if (layers < 1 || experts < 1)
    fail("activation_freq must have at least one layer and one expert, got shape ", shape_to_string(scores.shape()));
  const int64_t total = layers * experts;
  const int64_t budget = std::clamp<int64_t>(num_gpu_experts, 0, total);
  const int64_t max_per_layer = options.max_experts_per_layer.value_or(experts);
  if (strategy_uses_layer_bounds(strategy))
    validate_layer_bounds(budget, layers, experts, options.min_experts_per_layer, max_per_layer);

  Placement p;
  p.num_layers = layers;
  p.num_experts = experts;
  p.scores = options.previous_scores ? ema_scores(scores, *options.previous_scores, options.alpha) : scores;
  double score_sum = 0;
  for (float v : p.scores.values()) {
    if (!std::isfinite(v)) fail("activation_freq must be finite; found ", v);  // hymoe's own check: NaN has no rank
    score_sum += std::fabs(static_cast<double>(v));
  }
  // The report's float32 sums must stay finite, or the hit rate is inf/inf.
  if (!(score_sum <= std::numeric_limits<float>::max()))
    fail("activation_freq sums to ", score_sum, ", beyond float32's range; scale the scores down");
  const detail::ScoreView view{layers, experts, p.scores.values()};

  switch (strategy) {
    case Strategy::kFrequency: p.mask = detail::frequency_mask(view, budget); break;
    case Strategy::kScoreAwareLayerBalanced:
      p.mask = detail::layer_balanced_mask(view, budget, options.min_experts_per_layer, max_per_layer);
      break;
    case Strategy::kUniform: p.mask = detail::uniform_mask(view, budget); break;
    case Strategy::kFrontLoading: p.mask = detail::front_loading_mask(view, budget); break;
    case Strategy::kRandom: p.mask = detail::random_mask(view, budget, options.seed); break;
    case Strategy::kCriticalPath:
      p.mask = detail::critical_path_mask(view, budget, options.min_experts_per_layer, max_per_layer, options.cost);
      break;
  }
  HYMOE_CHECK(std::count(p.mask.begin(), p.mask.end(), uint8_t{1}) == budget, "strategy ", strategy_text);
  p.report = make_report(view, p.mask, strategy_name(strategy), num_gpu_experts, options);
  p.report.predicted_step_seconds = predicted_step_seconds(p.scores, p.mask, options.cost);
  p.report.predicted_all_cpu_seconds =
      predicted_step_seconds(p.scores, std::vector<uint8_t>(p.mask.size(), 0), options.cost);
  return p;
}

std::vector<uint8_t> generate_gpu_experts_masks(const Tensor& activation_freq, int64_t num_gpu_experts) {
  return plan_gpu_expert_placement(activation_freq, num_gpu_experts, "frequency").mask;
}

int64_t resolve_budget(const BudgetSpec& budget, int64_t moe_layers, int64_t experts_per_layer) {
  if (!std::isfinite(budget.value)) fail("GPU expert budget must be finite, got ", budget.value);
  switch (budget.kind) {
    case BudgetSpec::Kind::kTotal:
      if (budget.value != std::floor(budget.value)) fail("num_gpu_experts must be an integer, got ", budget.value);
      return static_cast<int64_t>(std::clamp(budget.value, -9e15, 9e15));
    case BudgetSpec::Kind::kPerLayer:
      if (budget.value != std::floor(budget.value))
        fail("num_gpu_experts_per_layer must be an integer, got ", budget.value);
      // Clamped first so the product cannot overflow; the planner clamps to L*E anyway.
      return static_cast<int64_t>(std::clamp(budget.value, -1e9, 1e9)) * moe_layers;
    case BudgetSpec::Kind::kRatio:
      if (budget.value < 0.0 || budget.value > 1.0) fail("gpu_experts_ratio must be in [0, 1], got ", budget.value);
      return static_cast<int64_t>(static_cast<double>(moe_layers * experts_per_layer) * budget.value);
  }
  return 0;
}

Placement plan_model_placement(const Tensor& scores, const LayerLayout& layout, int64_t num_gpu_experts,
                               std::string_view strategy, const PlanOptions& options) {
  if (scores.rank() != 2)
    fail("activation_freq must be a 2D tensor of shape (num_layers, num_experts), got shape ",
         shape_to_string(scores.shape()));
  if (layout.first_k_dense_replace < 0) fail("first_k_dense_replace must be non-negative, got ",
                                             layout.first_k_dense_replace);
  if (layout.moe_layer_freq < 1) fail("moe_layer_freq must be at least 1, got ", layout.moe_layer_freq);
  const int64_t layers = scores.dim(0), experts = scores.dim(1);
  std::vector<int64_t> moe, dense;
  for (int64_t l = 0; l < layers; ++l) (layout.is_moe(l) ? moe : dense).push_back(l);
  if (moe.empty()) fail("no MoE layer among ", layers, " layers (first_k_dense_replace=",
                        layout.first_k_dense_replace, ", moe_layer_freq=", layout.moe_layer_freq, ")");
  auto rows = [&](const Tensor& t) {
    Tensor out(Shape{static_cast<int64_t>(moe.size()), experts});
    for (size_t i = 0; i < moe.size(); ++i)
      std::copy_n(t.data() + moe[i] * experts, experts, out.data() + static_cast<int64_t>(i) * experts);
    return out;
  };
  PlanOptions moe_options = options;
  if (options.previous_scores) {
    if (options.previous_scores->shape() != scores.shape())
      fail("previous_scores shape ", shape_to_string(options.previous_scores->shape()),
           " must match activation_freq shape ", shape_to_string(scores.shape()));
    moe_options.previous_scores = rows(*options.previous_scores);
  }
  const Placement inner = plan_gpu_expert_placement(rows(scores), num_gpu_experts, strategy, moe_options);
  Placement p;
  p.num_layers = layers;
  p.num_experts = experts;
  p.mask.assign(static_cast<size_t>(layers * experts), 1);
  p.scores = scores;
  for (size_t i = 0; i < moe.size(); ++i) {
    std::copy_n(inner.mask.begin() + static_cast<int64_t>(i) * experts, experts, p.mask.begin() + moe[i] * experts);
    std::copy_n(inner.scores.data() + static_cast<int64_t>(i) * experts, experts, p.scores.data() + moe[i] * experts);
  }
  p.report = inner.report;
  p.report.dense_layers = dense;
  return p;
}

}  // namespace hymoe::placement
