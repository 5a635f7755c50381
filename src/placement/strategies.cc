// The reference's strategies: frequency (global top-k), score-aware layer-balanced, uniform, front-loading and
// random. Ties always break by lower index, so every mask is a function of the scores alone.
#include <algorithm>
#include <numeric>

#include "hymoe/rng.h"
#include "placement/strategies.h"

namespace hymoe::placement::detail {
namespace {

std::vector<uint8_t> empty_mask(const ScoreView& s) {
  return std::vector<uint8_t>(static_cast<size_t>(s.num_layers * s.num_experts), 0);
}

}  // namespace

std::vector<int64_t> layer_order(const ScoreView& s, int64_t layer) {
  std::vector<int64_t> order(static_cast<size_t>(s.num_experts));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return s.at(layer, a) > s.at(layer, b); });
  return order;
}

std::vector<uint8_t> frequency_mask(const ScoreView& s, int64_t budget) {
  std::vector<int64_t> flat(s.values.size());
  std::iota(flat.begin(), flat.end(), int64_t{0});
  // (-score, flat index) is a strict total order on finite scores, so the selected set is unique.
  auto hotter = [&](int64_t a, int64_t b) {
    const float x = s.values[static_cast<size_t>(a)], y = s.values[static_cast<size_t>(b)];
    return x > y || (x == y && a < b);
  };
  std::nth_element(flat.begin(), flat.begin() + budget, flat.end(), hotter);
  std::vector<uint8_t> mask = empty_mask(s);
  for (int64_t i = 0; i < budget; ++i) mask[static_cast<size_t>(flat[static_cast<size_t>(i)])] = 1;
  return mask;
}

std::vector<uint8_t> layer_balanced_mask(const ScoreView& s, int64_t budget, int64_t min_per_layer,
                                         int64_t max_per_layer) {
  std::vector<uint8_t> mask = empty_mask(s);
  std::vector<int64_t> per_layer(static_cast<size_t>(s.num_layers), 0);
  int64_t chosen = 0;
  for (int64_t l = 0; l < s.num_layers; ++l) {
    const std::vector<int64_t> order = layer_order(s, l);
    for (int64_t i = 0; i < min_per_layer; ++i) mask[static_cast<size_t>(l * s.num_experts + order[i])] = 1;
    per_layer[static_cast<size_t>(l)] = min_per_layer;
    chosen += min_per_layer;
  }
  // The rest in (-score, layer, expert) order, which is (-score, flat index).
  std::vector<int64_t> rest;
  rest.reserve(s.values.size());
  for (int64_t i = 0; i < static_cast<int64_t>(s.values.size()); ++i)
    if (!mask[static_cast<size_t>(i)]) rest.push_back(i);
  std::stable_sort(rest.begin(), rest.end(), [&](int64_t a, int64_t b) {
    return s.values[static_cast<size_t>(a)] > s.values[static_cast<size_t>(b)];
  });
  for (int64_t flat : rest) {
    if (chosen == budget) break;
    int64_t& count = per_layer[static_cast<size_t>(flat / s.num_experts)];
    if (count >= max_per_layer) continue;
    mask[static_cast<size_t>(flat)] = 1;
    ++count;
    ++chosen;
  }
  return mask;
}

std::vector<uint8_t> uniform_mask(const ScoreView& s, int64_t budget) {
  std::vector<uint8_t> mask = empty_mask(s);
  const int64_t base = budget / s.num_layers, extra = budget % s.num_layers;
  for (int64_t l = 0; l < s.num_layers; ++l) {
    const int64_t n = base + (l < extra ? 1 : 0);
    std::fill_n(mask.begin() + l * s.num_experts, n, uint8_t{1});
  }
  return mask;
}

std::vector<uint8_t> front_loading_mask(const ScoreView& s, int64_t budget) {
  std::vector<uint8_t> mask = empty_mask(s);
  std::fill_n(mask.begin(), budget, uint8_t{1});  // row-major: whole layers from layer 0, lowest ids first
  return mask;
}

std::vector<uint8_t> random_mask(const ScoreView& s, int64_t budget, uint64_t seed) {
  // Partial Fisher-Yates over flat positions: the first `budget` entries are a uniform random subset.
  std::vector<int64_t> flat(s.values.size());
  std::iota(flat.begin(), flat.end(), int64_t{0});
  Rng rng(seed);
  for (int64_t i = 0; i < budget; ++i) {
    const auto j = i + static_cast<int64_t>(rng.below(static_cast<uint64_t>(static_cast<int64_t>(flat.size()) - i)));
    std::swap(flat[static_cast<size_t>(i)], flat[static_cast<size_t>(j)]);
  }
  std::vector<uint8_t> mask = empty_mask(s);
  for (int64_t i = 0; i < budget; ++i) mask[static_cast<size_t>(flat[static_cast<size_t>(i)])] = 1;
  return mask;
}

}  // namespace hymoe::placement::detail
