// GPU-expert placement planner for hybrid CPU/GPU MoE inference: given per-(layer, expert) scores (activation
// counts or frequencies) and a budget of GPU-resident experts, choose which experts live on the GPU.
//
// Pure and deterministic: plain data in, a 0/1 mask and a report out; no I/O, no threads, no dependency on the
// MoE layer or the kernels. `frequency` and `score_aware_layer_balanced` reproduce KTransformers' kt-kernel
// `plan_gpu_expert_placement` (masks, report fields, validation order and messages); `uniform`, `front-loading`
// and `random` are its SGLang-wrapper strategies; `critical_path` is hymoe's own (docs/placement.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hymoe/tensor.h"

namespace hymoe::placement {

enum class Strategy { kFrequency, kScoreAwareLayerBalanced, kUniform, kFrontLoading, kRandom, kCriticalPath };

// The spellings accepted on the command line and written in reports, in this order.
const std::vector<std::string>& strategy_names();
std::string_view strategy_name(Strategy strategy);
// Whether the strategy honours min/max experts per layer (the others ignore them).
bool strategy_uses_layer_bounds(Strategy strategy);
// Throws the reference's message for an unknown name: "Unknown expert placement strategy: 'x'. Supported
// strategies: [...]".
Strategy parse_strategy(std::string_view name);

// Calibratable cost of one MoE layer in hybrid execution (docs/placement.md, "Cost model"). Per forward step a
// layer routes `routed_per_step` token-experts (batch tokens x top-k); the share routed to CPU-resident experts
// costs `cpu_seconds_per_token_expert` each, the rest `gpu_seconds_per_token_expert`; each side that has work in
// the layer also pays its fixed overhead. The layer takes max(cpu, gpu); a step takes the sum over layers.
struct CostModel {
  double cpu_seconds_per_token_expert = 200e-6;
  double gpu_seconds_per_token_expert = 10e-6;
  double cpu_layer_overhead_seconds = 30e-6;
  double gpu_layer_overhead_seconds = 10e-6;
  double routed_per_step = 8.0;
};

// Predicted seconds of one forward step for `mask` (L*E, row-major) on `scores` (L, E).
double predicted_step_seconds(const Tensor& scores, const std::vector<uint8_t>& mask, const CostModel& cost);
// The same for one layer, given the share of its routed token-experts that lands on GPU experts and whether each
// side holds any routed work.
double predicted_layer_seconds(double gpu_share, bool cpu_has_work, bool gpu_has_work, const CostModel& cost);

struct PlanOptions {
  int64_t min_experts_per_layer = 0;
  std::optional<int64_t> max_experts_per_layer;  // nullopt: all experts of a layer
  double alpha = 0.8;                            // weight of the current scores when previous ones are given
  std::optional<Tensor> previous_scores;         // same shape as the scores
  uint64_t seed = 42;                            // `random` only
  std::optional<uint64_t> expert_bytes;          // bytes of one expert's weights: reports GPU bytes when set
  CostModel cost;                                // `critical_path` plans with it; every report predicts with it
};

// The reference's report, field for field, plus hymoe's additions (optional ones are absent when unknown).
struct PlacementReport {
  std::string strategy;
  int64_t num_layers = 0;
  int64_t num_experts_per_layer = 0;
  int64_t requested_num_gpu_experts = 0;
  int64_t actual_num_gpu_experts = 0;
  double expected_hit_rate = 0;  // selected_score / total_score; 0 only when total_score is exactly 0
  double selected_score = 0;     // float32 sums, as the reference computes them
  double total_score = 0;
  std::vector<int64_t> per_layer_counts;
  int64_t layer_min = 0, layer_max = 0;
  double layer_mean = 0, layer_std = 0;  // population standard deviation
  int64_t min_experts_per_layer = 0;
  std::optional<int64_t> max_experts_per_layer;
  double alpha = 0.8;
  bool previous_scores_provided = false;
  // hymoe additions
  std::optional<uint64_t> gpu_bytes;
  double predicted_step_seconds = 0;      // this plan under the cost model, on the planning scores
  double predicted_all_cpu_seconds = 0;   // no expert on the GPU, same model: the baseline the plan improves on
  std::vector<int64_t> dense_layers;       // model layers outside the plan (all-GPU), plan_model_placement only
};

struct Placement {
  int64_t num_layers = 0, num_experts = 0;
  std::vector<uint8_t> mask;  // (L, E) row-major, 1 = GPU-resident
  Tensor scores;              // (L, E) float32 scores that were ranked (EMA-smoothed when previous given)
  PlacementReport report;
  bool on_gpu(int64_t layer, int64_t expert) const { return mask[static_cast<size_t>(layer * num_experts + expert)]; }
};

// Plans a placement. `scores` must be 2-D (L, E); `num_gpu_experts` is clamped to [0, L*E] first. Validation
// follows the reference's order and wording (see docs/placement.md); every failure is a hymoe::Error.
Placement plan_gpu_expert_placement(const Tensor& scores, int64_t num_gpu_experts, std::string_view strategy,
                                    const PlanOptions& options = {});

// The older `generate_gpu_experts_masks(activation_freq, num_gpu_experts)`: global top-k of the raw table, ties by
// lower flat index. Same mask as the `frequency` strategy without previous scores.
std::vector<uint8_t> generate_gpu_experts_masks(const Tensor& activation_freq, int64_t num_gpu_experts);

// How a budget was given on the command line; resolved against the number of MoE layers and experts per layer.
struct BudgetSpec {
  enum class Kind { kTotal, kPerLayer, kRatio } kind = Kind::kTotal;
  double value = 0;
};
// kTotal: value; kPerLayer: value * moe_layers; kRatio: int(total * value) as Python truncates. Not clamped: the
// planner clamps and reports the request.
int64_t resolve_budget(const BudgetSpec& budget, int64_t moe_layers, int64_t experts_per_layer);

// Which of a model's layers are MoE layers, as Hugging Face configs say it (DeepSeek/Kimi style):
// layer i is MoE iff i >= first_k_dense_replace and i % moe_layer_freq == 0.
struct LayerLayout {
  int64_t first_k_dense_replace = 0;
  int64_t moe_layer_freq = 1;
  // moe_layer_freq must be at least 1 (checked by plan_model_placement and at the command line before any use).
  bool is_moe(int64_t layer) const { return layer >= first_k_dense_replace && layer % moe_layer_freq == 0; }
};

// Plans over the MoE rows of a table that covers every model layer: dense rows are all-GPU and outside the
// budget (their mask rows are all 1, their report rows are absent). The report describes the MoE layers only.
Placement plan_model_placement(const Tensor& scores, const LayerLayout& layout, int64_t num_gpu_experts,
                               std::string_view strategy, const PlanOptions& options = {});

}  // namespace hymoe::placement
