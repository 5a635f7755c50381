// Scalar reference decoders of GGUF's block formats: plain loops, no SIMD, no threads, written from the block
// layouts in quant_formats.h. Tests pin them bit for bit to hand-computed blocks and to llama.cpp's gguf-py.
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>

#include "hymoe/dtype.h"
#include "hymoe/error.h"
#include "hymoe/quant_formats.h"
#include "kernels/formats/gemm_kernels.h"
#include "kernels/formats/iq_blocks.h"

namespace hymoe {
namespace {

template <typename Block>
Block load_block(const std::byte* p) {
  Block b;
  std::memcpy(&b, p, sizeof b);
  return b;
}

// Q4_K and Q5_K pack eight 6-bit scales and eight 6-bit mins into 12 bytes: sub-blocks 0-3 in the low six bits
// of bytes 0-3 (scales) and 4-7 (mins); sub-blocks 4-7 in the nibbles of bytes 8-11 plus the top two bits of
// bytes 0-3 (scales) and 4-7 (mins).
void unpack_k_scales(const uint8_t* scales, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = (scales[j + 4] & 15) | ((scales[j - 4] >> 6) << 4);
    *m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// The 4-bit code of value i (0..255) of a Q4_K/Q5_K block: chunk c = i / 64 holds sub-blocks 2c (low nibbles)
// and 2c + 1 (high nibbles) of bytes qs[32c .. 32c + 31].
int k_nibble(const uint8_t* qs, int i) {
  const int chunk = i / 64, within = i % 64;
  const uint8_t byte = qs[32 * chunk + within % 32];
  return within < 32 ? (byte & 15) : (byte >> 4);
}

// Q4_K (qh = nullptr) and Q5_K (qh: bit j of qh[l] is bit 4 of value 32j + l's code): x = d*sc*q - dmin*m.
void decode_k_block(uint16_t d_bits, uint16_t dmin_bits, const uint8_t* scales, const uint8_t* qs, const uint8_t* qh,
                    float* out) {
  const float d = f16_to_float(d_bits), dmin = f16_to_float(dmin_bits);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    unpack_k_scales(scales, j, &sc, &m);
    const float scale = d * static_cast<float>(sc), min = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      int q = k_nibble(qs, 32 * j + l);
      if (qh) q |= ((qh[l] >> j) & 1) << 4;
      out[32 * j + l] = scale * static_cast<float>(q) - min;
    }
  }
}

// The signed code (q - 32, in -32..31) of value i of a Q6_K block. Half n holds values 128n .. 128n + 127; within
// it, quarter k = (i % 128) / 32 takes its low nibble from ql[64n + 32 (k & 1) + l] (low nibble for k < 2, high
// for k >= 2) and its two high bits from bits 2k, 2k + 1 of qh[32n + l].
int q6_k_code(const BlockQ6_K& b, int i) {
  const int n = i / 128, k = (i % 128) / 32, l = i % 32;
  const uint8_t low_byte = b.ql[64 * n + 32 * (k & 1) + l];
  const int low = k < 2 ? (low_byte & 15) : (low_byte >> 4);
  const int high = (b.qh[32 * n + l] >> (2 * k)) & 3;
  return (low | (high << 4)) - 32;
}

// The 5-bit code of value i (0..31) of a Q5_0/Q5_1 block: the nibble of Q4_0's layout, bit i of qh above it.
int q5_code(const uint8_t* qs, const uint8_t* qh_bytes, int i) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, sizeof qh);
  const int nibble = i < 16 ? qs[i] & 15 : qs[i - 16] >> 4;
  return nibble | static_cast<int>((qh >> i) & 1) << 4;
}

