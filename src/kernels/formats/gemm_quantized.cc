// The ISA-free parts of the fp8 and mxfp4 panel formats (gemm_quantized.h): the repacking of quantized views into
// panels and the scalar references of their micro-kernels. Built without ISA flags.
#include "kernels/formats/gemm_quantized.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "hymoe/error.h"
#include "hymoe/quant_decode.h"
#include "hymoe/quant_formats.h"
#include "kernels/driver/gemm_driver.h"
#include "kernels/driver/thread_pool.h"

namespace hymoe::kernels {

static_assert(kKc % kFp8PanelBlock == 0 && kKc % kMxfp4PanelGroup == 0,
              "the driver's K blocks must end on whole units of the quantized formats");
static_assert(k_unit(WeightFormat::kFp8Block128) == kFp8PanelBlock && k_unit(WeightFormat::kMxfp4Block32) == kMxfp4PanelGroup);
static_assert(k_unit(WeightFormat::kMxfp4Block32I8) == kMxfp4PanelGroup &&
              weight_unit_bytes(WeightFormat::kMxfp4Block32I8, 16) == weight_unit_bytes(WeightFormat::kMxfp4Block32, 16),
              "the int8 mxfp4 panels keep the exact ones' 17 bytes per 32 k and column");

namespace {
bool is_ggml_mxfp4(const MatrixView& b) {
  return b.quant.scheme == QuantScheme::kGgml && b.quant.ggml_type == static_cast<uint32_t>(GgmlType::kMXFP4);
}
}  // namespace

bool quantized_panel_format(const MatrixView& b, WeightFormat* format) {
  if (b.quant.scheme == QuantScheme::kFp8Block && b.quant.block_k % kFp8PanelBlock == 0) {
    *format = WeightFormat::kFp8Block128;
    return true;
  }
  if (b.quant.scheme == QuantScheme::kMxfp4 || is_ggml_mxfp4(b)) {
    *format = WeightFormat::kMxfp4Block32;
    return true;
  }
  return false;
}

bool packs_as_quantized(const MatrixView& b) {
  return b.quantized() && (b.quant.scheme != QuantScheme::kGgml || is_ggml_mxfp4(b));
}

namespace {

// Column j of a panel: which source (0 gate, 1 up/plain) and its output row, or -1 for padding.
struct Column {
  const MatrixView* src;
  int64_t row;
};

// Where code kk (of a unit) of column j lies in a unit of an fp8 format: k rows of nr codes, or (dot format) k-pair
// rows of 2 * nr codes, in each the code of column j = h * nr/2 + l and k parity q at byte 4l + 2q + h, so that
// word i of a row holds the codes of both halves (gemm_fp8_dot-inl.h's decode takes a half from each byte).
int64_t fp8_code_offset(WeightFormat format, int nr, int64_t kk, int j) {
  if (format != WeightFormat::kFp8Block128Dot) return kk * nr + j;
  const int half = nr / 2;
  return kk / 2 * 2 * nr + 4 * (j % half) + 2 * (kk % 2) + j / half;
}

// Fills panel `panel` of an fp8 format from its nr source columns.
void fill_fp8_panel(WeightFormat format, const Column* cols, int nr, int64_t k, uint8_t* panel) {
  const int64_t units = (k + kFp8PanelBlock - 1) / kFp8PanelBlock;
  const int64_t unit_bytes = weight_unit_bytes(format, nr);
  for (int j = 0; j < nr; ++j) {
    const MatrixView* m = cols[j].src;
    const int64_t row = cols[j].row;
    const auto* codes = m ? static_cast<const uint8_t*>(m->data) + row * m->k : nullptr;
    const auto* scales = m ? static_cast<const float*>(m->quant.scales) : nullptr;
    const int64_t scale_cols = m ? (m->k + m->quant.block_k - 1) / m->quant.block_k : 0;
    for (int64_t u = 0; u < units; ++u) {
      uint8_t* unit = panel + u * unit_bytes;
      const int64_t k0 = u * kFp8PanelBlock;
      float multiplier = 0.0f;
      for (int64_t kk = 0; kk < kFp8PanelBlock; ++kk) {
        const uint8_t c = row >= 0 && k0 + kk < k ? codes[k0 + kk] : 0;
        if ((c & 0x7f) == 0x7f)
          fail("fp8 weights: code ", c == 0x7f ? "0x7f" : "0xff", " (NaN in e4m3fn) at output row ", row, ", input ", k0 + kk, " of a ", m->n, " x ", m->k,
               " matrix; the packed fp8 kernels take finite codes only");
        unit[fp8_code_offset(format, nr, kk, j)] = c;
      }
      if (row >= 0) {
        const float s = scales[(row / m->quant.block_n) * scale_cols + k0 / m->quant.block_k];
        multiplier = s * 256.0f;
        if (!std::isfinite(multiplier))
          fail("fp8 weights: block scale ", s, " of output row ", row, ", input ", k0, " of a ", m->n, " x ", m->k,
               " matrix is not finite, or not finite times 2^8");
      }
      std::memcpy(unit + kFp8PanelBlock * nr + 4 * j, &multiplier, sizeof(float));
    }
  }
}

// Group g (32 k) of an mxfp4 column: its 16 code pairs in the Hugging Face order (byte t: k 2t low, 2t + 1 high)
// into pairs, and its E8M0 scale; a padding column (row < 0) is code 0 with scale 127.
uint8_t mxfp4_column_group(const Column& col, int64_t k, int64_t g, uint8_t pairs[kMxfp4PanelGroup / 2]) {
  const MatrixView* m = col.src;
  const int64_t groups = k / kMxfp4PanelGroup;
  if (col.row < 0) {
    std::memset(pairs, 0, kMxfp4PanelGroup / 2);
    return 127;
  }
  if (is_ggml_mxfp4(*m))  // GGUF: 17-byte blocks (e, qs[16]), value j and j + 16 in byte j: reordered
    return mxfp4_block_code_pairs(
        static_cast<const std::byte*>(m->data) + (col.row * groups + g) * int64_t{sizeof(BlockMxfp4)}, pairs);
  const int64_t stored = col.row * m->quant.row_step;
  std::memcpy(pairs, static_cast<const uint8_t*>(m->data) + stored * (k / 2) + g * 16, kMxfp4PanelGroup / 2);
  return static_cast<const uint8_t*>(m->quant.scales)[stored * groups + g];
}

// Both mxfp4 panel formats: kMxfp4Block32 (code pairs as stored) and kMxfp4Block32I8 (the nibbles in Q4_0's int8
// layout, gguf_int8_layout), each unit's codes then its nr E8M0 scales.
void fill_mxfp4_panel(WeightFormat format, const Column* cols, int nr, int64_t k, uint8_t* panel) {
  const int64_t groups = k / kMxfp4PanelGroup;
  const int64_t unit_bytes = weight_unit_bytes(format, nr);
  const bool int8 = format == WeightFormat::kMxfp4Block32I8;
  if (int8) std::memset(panel, 0, static_cast<size_t>(groups * unit_bytes));
  for (int j = 0; j < nr; ++j) {
    const MatrixView* m = cols[j].src;
    const int64_t row = cols[j].row;
    for (int64_t g = 0; g < groups; ++g) {
      uint8_t* unit = panel + g * unit_bytes;
      uint8_t pairs[kMxfp4PanelGroup / 2];
      const uint8_t s = mxfp4_column_group(cols[j], k, g, pairs);
      for (int t = 0; t < kMxfp4PanelGroup / 2; ++t) {
        const uint8_t pair = pairs[t];
        if (!int8) {
          unit[t * nr + j] = pair;
          continue;
        }
        // k 2t and 2t + 1: group kk / 4 of 8, the low nibble of block kk / 4 % 4 for the first four groups.
        for (int kk : {2 * t, 2 * t + 1}) {
          const int nibble = kk == 2 * t ? pair & 15 : pair >> 4, gr = kk / 4;
          unit[((gr % 4) * nr + j) * 4 + kk % 4] |= static_cast<uint8_t>(nibble << (gr < 4 ? 0 : 4));
        }
      }
      if (s == 255)
        fail("mxfp4 weights: E8M0 scale 255 (NaN) at output row ", row, ", group ", g, " of a ", m->n, " x ", m->k,
             " matrix");
      unit[(kMxfp4PanelGroup / 2) * nr + j] = s;
    }
  }
}

void check_quantized_packable(const MatrixView& b, int nr, WeightFormat format) {
  validate_quantized_matrix(b);
  HYMOE_CHECK(nr > 0 && nr % 2 == 0);
  WeightFormat natural;
  HYMOE_CHECK(quantized_panel_format(b, &natural) &&
                  (natural == format || (natural == WeightFormat::kMxfp4Block32 && format == WeightFormat::kMxfp4Block32I8) ||
                   (natural == WeightFormat::kFp8Block128 && format == WeightFormat::kFp8Block128Dot)),
              "a ",
              b.quant.scheme == QuantScheme::kFp8Block ? "fp8" : "quantized", " view (block_k ", b.quant.block_k,
              ") packed as ", weight_format_operands(format));
}

template <typename ColumnOf>
PackedMatrix pack_columns(const MatrixView& shape_of, int nr, WeightFormat format, int64_t panels, bool gate_up,
                          ColumnOf column_of) {
  PackedMatrix out;
  out.format = format;
  out.nr = nr;
  out.k = shape_of.k;
  out.n = shape_of.n;
  out.panels = panels;
  out.gate_up = gate_up;
  const int64_t panel_bytes = out.panel_bytes();
  out.buffer.resize(static_cast<size_t>(panels * panel_bytes));
  uint8_t* const buf = out.buffer.data();
  parallel_for(panels, [&](int64_t p, int) {
    std::vector<Column> cols(static_cast<size_t>(nr));
    for (int j = 0; j < nr; ++j) cols[static_cast<size_t>(j)] = column_of(p, j);
    if (format == WeightFormat::kFp8Block128 || format == WeightFormat::kFp8Block128Dot)
      fill_fp8_panel(format, cols.data(), nr, out.k, buf + p * panel_bytes);
    else fill_mxfp4_panel(format, cols.data(), nr, out.k, buf + p * panel_bytes);
  });
  return out;
}

}  // namespace

PackedMatrix pack_quantized_matrix(const MatrixView& b, int nr, WeightFormat format) {
  check_quantized_packable(b, nr, format);
  return pack_columns(b, nr, format, (b.n + nr - 1) / nr, false, [&](int64_t p, int j) {
    const int64_t col = p * nr + j;
    return col < b.n ? Column{&b, col} : Column{nullptr, -1};
  });
}

PackedMatrix pack_quantized_gate_up(const MatrixView& gate, const MatrixView& up, int nr, WeightFormat format) {
  check_quantized_packable(gate, nr, format);
  check_quantized_packable(up, nr, format);
  HYMOE_CHECK(gate.k == up.k && gate.n == up.n);
  const int half = nr / 2;
  return pack_columns(up, nr, format, (up.n + half - 1) / half, true, [&](int64_t p, int j) {
    const int64_t col = p * half + j % half;
    return col < up.n ? Column{j < half ? &gate : &up, col} : Column{nullptr, -1};
  });
}

namespace {
template <typename Weight>
void gemm_decoded_ref(int m, int mr, int nr, int64_t kc, const void* a, float* c, int64_t ldc, bool accumulate,
                      Weight&& weight) {
  const float* ap = static_cast<const float*>(a);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < nr; ++j) {
      double acc = accumulate ? c[i * ldc + j] : 0.0;
      for (int64_t kk = 0; kk < kc; ++kk) acc += static_cast<double>(ap[kk * mr + i]) * weight(kk, j);
      c[i * ldc + j] = static_cast<float>(acc);
    }
}
}  // namespace

