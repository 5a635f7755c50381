// Gradients of every shared PyTorch train case, through the library and through `hymoe forward --backward`:
// grad.* (of sum(y * grad_output)), grad_aux.* (aux_loss alone) and grad_z.* (z_loss alone), within the
// conformance README's tolerances.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "hymoe/error.h"
#include "moe/conformance.h"
#include "test_util.h"

namespace hymoe::test {
namespace {

// The three objectives each case checks: expected-key prefix, grad_output used, aux and z weights.
struct Objective {
  const char* prefix;
  bool use_grad_output;
  float aux_weight, z_weight;
};
constexpr Objective kObjectives[] = {{"grad.", true, 0.0f, 0.0f}, {"grad_aux.", false, 1.0f, 0.0f},
                                     {"grad_z.", false, 0.0f, 1.0f}};

std::vector<std::string> train_case_names() {
  std::vector<std::string> out;
  for (const auto& name : moe_case_names())
    if (load_moe_case(name).train) out.push_back(name);
  return out;
}

// Compares every expected `<prefix><name>` with got("grad." + name); returns how many were compared.
int expect_grads_match(const SafetensorsFile& exp, const std::string& prefix,
                       const std::function<Tensor(const std::string&)>& got) {
  int compared = 0;
  for (const auto& info : exp.tensors()) {
    if (info.name.rfind(prefix, 0) != 0) continue;
    const std::string name = info.name.substr(prefix.size());
    EXPECT_TRUE(matches_reference(got(name), exp.read_f32(info.name))) << info.name;
    ++compared;
  }
  return compared;
}

class BackwardConformance : public ::testing::TestWithParam<std::string> {};

TEST_P(BackwardConformance, Library) {
  const MoeCase c = load_moe_case(GetParam());
  const SafetensorsFile weights = SafetensorsFile::open(c.dir + "/weights.safetensors");
  const SafetensorsFile input = SafetensorsFile::open(c.dir + "/input.safetensors");
  const SafetensorsFile exp = SafetensorsFile::open(c.dir + "/expected.safetensors");
  const Tensor x = input.read_f32("x");
  for (const Objective& obj : kObjectives) {
    SCOPED_TRACE(obj.prefix);
    MoELayer layer(c.config);  // fresh per objective: a sigmoid router's train forward moves its bias
    layer.load(weights);
    layer.forward(x, Mode::kTrain, c.step, c.max_steps);
    const Tensor grad_y = obj.use_grad_output ? input.read_f32("grad_output") : Tensor(x.shape());
    std::map<std::string, Tensor> got{{"x", layer.backward(grad_y, obj.aux_weight, obj.z_weight)}};
    for (const auto& [name, g] : layer.named_gradients()) got[name] = *g;
    const int compared = expect_grads_match(exp, obj.prefix, [&](const std::string& n) { return got.at(n); });
    if (obj.use_grad_output) {
      // Every parameter has its gradient in the reference, and the reference has nothing else.
      EXPECT_EQ(static_cast<size_t>(compared), got.size());
    } else {
      EXPECT_GE(compared, 2);
    }
  }
}

TEST_P(BackwardConformance, Command) {
  const MoeCase c = load_moe_case(GetParam());
  const TempDir tmp("bwd");
  const std::string& dir = tmp.path();
  const SafetensorsFile input = SafetensorsFile::open(c.dir + "/input.safetensors");
  const SafetensorsFile exp = SafetensorsFile::open(c.dir + "/expected.safetensors");
  // aux_loss and z_loss alone: the same x with a zero grad_output.
  SafetensorsWriter zero_input;
  zero_input.add("x", input.read_f32("x"));
  zero_input.add("grad_output", Tensor(input.read_f32("x").shape()));
  zero_input.write(dir + "/zero_grad.safetensors");
  for (const Objective& obj : kObjectives) {
    SCOPED_TRACE(obj.prefix);
    const std::string out = dir + "/out.safetensors";
    std::string log;
    const int rc = run_command(tool_path() + " forward --backward --config " + c.dir + "/config.json --weights " +
                                   c.dir + "/weights.safetensors --input " +
                                   (obj.use_grad_output ? c.dir + "/input.safetensors" : dir + "/zero_grad.safetensors") +
                                   " --output " + out + " --aux-loss-weight " + std::to_string(obj.aux_weight) +
                                   " --z-loss-weight " + std::to_string(obj.z_weight),
                               &log);
    ASSERT_EQ(rc, 0) << log;
    const SafetensorsFile got = SafetensorsFile::open(out);
    EXPECT_TRUE(matches_reference(got.read_f32("y"), exp.read_f32("y")));
    const int compared = expect_grads_match(exp, obj.prefix, [&](const std::string& n) { return got.read_f32("grad." + n); });
    EXPECT_GE(compared, 2);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, BackwardConformance, ::testing::ValuesIn(train_case_names()),
                         [](const auto& info) { return info.param; });

TEST(BackwardErrors, NeedsTrainForward) {
  const MoeCase c = load_moe_case("softmax_silu_basic");
  MoELayer layer(c.config);
  layer.load(SafetensorsFile::open(c.dir + "/weights.safetensors"));
  const Tensor x = SafetensorsFile::open(c.dir + "/input.safetensors").read_f32("x");
  EXPECT_THROW(layer.backward(Tensor(x.shape())), Error);
  layer.forward(x, Mode::kEval);
  EXPECT_THROW(layer.backward(Tensor(x.shape())), Error);
  EXPECT_EQ(layer.saved_for_backward_bytes(), 0);
  layer.forward(x, Mode::kTrain);
  EXPECT_GT(layer.saved_for_backward_bytes(), 0);
  EXPECT_THROW(layer.backward(Tensor(Shape{1, 1, c.config.dim})), Error);  // wrong shape
}

TEST(BackwardErrors, CommandNeedsTrainMode) {
  const MoeCase c = load_moe_case("softmax_silu_eval");
  const TempDir tmp("bwd_eval");
  const std::string& dir = tmp.path();
  std::string log;
  const int rc = run_command(tool_path() + " forward --backward --config " + c.dir + "/config.json --weights " + c.dir +
                                 "/weights.safetensors --input " + c.dir + "/input.safetensors --output " + dir +
                                 "/out.safetensors",
                             &log);
  EXPECT_NE(rc, 0);
  EXPECT_NE(log.find("train mode"), std::string::npos) << log;
  EXPECT_FALSE(std::filesystem::exists(dir + "/out.safetensors"));
}

}  // namespace
}  // namespace hymoe::test
