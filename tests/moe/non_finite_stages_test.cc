// Finite inputs that overflow float32 inside the layer are errors naming the first stage where a non-finite value
// appeared (router, routed experts, shared expert, and in the backward the gradients), never a NaN result.
// Also: a configuration too large for the machine is refused before anything is allocated.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "hymoe/error.h"
#include "hymoe/moe.h"
#include "hymoe/rng.h"
#include "test_util.h"

namespace hymoe::test {
namespace {

MoEConfig config(int64_t shared) {
  MoEConfig c;
  c.dim = 8;
  c.hidden_dim = 8;
  c.num_experts = 4;
  c.top_k = 2;
  c.shared_experts = shared;
  return c;
}

// Every tensor whose name starts with `group` set to `value`.
void fill(MoELayer& layer, const std::string& group, float value) {
  for (auto& [name, t] : layer.named_tensors())
    if (name.starts_with(group)) std::fill(t->values().begin(), t->values().end(), value);
}

Tensor constant_x(float value) {
  Tensor x(Shape{1, 3, 8});
  std::fill(x.values().begin(), x.values().end(), value);
  return x;
}

std::string error_of(const std::function<void()>& run) {
  try {
    run();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(NonFiniteStages, RouterLogitsOverflow) {
  MoELayer layer(config(0));
  fill(layer, "router.", 1e30f);
  fill(layer, "experts.", 0.1f);
  const std::string msg = error_of([&] { layer.forward(constant_x(1e10f), Mode::kEval); });
  EXPECT_NE(msg.find("forward: a non-finite value inf appeared in the router logits at token 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("largest |x| is 1e+10"), std::string::npos) << msg;
}

TEST(NonFiniteStages, HugeInputOverflowsTheRouterLossesFirst) {
  // The example: x = 1e30 with ordinary weights. The z-loss (logsumexp of logits near 1e30, squared) is
  // the first quantity past float's range.
  MoELayer layer(config(0));
  Rng rng(3);
  layer.init_random(rng);
  const std::string msg = error_of([&] { layer.forward(constant_x(1e30f), Mode::kEval); });
  EXPECT_NE(msg.find("forward: a non-finite value inf appeared in the router's z_loss although"), std::string::npos) << msg;
}

TEST(NonFiniteStages, RoutedExpertOutputsOverflow) {
  MoELayer layer(config(0));
  fill(layer, "router.", 0.0f);  // logits 0: the router stays finite
  fill(layer, "experts.", 1.0f);
  // gate = up = 8e20 per hidden unit: silu(gate) * up = 6.4e41 is past float's range.
  const std::string msg = error_of([&] { layer.forward(constant_x(1e20f), Mode::kEval); });
  EXPECT_NE(msg.find("forward: a non-finite value inf appeared in the routed expert outputs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("at routed row 0, column 0"), std::string::npos) << msg;
}

TEST(NonFiniteStages, SharedExpertOutputsOverflow) {
  MoELayer layer(config(1));
  fill(layer, "router.", 0.0f);
  fill(layer, "experts.", 0.0f);  // the routed experts give exactly 0
  fill(layer, "shared_expert.", 1.0f);
  const std::string msg = error_of([&] { layer.forward(constant_x(1e20f), Mode::kEval); });
  EXPECT_NE(msg.find("forward: a non-finite value inf appeared in the shared expert outputs"), std::string::npos) << msg;
}

TEST(NonFiniteStages, SumOfRoutedAndSharedOverflows) {
  // Each part is finite (about 2.4e38 per element) but their sum is not.
  MoELayer layer(config(1));
  fill(layer, "router.", 0.0f);
  fill(layer, "experts.", 1.0f);
  fill(layer, "shared_expert.", 1.0f);
  // SwiGLU with all-ones weights on a constant x = v: gate = up = 8v, h = silu(8v) * 8v ~ 64 v^2, y = 8 h = 512 v^2.
  const float v = std::sqrt(2.4e38f / 512.0f);
  const std::string msg = error_of([&] { layer.forward(constant_x(v), Mode::kEval); });
  EXPECT_NE(msg.find("forward: a non-finite value inf appeared in the layer outputs y (routed + shared)"), std::string::npos)
      << msg;
}

TEST(NonFiniteStages, BackwardNamesTheGradientThatOverflowed) {
  MoELayer layer(config(0));
  fill(layer, "router.", 0.0f);
  fill(layer, "experts.", 1.0f);
  const Tensor x = constant_x(0.01f);
  const Tensor y = layer.forward(x, Mode::kTrain);
  for (float v : y.values()) ASSERT_TRUE(std::isfinite(v));
  // Each routed row's gradient is g times its routing weight (1/2 here); d h sums 8 of those per hidden unit:
  // 8 * 1.5e38 is past float's range inside the routed experts' backward.
  Tensor g(y.shape());
  std::fill(g.values().begin(), g.values().end(), 3e38f);
  const std::string msg = error_of([&] { layer.backward(g); });
  EXPECT_NE(msg.find("backward: a non-finite value"), std::string::npos) << msg;
  EXPECT_NE(msg.find("appeared in the routed experts' input gradients at routed row 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("largest |grad_y| is 3e+38"), std::string::npos) << msg;
  // Moderate gradients pass.
  std::fill(g.values().begin(), g.values().end(), 1.0f);
  layer.forward(x, Mode::kTrain);
  EXPECT_NO_THROW(layer.backward(g));
}

TEST(MemoryEstimate, RefusesALayerTheMachineCannotHoldBeforeAllocating) {
  MoEConfig c;
  c.dim = 1 << 20;
  c.hidden_dim = 1 << 20;
  c.num_experts = 1 << 16;
  c.top_k = 2;
  const std::string msg = error_of([&] { MoELayer layer(c); });
  EXPECT_NE(msg.find("dim=1048576, hidden_dim=1048576, num_experts=65536"), std::string::npos) << msg;
  EXPECT_NE(msg.find("more than this machine's physical memory"), std::string::npos) << msg;
  // Sizes whose products wrap int64 are still estimated, and refused.
  c.dim = int64_t{1} << 62;
  c.hidden_dim = int64_t{1} << 62;
  EXPECT_NE(error_of([&] { MoELayer layer(c); }).find("physical memory"), std::string::npos);
}

TEST(MemoryEstimate, CountsWeightsPackedCopiesAndActivations) {
  const MoEConfig c = config(1);
  // 5 SwiGLU MLPs of 3 * 8 * 8 weights, twice (f32 and packed), plus the router's 4 * 8 gate and 2 * 4 state.
  const MoEMemoryEstimate eval = estimate_moe_memory(c, 0, Mode::kEval);
  EXPECT_EQ(eval.weight_bytes, 4.0 * (2.0 * 5 * 3 * 8 * 8 + 4 * 8 + 2 * 4));
  EXPECT_EQ(eval.activation_bytes, 0.0);
  const MoEMemoryEstimate ten = estimate_moe_memory(c, 10, Mode::kEval);
  const MoEMemoryEstimate twenty = estimate_moe_memory(c, 20, Mode::kEval);
  EXPECT_GT(ten.activation_bytes, 0.0);
  EXPECT_EQ(twenty.activation_bytes, 2.0 * ten.activation_bytes);
  const MoEMemoryEstimate train = estimate_moe_memory(c, 10, Mode::kTrain);
  EXPECT_GT(train.activation_bytes, ten.activation_bytes);
  EXPECT_GT(train.weight_bytes, eval.weight_bytes);
  EXPECT_GT(physical_memory_bytes(), 1e8);
}

}  // namespace
}  // namespace hymoe::test
