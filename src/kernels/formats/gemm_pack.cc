// Packing of weights into micro-kernel panels, the scalar references of the micro-kernel contract, and the
// table of per-ISA kernels. Built without ISA flags: it only picks function pointers, never runs vector code.
#include <algorithm>
#include <cstring>
#include <functional>

#include "hymoe/error.h"
#include "kernels/formats/gemm_kernels.h"
#include "kernels/formats/gemm_quantized.h"
#include "kernels/driver/thread_pool.h"
#include "kernels/ffn/activation.h"  // swiglu__ref: the activation every kernel shares

namespace hymoe::kernels {
namespace {

// Element (kk, nn) of b in its stored dtype (bf16 bits stay bits: packing never rounds).
template <typename T>
T stored(const MatrixView& b, int64_t kk, int64_t nn) {
  const int64_t i = b.layout == WeightLayout::kOutIn ? nn * b.k + kk : kk * b.n + nn;
  return static_cast<const T*>(b.data)[i];
}

// Fills panel p of out: for each k, nr values; column j of the panel comes from column_of(j) of a source
// (-1: zero padding). Rows of k are filled in blocks so that, for sources whose columns are contiguous over k
// (kOutIn), the nr strided writes of a block land in the same few KiB of the panel instead of sweeping all of it
// once per column.
template <typename T, typename ColumnOf>
void fill_panel(int64_t k, int nr, T* panel, ColumnOf&& column_of, const MatrixView& gate, const MatrixView& up) {
  constexpr int64_t kBlock = 64;
  for (int64_t k0 = 0; k0 < k; k0 += kBlock) {
    const int64_t k1 = std::min(k, k0 + kBlock);
    for (int j = 0; j < nr; ++j) {
      const auto [which, col] = column_of(j);  // which: 0 = gate, 1 = up/plain, col < 0: padding
      const MatrixView& src = which == 0 ? gate : up;
      if (col < 0) {
        for (int64_t kk = k0; kk < k1; ++kk) panel[kk * nr + j] = T(0);
      } else if (src.layout == WeightLayout::kOutIn) {  // column col is contiguous over k
        const T* s = static_cast<const T*>(src.data) + col * src.k;
        for (int64_t kk = k0; kk < k1; ++kk) panel[kk * nr + j] = s[kk];
      } else {
        for (int64_t kk = k0; kk < k1; ++kk) panel[kk * nr + j] = stored<T>(src, kk, col);
      }
    }
  }
}

// Column col of src (k values) as floats, or as bf16 bits (f32 sources rounded to nearest even).
void read_column(const MatrixView& src, int64_t col, float* out) {
  if (src.layout == WeightLayout::kOutIn && src.dtype == DType::kF32) {
    const float* s = static_cast<const float*>(src.data) + col * src.k;
    std::copy(s, s + src.k, out);
  } else {
    for (int64_t kk = 0; kk < src.k; ++kk) out[kk] = src.at(kk, col);
  }
}

// Panel p of a packing in one of the k-unit formats (bf16 dot, q8): column j of the panel from column_of(j).
void fill_unit_panel(WeightFormat format, int64_t k, int nr, uint8_t* panel,
                     const std::function<std::pair<int, int64_t>(int)>& column_of, const MatrixView& gate,
                     const MatrixView& up) {
  const int64_t units = (k + k_unit(format) - 1) / k_unit(format), unit_bytes = weight_unit_bytes(format, nr);
  std::vector<float> column(static_cast<size_t>(units * k_unit(format)));
  for (int j = 0; j < nr; ++j) {
    const auto [which, col] = column_of(j);
    std::fill(column.begin(), column.end(), 0.0f);
    if (col >= 0) read_column(which == 0 ? gate : up, col, column.data());
    for (int64_t u = 0; u < units; ++u) {
      uint8_t* unit = panel + u * unit_bytes;
      const float* x = column.data() + u * k_unit(format);
      if (format == WeightFormat::kBf16Dot) {  // (K/2, nr, 2)
        uint16_t* pairs = reinterpret_cast<uint16_t*>(unit);
        pairs[2 * j] = float_to_bf16(x[0]);
        pairs[2 * j + 1] = float_to_bf16(x[1]);
      } else {  // q8: (8, nr, 4) u8 of q + 128, then nr f32 scales
        int8_t q[kQ8Block];
        float d;
        quantize_q8_block(x, kQ8Block, q, &d);
        for (int g = 0; g < kQ8Block / 4; ++g)
          for (int t = 0; t < 4; ++t) unit[(g * nr + j) * 4 + t] = static_cast<uint8_t>(q[4 * g + t] + 128);
        std::memcpy(unit + kQ8Block * nr + 4 * j, &d, sizeof(float));
      }
    }
  }
}

template <typename ColumnOf>
void pack_panels(PackedMatrix& out, const MatrixView& gate, const MatrixView& up, ColumnOf column_of) {
  const int64_t panel_bytes = out.panel_bytes();
  out.buffer.resize(static_cast<size_t>(out.panels * panel_bytes));
  uint8_t* const buf = out.buffer.data();
  parallel_for(out.panels, [&](int64_t p, int) {
    auto column = [&](int j) { return column_of(p, j); };
    uint8_t* panel = buf + p * panel_bytes;
    switch (out.format) {
      case WeightFormat::kF32:
        return fill_panel<float>(out.k, out.nr, reinterpret_cast<float*>(panel), column, gate, up);
      case WeightFormat::kBf16Widen:
        return fill_panel<uint16_t>(out.k, out.nr, reinterpret_cast<uint16_t*>(panel), column, gate, up);
      default:
        if (is_gguf_format(out.format)) return fill_gguf_panel(out.format, out.k, out.nr, panel, column, gate, up);
        if (is_gguf_int8_format(out.format))
          return fill_gguf_int8_panel(out.format, out.k, out.nr, panel, column, gate, up);
        return fill_unit_panel(out.format, out.k, out.nr, panel, column, gate, up);
    }
  });
}

// Column j of panel p of a plain (not gate/up) packing.
auto plain_columns(const MatrixView& b, int nr) {
  return [&b, nr](int64_t p, int j) {
    const int64_t col = p * nr + j;
    return std::pair<int, int64_t>{1, col < b.n ? col : -1};
  };
}

void check_packable(const MatrixView& b, int nr) {
  HYMOE_CHECK(b.data && b.k > 0 && b.n > 0 && nr > 0 && nr % 2 == 0);
  HYMOE_CHECK(b.quantized() || b.dtype == DType::kF32 || b.dtype == DType::kBF16, "weights must be f32 or bf16");
}

// The f32 and bf16-widen forms copy elements, so they keep the source's dtype; a GGUF format repacks its own type.
void check_format(const MatrixView& b, WeightFormat format) {
  if (gguf_format_type(format) != 0 || b.quantized()) {
    HYMOE_CHECK(b.quant.scheme == QuantScheme::kGgml && b.quant.ggml_type == gguf_format_type(format),
                weight_format_operands(format), " packing of other weights (ggml type ", b.quant.ggml_type, ")");
    return;
  }
  if (format == WeightFormat::kF32) HYMOE_CHECK(b.dtype == DType::kF32, "f32 packing of non-f32 weights");
  if (format == WeightFormat::kBf16Widen) HYMOE_CHECK(b.dtype == DType::kBF16, "bf16 packing of non-bf16 weights");
}

WeightFormat natural_format(const MatrixView& b) {
  WeightFormat gguf;
  if (b.quant.scheme == QuantScheme::kGgml && gguf_weight_format(b.quant.ggml_type, &gguf)) return gguf;
  return b.dtype == DType::kBF16 ? WeightFormat::kBf16Widen : WeightFormat::kF32;
}

}  // namespace

PackedMatrix pack_matrix(const MatrixView& b, int nr) { return pack_matrix(b, nr, natural_format(b)); }

PackedMatrix pack_matrix(const MatrixView& b, int nr, WeightFormat format) {
  if (packs_as_quantized(b)) return pack_quantized_matrix(b, nr, format);
  check_packable(b, nr);
  check_format(b, format);
  PackedMatrix out;
  out.format = format;
  out.nr = nr;
  out.k = b.k;
  out.n = b.n;
  out.panels = (b.n + nr - 1) / nr;
  pack_panels(out, b, b, plain_columns(b, nr));
  return out;
}

void pack_matrix_panel(const MatrixView& b, int nr, int64_t p, void* out) {
  check_packable(b, nr);
  HYMOE_CHECK(!b.quantized(), "per-call panel packing of block-quantized weights");
  HYMOE_CHECK(p >= 0 && p * nr < b.n, "panel ", p, " of a matrix of ", b.n, " columns");
  if (b.layout == WeightLayout::kInOut) {  // each of the panel's k rows is a run of a stored row: copied whole
    const int64_t col0 = p * nr, width = std::min<int64_t>(nr, b.n - col0);
    const auto copy_rows = [&]<typename T>(T* panel) {
      const T* src = static_cast<const T*>(b.data) + col0;
      for (int64_t kk = 0; kk < b.k; ++kk) {
        std::copy(src + kk * b.n, src + kk * b.n + width, panel + kk * nr);
        std::fill(panel + kk * nr + width, panel + (kk + 1) * nr, T(0));
      }
    };
    if (b.dtype == DType::kBF16) copy_rows(static_cast<uint16_t*>(out));
    else copy_rows(static_cast<float*>(out));
    return;
  }
  auto columns = plain_columns(b, nr);
  auto column_of = [&](int j) { return columns(p, j); };
  if (b.dtype == DType::kBF16) fill_panel<uint16_t>(b.k, nr, static_cast<uint16_t*>(out), column_of, b, b);
  else fill_panel<float>(b.k, nr, static_cast<float*>(out), column_of, b, b);
}

PackedMatrix pack_gate_up(const MatrixView& gate, const MatrixView& up, int nr) {
  return pack_gate_up(gate, up, nr, natural_format(up));
}

PackedMatrix pack_gate_up(const MatrixView& gate, const MatrixView& up, int nr, WeightFormat format) {
  if (packs_as_quantized(up)) return pack_quantized_gate_up(gate, up, nr, format);
  check_packable(gate, nr);
  check_packable(up, nr);
  HYMOE_CHECK(gate.k == up.k && gate.n == up.n && gate.dtype == up.dtype && gate.quant.scheme == up.quant.scheme &&
              gate.quant.ggml_type == up.quant.ggml_type);
  check_format(up, format);
  PackedMatrix out;
  out.format = format;
  out.nr = nr;
  out.k = up.k;
  out.n = up.n;
  out.gate_up = true;
  const int half = nr / 2;
  out.panels = (up.n + half - 1) / half;
  pack_panels(out, gate, up, [&](int64_t p, int j) {
    const int64_t col = p * half + j % half;
    return std::pair<int, int64_t>{j < half ? 0 : 1, col < up.n ? col : -1};
  });
  return out;
}

void pack_rows_f32(const float* b, int64_t ldb, int64_t k, int64_t n, int nr, float* out) {
  const int64_t panels = (n + nr - 1) / nr;
  for (int64_t p = 0; p < panels; ++p) {
    float* panel = out + p * k * nr;
    const int64_t width = std::min<int64_t>(nr, n - p * nr);
    for (int64_t kk = 0; kk < k; ++kk) {
      const float* src = b + kk * ldb + p * nr;
      float* dst = panel + kk * nr;
      for (int64_t j = 0; j < width; ++j) dst[j] = src[j];
      for (int64_t j = width; j < nr; ++j) dst[j] = 0.0f;
    }
  }
}

void pack_rows_panel(const float* a, int64_t lda, int64_t rows, int64_t kc, int mr, float* out,
                     const int64_t* row_index) {
  constexpr int kMaxMr = 32;
  HYMOE_CHECK(mr >= 1 && mr <= kMaxMr, "mr=", mr);
  const float* src[kMaxMr];
  for (int64_t r0 = 0; r0 < rows; r0 += mr) {
    const int64_t m = std::min<int64_t>(mr, rows - r0);
    for (int64_t i = 0; i < m; ++i) src[i] = a + (row_index ? row_index[r0 + i] : r0 + i) * lda;
    float* panel = out + r0 * kc;  // panel r0/mr starts at (r0/mr) * kc * mr = r0 * kc
    for (int64_t k = 0; k < kc; ++k) {
      float* dst = panel + k * mr;
      for (int64_t i = 0; i < m; ++i) dst[i] = src[i][k];
      for (int64_t i = m; i < mr; ++i) dst[i] = 0.0f;
    }
  }
}

namespace {
template <typename W>
void gemm_ref(int m, int mr, int nr, int64_t kc, const float* a, const W* b, float* c, int64_t ldc,
              bool accumulate) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < nr; ++j) {
      double acc = accumulate ? c[i * ldc + j] : 0.0;
      for (int64_t kk = 0; kk < kc; ++kk) {
        float w;
        if constexpr (sizeof(W) == 2) w = bf16_to_float(b[kk * nr + j]);
        else w = b[kk * nr + j];
        acc += static_cast<double>(a[kk * mr + i]) * w;
      }
      c[i * ldc + j] = static_cast<float>(acc);
    }
}
}  // namespace

void gemm_f32w_f32__ref(int m, int mr, int nr, int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                        bool accumulate) {
  gemm_ref(m, mr, nr, kc, a, b, c, ldc, accumulate);
}
void gemm_bf16w_f32__ref(int m, int mr, int nr, int64_t kc, const float* a, const uint16_t* b, float* c,
                         int64_t ldc, bool accumulate) {
  gemm_ref(m, mr, nr, kc, a, b, c, ldc, accumulate);
}
void swiglu__ref(int64_t n, const float* g, const float* u, float* h) {
  for (int64_t i = 0; i < n; ++i) h[i] = static_cast<float>(silu(static_cast<double>(g[i])) * u[i]);
}

const IsaKernels* isa_kernels(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return nullptr;
    case Isa::kAvx2: return &isa_kernels_avx2();
    case Isa::kAvx512: return &isa_kernels_avx512();
    case Isa::kAvx512Vnni: return &isa_kernels_avx512vnni();
    case Isa::kAvx512Bf16: return &isa_kernels_avx512bf16();
  }
  return nullptr;
}

}  // namespace hymoe::kernels
