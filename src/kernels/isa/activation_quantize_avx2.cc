// The integer formats' activation quantizers on AVX2 (ggml's q8_0, q8_1 and q8_K, hymoe's q8 blocks) and their packings
// over them: the same bits as the scalar quantize_ggml_*_block (gemm_gguf_int8.cc) and quantize_q8_block
// (gemm_formats.cc). At one token the packing is on the layer's critical path between two phases of streaming
// weights (6 rows of 2048 values at T = 1 on DeepSeek-V2-Lite, quantized before the routed experts, again before
// their down projection and twice for the shared expert): scalar, it took 5-8% of a Q4_0 layer
// (docs/performance.md). Also the bf16 and fp8 dot formats' rounding to bf16 pairs (pack_activations_bf16_pairs'
// bits). Compiled with -mavx2 -mfma; every ISA level from AVX2 up packs with it (the AVX-512 units too: the
// packing is not where their time goes).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "hymoe/dtype.h"
#include "kernels/formats/gemm_kernels.h"
#include "kernels/formats/gemm_quantized.h"

namespace hymoe::kernels {
namespace {

#include "kernels/formats/activation_units-inl.h"

__m256 abs_ps(__m256 v) { return _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))); }

float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

// 8 int32 (each in [-128, 127]) to 8 bytes.
void store_i8x8(int8_t* q, __m256i v) {
  const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(q), _mm_packs_epi16(w, w));
}

// roundf: to nearest, ties away from zero. trunc(v) and v - trunc(v) are exact, so the tie test is too.
__m256 round_half_away(__m256 v) {
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 f = _mm256_sub_ps(v, t);
  const __m256 up = _mm256_and_ps(_mm256_cmp_ps(f, _mm256_set1_ps(0.5f), _CMP_GE_OQ), _mm256_set1_ps(1.0f));
  const __m256 down = _mm256_and_ps(_mm256_cmp_ps(f, _mm256_set1_ps(-0.5f), _CMP_LE_OQ), _mm256_set1_ps(1.0f));
  return _mm256_sub_ps(_mm256_add_ps(t, up), down);
}

// nearbyint in the default rounding mode: to nearest, ties to even.
__m256 round_half_even(__m256 v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }

void quantize_q8_0_block(const float* x, int n, int8_t* q, float* d) {
  if (n < kQ8Block) return quantize_ggml_q8_0_block(x, n, q, d);
  // max(|x|, acc) keeps acc where x is NaN, as the scalar std::max(acc, |x|) does.
  __m256 amax = _mm256_setzero_ps();
  for (int i = 0; i < kQ8Block; i += 8) amax = _mm256_max_ps(abs_ps(_mm256_loadu_ps(x + i)), amax);
  const float scale = hmax(amax) / 127.0f, inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
  const __m256 inv = _mm256_set1_ps(inverse);
  for (int i = 0; i < kQ8Block; i += 8)
    store_i8x8(q + i, _mm256_cvttps_epi32(round_half_away(_mm256_mul_ps(_mm256_loadu_ps(x + i), inv))));
  *d = f16_to_float(float_to_f16(scale));
}

// q8_1: q8_0's codes and d, and s from the codes' sum and d before its rounding to f16.
void quantize_q8_1_block(const float* x, int n, int8_t* q, float* d, float* s) {
  if (n < kQ8Block) return quantize_ggml_q8_1_block(x, n, q, d, s);
  __m256 amax = _mm256_setzero_ps();
  for (int i = 0; i < kQ8Block; i += 8) amax = _mm256_max_ps(abs_ps(_mm256_loadu_ps(x + i)), amax);
  const float scale = hmax(amax) / 127.0f, inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
  const __m256 inv = _mm256_set1_ps(inverse);
  __m256i sum = _mm256_setzero_si256();
  for (int i = 0; i < kQ8Block; i += 8) {
    const __m256i v = _mm256_cvttps_epi32(round_half_away(_mm256_mul_ps(_mm256_loadu_ps(x + i), inv)));
    sum = _mm256_add_epi32(sum, v);
    store_i8x8(q + i, v);
  }
  __m128i t = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
  *d = f16_to_float(float_to_f16(scale));
  *s = f16_to_float(float_to_f16(static_cast<float>(_mm_cvtsi128_si32(t)) * scale));
}

void quantize_q8_k_block(const float* x, int n, int8_t* q, float* d) {
  if (n < kQ8KBlock) return quantize_ggml_q8_k_block(x, n, q, d);
  __m256 amax = _mm256_setzero_ps();
  for (int i = 0; i < kQ8KBlock; i += 8) amax = _mm256_max_ps(abs_ps(_mm256_loadu_ps(x + i)), amax);
  const float m = hmax(amax);
  if (m == 0.0f) {
    std::memset(q, 0, kQ8KBlock);
    *d = 0.0f;
    return;
  }
  // The value of largest magnitude: the first one, as the scalar loop's strict '>' keeps.
  int first = 0;
  while (std::abs(x[first]) != m) ++first;
  const float inverse = -127.0f / x[first];
  const __m256 inv = _mm256_set1_ps(inverse), top = _mm256_set1_ps(127.0f);
  for (int i = 0; i < kQ8KBlock; i += 8) {
    const __m256 v = round_half_even(_mm256_mul_ps(inv, _mm256_loadu_ps(x + i)));
    store_i8x8(q + i, _mm256_cvttps_epi32(_mm256_min_ps(top, v)));
  }
  *d = 1.0f / inverse;
}

