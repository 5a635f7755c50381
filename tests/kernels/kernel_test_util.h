// Random ragged problems for kernel tests, and the tolerance rule: a float32 dot product of length K has error at
// most ~K * 2^-24 * sum|a_i b_i|; we bound by a small multiple of that against the double-accumulating reference.
#pragma once

#include <cmath>
#include <vector>

#include "hymoe/rng.h"
#include "kernels/ffn/grouped_ffn.h"

namespace hymoe::kernels::test {

inline double f32_dot_tolerance(int64_t k, double magnitude) {
  return 4.0 * static_cast<double>(k + 2) * 0x1p-24 * magnitude + 1e-30;
}

// Weights of G experts in the requested layout and dtype; storage kept alive by the struct.
struct RandomExperts {
  std::vector<std::vector<float>> f32;
  std::vector<std::vector<uint16_t>> bf16;
  std::vector<MlpWeightsView> views;

  RandomExperts(Rng& rng, int64_t G, int64_t D, int64_t H, bool gated, WeightLayout layout, DType dtype) {
    for (int64_t g = 0; g < G; ++g) {
      MlpWeightsView v;
      auto make = [&](int64_t k, int64_t n) {
        std::vector<float> w(static_cast<size_t>(k * n));
        for (float& x : w) x = static_cast<float>(rng.normal() / std::sqrt(static_cast<double>(k)));
        MatrixView m{nullptr, dtype, layout, k, n};
        if (dtype == DType::kBF16) {
          std::vector<uint16_t> b(w.size());
          for (size_t i = 0; i < w.size(); ++i) b[i] = float_to_bf16(w[i]);
          bf16.push_back(std::move(b));
          m.data = bf16.back().data();
        } else {
          f32.push_back(std::move(w));
          m.data = f32.back().data();
        }
        return m;
      };
      f32.reserve(static_cast<size_t>(G * 3));
      bf16.reserve(static_cast<size_t>(G * 3));
      if (gated) v.gate = make(D, H);
      v.up = make(D, H);
      v.down = make(H, D);
      views.push_back(v);
    }
  }
};

// offsets for the given group sizes.
inline std::vector<int64_t> offsets_of(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> o{0};
  for (int64_t s : sizes) o.push_back(o.back() + s);
  return o;
}

}  // namespace hymoe::kernels::test
