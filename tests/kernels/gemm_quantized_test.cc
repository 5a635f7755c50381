// The compact fp8 block and mxfp4 panel formats (gemm_quantized.h): every code decoded exactly by the packed
// micro-kernels, the micro-kernels against their scalar references, the grouped FFN against the reference on the
// same views (awkward shapes, empty groups), the same bits for any thread count, the bytes per weight, refused
// NaN codes, gpt-oss's interleaved gate_up (row_step), and the portable path for views no panel format runs; and
// fp8's bf16-dot format (kFp8Block128Dot, where the ISA has AVX512_BF16) against its reference and against the
// grouped reference with bf16-rounded activations.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "fast_kernel_test_util.h"
#include "fp8_test_util.h"
#include "hymoe/error.h"
#include "hymoe/quant_decode.h"
#include "hymoe/threads.h"
#include "kernels/formats/gemm_quantized.h"
#include "kernels/ffn/grouped_ffn_impl.h"

namespace hymoe::kernels {
namespace {

using test::dot_error_bound;
using test::random_values;

using test::fp8::kNormalFp8Codes;
using test::fp8::normal_fp8_code;
using test::fp8::QuantMatrix;
using test::fp8::random_fp8;

// Random E2M1 codes and E8M0 scales around 2^-4 (weights of magnitude up to about 0.4).
QuantMatrix random_mxfp4(Rng& rng, int64_t n, int64_t k) {
  QuantMatrix m;
  m.codes.resize(static_cast<size_t>(n * k / 2));
  for (auto& c : m.codes) c = static_cast<uint8_t>(rng.below(256));
  m.scale_bytes.resize(static_cast<size_t>(n * k / 32));
  for (auto& s : m.scale_bytes) s = static_cast<uint8_t>(120 + rng.below(5));
  m.view = MatrixView{m.codes.data(), DType::kF32, WeightLayout::kOutIn, k, n};
  m.view.quant.scheme = QuantScheme::kMxfp4;
  m.view.quant.scales = m.scale_bytes.data();
  return m;
}

bool is_fp8(WeightFormat f) { return f == WeightFormat::kFp8Block128; }
// These tests are of the exact formats; mxfp4_int8_test.cc has MXFP4's int8 twin (what QuantCompute::kAuto runs).
GroupedFfnOptions exact_compute() {
  GroupedFfnOptions o;
  o.quant = QuantCompute::kExact;
  return o;
}
QuantMatrix random_quant(WeightFormat f, Rng& rng, int64_t n, int64_t k) {
  return is_fp8(f) ? random_fp8(rng, n, k) : random_mxfp4(rng, n, k);
}

constexpr WeightFormat kFormats[] = {WeightFormat::kFp8Block128, WeightFormat::kMxfp4Block32};

class QuantFormatTest : public test::IsaKernelsTest {};

// Every finite e4m3 code (both signs, the subnormals 0x01-0x07 and 0x81-0x87, +-0) under two scales, and every
// E2M1 code under the E8M0 scales 0 (2^-127, subnormal results), 1, 127 and 250: the micro-kernel with a one-hot
// activation row returns w(k, :) itself, which must be the scalar decoder's value to the bit. fp8 twice: with every
// code in each 128-k unit, and with only the normal codes (the kernels' faster decode).
TEST_P(QuantFormatTest, MicroKernelsDecodeEveryCodeExactly) {
  for (const auto& [format, normal_only] : {std::pair{WeightFormat::kFp8Block128, false},
                                           std::pair{WeightFormat::kFp8Block128, true},
                                           std::pair{WeightFormat::kMxfp4Block32, false}}) {
    const GemmFormat* f = ik_->format(format);
    ASSERT_NE(f, nullptr) << weight_format_operands(format);
    const int nr = f->nr, mr = f->mr;
    const int64_t k = is_fp8(format) ? 256 : 64;
    QuantMatrix q;
    q.view = MatrixView{nullptr, DType::kF32, WeightLayout::kOutIn, k, nr};
    if (is_fp8(format)) {
      q.codes.resize(static_cast<size_t>(nr * k));
      for (size_t i = 0; i < q.codes.size(); ++i)
        q.codes[i] = normal_only ? normal_fp8_code(static_cast<int64_t>(i))
                                 : static_cast<uint8_t>(i % 254 < 127 ? i % 254 : i % 254 + 1);
      q.scales = {0.75f, 0x1p-3f};  // block (0, 0) and (0, 1)
      q.view.quant = {QuantScheme::kFp8Block, 0, q.scales.data(), 128, 128};
    } else {
      q.codes.resize(static_cast<size_t>(nr * k / 2));
      for (size_t i = 0; i < q.codes.size(); ++i) q.codes[i] = static_cast<uint8_t>(i * 37 + 11);
      const uint8_t scales[] = {0, 1, 127, 250};  // 6 * 2^(254-127) would overflow f32
      q.scale_bytes.resize(static_cast<size_t>(nr * k / 32));
      for (size_t i = 0; i < q.scale_bytes.size(); ++i) q.scale_bytes[i] = scales[i % 4];
      q.view.quant.scheme = QuantScheme::kMxfp4;
      q.view.quant.scales = q.scale_bytes.data();
    }
    q.view.data = q.codes.data();
    const PackedMatrix b = pack_matrix(q.view, nr, format);
    std::vector<float> a(static_cast<size_t>(k * mr)), c(static_cast<size_t>(nr));
    for (int64_t kk = 0; kk < k; ++kk) {
      std::fill(a.begin(), a.end(), 0.0f);
      a[static_cast<size_t>(kk * mr)] = 1.0f;  // row 0 of the (k, mr) micro-panel is e_kk
      f->gemm(1, k, a.data(), b.data(), c.data(), nr, false, nullptr, 0);
      for (int j = 0; j < nr; ++j) {
        const float want = q.view.at(kk, j);
        ASSERT_EQ(std::memcmp(&c[static_cast<size_t>(j)], &want, 4) == 0 || (c[j] == 0 && want == 0), true)
            << f->name << " k " << kk << " column " << j << ": " << c[static_cast<size_t>(j)] << " vs " << want;
      }
    }
  }
}

// Every m in 1..MR, K around and across the units, with and without accumulate; the prefetch hint changes nothing.
TEST_P(QuantFormatTest, MicroKernelsMatchTheirReferences) {
  Rng rng(21);
  for (WeightFormat format : kFormats) {
    const GemmFormat* f = ik_->format(format);
    const int mr = f->mr, nr = f->nr;
    const std::vector<int64_t> kcs = is_fp8(format) ? std::vector<int64_t>{1, 5, 127, 128, 129, 256, 300}
                                                    : std::vector<int64_t>{32, 64, 96, 128, 256};
    for (int64_t kc : kcs) {
      const QuantMatrix q = random_quant(format, rng, nr, kc);
      const PackedMatrix b = pack_matrix(q.view, nr, format);
      const int64_t ldc = nr + 3;
      const auto a = random_values(rng, kc * mr);  // already a (kc, mr) micro-panel
      const auto c0 = random_values(rng, mr * ldc);
      for (int m = 1; m <= mr; ++m)
        for (bool acc : {false, true}) {
          std::vector<float> got = c0, want = c0, hinted = c0;
          f->gemm(m, kc, a.data(), b.data(), got.data(), ldc, acc, nullptr, 0);
          f->gemm(m, kc, a.data(), b.data(), hinted.data(), ldc, acc, b.data(), static_cast<int64_t>(b.bytes()));
          ASSERT_EQ(hinted, got) << f->name << " m=" << m << " kc=" << kc;
          // fp8's expanded form: the first micro-tile's call (here of another row count) leaves the decoded
          // weights, and both calls give the direct form's bits.
          ASSERT_EQ(f->gemm_expanding != nullptr, is_fp8(format)) << f->name;
          if (f->gemm_expanding) {
            std::vector<uint8_t> expanded(static_cast<size_t>(f->units(kc) * f->expanded_unit_bytes));
            std::vector<float> expanding = c0, from_expanded = c0, other = c0;
            f->gemm_expanding(mr + 1 - m, kc, a.data(), b.data(), other.data(), ldc, acc, nullptr, 0, expanded.data());
            f->gemm_expanded(m, kc, a.data(), expanded.data(), from_expanded.data(), ldc, acc, b.data(),
                             static_cast<int64_t>(b.bytes()));
            f->gemm_expanding(m, kc, a.data(), b.data(), expanding.data(), ldc, acc, nullptr, 0, expanded.data());
            ASSERT_EQ(0, std::memcmp(expanding.data(), got.data(), got.size() * sizeof(float)))
                << f->name << " expanding m=" << m << " kc=" << kc << " acc=" << acc;
            ASSERT_EQ(0, std::memcmp(from_expanded.data(), got.data(), got.size() * sizeof(float)))
                << f->name << " expanded m=" << m << " kc=" << kc << " acc=" << acc;
          }
          if (is_fp8(format)) gemm_fp8w_f32__ref(m, mr, nr, kc, a.data(), b.data(), want.data(), ldc, acc);
          else gemm_mxfp4w_f32__ref(m, mr, nr, kc, a.data(), b.data(), want.data(), ldc, acc);
          for (int i = 0; i < mr; ++i)
            for (int64_t j = 0; j < ldc; ++j) {
              const size_t at = static_cast<size_t>(i * ldc + j);
              if (i >= m || j >= nr) {
                ASSERT_EQ(got[at], c0[at]) << f->name << " wrote outside its tile";
                continue;
              }
              double abs_sum = acc ? std::abs(c0[at]) : 0.0;
              for (int64_t kk = 0; kk < kc; ++kk)
                abs_sum += std::abs(static_cast<double>(a[static_cast<size_t>(kk * mr + i)]) * q.view.at(kk, j));
              ASSERT_NEAR(got[at], want[at], dot_error_bound(kc + 1, abs_sum))
                  << f->name << " m=" << m << " kc=" << kc << " acc=" << acc << " at " << i << "," << j;
            }
        }
    }
  }
}

// The few-rows forms (m = 1..few_rows_max rows over kFewRowsPanels[m] panels, the decode and few-tokens case) give
// the bits of one m-row call per panel, with and without accumulate, for K around and across the units and N not
// a multiple of the panels (the last panel's padding columns); so does a few-rows call split at a K block (the
// driver's kKc), and it writes nothing outside its rows and panels.
TEST_P(QuantFormatTest, FewRowsFormsEqualTheirRowCalls) {
  Rng rng(31);
  for (WeightFormat format : kFormats) {
    const GemmFormat* f = ik_->format(format);
    ASSERT_NE(f->gemm_few, nullptr) << f->name;
    ASSERT_GE(f->few_rows_max, 1) << f->name;
    const int mr = f->mr, nr = f->nr;
    const std::vector<int64_t> ks = is_fp8(format) ? std::vector<int64_t>{1, 7, 128, 129, 300, 384}
                                                   : std::vector<int64_t>{32, 96, 160, 288};
    for (int m = 1; m <= f->few_rows_max; ++m)
      for (int64_t k : ks) {
        const int panels = kFewRowsPanels[m];
        const QuantMatrix q = random_quant(format, rng, panels * nr - 3, k);
        const PackedMatrix b = pack_matrix(q.view, nr, format);
        ASSERT_EQ(b.panels, panels);
        const int64_t ldc = panels * nr + 5;
        const auto a = random_values(rng, f->units(k) * f->a_unit_bytes() / 4);  // a (units * k_unit, mr) micro-panel
        const auto c0 = random_values(rng, mr * ldc);
        for (bool acc : {false, true}) {
          std::vector<float> few = c0, rows = c0, split = c0;
          f->gemm_few(m, k, a.data(), b.data(), b.panel_bytes(), few.data(), ldc, acc);
          for (int p = 0; p < panels; ++p)
            f->gemm(m, k, a.data(), b.buffer.data() + p * b.panel_bytes(), rows.data() + p * nr, ldc, acc, nullptr, 0);
          ASSERT_EQ(0, std::memcmp(few.data(), rows.data(), few.size() * sizeof(float)))
              << f->name << " m=" << m << " k=" << k << " acc=" << acc;
          const int64_t half = 128;
          if (k <= half) continue;
          const int64_t unit = k_unit(format);
          f->gemm_few(m, half, a.data(), b.data(), b.panel_bytes(), split.data(), ldc, acc);
          f->gemm_few(m, k - half, a.data() + half * mr, b.buffer.data() + half / unit * f->b_unit_bytes(),
                      b.panel_bytes(), split.data(), ldc, true);
          ASSERT_EQ(0, std::memcmp(split.data(), few.data(), few.size() * sizeof(float)))
              << f->name << " m=" << m << " k=" << k << " split at " << half;
        }
        // The rows' values moved: the kernels wrote the tile (and only it, which the memcmp above shares).
        std::vector<float> few = c0;
        f->gemm_few(m, k, a.data(), b.data(), b.panel_bytes(), few.data(), ldc, false);
        for (int i = 0; i < mr; ++i)
          for (int64_t j = 0; j < ldc; ++j) {
            const size_t at = static_cast<size_t>(i * ldc + j);
            if (i >= m || j >= panels * nr) ASSERT_EQ(few[at], c0[at]) << f->name << " wrote outside its tile";
          }
        std::vector<float> want(static_cast<size_t>(mr * nr));
        for (int p = 0; p < panels; ++p) {
          const uint8_t* panel = b.buffer.data() + p * b.panel_bytes();
          if (is_fp8(format)) gemm_fp8w_f32__ref(m, mr, nr, k, a.data(), panel, want.data(), nr, false);
          else gemm_mxfp4w_f32__ref(m, mr, nr, k, a.data(), panel, want.data(), nr, false);
          for (int i = 0; i < m; ++i)
            for (int j = 0; j < nr; ++j) {
              double abs_sum = 0;
              const int64_t col = p * nr + j;
              for (int64_t kk = 0; kk < k && col < q.view.n; ++kk)
                abs_sum += std::abs(static_cast<double>(a[static_cast<size_t>(kk * mr + i)]) * q.view.at(kk, col));
              ASSERT_NEAR(few[static_cast<size_t>(i * ldc + col)], want[static_cast<size_t>(i * nr + j)],
                          dot_error_bound(k, abs_sum))
                  << f->name << " m=" << m << " k=" << k << " at " << i << "," << col;
            }
        }
      }
  }
}

// A ragged problem in one quantized format; y = scale * ffn(x).
struct QuantProblem {
  GroupedFfnShape shape;
  std::vector<int64_t> offsets;
  std::vector<float> x, scale;
  std::vector<QuantMatrix> mats;
  std::vector<MlpWeightsView> views;

