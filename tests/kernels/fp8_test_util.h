// fp8 block views for the kernel tests, and the checks of the fp8 dot format's micro-kernels (kFp8Block128Dot),
// shared by the hardware suite (gemm_quantized_test.cc) and the software model (emulated_isa_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "fast_kernel_test_util.h"
#include "kernels/formats/gemm_quantized.h"

namespace hymoe::test::fp8 {

// An (N, K) quantized matrix with its storage.
struct QuantMatrix {
  std::vector<uint8_t> codes, scale_bytes;
  std::vector<float> scales;
  kernels::MatrixView view;
};

// The normal e4m3 codes (exponent field >= 1, not NaN): 0x08-0x7e and 0x88-0xfe.
constexpr int kNormalFp8Codes = 2 * 119;
inline uint8_t normal_fp8_code(int64_t i) {
  const int64_t at = i % kNormalFp8Codes;
  return static_cast<uint8_t>(at < 119 ? 0x08 + at : 0x88 + at - 119);
}

// Random finite e4m3 codes of both signs and block scales of [block_n, block_k] blocks. The exact kernels decode
// 32 rows of a 128-k unit with only normal codes one way and any others another (gemm_quantized_avx2.cc), so k in
// [32, 64) (and [96, 128) ...) holds only normal codes and the rest any finite code (subnormals and zeros one in
// 8): every unit of 128 k mixes the two.
inline QuantMatrix random_fp8(Rng& rng, int64_t n, int64_t k, int64_t block_n = 128, int64_t block_k = 128) {
  QuantMatrix m;
  m.codes.resize(static_cast<size_t>(n * k));
  for (size_t i = 0; i < m.codes.size(); ++i) {
    uint8_t& c = m.codes[i];
    c = normal_fp8_code(static_cast<int64_t>(rng.below(kNormalFp8Codes)));
    if ((static_cast<int64_t>(i) % k) / 32 % 2 == 0 && rng.below(8) == 0)
      c = static_cast<uint8_t>(rng.below(8) | (rng.below(2) << 7));  // a subnormal or zero, either sign
  }
  const int64_t sn = (n + block_n - 1) / block_n, sk = (k + block_k - 1) / block_k;
  m.scales.resize(static_cast<size_t>(sn * sk));
  for (auto& s : m.scales) s = static_cast<float>(std::ldexp(0.5 + rng.uniform(), -9 + static_cast<int>(rng.below(3))));
  m.view = kernels::MatrixView{m.codes.data(), DType::kF32, kernels::WeightLayout::kOutIn, k, n};
  m.view.quant = {kernels::QuantScheme::kFp8Block, 0, m.scales.data(), block_n, block_k};
  return m;
}

// Every finite code (both signs, subnormals, +-0) under two block scales: with a one-hot activation row (1.0 is
// a bf16 value) the kernel returns fp8(b) * 2^-8 * (scale * 2^8), one rounding: the scalar decoder's bits.
inline void expect_fp8_dot_decodes_every_code_exactly(const kernels::GemmFormat& f) {
  using namespace kernels;
  const int nr = f.nr, mr = f.mr;
  const int64_t k = 256;
  QuantMatrix q;
  q.codes.resize(static_cast<size_t>(nr * k));
  for (size_t i = 0; i < q.codes.size(); ++i) q.codes[i] = static_cast<uint8_t>(i % 254 < 127 ? i % 254 : i % 254 + 1);
  q.scales = {0.75f, 0x1p-3f};
  q.view = MatrixView{q.codes.data(), DType::kF32, WeightLayout::kOutIn, k, nr};
  q.view.quant = {QuantScheme::kFp8Block, 0, q.scales.data(), 128, 128};
  const PackedMatrix b = pack_matrix(q.view, nr, f.format);
  std::vector<float> a(static_cast<size_t>(k)), c(static_cast<size_t>(nr));
  std::vector<uint8_t> ap(static_cast<size_t>(f.units(k) * f.a_unit_bytes()));
  for (int64_t kk = 0; kk < k; ++kk) {
    std::fill(a.begin(), a.end(), 0.0f);
    a[static_cast<size_t>(kk)] = 1.0f;
    f.pack_a(a.data(), k, nullptr, 1, k, mr, ap.data());
    f.gemm(1, k, ap.data(), b.data(), c.data(), nr, false, nullptr, 0);
    for (int j = 0; j < nr; ++j) {
      const float want = q.view.at(kk, j);
      ASSERT_TRUE(std::memcmp(&c[static_cast<size_t>(j)], &want, 4) == 0 || (c[j] == 0 && want == 0))
          << f.name << " k " << kk << " column " << j << " code " << int{q.codes[static_cast<size_t>(j * k + kk)]}
          << ": " << c[static_cast<size_t>(j)] << " vs " << want;
    }
  }
}

// The micro-kernel against gemm_fp8w_bf16__ref on every m, K around and across the 128-k units, with and without
// accumulate (the prefetch hint changes nothing), within the f32 bound of the chain over the bf16-rounded
// activations; the expanded form gives the direct form's bits; the few-rows form gives the bits of its row calls,
// also split at a unit; nothing outside the tile is written.
inline void expect_fp8_dot_kernels_match_reference(const kernels::GemmFormat& f, Rng& rng) {
  using namespace kernels;
  const int mr = f.mr, nr = f.nr;
  for (int64_t kc : {1, 2, 5, 127, 128, 129, 256, 300}) {
    const QuantMatrix q = random_fp8(rng, nr, kc);
    const PackedMatrix b = pack_matrix(q.view, nr, f.format);
    const int64_t lda = kc + 1, ldc = nr + 3;
    const auto x = random_values(rng, mr * lda);
    std::vector<uint8_t> ap(static_cast<size_t>(f.units(kc) * f.a_unit_bytes()));
    f.pack_a(x.data(), lda, nullptr, mr, kc, mr, ap.data());
    const auto c0 = random_values(rng, mr * ldc);
    for (int m = 1; m <= mr; ++m)
      for (bool acc : {false, true}) {
        std::vector<float> got = c0, want = c0, hinted = c0;
        f.gemm(m, kc, ap.data(), b.data(), got.data(), ldc, acc, nullptr, 0);
        f.gemm(m, kc, ap.data(), b.data(), hinted.data(), ldc, acc, b.data(), static_cast<int64_t>(b.bytes()));
        ASSERT_EQ(hinted, got) << f.name << " m=" << m << " kc=" << kc;
        ASSERT_NE(f.gemm_expanding, nullptr);
        std::vector<uint8_t> expanded(static_cast<size_t>(f.units(kc) * f.expanded_unit_bytes));
        std::vector<float> expanding = c0, from_expanded = c0;
        f.gemm_expanding(m, kc, ap.data(), b.data(), expanding.data(), ldc, acc, nullptr, 0, expanded.data());
        f.gemm_expanded(m, kc, ap.data(), expanded.data(), from_expanded.data(), ldc, acc, nullptr, 0);
        ASSERT_EQ(0, std::memcmp(expanding.data(), got.data(), got.size() * sizeof(float)))
            << f.name << " expanding m=" << m << " kc=" << kc << " acc=" << acc;
        ASSERT_EQ(0, std::memcmp(from_expanded.data(), got.data(), got.size() * sizeof(float)))
            << f.name << " expanded m=" << m << " kc=" << kc << " acc=" << acc;
        gemm_fp8w_bf16__ref(m, mr, nr, kc, ap.data(), b.data(), want.data(), ldc, acc);
        for (int i = 0; i < mr; ++i)
          for (int64_t j = 0; j < ldc; ++j) {
            const size_t at = static_cast<size_t>(i * ldc + j);
            if (i >= m || j >= nr) {
              ASSERT_EQ(got[at], c0[at]) << f.name << " wrote outside its tile";
              continue;
            }
            double abs_sum = acc ? std::abs(c0[at]) : 0.0;
            for (int64_t kk = 0; kk < kc; ++kk)
              abs_sum += 1.01 * std::abs(static_cast<double>(x[static_cast<size_t>(i * lda + kk)]) * q.view.at(kk, j));
            // A unit's chain (up to 128 roundings) then one multiply and one add per unit.
            ASSERT_NEAR(got[at], want[at], dot_error_bound(kc + 2 * f.units(kc) + 1, abs_sum))
                << f.name << " m=" << m << " kc=" << kc << " acc=" << acc << " at " << i << "," << j;
          }
      }
  }
  for (int m = 1; m <= f.few_rows_max; ++m)
    for (int64_t k : {1, 7, 128, 129, 300, 384}) {
      const int panels = kFewRowsPanels[m];
      const QuantMatrix q = random_fp8(rng, panels * nr - 3, k);
      const PackedMatrix b = pack_matrix(q.view, nr, f.format);
      ASSERT_EQ(b.panels, panels);
      const int64_t ldc = panels * nr + 5;
      const auto x = random_values(rng, mr * k);
      std::vector<uint8_t> ap(static_cast<size_t>(f.units(k) * f.a_unit_bytes()));
      f.pack_a(x.data(), k, nullptr, m, k, mr, ap.data());
      const auto c0 = random_values(rng, mr * ldc);
      for (bool acc : {false, true}) {
        std::vector<float> few = c0, rows = c0, split = c0;
        f.gemm_few(m, k, ap.data(), b.data(), b.panel_bytes(), few.data(), ldc, acc);
        for (int p = 0; p < panels; ++p)
          f.gemm(m, k, ap.data(), b.buffer.data() + p * b.panel_bytes(), rows.data() + p * nr, ldc, acc, nullptr, 0);
        ASSERT_EQ(0, std::memcmp(few.data(), rows.data(), few.size() * sizeof(float)))
            << f.name << " m=" << m << " k=" << k << " acc=" << acc;
        for (int i = m; i < mr; ++i)
          for (int64_t j = 0; j < ldc; ++j)
            ASSERT_EQ(few[static_cast<size_t>(i * ldc + j)], c0[static_cast<size_t>(i * ldc + j)]) << "wrote row " << i;
        if (k <= 128) continue;
        f.gemm_few(m, 128, ap.data(), b.data(), b.panel_bytes(), split.data(), ldc, acc);
        f.gemm_few(m, k - 128, ap.data() + f.a_unit_bytes(), b.buffer.data() + f.b_unit_bytes(), b.panel_bytes(),
                   split.data(), ldc, true);
        ASSERT_EQ(0, std::memcmp(split.data(), few.data(), few.size() * sizeof(float)))
            << f.name << " m=" << m << " k=" << k << " split at 128";
      }
    }
}

}  // namespace hymoe::test::fp8
