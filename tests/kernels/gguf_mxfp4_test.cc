// GGUF's MXFP4 blocks (ggml type 39) as kernel weights: a kGgml view of them packs into the very panel bytes of the
// checkpoint form holding the same codes and scales (both the exact and the int8 layout, plain and gate/up), so the
// kernels proven on that form (gemm_quantized_test.cc, mxfp4_int8_test.cc: llama.cpp's bits for every code and
// scale) run GGUF files unchanged; grouped FFNs over the two forms give the same bits on every ISA this CPU has.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "fast_kernel_test_util.h"
#include "gguf_test_util.h"
#include "hymoe/compute.h"
#include "hymoe/error.h"
#include "hymoe/quant_formats.h"
#include "kernels/formats/gemm_kernels.h"
#include "kernels/formats/gemm_quantized.h"
#include "kernels/ffn/grouped_ffn_impl.h"

namespace hymoe::kernels {
namespace {

using hymoe::test::gguf::Mxfp4Matrix;
using hymoe::test::gguf::with_quant;

// The GGUF form of a checkpoint-form matrix: per row and group of 32, the block {e, qs[16]} with value j in qs[j]'s
// low nibble and value j + 16 in its high one.
struct GgufMxfp4Matrix {
  std::vector<uint8_t> blocks;
  MatrixView view;
  explicit GgufMxfp4Matrix(const Mxfp4Matrix& m) {
    const int64_t groups = m.view.k / 32;
    blocks.resize(static_cast<size_t>(m.view.n * groups * 17));
    for (int64_t r = 0; r < m.view.n; ++r)
      for (int64_t g = 0; g < groups; ++g) {
        uint8_t* b = blocks.data() + (r * groups + g) * 17;
        const uint8_t* pairs = m.codes.data() + (r * groups + g) * 16;
        auto code = [pairs](int i) { return i % 2 ? pairs[i / 2] >> 4 : pairs[i / 2] & 15; };
        b[0] = m.scales[static_cast<size_t>(r * groups + g)];
        for (int j = 0; j < 16; ++j) b[1 + j] = static_cast<uint8_t>(code(j) | code(j + 16) << 4);
      }
    view = MatrixView{blocks.data(), DType::kF32, WeightLayout::kOutIn, m.view.k, m.view.n};
    view.quant.scheme = QuantScheme::kGgml;
    view.quant.ggml_type = static_cast<uint32_t>(GgmlType::kMXFP4);
  }
};

void expect_same_bytes(const PackedMatrix& got, const PackedMatrix& want) {
  ASSERT_EQ(got.format, want.format);
  ASSERT_EQ(got.bytes(), want.bytes());
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.bytes())) << weight_format_operands(got.format);
}

TEST(GgufMxfp4Pack, PanelsAreTheCheckpointFormsBytes) {
  Rng rng(41);
  for (WeightFormat format : {WeightFormat::kMxfp4Block32, WeightFormat::kMxfp4Block32I8})
    for (int nr : {16, 32})
      for (int64_t k : {32, 96})
        for (int64_t n : {5, 32}) {
          SCOPED_TRACE(std::string(weight_format_operands(format)) + " nr " + std::to_string(nr) + " k " +
                       std::to_string(k) + " n " + std::to_string(n));
          const Mxfp4Matrix gate(rng, format, k, n), up(rng, format, k, n);
          const GgufMxfp4Matrix gguf_gate(gate), gguf_up(up);
          // The decoded values agree too (ggml's code 8 is +0 where the checkpoint form's E2M1 has -0).
          for (int64_t nn = 0; nn < n; ++nn)
            for (int64_t kk = 0; kk < k; ++kk) {
              const float g = gguf_up.view.at(kk, nn), c = up.view.at(kk, nn);
              ASSERT_TRUE(std::bit_cast<uint32_t>(g) == std::bit_cast<uint32_t>(c) || (g == 0 && c == 0))
                  << kk << ", " << nn << ": " << g << " vs " << c;
            }
          expect_same_bytes(pack_matrix(gguf_up.view, nr, format), pack_matrix(up.view, nr, format));
          expect_same_bytes(pack_gate_up(gguf_gate.view, gguf_up.view, nr, format),
                            pack_gate_up(gate.view, up.view, nr, format));
          if (format == WeightFormat::kMxfp4Block32 && n % nr == 0) {
            EXPECT_DOUBLE_EQ(static_cast<double>(pack_matrix(gguf_up.view, nr).bytes()) / static_cast<double>(k * n),
                             0.53125);  // the natural format: 17 bytes per 32 weights
          }
        }
}

