// AVX-512F micro-kernels: gemm_f32w_f32_12x32__avx512, gemm_bf16w_f32_12x32__avx512 and the SwiGLU epilogue.
// Compiled with -mavx512f -mavx512bw -mavx512vl -mfma (and only this file); always built, run only where
// detect_best_isa() found AVX-512.
#include <immintrin.h>

#include "kernels/gemm_kernels.h"

namespace hymoe::kernels {
namespace {

struct V {
  using vec = __m512;
  static constexpr int kWidth = 16;
  static vec zero() { return _mm512_setzero_ps(); }
  static vec load(const float* p) { return _mm512_loadu_ps(p); }
  static vec load_bf16(const uint16_t* p) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  static vec broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static void store(float* p, vec v) { _mm512_storeu_ps(p, v); }
  static vec fma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
  static vec add(vec a, vec b) { return _mm512_add_ps(a, b); }
  static vec sub(vec a, vec b) { return _mm512_sub_ps(a, b); }
  static vec mul(vec a, vec b) { return _mm512_mul_ps(a, b); }
  static vec div(vec a, vec b) { return _mm512_div_ps(a, b); }
  static vec min(vec a, vec b) { return _mm512_min_ps(a, b); }
  static vec max(vec a, vec b) { return _mm512_max_ps(a, b); }
  static vec set1(float v) { return _mm512_set1_ps(v); }
  static vec round_nearest(vec v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static vec pow2(vec n) {
    const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_castsi512_ps(bits);
  }
};

constexpr int kMr = 12;  // 12 rows x 2 zmm = 24 accumulators (see the register budget in the -inl header)

#include "kernels/gemm_microkernel-inl.h"

static_assert(kNr == 32);

const IsaKernels kKernels{Isa::kAvx512, kMr, kNr, gemm_f32w, gemm_bf16w, gemm_f32w_few, gemm_bf16w_few, swiglu,
                          dot_rows,
                          "gemm_f32w_f32_12x32__avx512", "gemm_bf16w_f32_12x32__avx512", fma_probe, sum_probe,
                          sum_probe_streams};

}  // namespace

const IsaKernels& isa_kernels_avx512() { return kKernels; }

}  // namespace hymoe::kernels
