// Quantizers into block fp8 and MXFP4 for the benchmark (bench_quantize.h). Round to the nearest code; the
// decoders of quant_decode.h give the code tables, so encoder and kernels agree on every value.
#include "bench_quantize.h"

#include <algorithm>
#include <cmath>

#include "hymoe/quant_decode.h"

namespace hymoe::tool {
namespace {

constexpr int64_t kFp8Block = 128;

// The nearest of the sorted non-negative `values` to |x|, as its index.
int nearest(const std::vector<float>& values, float ax) {
  const auto it = std::lower_bound(values.begin(), values.end(), ax);
  if (it == values.begin()) return 0;
  if (it == values.end()) return static_cast<int>(values.size()) - 1;
  const int i = static_cast<int>(it - values.begin());
  return ax - values[static_cast<size_t>(i - 1)] <= values[static_cast<size_t>(i)] - ax ? i - 1 : i;
}

std::vector<float> fp8_positive_values() {  // codes 0x00..0x7e, increasing
  std::vector<float> v;
  const float one = 1.0f;
  for (uint8_t c = 0; c < 0x7f; ++c) v.push_back(fp8_block_scaled_value_ref(&c, &one, 1, 1, 1, 1, 0, 0));
  return v;
}

// (N, K) row-major f32 into e4m3 codes and (ceil(N/128), ceil(K/128)) scales.
void quantize_fp8(const float* w, int64_t n, int64_t k, std::vector<uint8_t>& codes, std::vector<float>& scales) {
  static const std::vector<float> table = fp8_positive_values();
  const int64_t bn = (n + kFp8Block - 1) / kFp8Block, bk = (k + kFp8Block - 1) / kFp8Block;
  codes.resize(static_cast<size_t>(n * k));
  scales.resize(static_cast<size_t>(bn * bk));
  for (int64_t i0 = 0; i0 < bn; ++i0)
    for (int64_t j0 = 0; j0 < bk; ++j0) {
      const int64_t i1 = std::min(n, (i0 + 1) * kFp8Block), j1 = std::min(k, (j0 + 1) * kFp8Block);
      float amax = 0.0f;
      for (int64_t i = i0 * kFp8Block; i < i1; ++i)
        for (int64_t j = j0 * kFp8Block; j < j1; ++j) amax = std::max(amax, std::abs(w[i * k + j]));
      const float scale = amax > 0.0f ? amax / 448.0f : 1.0f;
      scales[static_cast<size_t>(i0 * bk + j0)] = scale;
      for (int64_t i = i0 * kFp8Block; i < i1; ++i)
        for (int64_t j = j0 * kFp8Block; j < j1; ++j) {
          const float x = w[i * k + j];
          codes[static_cast<size_t>(i * k + j)] =
              static_cast<uint8_t>(nearest(table, std::abs(x) / scale) | (std::signbit(x) ? 0x80 : 0));
        }
    }
}

// (N, K) row-major f32 (K % 32 == 0) into (N, K/32, 16) E2M1 code pairs and (N, K/32) E8M0 scales.
void quantize_mxfp4(const float* w, int64_t n, int64_t k, std::vector<uint8_t>& codes, std::vector<uint8_t>& scales) {
  std::vector<float> table;
  for (uint8_t c = 0; c < 8; ++c) table.push_back(mxfp4_e2m1_value(c));
  const int64_t groups = k / kMxfp4GroupSize;
  codes.assign(static_cast<size_t>(n * k / 2), 0);
  scales.resize(static_cast<size_t>(n * groups));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t g = 0; g < groups; ++g) {
      const float* x = w + i * k + g * kMxfp4GroupSize;
      float amax = 0.0f;
      for (int64_t j = 0; j < kMxfp4GroupSize; ++j) amax = std::max(amax, std::abs(x[j]));
      // The smallest power of two that brings amax within E2M1's largest value, 6.
      const int e = amax > 0.0f ? std::clamp(static_cast<int>(std::ceil(std::log2(amax / 6.0f))), -127, 127) : 0;
      scales[static_cast<size_t>(i * groups + g)] = static_cast<uint8_t>(e + 127);
      for (int64_t j = 0; j < kMxfp4GroupSize; ++j) {
        const int code = nearest(table, std::ldexp(std::abs(x[j]), -e)) | (std::signbit(x[j]) ? 8 : 0);
        codes[static_cast<size_t>((i * groups + g) * 16 + j / 2)] |= static_cast<uint8_t>(j % 2 ? code << 4 : code);
      }
    }
}

}  // namespace

QuantizedExperts quantize_experts(const float* base, int64_t count, int64_t D, int64_t H, bool fp8) {
  QuantizedExperts q;
  q.views.resize(static_cast<size_t>(count));
  for (int64_t e = 0; e < count; ++e) {
    for (int which = 0; which < 3; ++which) {
      const int64_t n = which == 2 ? D : H, k = which == 2 ? H : D;
      const float* w = base + (e * 3 + which) * H * D;
      auto& codes = q.codes.emplace_back();
      kernels::MatrixView m{nullptr, DType::kF32, kernels::WeightLayout::kOutIn, k, n, {}};
      if (fp8) {
        auto& scales = q.scales.emplace_back();
        quantize_fp8(w, n, k, codes, scales);
        m.quant = {kernels::QuantScheme::kFp8Block, 0, scales.data(), kFp8Block, kFp8Block};
      } else {
        auto& scales = q.scale_bytes.emplace_back();
        quantize_mxfp4(w, n, k, codes, scales);
        m.quant.scheme = kernels::QuantScheme::kMxfp4;
        m.quant.scales = scales.data();
      }
      m.data = codes.data();
      auto& v = q.views[static_cast<size_t>(e)];
      (which == 0 ? v.gate : which == 1 ? v.up : v.down) = m;
    }
  }
  return q;
}

}  // namespace hymoe::tool
