// Block-quantized weight views (QuantizedMatrix): element access decodes each scheme exactly, rows agree with
// elements, and the validation refuses views the kernels could not read.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "hymoe/dtype.h"
#include "hymoe/ggml_type.h"
#include "hymoe/quant_formats.h"
#include "kernels/ffn/grouped_ffn.h"

namespace hymoe::kernels {
namespace {

TEST(QuantizedMatrix, GgmlQ8_0ElementsAndRows) {
  // (N = 2, K = 64): two Q8_0 blocks per row; value = d * q.
  std::vector<BlockQ8_0> blocks(4);
  for (int b = 0; b < 4; ++b) {
    blocks[static_cast<size_t>(b)].d = float_to_f16(0.25f * static_cast<float>(b + 1));
    for (int i = 0; i < 32; ++i) blocks[static_cast<size_t>(b)].qs[i] = static_cast<int8_t>(i - 16 + b);
  }
  MatrixView m;
  m.data = blocks.data();
  m.k = 64;
  m.n = 2;
  m.quant.scheme = QuantScheme::kGgml;
  m.quant.ggml_type = static_cast<uint32_t>(GgmlType::kQ8_0);
  validate_quantized_matrix(m);
  EXPECT_EQ(m.at(0, 0), 0.25f * -16.0f);
  EXPECT_EQ(m.at(33, 0), 0.5f * (1 - 16 + 1));   // row 0, block 1, value 1
  EXPECT_EQ(m.at(63, 1), 1.0f * (31 - 16 + 3));  // row 1, block 3, value 31
  std::vector<float> row(64);
  m.decode_quantized_row(1, row.data());
  for (int kk = 0; kk < 64; ++kk) EXPECT_EQ(row[static_cast<size_t>(kk)], m.at(kk, 1)) << kk;
}

TEST(QuantizedMatrix, Fp8BlockAndMxfp4Elements) {
  // FP8: (N = 3, K = 4), blocks [2, 2]; 0x38 is 1.0 and 0xc0 is -2.0 in e4m3fn.
  const std::vector<uint8_t> q = {0x38, 0x38, 0xc0, 0x38, 0x38, 0x38, 0x38, 0x38, 0x38, 0xc0, 0x38, 0x38};
  const std::vector<float> scale_inv = {0.5f, 3.0f, 0.25f, 8.0f};  // (2, 2)
  MatrixView f;
  f.data = q.data();
  f.k = 4;
  f.n = 3;
  f.quant = {QuantScheme::kFp8Block, 0, scale_inv.data(), 2, 2};
  validate_quantized_matrix(f);
  EXPECT_EQ(f.at(0, 0), 0.5f);
  EXPECT_EQ(f.at(2, 0), -6.0f);
  EXPECT_EQ(f.at(1, 2), -0.5f);  // row 2 is in row block 1
  EXPECT_EQ(f.at(3, 2), 8.0f);
  // MXFP4: (N = 1, K = 32); code 2 is 1.0, code 15 is -6.0; scale 128 is 2.
  std::vector<uint8_t> codes(16, 0x00), scales = {128};
  codes[0] = 0xf2;  // value 0 = code 2, value 1 = code 15
  MatrixView m;
  m.data = codes.data();
  m.k = 32;
  m.n = 1;
  m.quant.scheme = QuantScheme::kMxfp4;
  m.quant.scales = scales.data();
  validate_quantized_matrix(m);
  EXPECT_EQ(m.at(0, 0), 2.0f);
  EXPECT_EQ(m.at(1, 0), -12.0f);
  EXPECT_EQ(m.at(2, 0), 0.0f);
}

}  // namespace
}  // namespace hymoe::kernels
