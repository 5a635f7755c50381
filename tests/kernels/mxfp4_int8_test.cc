// MXFP4's integer-dot format (WeightFormat::kMxfp4Block32I8, QuantCompute::kInt8): the panels against the exactly
// decoded weights, one block against llama.cpp's ggml_vec_dot_mxfp4_q8_0 to the bit for every code and the E8M0
// scales 0 and 1 (subnormal halves) and 254, every micro-kernel against the scalar reference on every ISA this CPU
// has, and the grouped FFN against make_grouped_ffn_ref with RoundingModel::kGgmlActivations (q8_0 activations).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "fast_kernel_test_util.h"
#include "gguf_test_util.h"
#include "hymoe/compute.h"
#include "hymoe/error.h"
#include "hymoe/quant_decode.h"
#include "kernels/formats/gemm_kernels.h"
#include "kernels/ffn/grouped_ffn_impl.h"

namespace hymoe::kernels {
namespace {

using hymoe::test::gguf::expect_int8_kernel_matches_reference;
using hymoe::test::gguf::expect_same_bits_on_1_and_2_threads;
using hymoe::test::gguf::Mxfp4Matrix;
using hymoe::test::gguf::with_quant;

constexpr WeightFormat kFormat = WeightFormat::kMxfp4Block32I8;

// Every weight exactly (padding columns zero; -0 as +0) in the exact format's 17 bytes per 32 weights, the codes in Q4_0's
// nibble layout (k 4h + t at byte (h, j, t)'s low nibble, k 16 + 4h + t at its high one) and u <= 24.
TEST(Mxfp4Int8Pack, PanelsHoldTheExactWeightsInTheDocumentedBytes) {
  Rng rng(31);
  for (int nr : {16, 32})
    for (int64_t k : {32, 96})
      for (int64_t n : {5, 32}) {
        const Mxfp4Matrix m(rng, kFormat, k, n);
        const PackedMatrix p = pack_matrix(m.view, nr, kFormat);
        const int64_t panels = (n + nr - 1) / nr;
        ASSERT_EQ(p.bytes(), static_cast<size_t>(panels * k / 32 * 17 * nr));
        if (n % nr == 0) {
          EXPECT_DOUBLE_EQ(static_cast<double>(p.bytes()) / static_cast<double>(k * n), 0.53125);
        }
        for (int64_t col = 0; col < panels * nr; ++col)
          for (int64_t kk = 0; kk < k; ++kk) {
            const uint8_t* panel = p.buffer.data() + col / nr * p.panel_bytes();
            const int j = static_cast<int>(col % nr);
            const float got = gguf_panel_weight(kFormat, panel, nr, kk, j);
            const float want = col < n ? m.view.at(kk, col) : 0.0f;
            // The code -0 (8) is the integer 0: +0 in the int8 form.
            ASSERT_TRUE(std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want) || (got == 0 && want == 0))
                << "k " << kk << " col " << col << " n " << n << " nr " << nr << ": " << got << " vs " << want;
            const int u = gguf_int8_panel_code(kFormat, panel, nr, kk, j);
            ASSERT_TRUE(u >= 0 && u <= 24) << u;
            const int g = static_cast<int>(kk % 32) / 4, t = static_cast<int>(kk % 4);
            const uint8_t byte = panel[kk / 32 * weight_unit_bytes(kFormat, nr) + ((g % 4) * nr + j) * 4 + t];
            const uint8_t pair = col < n ? m.codes[static_cast<size_t>(col * k / 2 + kk / 2)] : 0;
            ASSERT_EQ((byte >> (g < 4 ? 0 : 4)) & 15, kk % 2 ? pair >> 4 : pair & 15) << "k " << kk << " col " << col;
          }
      }
}

TEST(Mxfp4Int8Pack, NanScaleIsRefused) {
  Rng rng(32);
  Mxfp4Matrix m(rng, kFormat, 64, 20);
  m.scales[5] = 255;  // row 2, group 1
  try {
    pack_matrix(m.view, 16, kFormat);
    FAIL() << "a NaN scale was packed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("E8M0 scale 255 (NaN) at output row 2, group 1"), std::string::npos) << e.what();
  }
}

class Mxfp4Int8KernelTest : public hymoe::test::IsaKernelsTest {
 protected:
  const GemmFormat& format() const {
    const GemmFormat* f = ik_->format(kFormat);
    HYMOE_CHECK(f, "no ", weight_format_operands(kFormat), " kernel on ", isa_name(GetParam()));
    return *f;
  }
};

// One block (K = 32) of one row: the kernel's bits are llama.cpp's (gguf_test_util.h).
TEST_P(Mxfp4Int8KernelTest, OneBlockGivesLlamaCppBitsForEveryCodeAndScale) {
  Rng rng(33);
  hymoe::test::gguf::expect_mxfp4_int8_block_matches_llama_cpp(format(), rng);
}

// m = 1..MR rows, K of 1, 3 and 9 blocks, N not a multiple of NR; split K and the decode form bit-identical.
TEST_P(Mxfp4Int8KernelTest, MicroKernelsMatchTheReference) {
  Rng rng(34);
  expect_int8_kernel_matches_reference(format(), rng);
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float e : v) m = std::max(m, static_cast<double>(std::abs(e)));
  return m;
}