// The 2-bit code of value i (0..255) of a Q2_K, Q3_K or TQ2_0 block: bits 2s, 2s + 1 of qs[32n + l] for
// i = 128n + 32s + l.
int two_bit_code(const uint8_t* qs, int i) { return (qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3; }

// Q3_K's signed code (-4..3) of value i: the 2-bit code, less 4 where bit i / 32 of hmask[i % 32] is clear.
int q3_k_code(const BlockQ3_K& b, int i) { return two_bit_code(b.qs, i) - ((b.hmask[i % 32] >> (i / 32)) & 1 ? 0 : 4); }

// Q3_K's signed scale (sc - 32, sc 6-bit) of sub-block s (0..15).
int q3_k_scale(const BlockQ3_K& b, int s) {
  const int low = s < 8 ? b.scales[s] & 15 : b.scales[s - 8] >> 4;
  const int high = (b.scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return (low | high << 4) - 32;
}

// TQ1_0's signed code (q - 1, in -1..1) of value i: trit n of a byte b is ((b * 3^n mod 256) * 3) >> 8, the byte and
// n as quant_formats.h lays them out.
int tq1_0_code(const BlockTq1_0& b, int i) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const uint8_t byte = i < 160 ? b.qs[i % 32] : i < 240 ? b.qs[32 + (i - 160) % 16] : b.qh[(i - 240) % 4];
  const int n = i < 160 ? i / 32 : i < 240 ? (i - 160) / 16 : (i - 240) / 4;
  const auto shifted = static_cast<uint8_t>(byte * kPow3[n]);
  return ((shifted * 3) >> 8) - 1;
}

// IQ4_XS's 6-bit scale ls of sub-block ib (0..7).
int iq4_xs_scale(const BlockIq4Xs& b, int ib) {
  return ((b.scales_l[ib / 2] >> 4 * (ib % 2)) & 15) | (((b.scales_h >> 2 * ib) & 3) << 4);
}

}  // namespace

void dequantize_block_iq4_nl_ref(const std::byte* block, float* out) {
  const auto b = load_block<BlockIq4Nl>(block);
  const float d = f16_to_float(b.d);
  for (int j = 0; j < 16; ++j) {
    out[j] = d * static_cast<float>(kIq4nlValues[b.qs[j] & 15]);
    out[j + 16] = d * static_cast<float>(kIq4nlValues[b.qs[j] >> 4]);
  }
}

void dequantize_block_iq4_xs_ref(const std::byte* block, float* out) {
  const auto b = load_block<BlockIq4Xs>(block);
  const float d = f16_to_float(b.d);
  for (int ib = 0; ib < 8; ++ib) {
    const float dl = d * static_cast<float>(iq4_xs_scale(b, ib) - 32);
    for (int j = 0; j < 16; ++j) {
      out[32 * ib + j] = dl * static_cast<float>(kIq4nlValues[b.qs[16 * ib + j] & 15]);
      out[32 * ib + j + 16] = dl * static_cast<float>(kIq4nlValues[b.qs[16 * ib + j] >> 4]);
    }
  }
}

void dequantize_block_q2_k_ref(const std::byte* block, float* out) {
  const auto b = load_block<BlockQ2_K>(block);
  const float d = f16_to_float(b.d), dmin = f16_to_float(b.dmin);
  for (int i = 0; i < 256; ++i) {
    const float scale = d * static_cast<float>(b.scales[i / 16] & 15), min = dmin * static_cast<float>(b.scales[i / 16] >> 4);
    out[i] = scale * static_cast<float>(two_bit_code(b.qs, i)) - min;
  }
}

void dequantize_block_q3_k_ref(const std::byte* block, float* out) {
  const auto b = load_block<BlockQ3_K>(block);
  const float d = f16_to_float(b.d);
  for (int i = 0; i < 256; ++i) out[i] = d * static_cast<float>(q3_k_scale(b, i / 16)) * static_cast<float>(q3_k_code(b, i));
}

void dequantize_block_tq1_0_ref(const std::byte* block, float* out) {
  const auto b = load_block<BlockTq1_0>(block);
  const float d = f16_to_float(b.d);
  for (int i = 0; i < 256; ++i) out[i] = static_cast<float>(tq1_0_code(b, i)) * d;
}

void dequantize_block_tq2_0_ref(const std::byte* block, float* out) {
  const auto b = load_block<BlockTq2_0>(block);
  const float d = f16_to_float(b.d);
  for (int i = 0; i < 256; ++i) out[i] = static_cast<float>(two_bit_code(b.qs, i) - 1) * d;
}

