// Every shared PyTorch reference case through the library and through `hymoe forward`: y, losses, counts,
// routing and router state must match within the conformance README's tolerances.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <span>

#include "hymoe/file_io.h"

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

// KempnerForge's SigmoidTopKRouter.set_step keeps max(max_steps, 1), so max_steps 0 is a run of one step: progress
// step / 1, rate 0.001 * min(1, 10 * progress) under linear_warmup (0 at step 0, the full 0.001 from step 1). The
// expected router state is that formula applied to the case's counts: the EMA moves by 0.01 toward the
// utilization, then the bias by the rate times (1/E - EMA).
struct ScheduledState {
  Tensor bias, ema;
};

ScheduledState kempnerforge_state(const SafetensorsFile& before, const Tensor& counts, int64_t tokens, int64_t top_k,
                                  int64_t step, int64_t max_steps) {
  const Tensor bias0 = before.read_f32("router.expert_bias"), ema0 = before.read_f32("router.expert_ema");
  const int64_t E = bias0.numel();
  const double progress = static_cast<double>(step) / static_cast<double>(std::max<int64_t>(max_steps, 1));
  const double rate = 0.001 * std::min(1.0, progress * 10.0);
  ScheduledState s{Tensor(Shape{E}), Tensor(Shape{E})};
  for (int64_t e = 0; e < E; ++e) {
    const double util = counts[e] / (static_cast<double>(tokens * top_k) + 1e-8);
    const double ema = ema0[e] + (1.0 - 0.99) * (util - ema0[e]);
    s.ema[e] = static_cast<float>(ema);
    s.bias[e] = static_cast<float>(bias0[e] + rate * (1.0 / static_cast<double>(E) - ema));
  }
  return s;
}

TEST(BiasScheduleConformance, MaxStepsZeroIsOneStepAsInKempnerForge) {
  const MoeCase c = load_moe_case("sigmoid_warmup_early");
  ASSERT_EQ(c.config.bias_schedule, "linear_warmup");
  const SafetensorsFile weights = SafetensorsFile::open(c.dir + "/weights.safetensors");
  const Tensor x = SafetensorsFile::open(c.dir + "/input.safetensors").read_f32("x");
  const SafetensorsFile exp = SafetensorsFile::open(c.dir + "/expected.safetensors");
  const int64_t T = x.dim(0) * x.dim(1), K = c.config.top_k;
  const TempDir tmp("max_steps_zero");
  for (const int64_t step : {int64_t{0}, int64_t{5}}) {
    SCOPED_TRACE("step " + std::to_string(step));
    MoELayer layer(c.config);
    layer.load(weights);
    const Tensor y = layer.forward(x, Mode::kTrain, step, 0);
    // The schedule moves only the state after selection: y and the counts are the case's.
    EXPECT_TRUE(matches_reference(y, exp.read_f32("y")));
    EXPECT_TRUE(all_close(layer.expert_counts(), exp.read_f32("expert_counts"), 0, 0));
    const ScheduledState want = kempnerforge_state(weights, layer.expert_counts(), T, K, step, 0);
    std::map<std::string, Tensor> got;
    for (auto& [name, t] : layer.router().named_tensors()) got[name] = *t;
    EXPECT_TRUE(matches_state(got.at("expert_bias"), want.bias)) << "bias";
    EXPECT_TRUE(matches_state(got.at("expert_ema"), want.ema)) << "ema";
    if (step == 0) EXPECT_TRUE(all_close(got.at("expert_bias"), weights.read_f32("router.expert_bias"), 0, 0));

    // The same through the command: max_steps 0 in the config file, and --max-steps 0 on the command line.
    std::string config = read_text_file(c.dir + "/config.json");
    const size_t at = config.find("\"max_steps\": 1000");
    ASSERT_NE(at, std::string::npos) << config;
    config.replace(at, std::string("\"max_steps\": 1000").size(), "\"max_steps\": 0");
    write_file_atomically(tmp.path("config.json"), std::as_bytes(std::span(config)));
    for (const std::string& flags : {std::string(""), std::string(" --max-steps 0")}) {
      const std::string out = tmp.path("out.safetensors");
      const std::string cfg = flags.empty() ? tmp.path("config.json") : c.dir + "/config.json";
      std::string log;
      ASSERT_EQ(run_command(tool_path() + " forward --config " + cfg + " --weights " + c.dir +
                                "/weights.safetensors --input " + c.dir + "/input.safetensors --output " + out +
                                " --step " + std::to_string(step) + flags,
                            &log),
                0)
          << log;
      const SafetensorsFile f = SafetensorsFile::open(out);
      EXPECT_TRUE(matches_state(f.read_f32("state.router.expert_bias"), want.bias)) << "bias, flags '" << flags << "'";
      EXPECT_TRUE(matches_state(f.read_f32("state.router.expert_ema"), want.ema)) << "ema, flags '" << flags << "'";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, ForwardConformance, ::testing::ValuesIn(moe_case_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace hymoe::test
