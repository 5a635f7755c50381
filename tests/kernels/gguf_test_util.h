// Random GGUF block matrices for the kernel tests of the GGUF formats (exact and int8): valid blocks of random
// bytes with chosen d/dmin (negative, zero), so every code, every 6-bit K-quant scale and min, every Q6_K scale
// sign and every Q5_K fifth bit occurs; and random MXFP4 matrices for MXFP4's int8 twin.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "hymoe/dtype.h"
#include "hymoe/ggml_type.h"
#include "hymoe/quant_formats.h"
#include "hymoe/rng.h"
#include "kernels/formats/gemm_kernels.h"
#include "kernels/ffn/grouped_ffn.h"
#include "fast_kernel_test_util.h"
#include "hymoe/threads.h"

namespace hymoe::test::gguf {

using kernels::MatrixView;
using kernels::MlpWeightsView;
using kernels::QuantScheme;
using kernels::WeightFormat;
using kernels::WeightLayout;
using kernels::gguf_panel_layout;

// Every exact GGUF format and every int8 one, from the registry (gguf_formats.inc).
inline const std::vector<WeightFormat> kGgufFormats = [] {
  std::vector<WeightFormat> out;
  for (const kernels::GgufBlockFormat& b : kernels::kGgufBlockFormats) out.push_back(b.exact);
  return out;
}();
inline const std::vector<WeightFormat> kGgufInt8Formats = [] {
  std::vector<WeightFormat> out;
  for (const kernels::GgufBlockFormat& b : kernels::kGgufBlockFormats) out.push_back(b.int8);
  return out;
}();

// Default grouped-FFN options but the QuantCompute setting.
inline kernels::GroupedFfnOptions with_quant(QuantCompute q) {
  kernels::GroupedFfnOptions o;
  o.quant = q;
  return o;
}

inline uint32_t type_of(WeightFormat f) { return kernels::gguf_format_type(f); }
inline int64_t block_values(WeightFormat f) { return ggml_type_traits(type_of(f))->block_values; }

// One random valid block: random bytes (every IQ grid index and sign), then d (and dmin) a random f16 of either sign,
// zero in 1 of 8 blocks;
// 1 block in 10 is all zeros.
inline void random_block(Rng& rng, uint32_t type, std::byte* out) {
  const GgmlTypeTraits& t = *ggml_type_traits(type);
  for (uint32_t i = 0; i < t.block_bytes; ++i) out[i] = static_cast<std::byte>(rng.next_u64() & 255);
  if (rng.uniform() < 0.1) {
    std::memset(out, 0, t.block_bytes);
    return;
  }
  // Magnitudes so that the values are about 1: codes times scales reach 127 (Q8_0, IQ4), 8 (Q4_0), 16 (Q4_1, Q5_x),
  // 63 * 31 (K), 128 * 32 (Q6_K), 15 * 3 (Q2_K), 32 * 4 (Q3_K), 1 (TQ).
  const kernels::GgufBlockFormat& b = *kernels::gguf_block_format_of_type(type);
  const bool k_quant = t.block_values == 256;
  const GgmlType g = static_cast<GgmlType>(type);
  const bool ternary = g == GgmlType::kTQ1_0 || g == GgmlType::kTQ2_0;
  const bool iq2 = g == GgmlType::kIQ2_XXS || g == GgmlType::kIQ2_XS || g == GgmlType::kIQ2_S;
  const bool iq1 = g == GgmlType::kIQ1_S || g == GgmlType::kIQ1_M;
  const double magnitude = b.values ? (k_quant ? 1.0 / 2048 : 1.0 / 64)  // the IQ4 values reach 127
                           : ternary ? 1.0
                           : iq2 ? 1.0 / 128                      // grid values 43 times 31 / 8
                           : g == GgmlType::kIQ3_XXS || g == GgmlType::kIQ3_S ? 1.0 / 512  // 62 * 31 / 4, 15 * 31
                           : iq1 ? 1.0 / 16                       // 9 * 15 / 8
                           : g == GgmlType::kQ2_K ? 1.0 / 32
                           : g == GgmlType::kQ3_K ? 1.0 / 128
                           : b.code_bits == 8 ? 1.0 / 64
                           : b.code_bits == 6 ? 1.0 / 2048
                           : k_quant ? 1.0 / 1024
                                     : 2.0 / (1 << (b.code_bits - 1));
  auto field = [&] {
    if (rng.uniform() < 0.125) return uint16_t{0};
    const double v = magnitude * (0.25 + rng.uniform()) * (rng.uniform() < 0.5 ? -1 : 1);
    return float_to_f16(static_cast<float>(v));
  };
  const uint16_t d = field(), dmin = field();
  // The f16 d (and dmin after it): first in most blocks, last in the K-quants of 2, 3 and 6 bits and the TQ types.
  const size_t d_at = g == GgmlType::kQ6_K ? 208 : g == GgmlType::kQ2_K ? 80 : g == GgmlType::kQ3_K ? 108
                      : g == GgmlType::kTQ1_0 ? 52 : g == GgmlType::kTQ2_0 ? 64 : 0;
  if (g == GgmlType::kIQ1_M) {
    // IQ1_M keeps d's four nibbles in the top bits of its four uint16 scale words (bytes 48-55).
    for (int i = 0; i < 4; ++i) {
      uint16_t w;
      std::memcpy(&w, out + 48 + 2 * i, 2);
      w = static_cast<uint16_t>((w & 0x0fff) | (((d >> (4 * i)) & 15) << 12));
      std::memcpy(out + 48 + 2 * i, &w, 2);
    }
    return;
  }
  std::memcpy(out + d_at, &d, 2);
  if (ggml_block_has_offsets(type)) std::memcpy(out + d_at + 2, &dmin, 2);
}

// An (n, k) kGgml matrix of random blocks (n rows, blocks along k).
struct GgufMatrix {
  std::vector<std::byte> bytes;
  MatrixView view;
  GgufMatrix(Rng& rng, WeightFormat f, int64_t k, int64_t n) {
    const uint32_t type = type_of(f);
    const GgmlTypeTraits& t = *ggml_type_traits(type);
    const int64_t blocks = n * (k / t.block_values);
    bytes.resize(static_cast<size_t>(blocks * t.block_bytes));
    for (int64_t b = 0; b < blocks; ++b) random_block(rng, type, bytes.data() + b * t.block_bytes);
    view.data = bytes.data();
    view.layout = WeightLayout::kOutIn;
    view.k = k;
    view.n = n;
    view.quant.scheme = QuantScheme::kGgml;
    view.quant.ggml_type = type;
  }
};

// An (n, k) kMxfp4 matrix as gpt-oss stores it (k / 32 groups of 16 code bytes per row, one E8M0 byte each):
// random bytes, so every E2M1 code occurs, and scales around 2^-4 with 1 group in 8 at 0 or 1 (the subnormal
// halves 2^-128, 2^-127). The format argument matches GgufMatrix's (the int8 format or its exact twin).
struct Mxfp4Matrix {
  std::vector<uint8_t> codes, scales;
  MatrixView view;
  Mxfp4Matrix(Rng& rng, WeightFormat, int64_t k, int64_t n) {
    codes.resize(static_cast<size_t>(n * k / 2));
    for (auto& c : codes) c = static_cast<uint8_t>(rng.next_u64() & 255);
    scales.resize(static_cast<size_t>(n * k / 32));
    for (auto& s : scales) s = static_cast<uint8_t>(rng.uniform() < 0.125 ? rng.below(2) : 120 + rng.below(6));
    view = MatrixView{codes.data(), DType::kF32, WeightLayout::kOutIn, k, n};
    view.quant.scheme = QuantScheme::kMxfp4;
    view.quant.scales = scales.data();
  }
};

// Values per block of the source matrix of an int8 format (MXFP4: a 32-k group).
inline int64_t int8_source_block_values(WeightFormat int8) {
  return kernels::gguf_int8_layout(int8).mxfp4 ? 32 : block_values(kernels::gguf_exact_twin(int8));
}

// B as (K, N) floats decoded by the reference.
inline std::vector<float> decoded(const MatrixView& v) {
  std::vector<float> out(static_cast<size_t>(v.k * v.n)), row(static_cast<size_t>(v.k));
  for (int64_t nn = 0; nn < v.n; ++nn) {
    v.decode_quantized_row(nn, row.data());
    for (int64_t kk = 0; kk < v.k; ++kk) out[static_cast<size_t>(kk * v.n + nn)] = row[static_cast<size_t>(kk)];
  }
  return out;
}

// A layer of GGUF (or MXFP4) experts: `first` for gate/up, `down` for down.
template <typename Matrix>
struct BlockExperts {
  std::vector<Matrix> matrices;
  std::vector<MlpWeightsView> views;
  BlockExperts(Rng& rng, int64_t G, int64_t D, int64_t H, WeightFormat first, WeightFormat down) {
    matrices.reserve(static_cast<size_t>(3 * G));
    for (int64_t g = 0; g < G; ++g) {
      MlpWeightsView v;
      v.gate = matrices.emplace_back(rng, first, D, H).view;
      v.up = matrices.emplace_back(rng, first, D, H).view;
      v.down = matrices.emplace_back(rng, down, H, D).view;
      views.push_back(v);
    }
  }
};
using GgufExperts = BlockExperts<GgufMatrix>;
using Mxfp4Experts = BlockExperts<Mxfp4Matrix>;

// The few-rows form (m = 1..few_rows_max rows over kFewRowsPanels[m] of p's panels) gives the bits of one m-row
// micro-kernel call per panel, with and without accumulate, into a C wider than its panels; rows m and on stay
// untouched.
inline void expect_few_rows_equal_one_row_calls(const kernels::GemmFormat& f, const kernels::PackedMatrix& p,
                                                int64_t k, Rng& rng) {
  const int nr = f.nr, mr = f.mr;
  ASSERT_GE(f.few_rows_max, 1);
  ASSERT_EQ(p.panels, kernels::kFewRowsPanels[1]);
  for (int m = 1; m <= f.few_rows_max; ++m) {
    const int panels = kernels::kFewRowsPanels[m];
    const int64_t ldc = panels * nr + 3;
    const std::vector<float> x = random_values(rng, m * k);
    std::vector<uint8_t> a(static_cast<size_t>(f.units(k) * f.a_unit_bytes()));
    f.pack_a(x.data(), k, nullptr, m, k, mr, a.data());
    const std::vector<float> c0 = random_values(rng, mr * ldc);
    for (bool accumulate : {false, true}) {
      std::vector<float> few = c0, rows = c0;
      f.gemm_few(m, k, a.data(), p.data(), p.panel_bytes(), few.data(), ldc, accumulate);
      for (int q = 0; q < panels; ++q)
        f.gemm(m, k, a.data(), p.buffer.data() + q * p.panel_bytes(), rows.data() + q * nr, ldc, accumulate, nullptr,
               0);
      EXPECT_EQ(0, std::memcmp(few.data(), rows.data(), few.size() * sizeof(float)))
          << f.name << " m=" << m << " accumulate=" << accumulate;
      for (int64_t i = m * ldc; i < mr * ldc; ++i)
        ASSERT_EQ(few[static_cast<size_t>(i)], c0[static_cast<size_t>(i)]) << f.name << " wrote row " << i / ldc;
    }
  }
}

// A grouped FFN gives the same bits on 1 and 2 threads (args.y is replaced; outputs of `outputs` floats).
inline void expect_same_bits_on_1_and_2_threads(const kernels::GroupedFfn& ffn, kernels::GroupedFfnArgs args,
                                                size_t outputs) {
  const int before = num_threads();
  std::vector<float> y1(outputs), y2(outputs);
  set_num_threads(1);
  args.y = y1.data();
  ffn.run(args);
  set_num_threads(2);
  args.y = y2.data();
  ffn.run(args);
  set_num_threads(before);
  EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float))) << ffn.name();
}

