// GroupedExperts: experts packed once, forward and backward. The backward against central finite differences of a
// double-precision reference of the same experts, on awkward groups (an expert with no rows, one row, a prime);
// packed (E, in, out) weights against the same experts as nn.Linear tensors; forward against
// grouped_expert_forward.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "hymoe/error.h"
#include "hymoe/moe.h"
#include "hymoe/rng.h"

namespace hymoe {
namespace {

constexpr int64_t kD = 6, kH = 5;
const std::vector<int64_t> kCounts = {2, 0, 1, 7};

double act(MlpActivation a, double v) {
  switch (a) {
    case MlpActivation::kSwiGLU: return v / (1.0 + std::exp(-v));
    case MlpActivation::kGelu: return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    case MlpActivation::kRelu: return v > 0 ? v : 0.0;
  }
  return 0;
}

Tensor random_tensor(Shape shape, Rng& rng, double scale) {
  Tensor t(std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<float>(rng.normal() * scale);
  return t;
}

// One expert per kCounts entry, of activation a, weights of scale 0.5 (nn.Linear layout).
std::vector<ExpertMlp> random_experts(MlpActivation a, Rng& rng) {
  std::vector<ExpertMlp> experts(kCounts.size());
  for (ExpertMlp& m : experts) {
    m.activation = a;
    if (a == MlpActivation::kSwiGLU) m.gate_proj = random_tensor({kH, kD}, rng, 0.5);
    m.up_proj = random_tensor({kH, kD}, rng, 0.5);
    m.down_proj = random_tensor({kD, kH}, rng, 0.5);
  }
  return experts;
}

// sum(y * g) in double, experts given as nn.Linear (out, in) tensors.
double loss(const std::vector<ExpertMlp>& experts, const Tensor& x, const Tensor& g) {
  double total = 0;
  int64_t row = 0;
  for (size_t e = 0; e < experts.size(); ++e)
    for (int64_t n = 0; n < kCounts[e]; ++n, ++row) {
      const ExpertMlp& m = experts[e];
      std::vector<double> mid(kH);
      for (int64_t h = 0; h < kH; ++h) {
        double up = 0, gate = 0;
        for (int64_t d = 0; d < kD; ++d) {
          up += double(m.up_proj[h * kD + d]) * x[row * kD + d];
          if (m.activation == MlpActivation::kSwiGLU) gate += double(m.gate_proj[h * kD + d]) * x[row * kD + d];
        }
        mid[h] = m.activation == MlpActivation::kSwiGLU ? act(m.activation, gate) * up : act(m.activation, up);
      }
      for (int64_t d = 0; d < kD; ++d) {
        double y = 0;
        for (int64_t h = 0; h < kH; ++h) y += double(m.down_proj[d * kH + h]) * mid[h];
        total += y * g[row * kD + d];
      }
    }
  return total;
}

class GroupedExpertsBackward : public ::testing::TestWithParam<MlpActivation> {};

TEST_P(GroupedExpertsBackward, MatchesFiniteDifferences) {
  const MlpActivation a = GetParam();
  Rng rng(5);
  std::vector<ExpertMlp> experts = random_experts(a, rng);
  int64_t rows = 0;
  for (int64_t c : kCounts) rows += c;
  const Tensor x = random_tensor({rows, kD}, rng, 1.0), g = random_tensor({rows, kD}, rng, 1.0);
  const GroupedExperts grouped(experts);
  GroupedExperts::Saved saved;
  const Tensor y = grouped.forward(x, kCounts, &saved);
  const Tensor y_plain = grouped_expert_forward(x, kCounts, experts);
  for (int64_t i = 0; i < y.numel(); ++i) ASSERT_EQ(y[i], y_plain[i]) << i;
  const GroupedExperts::Gradients grads = grouped.backward(saved, g);

  // Central differences of the double reference, float32 steps: the tolerance covers float32 kernels (sums of
  // kD or kH products of O(1) values, so a few ulps of O(1)) and the differences' O(step^2) error.
  constexpr double kStep = 1e-3, kTol = 2e-4;
  auto check = [&](float* value, float got, const char* what, int64_t i) {
    const float keep = *value;
    *value = static_cast<float>(keep + kStep);
    const double up = loss(experts, x, g);
    *value = static_cast<float>(keep - kStep);
    const double down = loss(experts, x, g);
    *value = keep;
    EXPECT_NEAR(got, (up - down) / (2 * kStep), kTol * (1 + std::fabs(got))) << what << "[" << i << "]";
  };
  Tensor xv = x;
  auto loss_x = [&](float* p, float got, int64_t i) {
    const float keep = *p;
    *p = static_cast<float>(keep + kStep);
    const double up = loss(experts, xv, g);
    *p = static_cast<float>(keep - kStep);
    const double down = loss(experts, xv, g);
    *p = keep;
    EXPECT_NEAR(got, (up - down) / (2 * kStep), kTol * (1 + std::fabs(got))) << "grad x[" << i << "]";
  };
  for (int64_t i = 0; i < xv.numel(); ++i) loss_x(xv.data() + i, grads.grad_x[i], i);
  size_t w = 0;
  for (ExpertMlp& m : experts)
    for (auto& [name, t] : m.named_tensors()) {
      const Tensor& gw = grads.weights[w++];
      ASSERT_EQ(gw.shape(), t->shape()) << name;
      for (int64_t i = 0; i < t->numel(); ++i) check(t->data() + i, gw[i], name.c_str(), i);
    }
  EXPECT_EQ(w, grads.weights.size());
  // The expert with no rows: exact zeros.
  const size_t per = a == MlpActivation::kSwiGLU ? 3 : 2;
  for (size_t k = 0; k < per; ++k)
    for (int64_t i = 0; i < grads.weights[per + k].numel(); ++i) EXPECT_EQ(grads.weights[per + k][i], 0.0f);

  // Packed (E, in, out) weights: the same experts, the same bits.
  const int64_t E = static_cast<int64_t>(experts.size());
  Tensor up_w({E, kD, kH}), gate_w({E, kD, kH}), down_w({E, kH, kD});
  for (int64_t e = 0; e < E; ++e)
    for (int64_t h = 0; h < kH; ++h)
      for (int64_t d = 0; d < kD; ++d) {
        up_w[(e * kD + d) * kH + h] = experts[e].up_proj[h * kD + d];
        if (a == MlpActivation::kSwiGLU) gate_w[(e * kD + d) * kH + h] = experts[e].gate_proj[h * kD + d];
        down_w[(e * kH + h) * kD + d] = experts[e].down_proj[d * kH + h];
      }
  const GroupedExperts packed(up_w, down_w, a == MlpActivation::kSwiGLU ? &gate_w : nullptr, a);
  GroupedExperts::Saved packed_saved;
  const Tensor yp = packed.forward(x, kCounts, &packed_saved);
  for (int64_t i = 0; i < y.numel(); ++i) EXPECT_NEAR(yp[i], y[i], 1e-5f * (1 + std::fabs(y[i]))) << i;
  const GroupedExperts::Gradients pg = packed.backward(packed_saved, g);
  for (int64_t i = 0; i < pg.grad_x.numel(); ++i)
    EXPECT_NEAR(pg.grad_x[i], grads.grad_x[i], 1e-5f * (1 + std::fabs(grads.grad_x[i]))) << i;
  ASSERT_EQ(pg.weights.size(), a == MlpActivation::kSwiGLU ? 3u : 2u);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t h = 0; h < kH; ++h)
      for (int64_t d = 0; d < kD; ++d) {
        const float want = grads.weights[e * per + per - 2][h * kD + d];
        EXPECT_NEAR(pg.weights[0][(e * kD + d) * kH + h], want, 1e-5f * (1 + std::fabs(want)));
      }
}

INSTANTIATE_TEST_SUITE_P(Activations, GroupedExpertsBackward,
                         ::testing::Values(MlpActivation::kSwiGLU, MlpActivation::kGelu, MlpActivation::kRelu));

// A scaled forward (y_r = s_r * mlp(x_r), how MoELayer and expert parallelism apply routing weights) keeps its
// scales: the backward's input and weight gradients are those of sum(y * (s * g)) and grad_scale[r] is
// <g_r, mlp(x_r)>, all against the double reference. A scale of 0 still gets its grad_scale.
TEST_P(GroupedExpertsBackward, ScaledForwardGivesScaleGradients) {
  const MlpActivation a = GetParam();
  Rng rng(9);
  std::vector<ExpertMlp> experts = random_experts(a, rng);
  int64_t rows = 0;
  for (int64_t c : kCounts) rows += c;
  const Tensor x = random_tensor({rows, kD}, rng, 1.0), g = random_tensor({rows, kD}, rng, 1.0);
  std::vector<float> scale(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) scale[static_cast<size_t>(r)] = r == 3 ? 0.0f : 0.25f + 0.1f * static_cast<float>(r);
  const GroupedExperts grouped(experts);
  GroupedExperts::Saved saved;
  const Tensor y = grouped.forward(x, kCounts, &saved, scale.data());
  const Tensor plain = grouped.forward(x, kCounts);
  ASSERT_EQ(saved.scale, scale);
  Tensor g_scaled = g;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t d = 0; d < kD; ++d) {
      EXPECT_NEAR(y[r * kD + d], scale[r] * plain[r * kD + d], 1e-6f * (1 + std::fabs(plain[r * kD + d])));
      g_scaled[r * kD + d] *= scale[r];
    }
  const GroupedExperts::Gradients grads = grouped.backward(saved, g);
  ASSERT_EQ(grads.grad_scale.size(), static_cast<size_t>(rows));
  const GroupedExperts::Gradients unscaled = [&] {
    GroupedExperts::Saved s2;
    grouped.forward(x, kCounts, &s2);
    return grouped.backward(s2, g_scaled);
  }();
  EXPECT_TRUE(unscaled.grad_scale.empty());
  for (int64_t r = 0; r < rows; ++r) {
    double dot = 0;
    for (int64_t d = 0; d < kD; ++d) dot += double(plain[r * kD + d]) * g[r * kD + d];
    EXPECT_NEAR(grads.grad_scale[static_cast<size_t>(r)], dot, 1e-5 * (1 + std::fabs(dot))) << "row " << r;
  }
  // Gradients of sum(y * (s * g)) through the unscaled path: the same up to float32 rounding of where s is applied.
  for (int64_t i = 0; i < grads.grad_x.numel(); ++i)
    EXPECT_NEAR(grads.grad_x[i], unscaled.grad_x[i], 1e-5f * (1 + std::fabs(unscaled.grad_x[i]))) << i;
  ASSERT_EQ(grads.weights.size(), unscaled.weights.size());
  for (size_t w = 0; w < grads.weights.size(); ++w)
    for (int64_t i = 0; i < grads.weights[w].numel(); ++i)
      EXPECT_NEAR(grads.weights[w][i], unscaled.weights[w][i], 1e-5f * (1 + std::fabs(unscaled.weights[w][i])))
          << "weight " << w << "[" << i << "]";
  // And the unscaled path against the double reference's differences, as above.
  constexpr double kStep = 1e-3, kTol = 2e-4;
  Tensor xv = x;
  for (int64_t i = 0; i < xv.numel(); i += 5) {
    const float keep = xv[i];
    xv[i] = static_cast<float>(keep + kStep);
    const double up = loss(experts, xv, g_scaled);
    xv[i] = static_cast<float>(keep - kStep);
    const double down = loss(experts, xv, g_scaled);
    xv[i] = keep;
    EXPECT_NEAR(grads.grad_x[i], (up - down) / (2 * kStep), kTol * (1 + std::fabs(grads.grad_x[i]))) << i;
  }
}

// Gradients kept from call to call: each backward into the same buffers equals a fresh one, bit for bit, as the
// experts with rows change (an expert used, then without rows, gets zeros again; no rows at all clears them).
TEST_P(GroupedExpertsBackward, ReusedBuffersEqualFreshOnes) {
  const MlpActivation a = GetParam();
  Rng rng(13);
  std::vector<ExpertMlp> experts = random_experts(a, rng);
  const GroupedExperts grouped(experts);
  GroupedExperts::Gradients kept;
  for (const std::vector<int64_t>& counts : {std::vector<int64_t>{2, 0, 1, 7}, std::vector<int64_t>{0, 3, 0, 1},
                                              std::vector<int64_t>{0, 0, 0, 0}, std::vector<int64_t>{5, 1, 1, 0}}) {
    int64_t rows = 0;
    for (int64_t c : counts) rows += c;
    const Tensor x = random_tensor({rows, kD}, rng, 1.0), g = random_tensor({rows, kD}, rng, 1.0);
    std::vector<float> scale(static_cast<size_t>(rows), 0.5f);
    GroupedExperts::Saved saved;
    grouped.forward(x, counts, &saved, scale.data());
    const GroupedExperts::Gradients fresh = grouped.backward(saved, g);
    grouped.backward(saved, g, kept);
    ASSERT_EQ(kept.weights.size(), fresh.weights.size());
    for (size_t w = 0; w < fresh.weights.size(); ++w)
      for (int64_t i = 0; i < fresh.weights[w].numel(); ++i)
        ASSERT_EQ(kept.weights[w][i], fresh.weights[w][i]) << "weight " << w << "[" << i << "] after counts "
                                                            << counts[0] << counts[1] << counts[2] << counts[3];
    EXPECT_EQ(kept.grad_scale, fresh.grad_scale);
    for (int64_t i = 0; i < fresh.grad_x.numel(); ++i) ASSERT_EQ(kept.grad_x[i], fresh.grad_x[i]);
  }
}

// Rows gathered by index into the caller's memory: the bits of the forward on the sorted copy, scaled or not.
TEST_P(GroupedExpertsBackward, GatheredForwardEqualsTheSortedCopy) {
  const MlpActivation a = GetParam();
  Rng rng(21);
  std::vector<ExpertMlp> experts = random_experts(a, rng);
  const GroupedExperts grouped(experts);
  int64_t rows = 0;
  for (int64_t c : kCounts) rows += c;
  const int64_t n = rows + 3;  // rows of x no group reads
  const Tensor x = random_tensor({n, kD}, rng, 1.0);
  std::vector<int64_t> index(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) index[static_cast<size_t>(r)] = (r * 7 + 2) % n;
  Tensor sorted(Shape{rows, kD});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t d = 0; d < kD; ++d) sorted[r * kD + d] = x[index[static_cast<size_t>(r)] * kD + d];
  std::vector<float> scale(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) scale[static_cast<size_t>(r)] = 0.5f + 0.25f * static_cast<float>(r % 3);
  for (const float* s : {static_cast<const float*>(nullptr), static_cast<const float*>(scale.data())}) {
    const Tensor want = grouped.forward(sorted, kCounts, nullptr, s);
    std::vector<float> got(static_cast<size_t>(rows * kD), -1.0f);
    grouped.forward(x.data(), n, index, kCounts, got.data(), s);
    for (int64_t i = 0; i < rows * kD; ++i) ASSERT_EQ(got[static_cast<size_t>(i)], want[i]) << i;
  }
  index[0] = n;  // outside x
  std::vector<float> y(static_cast<size_t>(rows * kD));
  EXPECT_THROW(grouped.forward(x.data(), n, index, kCounts, y.data()), Error);
}

TEST(GroupedExperts, RejectsWhatDoesNotFit) {
  Rng rng(1);
  ExpertMlp m;
  m.activation = MlpActivation::kRelu;
  m.up_proj = random_tensor({kH, kD}, rng, 1);
  m.down_proj = random_tensor({kD, kH}, rng, 1);
  const std::vector<ExpertMlp> experts = {m, m};
  const GroupedExperts grouped(experts);
  EXPECT_THROW(grouped.forward(Tensor({3, kD}), std::vector<int64_t>{3}), Error);        // one count, two experts
  EXPECT_THROW(grouped.forward(Tensor({3, kD}), std::vector<int64_t>{1, 1}), Error);     // counts sum to 2
  EXPECT_THROW(grouped.forward(Tensor({3, kD + 1}), std::vector<int64_t>{1, 2}), Error); // width
  GroupedExperts::Saved saved;
  grouped.forward(Tensor({3, kD}), std::vector<int64_t>{1, 2}, &saved);
  EXPECT_THROW(grouped.backward(saved, Tensor({2, kD})), Error);  // grad_y rows
  EXPECT_THROW(GroupedExperts(std::vector<ExpertMlp>{}), Error);
}

}  // namespace
}  // namespace hymoe
