// Shared router arithmetic. The logits are a float32 GEMM (as PyTorch computes them); the other reductions
// accumulate in double so results sit within float rounding of PyTorch's float32 reductions whatever their order.
#include "moe/router_common.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "hymoe/error.h"
#include "kernels/driver/grouped_gemm.h"
#include "kernels/driver/thread_pool.h"

namespace hymoe {

std::vector<std::pair<std::string, Tensor>> Router::backward(const RouterBackwardArgs& /*args*/) {
  fail("router '", type(), "' has no backward pass");
}

}  // namespace hymoe

namespace hymoe::router_detail {

std::vector<float> gate_logits(const Tensor& x, const Tensor& gate) {
  // Float dot products of each token with each gate row (float accumulation, like PyTorch's float32 matmul),
  // batch-invariant (a token's logits do not depend on the tokens routed beside it) and cheap at one token.
  const int64_t T = x.dim(0), D = x.dim(1), E = gate.dim(0);
  std::vector<float> logits(static_cast<size_t>(T * E));
  kernels::dot_rows_gemm(T, D, E, x.data(), gate.data(), logits.data());
  return logits;
}

void for_token_blocks(int64_t T, const std::function<void(int64_t t0, int64_t t1)>& fn) {
  // The per-token arithmetic after the logits (double exponentials, a sort of E scores) costs a few microseconds
  // a token: serial, it took a third of the router's time at 512 tokens (docs/performance.md).
  constexpr int64_t kTokensPerTask = 8;
  kernels::parallel_for((T + kTokensPerTask - 1) / kTokensPerTask, [&](int64_t task, int) {
    fn(task * kTokensPerTask, std::min(T, (task + 1) * kTokensPerTask));
  });
}

void softmax_row(const float* l, int64_t E, double* p) {
  const double m = *std::max_element(l, l + E);
  double s = 0.0;
  for (int64_t e = 0; e < E; ++e) s += p[e] = std::exp(static_cast<double>(l[e]) - m);
  for (int64_t e = 0; e < E; ++e) p[e] /= s;
}

void select_top_k(const std::vector<float>& scores, int64_t T, int64_t E, int64_t K, Routing& routing) {
  routing.indices.assign(static_cast<size_t>(T * K), 0);
  routing.router_weights.assign(static_cast<size_t>(T * K), 0.0f);
  for_token_blocks(T, [&](int64_t t0, int64_t t1) {
    std::vector<int32_t> order(static_cast<size_t>(E));
    for (int64_t t = t0; t < t1; ++t) {
      const float* s = scores.data() + t * E;
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + K, order.end(), [s](int32_t a, int32_t b) {
        return s[a] != s[b] ? s[a] > s[b] : a < b;
      });
      float sum = 0.0f;
      for (int64_t k = 0; k < K; ++k) sum += s[order[static_cast<size_t>(k)]];
      for (int64_t k = 0; k < K; ++k) {
        const int32_t e = order[static_cast<size_t>(k)];
        routing.indices[static_cast<size_t>(t * K + k)] = e;
        routing.router_weights[static_cast<size_t>(t * K + k)] = s[e] / sum;
      }
    }
  });
}

Tensor count_assignments(const Routing& routing) {
  Tensor counts(Shape{routing.num_experts});
  for (int32_t e : routing.indices) counts[e] += 1.0f;
  return counts;
}

float z_loss(const std::vector<float>& logits, int64_t T, int64_t E) {
  // Each token's logsumexp on the pool, then their squares summed in token order, as one serial loop sums them.
  std::vector<double> lse(static_cast<size_t>(T));
  for_token_blocks(T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* l = logits.data() + t * E;
      const double m = *std::max_element(l, l + E);
      double s = 0.0;
      for (int64_t e = 0; e < E; ++e) s += std::exp(static_cast<double>(l[e]) - m);
      lse[static_cast<size_t>(t)] = m + std::log(s);
    }
  });
  double total = 0.0;
  for (const double v : lse) total += v * v;
  return static_cast<float>(total / static_cast<double>(T));
}