// The IQ grid types as gguf-py's dequantize_blocks writes them: the scale, then grid value and sign, in floats.
void dequantize_block_iq_ref(uint32_t type, const std::byte* block, float* out) {
  using kernels::iq_signs7;
  auto sign = [](uint32_t signs, int j) { return (signs >> j) & 1 ? -1.0f : 1.0f; };
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kIQ2_XXS: {
      const auto b = load_block<BlockIq2Xxs>(block);
      const float d = f16_to_float(b.d);
      for (int i = 0; i < 256; ++i) {
        const int s = i / 32, l = i % 32 / 8;
        const uint32_t aux = b.qs[4 * s + 2] | (uint32_t{b.qs[4 * s + 3]} << 16);
        const int index = (l < 2 ? b.qs[4 * s] : b.qs[4 * s + 1]) >> (8 * (l % 2)) & 255;
        const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.25f;
        out[i] = db * static_cast<float>(kernels::kIq2XxsGrid.v[index][i % 8]) * sign(iq_signs7(aux >> (7 * l)), i % 8);
      }
      return;
    }
    case GgmlType::kIQ2_XS:
    case GgmlType::kIQ2_S: {
      const bool xs = static_cast<GgmlType>(type) == GgmlType::kIQ2_XS;
      const auto bx = xs ? load_block<BlockIq2Xs>(block) : BlockIq2Xs{};
      const auto bs = xs ? BlockIq2S{} : load_block<BlockIq2S>(block);
      const float d = f16_to_float(xs ? bx.d : bs.d);
      const uint8_t* scales = xs ? bx.scales : bs.scales;
      for (int i = 0; i < 256; ++i) {
        const int g = i / 8;
        const float db = d * (0.5f + static_cast<float>((scales[i / 32] >> (4 * (i / 16 % 2))) & 15)) * 0.25f;
        const int index = xs ? bx.qs[g] & 511 : bs.qs[g] | (((bs.qh[g / 4] >> (2 * (g % 4))) & 3) << 8);
        const uint32_t signs = xs ? iq_signs7(bx.qs[g] >> 9) : bs.qs[32 + g];
        const int8_t v = xs ? kernels::kIq2XsGrid.v[index][i % 8] : kernels::kIq2SGrid.v[index][i % 8];
        out[i] = db * static_cast<float>(v) * sign(signs, i % 8);
      }
      return;
    }
    case GgmlType::kIQ3_XXS: {
      const auto b = load_block<BlockIq3Xxs>(block);
      const float d = f16_to_float(b.d);
      for (int i = 0; i < 256; ++i) {
        uint32_t aux;
        std::memcpy(&aux, b.qs + 64 + 4 * (i / 32), 4);
        const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.5f;
        const float v = kernels::kIq3XxsGrid.v[b.qs[i / 4]][i % 4];
        out[i] = db * v * sign(iq_signs7(aux >> (7 * (i % 32 / 8))), i % 8);
      }
      return;
    }
    case GgmlType::kIQ3_S: {
      const auto b = load_block<BlockIq3S>(block);
      const float d = f16_to_float(b.d);
      for (int i = 0; i < 256; ++i) {
        const int g = i / 4;
        const float db = d * static_cast<float>(1 + 2 * ((b.scales[i / 64] >> (4 * (i / 32 % 2))) & 15));
        const float v = kernels::kIq3SGrid.v[b.qs[g] | (((b.qh[g / 8] >> (g % 8)) & 1) << 8)][i % 4];
        out[i] = db * v * sign(b.signs[i / 8], i % 8);
      }
      return;
    }
    case GgmlType::kIQ1_S: {
      const auto b = load_block<BlockIq1S>(block);
      const float d = f16_to_float(b.d);
      for (int i = 0; i < 256; ++i) {
        const int g = i / 8;
        const uint32_t qh = b.qh[i / 32];
        const float dl = d * static_cast<float>(2 * ((qh >> 12) & 7) + 1);
        const float delta = qh & 0x8000 ? -0.125f : 0.125f;
        const int index = b.qs[g] | (((qh >> (3 * (g % 4))) & 7) << 8);
        out[i] = dl * (static_cast<float>(kernels::kIq1SGrid.v[index][i % 8]) + delta);
      }
      return;
    }
    case GgmlType::kIQ1_M: {
      const auto b = load_block<BlockIq1M>(block);
      uint16_t sc[4];
      std::memcpy(sc, b.scales, 8);
      const float d = f16_to_float(static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                                         ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000)));
      for (int i = 0; i < 256; ++i) {
        const int g = i / 8, s = i / 16;
        const float dl = d * static_cast<float>(2 * ((sc[s / 4] >> (3 * (s % 4))) & 7) + 1);
        const int nibble = (b.qh[g / 2] >> (4 * (g % 2))) & 15;
        const float delta = nibble & 8 ? -0.125f : 0.125f;
        out[i] = dl * (static_cast<float>(kernels::kIq1SGrid.v[b.qs[g] | ((nibble & 7) << 8)][i % 8]) + delta);
      }
      return;
    }
    default: HYMOE_CHECK(false, "ggml type ", ggml_type_name(type), " is not an IQ grid type");
  }
}

