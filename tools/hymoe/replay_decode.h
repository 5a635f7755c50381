// The decode-time policies of `hymoe replay` (static, score-cache, cost-aware): their flags and their report.
#pragma once

#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "hymoe/placement.h"
#include "placement_flags.h"

namespace hymoe::tool {

// The default policy and its tuned settings (docs/placement.md, "Decode-time placement").
struct DecodePolicyFlags {
  std::string policy = "score-cache";
  std::string start = "uniform";
  double prompt_weight = 0, decay = 0.9, margin = 0, move_rate = 0.125, credit_cap = 1;
  double pcie_gbps = 25, horizon_steps = 8;
};

void add_decode_policy_flags(CLI::App& cmd, DecodePolicyFlags& f);

// Replays `trace` under the policy and prints the report (text, or one JSON object).
int run_decode_policy(const placement::RoutingTrace& trace, const std::string& trace_path, const DecodePolicyFlags& f,
                      const PlacementFlags& pf, int64_t budget, bool json);

}  // namespace hymoe::tool
