// The GGUF int8 formats' ISA-free parts (gemm_kernels.h, gguf_int8_layout; MXFP4's int8 twin among them): ggml's
// activation quantizers (q8_0, q8_1, q8_K), the packing of a micro-tile's activations into the kernels' units, and the
// micro-kernels' scalar reference. Built without ISA flags.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "hymoe/dtype.h"
#include "hymoe/error.h"
#include "kernels/formats/gemm_kernels.h"

namespace hymoe::kernels {

void quantize_ggml_q8_0_block(const float* x, int n, int8_t* q, float* d) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::abs(x[i]));
  // ggml quantizes with the inverse of the f32 d but multiplies by d rounded to f16.
  const float scale = amax / 127.0f, inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
  for (int i = 0; i < kQ8Block; ++i) q[i] = static_cast<int8_t>(i < n ? std::round(x[i] * inverse) : 0.0f);
  *d = f16_to_float(float_to_f16(scale));
}

void quantize_ggml_q8_1_block(const float* x, int n, int8_t* q, float* d, float* s) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::abs(x[i]));
  const float scale = amax / 127.0f, inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
  int sum = 0;
  for (int i = 0; i < kQ8Block; ++i) {
    q[i] = static_cast<int8_t>(i < n ? std::round(x[i] * inverse) : 0.0f);
    sum += q[i];
  }
  *d = f16_to_float(float_to_f16(scale));
  *s = f16_to_float(float_to_f16(static_cast<float>(sum) * scale));
}

void quantize_ggml_q8_k_block(const float* x, int n, int8_t* q, float* d) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i)
    if (std::abs(x[i]) > amax) {
      amax = std::abs(x[i]);
      max = x[i];
    }
  if (amax == 0.0f) {
    std::fill(q, q + kQ8KBlock, int8_t{0});
    *d = 0.0f;
    return;
  }
  const float inverse = -127.0f / max;
  // ggml's nearest_int rounds to nearest even (|values| <= 127 here); nearbyint does in the default mode.
  for (int i = 0; i < kQ8KBlock; ++i)
    q[i] = static_cast<int8_t>(i < n ? std::min(127.0f, std::nearbyint(inverse * x[i])) : 0.0f);
  *d = 1.0f / inverse;
}

namespace {

#include "kernels/formats/activation_units-inl.h"

float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

void pack_activations_ggml_q8_0(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k, int mr,
                                void* out) {
  pack_activation_units<32, kQ8Block, 1>(a, lda, row_index, rows, k, mr, out, quantize_ggml_q8_0_block);
}
void pack_activations_ggml_q8_1(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k, int mr,
                                void* out) {
  pack_activation_units<32, kQ8Block, 1, true>(a, lda, row_index, rows, k, mr, out, quantize_ggml_q8_1_block);
}
void pack_activations_ggml_q8_k32(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k, int mr,
                                  void* out) {
  pack_activation_units<32, kQ8KBlock, 1>(a, lda, row_index, rows, k, mr, out, quantize_ggml_q8_k_block);
}
void pack_activations_ggml_q8_k16(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k, int mr,
                                  void* out) {
  pack_activation_units<16, kQ8KBlock, 1>(a, lda, row_index, rows, k, mr, out, quantize_ggml_q8_k_block);
}

void gemm_gguf_int8__ref(WeightFormat format, int m, int mr, int nr, int64_t kc, const void* a, const void* b,
                         float* c, int64_t ldc, bool accumulate) {
  const GgufPanelLayout l = gguf_int8_layout(format);
  HYMOE_CHECK(l.ggml_type != 0);
  const uint8_t* ap = static_cast<const uint8_t*>(a);
  const uint8_t* bp = static_cast<const uint8_t*>(b);
  const int64_t units = (kc + l.k_unit - 1) / l.k_unit, a_unit = (int64_t{l.k_unit} + 8) * mr;  // per sub-block unit
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < nr; ++j) {
      double acc = accumulate ? c[i * ldc + j] : 0.0;
      for (int64_t u = 0; u < units; ++u) {
        const uint8_t* au = ap + u * a_unit;
        int64_t dot = 0, sum = 0;
        for (int kk = 0; kk < l.k_unit; ++kk) {
          const int x = static_cast<int8_t>(au[(kk / 4 * mr + i) * 4 + kk % 4]);
          dot += int64_t{x} * (gguf_int8_panel_code(format, bp, nr, u * l.k_unit + kk, j) - l.code_bias);
          sum += x;
        }
        const bool q8_1 = gguf_int8_activation(format) == GgmlActivation::kQ8_1;
        int32_t packed_sum;
        std::memcpy(&packed_sum, au + (l.k_unit + 4) * mr + 4 * i, sizeof packed_sum);
        HYMOE_CHECK(q8_1 || packed_sum == sum, "activation unit sum ", packed_sum, " != ", sum);
        const double da = load_f32(au + l.k_unit * mr + 4 * i);
        const double scale = gguf_panel_sub_scale(format, bp, nr, u * l.k_unit, j);
        acc += static_cast<double>(dot) * scale * da;
        // The offset times the activations' own sum: q8_1's s (d * sum rounded to f16), or d times the sum.
        const double offset_share = q8_1 ? load_f32(au + (l.k_unit + 4) * mr + 4 * i) : da * static_cast<double>(sum);
        if (l.offsets)
          acc += static_cast<double>(gguf_int8_panel_offset(format, bp, nr, u * l.k_unit, j)) * offset_share;
      }
      c[i * ldc + j] = static_cast<float>(acc);
    }
}

}  // namespace hymoe::kernels
