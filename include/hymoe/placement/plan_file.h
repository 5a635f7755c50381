// PLAN.json: what `hymoe plan` writes and `hymoe plan --plan` / `hymoe replay` read back.
//   {"format": "hymoe.placement.v1", "mask": [[0|1, ...] x L], "report": {the reference's fields..., hymoe's}}
// The report's fields keep the reference's names (kt-kernel `plan_gpu_expert_placement`), so tools written for
// its report read ours.
#pragma once

#include <cstdint>
#include <string>

#include "hymoe/placement/planner.h"

namespace hymoe::placement {

// The report as a JSON object (text), fields in the reference's order, then hymoe's.
std::string report_to_json(const PlacementReport& report);
// The whole plan file (text, pretty-printed).
std::string plan_to_json(const Placement& plan);

// Reads a plan file's mask (validated: rectangular 0/1 lists). `label` names the source in errors.
struct PlanMask {
  int64_t num_layers = 0, num_experts = 0;
  std::vector<uint8_t> mask;
};
PlanMask parse_plan_json(const std::string& text, const std::string& label);
// A plan of the largest table the statistics readers accept (kMaxStatsCells entries, "0, " each) is about 48 MiB.
inline constexpr uint64_t kMaxPlanFileBytes = uint64_t{64} << 20;
PlanMask read_plan_file(const std::string& path);

}  // namespace hymoe::placement
