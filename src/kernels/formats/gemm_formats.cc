// The ISA-free parts of the weight formats beyond f32 (gemm_kernels.h): the q8 block quantizer, the packing of a
// micro-tile's activations for each format, and the scalar references of the bf16-dot and q8 micro-kernels. Built
// without ISA flags.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "hymoe/error.h"
#include "kernels/formats/gemm_kernels.h"

namespace hymoe::kernels {

const char* weight_format_operands(WeightFormat format) {
  if (const GgufBlockFormat* b = gguf_block_format(format)) return b->exact == format ? b->exact_operands : b->int8_operands;
  switch (format) {
    case WeightFormat::kF32: return "f32w_f32";
    case WeightFormat::kBf16Widen: return "bf16w_f32";
    case WeightFormat::kBf16Dot: return "bf16w_bf16";
    case WeightFormat::kQ8Block32: return "q8w_q8";
    case WeightFormat::kFp8Block128: return "fp8w_f32";
    case WeightFormat::kMxfp4Block32: return "mxfp4w_f32";
    case WeightFormat::kMxfp4Block32I8: return "mxfp4w_q8_0";
    case WeightFormat::kFp8Block128Dot: return "fp8w_bf16";
    default: break;
  }
  return "?";
}

void quantize_q8_block(const float* x, int n, int8_t* q, float* d) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::abs(x[i]));
  const float scale = amax / 127.0f, inverse = scale > 0.0f ? 1.0f / scale : 0.0f;
  for (int i = 0; i < kQ8Block; ++i) {
    // nearbyint rounds to nearest even in the default rounding mode; x * inverse can exceed 127 by an ulp.
    const float v = i < n ? std::nearbyint(x[i] * inverse) : 0.0f;
    q[i] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
  }
  *d = scale;
}

namespace {
#include "kernels/formats/activation_units-inl.h"

const float* row_of(const float* a, int64_t lda, const int64_t* row_index, int i) {
  return a + (row_index ? row_index[i] : i) * lda;
}
}  // namespace

void pack_activations_f32(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k, int mr,
                          void* out) {
  pack_rows_panel(a, lda, rows, k, mr, static_cast<float*>(out), row_index);
}

// (ceil(k/2), mr, 2) bf16: row i's k pair u is the 32-bit word a vdpbf16ps broadcast reads.
void pack_activations_bf16_pairs(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k, int mr,
                                 void* out) {
  uint16_t* dst = static_cast<uint16_t*>(out);
  const int64_t units = (k + 1) / 2;
  std::fill(dst, dst + units * mr * 2, uint16_t{0});
  for (int i = 0; i < rows; ++i) {
    const float* row = row_of(a, lda, row_index, i);
    for (int64_t kk = 0; kk < k; ++kk) dst[(kk / 2) * mr * 2 + i * 2 + kk % 2] = float_to_bf16(row[kk]);
  }
}

// Per block of 32 k: (8, mr, 4) int8 (row i's four consecutive k: the 32-bit word a vpdpbusd broadcast reads),
// mr f32 scales, mr int32 of -128 * sum(q) (the correction for the kernels that multiply q by w + 128).
void pack_activations_q8(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k, int mr,
                         void* out) {
  pack_activation_units<kQ8Block, kQ8Block, -128>(a, lda, row_index, rows, k, mr, out, quantize_q8_block);
}

void gemm_bf16w_bf16__ref(int m, int mr, int nr, int64_t kc, const void* a, const void* b, float* c, int64_t ldc,
                          bool accumulate) {
  const uint16_t* ap = static_cast<const uint16_t*>(a);
  const uint16_t* bp = static_cast<const uint16_t*>(b);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < nr; ++j) {
      double acc = accumulate ? c[i * ldc + j] : 0.0;
      for (int64_t kk = 0; kk < kc; ++kk)
        acc += static_cast<double>(bf16_to_float(ap[(kk / 2) * mr * 2 + i * 2 + kk % 2])) *
               bf16_to_float(bp[(kk / 2) * nr * 2 + j * 2 + kk % 2]);
      c[i * ldc + j] = static_cast<float>(acc);
    }
}

void gemm_q8w_q8__ref(int m, int mr, int nr, int64_t kc, const void* a, const void* b, float* c, int64_t ldc,
                      bool accumulate) {
  const uint8_t* ap = static_cast<const uint8_t*>(a);
  const uint8_t* bp = static_cast<const uint8_t*>(b);
  const int64_t units = (kc + kQ8Block - 1) / kQ8Block;
  const int64_t a_unit = activation_unit_bytes(WeightFormat::kQ8Block32, mr);
  const int64_t b_unit = weight_unit_bytes(WeightFormat::kQ8Block32, nr);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < nr; ++j) {
      double acc = accumulate ? c[i * ldc + j] : 0.0;
      for (int64_t u = 0; u < units; ++u) {
        const uint8_t* au = ap + u * a_unit;
        const uint8_t* bu = bp + u * b_unit;
        int64_t dot = 0;
        for (int g = 0; g < kQ8Block / 4; ++g)
          for (int t = 0; t < 4; ++t)
            dot += static_cast<int64_t>(static_cast<int8_t>(au[(g * mr + i) * 4 + t])) *
                   (static_cast<int64_t>(bu[(g * nr + j) * 4 + t]) - 128);
        float da, dw;
        std::memcpy(&da, au + kQ8Block * mr + 4 * i, sizeof(float));
        std::memcpy(&dw, bu + kQ8Block * nr + 4 * j, sizeof(float));
        acc += static_cast<double>(dot) * da * dw;
      }
      c[i * ldc + j] = static_cast<float>(acc);
    }
}

}  // namespace hymoe::kernels
