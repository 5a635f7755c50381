// The GEMM stages below the grouped drivers: packing (weights into micro-panels, once at load), the per-ISA
// micro-kernels (one MR x NR tile over a K block: no blocking loops, no threads, no allocation) and their scalar
// references. Knows nothing of experts, routing or the MLP; the drivers (grouped_ffn_packed.cc,
// grouped_gemm.cc) do the blocking and scheduling.
//
// Weight formats (docs/kernels.md, "Formats"): each is a packing of the weights into panels of NR columns, a
// packing of a micro-tile's activations, a micro-kernel per ISA and a scalar reference. The grouped driver
// (gemm_driver.h) is one piece of code for all of them; it sees a format only through GemmFormat.
//   f32        (N/NR, K, NR) f32; f32 FMA.
//   bf16 widen (N/NR, K, NR) bf16, widened to f32 in registers; f32 FMA: the exact bf16 path.
//   bf16 dot   (N/NR, K/2, NR, 2) bf16: k pairs, the operand vdpbf16ps consumes; activations rounded to bf16.
//   q8 block32 per panel, per k block of 32: (8, NR, 4) u8 weights w + 128 (four consecutive k of a column
//              together, the operand vpdpbusd consumes), then NR f32 scales; w = round(x / d), d = max|x| / 127
//              over the column's block. Activations quantized the same way per row and block when packed.
//   GGUF       the block types of gguf_formats.inc repacked from their blocks (GgufPanelLayout below): per panel
//              and sub-block (16 or 32 k), the columns' codes (4 to 8 bits) then their f32 scales (and offsets);
//              the IQ1-IQ3 types keep their blocks as stored, 256 k a unit. Decoded to the exact f32 weights in
//              registers; f32 FMA.
//   GGUF int8  the same types repacked for integer dot products (GgufPanelLayout, gguf_int8_layout): per panel
//              and sub-block, groups of four consecutive k of a column (the (k/4, NR, 4) operand vpdpbusd /
//              vpmaddubsw consume), codes unsigned with a bias, two 4-bit codes per byte (5 and 6 bits: a plane of
//              the high bits), then the columns' f32 scales (and offsets). The super-block form (Q2_K, Q3_K,
//              TQ1_0, TQ2_0) keeps 2-bit codes (Q3_K: and a plane of third bits) and integer sub-block scales per
//              256 k under f32 d (and -dmin) (gguf_super_layout); the grid types as above. Activations quantized
//              per block as ggml's CPU backend does (q8_0, q8_1 or q8_K) when packed; per unit an exact integer
//              dot, then float FMAs per C element.
//              MXFP4 runs the same way against q8_0 activations (as llama.cpp runs gpt-oss): its E2M1 nibbles in
//              Q4_0's nibble layout, looked up in registers as 2x their value plus 12, then NR u8 E8M0 scales.
//   fp8 block  per panel, per k block of 128: (128, NR) u8 float8 e4m3fn codes, then NR f32 multipliers (the
//              checkpoint's block scale times 2^8, see gemm_quantized.cc); decoded exactly in registers; f32 FMA.
//   fp8 dot    the fp8 block's codes in k-pair rows, (64, 2 NR) u8 (fp8_code_offset's order: a word holds one code of
//              each panel half), then the same NR
//              multipliers; each code decoded in registers to the bf16 bits of fp8(b) * 2^-8 (exact: e4m3 has 3
//              mantissa bits), activations rounded to bf16 pairs; per block of 128 k one vdpbf16ps chain, then one
//              f32 FMA with the multiplier per C element (gemm_quantized.h).
//   mxfp4      per panel, per k group of 32: (16, NR) u8 (k pair t of column j: low nibble k = 2t, high 2t + 1,
//              E2M1 codes), then NR u8 E8M0 scales; decoded exactly in registers; f32 FMA. GGUF's MXFP4 blocks
//              (ggml type 39: value j and j + 16 in byte j) are reordered into these pairs when packed.
// K is padded with zeros to the format's k unit (1, 2, 16, 32 or 128). A gate/up pair is packed interleaved:
// panel p holds gate columns [p*NR/2, (p+1)*NR/2) then up columns of the same range, so one tile produces both halves of
// SwiGLU's input.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "hymoe/dtype.h"
#include "hymoe/quant_formats.h"
#include "kernels/formats/matrix_view.h"
#include "kernels/isa/isa.h"

