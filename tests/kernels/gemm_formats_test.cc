// The bf16-dot and q8 weight formats: their packings, micro-kernels and grouped FFNs against the scalar references
// that round exactly as the format does (so the only difference left is f32 accumulation, and the bounds are the
// f32 ones), on every ISA this CPU has (the others are skipped), and through the one grouped driver.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <iterator>
#include <vector>

#include "fast_kernel_test_util.h"
#include "hymoe/threads.h"
#include "kernels/driver/gemm_driver.h"
#include "kernels/formats/gemm_kernels.h"
#include "kernels/formats/gemm_quantized.h"
#include "kernels/ffn/grouped_ffn_impl.h"

namespace hymoe::kernels {
namespace {

using test::dot_error_bound;
using test::kF32Eps;
using test::random_values;

constexpr WeightFormat kNewFormats[] = {WeightFormat::kBf16Dot, WeightFormat::kQ8Block32};

std::vector<uint16_t> bits_of(const std::vector<float>& v) {
  std::vector<uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = float_to_bf16(v[i]);
  return b;
}

// Dequantized q8 block of x (n <= 32 values), as doubles.
std::vector<double> q8_values(const float* x, int n) {
  int8_t q[kQ8Block];
  float d;
  quantize_q8_block(x, n, q, &d);
  std::vector<double> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<double>(q[i]) * d;
  return out;
}

TEST(Q8Quantize, BlocksScaleByTheirLargestMagnitudeAndRoundToNearest) {
  const float x[5] = {0.5f, -1.27f, 0.0f, 0.635f, 0.00499f};
  int8_t q[kQ8Block];
  float d;
  quantize_q8_block(x, 5, q, &d);
  EXPECT_FLOAT_EQ(d, 1.27f / 127.0f);
  EXPECT_EQ(q[0], 50);
  EXPECT_EQ(q[1], -127);
  EXPECT_EQ(q[2], 0);
  EXPECT_EQ(q[3], 64);  // 63.5 rounds to the even 64
  EXPECT_EQ(q[4], 0);   // 0.499 rounds down
  for (int i = 5; i < kQ8Block; ++i) EXPECT_EQ(q[i], 0) << i;
  const float zeros[3] = {0, 0, 0};
  quantize_q8_block(zeros, 3, q, &d);
  EXPECT_EQ(d, 0.0f);
  EXPECT_EQ(q[0], 0);
}

// Weight panels: bf16 k pairs and q8 blocks hold every element where the layout says, K padded with zeros; f32
// sources are rounded to bf16 (nearest even), bf16 sources copied.
TEST(FormatPackTest, PanelsHoldTheRoundedWeightsWherePlaced) {
  Rng rng(3);
  const int nr = 32;
  for (int64_t k : {1, 2, 3, 31, 32, 33, 70})
    for (int64_t n : {1, 31, 33}) {
      const auto w = random_values(rng, k * n);  // (N, K): nn.Linear
      const std::vector<uint16_t> wb = bits_of(w);
      for (DType dt : {DType::kF32, DType::kBF16}) {
        const MatrixView view{dt == DType::kBF16 ? static_cast<const void*>(wb.data()) : w.data(), dt,
                              WeightLayout::kOutIn, k, n};
        const PackedMatrix pairs = pack_matrix(view, nr, WeightFormat::kBf16Dot);
        const PackedMatrix q8 = pack_matrix(view, nr, WeightFormat::kQ8Block32);
        ASSERT_EQ(pairs.bytes(), static_cast<size_t>(pairs.panels * ((k + 1) / 2) * nr * 4));
        ASSERT_EQ(q8.bytes(), static_cast<size_t>(q8.panels * ((k + 31) / 32) * 36 * nr));
        for (int64_t col = 0; col < pairs.panels * nr; ++col) {
          const int64_t p = col / nr, j = col % nr;
          const uint16_t* panel = pairs.bf16() + p * pairs.panel_bytes() / 2;
          for (int64_t kk = 0; kk < (k + 1) / 2 * 2; ++kk) {
            const uint16_t want = col < n && kk < k ? wb[static_cast<size_t>(col * k + kk)] : 0;
            ASSERT_EQ(panel[(kk / 2) * nr * 2 + j * 2 + kk % 2], want) << "k " << k << " n " << n << " at " << kk << "," << col;
          }
          const uint8_t* qpanel = static_cast<const uint8_t*>(q8.data()) + p * q8.panel_bytes();
          for (int64_t b = 0; b * 32 < k; ++b) {
            const uint8_t* unit = qpanel + b * 36 * nr;
            const int len = static_cast<int>(std::min<int64_t>(32, k - b * 32));
            std::vector<float> src(static_cast<size_t>(len), 0.0f);
            for (int t = 0; t < len && col < n; ++t) src[static_cast<size_t>(t)] = view.at(b * 32 + t, col);
            const std::vector<double> want = q8_values(src.data(), len);
            float d;
            std::memcpy(&d, unit + 32 * nr + 4 * j, 4);
            for (int t = 0; t < 32; ++t) {
              const int q = static_cast<int>(unit[((t / 4) * nr + j) * 4 + t % 4]) - 128;
              ASSERT_GE(q, -127);
              ASSERT_EQ(static_cast<double>(q) * d, t < len ? want[static_cast<size_t>(t)] : 0.0)
                  << "k " << k << " n " << n << " block " << b << " element " << t << " column " << col;
            }
          }
        }
      }
    }
}

// Activation micro-panels: bf16 pairs of the rows (rounded), q8 blocks with their scales and -128 * sum(q).
TEST(FormatPackTest, ActivationPanelsRoundRowsAndCarryTheQ8Correction) {
  Rng rng(4);
  const int mr = 6;
  for (int64_t k : {1, 3, 32, 45})
    for (int rows : {1, 5, 6}) {
      const int64_t lda = k + 2;
      const auto a = random_values(rng, rows * lda);
      std::vector<uint16_t> pairs(static_cast<size_t>((k + 1) / 2 * mr * 2), 0xffff);
      pack_activations_bf16_pairs(a.data(), lda, nullptr, rows, k, mr, pairs.data());
      for (int i = 0; i < mr; ++i)
        for (int64_t kk = 0; kk < (k + 1) / 2 * 2; ++kk)
          ASSERT_EQ(pairs[static_cast<size_t>((kk / 2) * mr * 2 + i * 2 + kk % 2)],
                    i < rows && kk < k ? float_to_bf16(a[static_cast<size_t>(i * lda + kk)]) : 0);
      const int64_t units = (k + 31) / 32;
      std::vector<uint8_t> q8(static_cast<size_t>(units * 40 * mr), 0xee);
      pack_activations_q8(a.data(), lda, nullptr, rows, k, mr, q8.data());
      for (int64_t u = 0; u < units; ++u)
        for (int i = 0; i < mr; ++i) {
          const uint8_t* unit = q8.data() + u * 40 * mr;
          const int len = static_cast<int>(std::min<int64_t>(32, k - u * 32));
          std::vector<double> want(static_cast<size_t>(len), 0.0);
          if (i < rows) want = q8_values(a.data() + i * lda + u * 32, len);
          float d;
          int32_t correction;
          std::memcpy(&d, unit + 32 * mr + 4 * i, 4);
          std::memcpy(&correction, unit + 36 * mr + 4 * i, 4);
          int32_t sum = 0;
          for (int t = 0; t < 32; ++t) {
            const int q = static_cast<int8_t>(unit[((t / 4) * mr + i) * 4 + t % 4]);
            sum += q;
            ASSERT_EQ(q * static_cast<double>(d), t < len ? want[static_cast<size_t>(t)] : 0.0) << k << " " << i << " " << t;
          }
          ASSERT_EQ(correction, -128 * sum);
        }
    }
}

// AVX2's bf16-pair packings (what the bf16 and fp8 dot formats pack with) write the scalar packings' bits: rows
// holding every rounding case (ties to even both ways, the largest values that round to infinity, infinities,
// NaNs of both kinds and signs, subnormals, which vcvtneps2bf16 would read as zero), k of 1 and odd, inside the
// 16-value step and across 64-pair chunks, 1..mr rows, gathered rows, and the fp8 format's zeros to a whole unit.
TEST(FormatPackTest, Avx2Bf16PairPackingsGiveTheScalarBits) {
  bool has_avx2 = false;
  for (Isa isa : supported_isas()) has_avx2 |= isa == Isa::kAvx2;
  if (!has_avx2) GTEST_SKIP() << "CPU lacks AVX2";
  Rng rng(31);
  const int64_t lda = 2 * 128 + 75;
  std::vector<float> x = random_values(rng, 5 * lda);
  const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0xbf808000u, 0x3f807fffu, 0x7f7fffffu, 0xff7f8000u,
                              0x7f800000u, 0xff800000u, 0x7fc00001u, 0x7f800001u, 0xffbfffffu, 0x00000001u,
                              0x807fffffu, 0x00008000u, 0x00018000u, 0x80000000u, 0x00000000u};
  for (int64_t i = 0; i < lda; ++i) {
    x[static_cast<size_t>(lda + i)] = std::bit_cast<float>(special[i % std::size(special)]);
    x[static_cast<size_t>(2 * lda + i)] *= 1e-39f;  // subnormal
  }
  const int64_t index[] = {2, 1, 4, 1, 0};
  using Pack = void (*)(const float*, int64_t, const int64_t*, int, int64_t, int, void*);
  const std::pair<Pack, Pack> packings[] = {{pack_activations_bf16_pairs, pack_activations_bf16_pairs__avx2},
                                            {pack_activations_bf16_pairs128, pack_activations_bf16_pairs128__avx2}};
  for (const auto& [ref, fast] : packings)
    for (int mr : {1, 6, 12})
      for (int64_t k : {int64_t{1}, int64_t{2}, int64_t{15}, int64_t{17}, int64_t{128}, int64_t{129}, int64_t{143},
                        int64_t{255}, lda})
        for (int rows = 1; rows <= std::min(mr, 5); ++rows)
          for (const int64_t* rows_index : {static_cast<const int64_t*>(nullptr), index}) {
            const size_t words = static_cast<size_t>((k + 127) / 128 * 64 * mr);  // room for the fp8 unit's zeros
            std::vector<uint32_t> want(words, 0xABABABABu), got(words, 0xCDCDCDCDu);
            ref(x.data(), lda, rows_index, rows, k, mr, want.data());
            fast(x.data(), lda, rows_index, rows, k, mr, got.data());
            const size_t written = ref == pack_activations_bf16_pairs ? static_cast<size_t>((k + 1) / 2 * mr) : words;
            ASSERT_TRUE(std::equal(want.begin(), want.begin() + static_cast<std::ptrdiff_t>(written), got.begin()))
                << "mr " << mr << " k " << k << " rows " << rows << (rows_index ? " gathered" : "");
            if (written < words) ASSERT_EQ(got[written], 0xCDCDCDCDu) << "wrote past its pairs: k " << k;
          }
}

// The driver reads a format's unit sizes from its GemmFormat entry, where they are fixed when the entry is defined:
// every entry of every ISA's table must hold its format's own (an entry that set them by position would not).
TEST(GemmFormatTableTest, EntriesHoldTheirFormatsUnitSizes) {
  int checked = 0;
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Vnni, Isa::kAvx512Bf16})
    for (const GemmFormat* f : isa_kernels(isa)->formats) {
      EXPECT_EQ(f->unit_k, k_unit(f->format)) << f->name;
      EXPECT_EQ(f->a_unit_bytes(), activation_unit_bytes(f->format, f->mr)) << f->name;
      EXPECT_EQ(f->b_unit_bytes(), weight_unit_bytes(f->format, f->nr)) << f->name;
      EXPECT_EQ(f->gguf_int8, is_gguf_int8_format(f->format)) << f->name;
      ++checked;
    }
  EXPECT_GT(checked, 4 * 20);
}

