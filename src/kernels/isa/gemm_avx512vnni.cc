// AVX-512 with AVX512_VNNI: gemm_q8w_q8_6x32__avx512vnni and the GGUF int8 kernels gemm_<t>w_<act>_6x32__avx512vnni
// of every line of gguf_formats.inc and MXFP4's (vpdpbusd), beside the AVX-512F kernels built again with this
// flag. Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mfma (and only this file); run only
// where detect_best_isa() found AVX512_VNNI.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/formats/gemm_kernels.h"
#include "kernels/formats/iq_blocks.h"
#include "kernels/formats/gemm_quantized.h"  // fp8 / mxfp4: the AVX2 kernels (see there why)

namespace hymoe::kernels {
namespace {

#include "kernels/isa/avx512_vec-inl.h"

struct V : V512Vnni {};

constexpr int kMr = 12;  // 12 rows x 2 zmm = 24 accumulators (see the register budget in the -inl header)
constexpr int kQ8Mr = 6;  // 6 rows x 2 zmm x (float + int32) = 24 accumulators
// 6 rows x 2 zmm x (float + int32) = 24 accumulators, the weights' unpacking beside them (4 rows measured 5-10%
// slower at 512 tokens: each weight vector's decode then serves fewer dot products; docs/performance.md).
constexpr int kIntMr = 6;

#include "kernels/isa/gemm_microkernel-inl.h"
#include "kernels/isa/gemm_gguf_int8-inl.h"
#include "kernels/isa/gemm_grid_row_avx2-inl.h"

static_assert(kNr == 32);

const GemmFormat kF32{WeightFormat::kF32, "gemm_f32w_f32_12x32__avx512vnni", kMr, kNr, pack_activations_f32,
                     gemm_format_widen<float>, gemm_format_widen_few<float>, 3};
const GemmFormat kBf16Widen{WeightFormat::kBf16Widen, "gemm_bf16w_f32_12x32__avx512vnni", kMr, kNr, pack_activations_f32,
                           gemm_format_widen<uint16_t>, gemm_format_widen_few<uint16_t>, 2};
const GemmFormat kQ8{WeightFormat::kQ8Block32, "gemm_q8w_q8_6x32__avx512vnni", kQ8Mr, kNr, pack_activations_q8__avx2,
                    gemm_format_q8, gemm_format_q8_few, 1};

}  // namespace

// Every GGUF format's int8 kernels, one per line of gguf_formats.inc (gemm_kernels.h names them; 4 rows for the
// super-block form, kIntRows).
#define HYMOE_GGUF_BLOCK(T, t, type, unit, bits, bias, int8_bias, offsets, act, values, int8_form)              \
  static_assert(kIntRows<WeightFormat::kGgml##T##I8> == HYMOE_VNNI_ROWS_##int8_form);                           \
  const GemmFormat HYMOE_VNNI_INT8(t, act, int8_form){                                                          \
      WeightFormat::kGgml##T##I8,                                                                               \
      "gemm_" #t "w_" #act "_" HYMOE_STRING(HYMOE_VNNI_ROWS_##int8_form) "x32__avx512vnni",                     \
      kIntRows<WeightFormat::kGgml##T##I8>, kNr,                                                                \
      int8_pack_a<WeightFormat::kGgml##T##I8>(), gemm_format_gguf_int8<WeightFormat::kGgml##T##I8>,              \
      int8_few<WeightFormat::kGgml##T##I8>(), int8_few_rows<WeightFormat::kGgml##T##I8>(),                     \
      int8_expanding<WeightFormat::kGgml##T##I8>(),                                                               \
      int8_expanded<WeightFormat::kGgml##T##I8>(), int8_expanded_unit_bytes<WeightFormat::kGgml##T##I8>()};
#include "kernels/formats/gguf_formats.inc"
#undef HYMOE_GGUF_BLOCK
const GemmFormat gemm_mxfp4w_q8_0_6x32__avx512vnni{
    WeightFormat::kMxfp4Block32I8, "gemm_mxfp4w_q8_0_6x32__avx512vnni", kIntMr, kNr,
    int8_pack_a<WeightFormat::kMxfp4Block32I8>(), gemm_format_gguf_int8<WeightFormat::kMxfp4Block32I8>,
    gemm_format_gguf_int8_few<WeightFormat::kMxfp4Block32I8>, 1};

namespace {

// The exact GGUF formats run the AVX2 kernels (see gemm_avx512.cc); their int8 twins use vpdpbusd.
constexpr const GemmFormat* kFormats[] = {
    &kF32, &kBf16Widen, &kQ8, &kGemmFp8wF32Avx512, &kGemmMxfp4wF32Avx2, &gemm_mxfp4w_q8_0_6x32__avx512vnni,
#define HYMOE_GGUF_BLOCK(T, t, type, unit, bits, bias, int8_bias, offsets, act, values, int8_form) \
  &gemm_##t##w_f32_4x16__avx2, &HYMOE_VNNI_INT8(t, act, int8_form),
#include "kernels/formats/gguf_formats.inc"
#undef HYMOE_GGUF_BLOCK
};
const IsaKernels kKernels{Isa::kAvx512Vnni, kMr, kNr, gemm_f32w, gemm_bf16w, gemm_f32w_few, gemm_bf16w_few, swiglu,
                          dot_rows,
                          "gemm_f32w_f32_12x32__avx512vnni", "gemm_bf16w_f32_12x32__avx512vnni", fma_probe, sum_probe,
                          sum_probe_streams, kFormats, nullptr, int8_dot_probe};

}  // namespace

const IsaKernels& isa_kernels_avx512vnni() { return kKernels; }

}  // namespace hymoe::kernels