  QuantProblem(WeightFormat format, int64_t dim, int64_t hidden, const std::vector<int64_t>& rows, uint64_t seed) {
    shape = {static_cast<int64_t>(rows.size()), dim, hidden, Activation::kSwiGLU};
    offsets.assign(1, 0);
    for (int64_t r : rows) offsets.push_back(offsets.back() + r);
    Rng rng(seed);
    x = random_values(rng, offsets.back() * dim);
    scale = random_values(rng, offsets.back());
    mats.reserve(rows.size() * 3);
    for (size_t e = 0; e < rows.size(); ++e) {
      mats.push_back(random_quant(format, rng, hidden, dim));
      mats.push_back(random_quant(format, rng, hidden, dim));
      mats.push_back(random_quant(format, rng, dim, hidden));
      const size_t m = mats.size();
      views.push_back({mats[m - 3].view, mats[m - 2].view, mats[m - 1].view});
    }
  }
};

using Outputs = test::FfnOutputs;
Outputs run_ffn(const GroupedFfn& ffn, const QuantProblem& p) { return test::run_ffn_saving(ffn, p.offsets, p.x, p.scale); }

// got against the reference: gate and up within the f32 bound of their dot products; y within the f32 bound of
// the down projection plus the hidden values' own error carried through |w_down| (silu(g) u moves by at most
// 1.1 |u| dg + |silu(g)| du).
// With bf16_activations (the fp8 dot format against the rounded reference) a hidden value the two compute a few
// f32 ulps apart can round to neighbouring bf16 values before the down projection: one bf16 step, 2^-8 |h|, more.
void expect_matches_reference(const QuantProblem& p, const Outputs& got, const Outputs& want, const std::string& what,
                              bool bf16_activations = false) {
  const int64_t D = p.shape.dim, H = p.shape.hidden;
  for (int64_t e = 0; e < p.shape.num_groups; ++e) {
    const MlpWeightsView& w = p.views[static_cast<size_t>(e)];
    for (int64_t r = p.offsets[e]; r < p.offsets[e + 1]; ++r) {
      std::vector<double> h(static_cast<size_t>(H)), dh(static_cast<size_t>(H));
      for (int64_t j = 0; j < H; ++j) {
        double sg = 0, su = 0;
        for (int64_t d = 0; d < D; ++d) {
          const double xv = std::abs(p.x[static_cast<size_t>(r * D + d)]);
          sg += xv * std::abs(w.gate.at(d, j));
          su += xv * std::abs(w.up.at(d, j));
        }
        const size_t at = static_cast<size_t>(r * H + j);
        const double eg = dot_error_bound(D, sg), eu = dot_error_bound(D, su);
        ASSERT_NEAR(got.gate[at], want.gate[at], eg) << what << " gate row " << r << " column " << j;
        ASSERT_NEAR(got.up[at], want.up[at], eu) << what << " up row " << r << " column " << j;
        const double g = want.gate[at], u = want.up[at];
        h[static_cast<size_t>(j)] = silu(g) * u;
        dh[static_cast<size_t>(j)] = 1.1 * std::abs(u) * eg + std::abs(silu(g)) * eu + 8 * test::kF32Eps * std::abs(h[j]) +
                                     (bf16_activations ? 0x1p-8 * std::abs(h[j]) : 0.0);
      }
      const double s = std::abs(p.scale[static_cast<size_t>(r)]);
      for (int64_t d = 0; d < D; ++d) {
        double mag = 0, prop = 0;
        for (int64_t j = 0; j < H; ++j) {
          const double wd = std::abs(w.down.at(j, d));
          mag += (std::abs(h[static_cast<size_t>(j)]) + dh[static_cast<size_t>(j)]) * wd;
          prop += dh[static_cast<size_t>(j)] * wd;
        }
        const double bound = s * (dot_error_bound(H + 1, mag) + prop) + 1e-30;
        ASSERT_NEAR(got.y[static_cast<size_t>(r * D + d)], want.y[static_cast<size_t>(r * D + d)], bound)
            << what << " y row " << r << " column " << d;
      }
    }
  }
}

// N = 1, primes, K of 128/256/384 and unaligned ones (fp8 pads K to its 128-unit; mxfp4 needs K % 32 == 0, so its
// N = 1 case is the micro-kernel's), zero-token experts, 1-row and 50-row groups.
TEST_P(QuantFormatTest, GroupedFfnMatchesTheReference) {
  const std::vector<std::vector<int64_t>> batches = {{1}, {0, 50, 0, 1}, {3, 0, 7}};
  uint64_t seed = 500;
  for (WeightFormat format : kFormats) {
    const std::vector<std::pair<int64_t, int64_t>> dims =
        is_fp8(format) ? std::vector<std::pair<int64_t, int64_t>>{{128, 1}, {256, 13}, {384, 131}, {131, 256}}
                       : std::vector<std::pair<int64_t, int64_t>>{{32, 32}, {128, 224}, {384, 96}, {96, 256}};
    for (auto [dim, hidden] : dims)
      for (const auto& rows : batches) {
        const QuantProblem p(format, dim, hidden, rows, seed++);
        const auto fast = make_grouped_ffn(p.shape, p.views, GetParam(), exact_compute());
        ASSERT_NE(std::string(fast->name()).find(weight_format_operands(format)), std::string::npos) << fast->name();
        const auto ref = make_grouped_ffn_ref(p.shape, p.views);
        expect_matches_reference(p, run_ffn(*fast, p), run_ffn(*ref, p),
                                 std::string(fast->name()) + " dim " + std::to_string(dim) + " hidden " + std::to_string(hidden));
      }
  }
}

TEST_P(QuantFormatTest, IdenticalBitsForOneAndTwoThreads) {
  const int before = num_threads();
  for (WeightFormat format : kFormats) {
    const QuantProblem p(format, 256, 160, {5, 0, 50, 1, 120, 9}, 77);
    const auto fast = make_grouped_ffn(p.shape, p.views, GetParam(), exact_compute());
    set_num_threads(1);
    const Outputs one = run_ffn(*fast, p);
    set_num_threads(2);
    const Outputs two = run_ffn(*fast, p);
    ASSERT_EQ(0, std::memcmp(one.y.data(), two.y.data(), one.y.size() * sizeof(float))) << fast->name();
  }
  set_num_threads(before);
}

// Exact fp8 on the AVX-512 levels (12 x 32 tiles) and on AVX2 (4 x 16): every C element is the same f32 FMA chain
// in increasing k, so the layer's bits are the same, across 1-row, few-rows and expanded (50- and 120-row) groups.
TEST_P(QuantFormatTest, ExactFp8HasTheBitsOfTheAvx2Kernel) {
  if (GetParam() <= Isa::kAvx2) GTEST_SKIP() << "the AVX2 kernel itself";
  ASSERT_EQ(std::string(ik_->format(WeightFormat::kFp8Block128)->name), "gemm_fp8w_f32_12x32__avx512");
  for (auto [dim, hidden] : {std::pair<int64_t, int64_t>{256, 160}, {384, 131}}) {
    const QuantProblem p(WeightFormat::kFp8Block128, dim, hidden, {5, 0, 50, 1, 120, 2, 3}, 79);
    const Outputs wide = run_ffn(*make_grouped_ffn(p.shape, p.views, GetParam(), exact_compute()), p);
    const Outputs avx2 = run_ffn(*make_grouped_ffn(p.shape, p.views, Isa::kAvx2, exact_compute()), p);
    ASSERT_EQ(0, std::memcmp(wide.gate.data(), avx2.gate.data(), wide.gate.size() * sizeof(float))) << dim;
    ASSERT_EQ(0, std::memcmp(wide.y.data(), avx2.y.data(), wide.y.size() * sizeof(float))) << dim;
  }
}

// The fp8 bf16-dot format on the ISAs that have it (AVX512_BF16): every code decoded exactly, the micro-kernel and
// its few-rows form against the reference (fp8_test_util.h); the ISAs without it have no such format, and
// QuantCompute never picks it there.
TEST_P(QuantFormatTest, Fp8DotFormatWhereTheIsaHasIt) {
  const GemmFormat* f = ik_->format(WeightFormat::kFp8Block128Dot);
  EXPECT_EQ(fp8_rounds_activations(GetParam(), QuantCompute::kAuto), f != nullptr);
  EXPECT_EQ(fp8_rounds_activations(GetParam(), QuantCompute::kInt8), f != nullptr);
  EXPECT_FALSE(fp8_rounds_activations(GetParam(), QuantCompute::kExact));
  if (!f) {
    EXPECT_LT(GetParam(), Isa::kAvx512Bf16);
    return;
  }
  EXPECT_EQ(std::string(f->name), "gemm_fp8w_bf16_10x32__avx512bf16");
  test::fp8::expect_fp8_dot_decodes_every_code_exactly(*f);
  Rng rng(41);
  test::fp8::expect_fp8_dot_kernels_match_reference(*f, rng);
}

// The grouped FFN on the bf16-dot fp8 format (the default where the ISA has it) against the reference with
// bf16-rounded activations and exact weights, on the awkward shapes of GroupedFfnMatchesTheReference; the same
// bits for one and two threads. An ISA below AVX512_BF16 has no such format (as Fp8DotFormatWhereTheIsaHasIt
// checks) and nothing to run; not a skip, which the emulated AVX-512 run counts as a test that did not run.
TEST_P(QuantFormatTest, Fp8DotGroupedFfnMatchesTheRoundedReference) {
  if (!ik_->format(WeightFormat::kFp8Block128Dot)) {
    EXPECT_LT(GetParam(), Isa::kAvx512Bf16);
    return;
  }
  GroupedFfnOptions o;
  o.quant = QuantCompute::kAuto;
  uint64_t seed = 900;
  for (auto [dim, hidden] : std::vector<std::pair<int64_t, int64_t>>{{128, 1}, {256, 13}, {384, 131}, {131, 256}})
    for (const std::vector<int64_t>& rows : std::vector<std::vector<int64_t>>{{1}, {0, 50, 0, 1}, {3, 0, 7}}) {
      const QuantProblem p(WeightFormat::kFp8Block128, dim, hidden, rows, seed++);
      const auto fast = make_grouped_ffn(p.shape, p.views, GetParam(), o);
      ASSERT_NE(std::string(fast->name()).find("fp8w_bf16"), std::string::npos) << fast->name();
      const auto ref = make_grouped_ffn_ref(p.shape, p.views, RoundingModel::kBf16Activations);
      expect_matches_reference(p, run_ffn(*fast, p), run_ffn(*ref, p),
                               std::string(fast->name()) + " dim " + std::to_string(dim) + " hidden " + std::to_string(hidden),
                               true);
    }
  const QuantProblem p(WeightFormat::kFp8Block128, 256, 160, {5, 0, 50, 1, 120, 9}, 78);
  const auto fast = make_grouped_ffn(p.shape, p.views, GetParam(), o);
  const int before = num_threads();
  set_num_threads(1);
  const Outputs one = run_ffn(*fast, p);
  set_num_threads(2);
  const Outputs two = run_ffn(*fast, p);
  set_num_threads(before);
  ASSERT_EQ(0, std::memcmp(one.y.data(), two.y.data(), one.y.size() * sizeof(float))) << fast->name();
}

INSTANTIATE_TEST_SUITE_P(Isas, QuantFormatTest,
                         ::testing::Values(Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Vnni, Isa::kAvx512Bf16),
                         test::isa_param_name);

// Bytes per weight as documented: fp8 (128 + 4) / 128 = 1.03125, mxfp4 (16 + 1) / 32 = 0.53125, for N a multiple of
// the panel width and K of the unit.
TEST(QuantFormatPack, BytesPerWeightAsDocumented) {
  Rng rng(3);
  const QuantMatrix fp8 = random_fp8(rng, 64, 512), mx = random_mxfp4(rng, 64, 512);
  const PackedMatrix a = pack_matrix(fp8.view, 16, WeightFormat::kFp8Block128);
  const PackedMatrix b = pack_matrix(mx.view, 16, WeightFormat::kMxfp4Block32);
  EXPECT_DOUBLE_EQ(static_cast<double>(a.bytes()) / (64 * 512), 1.03125);
  EXPECT_DOUBLE_EQ(static_cast<double>(b.bytes()) / (64 * 512), 0.53125);
}

// NaN codes are refused at load with the code and its place named; so is the E8M0 NaN scale.
TEST(QuantFormatPack, NanCodesAreRefused) {
  Rng rng(4);
  QuantMatrix fp8 = random_fp8(rng, 20, 256);
  fp8.codes[static_cast<size_t>(3 * 256 + 200)] = 0xff;
  try {
    pack_matrix(fp8.view, 16, WeightFormat::kFp8Block128);
    FAIL() << "a NaN code was packed";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("0xff (NaN in e4m3fn) at output row 3, input 200"), std::string::npos) << m;
  }
  QuantMatrix mx = random_mxfp4(rng, 20, 64);
  mx.scale_bytes[5] = 255;  // row 2, group 1
  try {
    pack_matrix(mx.view, 16, WeightFormat::kMxfp4Block32);
    FAIL() << "a NaN scale was packed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("E8M0 scale 255 (NaN) at output row 2, group 1"), std::string::npos) << e.what();
  }
}

// gpt-oss's gate_up_proj: (2I, K/32, 16) blocks, gate in the even output rows and up in the odd ones. Two views of
// row_step 2 read the same elements as de-interleaved copies, and the packed FFN built from them gives the same
// bits as the one built from the copies.
TEST(QuantFormatPack, InterleavedGateUpByRowStep) {
  Rng rng(5);
  const int64_t I = 64, D = 96;
  const QuantMatrix gu = random_mxfp4(rng, 2 * I, D);
  const QuantMatrix dn = random_mxfp4(rng, D, I);
  MatrixView gate = gu.view, up = gu.view;
  gate.n = up.n = I;
  gate.quant.row_step = up.quant.row_step = 2;
  up.data = gu.codes.data() + D / 2;
  up.quant.scales = gu.scale_bytes.data() + D / 32;
  // The de-interleaved copies.
  QuantMatrix g2, u2;
  for (int64_t i = 0; i < I; ++i)
    for (auto [q, r] : {std::pair{&g2, 2 * i}, std::pair{&u2, 2 * i + 1}}) {
      q->codes.insert(q->codes.end(), gu.codes.begin() + r * D / 2, gu.codes.begin() + (r + 1) * D / 2);
      q->scale_bytes.insert(q->scale_bytes.end(), gu.scale_bytes.begin() + r * D / 32, gu.scale_bytes.begin() + (r + 1) * D / 32);
    }
  for (QuantMatrix* q : {&g2, &u2}) {
    q->view = MatrixView{q->codes.data(), DType::kF32, WeightLayout::kOutIn, D, I};
    q->view.quant.scheme = QuantScheme::kMxfp4;
    q->view.quant.scales = q->scale_bytes.data();
  }
  for (int64_t i = 0; i < I; ++i)
    for (int64_t kk = 0; kk < D; ++kk) {
      ASSERT_EQ(gate.at(kk, i), mxfp4_value_ref(gu.codes.data(), gu.scale_bytes.data(), D, 2 * i, kk));
      ASSERT_EQ(up.at(kk, i), mxfp4_value_ref(gu.codes.data(), gu.scale_bytes.data(), D, 2 * i + 1, kk));
    }
  std::vector<float> row(static_cast<size_t>(D)), row2(static_cast<size_t>(D));
  up.decode_quantized_row(7, row.data());
  u2.view.decode_quantized_row(7, row2.data());
  EXPECT_EQ(row, row2);
  EXPECT_EQ(pack_gate_up(gate, up, 16, WeightFormat::kMxfp4Block32).buffer,
            pack_gate_up(g2.view, u2.view, 16, WeightFormat::kMxfp4Block32).buffer);
  // The FFN from the strided views: the same bits as from the copies, and the reference's values.
  QuantProblem p(WeightFormat::kMxfp4Block32, D, I, {3, 0, 6}, 12);
  QuantProblem copies = p;
  for (auto& v : p.views) v = {gate, up, dn.view};
  for (auto& v : copies.views) v = {g2.view, u2.view, dn.view};
  const Outputs strided = run_ffn(*make_grouped_ffn(p.shape, p.views, active_isa(), exact_compute()), p);
  EXPECT_EQ(strided.y, run_ffn(*make_grouped_ffn(copies.shape, copies.views, active_isa(), exact_compute()), copies).y);
  expect_matches_reference(p, strided, run_ffn(*make_grouped_ffn_ref(p.shape, p.views), p), "row_step 2");
}

// The scalar ISA runs quantized views through the portable path (decoded to f32 rows), and so do fp8 blocks whose
// k extent is not a multiple of 128 on any ISA (the conformance checkpoint's [16, 16] blocks).
TEST(QuantFormatFallback, PortablePathRunsOtherViews) {
  const QuantProblem p(WeightFormat::kMxfp4Block32, 64, 96, {2, 0, 5}, 9);
  const auto scalar = make_grouped_ffn(p.shape, p.views, Isa::kScalar, exact_compute());
  EXPECT_NE(std::string(scalar->name()).find("portable"), std::string::npos) << scalar->name();
  const auto ref = make_grouped_ffn_ref(p.shape, p.views);
  expect_matches_reference(p, run_ffn(*scalar, p), run_ffn(*ref, p), scalar->name());

  QuantProblem q(WeightFormat::kFp8Block128, 64, 48, {3, 1}, 10);
  Rng rng(11);
  for (auto& m : q.mats) m = random_fp8(rng, m.view.n, m.view.k, 16, 16);
  for (size_t e = 0; e < q.views.size(); ++e) q.views[e] = {q.mats[3 * e].view, q.mats[3 * e + 1].view, q.mats[3 * e + 2].view};
  const auto fast = make_grouped_ffn(q.shape, q.views, active_isa());
  EXPECT_NE(std::string(fast->name()).find("portable"), std::string::npos) << fast->name();
  const auto ref16 = make_grouped_ffn_ref(q.shape, q.views);
  expect_matches_reference(q, run_ffn(*fast, q), run_ffn(*ref16, q), fast->name());
}

}  // namespace
}  // namespace hymoe::kernels