class FormatKernelTest : public test::IsaKernelsTest {};

// Every m in 1..MR, K around the units and the K block and primes, with and without accumulate: the micro-kernel
// against its reference on the same packed operands, within the f32 accumulation bound (bf16 products are exact in
// f32; q8 block dot products are exact integers, then one rounding for the product of the two scales).
TEST_P(FormatKernelTest, MicroKernelsMatchTheirReferences) {
  Rng rng(11);
  int ran = 0;
  for (WeightFormat format : kNewFormats) {
    const GemmFormat* f = ik_->format(format);
    if (!f) continue;
    ++ran;
    const int mr = f->mr, nr = f->nr;
    for (int64_t kc : {1, 2, 3, 4, 5, 7, 31, 32, 33, 63, 64, 65, 97, 128, 255, 257}) {
      const int64_t lda = kc + 3, ldc = nr + 5;
      const auto a = random_values(rng, mr * lda);
      const auto w = random_values(rng, kc * nr);  // (N, K)
      const MatrixView view{w.data(), DType::kF32, WeightLayout::kOutIn, kc, nr};
      const PackedMatrix b = pack_matrix(view, nr, format);
      std::vector<uint8_t> ap(static_cast<size_t>(f->units(kc) * f->a_unit_bytes()));
      f->pack_a(a.data(), lda, nullptr, mr, kc, mr, ap.data());
      const auto c0 = random_values(rng, mr * ldc);
      for (int m = 1; m <= mr; ++m)
        for (bool acc : {false, true}) {
          std::vector<float> got = c0, want = c0, hinted = c0;
          f->gemm(m, kc, ap.data(), b.data(), got.data(), ldc, acc, nullptr, 0);
          f->gemm(m, kc, ap.data(), b.data(), hinted.data(), ldc, acc, b.data(), static_cast<int64_t>(b.bytes()) + 4096);
          ASSERT_EQ(hinted, got) << f->name << " m=" << m << " kc=" << kc << ": the prefetch hint changed the result";
          if (format == WeightFormat::kBf16Dot) gemm_bf16w_bf16__ref(m, mr, nr, kc, ap.data(), b.data(), want.data(), ldc, acc);
          else gemm_q8w_q8__ref(m, mr, nr, kc, ap.data(), b.data(), want.data(), ldc, acc);
          for (int i = 0; i < mr; ++i)
            for (int64_t j = 0; j < ldc; ++j) {
              const size_t at = static_cast<size_t>(i * ldc + j);
              if (i >= m || j >= nr) {
                ASSERT_EQ(got[at], c0[at]) << f->name << " m=" << m << " kc=" << kc << " wrote outside its tile";
                continue;
              }
              // |rounded a| <= |a| (1 + 2^-8) for bf16 and <= max|a| <= 1 for q8; the same for w.
              double abs_sum = acc ? std::abs(c0[at]) : 0.0;
              for (int64_t k = 0; k < kc; ++k) abs_sum += 1.01 * std::abs(a[static_cast<size_t>(i * lda + k)] * w[static_cast<size_t>(j * kc + k)]);
              if (format == WeightFormat::kQ8Block32) abs_sum = (acc ? std::abs(c0[at]) : 0.0) + static_cast<double>(kc);
              const int64_t chain = format == WeightFormat::kQ8Block32 ? f->units(kc) + 2 : kc;
              ASSERT_NEAR(got[at], want[at], dot_error_bound(chain + (acc ? 1 : 0), abs_sum))
                  << f->name << " m=" << m << " kc=" << kc << " acc=" << acc << " at " << i << "," << j;
            }
        }
    }
  }
  // Every ISA has q8; bf16 dot exactly where the ISA has AVX512_BF16.
  EXPECT_EQ(ran, GetParam() >= Isa::kAvx512Bf16 ? 2 : 1);
}

