// Finite-difference gradient checks: the layer's float32 backward against central differences (in double) of the
// naive reference forward (reference_layer.h), for every parameter kind and option, on small shapes. The
// objective is sum(y * grad_y) + aux_w * aux_loss + z_w * z_loss; routing decisions are held fixed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "hymoe/moe.h"
#include "hymoe/rng.h"
#include "moe/reference_layer.h"
#include "test_util.h"

namespace hymoe::test {
namespace {

struct GradCase {
  const char* name;
  MoEConfig config;
  int64_t batch = 2, seq_len = 5;
  float aux_weight = 0.3f, z_weight = 0.2f;
  bool zero_grad_y = false;
  bool random_bias = false;  // sigmoid: start from a non-zero expert_bias
};

void PrintTo(const GradCase& g, std::ostream* os) { *os << g.name; }

MoEConfig cfg(const char* router, const char* act, int64_t E, int64_t K) {
  MoEConfig c;
  c.dim = 6;
  c.hidden_dim = 5;
  c.num_experts = E;
  c.top_k = K;
  c.activation = act;
  c.router_type = router;
  return c;
}

std::vector<GradCase> grad_cases() {
  std::vector<GradCase> v;
  auto add = [&](const char* name, MoEConfig c, auto&& tweak) {
    GradCase g{name, c};
    tweak(g);
    v.push_back(g);
  };
  auto none = [](GradCase&) {};
  add("softmax_swiglu", cfg("softmax_topk", "silu", 4, 2), none);
  add("softmax_gelu", cfg("softmax_topk", "gelu", 4, 2), none);
  add("softmax_relu_k3", cfg("softmax_topk", "relu", 6, 3), none);
  add("softmax_k_equals_e", cfg("softmax_topk", "silu", 3, 3), none);
  add("sigmoid_swiglu_bias", cfg("sigmoid_topk", "silu", 5, 2), [](GradCase& g) { g.random_bias = true; });
  add("sigmoid_gelu_seq_aux", cfg("sigmoid_topk", "gelu", 5, 2), [](GradCase& g) {
    g.config.sequence_aux_loss_weight = 0.05;
    g.aux_weight = 1.0f;
    g.random_bias = true;
  });
  add("aux_loss_only", cfg("softmax_topk", "silu", 4, 2), [](GradCase& g) {
    g.zero_grad_y = true;
    g.aux_weight = 1.0f;
    g.z_weight = 0.0f;
  });
  add("seq_aux_only", cfg("sigmoid_topk", "silu", 4, 2), [](GradCase& g) {
    g.config.sequence_aux_loss_weight = 0.1;
    g.zero_grad_y = true;
    g.aux_weight = 1.0f;
    g.z_weight = 0.0f;
    g.random_bias = true;
  });
  add("z_loss_only_sigmoid", cfg("sigmoid_topk", "relu", 4, 2), [](GradCase& g) {
    g.zero_grad_y = true;
    g.aux_weight = 0.0f;
    g.z_weight = 1.0f;
    g.random_bias = true;
  });
  add("shared_swiglu", cfg("softmax_topk", "silu", 4, 2), [](GradCase& g) { g.config.shared_experts = 1; });
  add("shared_gelu_sigmoid", cfg("sigmoid_topk", "gelu", 4, 2), [](GradCase& g) { g.config.shared_experts = 2; });
  add("capacity_drops", cfg("softmax_topk", "silu", 4, 2), [](GradCase& g) {
    g.config.capacity_factor = 0.5;
    g.seq_len = 8;
  });
  add("capacity_drops_sigmoid", cfg("sigmoid_topk", "relu", 4, 2), [](GradCase& g) {
    g.config.capacity_factor = 0.6;
    g.seq_len = 8;
  });
  add("gradient_scale", cfg("softmax_topk", "gelu", 4, 2), [](GradCase& g) { g.config.gradient_scale = true; });
  add("packed_swiglu", cfg("softmax_topk", "silu", 4, 2), [](GradCase& g) { g.config.packed_experts = true; });
  add("packed_relu_scale_capacity", cfg("sigmoid_topk", "relu", 4, 2), [](GradCase& g) {
    g.config.packed_experts = true;
    g.config.gradient_scale = true;
    g.config.capacity_factor = 0.75;
    g.seq_len = 8;
  });
  add("single_token", cfg("softmax_topk", "silu", 4, 2), [](GradCase& g) {
    g.batch = 1;
    g.seq_len = 1;
  });
  add("zero_token_experts", cfg("softmax_topk", "gelu", 8, 1), [](GradCase& g) {
    g.batch = 1;
    g.seq_len = 3;
  });
  return v;
}

class GradientCheck : public ::testing::TestWithParam<GradCase> {};

TEST_P(GradientCheck, MatchesFiniteDifferences) {
  const GradCase& g = GetParam();
  const MoEConfig& c = g.config;
  const int64_t T = g.batch * g.seq_len, D = c.dim;
  Rng rng(1234);
  MoELayer layer(c);
  layer.init_random(rng);
  for (auto& [name, t] : layer.named_parameters())
    if (name == "router.expert_bias" && g.random_bias) *t = random_normal(rng, t->shape(), 0.3);
  const Tensor x = random_normal(rng, Shape{g.batch, g.seq_len, D}, 1.0);
  const Tensor grad_y = g.zero_grad_y ? Tensor(x.shape()) : random_normal(rng, x.shape(), 1.0);

  ReferenceParams params = reference_params(layer);  // before the forward: a train forward moves a sigmoid router's bias
  std::vector<double> xd(x.values().begin(), x.values().end());
  const Tensor y = layer.forward(x, Mode::kTrain);
  const Tensor grad_x = layer.backward(grad_y, g.aux_weight, g.z_weight);

  // The reference decides the same routing and computes the same forward.
  const ReferenceOutput base = reference_forward(c, params, xd, true, 0, 1);
  const Routing& r = layer.last_routing();
  ASSERT_EQ(base.decisions.indices, std::vector<int>(r.indices.begin(), r.indices.end()));
  for (int64_t i = 0; i < T * D; ++i) ASSERT_NEAR(y[i], base.y[static_cast<size_t>(i)], 1e-5) << i;
  ASSERT_NEAR(layer.aux_loss(), base.aux, 1e-5);
  ASSERT_NEAR(layer.z_loss(), base.z, 1e-5);
  if (c.capacity_factor > 0) {
    ASSERT_TRUE(std::count(base.decisions.kept.begin(), base.decisions.kept.end(), 0) > 0) << "no drops to test";
  }

  auto objective = [&](const ReferenceParams& p, const std::vector<double>& xv) {
    const ReferenceOutput res = reference_forward(c, p, xv, true, 0, 1, &base.decisions);
    double o = g.aux_weight * res.aux + g.z_weight * res.z;
    for (int64_t i = 0; i < T * D; ++i) o += res.y[static_cast<size_t>(i)] * grad_y[i];
    return o;
  };
  // Central differences of one tensor, then the comparison: rtol 1e-3, atol 1e-4 of the tensor's largest
  // gradient (float32 backward against an exact double derivative).
  auto check = [&](const std::string& name, std::vector<double>& values, const Tensor& got) {
    ASSERT_EQ(static_cast<size_t>(got.numel()), values.size()) << name;
    const double eps = 1e-6;
    std::vector<double> fd(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      const double v = values[i];
      values[i] = v + eps;
      const double plus = objective(params, xd);
      values[i] = v - eps;
      const double minus = objective(params, xd);
      values[i] = v;
      fd[i] = (plus - minus) / (2 * eps);
    }
    double max_abs = 0.0;
    for (double f : fd) max_abs = std::max(max_abs, std::abs(f));
    for (size_t i = 0; i < fd.size(); ++i)
      EXPECT_NEAR(got[static_cast<int64_t>(i)], fd[i], 1e-3 * std::abs(fd[i]) + 1e-4 * max_abs + 1e-9)
          << name << "[" << i << "]";
  };
  check("x", xd, grad_x);
  for (const auto& [name, grad] : layer.named_gradients()) check(name, params.at(name), *grad);
}

INSTANTIATE_TEST_SUITE_P(Options, GradientCheck, ::testing::ValuesIn(grad_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

// Experts that got no token have exactly zero gradients; top_k = 1 leaves the router only rounding-level
// gradient from y (the weight is s/s = 1).
TEST(GradientProperties, ZeroTokenExpertsAndTopOne) {
  MoEConfig c = cfg("softmax_topk", "silu", 8, 1);
  Rng rng(7);
  MoELayer layer(c);
  layer.init_random(rng);
  const Tensor x = random_normal(rng, Shape{1, 3, c.dim}, 1.0);
  layer.forward(x, Mode::kTrain);
  layer.backward(random_normal(rng, x.shape(), 1.0));
  int idle = 0;
  for (int64_t e = 0; e < c.num_experts; ++e) {
    if (layer.expert_counts()[e] != 0) continue;
    ++idle;
    for (const auto& [name, grad] : layer.named_gradients())
      if (name.rfind("experts." + std::to_string(e) + ".", 0) == 0)
        for (float v : grad->values()) EXPECT_EQ(v, 0.0f) << name;
  }
  EXPECT_GE(idle, 5);
  for (const auto& [name, grad] : layer.named_gradients())
    if (name == "router.gate.weight")
      for (float v : grad->values()) EXPECT_LT(std::abs(v), 1e-6f);
}

// The layer keeps its gradient buffers from one backward to the next: a backward after one that used every
// expert gives, bit for bit, what a fresh layer gives (no gradient left over from the first, for the experts the
// second leaves idle or for a router tensor), packed or not, sigmoid router (expert_bias) or softmax.
TEST(GradientProperties, ASecondBackwardOverwritesTheFirst) {
  for (const char* router : {"softmax_topk", "sigmoid_topk"})
    for (bool packed : {false, true}) {
      SCOPED_TRACE(std::string(router) + (packed ? " packed" : " unpacked"));
      MoEConfig c = cfg(router, "silu", 8, 2);
      c.packed_experts = packed;
      c.shared_experts = 1;
      Rng rng(13);
      MoELayer reused(c), fresh(c);
      reused.init_random(rng);
      const Tensor many = random_normal(rng, Shape{2, 16, c.dim}, 1.0);
      reused.forward(many, Mode::kTrain);
      reused.backward(random_normal(rng, many.shape(), 1.0), 0.5f, 0.5f);
      int used = 0;
      for (int64_t e = 0; e < c.num_experts; ++e) used += reused.expert_counts()[e] > 0;
      ASSERT_EQ(used, c.num_experts);
      auto src = reused.named_tensors();
      auto dst = fresh.named_tensors();
      for (size_t i = 0; i < src.size(); ++i) *dst[i].second = *src[i].second;  // the train forward moved the bias
      // Two 1-token steps: the second has experts idle twice (their zeros are left, not rewritten).
      for (int step = 0; step < 2; ++step) {
        const Tensor one = random_normal(rng, Shape{1, 1, c.dim}, 1.0);
        const Tensor gy = random_normal(rng, one.shape(), 1.0);
        reused.forward(one, Mode::kTrain);
        fresh.forward(one, Mode::kTrain);
        EXPECT_EQ(reused.backward(gy, 0.5f, 0.5f).values()[0], fresh.backward(gy, 0.5f, 0.5f).values()[0]);
        const auto a = reused.named_gradients(), b = fresh.named_gradients();
        ASSERT_EQ(a.size(), b.size());
        for (size_t i = 0; i < a.size(); ++i) {
          ASSERT_EQ(a[i].first, b[i].first);
          const auto av = a[i].second->values(), bv = b[i].second->values();
          ASSERT_TRUE(std::equal(av.begin(), av.end(), bv.begin(), bv.end())) << a[i].first << " step " << step;
        }
      }
    }
}

// Packed (E, in, out) storage gives the transposes of the unpacked gradients.
TEST(GradientProperties, PackedMatchesUnpacked) {
  MoEConfig c = cfg("softmax_topk", "silu", 4, 2);
  Rng rng(11);
  MoELayer unpacked(c);
  unpacked.init_random(rng);
  c.packed_experts = true;
  MoELayer packed(c);
  const int64_t D = c.dim;
  std::map<std::string, Tensor*> pk;
  for (auto& [name, t] : packed.named_parameters()) pk[name] = t;
  for (auto& [name, t] : unpacked.named_parameters()) {
    if (name.rfind("experts.", 0) != 0) {
      *pk.at(name) = *t;
      continue;
    }
    const int64_t e = std::stoll(name.substr(8));
    const std::string kind = name.substr(name.find('.', 8) + 1);  // gate_proj.weight ...
    Tensor& dst = *pk.at(kind.substr(0, kind.find('_')) + "_w");
    const int64_t out = t->dim(0), in = t->dim(1);
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) dst[e * in * out + i * out + o] = (*t)[o * in + i];
  }
  const Tensor x = random_normal(rng, Shape{2, 6, D}, 1.0);
  const Tensor gy = random_normal(rng, x.shape(), 1.0);
  unpacked.forward(x, Mode::kTrain);
  packed.forward(x, Mode::kTrain);
  EXPECT_TRUE(all_close(packed.backward(gy, 0.5f, 0.5f), unpacked.backward(gy, 0.5f, 0.5f), 1e-5, 1e-6));
  std::map<std::string, const Tensor*> pg;
  for (const auto& [name, g] : packed.named_gradients()) pg[name] = g;
  for (const auto& [name, g] : unpacked.named_gradients()) {
    if (name.rfind("experts.", 0) != 0) {
      EXPECT_TRUE(all_close(*g, *pg.at(name), 1e-5, 1e-6)) << name;
      continue;
    }
    const int64_t e = std::stoll(name.substr(8));
    const std::string kind = name.substr(name.find('.', 8) + 1);
    const Tensor& pgrad = *pg.at(kind.substr(0, kind.find('_')) + "_w");
    const int64_t out = g->dim(0), in = g->dim(1);
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i)
        EXPECT_NEAR(pgrad[e * in * out + i * out + o], (*g)[o * in + i], 1e-6) << name;
  }
}

}  // namespace
}  // namespace hymoe::test