// llama.cpp's ggml_vec_dot_mxfp4_q8_0 on one block: d = f16(d_x) * 2^(e - 128) in f32 (E8M0_TO_FP32_HALF), then
// d * sumi with sumi = sum kvalues_mxfp4[nibble] * q.
inline float llama_mxfp4_q8_0_block(const uint8_t* nibbles, uint8_t e, const int8_t* q, float dx) {
  int sumi = 0;
  for (int kk = 0; kk < 32; ++kk) sumi += kernels::kMxfp4Kvalues[nibbles[kk]] * q[kk];
  const float d = dx * std::ldexp(1.0f, e - 128);
  return d * static_cast<float>(sumi);
}

// MXFP4's int8 micro-kernel f on one block (K = 32) of one row gives llama.cpp's bits for every code (each column
// a rotation of the 16 codes, two of each) under the E8M0 scales 0, 1 (subnormal halves), 2, 127 and 254 (largest
// finite), with activations whose q8_0 codes reach +-127.
inline void expect_mxfp4_int8_block_matches_llama_cpp(const kernels::GemmFormat& f, Rng& rng) {
  using namespace kernels;
  const int nr = f.nr;
  ASSERT_TRUE(gguf_int8_layout(f.format).mxfp4) << f.name;
  for (uint8_t e : {0, 1, 2, 127, 254}) {
    Mxfp4Matrix m(rng, f.format, 32, nr);
    std::vector<uint8_t> nibbles(static_cast<size_t>(nr * 32));
    for (int j = 0; j < nr; ++j) {
      for (int kk = 0; kk < 32; ++kk) nibbles[static_cast<size_t>(j * 32 + kk)] = static_cast<uint8_t>((kk + j) % 16);
      for (int t = 0; t < 16; ++t)
        m.codes[static_cast<size_t>(j * 16 + t)] = static_cast<uint8_t>(
            nibbles[static_cast<size_t>(j * 32 + 2 * t)] | nibbles[static_cast<size_t>(j * 32 + 2 * t + 1)] << 4);
      m.scales[static_cast<size_t>(j)] = e;
    }
    const PackedMatrix p = pack_matrix(m.view, nr, f.format);
    const std::vector<float> x = random_values(rng, 32);
    std::vector<uint8_t> a(static_cast<size_t>(f.a_unit_bytes()));
    f.pack_a(x.data(), 32, nullptr, 1, 32, f.mr, a.data());
    int8_t q[kQ8Block];
    float dx;
    quantize_ggml_q8_0_block(x.data(), 32, q, &dx);
    std::vector<float> c(static_cast<size_t>(nr));
    f.gemm(1, 32, a.data(), p.data(), c.data(), nr, false, nullptr, 0);
    for (int j = 0; j < nr; ++j) {
      const float want = llama_mxfp4_q8_0_block(nibbles.data() + j * 32, e, q, dx);
      float got = c[static_cast<size_t>(j)];
      uint32_t got_bits, want_bits;
      std::memcpy(&got_bits, &got, 4);
      std::memcpy(&want_bits, &want, 4);
      ASSERT_EQ(got_bits, want_bits) << f.name << " e " << int{e} << " column " << j << ": " << got << " vs " << want;
      if (e >= 2) ASSERT_NE(want, 0.0f);
    }
  }
}

