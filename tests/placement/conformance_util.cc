#include "placement/conformance_util.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "test_util.h"

namespace hymoe::test {
namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in);
}

bool close(double got, double exp) { return std::abs(got - exp) <= 1e-6 * std::abs(exp) + 1e-12; }

}  // namespace

std::vector<std::string> placement_case_names() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(data_dir() + "/conformance/placement"))
    if (entry.is_directory()) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

PlacementCase load_placement_case(const std::string& name) {
  PlacementCase c;
  c.name = name;
  c.dir = data_dir() + "/conformance/placement/" + name;
  c.input = read_json(c.dir + "/input.json");
  c.expected = read_json(c.dir + "/expected.json");
  return c;
}

Tensor json_to_tensor(const nlohmann::json& value) {
  Shape shape;
  for (const nlohmann::json* v = &value; v->is_array(); v = &(*v)[0]) {
    shape.push_back(static_cast<int64_t>(v->size()));
    if (v->empty()) break;
  }
  std::vector<float> flat;
  std::function<void(const nlohmann::json&)> walk = [&](const nlohmann::json& v) {
    if (v.is_array())
      for (const auto& x : v) walk(x);
    else
      flat.push_back(v.get<float>());
  };
  walk(value);
  return Tensor(shape, flat);
}

placement::PlanOptions case_options(const nlohmann::json& input) {
  placement::PlanOptions o;
  o.min_experts_per_layer = input.at("min_experts_per_layer").get<int64_t>();
  if (!input.at("max_experts_per_layer").is_null()) o.max_experts_per_layer = input["max_experts_per_layer"].get<int64_t>();
  o.alpha = input.at("alpha").get<double>();
  if (input.contains("previous_scores")) o.previous_scores = json_to_tensor(input["previous_scores"]);
  return o;
}

::testing::AssertionResult matches_expected(const nlohmann::json& mask, const nlohmann::json& report,
                                            const nlohmann::json& expected) {
  const auto& exp_mask = expected.at("mask");
  if (expected.value("ties", false)) {
    // Any mask that takes every expert above the boundary score, none below, and the stated number at it.
    const auto& tb = expected.at("tie_boundary");
    const double boundary = tb.at("boundary_score").get<double>();
    const auto& scores = expected.at("scores");
    int64_t at_boundary = 0;
    for (size_t l = 0; l < scores.size(); ++l)
      for (size_t e = 0; e < scores[l].size(); ++e) {
        const double s = scores[l][e].get<double>();
        const int m = mask.at(l).at(e).get<int>();
        if (s > boundary && !m) return ::testing::AssertionFailure() << "expert (" << l << "," << e << ") above the tie boundary not selected";
        if (s < boundary && m) return ::testing::AssertionFailure() << "expert (" << l << "," << e << ") below the tie boundary selected";
        if (s == boundary) at_boundary += m;
      }
    if (at_boundary != tb.at("num_selected_at_boundary_score").get<int64_t>())
      return ::testing::AssertionFailure() << at_boundary << " selected at the tie boundary";
    nlohmann::json counts = nlohmann::json::array();
    for (const auto& row : mask) {
      int64_t n = 0;
      for (const auto& v : row) n += v.get<int64_t>();
      counts.push_back(n);
    }
    if (report.at("per_layer_counts") != counts)
      return ::testing::AssertionFailure() << "per_layer_counts " << report["per_layer_counts"].dump() << " do not match the mask";
  } else if (mask != exp_mask) {
    return ::testing::AssertionFailure() << "mask " << mask.dump() << " != expected " << exp_mask.dump();
  }
  // In a tie case the per-layer fields describe whichever tied mask was chosen: check them against the mask.
  static const std::set<std::string> per_layer = {"per_layer_counts", "layer_min", "layer_max", "layer_mean", "layer_std"};
  const bool ties = expected.value("ties", false);
  for (const auto& [key, exp] : expected.at("report").items()) {
    if (ties && per_layer.count(key)) continue;
    if (!report.contains(key)) return ::testing::AssertionFailure() << "report lacks " << key;
    const auto& got = report[key];
    const bool ok = exp.is_number_float() ? got.is_number() && close(got.get<double>(), exp.get<double>())
                    : exp.is_array() && !exp.empty() && exp[0].is_number_float()
                        ? false  // no float lists in the reference report
                        : got == exp;
    if (!ok) return ::testing::AssertionFailure() << "report." << key << ": got " << got.dump() << ", expected " << exp.dump();
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult carries_facts(const std::string& got, const std::string& expected) {
  // Facts: numbers, quoted names, shapes like (4,), and identifiers with an underscore (parameter names).
  static const std::regex fact(R"('[^']*'|\([0-9, ]*\)|[A-Za-z_]*_[A-Za-z_]+|-?[0-9]+(\.[0-9]+)?)");
  for (auto it = std::sregex_iterator(expected.begin(), expected.end(), fact); it != std::sregex_iterator(); ++it) {
    const std::string f = it->str();
    if (got.find(f) == std::string::npos)
      return ::testing::AssertionFailure() << "message \"" << got << "\" lacks \"" << f << "\" of \"" << expected << "\"";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace hymoe::test
