// How the kernels see a weight matrix: plain f32 / bf16 elements in either layout, or a checkpoint's
// block-quantized form viewed in place. The formats below pack these views into their panels; the grouped FFN
// (ffn/grouped_ffn.h) takes one per projection and expert.
#pragma once

#include <cstdint>

#include "hymoe/dtype.h"

namespace hymoe::kernels {

// How a weight matrix W used as y = x . B (B of logical shape (K, N): K inputs, N outputs) is stored.
enum class WeightLayout {
  kOutIn,  // (N, K) row-major: PyTorch nn.Linear.weight, used as x @ W^T
  kInOut,  // (K, N) row-major: the packed (E, in, out) layout, used as x @ W
};

// A weight matrix kept in its checkpoint's block-quantized form and viewed in place: the (N, K) matrix stored row
// by row (layout kOutIn), blocks along K, codes at MatrixView::data. The fast kernels repack it into a compact
// panel format of their own; it is never expanded to bf16 or f32 in memory (docs/kernels.md, "Formats").
enum class QuantScheme {
  kNone,
  kGgml,      // a GGUF block type (ggml_type): each row is K / block_values(type) blocks (quant_formats.h)
  kFp8Block,  // float8 e4m3fn codes (N, K) u8 and f32 multipliers `scales` (ceil(N/block_n), ceil(K/block_k))
  kMxfp4,     // E2M1 codes (N, K/32, 16) u8 and E8M0 `scales` (N, K/32) u8 (quant_decode.h)
};
struct QuantizedMatrix {
  QuantScheme scheme = QuantScheme::kNone;
  uint32_t ggml_type = 0;            // kGgml
  const void* scales = nullptr;      // kFp8Block, kMxfp4
  int64_t block_n = 0, block_k = 0;  // kFp8Block
  // kMxfp4: row nn of the view is stored row nn * row_step from `data` and `scales` (gpt-oss's gate_up_proj keeps
  // gate in the even output rows and up in the odd ones: two views of step 2, the second one row further on).
  int64_t row_step = 1;
};

struct MatrixView {
  const void* data = nullptr;
  DType dtype = DType::kF32;  // kF32 or kBF16; ignored when quantized
  WeightLayout layout = WeightLayout::kOutIn;
  int64_t k = 0;  // inputs
  int64_t n = 0;  // outputs
  QuantizedMatrix quant;  // scheme kNone: plain f32 / bf16 elements
  bool quantized() const { return quant.scheme != QuantScheme::kNone; }
  // B(kk, nn) widened to float (decoded exactly when quantized); for references and tests, not hot loops.
  float at(int64_t kk, int64_t nn) const {
    if (quantized()) return quantized_at(kk, nn);
    const int64_t i = layout == WeightLayout::kOutIn ? nn * k + kk : kk * n + nn;
    if (dtype == DType::kBF16) return bf16_to_float(static_cast<const uint16_t*>(data)[i]);
    return static_cast<const float*>(data)[i];
  }
  // Element (kk, nn) of a quantized matrix by the scalar decoders of its scheme.
  float quantized_at(int64_t kk, int64_t nn) const;
  // Row nn (K values) of a quantized matrix decoded exactly into out (K floats): for references and tests.
  void decode_quantized_row(int64_t nn, float* out) const;
};
// Checks a quantized view's fields (layout kOutIn, K a whole number of blocks, the scheme's pointers); a mismatch
// is an internal error (HYMOE_CHECK): the loaders validate files before building views.
void validate_quantized_matrix(const MatrixView& m);

}  // namespace hymoe::kernels