void dequantize_block_q4_1_ref(const std::byte* block, float* out) {
  const auto b = load_block<BlockQ4_1>(block);
  const float d = f16_to_float(b.d), m = f16_to_float(b.m);
  for (int j = 0; j < 16; ++j) {
    out[j] = d * static_cast<float>(b.qs[j] & 15) + m;
    out[j + 16] = d * static_cast<float>(b.qs[j] >> 4) + m;
  }
}

void dequantize_block_q5_0_ref(const std::byte* block, float* out) {
  const auto b = load_block<BlockQ5_0>(block);
  const float d = f16_to_float(b.d);
  for (int i = 0; i < 32; ++i) out[i] = d * static_cast<float>(q5_code(b.qs, b.qh, i) - 16);
}

void dequantize_block_q5_1_ref(const std::byte* block, float* out) {
  const auto b = load_block<BlockQ5_1>(block);
  const float d = f16_to_float(b.d), m = f16_to_float(b.m);
  for (int i = 0; i < 32; ++i) out[i] = d * static_cast<float>(q5_code(b.qs, b.qh, i)) + m;
}

void dequantize_block_q8_0_ref(const std::byte* block, float* out) {
  const auto b = load_block<BlockQ8_0>(block);
  const float d = f16_to_float(b.d);
  for (int i = 0; i < 32; ++i) out[i] = d * static_cast<float>(b.qs[i]);
}

void dequantize_block_q4_0_ref(const std::byte* block, float* out) {
  const auto b = load_block<BlockQ4_0>(block);
  const float d = f16_to_float(b.d);
  for (int j = 0; j < 16; ++j) {
    out[j] = d * static_cast<float>((b.qs[j] & 15) - 8);
    out[j + 16] = d * static_cast<float>((b.qs[j] >> 4) - 8);
  }
}

void dequantize_block_q4_k_ref(const std::byte* block, float* out) {
  const auto b = load_block<BlockQ4_K>(block);
  decode_k_block(b.d, b.dmin, b.scales, b.qs, nullptr, out);
}

void dequantize_block_q5_k_ref(const std::byte* block, float* out) {
  const auto b = load_block<BlockQ5_K>(block);
  decode_k_block(b.d, b.dmin, b.scales, b.qs, b.qh, out);
}

void dequantize_block_q6_k_ref(const std::byte* block, float* out) {
  const auto b = load_block<BlockQ6_K>(block);
  const float d = f16_to_float(b.d);
  for (int i = 0; i < 256; ++i)
    out[i] = d * static_cast<float>(b.scales[i / 16]) * static_cast<float>(q6_k_code(b, i));
}

void dequantize_block_mxfp4_ref(const std::byte* block, float* out) {
  const auto b = load_block<BlockMxfp4>(block);
  // 2^(e - 128), subnormal for e = 0 and 1 (ldexp is exact there); kvalue 0 of code 8 gives +0, as ggml does.
  const float half_scale = b.e == 255 ? std::numeric_limits<float>::quiet_NaN() : std::ldexp(1.0f, b.e - 128);
  for (int j = 0; j < 16; ++j) {
    out[j] = static_cast<float>(kernels::kMxfp4Kvalues[b.qs[j] & 15]) * half_scale;
    out[j + 16] = static_cast<float>(kernels::kMxfp4Kvalues[b.qs[j] >> 4]) * half_scale;
  }
}

