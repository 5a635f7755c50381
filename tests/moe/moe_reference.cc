#include "moe/moe_reference.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace hymoe::test {
namespace {

// One expert MLP on one token: (prefix, expert index for packed storage or -1).
std::vector<double> mlp_ref(const MoEConfig& c, const RefParams& p, const std::string& prefix, int64_t packed_e,
                            const double* x) {
  const int64_t D = c.dim, H = c.hidden_dim;
  const bool gated = c.activation == "silu";
  // Element (in, out) of a weight: nn.Linear (out, in) storage, or expert packed_e of packed (E, in, out).
  struct W {
    const double* data;
    int64_t in_dim, out_dim;
    bool linear;
    double operator()(int64_t in, int64_t out) const { return linear ? data[out * in_dim + in] : data[in * out_dim + out]; }
  };
  auto weight = [&](const char* linear, const char* packed, int64_t in_dim, int64_t out_dim) {
    if (packed_e < 0) return W{p.at(prefix + linear).data(), in_dim, out_dim, true};
    return W{p.at(packed).data() + packed_e * in_dim * out_dim, in_dim, out_dim, false};
  };
  const W up_w = weight("up_proj.weight", "up_w", D, H), down_w = weight("down_proj.weight", "down_w", H, D);
  const W gate_w = gated ? weight("gate_proj.weight", "gate_w", D, H) : up_w;
  std::vector<double> hidden(static_cast<size_t>(H));
  for (int64_t h = 0; h < H; ++h) {
    double up = 0.0, gate = 0.0;
    for (int64_t d = 0; d < D; ++d) {
      up += up_w(d, h) * x[d];
      if (gated) gate += gate_w(d, h) * x[d];
    }
    double a;
    if (gated) a = gate / (1.0 + std::exp(-gate)) * up;
    else if (c.activation == "gelu") a = 0.5 * up * (1.0 + std::erf(up / std::sqrt(2.0)));
    else a = up > 0 ? up : 0.0;
    hidden[static_cast<size_t>(h)] = a;
  }
  std::vector<double> out(static_cast<size_t>(D), 0.0);
  for (int64_t d = 0; d < D; ++d)
    for (int64_t h = 0; h < H; ++h) out[static_cast<size_t>(d)] += down_w(h, d) * hidden[static_cast<size_t>(h)];
  return out;
}

}  // namespace