// The bf16-dot few-rows form (the decode case) gives the bits of its row calls, on the hardware where this CPU has
// AVX512_BF16 (EmulatedIsaTest.Bf16DotFewRowsFormEqualsItsRowCalls runs the same body on the software model).
TEST(Bf16DotFewRows, FormEqualsItsRowCalls) {
  if (!test::isa_supported(Isa::kAvx512Bf16)) GTEST_SKIP() << "CPU lacks avx512bf16";
  const GemmFormat* f = isa_kernels(Isa::kAvx512Bf16)->format(WeightFormat::kBf16Dot);
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->few_rows_max, 3);
  test::expect_few_rows_form_equals_row_calls(*f);
}

// The q8 blocks' one-row form over four panels (the decode case) gives the bits of its row calls on every ISA this CPU
// has (EmulatedIsaTest.Q8FewRowsFormEqualsItsRowCalls runs the VNNI body on the software model).
TEST_P(FormatKernelTest, Q8FewRowsFormEqualsItsRowCalls) {
  const GemmFormat* f = isa_kernels(GetParam())->format(WeightFormat::kQ8Block32);
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->few_rows_max, 1);
  test::expect_few_rows_form_equals_row_calls(*f);
}

// A ragged grouped FFN problem with weights and activations in [-1, 1].
struct FormatProblem {
  GroupedFfnShape shape;
  std::vector<int64_t> offsets;
  std::vector<float> x, scale, gate, up, down;
  std::vector<uint16_t> gate_bits, up_bits, down_bits;
  std::vector<MlpWeightsView> views;

