// AVX2 + F16C micro-kernels of the compact quantized formats (gemm_quantized.h): gemm_fp8w_f32_4x16__avx2 and
// gemm_mxfp4w_f32_4x16__avx2. Each decodes a k row of 16 weights from the panel into two f32 vectors, exactly,
// then runs the f32 FMA chain of the bf16-widen kernel: every C element is one chain in increasing k, so blocking
// and threads never change the bits. Compiled with -mavx2 -mfma -mf16c (and only this file); reached through
// isa_kernels(), chosen at run time.
//
// Register budget: 4 rows x 2 ymm = 8 accumulators, 2 per-column multipliers, 2 decoded weight vectors, a
// broadcast and the decode's temporaries and constants fit the 16 ymm registers; 6 rows (the f32 kernel's tile)
// would spill an accumulator on every k.
#include <immintrin.h>

#include "kernels/gemm_quantized.h"

namespace hymoe::kernels {
namespace {

constexpr int kMr = 4, kNr = 16;
constexpr int64_t kFp8UnitBytes = weight_unit_bytes(WeightFormat::kFp8Block128, kNr);
constexpr int64_t kMxfp4UnitBytes = weight_unit_bytes(WeightFormat::kMxfp4Block32, kNr);

// Step k of an M-row tile with the decoded weights of columns 0-7 (w0) and 8-15 (w1).
template <int M>
inline void fma_step(const float* ak, __m256 w0, __m256 w1, __m256 (&acc0)[M], __m256 (&acc1)[M]) {
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i) {
    const __m256 av = _mm256_broadcast_ss(ak + i);
    acc0[i] = _mm256_fmadd_ps(av, w0, acc0[i]);
    acc1[i] = _mm256_fmadd_ps(av, w1, acc1[i]);
  }
}

template <int M>
inline void load_acc(const float* c, int64_t ldc, bool accumulate, __m256 (&acc0)[M], __m256 (&acc1)[M]) {
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i) {
    acc0[i] = accumulate ? _mm256_loadu_ps(c + i * ldc) : _mm256_setzero_ps();
    acc1[i] = accumulate ? _mm256_loadu_ps(c + i * ldc + 8) : _mm256_setzero_ps();
  }
}

template <int M>
inline void store_acc(float* c, int64_t ldc, const __m256 (&acc0)[M], const __m256 (&acc1)[M]) {
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i) {
    _mm256_storeu_ps(c + i * ldc, acc0[i]);
    _mm256_storeu_ps(c + i * ldc + 8, acc1[i]);
  }
}

// The prefetch hint spread over the units: one test per unit of 32 or 128 k is free.
struct Prefetcher {
  const char* next;
  const char* end;
  int64_t lines_per_unit;
  Prefetcher(const void* pf, int64_t bytes, int64_t units)
      : next(static_cast<const char*>(pf)), end(next ? next + bytes : next),
        lines_per_unit(next && units > 0 ? ((bytes + 63) / 64 + units - 1) / units : 0) {}
  void unit() {
    for (int64_t l = 0; l < lines_per_unit && next < end; ++l, next += 64) __builtin_prefetch(next, 0, 2);
  }
};

// ---- fp8: 16 e4m3 codes to f16 bits, sign-extended to 16 bits first: shifted left by 7 the code's low 7 bits
// land on f16's bits 7-13 and its sign on bits 14 and 15; clearing bit 14 leaves (b & 0x80) << 8 | (b & 0x7f) << 7.
inline void fp8_weights(const uint8_t* codes, __m256 m0, __m256 m1, __m256& w0, __m256& w1) {
  const __m256i wide = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
  const __m256i half = _mm256_and_si256(_mm256_slli_epi16(wide, 7), _mm256_set1_epi16(static_cast<short>(0xBF80)));
  w0 = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(half)), m0);
  w1 = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(half, 1)), m1);
}

template <int M>
void fp8_tile(int64_t kc, const float* a, const uint8_t* b, float* c, int64_t ldc, bool accumulate, Prefetcher pf) {
  __m256 acc0[M], acc1[M];
  load_acc<M>(c, ldc, accumulate, acc0, acc1);
  for (int64_t k0 = 0; k0 < kc; k0 += kFp8PanelBlock) {
    const uint8_t* unit = b + k0 / kFp8PanelBlock * kFp8UnitBytes;
    pf.unit();
    const float* multipliers = reinterpret_cast<const float*>(unit + kFp8PanelBlock * kNr);
    const __m256 m0 = _mm256_loadu_ps(multipliers), m1 = _mm256_loadu_ps(multipliers + 8);
    const int64_t steps = kc - k0 < kFp8PanelBlock ? kc - k0 : kFp8PanelBlock;
#pragma GCC unroll 2
    for (int64_t k = 0; k < steps; ++k) {
      __m256 w0, w1;
      fp8_weights(unit + k * kNr, m0, m1, w0, w1);
      fma_step<M>(a + (k0 + k) * kMr, w0, w1, acc0, acc1);
    }
  }
  store_acc<M>(c, ldc, acc0, acc1);
}

