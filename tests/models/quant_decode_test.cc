// FP8 (e4m3fn with block scales) and MXFP4 decoding against values worked out by hand from the formats' bit
// layouts, and the row decoders against the element references.
#include <gtest/gtest.h>

#include <cmath>

#include "hymoe/dtype.h"
#include "hymoe/quant_decode.h"

namespace hymoe {
namespace {

TEST(Fp8E4M3, HandDecodedCodes) {
  EXPECT_EQ(f8_e4m3_to_float(0x38), 1.0f);      // 0 0111 000: 2^0
  EXPECT_EQ(f8_e4m3_to_float(0x40), 2.0f);      // 0 1000 000: 2^1
  EXPECT_EQ(f8_e4m3_to_float(0xC4), -3.0f);     // 1 1000 100: -2^1 * 1.5
  EXPECT_EQ(f8_e4m3_to_float(0x7E), 448.0f);    // 0 1111 110: the largest, 2^8 * 1.75
  EXPECT_EQ(f8_e4m3_to_float(0x01), 0x1p-9f);   // smallest subnormal: 2^-6 * 1/8
  EXPECT_EQ(f8_e4m3_to_float(0x07), 7 * 0x1p-9f);  // largest subnormal
  EXPECT_EQ(f8_e4m3_to_float(0x08), 0x1p-6f);   // smallest normal
  EXPECT_EQ(f8_e4m3_to_float(0x80), 0.0f);
  EXPECT_TRUE(std::signbit(f8_e4m3_to_float(0x80)));
  EXPECT_TRUE(std::isnan(f8_e4m3_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(f8_e4m3_to_float(0xFF)));
  EXPECT_EQ(f8_e4m3_to_float(0x78), 256.0f);    // 0 1111 000: e=15 is a normal exponent (no infinities)
}

TEST(Fp8BlockScaled, HandComputedMatrix) {
  // q (3, 3), blocks 2 x 2 -> scale_inv (2, 2). Codes: 0x38 = 1, 0x40 = 2, 0xC4 = -3, 0x30 = 0.5.
  const uint8_t q[9] = {0x38, 0x40, 0xC4,   //
                        0x30, 0x38, 0x40,   //
                        0x40, 0xC4, 0x38};
  const float scale_inv[4] = {2.0f, 0.5f,  //
                              -1.0f, 4.0f};
  const float expected[9] = {1 * 2.0f,  2 * 2.0f,   -3 * 0.5f,  //
                             0.5f * 2.0f, 1 * 2.0f, 2 * 0.5f,   //
                             2 * -1.0f, -3 * -1.0f, 1 * 4.0f};
  uint16_t out[9];
  decode_fp8_block_scaled_to_bf16(q, scale_inv, 3, 3, 2, 2, out);
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(bf16_to_float(out[i]), expected[i]) << i;
    EXPECT_EQ(fp8_block_scaled_value_ref(q, scale_inv, 3, 3, 2, 2, i / 3, i % 3), expected[i]) << i;
  }
}

TEST(Fp8BlockScaled, RowDecoderRoundsTheReferenceToBf16) {
  // Every code against every scale of a rectangular block grid, ragged edges included.
  const int64_t n = 5, k = 37, bn = 2, bk = 16;
  std::vector<uint8_t> q(static_cast<size_t>(n * k));
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<uint8_t>((i * 37 + 11) % 256 == 0x7F ? 0 : (i * 37 + 11) % 256);
  std::vector<float> s{0.013f, -1.7f, 3.1f, 0.25f, 1e-3f, 7.0f, -0.5f, 2.0f, 9.0f};  // (3, 3)
  std::vector<uint16_t> out(q.size());
  decode_fp8_block_scaled_to_bf16(q.data(), s.data(), n, k, bn, bk, out.data());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j) {
      const float ref = fp8_block_scaled_value_ref(q.data(), s.data(), n, k, bn, bk, i, j);
      if (std::isnan(ref)) continue;
      EXPECT_EQ(out[static_cast<size_t>(i * k + j)], float_to_bf16(ref)) << i << "," << j;
    }
}

TEST(Mxfp4, HandDecodedGroup) {
  EXPECT_EQ(mxfp4_e2m1_value(0x0), 0.0f);
  EXPECT_EQ(mxfp4_e2m1_value(0x3), 1.5f);
  EXPECT_EQ(mxfp4_e2m1_value(0x7), 6.0f);
  EXPECT_EQ(mxfp4_e2m1_value(0xD), -3.0f);
  EXPECT_EQ(e8m0_scale_value(127), 1.0f);
  EXPECT_EQ(e8m0_scale_value(130), 8.0f);
  EXPECT_EQ(e8m0_scale_value(120), 1.0f / 128);
  EXPECT_TRUE(std::isnan(e8m0_scale_value(255)));
  // One row of 64 values = 2 groups. Group 0: byte 0 = 0x21 -> values 0.5 (low nibble 1), 1.0 (high nibble 2),
  // byte 1 = 0xF7 -> 6, -6; scale 128 (x2). Group 1: byte 0 = 0x9C -> -2 (low C), -0.5 (high 9); scale 125 (/4).
  uint8_t blocks[32] = {};
  blocks[0] = 0x21;
  blocks[1] = 0xF7;
  blocks[16] = 0x9C;
  const uint8_t scales[2] = {128, 125};
  uint16_t out[64];
  decode_mxfp4_to_bf16(blocks, scales, 1, 64, out);
  EXPECT_EQ(bf16_to_float(out[0]), 1.0f);
  EXPECT_EQ(bf16_to_float(out[1]), 2.0f);
  EXPECT_EQ(bf16_to_float(out[2]), 12.0f);
  EXPECT_EQ(bf16_to_float(out[3]), -12.0f);
  EXPECT_EQ(bf16_to_float(out[4]), 0.0f);
  EXPECT_EQ(bf16_to_float(out[32]), -0.5f);
  EXPECT_EQ(bf16_to_float(out[33]), -0.125f);
  for (int j = 0; j < 64; ++j) EXPECT_EQ(bf16_to_float(out[j]), mxfp4_value_ref(blocks, scales, 64, 0, j)) << j;
}

}  // namespace
}  // namespace hymoe
