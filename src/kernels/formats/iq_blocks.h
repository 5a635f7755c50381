// The IQ1/IQ2/IQ3 block types (quant_formats.h's BlockIq*) taken apart into small signed integer codes and
// per-sub-block scales: the grids expanded from iq_grids.inc, and one decoder per type that every user shares (the
// scalar references of quant_ref.cc, and the kernels that expand a block into 8-bit codes).
//
// Value i of a block is exactly scale[i / sub] * code[i] (GgmlBlockCodes, quant_formats.h): the code is the grid
// element times its sign (IQ1: 8 g + 1 or 8 g - 1, the group's delta of +-1/8 folded in), so |code| <= 62, and the
// scale is the f16 d times an odd integer of at most 31 and a power of two: both products exact in f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hymoe/dtype.h"
#include "hymoe/ggml_type.h"
#include "hymoe/quant_formats.h"
#include "kernels/formats/gemm_kernels.h"

namespace hymoe::kernels {

#include "kernels/formats/iq_grids.inc"

// A grid with its entries' elements as int8: v[entry][element].
template <int N, int C>
struct IqGrid {
  int8_t v[N][C];
};
template <int N, int C>
constexpr IqGrid<N, C> expand_iq_grid(const uint16_t (&entries)[N], const int8_t* values) {
  IqGrid<N, C> g{};
  constexpr int kBits = C == 8 ? 2 : 4;  // the .inc's packing: 2 bits an element for 8-element grids, 4 for 4
  for (int e = 0; e < N; ++e)
    for (int c = 0; c < C; ++c) g.v[e][c] = values[(entries[e] >> (kBits * c)) & ((1 << kBits) - 1)];
  return g;
}
inline constexpr IqGrid<256, 8> kIq2XxsGrid = expand_iq_grid<256, 8>(kIq2XxsGridEntries, kIq2XxsGridValues);
inline constexpr IqGrid<512, 8> kIq2XsGrid = expand_iq_grid<512, 8>(kIq2XsGridEntries, kIq2XsGridValues);
inline constexpr IqGrid<1024, 8> kIq2SGrid = expand_iq_grid<1024, 8>(kIq2SGridEntries, kIq2SGridValues);
inline constexpr IqGrid<256, 4> kIq3XxsGrid = expand_iq_grid<256, 4>(kIq3XxsGridEntries, kIq3XxsGridValues);
inline constexpr IqGrid<512, 4> kIq3SGrid = expand_iq_grid<512, 4>(kIq3SGridEntries, kIq3SGridValues);
inline constexpr IqGrid<2048, 8> kIq1SGrid = expand_iq_grid<2048, 8>(kIq1SGridEntries, kIq1SGridValues);

// The kernels' bytes of each grid entry, 8 (IQ3: 4) to a word: |value| (IQ1: the signed code 8 g + 1, its delta
// +1/8). The int8 tile layout's operand (code + 128) is that byte with its top bit flipped; 128 - |value| is then
// the operand word's bytewise two's complement (~u + 1 in every byte: no byte carries, as every |value| here is 4
// to 62), and IQ1's delta -1/8 is u - 2 in every byte (no borrows: its operands are 121, 129 or 137).
template <int N, int C, typename Word>
struct IqCodeBytes {
  Word u[N];
};
template <int N, int C, typename Word>
constexpr IqCodeBytes<N, C, Word> iq_magnitude_bytes(const IqGrid<N, C>& grid, bool iq1) {
  IqCodeBytes<N, C, Word> t{};
  for (int e = 0; e < N; ++e)
    for (int c = 0; c < C; ++c) {
      const int v = grid.v[e][c];
      t.u[e] |= static_cast<Word>(static_cast<uint8_t>(iq1 ? 8 * v + 1 : (v < 0 ? -v : v))) << (8 * c);
    }
  return t;
}
inline constexpr auto kIq2XxsMagnitudes = iq_magnitude_bytes<256, 8, uint64_t>(kIq2XxsGrid, false);
inline constexpr auto kIq2XsMagnitudes = iq_magnitude_bytes<512, 8, uint64_t>(kIq2XsGrid, false);
inline constexpr auto kIq2SMagnitudes = iq_magnitude_bytes<1024, 8, uint64_t>(kIq2SGrid, false);
inline constexpr auto kIq3XxsMagnitudes = iq_magnitude_bytes<256, 4, uint32_t>(kIq3XxsGrid, false);
inline constexpr auto kIq3SMagnitudes = iq_magnitude_bytes<512, 4, uint32_t>(kIq3SGrid, false);
inline constexpr auto kIq1SCodes = iq_magnitude_bytes<2048, 8, uint64_t>(kIq1SGrid, true);
// The IQ1 grid's elements as unsigned bytes 8 g + 8 (0, 8 or 16): a code 8 g + 1 - 2 n (n = 1 where the group's delta
// is -1/8) is that less 7 + 2 n, so the few-rows kernel multiplies these and subtracts (7 + 2 n) times the
// activations' sum.
constexpr IqCodeBytes<2048, 8, uint64_t> iq1_unsigned_bytes() {
  IqCodeBytes<2048, 8, uint64_t> t{};
  for (int e = 0; e < 2048; ++e)
    for (int c = 0; c < 8; ++c) t.u[e] |= static_cast<uint64_t>(8 * kIq1SGrid.v[e][c] + 8) << (8 * c);
  return t;
}
inline constexpr auto kIq1SUnsigned = iq1_unsigned_bytes();

// 0xff in byte c where bit c of the index is set; and the same for a 7-bit sign field with its parity bit added.
struct SignByteMasks {
  uint64_t m[256];
};
constexpr SignByteMasks sign_byte_masks(bool seven) {
  SignByteMasks t{};
  for (int i = 0; i < (seven ? 128 : 256); ++i) {
    int bits = i;
    if (seven) bits |= (__builtin_popcount(static_cast<unsigned>(i)) & 1) << 7;
    for (int c = 0; c < 8; ++c)
      if ((bits >> c) & 1) t.m[i] |= uint64_t{0xff} << (8 * c);
  }
  return t;
}
inline constexpr SignByteMasks kSignByteMasks = sign_byte_masks(false);
inline constexpr SignByteMasks kSign7ByteMasks = sign_byte_masks(true);

// The functions below are compiled into the ISA units with their flags, so they have internal linkage: one copy per
// unit, none shared across ISAs (an inline function with external linkage would be merged into whichever copy the
// linker keeps).
namespace {

// The 8 signs of a 7-bit sign field (bit j set: value j negative): its 7 bits and their parity as the eighth.
constexpr uint32_t iq_signs7(uint32_t field) {
  field &= 127;
  return field | (static_cast<uint32_t>(__builtin_popcount(field) & 1) << 7);
}

inline constexpr bool is_iq_grid_type(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kIQ2_XXS:
    case GgmlType::kIQ2_XS:
    case GgmlType::kIQ2_S:
    case GgmlType::kIQ3_XXS:
    case GgmlType::kIQ3_S:
    case GgmlType::kIQ1_S:
    case GgmlType::kIQ1_M: return true;
    default: return false;
  }
}

namespace iq_detail {
template <typename Block>
inline Block load(const std::byte* p) {
  Block b;
  std::memcpy(&b, p, sizeof b);
  return b;
}
// Group g's C codes: grid entry `entry` times the signs `signs` (bit j: element j negative).
template <int N, int C>
inline void signed_group(const IqGrid<N, C>& grid, uint32_t entry, uint32_t signs, int8_t* code) {
  for (int j = 0; j < C; ++j) {
    const int v = grid.v[entry][j];
    code[j] = static_cast<int8_t>((signs >> j) & 1 ? -v : v);
  }
}
// An IQ1 group: 8 g + 1 (delta +1/8) or 8 g - 1 (delta -1/8).
inline void iq1_group(uint32_t entry, bool negative_delta, int8_t* code) {
  for (int j = 0; j < 8; ++j) code[j] = static_cast<int8_t>(8 * kIq1SGrid.v[entry][j] + (negative_delta ? -1 : 1));
}
}  // namespace iq_detail

// The f16 d of a block of a grid type, as stored (IQ1_M spreads it over the top nibbles of its four scale words).
template <uint32_t kType>
inline uint16_t grid_block_d_bits(const uint8_t* b) {
  uint16_t bits;
  if constexpr (kType == 29) {
    uint16_t sc[4];
    std::memcpy(sc, b + 48, 8);
    bits = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
  } else {
    std::memcpy(&bits, b, 2);
  }
  return bits;
}

// The f32 scale of every sub-block of one block of a grid type (8 of 32 values, or 16 of 16): split_iq_block's and
// every kernel's, so all of them hold the same floats.
template <uint32_t kType>
inline void grid_block_scales(const uint8_t* b, float* out) {
  const float d = f16_to_float(grid_block_d_bits<kType>(b));
  if constexpr (kType == 16) {  // IQ2_XXS
    for (int s = 0; s < 8; ++s) {
      uint32_t aux;
      std::memcpy(&aux, b + 6 + 8 * s, 4);
      out[s] = d * static_cast<float>(2 * (aux >> 28) + 1) * 0.125f;
    }
  } else if constexpr (kType == 17 || kType == 22) {  // IQ2_XS, IQ2_S
    const uint8_t* scales = b + (kType == 17 ? 66 : 74);
    for (int s = 0; s < 16; ++s) out[s] = d * static_cast<float>(2 * ((scales[s / 2] >> (4 * (s % 2))) & 15) + 1) * 0.125f;
  } else if constexpr (kType == 18) {  // IQ3_XXS
    for (int s = 0; s < 8; ++s) {
      uint32_t aux;
      std::memcpy(&aux, b + 66 + 4 * s, 4);
      out[s] = d * static_cast<float>(2 * (aux >> 28) + 1) * 0.25f;
    }
  } else if constexpr (kType == 21) {  // IQ3_S
    for (int s = 0; s < 8; ++s) out[s] = d * static_cast<float>(2 * ((b[106 + s / 2] >> (4 * (s % 2))) & 15) + 1);
  } else if constexpr (kType == 19) {  // IQ1_S
    for (int s = 0; s < 8; ++s) {
      uint16_t qh;
      std::memcpy(&qh, b + 34 + 2 * s, 2);
      out[s] = d * static_cast<float>(2 * ((qh >> 12) & 7) + 1) * 0.125f;
    }
  } else {  // IQ1_M
    uint16_t sc[4];
    std::memcpy(sc, b + 48, 8);
    for (int s = 0; s < 16; ++s) out[s] = d * static_cast<float>(2 * ((sc[s / 4] >> (3 * (s % 4))) & 7) + 1) * 0.125f;
  }
}

// Splits one block of an IQ grid type (is_iq_grid_type) into out->code (256) and out->scale (8 sub-blocks of 32, or
// 16 of 16 for IQ2_XS, IQ2_S and IQ1_M). The caller checks the type.
inline void split_iq_block(uint32_t type, const std::byte* block, GgmlBlockCodes* out) {
  using namespace iq_detail;
  const auto* raw = reinterpret_cast<const uint8_t*>(block);
  switch (static_cast<GgmlType>(type)) {  // the scales, as the kernels take them
    case GgmlType::kIQ2_XXS: grid_block_scales<16>(raw, out->scale); break;
    case GgmlType::kIQ2_XS: grid_block_scales<17>(raw, out->scale); break;
    case GgmlType::kIQ2_S: grid_block_scales<22>(raw, out->scale); break;
    case GgmlType::kIQ3_XXS: grid_block_scales<18>(raw, out->scale); break;
    case GgmlType::kIQ3_S: grid_block_scales<21>(raw, out->scale); break;
    case GgmlType::kIQ1_S: grid_block_scales<19>(raw, out->scale); break;
    case GgmlType::kIQ1_M: grid_block_scales<29>(raw, out->scale); break;
    default: return;
  }
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kIQ2_XXS: {
      const auto b = load<BlockIq2Xxs>(block);
      for (int s = 0; s < 8; ++s) {
        const uint32_t indices = b.qs[4 * s] | (uint32_t{b.qs[4 * s + 1]} << 16);
        const uint32_t aux = b.qs[4 * s + 2] | (uint32_t{b.qs[4 * s + 3]} << 16);
        for (int l = 0; l < 4; ++l)
          signed_group(kIq2XxsGrid, (indices >> (8 * l)) & 255, iq_signs7(aux >> (7 * l)), out->code + 32 * s + 8 * l);
      }
      return;
    }
    case GgmlType::kIQ2_XS: {
      const auto b = load<BlockIq2Xs>(block);
      for (int g = 0; g < 32; ++g) signed_group(kIq2XsGrid, b.qs[g] & 511, iq_signs7(b.qs[g] >> 9), out->code + 8 * g);
      return;
    }
    case GgmlType::kIQ2_S: {
      const auto b = load<BlockIq2S>(block);
      for (int g = 0; g < 32; ++g)
        signed_group(kIq2SGrid, b.qs[g] | (((b.qh[g / 4] >> (2 * (g % 4))) & 3u) << 8), b.qs[32 + g],
                     out->code + 8 * g);
      return;
    }
    case GgmlType::kIQ3_XXS: {
      const auto b = load<BlockIq3Xxs>(block);
      for (int s = 0; s < 8; ++s) {
        uint32_t aux;
        std::memcpy(&aux, b.qs + 64 + 4 * s, 4);
        for (int l = 0; l < 4; ++l) {
          const uint32_t signs = iq_signs7(aux >> (7 * l));
          signed_group(kIq3XxsGrid, b.qs[8 * s + 2 * l], signs, out->code + 32 * s + 8 * l);
          signed_group(kIq3XxsGrid, b.qs[8 * s + 2 * l + 1], signs >> 4, out->code + 32 * s + 8 * l + 4);
        }
      }
      return;
    }
    case GgmlType::kIQ3_S: {
      const auto b = load<BlockIq3S>(block);
      for (int g = 0; g < 64; ++g)
        signed_group(kIq3SGrid, b.qs[g] | (((b.qh[g / 8] >> (g % 8)) & 1u) << 8),
                     uint32_t{b.signs[g / 2]} >> (4 * (g % 2)), out->code + 4 * g);
      return;
    }
    case GgmlType::kIQ1_S: {
      const auto b = load<BlockIq1S>(block);
      for (int s = 0; s < 8; ++s) {
        const uint32_t qh = b.qh[s];
        for (int l = 0; l < 4; ++l)
          iq1_group(b.qs[4 * s + l] | (((qh >> (3 * l)) & 7u) << 8), (qh & 0x8000) != 0, out->code + 32 * s + 8 * l);
      }
      return;
    }
    case GgmlType::kIQ1_M: {
      const auto b = load<BlockIq1M>(block);
      for (int g = 0; g < 32; ++g) {
        const uint32_t nibble = (b.qh[g / 2] >> (4 * (g % 2))) & 15u;
        iq1_group(b.qs[g] | ((nibble & 7) << 8), (nibble & 8) != 0, out->code + 8 * g);
      }
      return;
    }
    default: return;
  }
}

