// AVX-512 with AVX512_VNNI: gemm_q8w_q8_6x32__avx512vnni and the GGUF int8 kernels
// gemm_{q8_0,q4_0,mxfp4}w_q8_0_4x32__avx512vnni, gemm_{q4_k,q5_k,q6_k}w_q8_k_4x32__avx512vnni (vpdpbusd), beside the AVX-512F kernels built again
// with this flag. Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mfma (and only this file); run only
// where detect_best_isa() found AVX512_VNNI.
#include <immintrin.h>

#include "kernels/gemm_kernels.h"
#include "kernels/gemm_quantized.h"  // fp8 / mxfp4: the AVX2 kernels (see there why)

namespace hymoe::kernels {
namespace {

#include "kernels/avx512_vec-inl.h"

struct V : V512Vnni {};

constexpr int kMr = 12;  // 12 rows x 2 zmm = 24 accumulators (see the register budget in the -inl header)
constexpr int kQ8Mr = 6;  // 6 rows x 2 zmm x (float + int32) = 24 accumulators
constexpr int kIntMr = 4;  // 4 rows x 2 zmm x (float + int32) = 16 accumulators, the weights' unpacking beside them

#include "kernels/gemm_microkernel-inl.h"
#include "kernels/gemm_gguf_int8-inl.h"

static_assert(kNr == 32);

const GemmFormat kF32{WeightFormat::kF32, "gemm_f32w_f32_12x32__avx512vnni", kMr, kNr, pack_activations_f32,
                     gemm_format_widen<float>, gemm_format_widen_few<float>, 3};
const GemmFormat kBf16Widen{WeightFormat::kBf16Widen, "gemm_bf16w_f32_12x32__avx512vnni", kMr, kNr, pack_activations_f32,
                           gemm_format_widen<uint16_t>, gemm_format_widen_few<uint16_t>, 2};
const GemmFormat kQ8{WeightFormat::kQ8Block32, "gemm_q8w_q8_6x32__avx512vnni", kQ8Mr, kNr, pack_activations_q8__avx2,
                    gemm_format_q8, gemm_format_q8_few, 1};

}  // namespace

#define HYMOE_GGUF_INT8_FORMAT(format, name) \
  const GemmFormat name{format, #name, kIntMr, kNr, int8_pack_a<format>(), gemm_format_gguf_int8<format>, \
                        gemm_format_gguf_int8_few<format>, 1};
HYMOE_GGUF_INT8_FORMAT(WeightFormat::kGgmlQ8_0I8, gemm_q8_0w_q8_0_4x32__avx512vnni)
HYMOE_GGUF_INT8_FORMAT(WeightFormat::kGgmlQ4_0I8, gemm_q4_0w_q8_0_4x32__avx512vnni)
HYMOE_GGUF_INT8_FORMAT(WeightFormat::kGgmlQ4_KI8, gemm_q4_kw_q8_k_4x32__avx512vnni)
HYMOE_GGUF_INT8_FORMAT(WeightFormat::kGgmlQ5_KI8, gemm_q5_kw_q8_k_4x32__avx512vnni)
HYMOE_GGUF_INT8_FORMAT(WeightFormat::kGgmlQ6_KI8, gemm_q6_kw_q8_k_4x32__avx512vnni)
HYMOE_GGUF_INT8_FORMAT(WeightFormat::kMxfp4Block32I8, gemm_mxfp4w_q8_0_4x32__avx512vnni)
#undef HYMOE_GGUF_INT8_FORMAT

namespace {

// The exact GGUF formats run the AVX2 kernels (see gemm_avx512.cc); their int8 twins use vpdpbusd.
const IsaKernels kKernels{Isa::kAvx512Vnni, kMr, kNr, gemm_f32w, gemm_bf16w, gemm_f32w_few, gemm_bf16w_few, swiglu,
                          dot_rows,
                          "gemm_f32w_f32_12x32__avx512vnni", "gemm_bf16w_f32_12x32__avx512vnni", fma_probe, sum_probe,
                          sum_probe_streams, {&kF32, &kBf16Widen, nullptr, &kQ8,
                           &gemm_q8_0w_f32_4x16__avx2, &gemm_q4_0w_f32_4x16__avx2, &gemm_q4_kw_f32_4x16__avx2,
                           &gemm_q5_kw_f32_4x16__avx2, &gemm_q6_kw_f32_4x16__avx2,
                           &kGemmFp8wF32Avx2, &kGemmMxfp4wF32Avx2,
                           &gemm_q8_0w_q8_0_4x32__avx512vnni, &gemm_q4_0w_q8_0_4x32__avx512vnni,
                           &gemm_q4_kw_q8_k_4x32__avx512vnni, &gemm_q5_kw_q8_k_4x32__avx512vnni,
                           &gemm_q6_kw_q8_k_4x32__avx512vnni, &gemm_mxfp4w_q8_0_4x32__avx512vnni}, nullptr,
                          int8_dot_probe};

}  // namespace

const IsaKernels& isa_kernels_avx512vnni() { return kKernels; }

}  // namespace hymoe::kernels
