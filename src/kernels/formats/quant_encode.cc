// Simple encoders of GGUF blocks (quant_encode.h): per block, scales from the range of its values, codes by
// round-to-nearest against the scales as stored (f16, 3- to 8-bit), clamped to the code range (the IQ types: to the
// nearest grid entry). One per type of the kernels' registry (src/kernels/formats/gguf_formats.inc).
#include "hymoe/quant_encode.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "hymoe/dtype.h"
#include "hymoe/error.h"
#include "hymoe/quant_formats.h"
#include "kernels/formats/iq_blocks.h"

namespace hymoe {
namespace {

int round_clamp(float v, int lo, int hi) {
  return static_cast<int>(std::clamp(std::nearbyint(v), static_cast<float>(lo), static_cast<float>(hi)));
}
float inverse_or_zero(float v) { return v != 0.0f ? 1.0f / v : 0.0f; }

void encode_q8_0(const float* x, BlockQ8_0* b) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::abs(x[i]));
  b->d = float_to_f16(amax / 127.0f);
  const float inv = inverse_or_zero(f16_to_float(b->d));
  for (int i = 0; i < 32; ++i) b->qs[i] = static_cast<int8_t>(round_clamp(x[i] * inv, -127, 127));
}

// As ggml: d = (the value of largest magnitude) / -8, so that value gets code 0 and d has either sign.
void encode_q4_0(const float* x, BlockQ4_0* b) {
  float max = 0.0f;
  for (int i = 0; i < 32; ++i)
    if (std::abs(x[i]) > std::abs(max)) max = x[i];
  b->d = float_to_f16(max / -8.0f);
  const float inv = inverse_or_zero(f16_to_float(b->d));
  for (int j = 0; j < 16; ++j)
    b->qs[j] = static_cast<uint8_t>(round_clamp(x[j] * inv + 8.0f, 0, 15) |
                                    (round_clamp(x[j + 16] * inv + 8.0f, 0, 15) << 4));
}

// Q4_1 / Q5_1 (levels 15 or 31): x ~ d*q + m with m the block's minimum, as ggml's reference quantizer does.
// Q5_0: as Q4_0 with d = max / -16. qh collects the fifth bits (bit i of value i).
void encode_offset_block(const float* x, int levels, uint16_t* d_bits, uint16_t* m_bits, uint8_t* qs, uint8_t* qh) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < 32; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  *d_bits = float_to_f16((hi - lo) / static_cast<float>(levels));
  *m_bits = float_to_f16(lo);
  const float inv = inverse_or_zero(f16_to_float(*d_bits)), m = f16_to_float(*m_bits);
  uint32_t high = 0;
  std::memset(qs, 0, 16);
  for (int i = 0; i < 32; ++i) {
    const int q = round_clamp((x[i] - m) * inv, 0, levels);
    qs[i % 16] |= static_cast<uint8_t>((q & 15) << (i < 16 ? 0 : 4));
    high |= static_cast<uint32_t>(q >> 4) << i;
  }
  if (qh) std::memcpy(qh, &high, 4);
}
void encode_q5_0(const float* x, BlockQ5_0* b) {
  float max = 0.0f;
  for (int i = 0; i < 32; ++i)
    if (std::abs(x[i]) > std::abs(max)) max = x[i];
  b->d = float_to_f16(max / -16.0f);
  const float inv = inverse_or_zero(f16_to_float(b->d));
  uint32_t high = 0;
  std::memset(b->qs, 0, sizeof b->qs);
  for (int i = 0; i < 32; ++i) {
    const int q = round_clamp(x[i] * inv + 16.0f, 0, 31);
    b->qs[i % 16] |= static_cast<uint8_t>((q & 15) << (i < 16 ? 0 : 4));
    high |= static_cast<uint32_t>(q >> 4) << i;
  }
  std::memcpy(b->qh, &high, 4);
}

