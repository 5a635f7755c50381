// Decode-time placement policies replayed step by step over a trace (include/hymoe/placement/decode_policy.h).
#include "hymoe/placement/decode_policy.h"

#include <algorithm>
#include <cmath>

#include "hymoe/error.h"

namespace hymoe::placement {

std::vector<std::string> decode_policy_names() { return {"static", "score-cache", "cost-aware"}; }

std::vector<std::pair<int64_t, int64_t>> trace_steps(const RoutingTrace& trace) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t t = 0; t < trace.num_tokens; ++t) {
    const int64_t step = trace.steps.empty() ? -1 : trace.steps[static_cast<size_t>(t)];
    const bool same = t > 0 && step >= 0 && step == trace.steps[static_cast<size_t>(t - 1)];
    if (same) out.back().second = t + 1;
    else out.emplace_back(t, t + 1);
  }
  return out;
}

int64_t step_start_at_or_after(const RoutingTrace& trace, int64_t token) {
  for (const auto& st : trace_steps(trace))
    if (st.first >= token) return st.first;
  return trace.num_tokens;
}

namespace {

void check_options(const DecodePolicyOptions& o) {
  const auto names = decode_policy_names();
  if (std::find(names.begin(), names.end(), o.policy) == names.end())
    fail("unknown decode policy '", o.policy, "'; known: static, score-cache, cost-aware");
  if (o.start != "uniform" && o.start != "prompt") fail("start must be 'uniform' or 'prompt', got '", o.start, "'");
  if (!(o.decay > 0 && o.decay <= 1)) fail("decay must be in (0, 1], got ", o.decay);
  if (!(o.margin >= 0)) fail("margin must be non-negative, got ", o.margin);
  if (!std::isfinite(o.prompt_weight)) fail("prompt weight must be finite, got ", o.prompt_weight);
  if (o.move_rate && !(*o.move_rate >= 0)) fail("move rate must be non-negative, got ", *o.move_rate);
  if (!(o.move_credit_cap >= 1)) fail("move credit cap must be at least 1, got ", o.move_credit_cap);
  if (o.policy == "cost-aware") {
    if (o.expert_bytes == 0) fail("the cost-aware policy needs the bytes of one expert (--expert-bytes)");
    if (!(o.pcie_gbps > 0)) fail("pcie_gbps must be positive, got ", o.pcie_gbps);
    if (!(o.horizon_steps > 0)) fail("horizon must be positive, got ", o.horizon_steps);
  }
}

}  // namespace

DecodeReplay replay_decode(const RoutingTrace& trace, const DecodePolicyOptions& o) {
  check_options(o);
  const int64_t L = trace.num_layers, E = trace.num_experts;
  const auto steps = trace_steps(trace);
  if (steps.empty()) fail("the trace has no tokens");
  const CountTable prompt = trace.counts(steps[0].first, steps[0].second);

  DecodeReplay out;
  const Tensor zeros(Shape{L, E});
  out.start_mask = plan_gpu_expert_placement(o.start == "prompt" ? prompt.to_scores() : zeros, o.budget,
                                             o.start == "prompt" ? "frequency" : "uniform")
                       .mask;
  std::vector<uint8_t> mask = out.start_mask;

  // Scores in routed token-experts: the decayed sum of the steps seen, and `weight` the decayed number of steps,
  // so score / weight is an expert's expected token-experts per step (what the cost model charges).
  const double prompt_tokens = static_cast<double>(std::max<int64_t>(1, steps[0].second - steps[0].first));
  std::vector<double> score(static_cast<size_t>(L * E));
  for (size_t i = 0; i < score.size(); ++i) score[i] = o.prompt_weight * prompt.counts[i] / prompt_tokens;
  double weight = 0;
  std::vector<double> credit(static_cast<size_t>(L), 0.0);
  const double transfer_seconds = static_cast<double>(o.expert_bytes) / (o.pcie_gbps * 1e9);
  const double saved_per_token_expert = o.cost.cpu_seconds_per_token_expert - o.cost.gpu_seconds_per_token_expert;

  for (size_t s = 0; s < steps.size(); ++s) {
    DecodeStep rec;
    rec.step = trace.steps.empty() ? -1 : trace.steps[static_cast<size_t>(steps[s].first)];
    rec.first_token = steps[s].first;
    rec.tokens = steps[s].second - steps[s].first;
    // The prompt is learned from through the prior and the start plan, not as a decode step.
    if (s > 0)
      for (double& v : score) v *= o.decay;
    if (s > 0) weight = weight * o.decay + 1;
    for (int64_t t = steps[s].first; t < steps[s].second; ++t)
      for (int64_t l = 0; l < L; ++l)
        for (int64_t k = 0; k < trace.top_k; ++k) {
          const int32_t e = trace.expert(t, l, k);
          if (e < 0 || e >= E) continue;
          const auto i = static_cast<size_t>(l * E + e);
          rec.routed += 1;
          rec.hits += mask[i];
          if (s > 0) score[i] += 1;
        }
    const bool last = s + 1 == steps.size();
    if (s > 0 && !last && o.policy != "static") {
      for (int64_t l = 0; l < L; ++l) {
        double& c = credit[static_cast<size_t>(l)];
        if (o.move_rate) c = std::min(o.move_credit_cap, c + *o.move_rate);
        while (!o.move_rate || c >= 1) {
          // Hottest non-resident (ties: lower id) against coldest resident (ties: higher id).
          int64_t in = -1, out_e = -1;
          for (int64_t e = 0; e < E; ++e) {
            const auto i = static_cast<size_t>(l * E + e);
            if (!mask[i] && (in < 0 || score[i] > score[static_cast<size_t>(l * E + in)])) in = e;
            if (mask[i] && (out_e < 0 || score[i] <= score[static_cast<size_t>(l * E + out_e)])) out_e = e;
          }
          if (in < 0 || out_e < 0) break;
          const double hot = score[static_cast<size_t>(l * E + in)], cold = score[static_cast<size_t>(l * E + out_e)];
          if (!(hot > cold * (1 + o.margin)) || hot <= cold) break;
          if (o.policy == "cost-aware" &&
              !((hot - cold) / weight * saved_per_token_expert * o.horizon_steps > transfer_seconds))
            break;
          mask[static_cast<size_t>(l * E + in)] = 1;
          mask[static_cast<size_t>(l * E + out_e)] = 0;
          ++rec.moves;
          if (o.move_rate) c -= 1;
        }
      }
    }
    out.steps.push_back(rec);
  }
  out.final_mask = mask;
  return out;
}

StepRangeSummary summarize_steps(const DecodeReplay& r, int64_t first, int64_t last, int64_t num_layers) {
  const auto n = static_cast<int64_t>(r.steps.size());
  first = std::clamp<int64_t>(first, 0, n);
  last = std::clamp<int64_t>(last, first, n);
  StepRangeSummary s{first, last, 0, 0, 0, 0};
  double hits = 0;
  for (int64_t i = first; i < last; ++i) {
    const DecodeStep& st = r.steps[static_cast<size_t>(i)];
    hits += st.hits;
    s.routed += st.routed;
    s.moves += st.moves;
  }
  s.hit_rate = s.routed > 0 ? hits / s.routed : 0.0;
  if (last > first && num_layers > 0)
    s.moves_per_layer_per_8_steps =
        8.0 * static_cast<double>(s.moves) / (static_cast<double>(num_layers) * static_cast<double>(last - first));
  return s;
}

}  // namespace hymoe::placement
