// `hymoe replay --policy static|score-cache|cost-aware`: the decode-time placement policies replayed step by step,
// reported on the prompt, the decode steps, and the two halves of the decode steps (the tuning split).
#include "replay_decode.h"

#include <fmt/format.h>

#include "hymoe/error.h"
#include "placement_flags.h"

namespace hymoe::tool {

using namespace hymoe::placement;

void add_decode_policy_flags(CLI::App& cmd, DecodePolicyFlags& f) {
  cmd.add_option("--start", f.start, "decode policies: start placement, uniform (no knowledge) or prompt")
      ->check(CLI::IsMember({"uniform", "prompt"}))
      ->capture_default_str();
  cmd.add_option("--prompt-weight", f.prompt_weight,
                 "decode policies: prior from the prompt's per-token counts, in decode tokens' worth")
      ->capture_default_str();
  cmd.add_option("--decay", f.decay, "decode policies: scores are multiplied by this every step, in (0, 1]")
      ->capture_default_str();
  cmd.add_option("--margin", f.margin, "decode policies: admit an expert only when (1+margin) times hotter")
      ->capture_default_str();
  cmd.add_option("--move-rate", f.move_rate,
                 "decode policies: move credit per layer per step (0.125 = 1 move per layer per 8 steps; "
                 "negative: no limit)")
      ->capture_default_str();
  cmd.add_option("--move-credit-cap", f.credit_cap, "decode policies: move credit a layer can save up (>= 1)")
      ->capture_default_str();
  cmd.add_option("--pcie-gbps", f.pcie_gbps, "cost-aware: host-to-GPU bandwidth, GB/s")->capture_default_str();
  cmd.add_option("--horizon-steps", f.horizon_steps, "cost-aware: a move must pay for itself within this many steps")
      ->capture_default_str();
}

namespace {

nlohmann::json part_json(const std::string& name, const StepRangeSummary& s, const DecodeReplay& r) {
  int64_t tokens = 0;
  for (int64_t i = s.first_step; i < s.last_step; ++i) tokens += r.steps[static_cast<size_t>(i)].tokens;
  return {{"part", name},
          {"first_step_index", s.first_step},
          {"steps", s.last_step - s.first_step},
          {"tokens", tokens},
          {"routed", s.routed},
          {"hit_rate", s.hit_rate},
          {"moves", s.moves},
          {"moves_per_layer_per_8_steps", s.moves_per_layer_per_8_steps}};
}

}  // namespace

int run_decode_policy(const RoutingTrace& trace, const std::string& trace_path, const DecodePolicyFlags& f,
                      const PlacementFlags& pf, int64_t budget, bool json) {
  DecodePolicyOptions o;
  o.policy = f.policy;
  o.budget = budget;
  o.start = f.start;
  o.prompt_weight = f.prompt_weight;
  o.decay = f.decay;
  o.margin = f.margin;
  if (f.move_rate >= 0) o.move_rate = f.move_rate;
  else o.move_rate.reset();
  o.move_credit_cap = f.credit_cap;
  const std::optional<uint64_t> expert_bytes = pf.expert_bytes();
  o.expert_bytes = expert_bytes.value_or(0);
  o.pcie_gbps = f.pcie_gbps;
  o.horizon_steps = f.horizon_steps;
  o.cost = pf.plan_options().cost;
  const DecodeReplay r = replay_decode(trace, o);

  const auto n = static_cast<int64_t>(r.steps.size()), L = trace.num_layers;
  const int64_t mid = 1 + (n - 1) / 2;  // decode steps 1..mid-1 are the first half (the tuning half)
  const std::vector<std::pair<std::string, StepRangeSummary>> parts = {
      {"prompt", summarize_steps(r, 0, 1, L)},
      {"decode", summarize_steps(r, 1, n, L)},
      {"decode, 1st half", summarize_steps(r, 1, mid, L)},
      {"decode, 2nd half", summarize_steps(r, mid, n, L)}};
  // References: the frequency plan of the prompt held all along, and the best static plan in hindsight.
  const int64_t decode_begin = r.steps.size() > 1 ? r.steps[1].first_token : trace.num_tokens;
  const CountTable prompt = trace.counts(0, decode_begin), decode = trace.counts(decode_begin, trace.num_tokens);
  const double from_prompt = evaluate_mask(plan_gpu_expert_placement(prompt.to_scores(), budget, "frequency").mask,
                                           decode).hit_rate;
  const double oracle = evaluate_mask(plan_gpu_expert_placement(decode.to_scores(), budget, "frequency").mask,
                                      decode).hit_rate;
  int64_t total_moves = 0;
  for (const auto& s : r.steps) total_moves += s.moves;
  // Checked before anything is printed: a product past 2^64-1 is an error, never a wrapped number.
  std::optional<uint64_t> bytes_moved;
  if (expert_bytes) {
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(*expert_bytes, static_cast<uint64_t>(total_moves), &bytes))
      fail("--expert-bytes ", *expert_bytes, " times ", total_moves, " expert moves exceeds 2^64-1 bytes");
    bytes_moved = bytes;
  }

