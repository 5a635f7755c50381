// The GGUF panel formats (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K): the block split they store against the reference
// decoders (bit for bit), the repacked panels against the views, the micro-kernels against their scalar
// reference on every ISA this CPU has, and the grouped FFN against make_grouped_ffn_ref (which reads the views
// through at()) with the f32 bounds: the weights are exact, so only f32 accumulation differs. Blocks are random
// bytes with chosen d/dmin (negative, zero), so every code, every 6-bit K-quant scale and min (most above 15:
// the packed high bits matter), every Q6_K scale sign and every Q5_K fifth bit occurs.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include <bit>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "fast_kernel_test_util.h"
#include "gguf_test_util.h"
#include "hymoe/error.h"
#include "hymoe/ggml_type.h"
#include "hymoe/quant_encode.h"
#include "hymoe/quant_formats.h"
#include "hymoe/threads.h"
#include "kernels/ffn/activation.h"
#include "kernels/formats/gemm_kernels.h"
#include "kernels/ffn/grouped_ffn_impl.h"

namespace hymoe::kernels {
namespace {

// These tests are of the exact formats (QuantCompute::kExact); gguf_int8_test.cc has their int8 twins'.
GroupedFfnOptions exact() {
  GroupedFfnOptions o;
  o.quant = QuantCompute::kExact;
  return o;
}

using hymoe::test::dot_error_bound;
using namespace hymoe::test::gguf;

TEST(GgufBlockCodes, ScaleTimesCodeIsTheReferenceValueBitForBit) {
  Rng rng(1);
  for (WeightFormat f : kGgufFormats) {
    const uint32_t type = type_of(f);
    const GgmlTypeTraits& t = *ggml_type_traits(type);
    const int sub = ggml_sub_block_values(type);
    std::vector<std::byte> block(t.block_bytes);
    int high_scales = 0, negative_values = 0;
    for (int trial = 0; trial < 200; ++trial) {
      random_block(rng, type, block.data());
      std::vector<float> want(t.block_values);
      dequantize_row_ref(type, block.data(), want.data(), t.block_values);
      GgmlBlockCodes parts;
      split_block_ref(type, block.data(), &parts);
      for (uint32_t i = 0; i < t.block_values; ++i) {
        const int8_t* values = gguf_block_format_of_type(type)->values;
        const float s = parts.scale[i / sub], c = values ? values[parts.code[i]] : parts.code[i];
        const float got = ggml_block_has_offsets(type) ? std::fma(s, c, parts.offset[i / sub]) : s * c;
        ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want[i])) << t.name << " value " << i;
        negative_values += want[i] < 0;
      }
      const bool six_bit_scales = type == static_cast<uint32_t>(GgmlType::kQ4_K) || type == static_cast<uint32_t>(GgmlType::kQ5_K);
      if (six_bit_scales) {
        const float d = f16_to_float(*reinterpret_cast<const uint16_t*>(block.data()));
        for (int j = 4; j < 8; ++j) high_scales += d != 0 && std::abs(parts.scale[j] / d) >= 16;
      }
    }
    EXPECT_GT(negative_values, 1000) << t.name;
    if (type == static_cast<uint32_t>(GgmlType::kQ4_K) || type == static_cast<uint32_t>(GgmlType::kQ5_K)) {
      EXPECT_GT(high_scales, 200) << t.name;
    }
  }
}

TEST(GgufBlockCodes, UnsupportedTypesAreNamed) {
  EXPECT_EQ(ggml_sub_block_values(static_cast<uint32_t>(GgmlType::kF16)), 0);
  WeightFormat f;
  EXPECT_FALSE(gguf_weight_format(static_cast<uint32_t>(GgmlType::kQ8_1), &f));
  EXPECT_FALSE(gguf_weight_format(40, &f));  // NVFP4
  EXPECT_FALSE(gguf_weight_format(static_cast<uint32_t>(GgmlType::kF16), &f));
  ASSERT_TRUE(gguf_weight_format(static_cast<uint32_t>(GgmlType::kQ6_K), &f));
  EXPECT_EQ(f, WeightFormat::kGgmlQ6_K);
}