// The IQ4 types: the index of the value nearest x / d (the first of two equally near).
uint8_t nearest_iq4(float v) {
  int best = 0;
  for (int i = 1; i < 16; ++i)
    if (std::abs(v - static_cast<float>(kIq4nlValues[i])) < std::abs(v - static_cast<float>(kIq4nlValues[best]))) best = i;
  return static_cast<uint8_t>(best);
}
// 32 values against scale d: IQ4_NL's and each IQ4_XS sub-block's nibbles (value j low, j + 16 high).
void encode_iq4_nibbles(const float* x, float d, uint8_t* qs) {
  const float inv = inverse_or_zero(d);
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(nearest_iq4(x[j] * inv) | nearest_iq4(x[j + 16] * inv) << 4);
}
// As ggml: d = (the value of largest magnitude) / -127, so that value gets the first table entry.
float iq4_block_scale(const float* x) {
  float max = 0.0f;
  for (int i = 0; i < 32; ++i)
    if (std::abs(x[i]) > std::abs(max)) max = x[i];
  return max / -127.0f;
}
void encode_iq4_nl(const float* x, BlockIq4Nl* b) {
  b->d = float_to_f16(iq4_block_scale(x));
  encode_iq4_nibbles(x, f16_to_float(b->d), b->qs);
}
// IQ4_XS: d from the largest sub-block scale, ls = round(scale / d) + 32 in 0..63.
void encode_iq4_xs(const float* x, BlockIq4Xs* b) {
  float scale[8], amax = 0.0f;
  for (int ib = 0; ib < 8; ++ib) {
    scale[ib] = iq4_block_scale(x + 32 * ib);
    amax = std::max(amax, std::abs(scale[ib]));
  }
  b->d = float_to_f16(amax / 31.0f);
  const float d = f16_to_float(b->d);
  b->scales_h = 0;
  std::memset(b->scales_l, 0, sizeof b->scales_l);
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = round_clamp(scale[ib] * inverse_or_zero(d), -32, 31) + 32;
    b->scales_l[ib / 2] |= static_cast<uint8_t>((ls & 15) << 4 * (ib % 2));
    b->scales_h |= static_cast<uint16_t>((ls >> 4) << 2 * ib);
    encode_iq4_nibbles(x + 32 * ib, d * static_cast<float>(ls - 32), b->qs + 16 * ib);
  }
}

// Q4_K / Q5_K (levels 15 or 31): x ~ d*sc*q - dmin*m per sub-block of 32, sc and m 6-bit.
void encode_k(const float* x, int levels, uint16_t* d_bits, uint16_t* dmin_bits, uint8_t* scales, uint8_t* qs,
              uint8_t* qh) {
  float step[8], low[8];  // per sub-block: value step and -min (>= 0)
  float max_step = 0.0f, max_low = 0.0f;
  for (int j = 0; j < 8; ++j) {
    float lo = 0.0f, hi = 0.0f;
    for (int l = 0; l < 32; ++l) {
      lo = std::min(lo, x[32 * j + l]);
      hi = std::max(hi, x[32 * j + l]);
    }
    step[j] = (hi - lo) / static_cast<float>(levels);
    low[j] = -lo;
    max_step = std::max(max_step, step[j]);
    max_low = std::max(max_low, low[j]);
  }
  *d_bits = float_to_f16(max_step / 63.0f);
  *dmin_bits = float_to_f16(max_low / 63.0f);
  const float d = f16_to_float(*d_bits), dmin = f16_to_float(*dmin_bits);
  std::memset(scales, 0, 12);
  std::memset(qs, 0, 128);
  if (qh) std::memset(qh, 0, 32);
  for (int j = 0; j < 8; ++j) {
    const int sc = round_clamp(step[j] * inverse_or_zero(d), 0, 63), m = round_clamp(low[j] * inverse_or_zero(dmin), 0, 63);
    if (j < 4) {
      scales[j] = static_cast<uint8_t>(sc);
      scales[j + 4] = static_cast<uint8_t>(m);
    } else {  // low four bits in bytes 8-11, high two bits on top of bytes 0-7
      scales[j + 4] = static_cast<uint8_t>((sc & 15) | ((m & 15) << 4));
      scales[j - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
      scales[j] |= static_cast<uint8_t>((m >> 4) << 6);
    }
    const float scale = d * static_cast<float>(sc), min = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      const int q = round_clamp((x[32 * j + l] + min) * inverse_or_zero(scale), 0, levels);
      const int i = 32 * j + l, chunk = i / 64;  // see quant_ref.cc's k_nibble
      qs[32 * chunk + l] |= static_cast<uint8_t>((q & 15) << (j % 2 == 0 ? 0 : 4));
      if (qh) qh[l] |= static_cast<uint8_t>(((q >> 4) & 1) << j);
    }
  }
}