uint8_t mxfp4_block_code_pairs(const std::byte* block, uint8_t pairs[16]) {
  const auto b = load_block<BlockMxfp4>(block);
  auto code = [&b](int i) { return i < 16 ? b.qs[i] & 15 : b.qs[i - 16] >> 4; };
  for (int t = 0; t < 16; ++t) pairs[t] = static_cast<uint8_t>(code(2 * t) | code(2 * t + 1) << 4);
  return b.e;
}

int ggml_sub_block_values(uint32_t type) {
  const kernels::GgufBlockFormat* b = kernels::gguf_block_format_of_type(type);
  return b ? b->k_unit : 0;
}

bool ggml_block_has_offsets(uint32_t type) {
  const kernels::GgufBlockFormat* b = kernels::gguf_block_format_of_type(type);
  return b && b->offsets;
}

// The same reads of the block as the decoders above, stopping short of the final multiply.
void split_block_factors(uint32_t type, const std::byte* block, GgmlBlockFactors* out) {
  *out = {};
  if (type == static_cast<uint32_t>(GgmlType::kQ3_K) || type == static_cast<uint32_t>(GgmlType::kQ6_K)) {
    const bool q3 = type == static_cast<uint32_t>(GgmlType::kQ3_K);
    const auto b3 = q3 ? load_block<BlockQ3_K>(block) : BlockQ3_K{};
    const auto b6 = q3 ? BlockQ6_K{} : load_block<BlockQ6_K>(block);
    out->d = f16_to_float(q3 ? b3.d : b6.d);
    for (int s = 0; s < 16; ++s) out->sc[s] = static_cast<int8_t>(q3 ? q3_k_scale(b3, s) : b6.scales[s]);
    return;
  }
  if (type == static_cast<uint32_t>(GgmlType::kIQ4_XS)) {
    const auto b = load_block<BlockIq4Xs>(block);
    out->d = f16_to_float(b.d);
    for (int ib = 0; ib < 8; ++ib) out->sc[ib] = static_cast<int8_t>(iq4_xs_scale(b, ib) - 32);
    return;
  }
  const bool q4 = type == static_cast<uint32_t>(GgmlType::kQ4_K), q5 = type == static_cast<uint32_t>(GgmlType::kQ5_K);
  HYMOE_CHECK(q4 || q5, "split_block_factors: ggml type ", type, " is not Q3_K, Q4_K, Q5_K, Q6_K or IQ4_XS");
  // Q5_K's block begins as Q4_K's: d, dmin, scales.
  static_assert(offsetof(BlockQ4_K, dmin) == offsetof(BlockQ5_K, dmin) &&
                offsetof(BlockQ4_K, scales) == offsetof(BlockQ5_K, scales));
  const auto b = load_block<BlockQ4_K>(block);
  out->d = f16_to_float(b.d);
  out->dmin = f16_to_float(b.dmin);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    unpack_k_scales(b.scales, j, &sc, &m);
    out->sc[j] = static_cast<int8_t>(sc);
    out->m[j] = static_cast<uint8_t>(m);
  }
}

