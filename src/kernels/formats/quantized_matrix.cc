// Scalar access to block-quantized weight views (matrix_view.h, QuantizedMatrix): the exact decoders of each
// scheme (quant_formats.h for GGUF blocks, quant_decode.h for FP8 and MXFP4), for the references and tests.
#include <vector>

#include "hymoe/error.h"
#include "hymoe/ggml_type.h"
#include "hymoe/quant_decode.h"
#include "hymoe/quant_formats.h"
#include "kernels/formats/matrix_view.h"

namespace hymoe::kernels {

void validate_quantized_matrix(const MatrixView& m) {
  HYMOE_CHECK(m.quantized() && m.data && m.layout == WeightLayout::kOutIn && m.k > 0 && m.n > 0);
  HYMOE_CHECK(m.quant.row_step == 1 || m.quant.scheme == QuantScheme::kMxfp4, "row_step ", m.quant.row_step,
              " is only honoured for mxfp4 views");
  switch (m.quant.scheme) {
    case QuantScheme::kGgml: {
      const GgmlTypeTraits* t = ggml_type_traits(m.quant.ggml_type);
      HYMOE_CHECK(t && can_dequantize(m.quant.ggml_type) && m.k % t->block_values == 0, "ggml type ",
                  m.quant.ggml_type, " with K = ", m.k);
      break;
    }
    case QuantScheme::kFp8Block:
      HYMOE_CHECK(m.quant.scales && m.quant.block_n > 0 && m.quant.block_k > 0);
      break;
    case QuantScheme::kMxfp4:
      HYMOE_CHECK(m.quant.scales && m.k % kMxfp4GroupSize == 0 && m.quant.row_step >= 1);
      break;
    case QuantScheme::kNone: break;
  }
}

void MatrixView::decode_quantized_row(int64_t nn, float* out) const {
  HYMOE_CHECK(quantized() && nn >= 0 && nn < n);
  const auto* codes = static_cast<const uint8_t*>(data);
  switch (quant.scheme) {
    case QuantScheme::kGgml: {
      const GgmlTypeTraits* t = ggml_type_traits(quant.ggml_type);
      const int64_t row_bytes = k / t->block_values * t->block_bytes;
      dequantize_row_ref(quant.ggml_type, reinterpret_cast<const std::byte*>(codes + nn * row_bytes), out, k);
      return;
    }
    case QuantScheme::kFp8Block:
      for (int64_t kk = 0; kk < k; ++kk)
        out[kk] = fp8_block_scaled_value_ref(codes, static_cast<const float*>(quant.scales), n, k, quant.block_n,
                                             quant.block_k, nn, kk);
      return;
    case QuantScheme::kMxfp4:
      for (int64_t kk = 0; kk < k; ++kk)
        out[kk] = mxfp4_value_ref(codes, static_cast<const uint8_t*>(quant.scales), k, nn * quant.row_step, kk);
      return;
    case QuantScheme::kNone: break;
  }
  HYMOE_CHECK(false, "not a quantized view");
}

float MatrixView::quantized_at(int64_t kk, int64_t nn) const {
  HYMOE_CHECK(kk >= 0 && kk < k);
  if (quant.scheme == QuantScheme::kGgml) {  // decode the one block holding (nn, kk)
    const GgmlTypeTraits* t = ggml_type_traits(quant.ggml_type);
    const int64_t values = t->block_values, row_bytes = k / values * t->block_bytes;
    std::vector<float> block(static_cast<size_t>(values));
    const auto* row = static_cast<const std::byte*>(data) + nn * row_bytes;
    dequantize_row_ref(quant.ggml_type, row + kk / values * t->block_bytes, block.data(), values);
    return block[static_cast<size_t>(kk % values)];
  }
  if (quant.scheme == QuantScheme::kFp8Block)
    return fp8_block_scaled_value_ref(static_cast<const uint8_t*>(data), static_cast<const float*>(quant.scales), n, k,
                                      quant.block_n, quant.block_k, nn, kk);
  HYMOE_CHECK(quant.scheme == QuantScheme::kMxfp4, "not a quantized view");
  return mxfp4_value_ref(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(quant.scales), k,
                         nn * quant.row_step, kk);
}

}  // namespace hymoe::kernels
