// Argument validation shared by all grouped-FFN implementations, and the ISA dispatch.
#include "hymoe/error.h"
#include "kernels/grouped_ffn.h"
#include "kernels/grouped_ffn_impl.h"
#include "kernels/gemm_quantized.h"

namespace hymoe::kernels {

void validate_grouped_ffn_weights(const GroupedFfnShape& shape, std::span<const MlpWeightsView> weights) {
  HYMOE_CHECK(shape.num_groups >= 0 && shape.dim > 0 && shape.hidden > 0);
  HYMOE_CHECK(static_cast<int64_t>(weights.size()) == shape.num_groups, weights.size(), " weight sets for ",
              shape.num_groups, " groups");
  for (const auto& w : weights) {
    HYMOE_CHECK(w.up.data && w.down.data);
    HYMOE_CHECK(w.up.k == shape.dim && w.up.n == shape.hidden);
    HYMOE_CHECK(w.down.k == shape.hidden && w.down.n == shape.dim);
    if (is_gated(shape.activation)) HYMOE_CHECK(w.gate.data && w.gate.k == shape.dim && w.gate.n == shape.hidden);
    for (const MatrixView* m : {&w.gate, &w.up, &w.down}) {
      if (m->data && m->quantized()) validate_quantized_matrix(*m);
      else HYMOE_CHECK(!m->data || m->dtype == DType::kF32 || m->dtype == DType::kBF16);
    }
  }
}

void validate_grouped_ffn_args(const GroupedFfnShape& shape, const GroupedFfnArgs& args) {
  HYMOE_CHECK(args.offsets);
  HYMOE_CHECK(args.offsets[0] == 0);
  for (int64_t g = 0; g < shape.num_groups; ++g) HYMOE_CHECK(args.offsets[g + 1] >= args.offsets[g]);
  if (args.offsets[shape.num_groups] > 0) HYMOE_CHECK(args.x && args.y);
}

namespace {
// Whether any matrix of the layer is quantized, and if so whether all are, in one panel format (into *format).
bool any_quantized(std::span<const MlpWeightsView> weights) {
  for (const auto& w : weights)
    if (w.gate.quantized() || w.up.quantized() || w.down.quantized()) return true;
  return false;
}
bool quantized_layer_format(std::span<const MlpWeightsView> weights, bool gated, WeightFormat* format) {
  if (weights.empty() || !quantized_panel_format(weights[0].up, format)) return false;
  for (const auto& w : weights)
    for (const MatrixView* m : {&w.gate, &w.up, &w.down}) {
      WeightFormat f;
      if ((m != &w.gate || gated) && (!m->quantized() || !quantized_panel_format(*m, &f) || f != *format)) return false;
    }
  return true;
}
}  // namespace

WeightFormat choose_weight_format(std::span<const MlpWeightsView> weights, Isa isa, const GroupedFfnOptions& options) {
  const IsaKernels* ik = isa_kernels(isa);
  HYMOE_CHECK(ik, "no packed kernels for isa ", isa_name(isa));
  if (WeightFormat f; !weights.empty() && weights[0].up.quantized()) {
    HYMOE_CHECK(quantized_panel_format(weights[0].up, &f), "no packed format runs this quantized view");
    return f;
  }
  if (options.quantize_q8) return WeightFormat::kQ8Block32;
  const bool bf16 = !weights.empty() && weights[0].up.dtype == DType::kBF16;
  if (!bf16 || options.bf16 == Bf16Compute::kWiden) return bf16 ? WeightFormat::kBf16Widen : WeightFormat::kF32;
  if (ik->format(WeightFormat::kBf16Dot)) return WeightFormat::kBf16Dot;
  if (options.bf16 == Bf16Compute::kNative)
    fail("bf16 compute 'native' needs AVX512_BF16, but the kernels run on isa ", isa_name(isa),
         " (detected: ", isa_name(detect_best_isa()), "); use 'widen' or 'auto'");
  return WeightFormat::kBf16Widen;
}

std::unique_ptr<GroupedFfn> make_grouped_ffn(const GroupedFfnShape& shape, std::span<const MlpWeightsView> weights,
                                             Isa isa, const GroupedFfnOptions& options) {
  if (isa == Isa::kScalar) {
    if (options.quantize_q8) fail("q8 weights need a vector ISA (avx2 or later); HYMOE_ISA=scalar has none");
    if (options.bf16 == Bf16Compute::kNative && !weights.empty() && weights[0].up.dtype == DType::kBF16)
      fail("bf16 compute 'native' needs AVX512_BF16, but the kernels run on isa scalar; use 'widen' or 'auto'");
    return make_grouped_ffn_portable(shape, weights);
  }
  // Mixed dtypes within one layer have no packed kernel but q8 (which quantizes either); the portable path widens
  // everything to f32.
  const bool gated = is_gated(shape.activation);
  // Quantized views run in their compact panel format (exact weights, f32 compute) when every matrix of the layer
  // has the same one; others (fp8 blocks whose k extent is not a multiple of 128, mixed schemes) run on the
  // portable path, which decodes them to f32.
  if (any_quantized(weights)) {
    WeightFormat f;
    if (!quantized_layer_format(weights, gated, &f)) return make_grouped_ffn_portable(shape, weights);
    return make_grouped_ffn_packed(shape, weights, isa, f);
  }
  if (!options.quantize_q8)
    for (const auto& w : weights)
      if (w.down.dtype != w.up.dtype || (gated && w.gate.dtype != w.up.dtype) ||
          (!weights.empty() && w.up.dtype != weights[0].up.dtype))
        return make_grouped_ffn_portable(shape, weights);
  return make_grouped_ffn_packed(shape, weights, isa, choose_weight_format(weights, isa, options));
}

}  // namespace hymoe::kernels