void split_block_ref(uint32_t type, const std::byte* block, GgmlBlockCodes* out) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kQ8_0: {
      const auto b = load_block<BlockQ8_0>(block);
      out->scale[0] = f16_to_float(b.d);
      for (int i = 0; i < 32; ++i) out->code[i] = b.qs[i];
      return;
    }
    case GgmlType::kQ4_0: {
      const auto b = load_block<BlockQ4_0>(block);
      out->scale[0] = f16_to_float(b.d);
      for (int j = 0; j < 16; ++j) {
        out->code[j] = static_cast<int8_t>((b.qs[j] & 15) - 8);
        out->code[j + 16] = static_cast<int8_t>((b.qs[j] >> 4) - 8);
      }
      return;
    }
    case GgmlType::kQ4_1: {
      const auto b = load_block<BlockQ4_1>(block);
      out->scale[0] = f16_to_float(b.d);
      out->offset[0] = f16_to_float(b.m);
      for (int j = 0; j < 16; ++j) {
        out->code[j] = static_cast<int8_t>(b.qs[j] & 15);
        out->code[j + 16] = static_cast<int8_t>(b.qs[j] >> 4);
      }
      return;
    }
    case GgmlType::kQ5_0: {
      const auto b = load_block<BlockQ5_0>(block);
      out->scale[0] = f16_to_float(b.d);
      for (int i = 0; i < 32; ++i) out->code[i] = static_cast<int8_t>(q5_code(b.qs, b.qh, i) - 16);
      return;
    }
    case GgmlType::kQ5_1: {
      const auto b = load_block<BlockQ5_1>(block);
      out->scale[0] = f16_to_float(b.d);
      out->offset[0] = f16_to_float(b.m);
      for (int i = 0; i < 32; ++i) out->code[i] = static_cast<int8_t>(q5_code(b.qs, b.qh, i));
      return;
    }
    case GgmlType::kIQ4_NL: {
      const auto b = load_block<BlockIq4Nl>(block);
      out->scale[0] = f16_to_float(b.d);
      for (int j = 0; j < 16; ++j) {
        out->code[j] = static_cast<int8_t>(b.qs[j] & 15);
        out->code[j + 16] = static_cast<int8_t>(b.qs[j] >> 4);
      }
      return;
    }
    case GgmlType::kIQ4_XS: {
      const auto b = load_block<BlockIq4Xs>(block);
      const float d = f16_to_float(b.d);
      for (int ib = 0; ib < 8; ++ib) {
        out->scale[ib] = d * static_cast<float>(iq4_xs_scale(b, ib) - 32);
        for (int j = 0; j < 16; ++j) {
          out->code[32 * ib + j] = static_cast<int8_t>(b.qs[16 * ib + j] & 15);
          out->code[32 * ib + j + 16] = static_cast<int8_t>(b.qs[16 * ib + j] >> 4);
        }
      }
      return;
    }
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K: {
      const bool q5 = static_cast<GgmlType>(type) == GgmlType::kQ5_K;
      const auto b4 = q5 ? BlockQ4_K{} : load_block<BlockQ4_K>(block);
      const auto b5 = q5 ? load_block<BlockQ5_K>(block) : BlockQ5_K{};
      const uint16_t d_bits = q5 ? b5.d : b4.d, dmin_bits = q5 ? b5.dmin : b4.dmin;
      const uint8_t* scales = q5 ? b5.scales : b4.scales;
      const uint8_t* qs = q5 ? b5.qs : b4.qs;
      const float d = f16_to_float(d_bits), dmin = f16_to_float(dmin_bits);
      for (int j = 0; j < 8; ++j) {
        int sc, m;
        unpack_k_scales(scales, j, &sc, &m);
        out->scale[j] = d * static_cast<float>(sc);
        out->offset[j] = -(dmin * static_cast<float>(m));
        for (int l = 0; l < 32; ++l) {
          int q = k_nibble(qs, 32 * j + l);
          if (q5) q |= ((b5.qh[l] >> j) & 1) << 4;
          out->code[32 * j + l] = static_cast<int8_t>(q);
        }
      }
      return;
    }
    case GgmlType::kQ2_K: {
      const auto b = load_block<BlockQ2_K>(block);
      const float d = f16_to_float(b.d), dmin = f16_to_float(b.dmin);
      for (int s = 0; s < 16; ++s) {
        out->scale[s] = d * static_cast<float>(b.scales[s] & 15);
        out->offset[s] = -(dmin * static_cast<float>(b.scales[s] >> 4));
      }
      for (int i = 0; i < 256; ++i) out->code[i] = static_cast<int8_t>(two_bit_code(b.qs, i));
      return;
    }
    case GgmlType::kQ3_K: {
      const auto b = load_block<BlockQ3_K>(block);
      const float d = f16_to_float(b.d);
      for (int s = 0; s < 16; ++s) out->scale[s] = d * static_cast<float>(q3_k_scale(b, s));
      for (int i = 0; i < 256; ++i) out->code[i] = static_cast<int8_t>(q3_k_code(b, i));
      return;
    }
    case GgmlType::kTQ1_0: {
      const auto b = load_block<BlockTq1_0>(block);
      for (int s = 0; s < 8; ++s) out->scale[s] = f16_to_float(b.d);
      for (int i = 0; i < 256; ++i) out->code[i] = static_cast<int8_t>(tq1_0_code(b, i));
      return;
    }
    case GgmlType::kTQ2_0: {
      const auto b = load_block<BlockTq2_0>(block);
      for (int s = 0; s < 8; ++s) out->scale[s] = f16_to_float(b.d);
      for (int i = 0; i < 256; ++i) out->code[i] = static_cast<int8_t>(two_bit_code(b.qs, i) - 1);
      return;
    }
    case GgmlType::kQ6_K: {
      const auto b = load_block<BlockQ6_K>(block);
      const float d = f16_to_float(b.d);
      for (int s = 0; s < 16; ++s) out->scale[s] = d * static_cast<float>(b.scales[s]);
      for (int i = 0; i < 256; ++i) out->code[i] = static_cast<int8_t>(q6_k_code(b, i));
      return;
    }
    default:
      if (kernels::is_iq_grid_type(type)) return kernels::split_iq_block(type, block, out);
      break;
  }
  HYMOE_CHECK(false, "no block codes for ggml type ", ggml_type_name(type));
}

