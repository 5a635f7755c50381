// Quantized-format decoders (see include/hymoe/quant_decode.h). The row decoders are the element references
// hoisted: one scale per block, one table lookup per element, identical results.
#include "hymoe/quant_decode.h"

#include <cmath>
#include <limits>

#include "hymoe/dtype.h"

namespace hymoe {

float fp8_block_scaled_value_ref(const uint8_t* q, const float* scale_inv, int64_t /*n*/, int64_t k, int64_t block_n,
                                 int64_t block_k, int64_t i, int64_t j) {
  const int64_t k_blocks = (k + block_k - 1) / block_k;
  return f8_e4m3_to_float(q[i * k + j]) * scale_inv[(i / block_n) * k_blocks + j / block_k];
}

void decode_fp8_block_scaled_to_bf16(const uint8_t* q, const float* scale_inv, int64_t n, int64_t k, int64_t block_n,
                                     int64_t block_k, uint16_t* out) {
  float table[256];
  for (int c = 0; c < 256; ++c) table[c] = f8_e4m3_to_float(static_cast<uint8_t>(c));
  const int64_t k_blocks = (k + block_k - 1) / block_k;
  for (int64_t i = 0; i < n; ++i) {
    const float* scales = scale_inv + (i / block_n) * k_blocks;
    const uint8_t* row = q + i * k;
    uint16_t* o = out + i * k;
    for (int64_t j0 = 0; j0 < k; j0 += block_k) {
      const float s = scales[j0 / block_k];
      const int64_t j1 = j0 + block_k < k ? j0 + block_k : k;
      for (int64_t j = j0; j < j1; ++j) o[j] = float_to_bf16(table[row[j]] * s);
    }
  }
}

float mxfp4_e2m1_value(uint8_t code) {
  static constexpr float kValues[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                        -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  return kValues[code & 0xf];
}

float e8m0_scale_value(uint8_t s) {
  if (s == 255) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(s) - 127);
}

float mxfp4_value_ref(const uint8_t* blocks, const uint8_t* scales, int64_t k, int64_t i, int64_t j) {
  const int64_t groups = k / kMxfp4GroupSize;
  const int64_t g = j / kMxfp4GroupSize, within = j % kMxfp4GroupSize;
  const uint8_t byte = blocks[(i * groups + g) * (kMxfp4GroupSize / 2) + within / 2];
  const uint8_t code = within % 2 == 0 ? (byte & 0xf) : (byte >> 4);
  return mxfp4_e2m1_value(code) * e8m0_scale_value(scales[i * groups + g]);
}

void decode_mxfp4_to_bf16(const uint8_t* blocks, const uint8_t* scales, int64_t rows, int64_t k, uint16_t* out) {
  const int64_t groups = k / kMxfp4GroupSize;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t g = 0; g < groups; ++g) {
      const float s = e8m0_scale_value(scales[i * groups + g]);
      const uint8_t* b = blocks + (i * groups + g) * (kMxfp4GroupSize / 2);
      uint16_t* o = out + i * k + g * kMxfp4GroupSize;
      for (int64_t j = 0; j < kMxfp4GroupSize / 2; ++j) {
        o[2 * j] = float_to_bf16(mxfp4_e2m1_value(b[j] & 0xf) * s);
        o[2 * j + 1] = float_to_bf16(mxfp4_e2m1_value(b[j] >> 4) * s);
      }
    }
}

}  // namespace hymoe