namespace {
// Weight (kk, j) of a panel of an fp8 format (from unit 0), decoded by the scalar decoder: fp8(b) * scale.
float fp8_panel_weight(WeightFormat format, const uint8_t* panel, int nr, int64_t kk, int j) {
  const uint8_t* unit = panel + kk / kFp8PanelBlock * weight_unit_bytes(format, nr);
  float multiplier;
  std::memcpy(&multiplier, unit + kFp8PanelBlock * nr + 4 * j, sizeof(float));
  const float scale = multiplier / 256.0f;  // exact: the packing multiplied by 2^8
  return fp8_block_scaled_value_ref(unit + fp8_code_offset(format, nr, kk % kFp8PanelBlock, j), &scale, 1, 1, 1, 1, 0,
                                    0);
}
}  // namespace

void gemm_fp8w_f32__ref(int m, int mr, int nr, int64_t kc, const void* a, const void* b, float* c, int64_t ldc,
                        bool accumulate) {
  const uint8_t* bp = static_cast<const uint8_t*>(b);
  gemm_decoded_ref(m, mr, nr, kc, a, c, ldc, accumulate,
                   [&](int64_t kk, int j) { return fp8_panel_weight(WeightFormat::kFp8Block128, bp, nr, kk, j); });
}

void gemm_fp8w_bf16__ref(int m, int mr, int nr, int64_t kc, const void* a, const void* b, float* c, int64_t ldc,
                         bool accumulate) {
  const uint16_t* ap = static_cast<const uint16_t*>(a);
  const uint8_t* bp = static_cast<const uint8_t*>(b);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < nr; ++j) {
      double acc = accumulate ? c[i * ldc + j] : 0.0;
      for (int64_t kk = 0; kk < kc; ++kk)
        acc += static_cast<double>(bf16_to_float(ap[((kk / 2) * mr + i) * 2 + kk % 2])) *
               fp8_panel_weight(WeightFormat::kFp8Block128Dot, bp, nr, kk, j);
      c[i * ldc + j] = static_cast<float>(acc);
    }
}