bool can_dequantize(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kMXFP4: return true;
    default: return kernels::gguf_block_format_of_type(type) != nullptr;
  }
}

std::string decodable_type_names() { return "F32, F16, BF16, " + kernels::gguf_runnable_type_names(); }

void dequantize_row_ref(uint32_t type, const std::byte* src, float* out, int64_t n) {
  HYMOE_CHECK(can_dequantize(type), "no decoder for ggml type ", ggml_type_name(type));
  const GgmlTypeTraits& traits = *ggml_type_traits(type);
  HYMOE_CHECK(n >= 0 && n % traits.block_values == 0, n, " values of ", traits.name);
  const int64_t blocks = n / traits.block_values;
  void (*decode)(const std::byte*, float*) = nullptr;
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32:
      if (n > 0) std::memcpy(out, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::kF16:
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t bits;
        std::memcpy(&bits, src + 2 * i, 2);
        out[i] = static_cast<GgmlType>(type) == GgmlType::kF16 ? f16_to_float(bits) : bf16_to_float(bits);
      }
      return;
    case GgmlType::kQ8_0: decode = dequantize_block_q8_0_ref; break;
    case GgmlType::kQ4_0: decode = dequantize_block_q4_0_ref; break;
    case GgmlType::kQ4_1: decode = dequantize_block_q4_1_ref; break;
    case GgmlType::kQ5_0: decode = dequantize_block_q5_0_ref; break;
    case GgmlType::kQ5_1: decode = dequantize_block_q5_1_ref; break;
    case GgmlType::kIQ4_NL: decode = dequantize_block_iq4_nl_ref; break;
    case GgmlType::kIQ4_XS: decode = dequantize_block_iq4_xs_ref; break;
    case GgmlType::kQ2_K: decode = dequantize_block_q2_k_ref; break;
    case GgmlType::kQ3_K: decode = dequantize_block_q3_k_ref; break;
    case GgmlType::kQ4_K: decode = dequantize_block_q4_k_ref; break;
    case GgmlType::kTQ1_0: decode = dequantize_block_tq1_0_ref; break;
    case GgmlType::kTQ2_0: decode = dequantize_block_tq2_0_ref; break;
    case GgmlType::kQ5_K: decode = dequantize_block_q5_k_ref; break;
    case GgmlType::kQ6_K: decode = dequantize_block_q6_k_ref; break;
    case GgmlType::kMXFP4: decode = dequantize_block_mxfp4_ref; break;
    default:
      if (kernels::is_iq_grid_type(type)) {
        for (int64_t b = 0; b < blocks; ++b)
          dequantize_block_iq_ref(type, src + b * traits.block_bytes, out + b * traits.block_values);
        return;
      }
      break;
  }
  HYMOE_CHECK(decode, "the registry lists ggml type ", ggml_type_name(type), " without a decoder here");
  for (int64_t b = 0; b < blocks; ++b) decode(src + b * traits.block_bytes, out + b * traits.block_values);
}

}  // namespace hymoe
