// Every case of shared/conformance/placement (copied to tests/data) through the library: masks, report fields
// and error messages as kt-kernel's plan_gpu_expert_placement produced them; legacy masks as
// generate_gpu_experts_masks did.
#include <nlohmann/json.hpp>

#include "hymoe/error.h"
#include "hymoe/placement.h"
#include "placement/conformance_util.h"
#include "test_util.h"

namespace hymoe::test {
namespace {

using placement::plan_gpu_expert_placement;

nlohmann::json mask_json(const std::vector<uint8_t>& mask, int64_t layers, int64_t experts) {
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t l = 0; l < layers; ++l) {
    nlohmann::json row = nlohmann::json::array();
    for (int64_t e = 0; e < experts; ++e) row.push_back(static_cast<int>(mask[static_cast<size_t>(l * experts + e)]));
    rows.push_back(row);
  }
  return rows;
}

// The reference knows two strategies; hymoe adds four. A reference error for a name hymoe implements is checked
// with a name neither knows, and the name must be among hymoe's.
std::string error_strategy(const std::string& strategy) {
  const auto& names = placement::strategy_names();
  return std::find(names.begin(), names.end(), strategy) != names.end() ? "no_such_strategy" : strategy;
}

class PlacementConformance : public ::testing::TestWithParam<std::string> {};

TEST_P(PlacementConformance, Library) {
  const PlacementCase c = load_placement_case(GetParam());
  const Tensor freq = json_to_tensor(c.input.at("activation_freq"));
  const int64_t budget = c.input.at("num_gpu_experts").get<int64_t>();
  std::string strategy = c.input.at("strategy").get<std::string>();
  const placement::PlanOptions options = case_options(c.input);
  if (c.expected.contains("error")) {
    std::string expected = c.expected["error"]["message"].get<std::string>();
    const bool unknown_strategy_case = expected.starts_with("Unknown expert placement strategy");
    const std::string used = unknown_strategy_case ? error_strategy(strategy) : strategy;
    if (used != strategy) {
      const auto pos = expected.find("'" + strategy + "'");
      ASSERT_NE(pos, std::string::npos);
      expected = expected.substr(0, pos) + "'" + used + "'. Supported strategies: ['frequency', 'score_aware_layer_balanced'";
    }
    try {
      plan_gpu_expert_placement(freq, budget, used, options);
      FAIL() << "expected an error: " << expected;
    } catch (const Error& e) {
      EXPECT_TRUE(carries_facts(e.what(), expected));
    }
    return;
  }
  const placement::Placement p = plan_gpu_expert_placement(freq, budget, strategy, options);
  const nlohmann::json report = nlohmann::json::parse(placement::report_to_json(p.report));
  EXPECT_TRUE(matches_expected(mask_json(p.mask, p.num_layers, p.num_experts), report, c.expected));
  // The ranked scores are the reference's float32 EMA, bit for bit.
  EXPECT_TRUE(all_close(p.scores, json_to_tensor(c.expected.at("scores")), 0, 0));
  if (c.expected.contains("legacy_mask")) {
    nlohmann::json legacy = c.expected;
    legacy["mask"] = c.expected["legacy_mask"];
    legacy["ties"] = c.expected.value("legacy_ties", false);
    const auto mask = placement::generate_gpu_experts_masks(freq, budget);
    EXPECT_TRUE(matches_expected(mask_json(mask, p.num_layers, p.num_experts), report, legacy));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, PlacementConformance, ::testing::ValuesIn(placement_case_names()),
                         [](const auto& info) { return info.param; });

TEST(PlacementConformanceSet, CoversBothReferenceStrategiesAndErrors) {
  int errors = 0, freq = 0, balanced = 0;
  for (const auto& name : placement_case_names()) {
    const PlacementCase c = load_placement_case(name);
    if (c.expected.contains("error")) ++errors;
    else if (c.input["strategy"] == "frequency") ++freq;
    else ++balanced;
  }
  EXPECT_GE(errors, 4);
  EXPECT_GE(freq, 5);
  EXPECT_GE(balanced, 5);
}

}  // namespace
}  // namespace hymoe::test
