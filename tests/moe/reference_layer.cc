#include "moe/reference_layer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>
#include <numeric>

namespace hymoe::test {
namespace {

double act(const std::string& a, double v) {
  if (a == "gelu") return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
  if (a == "relu") return v > 0 ? v : 0;
  return v / (1 + std::exp(-v));  // silu
}

// y = mlp(x) for an MLP given by weight getters W(name)(out, in).
std::vector<double> mlp(const MoEConfig& c, const std::function<double(const char*, int64_t, int64_t)>& w,
                        const float* x) {
  const int64_t D = c.dim, H = c.hidden_dim;
  std::vector<double> h(static_cast<size_t>(H)), y(static_cast<size_t>(D), 0.0);
  for (int64_t j = 0; j < H; ++j) {
    double u = 0, g = 0;
    for (int64_t d = 0; d < D; ++d) {
      u += x[d] * w("up", j, d);
      if (c.activation == "silu") g += x[d] * w("gate", j, d);
    }
    h[static_cast<size_t>(j)] = c.activation == "silu" ? act("silu", g) * u : act(c.activation, u);
  }
  for (int64_t d = 0; d < D; ++d)
    for (int64_t j = 0; j < H; ++j) y[static_cast<size_t>(d)] += h[static_cast<size_t>(j)] * w("down", d, j);
  return y;
}

}  // namespace

ReferenceOutput reference_forward(const MoEConfig& c, const std::map<std::string, Tensor>& t, const Tensor& x,
                                  bool train, int64_t step, int64_t max_steps) {
  const int64_t D = c.dim, E = c.num_experts, K = c.top_k, H = c.hidden_dim;
  const int64_t T = x.numel() / D;
  const bool sigmoid = c.router_type == "sigmoid_topk";
  ReferenceOutput out;
  out.y.assign(static_cast<size_t>(T * D), 0.0);
  out.counts.assign(static_cast<size_t>(E), 0.0);
  const Tensor& gate = t.at("router.gate.weight");
  std::vector<double> bias(static_cast<size_t>(E), 0.0);
  if (sigmoid)
    for (int64_t e = 0; e < E; ++e) bias[static_cast<size_t>(e)] = t.at("router.expert_bias")[e];
  std::vector<double> scores(static_cast<size_t>(T * E));
  double z = 0;
  for (int64_t tok = 0; tok < T; ++tok) {
    std::vector<double> logits(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) {
      double s = 0;
      for (int64_t d = 0; d < D; ++d) s += static_cast<double>(x[tok * D + d]) * gate[e * D + d];
      logits[static_cast<size_t>(e)] = s;
    }
    const double m = *std::max_element(logits.begin(), logits.end());
    double se = 0;
    for (double l : logits) se += std::exp(l - m);
    z += std::pow(m + std::log(se), 2);
    for (int64_t e = 0; e < E; ++e)
      scores[static_cast<size_t>(tok * E + e)] =
          sigmoid ? 1 / (1 + std::exp(-(logits[static_cast<size_t>(e)] + bias[static_cast<size_t>(e)])))
                  : std::exp(logits[static_cast<size_t>(e)] - m) / se;
    std::vector<int> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    const double* s = &scores[static_cast<size_t>(tok * E)];
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return s[a] > s[b]; });
    double sum = 0;
    for (int64_t k = 0; k < K; ++k) sum += s[order[static_cast<size_t>(k)]];
    for (int64_t k = 0; k < K; ++k) {
      out.indices.push_back(order[static_cast<size_t>(k)]);
      out.weights.push_back(s[order[static_cast<size_t>(k)]] / sum);
      out.counts[static_cast<size_t>(order[static_cast<size_t>(k)])] += 1;
    }
  }
  out.z = z / static_cast<double>(T);
  auto balance = [&] {
    double loss = 0;
    for (int64_t e = 0; e < E; ++e) {
      double mean = 0;
      for (int64_t tok = 0; tok < T; ++tok) mean += scores[static_cast<size_t>(tok * E + e)];
      loss += out.counts[static_cast<size_t>(e)] / static_cast<double>(T * K) * mean / static_cast<double>(T);
    }
    return static_cast<double>(E) * loss;
  };
  out.aux = sigmoid ? (c.sequence_aux_loss_weight > 0 ? c.sequence_aux_loss_weight * balance() : 0.0) : balance();
  if (sigmoid && train) {
    const double p = static_cast<double>(step) / static_cast<double>(std::max<int64_t>(max_steps, 1));
    double rate = 0.001;
    if (c.bias_schedule == "cosine_decay") rate = 0.001 * 0.5 * (1 + std::cos(std::numbers::pi * p));
    if (c.bias_schedule == "linear_warmup") rate = 0.001 * std::min(1.0, 10 * p);
    for (int64_t e = 0; e < E; ++e) {
      const double util = out.counts[static_cast<size_t>(e)] / static_cast<double>(T * K);
      const double ema = t.at("router.expert_ema")[e] + 0.01 * (util - t.at("router.expert_ema")[e]);
      out.ema_after.push_back(ema);
      out.bias_after.push_back(bias[static_cast<size_t>(e)] + rate * (1.0 / static_cast<double>(E) - ema));
    }
  }
  if (c.capacity_factor > 0) {
    const int64_t cap = std::max<int64_t>(
        1, static_cast<int64_t>(std::ceil(static_cast<double>(T * K) / static_cast<double>(E) * c.capacity_factor)));
    for (int64_t k = 0; k < K; ++k) {
      std::vector<int64_t> seen(static_cast<size_t>(E), 0);
      for (int64_t tok = 0; tok < T; ++tok)
        if (++seen[static_cast<size_t>(out.indices[static_cast<size_t>(tok * K + k)])] > cap)
          out.weights[static_cast<size_t>(tok * K + k)] = 0;
    }
  }
  for (int64_t tok = 0; tok < T; ++tok) {
    const float* xt = x.data() + tok * D;
    for (int64_t k = 0; k < K; ++k) {
      const int e = out.indices[static_cast<size_t>(tok * K + k)];
      const double w = out.weights[static_cast<size_t>(tok * K + k)];
      if (w == 0) continue;
      auto weight = [&](const char* which, int64_t o, int64_t i) -> double {
        if (c.packed_experts) {
          const Tensor& p = t.at(std::string(which) + "_w");  // (E, in, out)
          const int64_t in = p.dim(1), outd = p.dim(2);
          return p[(e * in + i) * outd + o];
        }
        const Tensor& m = t.at("experts." + std::to_string(e) + "." + which + "_proj.weight");
        return m[o * m.dim(1) + i];
      };
      const auto ye = mlp(c, weight, xt);
      double scale = 1.0;
      if (train && c.gradient_scale)
        scale = static_cast<double>(T * K) / static_cast<double>(E) / std::max(out.counts[static_cast<size_t>(e)], 1.0);
      for (int64_t d = 0; d < D; ++d) out.y[static_cast<size_t>(tok * D + d)] += w * scale * ye[static_cast<size_t>(d)];
    }
    if (c.shared_experts > 0) {
      auto weight = [&](const char* which, int64_t o, int64_t i) -> double {
        const Tensor& m = t.at(std::string("shared_expert.") + which + "_proj.weight");
        return m[o * m.dim(1) + i];
      };
      const auto ys = mlp(c, weight, xt);
      for (int64_t d = 0; d < D; ++d) out.y[static_cast<size_t>(tok * D + d)] += ys[static_cast<size_t>(d)];
    }
  }
  (void)H;
  return out;
}

}  // namespace hymoe::test
