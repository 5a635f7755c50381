// Decoding of the quantized weight formats released checkpoints use. The kernels run them natively from panels of
// their codes; the whole-matrix bf16 decoders remain for tests and tools.
// Each format has a one-element scalar reference beside its row decoder; the references are the ground truth the
// tests and any native quantized kernel are checked against. Core layer: depends on nothing but dtype.h.
#pragma once

#include <cstdint>

namespace hymoe {

// Block-scaled FP8 (DeepSeek-V3/R1, Qwen3-FP8): q (N, K) float8 e4m3fn row-major, scale_inv
// (ceil(N/block_n), ceil(K/block_k)) float32; W[i, j] = fp8(q[i, j]) * scale_inv[i / block_n, j / block_k]
// (despite its name, scale_inv is a multiplier). The product is computed in float32.
float fp8_block_scaled_value_ref(const uint8_t* q, const float* scale_inv, int64_t n, int64_t k, int64_t block_n,
                                 int64_t block_k, int64_t i, int64_t j);
// The whole (N, K) matrix as bf16 bits (round to nearest even) into out (N, K).
void decode_fp8_block_scaled_to_bf16(const uint8_t* q, const float* scale_inv, int64_t n, int64_t k, int64_t block_n,
                                     int64_t block_k, uint16_t* out);

// MXFP4 (gpt-oss): each row of K values is split into K/32 groups; a group is 16 bytes of E2M1 codes (byte j holds
// value 2j in its low nibble, 2j+1 in its high nibble) and one E8M0 scale byte s: value = e2m1(code) * 2^(s-127).
inline constexpr int64_t kMxfp4GroupSize = 32;
// The E2M1 code table: [0, .5, 1, 1.5, 2, 3, 4, 6] and their negatives for codes 8..15.
float mxfp4_e2m1_value(uint8_t code);
// 2^(s-127); s = 255 is NaN (the OCP MX encoding of "no scale").
float e8m0_scale_value(uint8_t s);
// Element (i, j) of rows (rows, K): blocks (rows, K/32, 16) u8, scales (rows, K/32) u8.
float mxfp4_value_ref(const uint8_t* blocks, const uint8_t* scales, int64_t k, int64_t i, int64_t j);
// The whole (rows, K) matrix as bf16 bits into out (rows, K). Every value is exact in bf16 (a 2-bit mantissa times
// a power of two), barring scales outside bf16's range.
void decode_mxfp4_to_bf16(const uint8_t* blocks, const uint8_t* scales, int64_t rows, int64_t k, uint16_t* out);

}  // namespace hymoe