  FormatProblem(DType dt, int64_t dim, int64_t hidden, const std::vector<int64_t>& rows, uint64_t seed) {
    shape = {static_cast<int64_t>(rows.size()), dim, hidden, Activation::kSwiGLU};
    offsets.assign(1, 0);
    for (int64_t r : rows) offsets.push_back(offsets.back() + r);
    Rng rng(seed);
    const int64_t E = shape.num_groups;
    x = random_values(rng, offsets.back() * dim);
    scale = random_values(rng, offsets.back());
    gate = random_values(rng, E * hidden * dim, dt == DType::kBF16);
    up = random_values(rng, E * hidden * dim, dt == DType::kBF16);
    down = random_values(rng, E * dim * hidden, dt == DType::kBF16);
    gate_bits = bits_of(gate);
    up_bits = bits_of(up);
    down_bits = bits_of(down);
    for (int64_t e = 0; e < E; ++e) {
      auto view = [&](const std::vector<float>& f, const std::vector<uint16_t>& b, int64_t k, int64_t n) {
        const int64_t off = e * k * n;
        return MatrixView{dt == DType::kBF16 ? static_cast<const void*>(b.data() + off) : f.data() + off, dt,
                          WeightLayout::kOutIn, k, n};
      };
      views.push_back({view(gate, gate_bits, dim, hidden), view(up, up_bits, dim, hidden), view(down, down_bits, hidden, dim)});
    }
  }
};