  if (json) {
    nlohmann::json j = {{"command", "replay"},
                        {"trace", trace_path},
                        {"tokens", trace.num_tokens},
                        {"layers", L},
                        {"layer_ids", trace.layer_ids},
                        {"experts", trace.num_experts},
                        {"top_k", trace.top_k},
                        {"policy", o.policy},
                        {"budget", budget},
                        {"start", o.start},
                        {"prompt_weight", o.prompt_weight},
                        {"decay", o.decay},
                        {"margin", o.margin},
                        {"move_rate", o.move_rate ? nlohmann::json(*o.move_rate) : nlohmann::json(nullptr)},
                        {"move_credit_cap", o.move_credit_cap},
                        {"steps", n},
                        {"moves", total_moves},
                        {"static_prompt_plan_hit_rate_on_decode", from_prompt},
                        {"oracle_hit_rate_on_decode", oracle},
                        {"parts", nlohmann::json::array()}};
    if (o.policy == "cost-aware")
      j["cost_aware"] = {{"expert_bytes", o.expert_bytes}, {"pcie_gbps", o.pcie_gbps}, {"horizon_steps", o.horizon_steps}};
    if (bytes_moved) j["bytes_moved"] = *bytes_moved;
    for (const auto& [name, s] : parts) j["parts"].push_back(part_json(name, s, r));
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("{}: {} tokens in {} steps, {} layers (model layers {}), {} experts, top-{}\n", trace_path,
             trace.num_tokens, n, L, fmt::join(trace.layer_ids, " "), trace.num_experts, trace.top_k);
  fmt::print("decode policy {} ({} GPU experts, start {}, prompt weight {}, decay {}, margin {}, move rate {}, "
             "credit cap {}",
             o.policy, budget, o.start, o.prompt_weight, o.decay, o.margin,
             o.move_rate ? fmt::format("{}/layer/step", *o.move_rate) : std::string("unlimited"), o.move_credit_cap);
  if (o.policy == "cost-aware")
    fmt::print(", {} bytes per expert over {} GB/s, horizon {} steps", o.expert_bytes, o.pcie_gbps, o.horizon_steps);
  fmt::print("):\n  step 0 is the prompt; moves are made between steps and charged to the step before them\n");
  fmt::print("  {:<18} {:>6} {:>7} {:>9} {:>6} {:>22}\n", "part", "steps", "tokens", "hit rate", "moves",
             "moves/layer/8 steps");
  for (const auto& [name, s] : parts) {
    int64_t tokens = 0;
    for (int64_t i = s.first_step; i < s.last_step; ++i) tokens += r.steps[static_cast<size_t>(i)].tokens;
    fmt::print("  {:<18} {:>6} {:>7} {:>9} {:>6} {:>22.3f}\n", name, s.last_step - s.first_step, tokens,
               percent(s.hit_rate), s.moves, s.moves_per_layer_per_8_steps);
  }
  fmt::print("  on the decode steps: static frequency plan from the prompt {}; best static plan in hindsight "
             "(oracle) {}\n",
             percent(from_prompt), percent(oracle));
  if (bytes_moved) fmt::print("  bytes moved: {}\n", *bytes_moved);
  return 0;
}

}  // namespace hymoe::tool
