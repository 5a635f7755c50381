// Argument validation shared by all grouped-FFN implementations, and the ISA dispatch.
#include <string>

#include "hymoe/error.h"
#include "hymoe/ggml_type.h"
#include "kernels/ffn/grouped_ffn.h"
#include "kernels/ffn/grouped_ffn_impl.h"
#include "kernels/formats/gemm_quantized.h"

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

// The GGUF format of one matrix role (gate, up or down): every expert's matrix of that role must be a kGgml view
// of one type that has a format.
WeightFormat gguf_role_format(std::span<const MlpWeightsView> weights, const MatrixView MlpWeightsView::*role,
                              const char* role_name, const GroupedFfnOptions& options) {
  const MatrixView& first = weights[0].*role;
  if (options.quantize_q8)
    fail("q8 re-quantization (quantize_q8) of GGUF weights is not supported; their own formats run them");
  WeightFormat format;
  if (first.quant.scheme != QuantScheme::kGgml || !gguf_weight_format(first.quant.ggml_type, &format))
    fail("the ", role_name, " weights are ",
         first.quant.scheme == QuantScheme::kGgml ? "ggml type " + ggml_type_name(first.quant.ggml_type)
         : first.quantized()                      ? std::string("block-quantized in another scheme")
                                                  : std::string("plain f32 or bf16"),
         ", which no packed kernel runs; GGUF block weights must be one of ", gguf_runnable_type_names());
  const uint32_t block = ggml_type_traits(first.quant.ggml_type)->block_values;
  for (size_t e = 0; e < weights.size(); ++e) {
    const MatrixView& m = weights[e].*role;
    if (m.quant.scheme != QuantScheme::kGgml || m.quant.ggml_type != first.quant.ggml_type)
      fail("the ", role_name, " weights of expert ", e, " are not ggml type ", ggml_type_name(first.quant.ggml_type),
           " like expert 0's; every expert's ", role_name, " weights must share one type");
    if (m.k % block != 0)
      fail("the ", role_name, " weights of expert ", e, " are ", ggml_type_name(m.quant.ggml_type), " with K = ", m.k,
           " inputs, not a whole number of its ", block, "-value blocks; GGUF writers store such rows in another "
           "type (e.g. Q8_0)");
  }
  return format;
}

// Whether any matrix of the layer is a GGUF view (then all must be).
bool gguf_weights(std::span<const MlpWeightsView> weights) {
  for (const auto& w : weights)
    for (const MatrixView* m : {&w.gate, &w.up, &w.down})
      if (m->data && m->quant.scheme == QuantScheme::kGgml) return true;
  return false;
}

// Gate/up of a GGUF layer: up's format, gate's the same (they are packed interleaved into one panel).
WeightFormat gguf_first_format(std::span<const MlpWeightsView> weights, const GroupedFfnOptions& options) {
  const WeightFormat up = gguf_role_format(weights, &MlpWeightsView::up, "up", options);
  if (weights[0].gate.data && gguf_role_format(weights, &MlpWeightsView::gate, "gate", options) != up)
    fail("the gate weights are ggml type ", ggml_type_name(weights[0].gate.quant.ggml_type), " but up is ",
         ggml_type_name(weights[0].up.quant.ggml_type), "; gate and up must share one type");
  return up;
}


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

// A GGUF role's exact format, or its integer-dot twin when the setting asks for int8 (kAuto does).
WeightFormat gguf_compute_format(WeightFormat exact, const GroupedFfnOptions& options) {
  return options.quant == QuantCompute::kExact ? exact : gguf_int8_twin(exact);
}

WeightFormat quantized_compute_format(WeightFormat natural, Isa isa, const GroupedFfnOptions& options) {
  if (options.quant == QuantCompute::kExact) return natural;
  if (natural == WeightFormat::kMxfp4Block32) return gguf_int8_twin(natural);
  const IsaKernels* ik = isa_kernels(isa);
  if (natural == WeightFormat::kFp8Block128 && ik && ik->format(WeightFormat::kFp8Block128Dot))
    return WeightFormat::kFp8Block128Dot;
  return natural;
}

