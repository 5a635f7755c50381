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
                        const double* x) {
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

ReferenceOutput reference_forward(const MoEConfig& c, const ReferenceParams& t, const std::vector<double>& x,
                                  bool train, int64_t step, int64_t max_steps, const ReferenceDecisions* fixed) {
  const int64_t D = c.dim, E = c.num_experts, K = c.top_k;
  const int64_t T = static_cast<int64_t>(x.size()) / D;
  const bool sigmoid = c.router_type == "sigmoid_topk";
  ReferenceOutput out;
  out.y.assign(static_cast<size_t>(T * D), 0.0);
  out.counts.assign(static_cast<size_t>(E), 0.0);
  const std::vector<double>& gate = t.at("router.gate.weight");
  std::vector<double> bias(static_cast<size_t>(E), 0.0);
  if (sigmoid)
    for (int64_t e = 0; e < E; ++e) bias[static_cast<size_t>(e)] = t.at("router.expert_bias")[static_cast<size_t>(e)];
  std::vector<double> scores(static_cast<size_t>(T * E));
  double z = 0;
  for (int64_t tok = 0; tok < T; ++tok) {
    std::vector<double> logits(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) {
      double s = 0;
      for (int64_t d = 0; d < D; ++d) s += x[static_cast<size_t>(tok * D + d)] * gate[static_cast<size_t>(e * D + d)];
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
    if (fixed) std::copy_n(fixed->indices.begin() + tok * K, K, order.begin());
    else std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return s[a] > s[b]; });
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
      const double ema_before = t.at("router.expert_ema")[static_cast<size_t>(e)];
      const double ema = ema_before + 0.01 * (util - ema_before);
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
  if (fixed) {  // the fixed drops, whatever the scores say now
    for (size_t i = 0; i < out.weights.size(); ++i)
      if (!fixed->kept[i]) out.weights[i] = 0;
  }
  out.decisions.indices = out.indices;
  out.decisions.counts = out.counts;
  out.decisions.kept.resize(out.weights.size());
  for (size_t i = 0; i < out.weights.size(); ++i) out.decisions.kept[i] = out.weights[i] != 0;
  for (int64_t tok = 0; tok < T; ++tok) {
    const double* xt = x.data() + tok * D;
    for (int64_t k = 0; k < K; ++k) {
      const int e = out.indices[static_cast<size_t>(tok * K + k)];
      const double w = out.weights[static_cast<size_t>(tok * K + k)];
      if (w == 0) continue;
      // Weights looked up once per expert, then indexed (out, in) whatever the storage.
      auto find = [&](const char* which) -> const double* {
        if (c.packed_experts) {
          const auto it = t.find(std::string(which) + "_w");  // (E, in, out)
          return it == t.end() ? nullptr : it->second.data() + e * c.dim * c.hidden_dim;
        }
        const auto it = t.find("experts." + std::to_string(e) + "." + which + "_proj.weight");
        return it == t.end() ? nullptr : it->second.data();
      };
      const double* w_of[3] = {find("gate"), find("up"), find("down")};
      auto weight = [&](const char* which, int64_t o, int64_t i) -> double {
        const bool down = which[0] == 'd';
        const double* m = w_of[down ? 2 : which[0] == 'u' ? 1 : 0];
        const int64_t in = down ? c.hidden_dim : c.dim, outd = down ? c.dim : c.hidden_dim;
        return c.packed_experts ? m[i * outd + o] : m[o * in + i];
      };
      const auto ye = mlp(c, weight, xt);
      double scale = 1.0;
      if (train && c.gradient_scale)
        scale = static_cast<double>(T * K) / static_cast<double>(E) / std::max(out.counts[static_cast<size_t>(e)], 1.0);
      for (int64_t d = 0; d < D; ++d) out.y[static_cast<size_t>(tok * D + d)] += w * scale * ye[static_cast<size_t>(d)];
    }
    if (c.shared_experts > 0) {
      const auto gate_it = t.find("shared_expert.gate_proj.weight");
      const double* w_of[3] = {gate_it == t.end() ? nullptr : gate_it->second.data(),
                               t.at("shared_expert.up_proj.weight").data(), t.at("shared_expert.down_proj.weight").data()};
      auto weight = [&](const char* which, int64_t o, int64_t i) -> double {
        const bool down = which[0] == 'd';
        return w_of[down ? 2 : which[0] == 'u' ? 1 : 0][o * (down ? c.hidden_dim : c.dim) + i];
      };
      const auto ys = mlp(c, weight, xt);
      for (int64_t d = 0; d < D; ++d) out.y[static_cast<size_t>(tok * D + d)] += ys[static_cast<size_t>(d)];
    }
  }
  return out;
}

ReferenceOutput reference_forward(const MoEConfig& c, const std::map<std::string, Tensor>& tensors, const Tensor& x,
                                  bool train, int64_t step, int64_t max_steps) {
  ReferenceParams params;
  for (const auto& [name, t] : tensors) params[name] = std::vector<double>(t.values().begin(), t.values().end());
  return reference_forward(c, params, std::vector<double>(x.values().begin(), x.values().end()), train, step, max_steps);
}

ReferenceParams reference_params(MoELayer& layer) {
  ReferenceParams p;
  for (auto& [name, t] : layer.named_tensors()) p[name] = std::vector<double>(t->values().begin(), t->values().end());
  return p;
}

}  // namespace hymoe::test