// Puts 2-bit code q of value i of a Q2_K, Q3_K or TQ2_0 block (see quant_ref.cc's two_bit_code).
void put_two_bit_code(uint8_t* qs, int i, int q) {
  qs[32 * (i / 128) + i % 32] |= static_cast<uint8_t>((q & 3) << (2 * ((i % 128) / 32)));
}

// Q2_K: x ~ d*sc*q - dmin*m per sub-block of 16, q 2-bit, sc and m 4-bit.
void encode_q2_k(const float* x, BlockQ2_K* b) {
  float step[16], low[16], max_step = 0.0f, max_low = 0.0f;
  for (int s = 0; s < 16; ++s) {
    float lo = 0.0f, hi = 0.0f;
    for (int l = 0; l < 16; ++l) {
      lo = std::min(lo, x[16 * s + l]);
      hi = std::max(hi, x[16 * s + l]);
    }
    step[s] = (hi - lo) / 3.0f;
    low[s] = -lo;
    max_step = std::max(max_step, step[s]);
    max_low = std::max(max_low, low[s]);
  }
  b->d = float_to_f16(max_step / 15.0f);
  b->dmin = float_to_f16(max_low / 15.0f);
  const float d = f16_to_float(b->d), dmin = f16_to_float(b->dmin);
  std::memset(b->qs, 0, sizeof b->qs);
  for (int s = 0; s < 16; ++s) {
    const int sc = round_clamp(step[s] * inverse_or_zero(d), 0, 15), m = round_clamp(low[s] * inverse_or_zero(dmin), 0, 15);
    b->scales[s] = static_cast<uint8_t>(sc | m << 4);
    const float scale = d * static_cast<float>(sc), min = dmin * static_cast<float>(m);
    for (int l = 0; l < 16; ++l)
      put_two_bit_code(b->qs, 16 * s + l, round_clamp((x[16 * s + l] + min) * inverse_or_zero(scale), 0, 3));
  }
}

// Q3_K: x ~ d*(sc - 32)*q per sub-block of 16, q in -4..3 (2 bits plus the hmask bit), sc 6-bit (sc - 32 of either
// sign).
void encode_q3_k(const float* x, BlockQ3_K* b) {
  // As Q4_0: each sub-block's scale is its value of largest magnitude over -4, so that value gets code -4.
  float step[16], max_step = 0.0f;
  for (int s = 0; s < 16; ++s) {
    float max = 0.0f;
    for (int l = 0; l < 16; ++l)
      if (std::abs(x[16 * s + l]) > std::abs(max)) max = x[16 * s + l];
    step[s] = max / -4.0f;
    max_step = std::max(max_step, std::abs(step[s]));
  }
  b->d = float_to_f16(max_step / 32.0f);
  const float d = f16_to_float(b->d);
  std::memset(b->hmask, 0, sizeof b->hmask);
  std::memset(b->qs, 0, sizeof b->qs);
  std::memset(b->scales, 0, sizeof b->scales);
  for (int s = 0; s < 16; ++s) {
    const int sc = round_clamp(step[s] * inverse_or_zero(d), -32, 31) + 32;  // see quant_ref.cc's q3_k_scale
    b->scales[s % 8] |= static_cast<uint8_t>((sc & 15) << (s < 8 ? 0 : 4));
    b->scales[8 + s % 4] |= static_cast<uint8_t>((sc >> 4) << (2 * (s / 4)));
    const float scale = d * static_cast<float>(sc - 32);
    for (int l = 0; l < 16; ++l) {
      const int i = 16 * s + l, q = round_clamp(x[i] * inverse_or_zero(scale), -4, 3);
      put_two_bit_code(b->qs, i, q);  // q & 3: q + 4 for q < 0, whose hmask bit stays clear
      if (q >= 0) b->hmask[i % 32] |= static_cast<uint8_t>(1 << (i / 32));
    }
  }
}

