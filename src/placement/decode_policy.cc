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

OnlineDecodePolicy::OnlineDecodePolicy(int64_t num_layers, int64_t num_experts, const DecodePolicyOptions& options,
                                       std::vector<uint8_t> start_mask, const std::vector<double>& prompt,
                                       double prompt_tokens)
    : L_(num_layers), E_(num_experts), o_(options), mask_(std::move(start_mask)),
      score_(static_cast<size_t>(num_layers * num_experts), 0.0), credit_(static_cast<size_t>(num_layers), 0.0) {
  check_options(o_);
  if (static_cast<int64_t>(mask_.size()) != L_ * E_)
    fail("decode policy: the start mask has ", mask_.size(), " entries for ", L_, " layers x ", E_, " experts");
  if (!prompt.empty()) {
    if (prompt.size() != score_.size())
      fail("decode policy: the prompt counts have ", prompt.size(), " entries for ", L_, " layers x ", E_, " experts");
    // Scores in routed token-experts: the decayed sum of the steps seen, and `weight` the decayed number of steps,
    // so score / weight is an expert's expected token-experts per step (what the cost model charges).
    for (size_t i = 0; i < score_.size(); ++i) score_[i] = o_.prompt_weight * prompt[i] / prompt_tokens;
  }
}

int64_t OnlineDecodePolicy::step(const std::vector<double>& counts, bool move) {
  if (counts.size() != score_.size())
    fail("decode policy: a step's counts have ", counts.size(), " entries for ", L_, " layers x ", E_, " experts");
  for (double& v : score_) v *= o_.decay;
  weight_ = weight_ * o_.decay + 1;
  // One routed pair at a time, as a replay counts them: adding n at once would round differently from n additions
  // of 1 to a decayed (fractional) score, and the swap decisions compare scores exactly.
  for (size_t i = 0; i < score_.size(); ++i) {
    if (!(counts[i] >= 0) || counts[i] > 1e9)
      fail("decode policy: a step's count ", counts[i], " at layer ", static_cast<int64_t>(i) / E_, ", expert ",
           static_cast<int64_t>(i) % E_, " must be in [0, 1e9]");
    double n = counts[i];
    for (; n >= 1; n -= 1) score_[i] += 1;
    if (n > 0) score_[i] += n;
  }
  if (!move || o_.policy == "static") return 0;
  const double transfer_seconds = static_cast<double>(o_.expert_bytes) / (o_.pcie_gbps * 1e9);
  const double saved_per_token_expert = o_.cost.cpu_seconds_per_token_expert - o_.cost.gpu_seconds_per_token_expert;
  int64_t moves = 0;
  for (int64_t l = 0; l < L_; ++l) {
    double& c = credit_[static_cast<size_t>(l)];
    if (o_.move_rate) c = std::min(o_.move_credit_cap, c + *o_.move_rate);
    while (!o_.move_rate || c >= 1) {
      // Hottest non-resident (ties: lower id) against coldest resident (ties: higher id).
      int64_t in = -1, out_e = -1;
      for (int64_t e = 0; e < E_; ++e) {
        const auto i = static_cast<size_t>(l * E_ + e);
        if (!mask_[i] && (in < 0 || score_[i] > score_[static_cast<size_t>(l * E_ + in)])) in = e;
        if (mask_[i] && (out_e < 0 || score_[i] <= score_[static_cast<size_t>(l * E_ + out_e)])) out_e = e;
      }
      if (in < 0 || out_e < 0) break;
      const double hot = score_[static_cast<size_t>(l * E_ + in)], cold = score_[static_cast<size_t>(l * E_ + out_e)];
      if (!(hot > cold * (1 + o_.margin)) || hot <= cold) break;
      if (o_.policy == "cost-aware" &&
          !((hot - cold) / weight_ * saved_per_token_expert * o_.horizon_steps > transfer_seconds))
        break;
      mask_[static_cast<size_t>(l * E_ + in)] = 1;
      mask_[static_cast<size_t>(l * E_ + out_e)] = 0;
      ++moves;
      if (o_.move_rate) c -= 1;
    }
  }
  return moves;
}

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
  const double prompt_tokens = static_cast<double>(std::max<int64_t>(1, steps[0].second - steps[0].first));
  OnlineDecodePolicy policy(L, E, o, out.start_mask, prompt.counts, prompt_tokens);
  std::vector<double> counts(static_cast<size_t>(L * E));

  for (size_t s = 0; s < steps.size(); ++s) {
    DecodeStep rec;
    rec.step = trace.steps.empty() ? -1 : trace.steps[static_cast<size_t>(steps[s].first)];
    rec.first_token = steps[s].first;
    rec.tokens = steps[s].second - steps[s].first;
    const std::vector<uint8_t>& mask = policy.mask();
    std::fill(counts.begin(), counts.end(), 0.0);
    for (int64_t t = steps[s].first; t < steps[s].second; ++t)
      for (int64_t l = 0; l < L; ++l)
        for (int64_t k = 0; k < trace.top_k; ++k) {
          const int32_t e = trace.expert(t, l, k);
          if (e < 0 || e >= E) continue;
          const auto i = static_cast<size_t>(l * E + e);
          rec.routed += 1;
          rec.hits += mask[i];
          counts[i] += 1;
        }
    // The prompt is learned from through the prior and the start plan, not as a decode step; the last step's
    // moves would serve no later step.
    if (s > 0) rec.moves = policy.step(counts, s + 1 != steps.size());
    out.steps.push_back(rec);
  }
  out.final_mask = policy.mask();
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