// The simple encoders write blocks that decode close to their input (within a fraction of the block's range).
TEST(GgufEncode, SimpleQuantizersRoundTripWithinTheirStep) {
  Rng rng(2);
  const int64_t n = 1024;
  std::vector<float> x(n);
  for (float& v : x) v = static_cast<float>(rng.normal());
  for (WeightFormat f : kGgufFormats) {
    const uint32_t type = type_of(f);
    const GgmlTypeTraits& t = *ggml_type_traits(type);
    std::vector<std::byte> bytes(static_cast<size_t>(n / t.block_values * t.block_bytes));
    quantize_row_simple(type, x.data(), n, bytes.data());
    std::vector<float> back(n);
    dequantize_row_ref(type, bytes.data(), back.data(), n);
    // Levels across a value range of about 8: 2^code_bits (255 for Q8_0's symmetric codes), or the codes the type
    // has where its panels keep them in more bits (Q2_K 4, Q3_K 8, the ternary types 3).
    const int bits = gguf_block_format(f)->code_bits;
    const GgmlType g = static_cast<GgmlType>(type);
    // The IQ types: a group's values lie jointly on the grid, so fewer effective levels (IQ1 2, IQ2 4, IQ3 6).
    const bool iq1 = g == GgmlType::kIQ1_S || g == GgmlType::kIQ1_M;
    const bool iq2 = g == GgmlType::kIQ2_XXS || g == GgmlType::kIQ2_XS || g == GgmlType::kIQ2_S;
    const bool iq3 = g == GgmlType::kIQ3_XXS || g == GgmlType::kIQ3_S;
    const double levels = g == GgmlType::kQ2_K ? 4 : g == GgmlType::kQ3_K ? 8
                          : g == GgmlType::kTQ1_0 || g == GgmlType::kTQ2_0 ? 3 : iq1 ? 2 : iq2 ? 4 : iq3 ? 6
                          : bits == 8 ? 255 : 1 << bits;
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(static_cast<double>(back[i]) - x[i]));
    EXPECT_LT(worst, 8.0 / levels) << t.name;
    EXPECT_GT(worst, 0.0) << t.name;
  }
  // All zeros encode to zero blocks.
  std::vector<float> zeros(256, 0.0f), back(256, 1.0f);
  std::vector<std::byte> bytes(210 * 1);
  quantize_row_simple(static_cast<uint32_t>(GgmlType::kQ6_K), zeros.data(), 256, bytes.data());
  dequantize_row_ref(static_cast<uint32_t>(GgmlType::kQ6_K), bytes.data(), back.data(), 256);
  for (float v : back) EXPECT_EQ(v, 0.0f);
}

