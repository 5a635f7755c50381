// AVX-512 with AVX512_VNNI and AVX512_BF16: gemm_bf16w_bf16_12x32__avx512bf16 (vdpbf16ps on bf16 k pairs) and
// gemm_q8w_q8_6x32__avx512bf16 (vpdpbusd), beside the AVX-512F kernels built again with these flags. Compiled with
// -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mavx512bf16 -mfma (and only this file); run only where
// detect_best_isa() found AVX512_BF16.
#include <immintrin.h>

#include "kernels/gemm_kernels.h"
#include "kernels/gemm_quantized.h"  // fp8 / mxfp4: the AVX2 kernels (see there why)

namespace hymoe::kernels {
namespace {

#include "kernels/avx512_vec-inl.h"

// With AVX512_BF16: vdpbf16ps adds both products of each lane's k pair to the f32 accumulator.
struct V : V512Vnni {
  using bvec = __m512bh;
  static bvec load_pairs(const void* p) { return reinterpret_cast<bvec>(_mm512_loadu_si512(p)); }
  static bvec broadcast_pair(const uint32_t* p) { return reinterpret_cast<bvec>(_mm512_set1_epi32(static_cast<int>(*p))); }
  static vec dot_bf16(vec acc, bvec a, bvec b) { return _mm512_dpbf16_ps(acc, a, b); }
};

constexpr int kMr = 12;  // 12 rows x 2 zmm = 24 accumulators (see the register budget in the -inl header)
constexpr int kQ8Mr = 6;  // 6 rows x 2 zmm x (float + int32) = 24 accumulators

#include "kernels/gemm_microkernel-inl.h"

static_assert(kNr == 32);

const GemmFormat kF32{WeightFormat::kF32, "gemm_f32w_f32_12x32__avx512bf16", kMr, kNr, pack_activations_f32,
                     gemm_format_widen<float>, gemm_format_widen_few<float>, 3};
const GemmFormat kBf16Widen{WeightFormat::kBf16Widen, "gemm_bf16w_f32_12x32__avx512bf16", kMr, kNr, pack_activations_f32,
                           gemm_format_widen<uint16_t>, gemm_format_widen_few<uint16_t>, 2};
const GemmFormat kQ8{WeightFormat::kQ8Block32, "gemm_q8w_q8_6x32__avx512bf16", kQ8Mr, kNr, pack_activations_q8,
                    gemm_format_q8, nullptr, 0};

const GemmFormat kBf16Dot{WeightFormat::kBf16Dot, "gemm_bf16w_bf16_12x32__avx512bf16", kMr, kNr,
                         pack_activations_bf16_pairs, gemm_format_bf16_dot<>, gemm_format_bf16_dot_few<>, 3};

// The exact GGUF formats run the AVX2 kernels (see gemm_avx512.cc); their int8 twins the AVX512_VNNI ones.
const IsaKernels kKernels{Isa::kAvx512Bf16, kMr, kNr, gemm_f32w, gemm_bf16w, gemm_f32w_few, gemm_bf16w_few, swiglu,
                          dot_rows,
                          "gemm_f32w_f32_12x32__avx512bf16", "gemm_bf16w_f32_12x32__avx512bf16", fma_probe, sum_probe,
                          sum_probe_streams, {&kF32, &kBf16Widen, &kBf16Dot, &kQ8,
                           &gemm_q8_0w_f32_4x16__avx2, &gemm_q4_0w_f32_4x16__avx2, &gemm_q4_kw_f32_4x16__avx2,
                           &gemm_q5_kw_f32_4x16__avx2, &gemm_q6_kw_f32_4x16__avx2,
                           &kGemmFp8wF32Avx2, &kGemmMxfp4wF32Avx2,
                           &gemm_q8_0w_q8_0_4x32__avx512vnni, &gemm_q4_0w_q8_0_4x32__avx512vnni,
                           &gemm_q4_kw_q8_k_4x32__avx512vnni, &gemm_q5_kw_q8_k_4x32__avx512vnni,
                           &gemm_q6_kw_q8_k_4x32__avx512vnni, &gemm_mxfp4w_q8_0_4x32__avx512vnni}, bf16_dot_probe<>,
                          int8_dot_probe};

}  // namespace

const IsaKernels& isa_kernels_avx512bf16() { return kKernels; }

}  // namespace hymoe::kernels