WeightFormat choose_down_format(std::span<const MlpWeightsView> weights, Isa isa, const GroupedFfnOptions& options) {
  if (gguf_weights(weights))
    return gguf_compute_format(gguf_role_format(weights, &MlpWeightsView::down, "down", options), options);
  return choose_weight_format(weights, isa, options);
}

WeightFormat choose_weight_format(std::span<const MlpWeightsView> weights, Isa isa, const GroupedFfnOptions& options) {
  const IsaKernels* ik = isa_kernels(isa);
  HYMOE_CHECK(ik, "no packed kernels for isa ", isa_name(isa));
  if (gguf_weights(weights)) return gguf_compute_format(gguf_first_format(weights, options), options);
  if (WeightFormat f; !weights.empty() && weights[0].up.quantized()) {
    HYMOE_CHECK(quantized_panel_format(weights[0].up, &f), "no packed format runs this quantized view");
    return quantized_compute_format(f, isa, options);
  }
  if (options.quantize_q8) return WeightFormat::kQ8Block32;
  const bool bf16 = !weights.empty() && weights[0].up.dtype == DType::kBF16;
  if (!bf16) return WeightFormat::kF32;
  return resolve_bf16_compute(isa, options.bf16) == Bf16Compute::kNative ? WeightFormat::kBf16Dot
                                                                           : WeightFormat::kBf16Widen;
}

bool fp8_rounds_activations(Isa isa, QuantCompute setting) {
  GroupedFfnOptions o;
  o.quant = setting;
  return quantized_compute_format(WeightFormat::kFp8Block128, isa, o) == WeightFormat::kFp8Block128Dot;
}

Bf16Compute resolve_bf16_compute(Isa isa, Bf16Compute setting) {
  const IsaKernels* ik = isa_kernels(isa);
  const bool has_native = ik && ik->format(WeightFormat::kBf16Dot);
  if (setting == Bf16Compute::kWiden) return Bf16Compute::kWiden;
  if (setting == Bf16Compute::kNative && !has_native)
    fail("bf16 compute 'native' needs AVX512_BF16, but the kernels run on isa ", isa_name(isa),
         " (detected: ", isa_name(detect_best_isa()), "); use 'widen' or 'auto'");
  return has_native && (setting == Bf16Compute::kNative || bf16_dot_outpaces_fma()) ? Bf16Compute::kNative
                                                                                   : Bf16Compute::kWiden;
}

std::unique_ptr<GroupedFfn> make_grouped_ffn(const GroupedFfnShape& shape, std::span<const MlpWeightsView> weights,
                                             Isa isa, const GroupedFfnOptions& options) {
  if (gguf_weights(weights)) {  // every role checked (and its format chosen) even where the scalar path runs
    const WeightFormat first = gguf_compute_format(gguf_first_format(weights, options), options);
    const WeightFormat down = choose_down_format(weights, isa, options);
    // The scalar ISA: exact weights in f32 (the portable kernel), or ggml's activation rounding computed by the
    // reference (double accumulation: slow, for tests and machines without AVX2).
    if (isa == Isa::kScalar)
      return options.quant == QuantCompute::kExact ? make_grouped_ffn_portable(shape, weights)
                                                   : make_grouped_ffn_ref(shape, weights, RoundingModel::kGgmlActivations);
    return make_grouped_ffn_packed(shape, weights, isa, first, down);
  }
  if (isa == Isa::kScalar) {
    // MXFP4 with int8 compute (kAuto too): the rounding reference, as for GGUF weights.
    if (WeightFormat f; any_quantized(weights) && quantized_layer_format(weights, is_gated(shape.activation), &f) &&
                        quantized_compute_format(f, isa, options) != f)
      return make_grouped_ffn_ref(shape, weights, RoundingModel::kGgmlActivations);
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
    return make_grouped_ffn_packed(shape, weights, isa, quantized_compute_format(f, isa, options));
  }
  if (!options.quantize_q8)
    for (const auto& w : weights)
      if (w.down.dtype != w.up.dtype || (gated && w.gate.dtype != w.up.dtype) ||
          (!weights.empty() && w.up.dtype != weights[0].up.dtype))
        return make_grouped_ffn_portable(shape, weights);
  return make_grouped_ffn_packed(shape, weights, isa, choose_weight_format(weights, isa, options));
}

}  // namespace hymoe::kernels