// Expands one unit of a grid panel (GgufPanelLayout::grid): nr blocks of `type`, column j's at blocks + j *
// block_bytes, into the 256 / sub sub-block units of its registry line's layout, one after another in `out`:
//   kInt8   per unit sub / 4 blocks (nr, 4) of u8 code + 128, then nr f32 scales (gguf_int8_layout);
//   exact   per unit (sub, nr) int8 codes, then nr f32 scales (gguf_panel_layout).
template <bool kInt8>
inline void expand_grid_unit(uint32_t type, int sub, int64_t block_bytes, const uint8_t* blocks, int nr,
                             uint8_t* out) {
  const int64_t unit_bytes = int64_t{sub} * nr + 4 * int64_t{nr};
  GgmlBlockCodes parts;
  for (int j = 0; j < nr; ++j) {
    split_iq_block(type, reinterpret_cast<const std::byte*>(blocks + j * block_bytes), &parts);
    for (int s = 0; s < 256 / sub; ++s) {
      uint8_t* unit = out + s * unit_bytes;
      const int8_t* code = parts.code + s * sub;
      if constexpr (kInt8) {
        for (int g = 0; g < sub / 4; ++g) {
          uint32_t four;
          std::memcpy(&four, code + 4 * g, 4);
          four ^= 0x80808080u;  // code + 128 in each byte
          std::memcpy(unit + (int64_t{g} * nr + j) * 4, &four, 4);
        }
      } else {
        for (int kk = 0; kk < sub; ++kk) unit[int64_t{kk} * nr + j] = static_cast<uint8_t>(code[kk]);
      }
      std::memcpy(unit + int64_t{sub} * nr + 4 * j, &parts.scale[s], 4);
    }
  }
}

