#include <gtest/gtest.h>

#include "moe/conformance.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_util.h"

namespace hymoe::test {

std::vector<std::string> moe_case_names() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(data_dir() + "/conformance/moe"))
    if (entry.is_directory()) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

MoeCase load_moe_case(const std::string& name) {
  MoeCase c;
  c.name = name;
  c.dir = data_dir() + "/conformance/moe/" + name;
  std::ifstream in(c.dir + "/config.json");
  std::stringstream ss;
  ss << in.rdbuf();
  static constexpr std::string_view kExtra[] = {"train", "step", "max_steps"};
  c.config = parse_moe_config(ss.str(), c.dir + "/config.json", kExtra);
  const auto j = nlohmann::json::parse(ss.str());
  c.train = j.value("train", false);
  c.step = j.value("step", 0);
  c.max_steps = j.value("max_steps", 1);
  return c;
}

::testing::AssertionResult matches_reference(const Tensor& got, const Tensor& exp) {
  double max_abs = 0.0;
  for (float v : exp.values()) max_abs = std::max(max_abs, static_cast<double>(std::abs(v)));
  return all_close(got, exp, 1e-4, 2e-5 * std::max(1.0, max_abs));
}

::testing::AssertionResult matches_state(const Tensor& got, const Tensor& exp) { return all_close(got, exp, 1e-6, 1e-9); }

}  // namespace hymoe::test