// The ternary types: d = the largest magnitude, q = round(x / d) + 1 in 0..2.
float tq_scale(const float* x) {
  float amax = 0.0f;
  for (int i = 0; i < 256; ++i) amax = std::max(amax, std::abs(x[i]));
  return amax;
}
void encode_tq2_0(const float* x, BlockTq2_0* b) {
  b->d = float_to_f16(tq_scale(x));
  const float inv = inverse_or_zero(f16_to_float(b->d));
  std::memset(b->qs, 0, sizeof b->qs);
  for (int i = 0; i < 256; ++i) put_two_bit_code(b->qs, i, round_clamp(x[i] * inv, -1, 1) + 1);
}
// TQ1_0 packs trits t[0..count) (the first most significant, count 5, or 4 and a zero fifth) as the byte
// ceil(v * 256 / 243), v their base-3 value, so that trit n reads back as ((byte * 3^n mod 256) * 3) >> 8.
uint8_t pack_trits(const int* t, int count) {
  int v = 0;
  for (int n = 0; n < 5; ++n) v = 3 * v + (n < count ? t[n] : 0);
  return static_cast<uint8_t>((v * 256 + 242) / 243);
}
void encode_tq1_0(const float* x, BlockTq1_0* b) {
  b->d = float_to_f16(tq_scale(x));
  const float inv = inverse_or_zero(f16_to_float(b->d));
  int t[256];
  for (int i = 0; i < 256; ++i) t[i] = round_clamp(x[i] * inv, -1, 1) + 1;
  int group[5];
  for (int m = 0; m < 32; ++m) {  // values 0-159: trit n of qs[m] is value 32n + m
    for (int n = 0; n < 5; ++n) group[n] = t[32 * n + m];
    b->qs[m] = pack_trits(group, 5);
  }
  for (int m = 0; m < 16; ++m) {  // values 160-239: trit n of qs[32 + m] is value 160 + 16n + m
    for (int n = 0; n < 5; ++n) group[n] = t[160 + 16 * n + m];
    b->qs[32 + m] = pack_trits(group, 5);
  }
  for (int m = 0; m < 4; ++m) {  // values 240-255: trit n of qh[m] is value 240 + 4n + m
    for (int n = 0; n < 4; ++n) group[n] = t[240 + 4 * n + m];
    b->qh[m] = pack_trits(group, 4);
  }
}

// Q6_K: x ~ d*sc*(q - 32) per sub-block of 16, sc signed 8-bit.
void encode_q6_k(const float* x, BlockQ6_K* b) {
  float step[16], max_step = 0.0f;
  for (int s = 0; s < 16; ++s) {
    float amax = 0.0f;
    for (int l = 0; l < 16; ++l) amax = std::max(amax, std::abs(x[16 * s + l]));
    step[s] = amax / 31.0f;
    max_step = std::max(max_step, step[s]);
  }
  b->d = float_to_f16(max_step / 127.0f);
  const float d = f16_to_float(b->d);
  std::memset(b->ql, 0, sizeof b->ql);
  std::memset(b->qh, 0, sizeof b->qh);
  for (int s = 0; s < 16; ++s) b->scales[s] = static_cast<int8_t>(round_clamp(step[s] * inverse_or_zero(d), -128, 127));
  for (int i = 0; i < 256; ++i) {
    const float scale = d * static_cast<float>(b->scales[i / 16]);
    const int q = round_clamp(x[i] * inverse_or_zero(scale), -32, 31) + 32;
    const int n = i / 128, k = (i % 128) / 32, l = i % 32;  // see quant_ref.cc's q6_k_code
    b->ql[64 * n + 32 * (k & 1) + l] |= static_cast<uint8_t>((q & 15) << (k < 2 ? 0 : 4));
    b->qh[32 * n + l] |= static_cast<uint8_t>((q >> 4) << (2 * k));
  }
}