namespace hymoe::kernels {

enum class WeightFormat {
  kF32, kBf16Widen, kBf16Dot, kQ8Block32,
  // GGUF blocks repacked into compact panels of codes and per-column f32 factors (gemm_gguf-inl.h): exact weights,
  // f32 activations. One per line of gguf_formats.inc.
#define HYMOE_GGUF_BLOCK(T, ...) kGgml##T,
#include "kernels/formats/gguf_formats.inc"
#undef HYMOE_GGUF_BLOCK
  // Checkpoint FP8 (DeepSeek-V3) and MXFP4 (gpt-oss) codes kept compact (gemm_quantized.cc): exact weights, f32
  // activations.
  kFp8Block128, kMxfp4Block32,
  // The GGUF blocks repacked for integer dot products with activations quantized as ggml's CPU backend does
  // (QuantCompute::kInt8), each against its type's vec_dot_type (gguf_formats.inc).
#define HYMOE_GGUF_BLOCK(T, ...) kGgml##T##I8,
#include "kernels/formats/gguf_formats.inc"
#undef HYMOE_GGUF_BLOCK
  // MXFP4 (gpt-oss) repacked for integer dot products with q8_0 activations (QuantCompute::kInt8), as llama.cpp's
  // ggml_vec_dot_mxfp4_q8_0.
  kMxfp4Block32I8,
  // Checkpoint FP8 on the bf16 dot product (QuantCompute other than kExact, AVX512_BF16): exact weights,
  // activations rounded to bf16.
  kFp8Block128Dot,
};
constexpr int kNumWeightFormats = static_cast<int>(WeightFormat::kFp8Block128Dot) + 1;

// ggml's activation types for integer dot products (its vec_dot_type): q8_0 (32 values, f16 d), q8_1 (q8_0 plus
// s = f16(d * sum of the codes), for the types with offsets m: m * s is their offsets' share of a block's dot) and
// q8_K (256 values, f32 d).
enum class GgmlActivation { kQ8_0, kQ8_1, kQ8_K };
// The int8 form column of gguf_formats.inc: the layout of a type's integer-dot panels (gguf_int8_layout;
// GgufPanelLayout's half_factors, compact and super_block, gguf_super_unit_factors for kSuper1, and the super-block
// layout's 3-bit codes for kSuper3).
enum class GgufInt8Form { kUnits, kHalf, kCompact, kSuper, kSuper1, kSuper3 };

// One line of gguf_formats.inc.
struct GgufBlockFormat {
  const char* type_name;     // "Q4_K"
  uint32_t ggml_type;
  WeightFormat exact, int8;  // kGgmlQ4_K, kGgmlQ4_KI8
  const char* exact_operands, *int8_operands;  // "q4_kw_f32", "q4_kw_q8_k"
  int k_unit, code_bits, code_bias, int8_code_bias;
  bool offsets;
  GgmlActivation activation;
  const int8_t* values;  // the table a code indexes (kIq4nlValues), or nullptr: the code is the value
  bool grid;             // the IQ1/IQ2/IQ3 types: panels keep the blocks (see GgufPanelLayout::grid)
  GgufInt8Form int8_form;  // the int8 form column
};
// The act column of gguf_formats.inc as the enum.
#define HYMOE_GGML_ACTIVATION_q8_0 GgmlActivation::kQ8_0
#define HYMOE_GGML_ACTIVATION_q8_1 GgmlActivation::kQ8_1
#define HYMOE_GGML_ACTIVATION_q8_k GgmlActivation::kQ8_K
// The values column.
#define HYMOE_GGUF_VALUES_none nullptr
#define HYMOE_GGUF_VALUES_iq4nl kIq4nlValues
#define HYMOE_GGUF_VALUES_grid nullptr
#define HYMOE_GGUF_GRID_none false
#define HYMOE_GGUF_GRID_iq4nl false
#define HYMOE_GGUF_GRID_grid true
// The int8 form column.
#define HYMOE_GGUF_INT8_FORM_units GgufInt8Form::kUnits
#define HYMOE_GGUF_INT8_FORM_half GgufInt8Form::kHalf
#define HYMOE_GGUF_INT8_FORM_compact GgufInt8Form::kCompact
#define HYMOE_GGUF_INT8_FORM_super GgufInt8Form::kSuper
#define HYMOE_GGUF_INT8_FORM_super1 GgufInt8Form::kSuper1
#define HYMOE_GGUF_INT8_FORM_super3 GgufInt8Form::kSuper3
inline constexpr GgufBlockFormat kGgufBlockFormats[] = {
#define HYMOE_GGUF_BLOCK(T, t, type, unit, bits, bias, int8_bias, offsets, act, values, int8_form) \
  {#T, type, WeightFormat::kGgml##T, WeightFormat::kGgml##T##I8, #t "w_f32", #t "w_" #act, unit, bits, bias,   \
   int8_bias, offsets, HYMOE_GGML_ACTIVATION_##act, HYMOE_GGUF_VALUES_##values, HYMOE_GGUF_GRID_##values,        \
   HYMOE_GGUF_INT8_FORM_##int8_form},
#include "kernels/formats/gguf_formats.inc"
#undef HYMOE_GGUF_BLOCK
};
// The registry's line of an exact or int8 GGUF format (or of ggml type `type`); nullptr for any other.
constexpr const GgufBlockFormat* gguf_block_format(WeightFormat format) {
  for (const GgufBlockFormat& b : kGgufBlockFormats)
    if (b.exact == format || b.int8 == format) return &b;
  return nullptr;
}
constexpr const GgufBlockFormat* gguf_block_format_of_type(uint32_t type) {
  for (const GgufBlockFormat& b : kGgufBlockFormats)
    if (b.ggml_type == type) return &b;
  return nullptr;
}
// The kernel-name spelling of a format's operands (docs/kernels.md): "f32w_f32", "bf16w_f32", "bf16w_bf16",
// "q8w_q8", "fp8w_f32", "mxfp4w_f32", "mxfp4w_q8_0", "fp8w_bf16", and the GGUF formats' from their registry lines
// ("q4_kw_f32", "q4_kw_q8_k", ...).
const char* weight_format_operands(WeightFormat format);

// The panel layout of a GGUF format (docs/kernels.md, "Formats"), per k unit of `k_unit` k (one GGUF sub-block):
//   codes   (k_unit, nr) of code_bits each, a k row after another: 8 bits, byte j of a row = column j (signed);
//           4-6 bits, stored as code + code_bias: byte j of the row's first nr/2 bytes holds the low four bits of
//           column j (low nibble) and column j + nr/2 (high nibble), then (5, 6 bits) a plane of the high bits,
//           code_bits - 4 of them per column, column j's at bit j * (code_bits - 4) (little-endian)
//   scales  nr f32, the sub-block's scale of each column
//   offsets nr f32 (the types with offsets): Q4_1/Q5_1's m, the K-quants' -(dmin * m), of each column
// Weight (k, j) = fmaf(scale[j], code, offset[j]), or scale[j] * code without offsets: the reference's bits.
struct GgufPanelLayout {
  uint32_t ggml_type;  // 0 for the non-GGUF formats
  int k_unit, code_bits, code_bias;
  bool offsets;
  // MXFP4 (ggml type 39): the stored nibbles are E2M1 codes, whose integer code is kMxfp4Kvalues[nibble] (2x the
  // E2M1 value, so u = that + 12 in 0..24), and the scales are nr u8 E8M0 exponents e, scale 2^(e - 128) (half
  // the E8M0 value, as the codes are doubled; e = 0 and 1 give the subnormals 2^-128 and 2^-127).
  bool mxfp4 = false;
  // The IQ4 types: the stored nibble is an index, the code values[nibble] (int8 layout: u = that + code_bias).
  const int8_t* values = nullptr;
  // The IQ1/IQ2/IQ3 types (values "grid" in gguf_formats.inc): a panel keeps each column's GGUF blocks as stored,
  // per unit of 256 k the nr columns' blocks one after another (ggml's block bytes each), and the kernels expand a
  // unit at a time, in L1, into this layout's 8-bit codes (k_unit, code_bits ... describe that expansion).
  bool grid = false;
  // The super-block int8 form (int8 form super, super1 or super3 in gguf_formats.inc: Q2_K, TQ1_0, TQ2_0, Q3_K; int8
  // layouts only), whatever the type's line says: k_unit 16 (the sub-block, q8_K's sums per 16); super and super1
  // code bits 2, code bias 0 and offsets, super3 code bits 3, code bias 4 and none. Per unit of 256 k (a GGUF
  // super-block; gguf_super_layout gives the offsets) the codes' low two bits: 16 blocks (nr, 4) u8, block s's byte
  // (j, t) holding k 16 s + 4 g + t of column j at bits 2 g, 2 g + 1 (g = 0..3: sub-block s's four groups); then
  // (3-bit codes) 16 blocks (nr / 2, 4) u8 of the third bits, block s's byte (j, t) holding those of k 16 s + 4 g + t
  // at bit g for column j and at bit 4 + g for column j + nr / 2; then (16, nr) u8, the scale byte of sub-block s and
  // column j (2 bits: sc in the low nibble, m in the high; 3 bits: sc as int8); then nr f32 d, and (offsets) nr f32
  // -dmin. Q2_K keeps the file's codes, scale bytes and f16 factors; the ternary types store u = q, sc = m = 1,
  // dmin = d; Q3_K u = q + 4 and the file's sc - 32. Weight (k, j) = fmaf(d * sc, u, -(dmin * m)), or d * sc * (u - 4)
  // for 3 bits: the exact layout's value. The kernels take per super-block and C element isum = sum over s of sc *
  // (sum of (u - code bias) * q) and msum = sum over s of m * (sum of q), exact integers, then c = fma(float(isum), d *
  // d_a, c) and (offsets) c = fma(float(msum), -dmin * d_a, c): llama.cpp's arithmetic for Q2_K and Q3_K, one float
  // step per 256 k (for TQ1_0 and TQ2_0 llama.cpp takes float(isum - msum) * d * d_a, one rounding fewer).
  bool super_block = false;
  // The compact factors (int8 form compact in gguf_formats.inc: Q4_K, Q5_K, Q6_K, IQ4_XS; int8 layouts only): the
  // codes as the units layout below has them, 256 / k_unit sub-units of k_unit k one after another per unit of 256
  // k (a GGUF block), then the factors once per unit as the block keeps them (gguf_compact_layout gives the
  // offsets): (subs, nr) i8 sc, and for the types with offsets (subs, nr) u8 m; nr f32 d, and -dmin. Sub-block s's
  // scale d * sc is exact in f32 (an f16 value times at most 8 bits), so the kernels, which form it from these, see
  // the units layout's scales to the bit, from 0.594 bytes a weight (Q4_K) instead of 0.75; the mins m enter an
  // integer sum per 256 k, times -dmin once (int8_tile).
  bool compact = false;
  // The f16 factors (int8 form half in gguf_formats.inc: the types whose sub-block scale, and offset, is the block's
  // own f16 d, and m: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL; int8 layouts only): the units layout below with its nr
  // scales (and nr offsets) as f16, which the kernels widen exactly, at 2 bytes each instead of 4: the file's bytes.
  bool half_factors = false;
};
// llama.cpp's kvalues_mxfp4: 2x the E2M1 value of each nibble.
constexpr int8_t kMxfp4Kvalues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
constexpr GgufPanelLayout gguf_panel_layout(WeightFormat format) {
  const GgufBlockFormat* b = gguf_block_format(format);
  if (!b || b->exact != format) return {0, 0, 0, 0, false};
  return {b->ggml_type, b->k_unit, b->code_bits, b->code_bias, b->offsets, false, b->values, b->grid};
}
constexpr bool is_gguf_format(WeightFormat format) { return gguf_panel_layout(format).ggml_type != 0; }
// The integer-dot layout of a GGUF type (docs/kernels.md, "Formats"), per k unit of `k_unit` k (a GGUF sub-block),
// with G = k_unit / 4 groups of four consecutive k; every code is stored unsigned, u = code + code_bias:
//   codes   8 bits: G blocks (nr, 4) u8, block g's byte (j, t) = u of k 4g + t, column j.
//           4-6 bits: G/2 blocks (nr, 4) of nibbles, block h's byte (j, t) holding group h's low four bits (low
//           nibble) and group h + G/2's (high nibble); then (5, 6 bits) one plane (nr, 4) u8 of the high bits,
//           group g's code_bits - 4 of them at bit g * (code_bits - 4).
//   scales  nr f32, the sub-block's scale of each column (MXFP4: nr u8 E8M0, see GgufPanelLayout::mxfp4)
//   offsets nr f32 (the types with offsets): as gguf_panel_layout's
// Weight (k, j) = fmaf(scale[j], u - code_bias, offset[j]) (or scale[j] * (u - code_bias)): the same values as
// gguf_panel_layout's. The AVX2 idiom needs u <= 63 except for Q8_0 (vpmaddubsw's pair sums saturate at 2^15).
// MXFP4 stores the E2M1 nibble itself in Q4_0's nibble layout; its u is kMxfp4Kvalues[nibble] + 12.
constexpr GgufPanelLayout gguf_int8_layout(WeightFormat format) {
  if (format == WeightFormat::kMxfp4Block32I8) return {39, 32, 4, 12, false, true};
  const GgufBlockFormat* b = gguf_block_format(format);
  if (!b || b->int8 != format) return {0, 0, 0, 0, false};
  if (b->int8_form == GgufInt8Form::kSuper || b->int8_form == GgufInt8Form::kSuper1)
    return {b->ggml_type, 16, 2, 0, true, false, nullptr, false, true};
  if (b->int8_form == GgufInt8Form::kSuper3) return {b->ggml_type, 16, 3, 4, false, false, nullptr, false, true};
  return {b->ggml_type, b->k_unit, b->code_bits, b->int8_code_bias, b->offsets, false, b->values, b->grid, false,
          b->int8_form == GgufInt8Form::kCompact, b->int8_form == GgufInt8Form::kHalf};
}
constexpr bool is_gguf_int8_format(WeightFormat format) { return gguf_int8_layout(format).ggml_type != 0; }
// The ggml type a GGUF format (exact or int8) repacks from a kGgml view; 0 for the others (MXFP4's int8 format
// packs the checkpoint's kMxfp4 views, gemm_quantized.h).
constexpr uint32_t gguf_format_type(WeightFormat format) {
  return gguf_panel_layout(format).ggml_type | (gguf_int8_layout(format).mxfp4 ? 0 : gguf_int8_layout(format).ggml_type);
}
// The activations an int8 format's kernels take (MXFP4: q8_0, as llama.cpp's ggml_vec_dot_mxfp4_q8_0).
constexpr GgmlActivation gguf_int8_activation(WeightFormat format) {
  const GgufBlockFormat* b = gguf_block_format(format);
  return b ? b->activation : GgmlActivation::kQ8_0;
}
// Bytes of the per-column factors after an int8 unit's codes: f32 (or f16) scales (and offsets), or MXFP4's u8
// E8M0.
constexpr int64_t gguf_int8_factor_bytes(const GgufPanelLayout& l, int nr) {
  return l.mxfp4 ? nr : (l.half_factors ? 2 : 4) * nr * (l.offsets ? 2 : 1);
}
constexpr int kQ8KBlock = 256;
// Bytes of one sub-block unit of a GGUF layout of nr columns: the codes, then the factors. For the grid types, the
// layout their kernels expand a block into.
constexpr int64_t gguf_layout_unit_bytes(const GgufPanelLayout& l, int nr) {
  return int64_t{l.k_unit} * nr * l.code_bits / 8 + gguf_int8_factor_bytes(l, nr);
}
// ggml's block bytes of the grid types (ggml_type.cc's table; a test checks they agree).
constexpr int64_t gguf_grid_block_bytes(uint32_t type) {
  return type == 16 ? 66 : type == 17 ? 74 : type == 22 ? 82 : type == 18 ? 98 : type == 21 ? 110 : type == 19 ? 50
         : type == 29 ? 56 : 0;
}
constexpr bool is_gguf_grid_format(WeightFormat format) {
  const GgufBlockFormat* b = gguf_block_format(format);
  return b && b->grid;
}
constexpr bool is_gguf_super_format(WeightFormat format) { return gguf_int8_layout(format).super_block; }
constexpr bool is_gguf_compact_format(WeightFormat format) { return gguf_int8_layout(format).compact; }
// Where the parts of one 256-k unit of a compact int8 panel of nr columns start (GgufPanelLayout::compact): the
// sub-units' codes at 0, code_bytes each, then the sc bytes, the m bytes, nr f32 d, nr f32 -dmin; and the unit's
// bytes. A layout without offsets has no m bytes and no -dmin.
struct GgufCompactLayout {
  int subs;
  int64_t code_bytes, scales, mins, d, neg_dmin, unit_bytes;
};
constexpr GgufCompactLayout gguf_compact_layout(const GgufPanelLayout& l, int nr) {
  const int subs = kQ8KBlock / l.k_unit;
  const int64_t code_bytes = int64_t{l.k_unit} * nr * l.code_bits / 8, scales = subs * code_bytes;
  const int64_t mins = scales + subs * int64_t{nr}, d = mins + (l.offsets ? subs * int64_t{nr} : 0);
  const int64_t neg_dmin = d + 4 * int64_t{nr};
  return {subs, code_bytes, scales, mins, d, neg_dmin, neg_dmin + (l.offsets ? 4 * int64_t{nr} : 0)};
}
// The super-block int8 formats whose every sub-block has scale and min 1 (int8 form super1: the ternary types):
// their kernels skip the integer scale multiplies.
constexpr bool gguf_super_unit_factors(WeightFormat format) {
  const GgufBlockFormat* b = gguf_block_format(format);
  return b && b->int8 == format && b->int8_form == GgufInt8Form::kSuper1;
}
// Where the parts of one 256-k unit of a super-block int8 panel (layout l) of nr columns start
// (GgufPanelLayout::super_block): the codes' low two bits at 0, then (3-bit codes) the third bits, the scale bytes,
// nr f32 d, (offsets) nr f32 -dmin; and the unit's bytes.
struct GgufSuperLayout {
  int64_t high, scales, d, neg_dmin, unit_bytes;
};
constexpr GgufSuperLayout gguf_super_layout(const GgufPanelLayout& l, int nr) {
  const int64_t high = int64_t{kQ8KBlock} / 4 * nr, scales = high + (l.code_bits == 3 ? kQ8KBlock / 8 * nr : 0);
  const int64_t d = scales + 16 * int64_t{nr}, neg_dmin = d + 4 * int64_t{nr};
  return {high, scales, d, neg_dmin, neg_dmin + (l.offsets ? 4 * int64_t{nr} : 0)};
}
// k granularity of the format's packed panels: K is padded with zeros to a multiple of it.
constexpr int k_unit(WeightFormat format) {
  return is_gguf_grid_format(format) || is_gguf_super_format(format) || is_gguf_compact_format(format) ? kQ8KBlock
         : is_gguf_format(format)                 ? gguf_panel_layout(format).k_unit
         : is_gguf_int8_format(format)            ? gguf_int8_layout(format).k_unit
         : format == WeightFormat::kBf16Dot       ? 2
         : format == WeightFormat::kQ8Block32     ? 32
         : format == WeightFormat::kFp8Block128 || format == WeightFormat::kFp8Block128Dot ? 128
         : format == WeightFormat::kMxfp4Block32  ? 32
                                                  : 1;
}
// Bytes of one k unit of a packed weight panel of nr columns, and of a packed activation micro-panel of mr rows.
constexpr int64_t weight_unit_bytes(WeightFormat format, int nr) {
  if (is_gguf_grid_format(format)) return nr * gguf_grid_block_bytes(gguf_block_format(format)->ggml_type);
  if (is_gguf_super_format(format)) return gguf_super_layout(gguf_int8_layout(format), nr).unit_bytes;
  if (is_gguf_compact_format(format)) return gguf_compact_layout(gguf_int8_layout(format), nr).unit_bytes;
  if (is_gguf_format(format) || is_gguf_int8_format(format))
    return gguf_layout_unit_bytes(is_gguf_format(format) ? gguf_panel_layout(format) : gguf_int8_layout(format), nr);
  return format == WeightFormat::kF32 ? 4 * nr : format == WeightFormat::kQ8Block32 ? 36 * nr
       : format == WeightFormat::kFp8Block128 || format == WeightFormat::kFp8Block128Dot ? 132 * nr : format == WeightFormat::kMxfp4Block32 ? 17 * nr
       : 2 * k_unit(format) * nr;
}
// An integer activation unit of sub_unit k (activation_sub_unit) in an mr-row micro-panel: where row i puts the 4
// codes of its k group g, the f32 scale of the unit's block and the int32 sum (q8_1: the block's s). The one
// statement of the layout that the packers (activation_units-inl.h) and the driver's gather of rows quantized once
// (gemm_driver.h) both write.
struct ActivationUnitLayout {
  int sub_unit;
  int mr;
  constexpr int64_t bytes() const { return int64_t{sub_unit + 8} * mr; }
  constexpr int64_t codes(int g, int i) const { return (int64_t{g} * mr + i) * 4; }
  constexpr int64_t scale(int i) const { return int64_t{sub_unit} * mr + 4 * i; }
  constexpr int64_t sum(int i) const { return int64_t{sub_unit + 4} * mr + 4 * i; }
};
constexpr int64_t activation_unit_bytes(WeightFormat format, int mr) {
  // GGUF int8 and q8 blocks: integer units (ActivationUnitLayout). The grid types and the super-block form: a
  // unit of 256 k is 256 / k_unit such units.
  if (is_gguf_int8_format(format)) {
    const int sub = gguf_int8_layout(format).k_unit;
    return ActivationUnitLayout{sub, mr}.bytes() * (k_unit(format) / sub);
  }
  return format == WeightFormat::kBf16Dot ? 4 * mr
       : format == WeightFormat::kQ8Block32 ? ActivationUnitLayout{32, mr}.bytes()
       : format == WeightFormat::kFp8Block128Dot ? 2 * 128 * mr  // (64, mr) bf16 pairs
       : 4 * k_unit(format) * mr;  // f32 activations, k_unit of them per row (f32, bf16 widen, GGUF, fp8, mxfp4)
}
constexpr int kQ8Block = 32;
// k of one activation unit where a format's activations are quantized into integer units (ActivationUnitLayout):
// the GGUF int8 formats' sub-block (16 or 32; 256-k units hold several) and hymoe's q8 blocks' 32; 0 for the
// formats whose activations are packed otherwise.
constexpr int activation_sub_unit(WeightFormat format) {
  return is_gguf_int8_format(format) ? gguf_int8_layout(format).k_unit : format == WeightFormat::kQ8Block32 ? 32 : 0;
}

struct PackedMatrix {
  WeightFormat format = WeightFormat::kF32;
  int nr = 0;                 // panel width in columns
  int64_t k = 0;              // logical rows of every panel (the packing pads them to the format's k unit)
  int64_t n = 0;              // logical columns (for a gate/up pair: the hidden width, each panel holds nr/2 of it)
  int64_t panels = 0;
  bool gate_up = false;
  std::vector<uint8_t> buffer;  // panels of the format's layout, one after another (see the file comment)

  DType dtype() const { return format == WeightFormat::kF32 ? DType::kF32 : DType::kBF16; }  // f32 and bf16 forms
  int64_t panel_bytes() const { return (k + k_unit(format) - 1) / k_unit(format) * weight_unit_bytes(format, nr); }
  const void* data() const { return buffer.data(); }
  size_t bytes() const { return buffer.size(); }
  // The f32 and bf16-widen forms' elements, (panels, k, nr).
  const float* f32() const { return reinterpret_cast<const float*>(buffer.data()); }
  const uint16_t* bf16() const { return reinterpret_cast<const uint16_t*>(buffer.data()); }
};

// Packs b (logical (K, N), any layout, f32 or bf16) into panels of nr columns: f32 weights as f32 and bf16 as
// bf16 (widened by the kernels) unless a format is given (bf16 dot rounds f32 sources to bf16; q8 quantizes).
PackedMatrix pack_matrix(const MatrixView& b, int nr);
PackedMatrix pack_matrix(const MatrixView& b, int nr, WeightFormat format);
// Packs panel p (of ceil(N / nr)) of pack_matrix(b, nr) into out (k * nr elements of b's dtype): the unit of work
// for callers that pack per call into their own memory and in parallel with other matrices.
void pack_matrix_panel(const MatrixView& b, int nr, int64_t p, void* out);
// Packs gate and up (both (K, H), same dtype) interleaved, nr/2 columns of each per panel.
PackedMatrix pack_gate_up(const MatrixView& gate, const MatrixView& up, int nr);
PackedMatrix pack_gate_up(const MatrixView& gate, const MatrixView& up, int nr, WeightFormat format);

// q8 block quantization, shared by the weight packing, the activation packing and the references so all agree to
// the bit: d = max|x| / 127 (0 for an all-zero block), q = round-to-nearest-even(x / d) in [-127, 127]; the n <= 32
// values past x[n) are taken as 0.
void quantize_q8_block(const float* x, int n, int8_t* q, float* d);
// The panel format of ggml type id `type`: the exact GGUF format of a registry line (gguf_formats.inc), or
// kMxfp4Block32 for MXFP4 (packed by gemm_quantized.h, int8 twin kMxfp4Block32I8); false for any other type.
bool gguf_weight_format(uint32_t type, WeightFormat* format);
// The ggml types gguf_weight_format takes, for messages: "Q8_0, Q4_0, ..., MXFP4".
std::string gguf_runnable_type_names();
// Panel p's GGUF branch of pack_matrix / pack_gate_up (gemm_pack_gguf.cc): column j of the panel is column
// column_of(j).second of gate (first == 0) or up (first == 1), or zeros where that is < 0. The views are kGgml of
// the format's type.
void fill_gguf_panel(WeightFormat format, int64_t k, int nr, uint8_t* panel,
                     const std::function<std::pair<int, int64_t>(int)>& column_of, const MatrixView& gate,
                     const MatrixView& up);
// The integer-dot twin of an exact GGUF format (kGgmlQ4_K -> kGgmlQ4_KI8) or of kMxfp4Block32, and back.
WeightFormat gguf_int8_twin(WeightFormat exact);
WeightFormat gguf_exact_twin(WeightFormat int8);
// Panel p's branch of pack_matrix / pack_gate_up for the GGUF int8 formats, as fill_gguf_panel.
void fill_gguf_int8_panel(WeightFormat format, int64_t k, int nr, uint8_t* panel,
                          const std::function<std::pair<int, int64_t>(int)>& column_of, const MatrixView& gate,
                          const MatrixView& up);
// The unsigned code u of weight (kk, j) of a GGUF int8 panel of nr columns (MXFP4: its nibble's kvalue + 12).
int gguf_int8_panel_code(WeightFormat format, const uint8_t* panel, int nr, int64_t kk, int j);
// The scale of column j in one unit (`unit`, from its codes on) of a GGUF int8 panel of nr columns.
float gguf_int8_panel_scale(WeightFormat format, const uint8_t* unit, int nr, int j);
// The scale of column j's sub-block holding k index kk in a GGUF panel (exact or int8, grid types included).
float gguf_panel_sub_scale(WeightFormat format, const uint8_t* panel, int nr, int64_t kk, int j);
// The offset of that sub-block in a GGUF int8 panel of a type with offsets (0 for the others).
float gguf_int8_panel_offset(WeightFormat format, const uint8_t* panel, int nr, int64_t kk, int j);
// Activations as ggml's CPU backend quantizes them before its integer dot products (quantize_row_q8_0_ref,
// quantize_row_q8_K_ref), shared by the packers and the reference's rounding model so all agree to the bit;
// values past x[n) are taken as 0.
//   q8_0: 32 values, d = amax / 127, q = roundf(x * (1 / d)) (ties away from zero); *d is d rounded to f16, the
//         value ggml multiplies by.
//   q8_K: 256 values, max = the value of largest magnitude (the first such), q = min(127, nearest_int(x * (-127 /
//         max))) (ties to even); *d = 1 / (-127 / max) in f32. Both all-zero blocks give d = 0.
void quantize_ggml_q8_0_block(const float* x, int n, int8_t* q, float* d);
//   q8_1: q8_0's q and *d, and *s = d * (sum of q) rounded to f16, with q8_0's d before its rounding
//         (quantize_row_q8_1_ref).
void quantize_ggml_q8_1_block(const float* x, int n, int8_t* q, float* d, float* s);
void quantize_ggml_q8_k_block(const float* x, int n, int8_t* q, float* d);
// Weight (kk, j) of a GGUF-format panel of nr columns (the exact decoded value; for references and tests).
float gguf_panel_weight(WeightFormat format, const uint8_t* panel, int nr, int64_t kk, int j);
// Packs a plain row-major f32 (K, N) matrix with leading dimension ldb (the backward's activation gradients).
void pack_rows_f32(const float* b, int64_t ldb, int64_t k, int64_t n, int nr, float* out);

// Micro-kernel contract: C[m, 0:NR] (=, or += when accumulate) A[m, 0:kc] . P[0:kc, 0:NR], where m in 1..MR, A is
// a packed row panel (element (i, k) at a[k * MR + i], see pack_rows_panel; rows [k0, k0 + kc) of it), P one packed weight panel's
// rows [k0, k0 + kc) (contiguous, NR per row), and C row-major with leading dimension ldc. Every C element is one
// float FMA chain in increasing k, so blocking K and splitting rows never change the bits.
// prefetch / prefetch_bytes: a hint, up to min(kc, ceil(bytes / 64)) cache lines from `prefetch` on, fetched toward
// L2 evenly over the k loop while the tile computes (the driver passes a share of the next weight block). Never dereferenced: any
// address, or nullptr, is allowed and the result does not depend on it.
using GemmF32wFn = void (*)(int m, int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate,
                            const void* prefetch, int64_t prefetch_bytes);
using GemmBf16wFn = void (*)(int m, int64_t kc, const float* a, const uint16_t* b, float* c, int64_t ldc,
                             bool accumulate, const void* prefetch, int64_t prefetch_bytes);
// The few-rows variant: m = 1-3 rows (a packed row panel as above) over kFewRowsPanels[m] adjacent weight panels,
// panel i at b + i * panel_stride and its C at c + i * NR, C's rows ldc apart. Same bits as that many calls of the
// m-row micro-kernel. One row is the decode case.
constexpr int kFewRowsPanels[4] = {0, 4, 3, 2};
// How far ahead of its loads the one-row decode form of the int8 (GGUF, MXFP4) and the f32/bf16 formats prefetches
// each panel, toward L2 (prefetcht1), bytes. The driver gives the decode form no hint, and what the core fetches
// itself reaches past the end of a panel into the next, and past the call's last panel into the tile the same
// thread is likely to take next. Measured in the whole layer at T = 1 on Zen 4 (docs/performance.md, "The decode
// form's prefetch"): 2-4 KB ahead within noise of each other; against a unit ahead into L1 (the int8 forms) or
// none (f32, bf16), the tile loops 5-18% faster in most formats (Q6_K's and the 4-bit Q3_K's gate/up level to 10%
// slower, their down faster); 512 bytes ahead slower.
constexpr int64_t kDecodePrefetchBytes = 3072;
using GemmFewF32wFn = void (*)(int m, int64_t kc, const float* a, const float* b, int64_t panel_stride, float* c,
                               int64_t ldc, bool accumulate);
using GemmFewBf16wFn = void (*)(int m, int64_t kc, const float* a, const uint16_t* b, int64_t panel_stride, float* c,
                                int64_t ldc, bool accumulate);
// out[t * ldo + j] = x_t . w_j for t < tokens (1..kDotMaxTokens) and j < n (1..kDotMaxRows), x_t the row
// x + t * ldx and w_j the row w + j * ldw, k floats each: dot products straight from an (N, K) layout, each with a
// fixed summation order that depends on nothing but x_t and w_j (see dot_rows_gemm).
constexpr int kDotMaxTokens = 16, kDotMaxRows = 32;
using DotRowsFn = void (*)(int64_t k, const float* x, int64_t ldx, int tokens, const float* w, int64_t ldw, int n,
                           float* out, int64_t ldo);
// h[i] = silu(g[i]) * u[i] for i < n (n a multiple of the vector width).
using SwigluFn = void (*)(int64_t n, const float* g, const float* u, float* h);

// A weight format's kernels on one ISA, as the grouped driver uses them. Operands are the packed layouts above:
// `a` one activation micro-panel (pack_a's output) from its k unit k0/k_unit on, `b` one weight panel from the
// same unit; kc counts k (not units) and is a multiple of the k unit except at the end of K. Every C element is
// one chain of the format's accumulation in increasing k, so blocking K (at multiples of the unit) and
// splitting rows never change the bits.
// pack_a: rows [0, rows) (rows <= mr; row i read from a + (row_index ? row_index[i] : i) * lda) x k columns into
// one micro-panel of ceil(k / k_unit) units, rows past `rows` and k past `k` zero.
using PackActivationsFn = void (*)(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k, int mr,
                                   void* out);
using GemmFn = void (*)(int m, int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool accumulate,
                        const void* prefetch, int64_t prefetch_bytes);
using GemmFewFn = void (*)(int m, int64_t kc, const void* a, const void* b, int64_t panel_stride_bytes, float* c,
                           int64_t ldc, bool accumulate);
// A format whose weights are decoded in registers may decode a block once for several micro-tiles:
// gemm_expanding is gemm that also writes the block's units(kc) units of decoded weights to `expanded`
// (expanded_unit_bytes a unit), and gemm_expanded is gemm with b that layout, with the same bits as gemm.
using GemmExpandingFn = void (*)(int m, int64_t kc, const void* a, const void* b, float* c, int64_t ldc,
                                 bool accumulate, const void* prefetch, int64_t prefetch_bytes, void* expanded);
struct GemmFormat {
  WeightFormat format;
  const char* name;  // the micro-kernel's name, e.g. "gemm_bf16w_bf16_12x32__avx512bf16"
  int mr, nr;
  PackActivationsFn pack_a;
  GemmFn gemm;
  GemmFewFn gemm_few;  // groups of 1..few_rows_max rows: m rows over kFewRowsPanels[m] panels per call
  int few_rows_max;    // 0: none
  GemmExpandingFn gemm_expanding = nullptr;  // nullptr: no expanded form
  GemmFn gemm_expanded = nullptr;
  int64_t expanded_unit_bytes = 0;
  // The driver's K block in k units; 0: its own (run_gemm_groups). fp8's dot form takes two units: per call it
  // sets up more than bf16's kernel does (its C round trip and multipliers are per unit anyway), and at 128 k
  // that cost it 5% hot against 3% at 1024 (docs/performance.md, "fp8's expanding micro-tile at 512 tokens").
  int64_t kc_units = 0;
  // The format's unit sizes, fixed where the entry is defined: k_unit and the unit bytes look the format up in the
  // registry (a scan of its table, tens of ns), which the driver's tiles would otherwise repeat for every tile of
  // every decode step (2-3% of a Qwen3-30B-A3B Q4_K layer at one token).
  int64_t unit_k = k_unit(format);
  int64_t a_unit = activation_unit_bytes(format, mr);
  int64_t b_unit = weight_unit_bytes(format, nr);
  bool gguf_int8 = is_gguf_int8_format(format);
  int64_t units(int64_t k) const { return (k + unit_k - 1) / unit_k; }
  int64_t a_unit_bytes() const { return a_unit; }
  int64_t b_unit_bytes() const { return b_unit; }
};

// The GGUF int8 formats' activation packings: q8_0 and q8_1 blocks in units of 32, q8_K blocks in units of 32 or
// 16 (Q6_K) (activation_unit_bytes: per unit the codes, the f32 scale of the unit's block, the int32 sum of the
// unit's codes; q8_1: its s as f32 in place of the sum).
void pack_activations_ggml_q8_0(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k, int mr,
                                void* out);
void pack_activations_ggml_q8_1(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k, int mr,
                                void* out);
void pack_activations_ggml_q8_k32(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k, int mr,
                                  void* out);
void pack_activations_ggml_q8_k16(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k, int mr,
                                  void* out);
// The same packings with AVX2's quantizers, to the same bits (activation_quantize_avx2.cc): what the GGUF int8
// kernels of every ISA from AVX2 up pack with.
void pack_activations_ggml_q8_0__avx2(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k,
                                      int mr, void* out);
void pack_activations_ggml_q8_1__avx2(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k,
                                      int mr, void* out);
void pack_activations_ggml_q8_k32__avx2(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k,
                                        int mr, void* out);
void pack_activations_ggml_q8_k16__avx2(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k,
                                        int mr, void* out);
// hymoe's q8 packing (pack_activations_q8) with AVX2's quantizer, to the same bits: what the q8 kernels of every ISA
// from AVX2 up pack with.
void pack_activations_q8__avx2(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k, int mr,
                               void* out);
// pack_activations_bf16_pairs with AVX2's rounding, to the same bits: what the bf16 dot kernels pack with.
void pack_activations_bf16_pairs__avx2(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k,
                                       int mr, void* out);
// The ISA-free activation packings (pack_rows_panel for f32; rounding to bf16 pairs; q8 block quantization).
void pack_activations_f32(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k, int mr, void* out);
void pack_activations_bf16_pairs(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k, int mr,
                                 void* out);
void pack_activations_q8(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k, int mr,
                         void* out);

// One ISA's kernels and tile.
struct IsaKernels {
  Isa isa;
  int mr, nr;
  GemmF32wFn gemm_f32w;
  GemmBf16wFn gemm_bf16w;
  GemmFewF32wFn gemm_f32w_few;  // m = 1-3 rows over kFewRowsPanels[m] panels per call
  GemmFewBf16wFn gemm_bf16w_few;
  SwigluFn swiglu;
  DotRowsFn dot_rows;
  const char* gemm_f32w_name;   // e.g. "gemm_f32w_f32_6x16__avx2"
  const char* gemm_bf16w_name;  // e.g. "gemm_bf16w_f32_6x16__avx2"
  // Probes of the machine's limits for the benchmarks (not used by the kernels): FLOPs of `iters` steps of 12
  // independent vector FMA chains, and a single streaming read of n floats (n a multiple of 4 vectors).
  double (*fma_probe)(int64_t iters, float* sink);
  float (*sum_probe)(const float* p, int64_t n);
  // The same read over `streams` (a multiple of 4) regions of n floats, region s at p + s * stride, interleaved a
  // cache line at a time (the decode kernel's access pattern).
  float (*sum_probe_streams)(const float* p, int64_t stride, int streams, int64_t n);
  // Every weight format this ISA runs, in any order; a format it lacks is absent (bf16 dot needs AVX512_BF16).
  // q8 uses vpdpbusd on kAvx512Vnni and up, the vpmaddubsw idiom below.
  std::span<const GemmFormat* const> formats;
  // Peak probes of the dot instructions, as fma_probe: operations (a multiply and an add each) of `iters` steps of
  // 12 independent chains; nullptr where the ISA lacks the instruction.
  double (*bf16_dot_probe)(int64_t iters, float* sink);
  double (*int8_dot_probe)(int64_t iters, float* sink);

  // The kernels of f, or nullptr where this ISA has none.
  const GemmFormat* format(WeightFormat f) const {
    for (const GemmFormat* g : formats)
      if (g->format == f) return g;
    return nullptr;
  }
};

// The kernels of `isa`, or nullptr for Isa::kScalar (which uses the portable implementations).
const IsaKernels* isa_kernels(Isa isa);
const IsaKernels& isa_kernels_avx2();
const IsaKernels& isa_kernels_avx512();
const IsaKernels& isa_kernels_avx512vnni();
const IsaKernels& isa_kernels_avx512bf16();

// Packs rows [0, rows) x columns [0, kc) of a row-major A (leading dimension lda) into ceil(rows / mr) row panels
// of (kc, mr): // (rows/MR, kc, MR); rows past `rows` are zero. The drivers pack activations once per run: rows of a
// large lda would otherwise alias in the L1 sets (2048 floats = 8 KiB apart), and the micro-kernel reads the
// panel contiguously.
// With row_index, row i is read from a + row_index[i] * lda: the dispatch's gather fused into the packing, so the
// sorted copy of the routed rows is never written.
void pack_rows_panel(const float* a, int64_t lda, int64_t rows, int64_t kc, int mr, float* out,
                     const int64_t* row_index = nullptr);

// Scalar references of the micro-kernel contract for any tile (mr, nr) (double accumulation).
void gemm_f32w_f32__ref(int m, int mr, int nr, int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                        bool accumulate);
void gemm_bf16w_f32__ref(int m, int mr, int nr, int64_t kc, const float* a, const uint16_t* b, float* c,
                         int64_t ldc, bool accumulate);
void swiglu__ref(int64_t n, const float* g, const float* u, float* h);
// References of the bf16-dot and q8 micro-kernels on their packed operands (a: pack_a's micro-panel of mr rows,
// b: one weight panel of nr columns, both from unit 0): the same rounded inputs, double accumulation (q8: the
// exact integer dot of each block times its two scales).
void gemm_bf16w_bf16__ref(int m, int mr, int nr, int64_t kc, const void* a, const void* b, float* c, int64_t ldc,
                          bool accumulate);
void gemm_q8w_q8__ref(int m, int mr, int nr, int64_t kc, const void* a, const void* b, float* c, int64_t ldc,
                      bool accumulate);
// Reference of the GGUF-format micro-kernels: f32 activations (pack_activations_f32's micro-panel of mr rows)
// times the panel's exactly decoded weights, double accumulation.
void gemm_gguf_f32__ref(WeightFormat format, int m, int mr, int nr, int64_t kc, const void* a, const void* b, float* c,
                        int64_t ldc, bool accumulate);
// Reference of the GGUF int8 micro-kernels on their packed operands: per unit the exact integer dot of the codes,
// less code_bias times the activations' sum, times the two scales (plus offset times scale times sum), double
// accumulation.
void gemm_gguf_int8__ref(WeightFormat format, int m, int mr, int nr, int64_t kc, const void* a, const void* b,
                         float* c, int64_t ldc, bool accumulate);
// Each GGUF format's kernels, named after their registry line (gguf_formats.inc):
//   gemm_<t>w_<act>_2x16__avx2       AVX2 int8 kernels (vpmaddubsw; 2 x 16 tiles, one row over 4 panels for
//                                    decode), which the AVX-512 table without VNNI shares;
//   gemm_<t>w_<act>_6x32__avx512vnni their AVX512_VNNI versions (vpdpbusd; 6 x 32 tiles, 4 x 32 for the super-block
//                                    form: HYMOE_VNNI_INT8), which the AVX512_BF16 table shares;
//   gemm_<t>w_f32_4x16__avx2         AVX2 exact kernels (4 x 16 tiles; one row over 4 panels for decode), which the
//                                    AVX-512 tables share (gemm_avx512.cc says why).
// The AVX512_VNNI int8 tiles' rows by int8 form, as gemm_gguf_int8-inl.h's kIntRows gives them there (the unit
// checks they agree), and the kernel's name from them.
#define HYMOE_VNNI_ROWS_units 6
#define HYMOE_VNNI_ROWS_half 6
#define HYMOE_VNNI_ROWS_compact 6
#define HYMOE_VNNI_ROWS_super 4
#define HYMOE_VNNI_ROWS_super1 4
#define HYMOE_VNNI_ROWS_super3 4
#define HYMOE_INT8_NAME_(t, act, rows, isa) gemm_##t##w_##act##_##rows##x32__##isa
#define HYMOE_INT8_NAME(t, act, rows, isa) HYMOE_INT8_NAME_(t, act, rows, isa)
#define HYMOE_VNNI_INT8(t, act, int8_form) HYMOE_INT8_NAME(t, act, HYMOE_VNNI_ROWS_##int8_form, avx512vnni)
#define HYMOE_STRING_(x) #x
#define HYMOE_STRING(x) HYMOE_STRING_(x)
#define HYMOE_GGUF_BLOCK(T, t, type, unit, bits, bias, int8_bias, offsets, act, values, int8_form) \
  extern const GemmFormat gemm_##t##w_##act##_2x16__avx2, HYMOE_VNNI_INT8(t, act, int8_form),     \
      gemm_##t##w_f32_4x16__avx2;
#include "kernels/formats/gguf_formats.inc"
#undef HYMOE_GGUF_BLOCK
extern const GemmFormat gemm_mxfp4w_q8_0_2x16__avx2, gemm_mxfp4w_q8_0_6x32__avx512vnni;

}  // namespace hymoe::kernels
