// route_model_tokens: transformers' routers for every supported family, and llama.cpp's build_moe_ffn routing for
// GGUF files, as one sequence of optional steps. The
// logits are a float32 GEMM (PyTorch's float32 matmul); softmax, sigmoid and the weight arithmetic run in double
// and round once to float, which sits within float rounding of transformers' float32 steps.
#include "models/model_router.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "hymoe/error.h"
#include "moe/router_common.h"

namespace hymoe {
namespace {

// Indices of the `count` largest values, in descending order; ties go to the lower index (torch.topk's order on
// CPU for distinct values; tied values are not part of any contract).
void top_indices(const double* v, int64_t n, int64_t count, std::vector<int32_t>& order) {
  order.resize(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + count, order.end(),
                    [v](int32_t a, int32_t b) { return v[a] != v[b] ? v[a] > v[b] : a < b; });
  order.resize(static_cast<size_t>(count));
}

// Sets the selection score of experts outside the top_group best groups to options.excluded_score.
void limit_to_best_groups(const RouterOptions& o, int64_t E, double* select) {
  const int64_t G = o.n_group, per_group = E / G;
  std::vector<double> group_score(static_cast<size_t>(G));
  std::vector<int32_t> order;
  for (int64_t g = 0; g < G; ++g) {
    const double* s = select + g * per_group;
    if (o.group_score == GroupScore::kMax) {
      group_score[static_cast<size_t>(g)] = *std::max_element(s, s + per_group);
    } else {  // sum of the two largest
      top_indices(s, per_group, 2, order);
      group_score[static_cast<size_t>(g)] = s[order[0]] + s[order[1]];
    }
  }
  top_indices(group_score.data(), G, o.top_group, order);
  std::vector<char> kept(static_cast<size_t>(G), 0);
  for (int32_t g : order) kept[static_cast<size_t>(g)] = 1;
  for (int64_t g = 0; g < G; ++g)
    if (!kept[static_cast<size_t>(g)])
      for (int64_t e = g * per_group; e < (g + 1) * per_group; ++e) select[e] = o.excluded_score;
}

// PhiMoE's sparsemixer (eval), top-2 (RouterScoring::kSparseMixer). The masks are computed in float32 as
// transformers computes them, so a logit sits on the same side of the threshold; the softmaxes run in double.
void sparse_mixer(const float* l, int64_t E, float jitter_eps, int32_t* chosen, double* weight) {
  const float threshold = 2.0f * jitter_eps;
  int32_t excluded = -1;
  for (int k = 0; k < 2; ++k) {
    int32_t best = -1;
    for (int32_t e = 0; e < E; ++e)
      if (e != excluded && (best < 0 || l[e] > l[best])) best = e;
    const float m = l[best];
    double sum = 0.0;
    for (int32_t e = 0; e < E; ++e) {
      const float factor = std::max(std::fabs(l[e]), m);
      if (e == excluded || (m - l[e]) / factor > threshold) continue;
      sum += std::exp(static_cast<double>(l[e]) - m);
    }
    chosen[k] = best;
    weight[k] = 1.0 / sum;  // exp(m - m) / sum
    excluded = best;
  }
}

}  // namespace

Routing route_model_tokens(const RouterOptions& o, const ModelRouterWeights& w, const Tensor& x, int64_t K) {
  const int64_t T = x.dim(0), E = w.weight.dim(0);
  Routing r;
  r.num_tokens = T;
  r.top_k = K;
  r.num_experts = E;
  r.logits = router_detail::gate_logits(x, w.weight);
  if (o.logit_bias)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t e = 0; e < E; ++e) r.logits[static_cast<size_t>(t * E + e)] += w.logit_bias[static_cast<size_t>(e)];
  r.scores.resize(r.logits.size());
  r.indices.resize(static_cast<size_t>(T * K));
  r.router_weights.resize(static_cast<size_t>(T * K));
  if (o.scoring == RouterScoring::kSparseMixer) {
    HYMOE_CHECK(K == 2, "the sparsemixer selects 2 experts");
    for (int64_t t = 0; t < T; ++t) {
      const float* l = r.logits.data() + t * E;
      for (int64_t e = 0; e < E; ++e) r.scores[static_cast<size_t>(t * E + e)] = l[e];
      int32_t chosen2[2];
      double w2[2];
      sparse_mixer(l, E, static_cast<float>(o.jitter_eps), chosen2, w2);
      for (int64_t k = 0; k < 2; ++k) {
        r.indices[static_cast<size_t>(t * K + k)] = chosen2[k];
        r.router_weights[static_cast<size_t>(t * K + k)] = static_cast<float>(w2[k] * o.scaling_factor);
      }
    }
    r.weights = r.router_weights;
    r.dropped.assign(r.weights.size(), 0);
    r.expert_counts = router_detail::count_assignments(r);
    return r;
  }
  // Every token on its own (its scores, selection and weights), in blocks on the pool: the same bits for any
  // thread count.
  router_detail::for_token_blocks(T, [&](int64_t t0, int64_t t1) {
    std::vector<double> weight_score(static_cast<size_t>(E)), select(static_cast<size_t>(E));
    std::vector<int32_t> chosen;
    for (int64_t t = t0; t < t1; ++t) {
      const float* l = r.logits.data() + t * E;
      switch (o.scoring) {
        case RouterScoring::kSoftmax:
          router_detail::softmax_row(l, E, weight_score.data());
          select = weight_score;
          break;
        case RouterScoring::kSigmoid:
          for (int64_t e = 0; e < E; ++e)
            weight_score[e] = select[e] = 1.0 / (1.0 + std::exp(-static_cast<double>(l[e])));
          break;
        case RouterScoring::kSqrtSoftplus:  // softplus(x) = max(x, 0) + log1p(exp(-|x|)), without overflow
          for (int64_t e = 0; e < E; ++e) {
            const double x = l[e];
            weight_score[e] = select[e] = std::sqrt(std::max(x, 0.0) + std::log1p(std::exp(-std::abs(x))));
          }
          break;
        case RouterScoring::kLogitsThenSigmoid:
          for (int64_t e = 0; e < E; ++e) {
            select[e] = l[e];
            weight_score[e] = 1.0 / (1.0 + std::exp(-static_cast<double>(l[e])));
          }
          break;
        case RouterScoring::kSoftmaxOverTopKLogits:
        case RouterScoring::kSparseMixer:  // handled above
          for (int64_t e = 0; e < E; ++e) weight_score[e] = select[e] = l[e];
          break;
      }
      // The bias is added in float32, as transformers and ggml add two float32 tensors, to what the selection ranks
      // (the scores, or Kolibri-1's logits).
      if (o.selection_bias)
        for (int64_t e = 0; e < E; ++e)
          select[e] = static_cast<double>(static_cast<float>(select[e]) + w.selection_bias[static_cast<size_t>(e)]);
      for (int64_t e = 0; e < E; ++e) r.scores[static_cast<size_t>(t * E + e)] = static_cast<float>(select[e]);
      if (o.group_limited) limit_to_best_groups(o, E, select.data());
      top_indices(select.data(), E, K, chosen);
      double* wk = weight_score.data();  // reused below for the K chosen weights
      std::vector<double> v(static_cast<size_t>(K));
      for (int64_t k = 0; k < K; ++k) v[k] = wk[chosen[k]];
      if (o.scoring == RouterScoring::kSoftmaxOverTopKLogits) {
        const double largest = v[0];
        double sum = 0.0;
        for (int64_t k = 0; k < K; ++k) sum += std::exp(v[k] - largest);
        for (int64_t k = 0; k < K; ++k) v[k] = std::exp(v[k] - largest) / sum;
      }
      if (o.normalize) {
        const double sum =
            std::max(std::accumulate(v.begin(), v.end(), 0.0) + o.normalize_epsilon, o.normalize_min_sum);
        for (double& x : v) x /= sum;
      }
      for (int64_t k = 0; k < K; ++k) {
        r.indices[static_cast<size_t>(t * K + k)] = chosen[static_cast<size_t>(k)];
        r.router_weights[static_cast<size_t>(t * K + k)] = static_cast<float>(v[k] * o.scaling_factor);
      }
    }
  });
  r.weights = r.router_weights;
  r.dropped.assign(r.weights.size(), 0);
  r.expert_counts = router_detail::count_assignments(r);
  return r;
}

}  // namespace hymoe