// GGUF int8 micro-kernel f against gemm_gguf_int8__ref on m = 1..MR rows, K of 1, 3 and 9 blocks (odd counts of units, of
// blocks and of the driver's 128-k blocks), N not a multiple of NR; splitting K at 128 (accumulate) and the
// one-row-over-4-panels form give the same bits as one call. The bound: per unit a product of two scales and one
// or two FMAs (3 roundings of the unit's terms), then the chain over the units.
template <typename SourceMatrix>
void expect_int8_kernel_matches_reference_on(const kernels::GemmFormat& gemm_format, Rng& rng) {
  using namespace kernels;
  const GemmFormat* f = &gemm_format;
  const WeightFormat fmt = f->format;
  EXPECT_NE(std::string(f->name).find(weight_format_operands(fmt)), std::string::npos) << f->name;
  const int nr = f->nr, mr = f->mr, panels = kFewRowsPanels[1];
  const GgufPanelLayout l = gguf_int8_layout(fmt);
  for (int64_t blocks : {1, 3, 9}) {
    const int64_t block = int8_source_block_values(fmt);
    if (blocks == 9 && block == kQ8KBlock) continue;
    const int64_t k = blocks * block, units = k / l.k_unit;
    const SourceMatrix m(rng, gguf_exact_twin(fmt), k, nr * panels - 3);
    const PackedMatrix p = pack_matrix(m.view, nr, fmt);
    ASSERT_EQ(p.panels, panels);
    for (int rows = 1; rows <= mr; ++rows) {
      const std::vector<float> x = hymoe::test::random_values(rng, rows * k);
      std::vector<uint8_t> a(static_cast<size_t>(f->units(k) * f->a_unit_bytes()));
      f->pack_a(x.data(), k, nullptr, rows, k, mr, a.data());
      std::vector<float> got(static_cast<size_t>(rows * nr)), split(got.size()), want(got.size());
      f->gemm(rows, k, a.data(), p.data(), got.data(), nr, false, nullptr, 0);
      gemm_gguf_int8__ref(fmt, rows, mr, nr, k, a.data(), p.data(), want.data(), nr, false);
      double max_want = 0;
      for (int i = 0; i < rows; ++i)
        for (int j = 0; j < nr; ++j) {
          // The sum of |terms| (activation value times weight) bounds every partial sum.
          double abs_sum = 0;
          for (int64_t kk = 0; kk < k; ++kk) {
            const int64_t u = kk / l.k_unit, in = kk % l.k_unit;
            const uint8_t* au = a.data() + u * (l.k_unit + 8) * mr;  // sub-block units (a grid type's 256 hold several)
            float da;
            std::memcpy(&da, au + l.k_unit * mr + 4 * i, 4);
            const double xv = static_cast<int8_t>(au[(in / 4 * mr + i) * 4 + in % 4]) * static_cast<double>(da);
            // |scale * code| <= |w| + |offset|: the two terms of a unit are each at most |x| (|w| + |offset|).
            const float offset = l.offsets ? gguf_int8_panel_offset(fmt, p.buffer.data(), nr, kk, j) : 0.0f;
            abs_sum += std::abs(xv) * (std::abs(gguf_panel_weight(fmt, p.buffer.data(), nr, kk, j)) + 2 * std::abs(offset));
          }
          const size_t at = static_cast<size_t>(i * nr + j);
          ASSERT_NEAR(got[at], want[at], dot_error_bound(3 * units, abs_sum)) << f->name << " rows " << rows << " k " << k;
          max_want = std::max(max_want, std::abs(static_cast<double>(want[at])));
        }
      EXPECT_GT(max_want, 0.0) << f->name;
      // Split K at a K block (128, or a grid type's unit of 256).
      const int64_t unit = k_unit(fmt), half_k = std::max<int64_t>(128, unit);
      if (k <= half_k) continue;
      f->gemm(rows, half_k, a.data(), p.data(), split.data(), nr, false, nullptr, 0);
      f->gemm(rows, k - half_k, a.data() + half_k / unit * f->a_unit_bytes(),
              p.buffer.data() + half_k / unit * f->b_unit_bytes(), split.data(), nr, true, p.data(), 64);
      EXPECT_EQ(0, std::memcmp(split.data(), got.data(), got.size() * sizeof(float))) << f->name;
    }
    expect_few_rows_equal_one_row_calls(*f, p, k, rng);
  }
}
// The K-quant forms (compact factors: Q4_K, Q5_K, Q6_K, IQ4_XS; super-block: Q2_K, Q3_K, TQ1_0, TQ2_0) take
// llama.cpp's float steps: per 256 k and C element c = fmaf(float(isum), d * d_a, c), then (offsets) c =
// fmaf(float(msum), -dmin * d_a, c), where isum = sum over the sub-blocks of sc * (sum of (u - code bias) * q) and
// msum = sum of m * (the sub-block's sum of q) are integers. Computed here in scalar f32 from the panel's bytes and
// the packed activations, the kernel's C must have these bits (a float step per sub-block rounds elsewhere and
// fails this). Other formats: nothing to check.
inline void expect_k_quant_float_steps(const kernels::GemmFormat& f, Rng& rng) {
  using namespace kernels;
  const WeightFormat fmt = f.format;
  const GgufPanelLayout l = gguf_int8_layout(fmt);
  if (!l.compact && !l.super_block) return;
  const int nr = f.nr, mr = f.mr, subs = kQ8KBlock / l.k_unit;
  const int64_t blocks = 3, k = blocks * kQ8KBlock, a_unit = (int64_t{l.k_unit} + 8) * mr;
  const int64_t unit_bytes = weight_unit_bytes(fmt, nr);
  const GgufMatrix m(rng, gguf_exact_twin(fmt), k, nr - 3);
  const PackedMatrix p = pack_matrix(m.view, nr, fmt);
  auto f32_at = [](const uint8_t* at) {
    float v;
    std::memcpy(&v, at, sizeof v);
    return v;
  };
  for (int rows = 1; rows <= mr; ++rows) {
    const std::vector<float> x = random_values(rng, rows * k);
    std::vector<uint8_t> a(static_cast<size_t>(f.units(k) * f.a_unit_bytes()));
    f.pack_a(x.data(), k, nullptr, rows, k, mr, a.data());
    std::vector<float> got(static_cast<size_t>(rows * nr));
    f.gemm(rows, k, a.data(), p.data(), got.data(), nr, false, nullptr, 0);
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < nr; ++j) {
        float c = 0.0f;
        for (int64_t b = 0; b < blocks; ++b) {
          const uint8_t* unit = p.buffer.data() + b * unit_bytes;
          int64_t isum = 0, msum = 0;
          float d, neg_dmin = 0.0f;
          for (int s = 0; s < subs; ++s) {
            const uint8_t* au = a.data() + (b * subs + s) * a_unit;
            int64_t dot = 0, sum = 0;
            for (int kk = 0; kk < l.k_unit; ++kk) {
              const int q = static_cast<int8_t>(au[(kk / 4 * mr + i) * 4 + kk % 4]);
              const int64_t at = b * kQ8KBlock + s * l.k_unit + kk;
              dot += int64_t{q} * (gguf_int8_panel_code(fmt, p.buffer.data(), nr, at, j) - l.code_bias);
              sum += q;
            }
            int sc, mn = 0;
            if (l.compact) {
              const GgufCompactLayout cl = gguf_compact_layout(l, nr);
              sc = static_cast<int8_t>(unit[cl.scales + s * nr + j]);
              if (l.offsets) mn = unit[cl.mins + s * nr + j];
              d = f32_at(unit + cl.d + 4 * j);
              if (l.offsets) neg_dmin = f32_at(unit + cl.neg_dmin + 4 * j);
            } else {
              const GgufSuperLayout sl = gguf_super_layout(l, nr);
              const uint8_t byte = unit[sl.scales + s * nr + j];
              sc = l.code_bits == 3 ? static_cast<int8_t>(byte) : byte & 15;
              if (l.offsets) mn = byte >> 4;
              d = f32_at(unit + sl.d + 4 * j);
              if (l.offsets) neg_dmin = f32_at(unit + sl.neg_dmin + 4 * j);
            }
            isum += sc * dot;
            msum += mn * sum;
          }
          ASSERT_LT(std::abs(isum), int64_t{1} << 31) << f.name;
          const float da = f32_at(a.data() + b * subs * a_unit + int64_t{l.k_unit} * mr + 4 * i);
          c = std::fmaf(static_cast<float>(isum), d * da, c);
          if (l.offsets) c = std::fmaf(static_cast<float>(msum), neg_dmin * da, c);
        }
        ASSERT_EQ(std::bit_cast<uint32_t>(got[static_cast<size_t>(i * nr + j)]), std::bit_cast<uint32_t>(c))
            << f.name << " rows " << rows << " row " << i << " col " << j;
      }
  }
}

inline void expect_int8_kernel_matches_reference(const kernels::GemmFormat& f, Rng& rng) {
  if (kernels::gguf_int8_layout(f.format).mxfp4) expect_int8_kernel_matches_reference_on<Mxfp4Matrix>(f, rng);
  else expect_int8_kernel_matches_reference_on<GgufMatrix>(f, rng);
}

}  // namespace hymoe::test::gguf
