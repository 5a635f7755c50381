// AVX2+FMA micro-kernels: gemm_f32w_f32_6x16__avx2, gemm_bf16w_f32_6x16__avx2 and the SwiGLU epilogue. Compiled
// with -mavx2 -mfma (and only this file): callers reach it through isa_kernels(), chosen at run time.
#include <immintrin.h>

#include "kernels/gemm_kernels.h"

namespace hymoe::kernels {
namespace {

struct V {
  using vec = __m256;
  static constexpr int kWidth = 8;
  static vec zero() { return _mm256_setzero_ps(); }
  static vec load(const float* p) { return _mm256_loadu_ps(p); }
  static vec load_bf16(const uint16_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static vec broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static void store(float* p, vec v) { _mm256_storeu_ps(p, v); }
  static vec fma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
  static vec add(vec a, vec b) { return _mm256_add_ps(a, b); }
  static vec sub(vec a, vec b) { return _mm256_sub_ps(a, b); }
  static vec mul(vec a, vec b) { return _mm256_mul_ps(a, b); }
  static vec div(vec a, vec b) { return _mm256_div_ps(a, b); }
  static vec min(vec a, vec b) { return _mm256_min_ps(a, b); }
  static vec max(vec a, vec b) { return _mm256_max_ps(a, b); }
  static vec set1(float v) { return _mm256_set1_ps(v); }
  static vec round_nearest(vec v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static vec pow2(vec n) {
    const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_castsi256_ps(bits);
  }
};

constexpr int kMr = 6;  // 6 rows x 2 ymm = 12 accumulators (see the register budget in the -inl header)

#include "kernels/gemm_microkernel-inl.h"

static_assert(kNr == 16);

const IsaKernels kKernels{Isa::kAvx2, kMr, kNr, gemm_f32w, gemm_bf16w, gemm_f32w_few, gemm_bf16w_few, swiglu,
                          dot_rows,
                          "gemm_f32w_f32_6x16__avx2", "gemm_bf16w_f32_6x16__avx2", fma_probe, sum_probe,
                          sum_probe_streams};

}  // namespace

const IsaKernels& isa_kernels_avx2() { return kKernels; }

}  // namespace hymoe::kernels