void pack_activations_bf16_pairs128(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k, int mr,
                                    void* out) {
  pack_activations_bf16_pairs(a, lda, row_index, rows, k, mr, out);
  zero_pairs_to_fp8_unit(k, mr, out);
}

void zero_pairs_to_fp8_unit(int64_t k, int mr, void* out) {
  const int64_t pairs = (k + 1) / 2, unit_pairs = kFp8PanelBlock / 2;
  uint32_t* words = static_cast<uint32_t*>(out);
  std::fill(words + pairs * mr, words + (pairs + unit_pairs - 1) / unit_pairs * unit_pairs * mr, uint32_t{0});
}

void gemm_mxfp4w_f32__ref(int m, int mr, int nr, int64_t kc, const void* a, const void* b, float* c, int64_t ldc,
                          bool accumulate) {
  const uint8_t* bp = static_cast<const uint8_t*>(b);
  const int64_t unit_bytes = weight_unit_bytes(WeightFormat::kMxfp4Block32, nr);
  gemm_decoded_ref(m, mr, nr, kc, a, c, ldc, accumulate, [&](int64_t kk, int j) {
    const uint8_t* unit = bp + kk / kMxfp4PanelGroup * unit_bytes;
    const int t = static_cast<int>(kk % kMxfp4PanelGroup);
    const uint8_t pair = unit[(t / 2) * nr + j];
    return mxfp4_e2m1_value(static_cast<uint8_t>(t % 2 ? pair >> 4 : pair & 15)) *
           e8m0_scale_value(unit[(kMxfp4PanelGroup / 2) * nr + j]);
  });
}

}  // namespace hymoe::kernels
