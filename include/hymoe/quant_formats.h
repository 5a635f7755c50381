// GGUF's block weight formats (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ1_S, IQ1_M, IQ2_XXS,
// IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, MXFP4) and plain element types (F32, F16, BF16): the
// layout of one block and its exact scalar decoding, the ground truth every packing and micro-kernel of these
// formats is tested against. Depends on core only; knows nothing of files, experts or routing.
//
// Every decoded value is exact in f32: scales (f16 widened to f32) times small integer codes need at most 24
// significant bits, so only the offset types' final `d*q + m` (Q4_1, Q5_1) and `d*sc*q - dmin*m` (Q2_K, Q4_K, Q5_K)
// round, once (an FMA gives the same bits). MXFP4's
// values are a power of two times a small integer: exact too (past float's range they are inf, as in ggml).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "hymoe/ggml_type.h"

namespace hymoe {

// Blocks as stored (little-endian, packed; f16 fields as their bits). Decoders copy a block out of the byte
// stream, so the source needs no alignment.
struct BlockQ8_0 {  // 32 values: x[i] = d * qs[i]
  uint16_t d;
  int8_t qs[32];
};
struct BlockQ4_0 {  // 32 values: x[j] = d * ((qs[j] & 15) - 8), x[j + 16] = d * ((qs[j] >> 4) - 8)
  uint16_t d;
  uint8_t qs[16];
};
struct BlockQ4_1 {  // 32 values: x[j] = d * (qs[j] & 15) + m, x[j + 16] = d * (qs[j] >> 4) + m
  uint16_t d;
  uint16_t m;
  uint8_t qs[16];
};
struct BlockQ5_0 {  // Q4_0's nibbles plus a fifth bit per value (bit i of qh, little-endian): x[i] = d * (q - 16)
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ5_1 {  // Q4_1's nibbles plus Q5_0's fifth bits: x[i] = d * q + m
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};
// The IQ4 types' 16 values (llama.cpp's kvalues_iq4nl): a 4-bit code indexes them.
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
struct BlockIq4Nl {  // 32 values: x[j] = d * kIq4nlValues[qs[j] & 15], x[j + 16] = d * kIq4nlValues[qs[j] >> 4]
  uint16_t d;
  uint8_t qs[16];
};
struct BlockIq4Xs {  // 256 values in 8 sub-blocks of 32, each IQ4_NL's nibbles under scale d * (ls - 32), ls 6-bit:
  uint16_t d;        // low four bits in scales_l (sub-block 2i in the low nibble of byte i, 2i + 1 in the high),
  uint16_t scales_h; // the top two at bits 2i, 2i + 1 of scales_h
  uint8_t scales_l[4];
  uint8_t qs[128];
};
struct BlockQ4_K {  // 256 values in 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit min packed in scales
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
struct BlockQ5_K {  // Q4_K plus one high bit per value in qh
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
// Q2_K, Q3_K and TQ2_0 keep 2-bit codes four to a byte: value i = 128n + 32s + l (n the half, s 0..3, l 0..31)
// is bits 2s, 2s + 1 of qs[32n + l].
struct BlockQ2_K {  // 256 values in 16 sub-blocks of 16: x = d * (sc & 15) * q - dmin * (sc >> 4), sc = scales[i / 16]
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d;
  uint16_t dmin;
};
struct BlockQ3_K {  // 256 values in 16 sub-blocks of 16: x = d * (sc - 32) * q, q = the 2-bit code - 4 unless bit
  uint8_t hmask[32];  // i / 32 of hmask[i % 32] is set (q in -4..3); sc 6-bit: the low four bits are the low (sub-
  uint8_t qs[64];     // block s < 8) or high (s >= 8) nibble of scales[s % 8], the top two bits 2 (s / 4), +1 of
  uint8_t scales[12]; // scales[8 + s % 4]
  uint16_t d;
};
struct BlockTq1_0 {  // 256 ternary values x = d * (q - 1), q in 0..2, five (qs) or four (qh) to a byte in base 3:
  uint8_t qs[48];    // the n-th trit of byte b is ((b * 3^n mod 256) * 3) >> 8; values 0-159 are trit i / 32 of
  uint8_t qh[4];     // qs[i % 32], 160-239 trit (i - 160) / 16 of qs[32 + i % 16], 240-255 trit (i - 240) / 4 of
  uint16_t d;        // qh[i % 4]
};
struct BlockTq2_0 {  // 256 values x = d * (q - 1), q the 2-bit code (Q2_K's order), 0..3
  uint8_t qs[64];
  uint16_t d;
};
struct BlockQ6_K {  // 256 values in 16 sub-blocks of 16 with signed 8-bit scales; codes are 6-bit, stored + 32
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;  // last, unlike the other formats
};
// The IQ1/IQ2/IQ3 types: each group of 8 values (IQ3: 4) is an entry of a lattice ("grid", llama.cpp's
// ggml-common.h, src/kernels/formats/iq_grids.inc) of small positive values (IQ1: -1, 0, 1), times the group's
// signs (IQ2/IQ3) under a per-sub-block scale. 7-bit sign fields carry 8 signs: the eighth makes their count even.
struct BlockIq2Xxs {  // 8 sub-blocks of 32: qs[4s, 4s + 1] the 4 grid indices (bytes), qs[4s + 2, 4s + 3] a uint32
  uint16_t d;         // of four 7-bit sign fields and the scale ls in bits 28-31; x = d * (0.5 + ls) / 4 * g * sign
  uint16_t qs[32];
};
struct BlockIq2Xs {  // 32 groups of 8: qs[g] = 9-bit index | 7-bit signs << 9; 16 sub-blocks of 16, scale nibble
  uint16_t d;        // s of scales[s / 2] (low first); x = d * (0.5 + scale) / 4 * g * sign
  uint16_t qs[32];
  uint8_t scales[8];
};
struct BlockIq2S {  // 32 groups of 8: index qs[g] | 2 bits of qh[g / 4] (at 2 (g % 4)) << 8, signs the 8 bits of
  uint16_t d;       // qs[32 + g]; scales as IQ2_XS's; x = d * (0.5 + scale) / 4 * g * sign
  uint8_t qs[64];
  uint8_t qh[8];
  uint8_t scales[8];
};
struct BlockIq3Xxs {  // 64 groups of 4: index qs[g]; sub-block s of 32 has the uint32 at qs[64 + 4s] of four 7-bit
  uint16_t d;         // sign fields (8 values each) and ls in bits 28-31; x = d * (0.5 + ls) / 2 * g * sign
  uint8_t qs[96];
};
struct BlockIq3S {  // 64 groups of 4: index qs[g] | bit g % 8 of qh[g / 8] << 8; value i's sign bit i % 8 of
  uint16_t d;       // signs[i / 8]; sub-block s of 32 scale nibble s of scales[s / 2]; x = d * (1 + 2 scale) * g * sign
  uint8_t qs[64];
  uint8_t qh[8];
  uint8_t signs[32];
  uint8_t scales[4];
};
struct BlockIq1S {  // 32 groups of 8 (grid values -1, 0, 1): index qs[g] | 3 bits of qh[g / 4] (at 3 (g % 4)) << 8;
  uint16_t d;       // qh[s] bits 12-14 the scale of sub-block s of 32, bit 15 the sign of its delta;
  uint8_t qs[32];   // x = d * (2 scale + 1) * (g + delta), delta = +-1/8
  uint16_t qh[8];
};
struct BlockIq1M {     // 32 groups of 8: index qs[g] | bits 0-2 of nibble g % 2 of qh[g / 2] << 8, bit 3 the sign of
  uint8_t qs[32];      // the group's delta (+-1/8); scales: 4 uint16, each four 3-bit scales (at 0, 3, 6, 9) of
  uint8_t qh[16];      // sub-blocks of 16 and, in bits 12-15, a nibble of the f16 d (uint16 i's the bits 4i..4i+3);
  uint8_t scales[8];   // x = d * (2 scale + 1) * (g + delta)
};
static_assert(sizeof(BlockIq2Xxs) == 66 && sizeof(BlockIq2Xs) == 74 && sizeof(BlockIq2S) == 82 &&
              sizeof(BlockIq3Xxs) == 98 && sizeof(BlockIq3S) == 110 && sizeof(BlockIq1S) == 50 &&
              sizeof(BlockIq1M) == 56, "GGUF IQ block sizes");
// gpt-oss's experts in llama.cpp's files (ggml type 39). Value j = kvalue[qs[j] & 15] * 2^(e - 128), value j + 16 =
// kvalue[qs[j] >> 4] * 2^(e - 128), kvalue = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, ..., -12}: twice the E2M1 value, so the
// scale is half of E8M0's 2^(e - 127) (ggml's E8M0_TO_FP32_HALF). The nibble order differs from the Hugging Face
// checkpoints' (quant_decode.h: byte t holds values 2t, 2t + 1); codes and scales mean the same.
struct BlockMxfp4 {
  uint8_t e;  // E8M0 exponent; 255 (NaN in OCP MX) decodes to NaN here (ggml reads it as 2^127)
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockTq1_0) == 54 &&
              sizeof(BlockTq2_0) == 66, "GGUF block sizes");
static_assert(sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24 &&
              sizeof(BlockIq4Nl) == 18 && sizeof(BlockIq4Xs) == 136, "GGUF block sizes");
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockMxfp4) == 17, "GGUF block sizes");

// Each decodes one block from `block` (any alignment) into the block's 32 or 256 floats.
void dequantize_block_q8_0_ref(const std::byte* block, float* out);
void dequantize_block_q4_0_ref(const std::byte* block, float* out);
void dequantize_block_q4_1_ref(const std::byte* block, float* out);
void dequantize_block_q5_0_ref(const std::byte* block, float* out);
void dequantize_block_q5_1_ref(const std::byte* block, float* out);
void dequantize_block_q2_k_ref(const std::byte* block, float* out);
void dequantize_block_q3_k_ref(const std::byte* block, float* out);
void dequantize_block_q4_k_ref(const std::byte* block, float* out);
void dequantize_block_tq1_0_ref(const std::byte* block, float* out);
void dequantize_block_tq2_0_ref(const std::byte* block, float* out);
void dequantize_block_iq4_nl_ref(const std::byte* block, float* out);
void dequantize_block_iq4_xs_ref(const std::byte* block, float* out);
void dequantize_block_q5_k_ref(const std::byte* block, float* out);
void dequantize_block_q6_k_ref(const std::byte* block, float* out);
void dequantize_block_mxfp4_ref(const std::byte* block, float* out);
// The IQ1/IQ2/IQ3 types (ggml ids 16-19, 21, 22, 29).
void dequantize_block_iq_ref(uint32_t type, const std::byte* block, float* out);
// An MXFP4 block's codes in the Hugging Face order hymoe's MXFP4 panels take (pairs[t]: value 2t in the low nibble,
// 2t + 1 in the high one); returns its E8M0 exponent e. The block's values are e2m1(code) * 2^(e - 127).
uint8_t mxfp4_block_code_pairs(const std::byte* block, uint8_t pairs[16]);

// Whether dequantize_row_ref decodes type id `type`: F32, F16, BF16, MXFP4 and every block type of the kernels'
// registry (src/kernels/formats/gguf_formats.inc).
bool can_dequantize(uint32_t type);
// The types can_dequantize takes, for messages: "F32, F16, BF16, Q8_0, ..., MXFP4".
std::string decodable_type_names();
// Decodes `n` values of type `type` (n a multiple of its block size; `src` holds n / block_values blocks) into
// `out`. The caller checks can_dequantize and the sizes (HYMOE_CHECK here).
void dequantize_row_ref(uint32_t type, const std::byte* src, float* out, int64_t n);

// A block of a registry type (src/kernels/formats/gguf_formats.inc) taken apart into small integer codes and
// per-sub-block f32 factors, the decomposition the compact panel formats store (docs/kernels.md, "Formats"):
// value i is exactly
//   scale[i / sub] * code[i]                         for Q8_0, Q4_0 (code = nibble - 8), Q5_0 (q - 16), Q6_K (q - 32),
//                                                    Q3_K (q in -4..3), TQ1_0 and TQ2_0 (q - 1, scale = d for
//                                                    every sub-block of 32)
//   fmaf(scale[i / sub], code[i], offset[i / sub])   for Q4_1, Q5_1 (scale = d, offset = m), Q2_K, Q4_K, Q5_K (scale
//                                                    = d*sc, offset = -(dmin*m))
//   scale[i / sub] * kIq4nlValues[code[i]]          for IQ4_NL (scale = d), IQ4_XS (d * (ls - 32)): code is the index
//   scale[i / sub] * code[i]                         for the IQ1/IQ2/IQ3 types: code = grid value times sign (IQ1:
//                                                    8 g +- 1, the delta folded in), scale = d * (2 ls + 1) / 8
//                                                    (IQ2, IQ1), d * (2 ls + 1) / 4 (IQ3_XXS), d * (2 ls + 1) (IQ3_S)
// with the bits dequantize_block_*_ref gives (the products are exact; the offset types' one rounding is the FMA's).
struct GgmlBlockCodes {
  int8_t code[256];
  float scale[16];
  float offset[16];  // the types with offsets only
};
// Values per sub-block (one scale and offset): 32, or 16 for Q2_K, Q3_K, Q6_K, IQ2_XS, IQ2_S and IQ1_M; 0 for a type
// split_block_ref does not take.
int ggml_sub_block_values(uint32_t type);
// Whether the type's values use offsets (the fmaf form above).
bool ggml_block_has_offsets(uint32_t type);
void split_block_ref(uint32_t type, const std::byte* block, GgmlBlockCodes* out);
// The factors of a K-quant (or IQ4_XS) block as stored: its f16 d (and dmin), and each sub-block's integer scale
// sc (and min m), so that split_block_ref's scale[s] is d * sc[s] (and offset[s] -(dmin * m[s])). Q4_K, Q5_K: 8
// sub-blocks, sc and m 0..63; Q3_K: 16 sub-blocks, sc -32..31; Q6_K: 16 sub-blocks, sc -128..127; IQ4_XS: 8
// sub-blocks, sc -32..31 (ls - 32); the last three have no mins (dmin and m 0). Fails for other types.
struct GgmlBlockFactors {
  float d, dmin;
  int8_t sc[16];
  uint8_t m[16];
};
void split_block_factors(uint32_t type, const std::byte* block, GgmlBlockFactors* out);

}  // namespace hymoe
