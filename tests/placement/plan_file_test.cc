// PLAN.json reading: the mask's shape and values are checked, and the JSON helper's limits (nesting, duplicate keys,
// bounded excerpts) hold for plan files as for every other JSON input.
#include "hymoe/placement/plan_file.h"

#include <gtest/gtest.h>

#include <string>

#include "hymoe/error.h"
#include "hymoe/placement/stats.h"
#include "test_util.h"

namespace hymoe::placement {
namespace {

std::string plan_error(const std::string& text) {
  return test::error_of([&] { parse_plan_json(text, "PLAN.json"); });
}

TEST(PlanFile, ReadsAMask) {
  const PlanMask m = parse_plan_json(R"({"format": "hymoe.placement.v1", "mask": [[1, 0, 0], [0, 1, true]]})", "p");
  EXPECT_EQ(m.num_layers, 2);
  EXPECT_EQ(m.num_experts, 3);
  EXPECT_EQ(m.mask, (std::vector<uint8_t>{1, 0, 0, 0, 1, 1}));
}

TEST(PlanFile, RefusesDeepNestingDuplicateKeysAndDescribesBadValues) {
  const std::string deep = plan_error(R"({"mask": [)" + std::string(100000, '[') + std::string(100000, ']') + "]}");
  EXPECT_NE(deep.find("PLAN.json: JSON nested deeper than 64"), std::string::npos) << deep.substr(0, 200);
  EXPECT_NE(plan_error(R"({"mask": [[1]], "mask": [[0]]})").find("PLAN.json: duplicate key 'mask'"), std::string::npos);
  // A value within the depth limit is described, not printed.
  const std::string value = plan_error(R"({"mask": [[1, [[[[0]]]]]]})");
  EXPECT_NE(value.find("PLAN.json: mask[0][1] must be 0 or 1, got an array of 1 entries"), std::string::npos) << value;
  const std::string text = plan_error(R"({"mask": [[")" + std::string(10000, 'z') + R"("]]})");
  EXPECT_NE(text.find("got 'zzz"), std::string::npos) << text.substr(0, 200);
  EXPECT_LT(text.size(), 300u);
}

TEST(PlanFile, RefusesAMaskWiderThanTheStatisticsLimits) {
  std::string row = "[0";
  for (int64_t e = 1; e <= kMaxStatsExperts; ++e) row += ",0";
  const std::string e = plan_error(R"({"mask": [)" + row + "]]}");
  EXPECT_NE(e.find("PLAN.json: \"mask\" has 1 rows of 65537 entries"), std::string::npos) << e;
}

}  // namespace
}  // namespace hymoe::placement
