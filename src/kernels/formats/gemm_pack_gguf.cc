// The GGUF panel formats' ISA-free parts (gemm_kernels.h, GgufPanelLayout, gguf_int8_layout): the repacking of a
// kGgml weight view into compact panels (once, at load) for the exact and the integer-dot kernels, the exact
// decoding of a panel's weight and the exact kernels' scalar reference. Built without ISA flags.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "hymoe/dtype.h"
#include "hymoe/error.h"
#include "hymoe/quant_formats.h"
#include "kernels/formats/gemm_kernels.h"
#include "kernels/formats/iq_blocks.h"

namespace hymoe::kernels {

bool gguf_weight_format(uint32_t type, WeightFormat* format) {
  if (type == static_cast<uint32_t>(GgmlType::kMXFP4)) {  // the Hugging Face MXFP4 panels (gemm_quantized.h)
    *format = WeightFormat::kMxfp4Block32;
    return true;
  }
  const GgufBlockFormat* b = gguf_block_format_of_type(type);
  if (b) *format = b->exact;
  return b != nullptr;
}

std::string gguf_runnable_type_names() {
  std::string names;
  for (const GgufBlockFormat& b : kGgufBlockFormats) names += std::string(b.type_name) + ", ";
  return names + "MXFP4";
}

WeightFormat gguf_int8_twin(WeightFormat exact) {
  if (exact == WeightFormat::kMxfp4Block32) return WeightFormat::kMxfp4Block32I8;
  const GgufBlockFormat* b = gguf_block_format(exact);
  HYMOE_CHECK(b && b->exact == exact, weight_format_operands(exact), " is not an exact GGUF or mxfp4 format");
  return b->int8;
}

WeightFormat gguf_exact_twin(WeightFormat int8) {
  if (int8 == WeightFormat::kMxfp4Block32I8) return WeightFormat::kMxfp4Block32;
  const GgufBlockFormat* b = gguf_block_format(int8);
  HYMOE_CHECK(b && b->int8 == int8, weight_format_operands(int8), " is not a GGUF int8 format");
  return b->exact;
}

namespace {

// Row `row` of a kGgml view (column `row` of B) taken apart: K codes and one scale (and offset) per sub-block.
struct ColumnCodes {
  std::vector<int8_t> code;
  std::vector<float> scale, offset;
};
void split_column(const MatrixView& v, int64_t row, ColumnCodes& out) {
  const uint32_t type = v.quant.ggml_type;
  const GgmlTypeTraits& t = *ggml_type_traits(type);
  const int64_t blocks = v.k / t.block_values, row_bytes = blocks * t.block_bytes;
  const int sub = ggml_sub_block_values(type), subs = static_cast<int>(t.block_values) / sub;
  out.code.resize(static_cast<size_t>(v.k));
  out.scale.resize(static_cast<size_t>(v.k / sub));
  out.offset.resize(static_cast<size_t>(v.k / sub));
  const auto* base = static_cast<const std::byte*>(v.data) + row * row_bytes;
  GgmlBlockCodes parts;
  for (int64_t b = 0; b < blocks; ++b) {
    split_block_ref(type, base + b * t.block_bytes, &parts);
    std::copy(parts.code, parts.code + t.block_values, out.code.begin() + b * t.block_values);
    std::copy(parts.scale, parts.scale + subs, out.scale.begin() + b * subs);
    if (ggml_block_has_offsets(type)) std::copy(parts.offset, parts.offset + subs, out.offset.begin() + b * subs);
  }
}

float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Stores factor i (column j's scale, or nr + j: its offset) of a unit: f32, or (half_factors) the f16 value it is.
void put_factor(const GgufPanelLayout& l, uint8_t* factors, int i, float value) {
  if (!l.half_factors) {
    std::memcpy(factors + 4 * i, &value, sizeof value);
    return;
  }
  const uint16_t half = float_to_f16(value);
  HYMOE_CHECK(std::bit_cast<uint32_t>(f16_to_float(half)) == std::bit_cast<uint32_t>(value), "type ", l.ggml_type,
              "'s factor ", value, " is no f16 value");
  std::memcpy(factors + 2 * i, &half, sizeof half);
}
// Factor i of a unit's factors (put_factor's).
float load_factor(const GgufPanelLayout& l, const uint8_t* factors, int i) {
  if (!l.half_factors) return load_f32(factors + 4 * i);
  uint16_t half;
  std::memcpy(&half, factors + 2 * i, sizeof half);
  return f16_to_float(half);
}

// What a panel stores for code c of a block: c + bias (the IQ4 types store the table index itself, bias 0), and
// for padding columns, under zero factors, pad + bias: code 0, or for the IQ4 types the index of value 1, so they
// decode to +0.
struct StoredCodes {
  int bias, pad;
};
StoredCodes stored_codes(const GgufPanelLayout& l) {
  const StoredCodes s{l.values ? 0 : l.code_bias, l.values ? 8 : 0};
  HYMOE_CHECK(!l.values || l.values[s.pad] == 1);
  return s;
}

// The loop both GGUF panel layouts share: column j of the panel (column_of(j), or a zero column), every unit's
// stored codes (code + code_bias; the IQ4 types' index as it is) handed to put_code(unit, kk, j, stored), then the
// unit's scale (and offset) of the column after the unit's code bytes.
template <typename PutCode>
void fill_panel_units(WeightFormat format, const GgufPanelLayout& l, int64_t k, int nr, uint8_t* panel,
                      const std::function<std::pair<int, int64_t>(int)>& column_of, const MatrixView& gate,
                      const MatrixView& up, PutCode put_code) {
  HYMOE_CHECK(l.ggml_type != 0 && nr % 2 == 0);
  const int64_t units = (k + l.k_unit - 1) / l.k_unit, unit_bytes = weight_unit_bytes(format, nr);
  const int64_t code_bytes = int64_t{l.k_unit} * nr * l.code_bits / 8;
  ColumnCodes col_codes;
  const StoredCodes stored = stored_codes(l);
  for (int j = 0; j < nr; ++j) {
    const auto [which, col] = column_of(j);
    if (col >= 0) {
      const MatrixView& src = which == 0 ? gate : up;
      HYMOE_CHECK(src.quant.scheme == QuantScheme::kGgml && src.quant.ggml_type == l.ggml_type && src.k == k);
      split_column(src, col, col_codes);
    }
    for (int64_t u = 0; u < units; ++u) {
      uint8_t* unit = panel + u * unit_bytes;
      for (int kk = 0; kk < l.k_unit; ++kk)
        put_code(unit, kk, j, (col >= 0 ? col_codes.code[static_cast<size_t>(u * l.k_unit + kk)] : stored.pad) + stored.bias);
      const float scale = col >= 0 ? col_codes.scale[static_cast<size_t>(u)] : 0.0f;
      put_factor(l, unit + code_bytes, j, scale);
      if (l.offsets) put_factor(l, unit + code_bytes, nr + j, col >= 0 ? col_codes.offset[static_cast<size_t>(u)] : 0.0f);
    }
  }
}

// A block of a grid type that decodes to +0 everywhere: d = 0, and for IQ1 (whose codes 8 g +- 1 are negative where
// g = -1) every group on an entry of no negative element with the delta +1/8.
std::vector<uint8_t> grid_padding_block(uint32_t type) {
  std::vector<uint8_t> block(static_cast<size_t>(gguf_grid_block_bytes(type)), 0);
  const bool iq1s = type == static_cast<uint32_t>(GgmlType::kIQ1_S), iq1m = type == static_cast<uint32_t>(GgmlType::kIQ1_M);
  if (!iq1s && !iq1m) return block;
  int entry = 0;
  while (*std::min_element(kIq1SGrid.v[entry], kIq1SGrid.v[entry] + 8) < 0) ++entry;
  BlockIq1S s{};
  BlockIq1M m{};
  for (int g = 0; g < 32; ++g) {
    s.qs[g] = m.qs[g] = static_cast<uint8_t>(entry & 255);
    s.qh[g / 4] = static_cast<uint16_t>(s.qh[g / 4] | (entry >> 8) << (3 * (g % 4)));
    m.qh[g / 2] = static_cast<uint8_t>(m.qh[g / 2] | (entry >> 8) << (4 * (g % 2)));
  }
  if (iq1s) std::memcpy(block.data(), &s, sizeof s);
  else std::memcpy(block.data(), &m, sizeof m);
  return block;
}

// A grid panel (GgufPanelLayout::grid): per unit of 256 k, the nr columns' blocks as stored, one after another;
// padding columns get blocks of zeros (grid_padding_block).
void fill_grid_panel(const GgufPanelLayout& l, int64_t k, int nr, uint8_t* panel,
                     const std::function<std::pair<int, int64_t>(int)>& column_of, const MatrixView& gate,
                     const MatrixView& up) {
  const int64_t block_bytes = gguf_grid_block_bytes(l.ggml_type), units = k / kQ8KBlock;
  HYMOE_CHECK(k % kQ8KBlock == 0, "a grid type's rows are whole blocks of 256, not ", k);
  const std::vector<uint8_t> padding = grid_padding_block(l.ggml_type);
  for (int j = 0; j < nr; ++j) {
    const auto [which, col] = column_of(j);
    const std::byte* row = nullptr;
    if (col >= 0) {
      const MatrixView& src = which == 0 ? gate : up;
      HYMOE_CHECK(src.quant.scheme == QuantScheme::kGgml && src.quant.ggml_type == l.ggml_type && src.k == k);
      row = static_cast<const std::byte*>(src.data) + col * units * block_bytes;
    }
    for (int64_t u = 0; u < units; ++u) {
      uint8_t* dst = panel + (u * nr + j) * block_bytes;
      if (row) std::memcpy(dst, row + u * block_bytes, static_cast<size_t>(block_bytes));
      else std::memcpy(dst, padding.data(), static_cast<size_t>(block_bytes));
    }
  }
}

// Where the third bit of k index `in_unit` (0..255) of column j lies in a 3-bit super-block unit (gguf_super_layout):
// the byte's offset from the unit's start and the bit, g for the first nr / 2 columns and 4 + g for the others.
std::pair<int64_t, int> third_bit_at(const GgufSuperLayout& sl, int nr, int in_unit, int j) {
  const int s = in_unit / 16, g = in_unit % 16 / 4, t = in_unit % 4;
  return {sl.high + (int64_t{s} * nr / 2 + j % (nr / 2)) * 4 + t, g + j / (nr / 2) * 4};
}

// One block of a super-block type as the form stores it (GgufPanelLayout::super_block): the code u of each value,
// the scale byte of each sub-block of 16, d and -dmin, such that value i = fmaf(d * sc, u, -(dmin * m)) (2-bit
// codes: sc in the low nibble, m in the high one), or d * sc * (u - 4) (3-bit codes: sc as int8, no m), the block's
// value to the bit. Int8 form super (Q2_K): the file's codes, scale bytes and f16 factors. Super1 (TQ1_0, TQ2_0:
// x = d * code, one d a block): u = code + code bias, sc = m = 1 and dmin = code bias * d, which for the ternary
// types (bias 1) makes fmaf(d, u, -d) -d, 0 or d exactly. Super3 (Q3_K): u = code + 4, the file's signed scales
// (sc - 32) and f16 d, each sub-block's d * sc checked to be the decoder's scale.
struct SuperBlock {
  uint8_t u[kQ8KBlock];
  uint8_t scale_byte[16];
  float d, neg_dmin;
};
void split_super_block(const GgufBlockFormat& b, const std::byte* block, SuperBlock* out) {
  GgmlBlockCodes parts;
  split_block_ref(b.ggml_type, block, &parts);
  if (b.int8_form == GgufInt8Form::kSuper1) {
    HYMOE_CHECK(b.code_bias == 1, "the super1 form takes dmin = d: ", b.type_name, " has code bias ", b.code_bias);
    for (int i = 0; i < kQ8KBlock; ++i) out->u[i] = static_cast<uint8_t>(parts.code[i] + b.code_bias);
    std::memset(out->scale_byte, 0x11, sizeof out->scale_byte);
    out->d = parts.scale[0];  // the block's f16 d, in every sub-block
    out->neg_dmin = -out->d;
    return;
  }
  if (b.int8_form == GgufInt8Form::kSuper3) {
    HYMOE_CHECK(b.ggml_type == static_cast<uint32_t>(GgmlType::kQ3_K), b.type_name, " has no 3-bit super-block form");
    GgmlBlockFactors f;
    split_block_factors(b.ggml_type, block, &f);
    for (int i = 0; i < kQ8KBlock; ++i) out->u[i] = static_cast<uint8_t>(parts.code[i] + 4);
    for (int s = 0; s < 16; ++s) {
      HYMOE_CHECK(std::bit_cast<uint32_t>(f.d * static_cast<float>(f.sc[s])) == std::bit_cast<uint32_t>(parts.scale[s]),
                  "Q3_K's super-block factors differ from its decoder's");
      out->scale_byte[s] = static_cast<uint8_t>(f.sc[s]);
    }
    out->d = f.d;
    out->neg_dmin = 0.0f;
    return;
  }
  // Form super keeps the file's scale bytes, which only Q2_K's block has.
  HYMOE_CHECK(b.ggml_type == static_cast<uint32_t>(GgmlType::kQ2_K), b.type_name, " has no super-block form");
  BlockQ2_K raw;
  std::memcpy(&raw, block, sizeof raw);
  for (int i = 0; i < kQ8KBlock; ++i) out->u[i] = static_cast<uint8_t>(parts.code[i]);
  std::memcpy(out->scale_byte, raw.scales, sizeof out->scale_byte);
  out->d = f16_to_float(raw.d);
  out->neg_dmin = -f16_to_float(raw.dmin);
}

// A super-block int8 panel (GgufPanelLayout::super_block): per unit of 256 k, the nr columns' 2-bit codes by
// sub-block and group, (3-bit codes) their third bits, their scale bytes, then f32 d and -dmin (gguf_super_layout).
// Padding columns hold code 0 (u = code bias) under zero factors.
void fill_super_panel(const GgufPanelLayout& l, int64_t k, int nr, uint8_t* panel,
                      const std::function<std::pair<int, int64_t>(int)>& column_of, const MatrixView& gate,
                      const MatrixView& up) {
  const GgmlTypeTraits* t = ggml_type_traits(l.ggml_type);
  const GgufBlockFormat* b = gguf_block_format_of_type(l.ggml_type);
  HYMOE_CHECK(t && b && t->block_values == kQ8KBlock && k % kQ8KBlock == 0, "the super-block form packs rows of ",
              "whole 256-value blocks, not type ", l.ggml_type, " of ", k);
  const GgufSuperLayout sl = gguf_super_layout(l, nr);
  const int64_t units = k / kQ8KBlock;
  std::memset(panel, 0, static_cast<size_t>(units * sl.unit_bytes));
  // A padding column's block: code 0 (u = code bias) under zero factors, so +0 as the other layouts' padding.
  SuperBlock padding{};
  std::memset(padding.u, l.code_bias, sizeof padding.u);
  SuperBlock sb;
  for (int j = 0; j < nr; ++j) {
    const auto [which, col] = column_of(j);
    const MatrixView& src = which == 0 ? gate : up;
    HYMOE_CHECK(col < 0 ||
                (src.quant.scheme == QuantScheme::kGgml && src.quant.ggml_type == l.ggml_type && src.k == k));
    const auto* row = static_cast<const std::byte*>(src.data) + std::max<int64_t>(col, 0) * units * t->block_bytes;
    for (int64_t u = 0; u < units; ++u) {
      if (col >= 0) split_super_block(*b, row + u * t->block_bytes, &sb);
      const SuperBlock& block = col >= 0 ? sb : padding;
      uint8_t* unit = panel + u * sl.unit_bytes;
      for (int kk = 0; kk < kQ8KBlock; ++kk) {
        const int s = kk / 16, g = kk % 16 / 4, q = kk % 4;
        unit[(s * nr + j) * 4 + q] |= static_cast<uint8_t>((block.u[kk] & 3) << (2 * g));
        if (l.code_bits == 3) {
          const auto [byte, bit] = third_bit_at(sl, nr, kk, j);
          unit[byte] |= static_cast<uint8_t>((block.u[kk] >> 2) << bit);
        }
      }
      for (int s = 0; s < 16; ++s) unit[sl.scales + s * nr + j] = block.scale_byte[s];
      std::memcpy(unit + sl.d + 4 * j, &block.d, sizeof block.d);
      if (l.offsets) std::memcpy(unit + sl.neg_dmin + 4 * j, &block.neg_dmin, sizeof block.neg_dmin);
    }
  }
}

// The factors of a super-block panel's unit holding kk, for column j: the scale byte of kk's sub-block, d, -dmin.
struct SuperFactors {
  int sc, m;
  float d, neg_dmin;
};
SuperFactors super_factors(const GgufPanelLayout& l, const uint8_t* panel, int nr, int64_t kk, int j) {
  const GgufSuperLayout sl = gguf_super_layout(l, nr);
  const uint8_t* unit = panel + kk / kQ8KBlock * sl.unit_bytes;
  const int byte = unit[sl.scales + kk % kQ8KBlock / 16 * nr + j];
  if (!l.offsets) return {static_cast<int8_t>(byte), 0, load_f32(unit + sl.d + 4 * j), 0.0f};
  return {byte & 15, byte >> 4, load_f32(unit + sl.d + 4 * j), load_f32(unit + sl.neg_dmin + 4 * j)};
}

// Where the codes of k index kk lie in an int8 panel of the units or compact layout: the unit (or sub-unit) start.
const uint8_t* int8_code_unit(WeightFormat format, const GgufPanelLayout& l, const uint8_t* panel, int nr, int64_t kk) {
  if (!l.compact) return panel + kk / l.k_unit * weight_unit_bytes(format, nr);
  const GgufCompactLayout cl = gguf_compact_layout(l, nr);
  return panel + kk / kQ8KBlock * cl.unit_bytes + kk % kQ8KBlock / l.k_unit * cl.code_bytes;
}

// Column j's factors of the compact unit holding kk: sc, m, d, -dmin of kk's sub-block.
struct CompactFactors {
  int sc, m;
  float d, neg_dmin;
};
CompactFactors compact_factors(const GgufPanelLayout& l, const uint8_t* panel, int nr, int64_t kk, int j) {
  const GgufCompactLayout cl = gguf_compact_layout(l, nr);
  const uint8_t* unit = panel + kk / kQ8KBlock * cl.unit_bytes;
  const int64_t s = kk % kQ8KBlock / l.k_unit;
  return {static_cast<int8_t>(unit[cl.scales + s * nr + j]), l.offsets ? unit[cl.mins + s * nr + j] : 0,
          load_f32(unit + cl.d + 4 * j),
          l.offsets ? load_f32(unit + cl.neg_dmin + 4 * j) : 0.0f};
}

// Column j's block of a grid panel holding k index kk, taken apart.
GgmlBlockCodes grid_block_codes(const GgufPanelLayout& l, const uint8_t* panel, int nr, int64_t kk, int j) {
  const int64_t block_bytes = gguf_grid_block_bytes(l.ggml_type);
  GgmlBlockCodes parts;
  split_block_ref(l.ggml_type, reinterpret_cast<const std::byte*>(panel + (kk / kQ8KBlock * nr + j) * block_bytes),
                  &parts);
  return parts;
}

}  // namespace

float gguf_panel_sub_scale(WeightFormat format, const uint8_t* panel, int nr, int64_t kk, int j) {
  const GgufPanelLayout l = is_gguf_format(format) ? gguf_panel_layout(format) : gguf_int8_layout(format);
  if (l.grid) return grid_block_codes(l, panel, nr, kk, j).scale[kk % kQ8KBlock / l.k_unit];
  if (l.super_block) {
    const SuperFactors f = super_factors(l, panel, nr, kk, j);
    return f.d * static_cast<float>(f.sc);  // exact: an f16 value times 4 bits (3-bit codes: 6)
  }
  if (l.compact) {
    const CompactFactors f = compact_factors(l, panel, nr, kk, j);
    return f.d * static_cast<float>(f.sc);  // exact: an f16 value times 8 bits at most
  }
  const uint8_t* unit = panel + kk / l.k_unit * weight_unit_bytes(format, nr);
  return is_gguf_format(format) ? load_f32(unit + int64_t{l.k_unit} * nr * l.code_bits / 8 + 4 * j)
                                : gguf_int8_panel_scale(format, unit, nr, j);
}

void fill_gguf_panel(WeightFormat format, int64_t k, int nr, uint8_t* panel,
                     const std::function<std::pair<int, int64_t>(int)>& column_of, const MatrixView& gate,
                     const MatrixView& up) {
  const GgufPanelLayout l = gguf_panel_layout(format);
  if (l.grid) return fill_grid_panel(l, k, nr, panel, column_of, gate, up);
  const int64_t row_bytes = int64_t{nr} * l.code_bits / 8;
  const int half = nr / 2, high_bits = l.code_bits - 4;
  fill_panel_units(format, l, k, nr, panel, column_of, gate, up, [&](uint8_t* unit, int kk, int j, int stored) {
    uint8_t* row = unit + kk * row_bytes;
    if (l.code_bits == 8) {
      row[j] = static_cast<uint8_t>(stored);
      return;
    }
    if (j < half) row[j] = static_cast<uint8_t>((row[j] & 0xf0) | (stored & 15));
    else row[j - half] = static_cast<uint8_t>((row[j - half] & 0x0f) | ((stored & 15) << 4));
    const int bit = j * high_bits;  // the high plane after the nibbles
    if (high_bits > 0) row[half + bit / 8] |= static_cast<uint8_t>((stored >> 4) << (bit % 8));
  });
}

namespace {

// Stores code u (`stored`) of k kk (in its unit) and column j into the codes of an int8 layout's unit (gemm_kernels.h,
// gguf_int8_layout), which start zeroed.
void put_int8_code(const GgufPanelLayout& l, int nr, uint8_t* unit, int kk, int j, int stored) {
  HYMOE_CHECK(stored >= 0 && stored < (1 << l.code_bits));
  const int groups = l.k_unit / 4, high_bits = l.code_bits - 4;
  const int g = kk / 4, t = kk % 4;
  if (l.code_bits == 8) {
    unit[(g * nr + j) * 4 + t] = static_cast<uint8_t>(stored);
    return;
  }
  const int h = g % (groups / 2), nibble_shift = g < groups / 2 ? 0 : 4;
  unit[(h * nr + j) * 4 + t] |= static_cast<uint8_t>((stored & 15) << nibble_shift);
  if (high_bits > 0) unit[(groups / 2 * nr + j) * 4 + t] |= static_cast<uint8_t>((stored >> 4) << (g * high_bits));
}

// A compact int8 panel (GgufPanelLayout::compact): per unit of 256 k the sub-units' codes, then the blocks' integer
// scales and mins and their d and -dmin (gguf_compact_layout). Each factor is checked to give split_block_ref's
// scale and offset to the bit, so the kernels' products are the units layout's factors. Padding columns hold code 0
// under zero factors, as the units layout's do.
void fill_compact_panel(const GgufPanelLayout& l, int64_t k, int nr, uint8_t* panel,
                        const std::function<std::pair<int, int64_t>(int)>& column_of, const MatrixView& gate,
                        const MatrixView& up) {
  const GgmlTypeTraits* t = ggml_type_traits(l.ggml_type);
  HYMOE_CHECK(t && t->block_values == kQ8KBlock && k % kQ8KBlock == 0, "the compact form packs rows of whole ",
              "256-value blocks, not type ", l.ggml_type, " of ", k);
  const GgufCompactLayout cl = gguf_compact_layout(l, nr);
  const int64_t units = k / kQ8KBlock;
  std::memset(panel, 0, static_cast<size_t>(units * cl.unit_bytes));
  ColumnCodes col_codes;
  GgmlBlockFactors f;
  const StoredCodes stored = stored_codes(l);
  for (int j = 0; j < nr; ++j) {
    const auto [which, col] = column_of(j);
    if (col < 0) {
      for (int64_t u = 0; u < units * cl.subs; ++u)
        for (int kk = 0; kk < l.k_unit; ++kk)
          put_int8_code(l, nr, panel + u / cl.subs * cl.unit_bytes + u % cl.subs * cl.code_bytes, kk, j,
                        stored.pad + stored.bias);
      continue;
    }
    const MatrixView& src = which == 0 ? gate : up;
    HYMOE_CHECK(src.quant.scheme == QuantScheme::kGgml && src.quant.ggml_type == l.ggml_type && src.k == k);
    split_column(src, col, col_codes);
    const auto* row = static_cast<const std::byte*>(src.data) + col * units * t->block_bytes;
    for (int64_t u = 0; u < units; ++u) {
      uint8_t* unit = panel + u * cl.unit_bytes;
      split_block_factors(l.ggml_type, row + u * t->block_bytes, &f);
      for (int s = 0; s < cl.subs; ++s) {
        const size_t sub = static_cast<size_t>(u * cl.subs + s);
        HYMOE_CHECK(std::bit_cast<uint32_t>(f.d * static_cast<float>(f.sc[s])) ==
                            std::bit_cast<uint32_t>(col_codes.scale[sub]) &&
                        (!l.offsets || std::bit_cast<uint32_t>(-f.dmin * static_cast<float>(f.m[s])) ==
                                           std::bit_cast<uint32_t>(col_codes.offset[sub])),
                    "compact factors of type ", l.ggml_type, " differ from its decoder's");
        unit[cl.scales + s * nr + j] = static_cast<uint8_t>(f.sc[s]);
        if (l.offsets) unit[cl.mins + s * nr + j] = f.m[s];
        for (int kk = 0; kk < l.k_unit; ++kk)
          put_int8_code(l, nr, unit + s * cl.code_bytes, kk, j, col_codes.code[sub * l.k_unit + kk] + stored.bias);
      }
      const float neg_dmin = -f.dmin;
      std::memcpy(unit + cl.d + 4 * j, &f.d, sizeof f.d);
      if (l.offsets) std::memcpy(unit + cl.neg_dmin + 4 * j, &neg_dmin, sizeof neg_dmin);
    }
  }
}

}  // namespace

void fill_gguf_int8_panel(WeightFormat format, int64_t k, int nr, uint8_t* panel,
                          const std::function<std::pair<int, int64_t>(int)>& column_of, const MatrixView& gate,
                          const MatrixView& up) {
  const GgufPanelLayout l = gguf_int8_layout(format);
  HYMOE_CHECK(!l.mxfp4, "mxfp4 int8 panels are packed from kMxfp4 views (pack_quantized_matrix)");
  if (l.grid) return fill_grid_panel(l, k, nr, panel, column_of, gate, up);
  if (l.super_block) return fill_super_panel(l, k, nr, panel, column_of, gate, up);
  if (l.compact) return fill_compact_panel(l, k, nr, panel, column_of, gate, up);
  fill_panel_units(format, l, k, nr, panel, column_of, gate, up, [&](uint8_t* unit, int kk, int j, int stored) {
    put_int8_code(l, nr, unit, kk, j, stored);
  });
}

int gguf_int8_panel_code(WeightFormat format, const uint8_t* panel, int nr, int64_t kk, int j) {
  const GgufPanelLayout l = gguf_int8_layout(format);
  if (l.grid) return grid_block_codes(l, panel, nr, kk, j).code[kk % kQ8KBlock] + l.code_bias;
  if (l.super_block) {
    const GgufSuperLayout sl = gguf_super_layout(l, nr);
    const uint8_t* unit = panel + kk / kQ8KBlock * sl.unit_bytes;
    const int in_unit = static_cast<int>(kk % kQ8KBlock), s = in_unit / 16, g = in_unit % 16 / 4, t = in_unit % 4;
    const int low = unit[(s * nr + j) * 4 + t] >> (2 * g) & 3;
    if (l.code_bits == 2) return low;
    const auto [byte, bit] = third_bit_at(sl, nr, in_unit, j);
    return low | (unit[byte] >> bit & 1) << 2;
  }
  const uint8_t* unit = int8_code_unit(format, l, panel, nr, kk);
  const int in_unit = static_cast<int>(kk % l.k_unit), g = in_unit / 4, t = in_unit % 4;
  if (l.code_bits == 8) return unit[(g * nr + j) * 4 + t];
  const int groups = l.k_unit / 4, high_bits = l.code_bits - 4;
  const int nibble = (unit[(g % (groups / 2) * nr + j) * 4 + t] >> (g < groups / 2 ? 0 : 4)) & 15;
  const int high = high_bits > 0 ? (unit[(groups / 2 * nr + j) * 4 + t] >> (g * high_bits)) & ((1 << high_bits) - 1) : 0;
  if (l.mxfp4) return kMxfp4Kvalues[nibble] + l.code_bias;
  if (l.values) return l.values[nibble] + l.code_bias;
  return nibble | (high << 4);
}

float gguf_int8_panel_scale(WeightFormat format, const uint8_t* unit, int nr, int j) {
  const GgufPanelLayout l = gguf_int8_layout(format);
  HYMOE_CHECK(!l.super_block && !l.compact, "a unit of 256 k has a scale per sub-block: gguf_panel_sub_scale");
  const uint8_t* factors = unit + int64_t{l.k_unit} * nr * l.code_bits / 8;
  // E8M0 e halved: 2^(e - 128), subnormal for e = 0 and 1 (ldexp is exact there).
  return l.mxfp4 ? std::ldexp(1.0f, factors[j] - 128) : load_factor(l, factors, j);
}

float gguf_int8_panel_offset(WeightFormat format, const uint8_t* panel, int nr, int64_t kk, int j) {
  const GgufPanelLayout l = gguf_int8_layout(format);
  HYMOE_CHECK(l.ggml_type != 0);
  if (!l.offsets) return 0.0f;  // the grid types among them
  if (l.super_block) {
    const SuperFactors f = super_factors(l, panel, nr, kk, j);
    return f.neg_dmin * static_cast<float>(f.m);  // -(dmin * m), exactly
  }
  if (l.compact) {
    const CompactFactors f = compact_factors(l, panel, nr, kk, j);
    return f.neg_dmin * static_cast<float>(f.m);  // -(dmin * m), exactly
  }
  const uint8_t* unit = panel + kk / l.k_unit * weight_unit_bytes(format, nr);
  return load_factor(l, unit + int64_t{l.k_unit} * nr * l.code_bits / 8, nr + j);
}

float gguf_panel_weight(WeightFormat format, const uint8_t* panel, int nr, int64_t kk, int j) {
  if (is_gguf_grid_format(format)) {
    const GgufPanelLayout l = is_gguf_format(format) ? gguf_panel_layout(format) : gguf_int8_layout(format);
    const GgmlBlockCodes parts = grid_block_codes(l, panel, nr, kk, j);
    return parts.scale[kk % kQ8KBlock / l.k_unit] * static_cast<float>(parts.code[kk % kQ8KBlock]);
  }
  if (is_gguf_int8_format(format)) {
    const GgufPanelLayout l = gguf_int8_layout(format);
    const float scale = gguf_panel_sub_scale(format, panel, nr, kk, j);
    const float code = static_cast<float>(gguf_int8_panel_code(format, panel, nr, kk, j) - l.code_bias);
    return l.offsets ? std::fma(scale, code, gguf_int8_panel_offset(format, panel, nr, kk, j)) : scale * code;
  }
  const GgufPanelLayout l = gguf_panel_layout(format);
  const int64_t row_bytes = int64_t{nr} * l.code_bits / 8, code_bytes = l.k_unit * row_bytes;
  const uint8_t* unit = panel + kk / l.k_unit * weight_unit_bytes(format, nr);
  const uint8_t* row = unit + kk % l.k_unit * row_bytes;
  int code;
  if (l.code_bits == 8) {
    code = static_cast<int8_t>(row[j]);
  } else {
    const int half = nr / 2, high_bits = l.code_bits - 4, bit = j * high_bits;
    const int high = high_bits > 0 ? (row[half + bit / 8] >> (bit % 8)) & ((1 << high_bits) - 1) : 0;
    const int stored = (j < half ? row[j] & 15 : row[j - half] >> 4) | (high << 4);
    code = l.values ? l.values[stored] : stored - l.code_bias;
  }
  const float scale = load_f32(unit + code_bytes + 4 * j);
  if (!l.offsets) return scale * static_cast<float>(code);
  return std::fma(scale, static_cast<float>(code), load_f32(unit + code_bytes + 4 * (nr + j)));
}

void gemm_gguf_f32__ref(WeightFormat format, int m, int mr, int nr, int64_t kc, const void* a, const void* b, float* c,
                        int64_t ldc, bool accumulate) {
  const float* ap = static_cast<const float*>(a);
  const uint8_t* bp = static_cast<const uint8_t*>(b);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < nr; ++j) {
      double acc = accumulate ? c[i * ldc + j] : 0.0;
      for (int64_t kk = 0; kk < kc; ++kk)
        acc += static_cast<double>(ap[kk * mr + i]) * gguf_panel_weight(format, bp, nr, kk, j);
      c[i * ldc + j] = static_cast<float>(acc);
    }
}

}  // namespace hymoe::kernels
