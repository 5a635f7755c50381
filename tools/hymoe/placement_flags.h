// Flags shared by `hymoe plan` and `hymoe replay`: the GPU budget (three spellings, one allowed), the planner's
// options and the cost model, registered once so both commands spell and check them the same way.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "hymoe/placement.h"

namespace hymoe::tool {

struct PlacementFlags {
  std::optional<int64_t> num_gpu_experts, per_layer;
  std::optional<double> ratio;
  std::string strategy = "frequency";
  double alpha = 0.8;
  std::optional<int64_t> min_per_layer, max_per_layer;
  int64_t seed = 42;  // signed so that a negative value is refused, not wrapped
  // Text, parsed by expert_bytes(): CLI11 would turn a number past int64 into INT64_MAX without a word (strtoll
  // saturates) and read "0x10" as hex.
  std::optional<std::string> expert_bytes_text;
  double cpu_us = 200, gpu_us = 10, cpu_overhead_us = 30, gpu_overhead_us = 10, routed_per_step = 8;

  // The budget as given; an error when none or several spellings were used.
  placement::BudgetSpec budget() const;
  // The planner's options, every flag checked here (named in the message) before anything is read or printed.
  placement::PlanOptions plan_options() const;
  // --expert-bytes as a decimal integer in [0, 2^64-1], or an error naming the flag and the text.
  std::optional<uint64_t> expert_bytes() const;
};

void add_budget_flags(CLI::App& cmd, PlacementFlags& f);
void add_planner_flags(CLI::App& cmd, PlacementFlags& f);
void add_cost_flags(CLI::App& cmd, PlacementFlags& f);

// "12.3%" with one decimal.
std::string percent(double share);

}  // namespace hymoe::tool