using FormatOutputs = test::FfnOutputs;
FormatOutputs run_ffn(const GroupedFfn& ffn, const FormatProblem& p) {
  return test::run_ffn_saving(ffn, p.offsets, p.x, p.scale);
}

RoundingModel rounding_of(WeightFormat format) {
  return format == WeightFormat::kBf16Dot ? RoundingModel::kBf16Activations : RoundingModel::kQ8Blocks;
}

// The grouped FFN in each format against the reference that rounds as the format does. Gate/up: the f32 bound of
// a dot product of |terms| <= 1. y: the down projection's inputs are the hidden rows rounded again, and a hidden
// value that differs by dh between fast and reference can round to a neighbouring value: the bound adds, per
// hidden element, dh plus one rounding quantum (bf16: one ulp <= 2^-7 |h|; q8: the block's step d, and dh again
// for the block scale moving with its largest element), weighted by |w_down|.
TEST_P(FormatKernelTest, GroupedFfnMatchesTheRoundingReference) {
  const int64_t mr = isa_kernels(GetParam())->mr;
  const std::vector<std::vector<int64_t>> batches = {{1}, {0, 3, 0, 0, 14}, {0, 0, 16 * mr + 5, 0}, {1, 2, 5, 6, 7, 13}};
  const std::vector<std::pair<int64_t, int64_t>> dims = {{1, 1}, {17, 9}, {33, 31}, {2 * kKc + 37, kKc + 11}};
  uint64_t seed = 100;
  for (WeightFormat format : kNewFormats) {
    if (!ik_->format(format)) continue;
    for (DType dt : {DType::kF32, DType::kBF16})
      for (auto [dim, hidden] : dims)
        for (const auto& rows : batches) {
          if (rows.size() == 4 && dim > 17) continue;
          const FormatProblem p(dt, dim, hidden, rows, seed++);
          const auto fast = make_grouped_ffn_packed(p.shape, p.views, GetParam(), format);
          const auto ref = make_grouped_ffn_ref(p.shape, p.views, rounding_of(format));
          const FormatOutputs got = run_ffn(*fast, p), want = run_ffn(*ref, p);
          const int64_t D = dim, H = hidden;
          const int64_t chain = format == WeightFormat::kQ8Block32 ? (D + 31) / 32 + 2 : D;
          const double e_gu = dot_error_bound(chain, 1.01 * static_cast<double>(D));
          for (size_t i = 0; i < got.up.size(); ++i) {
            ASSERT_NEAR(got.up[i], want.up[i], e_gu) << fast->name() << " up " << i;
            ASSERT_NEAR(got.gate[i], want.gate[i], e_gu) << fast->name() << " gate " << i;
          }
          for (int64_t e = 0; e < p.shape.num_groups; ++e)
            for (int64_t r = p.offsets[e]; r < p.offsets[e + 1]; ++r) {
              std::vector<double> h(static_cast<size_t>(H)), dh(static_cast<size_t>(H));
              for (int64_t j = 0; j < H; ++j) {
                const double g = want.gate[static_cast<size_t>(r * H + j)], u = want.up[static_cast<size_t>(r * H + j)];
                h[j] = silu(g) * u;
                dh[j] = 1.2 * e_gu * std::abs(u) + std::abs(silu(g)) * e_gu + 8 * kF32Eps * std::abs(h[j]);
              }
              std::vector<double> quantum(static_cast<size_t>(H));
              for (int64_t b = 0; b < H; b += 32) {
                double amax = 0, dmax = 0;
                for (int64_t j = b; j < std::min(H, b + 32); ++j) amax = std::max(amax, std::abs(h[j])), dmax = std::max(dmax, dh[j]);
                for (int64_t j = b; j < std::min(H, b + 32); ++j)
                  quantum[j] = format == WeightFormat::kBf16Dot ? 0x1p-7 * (std::abs(h[j]) + dh[j]) : (amax + dmax) / 127 + dmax;
              }
              for (int64_t d = 0; d < D; ++d) {
                double mag = 0, prop = 0;
                for (int64_t j = 0; j < H; ++j) {
                  const double w = std::abs(p.down[static_cast<size_t>((e * D + d) * H + j)]);
                  mag += (std::abs(h[j]) + quantum[j] + dh[j]) * w;
                  prop += (dh[j] + quantum[j]) * w;
                }
                const int64_t down_chain = format == WeightFormat::kQ8Block32 ? (H + 31) / 32 + 2 : H;
                const double s = std::abs(p.scale[static_cast<size_t>(r)]);
                const double bound = s * (dot_error_bound(down_chain, mag) + prop) + kF32Eps * s * mag + 1e-30;
                ASSERT_NEAR(got.y[static_cast<size_t>(r * D + d)], want.y[static_cast<size_t>(r * D + d)], bound)
                    << fast->name() << " dim " << dim << " hidden " << hidden << " row " << r << " column " << d;
              }
            }
        }
  }
}