// The IQ grid types: per sub-block a scale from its largest magnitude (the odd multiplier rounded to nearest under
// the block's f16 d), then per group each element's nearest grid value (and sign) and, for that tuple, the nearest
// entry of the grid (a table over every tuple, built once per grid). The signs of 7-bit fields keep an even count by
// flipping the smallest element's, as the format demands.
template <int N, int C>
struct NearestIqEntry {
  int levels = 0;              // grid values
  std::vector<uint16_t> entry;  // by tuple: sum of element j's value index times levels^j
  NearestIqEntry(const kernels::IqGrid<N, C>& grid, const int8_t* values, int count) : levels(count) {
    int tuples = 1;
    for (int j = 0; j < C; ++j) tuples *= levels;
    entry.resize(static_cast<size_t>(tuples));
    for (int t = 0; t < tuples; ++t) {
      int best = 0;
      long best_err = -1;
      for (int e = 0; e < N; ++e) {
        long err = 0;
        for (int j = 0, r = t; j < C; ++j, r /= levels) {
          const long diff = values[r % levels] - grid.v[e][j];
          err += diff * diff;
        }
        if (best_err < 0 || err < best_err) best = e, best_err = err;
      }
      entry[static_cast<size_t>(t)] = static_cast<uint16_t>(best);
    }
  }
  // The entry nearest to targets t[0..C) (each matched to its nearest grid value first).
  int nearest(const float* t, const int8_t* values) const {
    int tuple = 0;
    for (int j = C - 1; j >= 0; --j) {
      int best = 0;
      for (int v = 1; v < levels; ++v)
        if (std::fabs(t[j] - values[v]) < std::fabs(t[j] - values[best])) best = v;
      tuple = tuple * levels + best;
    }
    return entry[static_cast<size_t>(tuple)];
  }
};

template <int N, int C>
const NearestIqEntry<N, C>& nearest_table(const kernels::IqGrid<N, C>& grid, const int8_t* values, int count) {
  static const NearestIqEntry<N, C> table(grid, values, count);
  return table;
}