// The int8 form of expand_grid_unit for a type known at compile time, without taking blocks apart value by value:
// each group's operand bytes come from its entry's word in IqCodeBytes (top bits flipped), negated bytewise where its sign byte
// says, and land as two (one for IQ3) groups of four k of the layout. The same bytes and scales as
// expand_grid_unit<true> (tested).
template <uint32_t kType, int kSub>
inline void expand_grid_unit_int8(const uint8_t* blocks, int nr, uint8_t* out) {
  constexpr int64_t kBlockBytes = gguf_grid_block_bytes(kType);
  constexpr uint64_t kOnes = 0x0101010101010101ull, kTopBits = 0x8080808080808080ull;
  const int64_t unit_bytes = int64_t{kSub} * nr + 4 * int64_t{nr};
  // Group-of-four q of sub-block unit s, column j.
  auto at = [&](int s, int q, int j) { return out + s * unit_bytes + (int64_t{q} * nr + j) * 4; };
  // Eight values from k = 8 g on (g counts groups of 8 in the block).
  auto put8 = [&](int g, int j, uint64_t u) {
    const int k = 8 * g, s = k / kSub, q = k % kSub / 4;
    std::memcpy(at(s, q, j), &u, 4);
    const uint32_t high = static_cast<uint32_t>(u >> 32);
    std::memcpy(at(s, q + 1, j), &high, 4);
  };
  // Bytes negated (256 - u) where the mask is 0xff: (u ^ 0xff) + 1, with no carry out of a byte (u >= 132).
  auto negate_where = [&](uint64_t pos, uint64_t mask) { return (pos ^ mask) + (mask & kOnes); };
  auto signed8 = [&](uint64_t pos, uint32_t signs) { return negate_where(pos, kSignByteMasks.m[signs & 255]); };
  auto signed7 = [&](uint64_t pos, uint32_t field) { return negate_where(pos, kSign7ByteMasks.m[field & 127]); };
  auto put_scale = [&](int s, int j, float scale) { std::memcpy(out + s * unit_bytes + int64_t{kSub} * nr + 4 * j, &scale, 4); };
  for (int j = 0; j < nr; ++j) {
    const uint8_t* b = blocks + j * kBlockBytes;
    float scales[16];
    grid_block_scales<kType>(b, scales);
    for (int s = 0; s < 256 / kSub; ++s) put_scale(s, j, scales[s]);
    if constexpr (kType == 16) {  // IQ2_XXS
      for (int s = 0; s < 8; ++s) {
        uint32_t indices, aux;
        std::memcpy(&indices, b + 2 + 8 * s, 4);
        std::memcpy(&aux, b + 6 + 8 * s, 4);
        for (int l = 0; l < 4; ++l)
          put8(4 * s + l, j, signed7(kIq2XxsMagnitudes.u[(indices >> (8 * l)) & 255] ^ kTopBits, aux >> (7 * l)));
      }
    } else if constexpr (kType == 17) {  // IQ2_XS
      for (int g = 0; g < 32; ++g) {
        uint16_t q;
        std::memcpy(&q, b + 2 + 2 * g, 2);
        put8(g, j, signed7(kIq2XsMagnitudes.u[q & 511] ^ kTopBits, q >> 9));
      }
    } else if constexpr (kType == 22) {  // IQ2_S
      for (int g = 0; g < 32; ++g)
        put8(g, j, signed8(kIq2SMagnitudes.u[b[2 + g] | (((b[66 + g / 4] >> (2 * (g % 4))) & 3u) << 8)] ^ kTopBits, b[34 + g]));
    } else if constexpr (kType == 18 || kType == 21) {  // IQ3_XXS, IQ3_S: groups of 4, one group-of-four each
      for (int s = 0; s < 8; ++s) {
        uint32_t aux = 0;
        if constexpr (kType == 18) std::memcpy(&aux, b + 66 + 4 * s, 4);
        for (int l = 0; l < 4; ++l) {
          const int g = 8 * s + 2 * l;  // groups of 4: g and g + 1 make the 8 values l of sub-block s
          if constexpr (kType == 18) {
            const uint64_t pos =
                (kIq3XxsMagnitudes.u[b[2 + g]] | (uint64_t{kIq3XxsMagnitudes.u[b[3 + g]]} << 32)) ^ kTopBits;
            put8(4 * s + l, j, signed7(pos, aux >> (7 * l)));
          } else {
            const uint32_t idx0 = b[2 + g] | (((b[66 + g / 8] >> (g % 8)) & 1u) << 8);
            const uint32_t idx1 = b[3 + g] | (((b[66 + (g + 1) / 8] >> ((g + 1) % 8)) & 1u) << 8);
            const uint64_t pos = (kIq3SMagnitudes.u[idx0] | (uint64_t{kIq3SMagnitudes.u[idx1]} << 32)) ^ kTopBits;
            put8(4 * s + l, j, signed8(pos, b[74 + g / 2]));
          }
        }
      }
    } else if constexpr (kType == 19) {  // IQ1_S
      for (int s = 0; s < 8; ++s) {
        uint16_t qh;
        std::memcpy(&qh, b + 34 + 2 * s, 2);
        const uint64_t delta = (0 - static_cast<uint64_t>(qh >> 15)) & (2 * kOnes);  // branch-free: the signs are random
        for (int l = 0; l < 4; ++l)
          put8(4 * s + l, j, (kIq1SCodes.u[b[2 + 4 * s + l] | (((qh >> (3 * l)) & 7u) << 8)] ^ kTopBits) - delta);
      }
    } else {  // IQ1_M
      for (int g = 0; g < 32; ++g) {
        const uint32_t nibble = (b[32 + g / 2] >> (4 * (g % 2))) & 15u;
        put8(g, j, (kIq1SCodes.u[b[g] | ((nibble & 7) << 8)] ^ kTopBits) - ((0 - uint64_t{nibble >> 3}) & (2 * kOnes)));
      }
    }
  }
}

}  // namespace

}  // namespace hymoe::kernels