// ---- mxfp4: a vpshufb table of 2 * e2m1 as int8 (exact small integers), then times 2^(s-128) per column.
// 2^(s-128) for 8 E8M0 scales: (s - 1) << 23 as float bits for s >= 2; the subnormals 2^-127 and 2^-128 for s =
// 1 and 0 (1 << 22 and 1 << 21). s = 255 (NaN) is refused by the packing.
inline __m256 half_e8m0_scales(const uint8_t* s8) {
  const __m256i s = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s8)));
  const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(s, _mm256_set1_epi32(1)), 23);
  const __m256i tiny = _mm256_sllv_epi32(_mm256_set1_epi32(1 << 21), s);
  const __m256i is_tiny = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), s);
  return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, tiny, is_tiny));
}

inline void mxfp4_weights(__m128i twice_values, __m256 s0, __m256 s1, __m256& w0, __m256& w1) {
  w0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(twice_values)), s0);
  w1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(twice_values, 8))), s1);
}

template <int M>
void mxfp4_tile(int64_t kc, const float* a, const uint8_t* b, float* c, int64_t ldc, bool accumulate,
                Prefetcher pf) {
  const __m128i table = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
  const __m128i nibble = _mm_set1_epi8(0x0f);
  __m256 acc0[M], acc1[M];
  load_acc<M>(c, ldc, accumulate, acc0, acc1);
  for (int64_t k0 = 0; k0 < kc; k0 += kMxfp4PanelGroup) {
    const uint8_t* unit = b + k0 / kMxfp4PanelGroup * kMxfp4UnitBytes;
    pf.unit();
    const __m256 s0 = half_e8m0_scales(unit + (kMxfp4PanelGroup / 2) * kNr);
    const __m256 s1 = half_e8m0_scales(unit + (kMxfp4PanelGroup / 2) * kNr + 8);
#pragma GCC unroll 2
    for (int t = 0; t < kMxfp4PanelGroup / 2; ++t) {
      const __m128i pair = _mm_loadu_si128(reinterpret_cast<const __m128i*>(unit + t * kNr));
      const __m128i even = _mm_shuffle_epi8(table, _mm_and_si128(pair, nibble));
      const __m128i odd = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(pair, 4), nibble));
      __m256 w0, w1;
      mxfp4_weights(even, s0, s1, w0, w1);
      fma_step<M>(a + (k0 + 2 * t) * kMr, w0, w1, acc0, acc1);
      mxfp4_weights(odd, s0, s1, w0, w1);
      fma_step<M>(a + (k0 + 2 * t + 1) * kMr, w0, w1, acc0, acc1);
    }
  }
  store_acc<M>(c, ldc, acc0, acc1);
}

// m in 1..kMr picks the instantiation with exactly m rows.
template <template <int> class Tile, int M = kMr>
struct Rows {
  static void run(int m, int64_t kc, const float* a, const uint8_t* b, float* c, int64_t ldc, bool acc,
                  Prefetcher pf) {
    if (m == M) return Tile<M>::run(kc, a, b, c, ldc, acc, pf);
    if constexpr (M > 1) Rows<Tile, M - 1>::run(m, kc, a, b, c, ldc, acc, pf);
  }
};
template <int M>
struct Fp8Tile {
  static void run(int64_t kc, const float* a, const uint8_t* b, float* c, int64_t ldc, bool acc, Prefetcher pf) {
    fp8_tile<M>(kc, a, b, c, ldc, acc, pf);
  }
};
template <int M>
struct Mxfp4Tile {
  static void run(int64_t kc, const float* a, const uint8_t* b, float* c, int64_t ldc, bool acc, Prefetcher pf) {
    mxfp4_tile<M>(kc, a, b, c, ldc, acc, pf);
  }
};

void gemm_fp8w(int m, int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool acc, const void* pf,
               int64_t pf_bytes) {
  Rows<Fp8Tile>::run(m, kc, static_cast<const float*>(a), static_cast<const uint8_t*>(b), c, ldc, acc,
                     Prefetcher(pf, pf_bytes, (kc + kFp8PanelBlock - 1) / kFp8PanelBlock));
}
void gemm_mxfp4w(int m, int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool acc, const void* pf,
                 int64_t pf_bytes) {
  Rows<Mxfp4Tile>::run(m, kc, static_cast<const float*>(a), static_cast<const uint8_t*>(b), c, ldc, acc,
                       Prefetcher(pf, pf_bytes, (kc + kMxfp4PanelGroup - 1) / kMxfp4PanelGroup));
}

}  // namespace

const GemmFormat kGemmFp8wF32Avx2{WeightFormat::kFp8Block128, "gemm_fp8w_f32_4x16__avx2", kMr, kNr,
                                  pack_activations_f32, gemm_fp8w, nullptr, 0};
const GemmFormat kGemmMxfp4wF32Avx2{WeightFormat::kMxfp4Block32, "gemm_mxfp4w_f32_4x16__avx2", kMr, kNr,
                                    pack_activations_f32, gemm_mxfp4w, nullptr, 0};

}  // namespace hymoe::kernels