void encode_iq(GgmlType type, const float* x, std::byte* out) {
  using namespace kernels;
  const bool iq1 = type == GgmlType::kIQ1_S || type == GgmlType::kIQ1_M;
  const int sub = ggml_sub_block_values(static_cast<uint32_t>(type)), subs = 256 / sub;
  const float factor = type == GgmlType::kIQ3_XXS ? 0.25f : type == GgmlType::kIQ3_S ? 1.0f : 0.125f;
  const int ls_max = iq1 ? 7 : 15;
  const float code_max = iq1 ? 9 : type == GgmlType::kIQ3_XXS ? 62 : type == GgmlType::kIQ3_S ? 15 : 43;
  float want[16], want_max = 0;
  for (int s = 0; s < subs; ++s) {
    float amax = 0;
    for (int i = 0; i < sub; ++i) amax = std::max(amax, std::fabs(x[s * sub + i]));
    want[s] = amax / code_max;
    want_max = std::max(want_max, want[s]);
  }
  const uint16_t d_bits = float_to_f16(want_max / (static_cast<float>(2 * ls_max + 1) * factor));
  const float d = f16_to_float(d_bits);
  int ls[16];
  float inv_scale[16];
  for (int s = 0; s < subs; ++s) {
    ls[s] = round_clamp((want[s] * inverse_or_zero(d * factor) - 1) / 2, 0, ls_max);
    inv_scale[s] = inverse_or_zero(d * factor * static_cast<float>(2 * ls[s] + 1));
  }
  // Grid indices per group and sign bits per value (IQ2/IQ3), or the delta's sign per group (IQ1).
  int index[64] = {};
  uint8_t sign_bits[32] = {};  // value i at bit i % 8 of byte i / 8
  bool negative_delta[32] = {};
  const int group = type == GgmlType::kIQ3_XXS || type == GgmlType::kIQ3_S ? 4 : 8;
  float t[256];
  for (int i = 0; i < 256; ++i) t[i] = x[i] * inv_scale[i / sub];
  if (iq1) {
    const auto& table = nearest_table(kIq1SGrid, kIq1SGridValues, 3);
    // IQ1_S shares the delta over a sub-block of 32 (4 groups), IQ1_M has one per group.
    const int delta_groups = type == GgmlType::kIQ1_S ? 4 : 1;
    for (int g0 = 0; g0 < 32; g0 += delta_groups) {
      float best_err = -1;
      for (const int delta : {1, -1}) {
        float err = 0;
        int idx[4];
        for (int g = g0; g < g0 + delta_groups; ++g) {
          float u[8];
          for (int j = 0; j < 8; ++j) u[j] = (t[8 * g + j] - static_cast<float>(delta)) / 8;
          idx[g - g0] = table.nearest(u, kIq1SGridValues);
          for (int j = 0; j < 8; ++j) {
            const float e = t[8 * g + j] - static_cast<float>(8 * kIq1SGrid.v[idx[g - g0]][j] + delta);
            err += e * e;
          }
        }
        if (best_err < 0 || err < best_err) {
          best_err = err;
          for (int g = g0; g < g0 + delta_groups; ++g) index[g] = idx[g - g0], negative_delta[g] = delta < 0;
        }
      }
    }
  } else {
    for (int i = 0; i < 256; ++i)
      if (t[i] < 0) sign_bits[i / 8] |= static_cast<uint8_t>(1 << (i % 8));
    // 7-bit sign fields (IQ2_XXS, IQ2_XS, IQ3_XXS): an even count of minus signs per 8 values.
    if (type == GgmlType::kIQ2_XXS || type == GgmlType::kIQ2_XS || type == GgmlType::kIQ3_XXS)
      for (int b = 0; b < 32; ++b)
        if (__builtin_popcount(sign_bits[b]) % 2) {
          int smallest = 0;
          for (int j = 1; j < 8; ++j)
            if (std::fabs(t[8 * b + j]) < std::fabs(t[8 * b + smallest])) smallest = j;
          sign_bits[b] ^= static_cast<uint8_t>(1 << smallest);
        }
    for (int g = 0; g < 256 / group; ++g) {
      float u[8];
      for (int j = 0; j < group; ++j) u[j] = std::fabs(t[group * g + j]);
      switch (type) {
        case GgmlType::kIQ2_XXS: index[g] = nearest_table(kIq2XxsGrid, kIq2XxsGridValues, 3).nearest(u, kIq2XxsGridValues); break;
        case GgmlType::kIQ2_XS: index[g] = nearest_table(kIq2XsGrid, kIq2XsGridValues, 3).nearest(u, kIq2XsGridValues); break;
        case GgmlType::kIQ2_S: index[g] = nearest_table(kIq2SGrid, kIq2SGridValues, 3).nearest(u, kIq2SGridValues); break;
        case GgmlType::kIQ3_XXS: index[g] = nearest_table(kIq3XxsGrid, kIq3XxsGridValues, 8).nearest(u, kIq3XxsGridValues); break;
        default: index[g] = nearest_table(kIq3SGrid, kIq3SGridValues, 8).nearest(u, kIq3SGridValues); break;
      }
    }
  }
  switch (type) {
    case GgmlType::kIQ2_XXS: {
      BlockIq2Xxs b{};
      b.d = d_bits;
      for (int s = 0; s < 8; ++s) {
        uint32_t aux = static_cast<uint32_t>(ls[s]) << 28;
        for (int l = 0; l < 4; ++l) aux |= uint32_t{sign_bits[4 * s + l] & 127u} << (7 * l);
        b.qs[4 * s] = static_cast<uint16_t>(index[4 * s] | index[4 * s + 1] << 8);
        b.qs[4 * s + 1] = static_cast<uint16_t>(index[4 * s + 2] | index[4 * s + 3] << 8);
        b.qs[4 * s + 2] = static_cast<uint16_t>(aux & 0xffff);
        b.qs[4 * s + 3] = static_cast<uint16_t>(aux >> 16);
      }
      std::memcpy(out, &b, sizeof b);
      return;
    }
    case GgmlType::kIQ2_XS: {
      BlockIq2Xs b{};
      b.d = d_bits;
      for (int g = 0; g < 32; ++g) b.qs[g] = static_cast<uint16_t>(index[g] | (sign_bits[g] & 127) << 9);
      for (int s = 0; s < 16; ++s) b.scales[s / 2] |= static_cast<uint8_t>(ls[s] << (4 * (s % 2)));
      std::memcpy(out, &b, sizeof b);
      return;
    }
    case GgmlType::kIQ2_S: {
      BlockIq2S b{};
      b.d = d_bits;
      for (int g = 0; g < 32; ++g) {
        b.qs[g] = static_cast<uint8_t>(index[g] & 255);
        b.qh[g / 4] |= static_cast<uint8_t>((index[g] >> 8) << (2 * (g % 4)));
        b.qs[32 + g] = sign_bits[g];
      }
      for (int s = 0; s < 16; ++s) b.scales[s / 2] |= static_cast<uint8_t>(ls[s] << (4 * (s % 2)));
      std::memcpy(out, &b, sizeof b);
      return;
    }
    case GgmlType::kIQ3_XXS: {
      BlockIq3Xxs b{};
      b.d = d_bits;
      for (int g = 0; g < 64; ++g) b.qs[g] = static_cast<uint8_t>(index[g]);
      for (int s = 0; s < 8; ++s) {
        uint32_t aux = static_cast<uint32_t>(ls[s]) << 28;
        for (int l = 0; l < 4; ++l) aux |= uint32_t{sign_bits[4 * s + l] & 127u} << (7 * l);
        std::memcpy(b.qs + 64 + 4 * s, &aux, 4);
      }
      std::memcpy(out, &b, sizeof b);
      return;
    }
    case GgmlType::kIQ3_S: {
      BlockIq3S b{};
      b.d = d_bits;
      for (int g = 0; g < 64; ++g) {
        b.qs[g] = static_cast<uint8_t>(index[g] & 255);
        b.qh[g / 8] |= static_cast<uint8_t>((index[g] >> 8) << (g % 8));
      }
      std::memcpy(b.signs, sign_bits, 32);
      for (int s = 0; s < 8; ++s) b.scales[s / 2] |= static_cast<uint8_t>(ls[s] << (4 * (s % 2)));
      std::memcpy(out, &b, sizeof b);
      return;
    }
    case GgmlType::kIQ1_S: {
      BlockIq1S b{};
      b.d = d_bits;
      for (int g = 0; g < 32; ++g) {
        b.qs[g] = static_cast<uint8_t>(index[g] & 255);
        b.qh[g / 4] |= static_cast<uint16_t>((index[g] >> 8) << (3 * (g % 4)));
      }
      for (int s = 0; s < 8; ++s) b.qh[s] |= static_cast<uint16_t>(ls[s] << 12 | (negative_delta[4 * s] ? 0x8000 : 0));
      std::memcpy(out, &b, sizeof b);
      return;
    }
    default: {  // IQ1_M
      BlockIq1M b{};
      uint16_t sc[4] = {};
      for (int g = 0; g < 32; ++g) {
        b.qs[g] = static_cast<uint8_t>(index[g] & 255);
        b.qh[g / 2] |= static_cast<uint8_t>(((index[g] >> 8) | (negative_delta[g] ? 8 : 0)) << (4 * (g % 2)));
      }
      for (int s = 0; s < 16; ++s) sc[s / 4] |= static_cast<uint16_t>(ls[s] << (3 * (s % 4)));
      for (int i = 0; i < 4; ++i) sc[i] |= static_cast<uint16_t>(((d_bits >> (4 * i)) & 15) << 12);
      std::memcpy(b.scales, sc, 8);
      std::memcpy(out, &b, sizeof b);
      return;
    }
  }
}

}  // namespace

