// PLAN.json writing and reading. nlohmann_json stays private to the library.
#include "hymoe/file_io.h"
#include "hymoe/placement/plan_file.h"
#include "hymoe/placement/stats.h"

#include <nlohmann/json.hpp>

#include "hymoe/error.h"
#include "io/json_io.h"
#include "placement/text_util.h"

namespace hymoe::placement {
namespace {

nlohmann::ordered_json report_json(const PlacementReport& r) {
  nlohmann::ordered_json j;
  j["strategy"] = r.strategy;
  j["num_layers"] = r.num_layers;
  j["num_experts_per_layer"] = r.num_experts_per_layer;
  j["requested_num_gpu_experts"] = r.requested_num_gpu_experts;
  j["actual_num_gpu_experts"] = r.actual_num_gpu_experts;
  j["expected_hit_rate"] = r.expected_hit_rate;
  j["selected_score"] = r.selected_score;
  j["total_score"] = r.total_score;
  j["per_layer_counts"] = r.per_layer_counts;
  j["layer_min"] = r.layer_min;
  j["layer_max"] = r.layer_max;
  j["layer_mean"] = r.layer_mean;
  j["layer_std"] = r.layer_std;
  j["min_experts_per_layer"] = r.min_experts_per_layer;
  j["max_experts_per_layer"] = r.max_experts_per_layer ? nlohmann::ordered_json(*r.max_experts_per_layer) : nullptr;
  j["alpha"] = r.alpha;
  j["previous_scores_provided"] = r.previous_scores_provided;
  if (r.gpu_bytes) j["gpu_bytes"] = *r.gpu_bytes;
  j["predicted_step_seconds"] = r.predicted_step_seconds;
  j["predicted_all_cpu_seconds"] = r.predicted_all_cpu_seconds;
  if (!r.dense_layers.empty()) j["dense_layers"] = r.dense_layers;
  return j;
}

}  // namespace

std::string report_to_json(const PlacementReport& report) { return report_json(report).dump(); }

std::string plan_to_json(const Placement& plan) {
  // One line per layer for the mask, so a person can read the file.
  std::string out = "{\n  \"format\": \"hymoe.placement.v1\",\n  \"mask\": [\n";
  for (int64_t l = 0; l < plan.num_layers; ++l) {
    out += "    [";
    for (int64_t e = 0; e < plan.num_experts; ++e) out += (e ? ", " : "") + std::to_string(plan.on_gpu(l, e) ? 1 : 0);
    out += l + 1 < plan.num_layers ? "],\n" : "]\n";
  }
  out += "  ],\n  \"report\": " + report_json(plan.report).dump() + "\n}\n";
  return out;
}

PlanMask parse_plan_json(const std::string& text, const std::string& label) {
  const nlohmann::json j = parse_json(text, label);
  if (!j.is_object() || !j.contains("mask")) fail(label, ": a plan file must be an object with a \"mask\" field");
  const auto& rows = j["mask"];
  if (!rows.is_array() || rows.empty() || !rows[0].is_array() || rows[0].empty())
    fail(label, ": \"mask\" must be a non-empty list of non-empty lists of 0/1");
  PlanMask m;
  m.num_layers = static_cast<int64_t>(rows.size());
  m.num_experts = static_cast<int64_t>(rows[0].size());
  if (m.num_layers > kMaxStatsLayers || m.num_experts > kMaxStatsExperts)
    fail(label, ": \"mask\" has ", m.num_layers, " rows of ", m.num_experts, " entries; at most ", kMaxStatsLayers,
         " rows of ", kMaxStatsExperts, " entries are allowed");
  for (size_t l = 0; l < rows.size(); ++l) {
    if (!rows[l].is_array() || static_cast<int64_t>(rows[l].size()) != m.num_experts)
      fail(label, ": mask row ", l, " must be a list of ", m.num_experts, " entries (the length of row 0)");
    for (size_t e = 0; e < rows[l].size(); ++e) {
      const auto& v = rows[l][e];
      if (!(v.is_number_integer() || v.is_boolean()) || (v.is_number_integer() && v.get<int64_t>() != 0 &&
                                                          v.get<int64_t>() != 1))
        fail(label, ": mask[", l, "][", e, "] must be 0 or 1, got ", describe_json(v));
      m.mask.push_back(v.is_boolean() ? (v.get<bool>() ? 1 : 0) : static_cast<uint8_t>(v.get<int64_t>()));
    }
  }
  return m;
}

PlanMask read_plan_file(const std::string& path) {
  return parse_plan_json(read_text_file(path, kMaxPlanFileBytes), path);
}

}  // namespace hymoe::placement