// Panels hold every weight exactly (padding columns zero), the bytes the layout says per weight (N a multiple of
// NR; docs/kernels.md, "Formats").
TEST(GgufPack, PanelsHoldTheExactWeightsInTheDocumentedBytes) {
  Rng rng(3);
  const int nr = 16;
  const std::map<std::string, double> documented = {{"Q8_0", 1.125}, {"Q4_0", 0.625}, {"Q4_1", 0.75},
                                                    {"Q5_0", 0.75},  {"Q5_1", 0.875}, {"Q4_K", 0.75},
                                                    {"Q5_K", 0.875}, {"Q6_K", 1.0},  {"IQ4_NL", 0.625},
                                                    {"IQ4_XS", 0.625},
                                                    {"Q2_K", 1.0},   {"Q3_K", 0.75}, {"TQ1_0", 0.625},
                                                    {"TQ2_0", 0.625},
                                                    // The grid types keep their blocks: the file's bytes.
                                                    {"IQ2_XXS", 66 / 256.0}, {"IQ2_XS", 74 / 256.0},
                                                    {"IQ2_S", 82 / 256.0},   {"IQ3_XXS", 98 / 256.0},
                                                    {"IQ3_S", 110 / 256.0},  {"IQ1_S", 50 / 256.0},
                                                    {"IQ1_M", 56 / 256.0}};
  for (const WeightFormat f : kGgufFormats) {
    const std::string type = gguf_block_format(f)->type_name;
    ASSERT_TRUE(documented.contains(type)) << type << " has no documented size here";
    for (int64_t blocks : {1, 3})
      for (int64_t n : {1, 7, 17, 32}) {
        const int64_t k = blocks * block_values(f);
        const GgufMatrix m(rng, f, k, n);
        const std::vector<float> want = decoded(m.view);
        const PackedMatrix p = pack_matrix(m.view, nr);
        ASSERT_EQ(p.format, f);
        const int64_t panels = (n + nr - 1) / nr;
        ASSERT_EQ(p.bytes(), static_cast<size_t>(panels * k / k_unit(f) * weight_unit_bytes(f, nr)));
        if (n % nr == 0) {
          EXPECT_DOUBLE_EQ(static_cast<double>(p.bytes()) / static_cast<double>(k * n), documented.at(type));
        }
        for (int64_t col = 0; col < panels * nr; ++col)
          for (int64_t kk = 0; kk < k; ++kk) {
            const float got = gguf_panel_weight(f, p.buffer.data() + col / nr * p.panel_bytes(), nr, kk,
                                                static_cast<int>(col % nr));
            const float w = col < n ? want[static_cast<size_t>(kk * n + col)] : 0.0f;
            ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(w))
                << weight_format_operands(f) << " k " << kk << " col " << col << " n " << n;
          }
      }
  }
}

TEST(GgufPack, GateUpPanelsInterleaveHalfPanels) {
  Rng rng(4);
  const int nr = 16, half = nr / 2;
  const WeightFormat f = WeightFormat::kGgmlQ4_K;
  const GgufMatrix gate(rng, f, 256, 20), up(rng, f, 256, 20);
  const std::vector<float> g = decoded(gate.view), u = decoded(up.view);
  const PackedMatrix p = pack_gate_up(gate.view, up.view, nr);
  ASSERT_EQ(p.panels, 3);
  for (int64_t pi = 0; pi < p.panels; ++pi)
    for (int j = 0; j < nr; ++j) {
      const int64_t col = pi * half + j % half;
      for (int64_t kk = 0; kk < 256; kk += 17) {
        const float want = col >= 20 ? 0.0f : (j < half ? g : u)[static_cast<size_t>(kk * 20 + col)];
        EXPECT_EQ(gguf_panel_weight(f, p.buffer.data() + pi * p.panel_bytes(), nr, kk, j), want);
      }
    }
}

class GgufKernelTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!hymoe::test::isa_supported(GetParam())) GTEST_SKIP() << "CPU lacks " << isa_name(GetParam());
  }
};