// hymoe's q8 blocks: scale amax / 127 kept in f32, codes rounded to nearest even and clamped to [-127, 127].
void quantize_q8(const float* x, int n, int8_t* q, float* d) {
  if (n < kQ8Block) return quantize_q8_block(x, n, q, d);
  __m256 amax = _mm256_setzero_ps();
  for (int i = 0; i < kQ8Block; i += 8) amax = _mm256_max_ps(abs_ps(_mm256_loadu_ps(x + i)), amax);
  const float scale = hmax(amax) / 127.0f, inverse = scale > 0.0f ? 1.0f / scale : 0.0f;
  const __m256 inv = _mm256_set1_ps(inverse), top = _mm256_set1_ps(127.0f), bottom = _mm256_set1_ps(-127.0f);
  for (int i = 0; i < kQ8Block; i += 8) {
    const __m256 v = round_half_even(_mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
    store_i8x8(q + i, _mm256_cvttps_epi32(_mm256_max_ps(bottom, _mm256_min_ps(top, v))));
  }
  *d = scale;
}

// float_to_bf16 on 8 lanes (round to nearest even; NaN kept quiet), each result in its lane's low 16 bits. Not
// vcvtneps2bf16: it reads subnormal inputs as zero, and the packed bits must not depend on the ISA.
__m256i bf16_bits(__m256i bits) {
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff)),
                                         _mm256_set1_epi32(0x7f800000));
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff)));
  const __m256i quiet = _mm256_or_si256(bits, _mm256_set1_epi32(0x00400000));
  return _mm256_srli_epi32(_mm256_blendv_epi8(rounded, quiet, nan), 16);
}

// One row's k pairs [2 * first, 2 * first + n) (n <= kPackChunkPairs, 2 * (first + n) <= k) rounded to bf16 pairs,
// as 32-bit words: 16 values a step, a scalar tail.
constexpr int64_t kPackChunkPairs = 64;
void bf16_pair_words(const float* row, int64_t first, int64_t n, uint32_t* words) {
  int64_t u = 0;
  for (; u + 8 <= n; u += 8) {
    const float* x = row + 2 * (first + u);
    const __m256i lo = bf16_bits(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
    const __m256i hi = bf16_bits(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 8)));
    // packus interleaves the 128-bit lanes (lo 0-3, hi 0-3, lo 4-7, hi 4-7); the permute puts them in k order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(words + u), packed);
  }
  for (; u < n; ++u) {
    const int64_t kk = 2 * (first + u);
    words[u] = float_to_bf16(row[kk]) | static_cast<uint32_t>(float_to_bf16(row[kk + 1])) << 16;
  }
}

}  // namespace

// pack_activations_bf16_pairs's words (gemm_formats.cc), a chunk of 64 k pairs at a time over every row so that the
// chunk's mr * 64 words stay in L1 while the rows fill them. Scalar, this packing took about 7% of Qwen3-30B-A3B's
// native bf16 experts at 512 tokens (docs/performance.md).
void pack_activations_bf16_pairs__avx2(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k,
                                       int mr, void* out) {
  uint32_t* const dst = static_cast<uint32_t*>(out);
  const int64_t units = (k + 1) / 2, whole = k / 2;  // a last odd k makes a pair of its value and zero
  alignas(32) uint32_t words[kPackChunkPairs];
  for (int64_t first = 0; first < units; first += kPackChunkPairs) {
    const int64_t n = std::min(kPackChunkPairs, units - first);
    uint32_t* const chunk = dst + first * mr;
    for (int i = 0; i < mr; ++i) {
      if (i >= rows) {
        for (int64_t u = 0; u < n; ++u) chunk[u * mr + i] = 0;
        continue;
      }
      const float* row = a + (row_index ? row_index[i] : i) * lda;
      const int64_t full = std::min(n, whole - first);
      bf16_pair_words(row, first, full, words);
      if (full < n) words[full] = float_to_bf16(row[k - 1]);
      for (int64_t u = 0; u < n; ++u) chunk[u * mr + i] = words[u];
    }
  }
}

void pack_activations_bf16_pairs128__avx2(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k,
                                          int mr, void* out) {
  pack_activations_bf16_pairs__avx2(a, lda, row_index, rows, k, mr, out);
  zero_pairs_to_fp8_unit(k, mr, out);
}

void pack_activations_q8__avx2(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k, int mr,
                               void* out) {
  pack_activation_units<kQ8Block, kQ8Block, -128>(a, lda, row_index, rows, k, mr, out, quantize_q8);
}
void pack_activations_ggml_q8_0__avx2(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k,
                                      int mr, void* out) {
  pack_activation_units<32, kQ8Block, 1>(a, lda, row_index, rows, k, mr, out, quantize_q8_0_block);
}
void pack_activations_ggml_q8_1__avx2(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k,
                                      int mr, void* out) {
  pack_activation_units<32, kQ8Block, 1, true>(a, lda, row_index, rows, k, mr, out, quantize_q8_1_block);
}
void pack_activations_ggml_q8_k32__avx2(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k,
                                        int mr, void* out) {
  pack_activation_units<32, kQ8KBlock, 1>(a, lda, row_index, rows, k, mr, out, quantize_q8_k_block);
}
void pack_activations_ggml_q8_k16__avx2(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k,
                                        int mr, void* out) {
  pack_activation_units<16, kQ8KBlock, 1>(a, lda, row_index, rows, k, mr, out, quantize_q8_k_block);
}

}  // namespace hymoe::kernels