TEST(GgufMxfp4Pack, NanScaleIsRefused) {
  Rng rng(42);
  Mxfp4Matrix m(rng, WeightFormat::kMxfp4Block32, 64, 20);
  m.scales[5] = 255;  // row 2, group 1
  const GgufMxfp4Matrix g(m);
  for (WeightFormat format : {WeightFormat::kMxfp4Block32, WeightFormat::kMxfp4Block32I8}) {
    try {
      pack_matrix(g.view, 16, format);
      FAIL() << "a NaN scale was packed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("E8M0 scale 255 (NaN) at output row 2, group 1"), std::string::npos) << e.what();
    }
  }
}

// A layer of experts in both forms, gpt-oss's clamped SwiGLU with biases: the same bits from either form, in the exact
// format and its int8 twin (chosen by kAuto), on every ISA this CPU has and on the scalar one.
TEST(GgufMxfp4GroupedFfn, RunsAsTheCheckpointForm) {
  Rng rng(43);
  const int64_t G = 4, D = 64, H = 96;
  const std::vector<int64_t> sizes{3, 0, 17, 1};
  std::vector<Mxfp4Matrix> matrices;
  std::vector<GgufMxfp4Matrix> gguf;
  matrices.reserve(3 * G);
  gguf.reserve(3 * G);
  std::vector<std::vector<float>> biases;
  std::vector<MlpWeightsView> checkpoint, file;
  for (int64_t g = 0; g < G; ++g) {
    MlpWeightsView c, f;
    using Role = std::tuple<MatrixView MlpWeightsView::*, int64_t, int64_t>;
    for (auto [m, k, n] : {Role{&MlpWeightsView::gate, D, H}, Role{&MlpWeightsView::up, D, H}, Role{&MlpWeightsView::down, H, D}}) {
      c.*m = matrices.emplace_back(rng, WeightFormat::kMxfp4Block32, k, n).view;
      f.*m = gguf.emplace_back(matrices.back()).view;
    }
    c.gate_bias = f.gate_bias = biases.emplace_back(hymoe::test::random_values(rng, H)).data();
    c.up_bias = f.up_bias = biases.emplace_back(hymoe::test::random_values(rng, H)).data();
    c.down_bias = f.down_bias = biases.emplace_back(hymoe::test::random_values(rng, D)).data();
    checkpoint.push_back(c);
    file.push_back(f);
  }
  GroupedFfnShape shape{G, D, H, Activation::kClampedSwiGLU};
  std::vector<int64_t> offsets{0};
  for (int64_t n : sizes) offsets.push_back(offsets.back() + n);
  const int64_t R = offsets.back();
  std::vector<float> x = hymoe::test::random_values(rng, R * D), scale = hymoe::test::random_values(rng, R);
  for (float& v : x) v *= 4;  // past the clamp limit sometimes
  std::vector<Isa> isas{Isa::kScalar};
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Vnni, Isa::kAvx512Bf16})
    if (hymoe::test::isa_supported(isa)) isas.push_back(isa);
  for (Isa isa : isas)
    for (QuantCompute q : {QuantCompute::kExact, QuantCompute::kAuto}) {
      SCOPED_TRACE(std::string(isa_name(isa)) + (q == QuantCompute::kExact ? " exact" : " auto"));
      const auto from_file = make_grouped_ffn(shape, file, isa, with_quant(q));
      const auto from_checkpoint = make_grouped_ffn(shape, checkpoint, isa, with_quant(q));
      if (isa != Isa::kScalar) {
        EXPECT_NE(std::string(from_file->name()).find(q == QuantCompute::kExact ? "mxfp4w_f32" : "mxfp4w_q8_0"),
                  std::string::npos)
            << from_file->name();
      }
      std::vector<float> y_file(static_cast<size_t>(R * D)), y_checkpoint(y_file.size());
      from_file->run({offsets.data(), x.data(), scale.data(), y_file.data()});
      from_checkpoint->run({offsets.data(), x.data(), scale.data(), y_checkpoint.data()});
      for (size_t i = 0; i < y_file.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(y_file[i] + 0.0f), std::bit_cast<uint32_t>(y_checkpoint[i] + 0.0f)) << i;
      double largest = 0;
      for (float v : y_file) largest = std::max(largest, static_cast<double>(std::abs(v)));
      EXPECT_GT(largest, 0.0);
    }
}

}  // namespace
}  // namespace hymoe::kernels