// Each micro-kernel against the reference on m = 1..MR rows and K of one block and several; splitting K at the
// driver's block (accumulate) and the one-row-over-4-panels form give the same bits as one call.
TEST_P(GgufKernelTest, MicroKernelsMatchTheReference) {
  const IsaKernels& ik = *isa_kernels(GetParam());
  Rng rng(5);
  for (WeightFormat fmt : kGgufFormats) {
    const GemmFormat* f = ik.format(fmt);
    ASSERT_NE(f, nullptr) << weight_format_operands(fmt);
    const int nr = f->nr, mr = f->mr, panels = kFewRowsPanels[1];
    for (int64_t blocks : {1, 2}) {
      const int64_t k = blocks * std::max<int64_t>(block_values(fmt), 256);  // 256 or 512: K blocks of 128 split it
      const GgufMatrix m(rng, fmt, k, nr * panels - 3);
      const PackedMatrix p = pack_matrix(m.view, nr, fmt);
      ASSERT_EQ(p.panels, panels);
      for (int rows = 1; rows <= mr; ++rows) {
        const std::vector<float> x = hymoe::test::random_values(rng, rows * k);
        std::vector<uint8_t> a(static_cast<size_t>(f->units(k) * f->a_unit_bytes()));
        f->pack_a(x.data(), k, nullptr, rows, k, mr, a.data());
        std::vector<float> got(static_cast<size_t>(rows * nr)), split(got.size()), want(got.size());
        f->gemm(rows, k, a.data(), p.data(), got.data(), nr, false, nullptr, 0);
        gemm_gguf_f32__ref(fmt, rows, mr, nr, k, a.data(), p.data(), want.data(), nr, false);
        for (int i = 0; i < rows; ++i)
          for (int j = 0; j < nr; ++j) {
            double abs_sum = 0;
            for (int64_t kk = 0; kk < k; ++kk)
              abs_sum += std::abs(x[static_cast<size_t>(i * k + kk)] * gguf_panel_weight(fmt, p.buffer.data(), nr, kk, j));
            const size_t at = static_cast<size_t>(i * nr + j);
            ASSERT_NEAR(got[at], want[at], dot_error_bound(k, abs_sum)) << f->name << " rows " << rows << " k " << k;
          }
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
}

struct FfnCase {
  WeightFormat first, down;
  int64_t D, H;
};

void expect_ffn_matches_ref(Isa isa, const FfnCase& c) {
  Rng rng(6);
  const std::vector<int64_t> sizes{0, 1, 50, 3, 0, 7};
  const int64_t G = static_cast<int64_t>(sizes.size());
  const GgufExperts experts(rng, G, c.D, c.H, c.first, c.down);
  const GroupedFfnShape shape{G, c.D, c.H, Activation::kSwiGLU};
  std::vector<int64_t> offsets{0};
  for (int64_t n : sizes) offsets.push_back(offsets.back() + n);
  const int64_t R = offsets.back();
  const std::vector<float> x = hymoe::test::random_values(rng, R * c.D), scale = hymoe::test::random_values(rng, R);
  const auto ffn = make_grouped_ffn(shape, experts.views, isa, exact());
  const auto ref = make_grouped_ffn_ref(shape, experts.views);
  std::vector<float> y(static_cast<size_t>(R * c.D)), want(y.size());
  GroupedFfnArgs args{offsets.data(), x.data(), scale.data(), want.data()};
  ref->run(args);
  args.y = y.data();
  ffn->run(args);
  // First-order bound on |fast - exact| per output, as grouped_ffn_fast_test derives it: gate/up dot products of
  // length D round, SiLU adds a few ulp (|silu'| <= 1.1), the down dot product of length H rounds, the scale once
  // more; doubled for the second-order terms. The weights are exact, so nothing else differs.
  const int64_t D = c.D, H = c.H;
  double worst_ratio = 0, max_y = 0;
  for (int64_t g = 0; g < G; ++g) {
    const MlpWeightsView& e = experts.views[static_cast<size_t>(g)];
    const std::vector<float> wg = decoded(e.gate), wu = decoded(e.up), wd = decoded(e.down);  // (K, N)
    for (int64_t r = offsets[g]; r < offsets[g + 1]; ++r) {
      std::vector<double> hid(H), dhid(H);
      for (int64_t h = 0; h < H; ++h) {
        double gv = 0, uv = 0, ga = 0, ua = 0;
        for (int64_t d = 0; d < D; ++d) {
          const double xv = x[static_cast<size_t>(r * D + d)];
          gv += xv * wg[static_cast<size_t>(d * H + h)];
          uv += xv * wu[static_cast<size_t>(d * H + h)];
          ga += std::abs(xv * wg[static_cast<size_t>(d * H + h)]);
          ua += std::abs(xv * wu[static_cast<size_t>(d * H + h)]);
        }
        const double a = silu(gv) * uv;
        hid[static_cast<size_t>(h)] = std::abs(a);
        dhid[static_cast<size_t>(h)] =
            1.1 * dot_error_bound(D, ga) * std::abs(uv) + std::abs(silu(gv)) * dot_error_bound(D, ua) + 8 * hymoe::test::kF32Eps * std::abs(a);
      }
      for (int64_t d = 0; d < D; ++d) {
        double mag = 0, prop = 0;
        for (int64_t h = 0; h < H; ++h) {
          const double w = std::abs(wd[static_cast<size_t>(h * D + d)]);
          mag += hid[static_cast<size_t>(h)] * w;
          prop += dhid[static_cast<size_t>(h)] * w;
        }
        const double s = std::abs(scale[static_cast<size_t>(r)]);
        const double bound = 2 * (s * (dot_error_bound(H, mag) + prop) + hymoe::test::kF32Eps * s * mag) + 1e-30;
        const size_t i = static_cast<size_t>(r * D + d);
        worst_ratio = std::max(worst_ratio, std::abs(static_cast<double>(y[i]) - want[i]) / bound);
        max_y = std::max(max_y, std::abs(static_cast<double>(want[i])));
      }
    }
  }
  EXPECT_LE(worst_ratio, 1.0) << ffn->name();
  EXPECT_GT(max_y, 0.0) << ffn->name();

  expect_same_bits_on_1_and_2_threads(*ffn, args, y.size());
}

// One case per panel form the driver runs (units with f16 factors, compact factors, the super-block form, the
// grid types' expanded form) and per fallback layout: these run on every ISA, under the emulated AVX-512 run too.
const FfnCase kFfnFormCases[] = {
    {WeightFormat::kGgmlQ8_0, WeightFormat::kGgmlQ8_0, 32, 96},    // K of one block (gate/up)
    {WeightFormat::kGgmlQ4_0, WeightFormat::kGgmlQ4_0, 96, 64},
    {WeightFormat::kGgmlQ4_K, WeightFormat::kGgmlQ6_K, 256, 256},  // Q4_K_M: gate/up Q4_K, down Q6_K
    {WeightFormat::kGgmlQ4_K, WeightFormat::kGgmlQ5_0, 256, 96},   // Q4_K_M where H is no multiple of 256
    {WeightFormat::kGgmlIQ4_XS, WeightFormat::kGgmlIQ4_NL, 256, 96},  // IQ4_XS files: IQ4_NL where H is no multiple of 256
    {WeightFormat::kGgmlQ2_K, WeightFormat::kGgmlQ3_K, 256, 256},     // Q2_K files: down Q3_K
    {WeightFormat::kGgmlTQ2_0, WeightFormat::kGgmlQ4_0, 256, 160},    // TQ files: Q4_0 where H is no multiple of 256
    {WeightFormat::kGgmlIQ1_M, WeightFormat::kGgmlQ4_0, 256, 96},     // IQ1_M files where H is no multiple of 256
};

// Every other type, and K or H of several super-blocks: the same forms, so the emulated AVX-512 run leaves these
// out (its micro-kernel test still runs every type's AVX-512 kernel).
const FfnCase kFfnTypeCases[] = {
    {WeightFormat::kGgmlQ4_K, WeightFormat::kGgmlQ4_K, 256, 512},  // down of two super-blocks
    {WeightFormat::kGgmlQ5_K, WeightFormat::kGgmlQ5_K, 512, 256},
    {WeightFormat::kGgmlQ6_K, WeightFormat::kGgmlQ6_K, 256, 256},
    {WeightFormat::kGgmlQ8_0, WeightFormat::kGgmlQ4_0, 64, 96},
    {WeightFormat::kGgmlQ4_1, WeightFormat::kGgmlQ4_1, 96, 64},
    {WeightFormat::kGgmlQ5_0, WeightFormat::kGgmlQ5_0, 64, 96},
    {WeightFormat::kGgmlQ5_1, WeightFormat::kGgmlQ5_1, 32, 96},
    {WeightFormat::kGgmlIQ4_NL, WeightFormat::kGgmlIQ4_NL, 64, 96},
    {WeightFormat::kGgmlIQ4_XS, WeightFormat::kGgmlIQ4_XS, 512, 256},
    {WeightFormat::kGgmlQ3_K, WeightFormat::kGgmlQ4_0, 256, 96},      // Q3_K files where H is no multiple of 256
    {WeightFormat::kGgmlTQ1_0, WeightFormat::kGgmlTQ2_0, 512, 256},
    {WeightFormat::kGgmlIQ2_XXS, WeightFormat::kGgmlIQ2_XS, 512, 256},  // grid types: blocks expanded per unit
    {WeightFormat::kGgmlIQ2_S, WeightFormat::kGgmlIQ3_XXS, 256, 512},
    {WeightFormat::kGgmlIQ3_S, WeightFormat::kGgmlIQ1_S, 256, 256},
};

TEST_P(GgufKernelTest, GroupedFfnMatchesTheReference) {
  for (const FfnCase& c : kFfnFormCases) expect_ffn_matches_ref(GetParam(), c);
}

TEST_P(GgufKernelTest, GroupedFfnMatchesTheReferenceInEveryType) {
  for (const FfnCase& c : kFfnTypeCases) expect_ffn_matches_ref(GetParam(), c);
}

INSTANTIATE_TEST_SUITE_P(Isas, GgufKernelTest,
                         ::testing::Values(Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Vnni, Isa::kAvx512Bf16),
                         hymoe::test::isa_param_name);

// The scalar ISA decodes the views into f32 and runs the portable kernel.
TEST(GgufGroupedFfn, ScalarIsaRunsQuantizedViews) {
  expect_ffn_matches_ref(Isa::kScalar, {WeightFormat::kGgmlQ4_K, WeightFormat::kGgmlQ6_K, 256, 256});
}

// An ungated layer (up then GELU, no gate) packs up alone in its format; the pre-activation rows it saves are the
// up projection. Relu's kink and GELU's slope <= 1.13 keep y's error within the f32 error of the two dot
// products, under 1e-4 of the output's scale for K <= 512 (512 * 2^-24 * the |x| |w| sums, a few times |y|).
TEST(GgufGroupedFfn, UngatedLayersRunUpAlone) {
  if (!hymoe::test::isa_supported(Isa::kAvx2)) GTEST_SKIP() << "CPU lacks avx2";
  Rng rng(9);
  GgufExperts experts(rng, 3, 256, 256, WeightFormat::kGgmlQ5_K, WeightFormat::kGgmlQ4_0);
  for (auto& v : experts.views) v.gate = MatrixView{};
  const GroupedFfnShape shape{3, 256, 256, Activation::kGelu};
  const std::vector<int64_t> offsets{0, 5, 5, 9};
  const std::vector<float> x = hymoe::test::random_values(rng, 9 * 256);
  std::vector<float> y(9 * 256), want(y.size()), saved(9 * 256), saved_want(saved.size());
  GroupedFfnArgs args{offsets.data(), x.data(), nullptr, want.data()};
  args.saved_up = saved_want.data();
  make_grouped_ffn_ref(shape, experts.views)->run(args);
  const auto ffn = make_grouped_ffn(shape, experts.views, Isa::kAvx2, exact());
  EXPECT_STREQ(ffn->name(), "grouped_ffn_q5_kw_f32+q4_0w_f32_4x16__avx2");
  args.y = y.data();
  args.saved_up = saved.data();
  ffn->run(args);
  auto max_abs = [](const std::vector<float>& v) {
    double m = 0;
    for (float e : v) m = std::max(m, static_cast<double>(std::abs(e)));
    return m;
  };
  const double y_tol = 1e-4 * max_abs(want), saved_tol = 1e-4 * max_abs(saved_want);
  ASSERT_GT(y_tol, 0.0);
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_NEAR(y[i], want[i], y_tol) << i;
    ASSERT_NEAR(saved[i], saved_want[i], saved_tol) << i;
  }
}

TEST(GgufGroupedFfn, FormatsAreChosenPerRoleAndNamed) {
  Rng rng(7);
  const GgufExperts experts(rng, 2, 256, 256, WeightFormat::kGgmlQ4_K, WeightFormat::kGgmlQ6_K);
  EXPECT_EQ(choose_weight_format(experts.views, Isa::kAvx2, exact()), WeightFormat::kGgmlQ4_K);
  EXPECT_EQ(choose_down_format(experts.views, Isa::kAvx2, exact()), WeightFormat::kGgmlQ6_K);
  if (hymoe::test::isa_supported(Isa::kAvx2)) {
    EXPECT_STREQ(make_grouped_ffn({2, 256, 256, Activation::kSwiGLU}, experts.views, Isa::kAvx2, exact())->name(),
                 "grouped_ffn_q4_kw_f32+q6_kw_f32_4x16__avx2");
  }
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(GgufGroupedFfn, UnsupportedOrMixedTypesAreClearErrors) {
  Rng rng(8);
  const GroupedFfnShape shape{2, 256, 256, Activation::kSwiGLU};
  GgufExperts experts(rng, 2, 256, 256, WeightFormat::kGgmlQ4_K, WeightFormat::kGgmlQ6_K);
  // F16 as a kGgml view: decodable, but no packed format.
  std::vector<uint16_t> f16(256 * 256, float_to_f16(0.5f));
  std::vector<MlpWeightsView> views = experts.views;
  for (auto& v : views) {
    v.down = MatrixView{f16.data(), DType::kF32, WeightLayout::kOutIn, 256, 256};
    v.down.quant = {QuantScheme::kGgml, static_cast<uint32_t>(GgmlType::kF16)};
  }
  for (Isa isa : {Isa::kScalar, Isa::kAvx2}) {
    const std::string e = error_of([&] { make_grouped_ffn(shape, views, isa); });
    EXPECT_NE(e.find("down weights are ggml type F16"), std::string::npos) << e;
    EXPECT_NE(e.find("must be one of Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, Q2_K, Q3_K, TQ1_0, TQ2_0, "
                     "IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, MXFP4"),
              std::string::npos)
        << e;
  }
  // Gate and up of different types.
  views = experts.views;
  const GgufMatrix q8_gate(rng, WeightFormat::kGgmlQ8_0, 256, 256);
  for (auto& v : views) v.gate = q8_gate.view;
  std::string e = error_of([&] { make_grouped_ffn(shape, views, Isa::kAvx2); });
  EXPECT_NE(e.find("gate and up must share one type"), std::string::npos) << e;
  // Experts of one role with different types.
  views = experts.views;
  views[1].down = q8_gate.view;
  e = error_of([&] { make_grouped_ffn(shape, views, Isa::kAvx2); });
  EXPECT_NE(e.find("down weights of expert 1 are not ggml type Q6_K"), std::string::npos) << e;
  // K not a whole number of K-quant blocks (DeepSeek-V2-Lite's hidden 1408 in down).
  views = experts.views;
  for (auto& v : views) v.down.k = 1408;
  e = error_of([&] { make_grouped_ffn({2, 256, 1408, Activation::kSwiGLU}, views, Isa::kAvx2); });
  EXPECT_NE(e.find("down weights of expert 0 are Q6_K with K = 1408 inputs, not a whole number of its 256-value"),
            std::string::npos)
      << e;
  // q8 re-quantization of GGUF weights.
  e = error_of([&] { make_grouped_ffn(shape, experts.views, Isa::kAvx2, GroupedFfnOptions{.quantize_q8 = true}); });
  EXPECT_NE(e.find("quantize_q8"), std::string::npos) << e;
}

}  // namespace
}  // namespace hymoe::kernels