// The formats' tiles are thread-independent too: the same bits for 1, 2 and 3 threads.
TEST_P(FormatKernelTest, IdenticalBitsForAnyThreadCount) {
  const int before = num_threads();
  for (WeightFormat format : kNewFormats) {
    if (!ik_->format(format)) continue;
    const FormatProblem p(DType::kBF16, 70, 90, {5, 0, 40, 1, 120, 9, 2, 3}, 99);
    const auto fast = make_grouped_ffn_packed(p.shape, p.views, GetParam(), format);
    std::vector<float> first;
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      const FormatOutputs o = run_ffn(*fast, p);
      if (first.empty()) first = o.y;
      else ASSERT_EQ(0, std::memcmp(first.data(), o.y.data(), first.size() * sizeof(float))) << fast->name() << " " << threads;
    }
  }
  set_num_threads(before);
}

INSTANTIATE_TEST_SUITE_P(Isas, FormatKernelTest,
                         ::testing::Values(Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Vnni, Isa::kAvx512Bf16),
                         test::isa_param_name);

// The bf16 compute choice: auto takes the native kernels where the ISA has them and this CPU's bf16 dot outpaces its
// f32 FMA (AMD), widen always widens, native on an ISA without AVX512_BF16 is an error that says so.
TEST(Bf16ComputeTest, ChoosesTheFormatByIsaAndSetting) {
  const FormatProblem p(DType::kBF16, 8, 8, {1}, 5);
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16}) {
    GroupedFfnOptions o;
    o.bf16 = Bf16Compute::kAuto;
    const bool native = isa >= Isa::kAvx512Bf16 && bf16_dot_outpaces_fma();
    EXPECT_EQ(choose_weight_format(p.views, isa, o), native ? WeightFormat::kBf16Dot : WeightFormat::kBf16Widen);
    EXPECT_EQ(resolve_bf16_compute(isa, Bf16Compute::kAuto), native ? Bf16Compute::kNative : Bf16Compute::kWiden);
    EXPECT_EQ(resolve_bf16_compute(isa, Bf16Compute::kWiden), Bf16Compute::kWiden);
    o.bf16 = Bf16Compute::kWiden;
    EXPECT_EQ(choose_weight_format(p.views, isa, o), WeightFormat::kBf16Widen);
    o.bf16 = Bf16Compute::kNative;
    if (isa >= Isa::kAvx512Bf16) EXPECT_EQ(choose_weight_format(p.views, isa, o), WeightFormat::kBf16Dot);
    else EXPECT_THROW(choose_weight_format(p.views, isa, o), std::exception);
    if (isa < Isa::kAvx512Bf16) EXPECT_THROW(resolve_bf16_compute(isa, Bf16Compute::kNative), std::exception);
    o.quantize_q8 = true;
    EXPECT_EQ(choose_weight_format(p.views, isa, o), WeightFormat::kQ8Block32);
  }
  EXPECT_EQ(bf16_compute_from_name("widen", "--bf16-compute"), Bf16Compute::kWiden);
  EXPECT_THROW(bf16_compute_from_name("fast", "--bf16-compute"), std::exception);
}

}  // namespace
}  // namespace hymoe::kernels
