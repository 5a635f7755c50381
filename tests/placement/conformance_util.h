// Shared by the placement conformance tests (library and command line): loading a case and checking a plan
// against the reference's expected.json.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hymoe/placement/planner.h"
#include "hymoe/tensor.h"

namespace hymoe::test {

struct PlacementCase {
  std::string name, dir;
  nlohmann::json input, expected;
};

std::vector<std::string> placement_case_names();
PlacementCase load_placement_case(const std::string& name);
// A JSON nested list (any depth) as a float32 tensor with the list's shape.
Tensor json_to_tensor(const nlohmann::json& value);
placement::PlanOptions case_options(const nlohmann::json& input);

// Compares a mask (as 0/1 rows) and a report (as JSON, the same field names) with expected.json: masks equal
// (or, for `ties` cases, any mask the tie boundary allows), integers and strings equal, floats within 1e-6
// relative.
::testing::AssertionResult matches_expected(const nlohmann::json& mask, const nlohmann::json& report,
                                            const nlohmann::json& expected);

// The facts of an expected error: every number and quoted name in the reference's message. hymoe's message must
// carry them all.
::testing::AssertionResult carries_facts(const std::string& got, const std::string& expected);

}  // namespace hymoe::test