float switch_balance_loss(const std::vector<float>& scores, const Tensor& counts, int64_t T, int64_t K) {
  const int64_t E = counts.numel();
  std::vector<double> mean(static_cast<size_t>(E), 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t e = 0; e < E; ++e) mean[static_cast<size_t>(e)] += scores[static_cast<size_t>(t * E + e)];
  double loss = 0.0;
  for (int64_t e = 0; e < E; ++e) {
    const double f = static_cast<double>(counts[e]) / static_cast<double>(T * K);
    loss += f * (mean[static_cast<size_t>(e)] / static_cast<double>(T));
  }
  return static_cast<float>(static_cast<double>(E) * loss);
}

std::vector<double> top_k_weights_backward(const Routing& r, const float* grad_weights) {
  const int64_t T = r.num_tokens, K = r.top_k, E = r.num_experts;
  std::vector<double> grad_scores(static_cast<size_t>(T * E), 0.0);
  for (int64_t t = 0; t < T; ++t) {
    const float* s = r.scores.data() + t * E;
    const int32_t* idx = r.indices.data() + t * K;
    const float* g = grad_weights + t * K;
    double sum = 0.0;
    for (int64_t k = 0; k < K; ++k) sum += s[idx[k]];
    // w_k = s_k / sum  =>  d/ds_j = (g_j - sum_k g_k w_k) / sum for every selected j.
    double gw = 0.0;
    for (int64_t k = 0; k < K; ++k) gw += static_cast<double>(g[k]) * (s[idx[k]] / sum);
    for (int64_t k = 0; k < K; ++k) grad_scores[static_cast<size_t>(t * E + idx[k])] += (g[k] - gw) / sum;
  }
  return grad_scores;
}

void add_balance_loss_grad(const Tensor& counts, int64_t T, int64_t K, double coef, std::vector<double>& grad_scores) {
  const int64_t E = counts.numel();
  for (int64_t e = 0; e < E; ++e) {
    const double f = static_cast<double>(counts[e]) / static_cast<double>(T * K);
    const double g = coef * static_cast<double>(E) * f / static_cast<double>(T);
    for (int64_t t = 0; t < T; ++t) grad_scores[static_cast<size_t>(t * E + e)] += g;
  }
}

void add_z_loss_grad(const std::vector<float>& logits, int64_t T, int64_t E, double coef,
                     std::vector<double>& grad_logits) {
  std::vector<double> p(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    const float* l = logits.data() + t * E;
    const double m = *std::max_element(l, l + E);
    double s = 0.0;
    for (int64_t e = 0; e < E; ++e) s += (p[static_cast<size_t>(e)] = std::exp(static_cast<double>(l[e]) - m));
    const double lse = m + std::log(s);
    // d lse^2 / d l_e = 2 lse softmax(l)_e, averaged over T tokens.
    const double g = coef * 2.0 * lse / static_cast<double>(T);
    for (int64_t e = 0; e < E; ++e) grad_logits[static_cast<size_t>(t * E + e)] += g * p[static_cast<size_t>(e)] / s;
  }
}

Tensor gate_backward(const std::vector<double>& grad_logits, const Tensor& x, const Tensor& gate, float* grad_x) {
  const int64_t T = x.dim(0), D = x.dim(1), E = gate.dim(0);
  Tensor grad_gate(gate.shape());
  std::vector<double> acc(static_cast<size_t>(E * D), 0.0);
  std::vector<double> gx(static_cast<size_t>(D));
  for (int64_t t = 0; t < T; ++t) {
    const float* xr = x.data() + t * D;
    std::fill(gx.begin(), gx.end(), 0.0);
    for (int64_t e = 0; e < E; ++e) {
      const double g = grad_logits[static_cast<size_t>(t * E + e)];
      if (g == 0.0) continue;
      double* a = acc.data() + e * D;
      const float* w = gate.data() + e * D;
      for (int64_t d = 0; d < D; ++d) {
        a[d] += g * xr[d];
        gx[static_cast<size_t>(d)] += g * w[d];
      }
    }
    // The router's part rounded to float, then added: what autograd does when the router is its own node
    // (hymoe.torch under expert parallelism), so both give one token the same bits.
    float* out = grad_x + t * D;
    for (int64_t d = 0; d < D; ++d) out[d] += static_cast<float>(gx[static_cast<size_t>(d)]);
  }
  for (int64_t i = 0; i < E * D; ++i) grad_gate[i] = static_cast<float>(acc[static_cast<size_t>(i)]);
  return grad_gate;
}

}  // namespace hymoe::router_detail
