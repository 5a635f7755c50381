// Decode-time placement policies: replay a per-token trace step by step (one step = one forward pass, the
// trace's step column) with a policy that learns only from what a runtime would have seen — the prompt (the
// trace's first step), then the decode steps already run — and moves experts only between steps.
//
// Policies (docs/placement.md, "Decode-time placement"):
//   static      the start placement, never moved;
//   score-cache per layer, a score per expert (the decayed routed counts of the steps run so far, plus an optional
//               prior from the prompt); after each step the hottest non-resident replaces the coldest resident
//               when it is hotter by a margin and the layer has a move credit (credit grows by `move_rate` per
//               step, up to `move_credit_cap`): LFU with decay and a rate limit;
//   cost-aware  the same scores, but a swap is made only when the CPU time it saves within `horizon_steps` steps
//               (the admitted expert's expected routed token-experts per step minus the evicted one's, times the
//               CPU-minus-GPU cost of one) exceeds the time to transfer one expert (`expert_bytes` over
//               `pcie_gbps`); the move credit, if given, still caps it.
// Plain data in, per-step hits and moves out; depends on the planner (for the start plan) and the trace only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hymoe/placement/planner.h"
#include "hymoe/placement/trace.h"

namespace hymoe::placement {

struct DecodePolicyOptions {
  std::string policy = "score-cache";  // static | score-cache | cost-aware
  int64_t budget = 0;                  // GPU experts (already resolved)
  std::string start = "uniform";       // uniform (no knowledge) | prompt (frequency plan of the first step)
  double prompt_weight = 0;            // prior: the prompt's per-token counts times this (in decode tokens' worth)
  double decay = 0.9;                  // scores are multiplied by this before each step's counts are added
  double margin = 0;                   // admit only when hotter than the victim by a factor (1 + margin)
  std::optional<double> move_rate = 0.125;  // move credit per layer per step; nullopt: no credit limit
  double move_credit_cap = 1;          // credit a layer can save up
  // cost-aware only
  uint64_t expert_bytes = 0;
  double pcie_gbps = 25;               // GB/s (1e9 bytes per second)
  double horizon_steps = 8;
  CostModel cost;                      // per-token-expert CPU and GPU seconds
};

struct DecodeStep {
  int64_t step = 0;               // the trace's step id (-1 when the trace has none)
  int64_t first_token = 0, tokens = 0;
  double hits = 0, routed = 0;    // token-experts routed in this step, and those that landed on GPU experts
  int64_t moves = 0;              // experts loaded after this step (before the next one)
};

struct DecodeReplay {
  std::vector<DecodeStep> steps;  // in trace order; steps[0] is the prompt
  std::vector<uint8_t> start_mask, final_mask;
};

// Steps of a trace: [first token, end token) per run of equal step ids; a trace without step ids (all -1) has one
// token per step.
std::vector<std::pair<int64_t, int64_t>> trace_steps(const RoutingTrace& trace);
// The first token of the first step that starts at or after `token` (num_tokens when none does).
int64_t step_start_at_or_after(const RoutingTrace& trace, int64_t token);

DecodeReplay replay_decode(const RoutingTrace& trace, const DecodePolicyOptions& options);

// The score-cache and cost-aware policies online, one decode step at a time: what replay_decode runs over a trace,
// and what a running model (hymoe.kt's DecodePlacer) runs over its engines' counts. Starts from `start_mask`
// (L*E); `prompt` (L*E counts of the prompt's `prompt_tokens` tokens, or empty) seeds the scores as
// options.prompt_weight says.
class OnlineDecodePolicy {
 public:
  OnlineDecodePolicy(int64_t num_layers, int64_t num_experts, const DecodePolicyOptions& options,
                     std::vector<uint8_t> start_mask, const std::vector<double>& prompt = {},
                     double prompt_tokens = 1);
  // One decode step's routed token-experts (L*E): the scores decay and take them in, then (when `move`) each
  // layer makes the swaps the policy allows. Returns the number of experts moved.
  int64_t step(const std::vector<double>& counts, bool move = true);
  const std::vector<uint8_t>& mask() const { return mask_; }
  int64_t num_experts() const { return E_; }

 private:
  int64_t L_, E_;
  DecodePolicyOptions o_;
  std::vector<uint8_t> mask_;
  std::vector<double> score_, credit_;
  double weight_ = 0;
};

// Hit rate and moves over steps [first, last) of a replay. Moves are those made after these steps.
struct StepRangeSummary {
  int64_t first_step = 0, last_step = 0;  // indices into DecodeReplay::steps
  double hit_rate = 0, routed = 0;
  int64_t moves = 0;
  double moves_per_layer_per_8_steps = 0;
};
StepRangeSummary summarize_steps(const DecodeReplay& r, int64_t first, int64_t last, int64_t num_layers);

std::vector<std::string> decode_policy_names();

}  // namespace hymoe::placement