// The int8 grouped FFN against the reference with q8_0 rounding of each projection's input. Both quantize the same
// f32 x, so gate and up see the same codes; the hidden row is f32 in the kernels and f32 of a double in the
// reference, so where a hidden value sits within an ulp of a rounding boundary its code differs by one, which moves
// y[r, d] by scale_r * d_block * |w_down(j, d)|. Bound per element: two such codes of the row's largest (q8_0's d of
// each hidden block from the kernels' saved gate and up), plus 1e-5 of max|y| for the f32 summation (the exact
// computation is farther than that). Same bits on 1 and 2 threads.
void expect_int8_ffn_matches_ref(Isa isa, int64_t D, int64_t H) {
  SCOPED_TRACE("D " + std::to_string(D) + " H " + std::to_string(H));
  Rng rng(35);
  const std::vector<int64_t> sizes{0, 1, 50, 3, 0, 7};
  const int64_t G = static_cast<int64_t>(sizes.size());
  const hymoe::test::gguf::Mxfp4Experts experts(rng, G, D, H, kFormat, kFormat);
  const std::vector<MlpWeightsView>& views = experts.views;
  const GroupedFfnShape shape{G, D, H, Activation::kSwiGLU};
  std::vector<int64_t> offsets{0};
  for (int64_t n : sizes) offsets.push_back(offsets.back() + n);
  const int64_t R = offsets.back();
  const std::vector<float> x = hymoe::test::random_values(rng, R * D), scale = hymoe::test::random_values(rng, R);
  const auto ffn = make_grouped_ffn(shape, views, isa, with_quant(QuantCompute::kInt8));
  if (isa != Isa::kScalar) {
    EXPECT_NE(std::string(ffn->name()).find("mxfp4w_q8_0"), std::string::npos) << ffn->name();
  }
  const auto ref = make_grouped_ffn_ref(shape, views, RoundingModel::kGgmlActivations);
  const auto exact = make_grouped_ffn_ref(shape, views);
  const hymoe::test::FfnOutputs got = hymoe::test::run_ffn_saving(*ffn, offsets, x, scale);
  const std::vector<float> want = hymoe::test::run_ffn_saving(*ref, offsets, x, scale).y;
  const std::vector<float> y_exact = hymoe::test::run_ffn_saving(*exact, offsets, x, scale).y;
  const double summation = 1e-5 * max_abs(want);
  ASSERT_GT(summation, 0.0);
  double worst_exact = 0;
  for (int64_t e = 0; e < G; ++e)
    for (int64_t r = offsets[e]; r < offsets[e + 1]; ++r) {
      std::vector<float> h(static_cast<size_t>(H));
      for (int64_t j = 0; j < H; ++j) {
        const double g = got.gate[static_cast<size_t>(r * H + j)];
        h[static_cast<size_t>(j)] = static_cast<float>(g / (1 + std::exp(-g)) * got.up[static_cast<size_t>(r * H + j)]);
      }
      for (int64_t d = 0; d < D; ++d) {
        double flip = 0;
        for (int64_t b = 0; b < H; b += kQ8Block) {
          int8_t q[kQ8Block];
          float db;
          quantize_ggml_q8_0_block(h.data() + b, static_cast<int>(std::min<int64_t>(kQ8Block, H - b)), q, &db);
          for (int64_t j = b; j < std::min<int64_t>(b + kQ8Block, H); ++j)
            flip = std::max(flip, 1.01 * db * std::abs(views[static_cast<size_t>(e)].down.at(j, d)));
        }
        const size_t at = static_cast<size_t>(r * D + d);
        const double tol = std::abs(scale[static_cast<size_t>(r)]) * 2 * flip + summation;
        ASSERT_NEAR(got.y[at], want[at], tol) << ffn->name() << " row " << r << " column " << d;
        worst_exact = std::max(worst_exact, std::abs(static_cast<double>(y_exact[at]) - want[at]));
      }
    }
  EXPECT_GT(worst_exact, 10 * summation) << "the rounding model makes no difference";
  std::vector<float> y(got.y.size());
  GroupedFfnArgs args{offsets.data(), x.data(), scale.data(), y.data()};
  expect_same_bits_on_1_and_2_threads(*ffn, args, y.size());
}

TEST_P(Mxfp4Int8KernelTest, GroupedFfnMatchesTheReference) {
  for (auto [D, H] : {std::pair<int64_t, int64_t>{32, 96}, {96, 160}, {256, 288}}) expect_int8_ffn_matches_ref(GetParam(), D, H);
}

// The scalar ISA computes the q8_0 rounding with the reference, as for GGUF weights.
TEST(Mxfp4Int8GroupedFfn, ScalarIsaRunsTheRoundingReference) {
  expect_int8_ffn_matches_ref(Isa::kScalar, 96, 160);
}

INSTANTIATE_TEST_SUITE_P(Isas, Mxfp4Int8KernelTest,
                         ::testing::Values(Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Vnni, Isa::kAvx512Bf16),
                         hymoe::test::isa_param_name);

}  // namespace
}  // namespace hymoe::kernels