bool can_quantize_simple(uint32_t type) { return ggml_sub_block_values(type) > 0; }

void quantize_row_simple(uint32_t type, const float* x, int64_t n, std::byte* out) {
  HYMOE_CHECK(can_quantize_simple(type), "no encoder for ggml type ", ggml_type_name(type));
  const GgmlTypeTraits& t = *ggml_type_traits(type);
  HYMOE_CHECK(n % t.block_values == 0, n, " values of ", t.name);
  for (int64_t b = 0; b < n / t.block_values; ++b) {
    const float* xb = x + b * t.block_values;
    std::byte* ob = out + b * t.block_bytes;
    switch (static_cast<GgmlType>(type)) {
      case GgmlType::kQ8_0: {
        BlockQ8_0 blk;
        encode_q8_0(xb, &blk);
        std::memcpy(ob, &blk, sizeof blk);
        break;
      }
      case GgmlType::kQ4_0: {
        BlockQ4_0 blk;
        encode_q4_0(xb, &blk);
        std::memcpy(ob, &blk, sizeof blk);
        break;
      }
      case GgmlType::kQ4_1: {
        BlockQ4_1 blk;
        encode_offset_block(xb, 15, &blk.d, &blk.m, blk.qs, nullptr);
        std::memcpy(ob, &blk, sizeof blk);
        break;
      }
      case GgmlType::kQ5_0: {
        BlockQ5_0 blk;
        encode_q5_0(xb, &blk);
        std::memcpy(ob, &blk, sizeof blk);
        break;
      }
      case GgmlType::kQ5_1: {
        BlockQ5_1 blk;
        encode_offset_block(xb, 31, &blk.d, &blk.m, blk.qs, blk.qh);
        std::memcpy(ob, &blk, sizeof blk);
        break;
      }
      case GgmlType::kQ4_K: {
        BlockQ4_K blk;
        encode_k(xb, 15, &blk.d, &blk.dmin, blk.scales, blk.qs, nullptr);
        std::memcpy(ob, &blk, sizeof blk);
        break;
      }
      case GgmlType::kQ5_K: {
        BlockQ5_K blk;
        encode_k(xb, 31, &blk.d, &blk.dmin, blk.scales, blk.qs, blk.qh);
        std::memcpy(ob, &blk, sizeof blk);
        break;
      }
      case GgmlType::kIQ4_NL: {
        BlockIq4Nl blk;
        encode_iq4_nl(xb, &blk);
        std::memcpy(ob, &blk, sizeof blk);
        break;
      }
      case GgmlType::kIQ4_XS: {
        BlockIq4Xs blk;
        encode_iq4_xs(xb, &blk);
        std::memcpy(ob, &blk, sizeof blk);
        break;
      }
      case GgmlType::kQ6_K: {
        BlockQ6_K blk;
        encode_q6_k(xb, &blk);
        std::memcpy(ob, &blk, sizeof blk);
        break;
      }
      case GgmlType::kQ2_K: {
        BlockQ2_K blk;
        encode_q2_k(xb, &blk);
        std::memcpy(ob, &blk, sizeof blk);
        break;
      }
      case GgmlType::kQ3_K: {
        BlockQ3_K blk;
        encode_q3_k(xb, &blk);
        std::memcpy(ob, &blk, sizeof blk);
        break;
      }
      case GgmlType::kTQ1_0: {
        BlockTq1_0 blk;
        encode_tq1_0(xb, &blk);
        std::memcpy(ob, &blk, sizeof blk);
        break;
      }
      case GgmlType::kTQ2_0: {
        BlockTq2_0 blk;
        encode_tq2_0(xb, &blk);
        std::memcpy(ob, &blk, sizeof blk);
        break;
      }
      default:
        HYMOE_CHECK(kernels::is_iq_grid_type(type), "the registry lists ggml type ", t.name, " without an encoder here");
        encode_iq(static_cast<GgmlType>(type), xb, ob);
    }
  }
}

}  // namespace hymoe
