// The optimizers against steps computed by hand from PyTorch's update rules.
#include <gtest/gtest.h>

#include "hymoe/error.h"
#include "hymoe/train.h"

namespace hymoe::test {
namespace {

TEST(Optimizer, SgdMomentumTwoSteps) {
  Tensor p(Shape{2}, std::vector<float>{1.0f, -2.0f});
  const Tensor g(Shape{2}, std::vector<float>{0.5f, 1.0f});
  auto opt = make_sgd({.lr = 0.1, .momentum = 0.9, .weight_decay = 0.0});
  const ParamRef refs[] = {{"w", &p, &g}};
  opt->step(refs);  // buf = g: p - 0.1 g
  EXPECT_FLOAT_EQ(p[0], 0.95f);
  EXPECT_FLOAT_EQ(p[1], -2.1f);
  opt->step(refs);  // buf = 0.9 g + g = 1.9 g
  EXPECT_FLOAT_EQ(p[0], 0.855f);
  EXPECT_FLOAT_EQ(p[1], -2.29f);
}

TEST(Optimizer, SgdWeightDecayIsAddedToTheGradient) {
  Tensor p(Shape{1}, std::vector<float>{1.0f});
  const Tensor g(Shape{1}, std::vector<float>{0.5f});
  auto opt = make_sgd({.lr = 0.1, .momentum = 0.0, .weight_decay = 0.1});
  const ParamRef refs[] = {{"w", &p, &g}};
  opt->step(refs);  // g' = 0.5 + 0.1 * 1 = 0.6
  EXPECT_FLOAT_EQ(p[0], 0.94f);
}

TEST(Optimizer, AdamWTwoStepsWithDecoupledDecay) {
  Tensor p(Shape{1}, std::vector<float>{1.0f});
  Tensor g(Shape{1}, std::vector<float>{0.5f});
  auto opt = make_adamw({.lr = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01});
  const ParamRef refs[] = {{"w", &p, &g}};
  // Step 1: p = 0.999; m = 0.05, v = 2.5e-4; m/(1-0.9) = 0.5, sqrt(v/(1-0.999)) = 0.5: p -= 0.1.
  opt->step(refs);
  EXPECT_NEAR(p[0], 0.899, 1e-6);
  // Step 2, g = -0.25: p = 0.899 * 0.999; m = 0.02, v = 3.1225e-4;
  // p -= (0.1 / 0.19) * 0.02 / (sqrt(3.1225e-4) / sqrt(0.001999)) = 0.0266337.
  g[0] = -0.25f;
  opt->step(refs);
  EXPECT_NEAR(p[0], 0.8714673, 1e-6);
}

TEST(Optimizer, RejectsBadOptionsAndChangedParameters) {
  EXPECT_THROW(make_sgd({.lr = 0.0}), Error);
  EXPECT_THROW(make_sgd({.lr = 0.1, .momentum = 1.0}), Error);
  EXPECT_THROW(make_adamw({.lr = 0.1, .beta1 = 1.0}), Error);
  EXPECT_THROW(make_adamw({.lr = 0.1, .weight_decay = -1.0}), Error);
  Tensor p(Shape{2}), g(Shape{2}), g3(Shape{3});
  auto opt = make_adamw({});
  const ParamRef ok[] = {{"w", &p, &g}};
  opt->step(ok);
  const ParamRef renamed[] = {{"v", &p, &g}};
  EXPECT_THROW(opt->step(renamed), Error);
  const ParamRef misshapen[] = {{"w", &p, &g3}};
  EXPECT_THROW(opt->step(misshapen), Error);
}

}  // namespace
}  // namespace hymoe::test
