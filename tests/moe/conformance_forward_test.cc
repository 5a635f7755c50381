// Every shared PyTorch reference case through the library and through `hymoe forward`: y, losses, counts,
// routing and router state must match within the conformance README's tolerances.
#include <gtest/gtest.h>

#include <filesystem>

#include "moe/conformance.h"
#include "test_util.h"

namespace hymoe::test {
namespace {

class ForwardConformance : public ::testing::TestWithParam<std::string> {};

void expect_forward_outputs_match(const SafetensorsFile& exp, const std::function<Tensor(const std::string&)>& got,
                                  bool sigmoid) {
  EXPECT_TRUE(matches_reference(got("y"), exp.read_f32("y"))) << "y";
  EXPECT_TRUE(matches_reference(got("aux_loss"), exp.read_f32("aux_loss"))) << "aux_loss";
  EXPECT_TRUE(matches_reference(got("z_loss"), exp.read_f32("z_loss"))) << "z_loss";
  EXPECT_TRUE(all_close(got("expert_counts"), exp.read_f32("expert_counts"), 0, 0)) << "expert_counts";
  EXPECT_TRUE(all_close(got("route.indices"), exp.read_f32("route.indices"), 0, 0)) << "route.indices";
  EXPECT_TRUE(matches_reference(got("route.router_weights"), exp.read_f32("route.router_weights"))) << "route.router_weights";
  EXPECT_TRUE(matches_reference(got("route.weights"), exp.read_f32("route.weights"))) << "route.weights";
  if (sigmoid) {
    EXPECT_TRUE(matches_state(got("state.router.expert_bias"), exp.read_f32("state.router.expert_bias"))) << "bias";
    EXPECT_TRUE(matches_state(got("state.router.expert_ema"), exp.read_f32("state.router.expert_ema"))) << "ema";
  }
}

TEST_P(ForwardConformance, Library) {
  const MoeCase c = load_moe_case(GetParam());
  MoELayer layer(c.config);
  layer.load(SafetensorsFile::open(c.dir + "/weights.safetensors"));
  const Tensor x = SafetensorsFile::open(c.dir + "/input.safetensors").read_f32("x");
  const Tensor y = layer.forward(x, c.train ? Mode::kTrain : Mode::kEval, c.step, c.max_steps);
  const Routing& r = layer.last_routing();
  const int64_t T = r.num_tokens, K = r.top_k;
  std::map<std::string, Tensor> got{
      {"y", y},
      {"aux_loss", Tensor::scalar(layer.aux_loss())},
      {"z_loss", Tensor::scalar(layer.z_loss())},
      {"expert_counts", layer.expert_counts()},
      {"route.indices", Tensor(Shape{T, K}, std::vector<float>(r.indices.begin(), r.indices.end()))},
      {"route.router_weights", Tensor(Shape{T, K}, r.router_weights)},
      {"route.weights", Tensor(Shape{T, K}, r.weights)}};
  for (auto& [name, t] : layer.router().named_tensors()) got["state.router." + name] = *t;
  const SafetensorsFile exp = SafetensorsFile::open(c.dir + "/expected.safetensors");
  expect_forward_outputs_match(exp, [&](const std::string& n) { return got.at(n); },
                               c.config.router_type == "sigmoid_topk");
}

TEST_P(ForwardConformance, Command) {
  const MoeCase c = load_moe_case(GetParam());
  const TempDir tmp("fwd");
  const std::string out = tmp.path("out.safetensors");
  std::string log;
  const int rc = run_command(tool_path() + " forward --config " + c.dir + "/config.json --weights " + c.dir +
                                 "/weights.safetensors --input " + c.dir + "/input.safetensors --output " + out,
                             &log);
  ASSERT_EQ(rc, 0) << log;
  const SafetensorsFile got = SafetensorsFile::open(out);
  const SafetensorsFile exp = SafetensorsFile::open(c.dir + "/expected.safetensors");
  expect_forward_outputs_match(exp, [&](const std::string& n) { return got.read_f32(n); },
                               c.config.router_type == "sigmoid_topk");
}

INSTANTIATE_TEST_SUITE_P(Cases, ForwardConformance, ::testing::ValuesIn(moe_case_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace hymoe::test
