#include "hymoe/tensor.h"

#include <gtest/gtest.h>

#include "hymoe/error.h"
#include "hymoe/rng.h"

namespace hymoe {
namespace {

TEST(Tensor, ShapeAndReshape) {
  Tensor t(Shape{2, 3}, 1.5f);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.dim(-1), 3);
  EXPECT_EQ(shape_to_string(t.shape()), "(2, 3)");
  EXPECT_EQ(shape_to_string(Shape{4}), "(4,)");
  EXPECT_EQ(shape_to_string(Shape{}), "()");
  Tensor r = t.reshaped(Shape{3, 2});
  EXPECT_EQ(r.dim(0), 3);
  EXPECT_THROW(t.reshaped(Shape{4, 2}), Error);
  EXPECT_EQ(Tensor::scalar(2.0f).numel(), 1);
}

TEST(Tensor, RejectsBadShapes) {
  EXPECT_THROW(shape_numel(Shape{-1, 2}), Error);
  EXPECT_THROW(shape_numel(Shape{1LL << 40, 1LL << 40}), Error);
  EXPECT_THROW(Tensor(Shape{2, 2}, std::vector<float>{1, 2, 3}), Error);
}

TEST(Rng, DeterministicAndInRange) {
  Rng a(7), b(7), c(8);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(a.next_u64(), b.next_u64());
  EXPECT_NE(Rng(7).next_u64(), c.next_u64());
  Rng r(1);
  double sum = 0, sq = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double u = r.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    ASSERT_LT(r.below(7), 7u);
    const double z = r.normal();
    sum += z;
    sq += z * z;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.05);
  EXPECT_NEAR(sq / n, 1.0, 0.05);
}

}  // namespace
}  // namespace hymoe