RefResult moe_forward_ref(const MoEConfig& c, const RefParams& p, const std::vector<double>& x, int64_t T,
                          const RefDecisions* fixed) {
  const int64_t D = c.dim, E = c.num_experts, K = c.top_k;
  const bool sigmoid = c.router_type == "sigmoid_topk";
  const auto& gate = p.at("router.gate.weight");
  std::vector<double> logits(static_cast<size_t>(T * E)), scores(static_cast<size_t>(T * E));
  for (int64_t t = 0; t < T; ++t) {
    double m = -INFINITY;
    for (int64_t e = 0; e < E; ++e) {
      double l = 0.0;
      for (int64_t d = 0; d < D; ++d) l += x[static_cast<size_t>(t * D + d)] * gate[static_cast<size_t>(e * D + d)];
      logits[static_cast<size_t>(t * E + e)] = l;
      m = std::max(m, l);
    }
    double sum = 0.0;
    for (int64_t e = 0; e < E; ++e) sum += std::exp(logits[static_cast<size_t>(t * E + e)] - m);
    for (int64_t e = 0; e < E; ++e) {
      const double l = logits[static_cast<size_t>(t * E + e)];
      scores[static_cast<size_t>(t * E + e)] =
          sigmoid ? 1.0 / (1.0 + std::exp(-(l + p.at("router.expert_bias")[static_cast<size_t>(e)])))
                  : std::exp(l - m) / sum;
    }
  }
  RefResult out;
  RefDecisions& dec = out.decisions;
  if (fixed) {
    dec = *fixed;
  } else {
    dec.indices.resize(static_cast<size_t>(T * K));
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int> order(static_cast<size_t>(E));
      std::iota(order.begin(), order.end(), 0);
      const double* s = scores.data() + t * E;
      std::stable_sort(order.begin(), order.end(), [s](int a, int b) { return s[a] > s[b]; });
      std::copy(order.begin(), order.begin() + K, dec.indices.begin() + t * K);
    }
    dec.counts.assign(static_cast<size_t>(E), 0.0);
    for (int e : dec.indices) dec.counts[static_cast<size_t>(e)] += 1.0;
    dec.kept.assign(static_cast<size_t>(T * K), 1);
    if (c.capacity_factor > 0) {
      const int64_t cap = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(static_cast<double>(T * K) / E * c.capacity_factor)));
      for (int64_t k = 0; k < K; ++k) {
        std::vector<int64_t> seen(static_cast<size_t>(E), 0);
        for (int64_t t = 0; t < T; ++t)
          if (++seen[static_cast<size_t>(dec.indices[static_cast<size_t>(t * K + k)])] > cap) dec.kept[static_cast<size_t>(t * K + k)] = 0;
      }
    }
  }
  out.y.assign(static_cast<size_t>(T * D), 0.0);
  for (int64_t t = 0; t < T; ++t) {
    const double* xt = x.data() + t * D;
    double sum = 0.0;
    for (int64_t k = 0; k < K; ++k) sum += scores[static_cast<size_t>(t * E + dec.indices[static_cast<size_t>(t * K + k)])];
    for (int64_t k = 0; k < K; ++k) {
      const int e = dec.indices[static_cast<size_t>(t * K + k)];
      if (!dec.kept[static_cast<size_t>(t * K + k)]) continue;
      double w = scores[static_cast<size_t>(t * E + e)] / sum;
      if (c.gradient_scale) w *= (static_cast<double>(T * K) / E) / std::max(dec.counts[static_cast<size_t>(e)], 1.0);
      const auto o = c.packed_experts ? mlp_ref(c, p, "", e, xt) : mlp_ref(c, p, "experts." + std::to_string(e) + ".", -1, xt);
      for (int64_t d = 0; d < D; ++d) out.y[static_cast<size_t>(t * D + d)] += w * o[static_cast<size_t>(d)];
    }
    if (c.shared_experts > 0) {
      const auto o = mlp_ref(c, p, "shared_expert.", -1, xt);
      for (int64_t d = 0; d < D; ++d) out.y[static_cast<size_t>(t * D + d)] += o[static_cast<size_t>(d)];
    }
  }
  // Losses: Switch balance term (softmax always, sigmoid with a sequence aux weight) and the z-loss.
  const double aux_scale = sigmoid ? c.sequence_aux_loss_weight : 1.0;
  if (aux_scale > 0) {
    double aux = 0.0;
    for (int64_t e = 0; e < E; ++e) {
      double mean = 0.0;
      for (int64_t t = 0; t < T; ++t) mean += scores[static_cast<size_t>(t * E + e)] / T;
      aux += dec.counts[static_cast<size_t>(e)] / (T * K) * mean;
    }
    out.aux_loss = aux_scale * E * aux;
  }
  for (int64_t t = 0; t < T; ++t) {
    double m = -INFINITY, s = 0.0;
    for (int64_t e = 0; e < E; ++e) m = std::max(m, logits[static_cast<size_t>(t * E + e)]);
    for (int64_t e = 0; e < E; ++e) s += std::exp(logits[static_cast<size_t>(t * E + e)] - m);
    const double lse = m + std::log(s);
    out.z_loss += lse * lse / T;
  }
  return out;
}

RefParams ref_params(MoELayer& layer) {
  RefParams p;
  for (auto& [name, t] : layer.named_parameters()) p[name] = std::vector<double>(t->values().begin(), t->values().end());
  return p;
}

}  // namespace hymoe::test
