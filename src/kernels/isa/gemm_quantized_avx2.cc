// AVX2 + F16C micro-kernels of the compact quantized formats (gemm_quantized.h): gemm_fp8w_f32_4x16__avx2 and
// gemm_mxfp4w_f32_4x16__avx2, each with a few-rows form for decode (one row over kFewRowsPanels[1] panels per
// call). Each decodes a k row of 16 weights from the panel into two f32 vectors, exactly, then runs the f32 FMA
// chain of the bf16-widen kernel: every C element is one chain in increasing k, so blocking, the few-rows form
// and threads never change the bits. Compiled with -mavx2 -mfma -mf16c (and only this file); reached through
// isa_kernels(), chosen at run time.
//
// Register budget: 4 rows x 2 ymm = 8 accumulators, 2 per-column multipliers, 2 decoded weight vectors, a
// broadcast and the decode's temporaries and constants fit the 16 ymm registers; 6 rows (the f32 kernel's tile)
// would spill an accumulator on every k. The decode form holds 8 accumulators (1 row x 4 panels); its 8
// multiplier vectors are read from L1 as memory operands where registers run out.
#include <immintrin.h>

#include "kernels/formats/gemm_quantized.h"

namespace hymoe::kernels {
namespace {

constexpr int kMr = 4, kNr = 16;
constexpr int64_t kFp8UnitBytes = weight_unit_bytes(WeightFormat::kFp8Block128, kNr);
constexpr int64_t kMxfp4UnitBytes = weight_unit_bytes(WeightFormat::kMxfp4Block32, kNr);

// Accumulators of M rows over P panels: acc[i][2p] and acc[i][2p + 1] hold row i's 16 columns of panel p, whose
// C is at c + i * ldc + p * kNr: columns 0-7 and 8-15, or with kSplitHalves (the fp8 kernels' order, see
// fp8_weights_normal) columns 0-3 and 8-11, and 4-7 and 12-15. Moving a value between lanes is exact.
template <bool kSplitHalves>
inline void to_split_halves(__m256& lo, __m256& hi) {
  if constexpr (kSplitHalves) {
    const __m256 a = _mm256_permute2f128_ps(lo, hi, 0x20), b = _mm256_permute2f128_ps(lo, hi, 0x31);
    lo = a;
    hi = b;
  }
}

template <int M, int P, bool kSplitHalves>
inline void load_acc(const float* c, int64_t ldc, bool accumulate, __m256 (&acc)[M][2 * P]) {
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      acc[i][2 * p] = accumulate ? _mm256_loadu_ps(c + i * ldc + p * kNr) : _mm256_setzero_ps();
      acc[i][2 * p + 1] = accumulate ? _mm256_loadu_ps(c + i * ldc + p * kNr + 8) : _mm256_setzero_ps();
      if (accumulate) to_split_halves<kSplitHalves>(acc[i][2 * p], acc[i][2 * p + 1]);
    }
}

// The split-halves order is its own inverse.
template <int M, int P, bool kSplitHalves>
inline void store_acc(float* c, int64_t ldc, const __m256 (&acc)[M][2 * P]) {
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      __m256 lo = acc[i][2 * p], hi = acc[i][2 * p + 1];
      to_split_halves<kSplitHalves>(lo, hi);
      _mm256_storeu_ps(c + i * ldc + p * kNr, lo);
      _mm256_storeu_ps(c + i * ldc + p * kNr + 8, hi);
    }
}

// Step k of panel p with its decoded weights of columns 0-7 (w0) and 8-15 (w1): one FMA per C element.
template <int M, int P>
inline void fma_step(const float* ak, int p, __m256 w0, __m256 w1, __m256 (&acc)[M][2 * P]) {
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i) {
    const __m256 av = _mm256_broadcast_ss(ak + i);
    acc[i][2 * p] = _mm256_fmadd_ps(av, w0, acc[i][2 * p]);
    acc[i][2 * p + 1] = _mm256_fmadd_ps(av, w1, acc[i][2 * p + 1]);
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

// ---- fp8. Two exact decodes of a k row of 16 e4m3 codes to fp8(b) * 2^-8, then times the multipliers:
// fp8_weights_normal for units whose codes are all normal (exponent field e >= 1, the common case: a checkpoint
// block's subnormals and zeros are rare), fp8_weights (F16C) for any code. Both give the same values, so which
// one a unit takes never changes a bit.
//
// Normal codes, integer ops only: the top 16 bits of the f32 are (b & 0x80) << 8 | ((b & 0x7f) << 4) + (112 << 7):
// the code's 4 exponent and 3 mantissa bits land on f32's exponent (e + 112, so 2^(e - 15) = 2^(e - 7) * 2^-8)
// and the mantissa's top bits. The codes sign-extended to 16 bits and shifted left by 4 carry the sign on bits
// 11-15, so the mask 0x87f0 keeps bit 15 and the code's low 7 bits; the add cannot carry into the sign. The
// vpunpck{l,h}wd that append 16 zero bits work within 128-bit lanes, so w0 holds columns 0-3 and 8-11 and w1
// columns 4-7 and 12-15 (the split-halves order of load_acc): 8 simple instructions per 16 weights, where the
// two vcvtph2ps of fp8_weights take about 2 cycles each on Zen 3.
inline void fp8_weights_normal(const uint8_t* codes, __m256 m0, __m256 m1, __m256& w0, __m256& w1) {
  const __m256i wide = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
  const __m256i sign_and_low7 =
      _mm256_and_si256(_mm256_slli_epi16(wide, 4), _mm256_set1_epi16(static_cast<short>(0x87F0)));
  const __m256i top = _mm256_add_epi16(sign_and_low7, _mm256_set1_epi16(112 << 7));
  w0 = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_unpacklo_epi16(_mm256_setzero_si256(), top)), m0);
  w1 = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_unpackhi_epi16(_mm256_setzero_si256(), top)), m1);
}

// Any finite code: sign-extended to 16 bits and shifted left by 7, the code's low 7 bits land on f16's bits 7-13
// and its sign on bits 14 and 15; clearing bit 14 leaves the f16 bits (b & 0x80) << 8 | (b & 0x7f) << 7, whose
// value is fp8(b) * 2^-8 (subnormals included: the exponent biases differ by 8). Returned in the split-halves
// order, with m0 and m1 in it too.
inline void fp8_weights(const uint8_t* codes, __m256 m0, __m256 m1, __m256& w0, __m256& w1) {
  const __m256i wide = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
  const __m256i half = _mm256_and_si256(_mm256_slli_epi16(wide, 7), _mm256_set1_epi16(static_cast<short>(0xBF80)));
  __m256 lo = _mm256_cvtph_ps(_mm256_castsi256_si128(half)), hi = _mm256_cvtph_ps(_mm256_extracti128_si256(half, 1));
  to_split_halves<true>(lo, hi);
  w0 = _mm256_mul_ps(lo, m0);
  w1 = _mm256_mul_ps(hi, m1);
}

constexpr int64_t kFp8NormalRows = 32;
static_assert(kFp8PanelBlock % kFp8NormalRows == 0, "the decode is chosen per group of rows of a unit");

// Whether rows [0, rows) of the P panels' unit (rows of 16 codes) hold only normal codes (e >= 1, i.e.
// b & 0x78 != 0): a vpand and a vpminub per 32 codes, in four independent chains (one chain, a loop-carried
// vpminub per 32 codes, measured 17% of the 3-row kernel's time).
template <int P>
inline bool fp8_units_normal(const uint8_t* unit, int64_t panel_stride, int64_t rows) {
  const __m256i exponent = _mm256_set1_epi8(0x78);
  const auto masked = [&](const uint8_t* p) {
    return _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), exponent);
  };
  __m256i low[4] = {exponent, exponent, exponent, exponent};
  const int64_t bytes = rows * kNr;
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p) {
    const uint8_t* codes = unit + p * panel_stride;
    int64_t i = 0;
    for (; i + 128 <= bytes; i += 128)
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) low[j] = _mm256_min_epu8(low[j], masked(codes + i + 32 * j));
    for (; i + 32 <= bytes; i += 32) low[0] = _mm256_min_epu8(low[0], masked(codes + i));
    if (i < bytes) {  // one row of 16 codes left
      const __m128i last = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i));
      const __m256i row = _mm256_set_m128i(_mm_set1_epi8(0x78), last);
      low[1] = _mm256_min_epu8(low[1], _mm256_and_si256(row, exponent));
    }
  }
  const __m256i all = _mm256_min_epu8(_mm256_min_epu8(low[0], low[1]), _mm256_min_epu8(low[2], low[3]));
  return _mm256_movemask_epi8(_mm256_cmpeq_epi8(all, _mm256_setzero_si256())) == 0;
}

// The expanded form (GemmFormat::gemm_expanding / gemm_expanded): of a tile's several micro-tiles over one weight
// block, the first decodes it as usual and also stores each k row's two decoded vectors (the exact f32 weights, in
// the split-halves order) to an L1 buffer, and the others run the FMA chain on them, without the decode, the
// multipliers or the normal-codes test. The same weights in the same order: the bits of the direct form.
constexpr int64_t kFp8ExpandedUnitBytes = kFp8PanelBlock * kNr * 4;

// Rows [k_begin, k_end) of one unit of the P panels (a: the unit's activations), decoded by fp8_weights_normal
// (kNormal) or fp8_weights; with `expanded` (P = 1) each row's weights are also stored at expanded + 16 k. With
// P > 1 (the decode form, which the driver gives no prefetch hint) it prefetches the panels' next unit toward L2,
// a line per k in turn over the panels. Cold (the grouped driver, one thread, 8 experts of 2048 x 2816): one row
// over 4 panels measured 16% slower than four 1-row calls (whose hint fetches the next block) without it, 26-35%
// faster with it.
template <bool kNormal, bool kExpanding, int M, int P>
inline void fp8_rows(const uint8_t* unit, int64_t panel_stride, int64_t k_begin, int64_t k_end, const float* a,
                     const __m256 (&m)[P][2], __m256 (&acc)[M][2 * P], float* expanded) {
  static_assert(P == 1 || !kExpanding);
#pragma GCC unroll 2
  for (int64_t k = k_begin; k < k_end; ++k) {
    if constexpr (P > 1) __builtin_prefetch(unit + kFp8UnitBytes + k % P * panel_stride + k / P * 64, 0, 2);
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      __m256 w0, w1;
      if constexpr (kNormal) fp8_weights_normal(unit + p * panel_stride + k * kNr, m[p][0], m[p][1], w0, w1);
      else fp8_weights(unit + p * panel_stride + k * kNr, m[p][0], m[p][1], w0, w1);
      if constexpr (kExpanding) {
        _mm256_storeu_ps(expanded + k * kNr, w0);
        _mm256_storeu_ps(expanded + k * kNr + 8, w1);
      }
      fma_step<M, P>(a + k * kMr, p, w0, w1, acc);
    }
  }
}

// M rows over P panels (panel p at b + p * panel_stride bytes, its C at c + p * kNr). P > 1 is the few-rows form:
// one row has only 2 chains per panel, too few to cover the FMA latency; 4 panels give 8. With kExpanding (P = 1)
// the decoded weights also go to `expanded`, kFp8ExpandedUnitBytes a unit.
template <int M, int P, bool kExpanding = false>
void fp8_tile(int64_t kc, const float* a, const uint8_t* b, int64_t panel_stride, float* c, int64_t ldc,
              bool accumulate, Prefetcher pf, float* expanded = nullptr) {
  __m256 acc[M][2 * P];
  load_acc<M, P, true>(c, ldc, accumulate, acc);
  for (int64_t k0 = 0; k0 < kc; k0 += kFp8PanelBlock) {
    const uint8_t* unit = b + k0 / kFp8PanelBlock * kFp8UnitBytes;
    float* const expanded_unit = kExpanding ? expanded + k0 * kNr : nullptr;
    pf.unit();
    __m256 m[P][2];
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const float* multipliers = reinterpret_cast<const float*>(unit + p * panel_stride + kFp8PanelBlock * kNr);
      m[p][0] = _mm256_loadu_ps(multipliers);
      m[p][1] = _mm256_loadu_ps(multipliers + 8);
      to_split_halves<true>(m[p][0], m[p][1]);
    }
    const int64_t steps = kc - k0 < kFp8PanelBlock ? kc - k0 : kFp8PanelBlock;
    // The decode is chosen per kFp8NormalRows rows: a unit of random weights quantized as DeepSeek-V3 blocks
    // (amax / 448) holds a subnormal or zero code with a chance of about 7% (uniform weights) to 25% (normal
    // ones, amax about 4.5 sigma), a quarter of that per 32 rows.
    for (int64_t r0 = 0; r0 < steps; r0 += kFp8NormalRows) {
      const int64_t r1 = steps - r0 < kFp8NormalRows ? steps : r0 + kFp8NormalRows;
      if (fp8_units_normal<P>(unit + r0 * kNr, panel_stride, r1 - r0))
        fp8_rows<true, kExpanding, M, P>(unit, panel_stride, r0, r1, a + k0 * kMr, m, acc, expanded_unit);
      else
        fp8_rows<false, kExpanding, M, P>(unit, panel_stride, r0, r1, a + k0 * kMr, m, acc, expanded_unit);
    }
  }
  store_acc<M, P, true>(c, ldc, acc);
}

// M rows of one panel on its expanded weights (w: 16 floats a k, in the split-halves order).
template <int M>
void fp8_expanded_tile(int64_t kc, const float* a, const float* w, float* c, int64_t ldc, bool accumulate,
                       Prefetcher pf) {
  __m256 acc[M][2];
  load_acc<M, 1, true>(c, ldc, accumulate, acc);
  for (int64_t k0 = 0; k0 < kc; k0 += kFp8PanelBlock) {
    pf.unit();
    const int64_t k1 = kc - k0 < kFp8PanelBlock ? kc : k0 + kFp8PanelBlock;
#pragma GCC unroll 4
    for (int64_t k = k0; k < k1; ++k)
      fma_step<M, 1>(a + k * kMr, 0, _mm256_loadu_ps(w + k * kNr), _mm256_loadu_ps(w + k * kNr + 8), acc);
  }
  store_acc<M, 1, true>(c, ldc, acc);
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

// (The decode form has no prefetch of its own: fp8's, a K block ahead, measured no faster here, cold, one
// thread: the decode bounds it.)
template <int M, int P>
void mxfp4_tile(int64_t kc, const float* a, const uint8_t* b, int64_t panel_stride, float* c, int64_t ldc,
                bool accumulate, Prefetcher pf) {
  const __m128i table = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
  const __m128i nibble = _mm_set1_epi8(0x0f);
  __m256 acc[M][2 * P];
  load_acc<M, P, false>(c, ldc, accumulate, acc);
  for (int64_t k0 = 0; k0 < kc; k0 += kMxfp4PanelGroup) {
    const uint8_t* unit = b + k0 / kMxfp4PanelGroup * kMxfp4UnitBytes;
    pf.unit();
    __m256 s[P][2];
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      s[p][0] = half_e8m0_scales(unit + p * panel_stride + (kMxfp4PanelGroup / 2) * kNr);
      s[p][1] = half_e8m0_scales(unit + p * panel_stride + (kMxfp4PanelGroup / 2) * kNr + 8);
    }
#pragma GCC unroll 2
    for (int t = 0; t < kMxfp4PanelGroup / 2; ++t) {
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        const __m128i pair = _mm_loadu_si128(reinterpret_cast<const __m128i*>(unit + p * panel_stride + t * kNr));
        const __m128i even = _mm_shuffle_epi8(table, _mm_and_si128(pair, nibble));
        const __m128i odd = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(pair, 4), nibble));
        __m256 w0, w1;
        mxfp4_weights(even, s[p][0], s[p][1], w0, w1);
        fma_step<M, P>(a + (k0 + 2 * t) * kMr, p, w0, w1, acc);
        mxfp4_weights(odd, s[p][0], s[p][1], w0, w1);
        fma_step<M, P>(a + (k0 + 2 * t + 1) * kMr, p, w0, w1, acc);
      }
    }
  }
  store_acc<M, P, false>(c, ldc, acc);
}

// The m-row kernels (one panel) and the few-rows forms (m rows over kFewRowsPanels[m] panels) of both formats.
enum class Code { kFp8, kMxfp4 };
template <Code F, int M, int P>
void tile(int64_t kc, const float* a, const uint8_t* b, int64_t panel_stride, float* c, int64_t ldc, bool acc,
          Prefetcher pf) {
  if constexpr (F == Code::kFp8) fp8_tile<M, P>(kc, a, b, panel_stride, c, ldc, acc, pf);
  else mxfp4_tile<M, P>(kc, a, b, panel_stride, c, ldc, acc, pf);
}
constexpr int64_t unit_k(Code f) { return f == Code::kFp8 ? kFp8PanelBlock : kMxfp4PanelGroup; }

// m in 1..kMr to run(Rows<m>{}): the tile instantiated with exactly m rows, so tails cost no masking.
template <int M>
struct Rows {
  static constexpr int value = M;
};
template <typename Run>
inline void by_rows(int m, Run&& run) {
  switch (m) {
    case 1: return run(Rows<1>{});
    case 2: return run(Rows<2>{});
    case 3: return run(Rows<3>{});
    default: return run(Rows<kMr>{});
  }
}
static_assert(kMr == 4, "by_rows instantiates 1..4 rows");

template <Code F>
void gemm_rows(int m, int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool acc, const void* pf,
               int64_t pf_bytes) {
  const Prefetcher hint(pf, pf_bytes, (kc + unit_k(F) - 1) / unit_k(F));
  by_rows(m, [&](auto rows) {
    tile<F, decltype(rows)::value, 1>(kc, static_cast<const float*>(a), static_cast<const uint8_t*>(b), 0, c, ldc, acc,
                                      hint);
  });
}

// fp8's GemmExpandingFn and its GemmFn on the expanded weights.
void gemm_fp8_expanding(int m, int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool acc,
                        const void* pf, int64_t pf_bytes, void* expanded) {
  const Prefetcher hint(pf, pf_bytes, (kc + kFp8PanelBlock - 1) / kFp8PanelBlock);
  by_rows(m, [&](auto rows) {
    fp8_tile<decltype(rows)::value, 1, true>(kc, static_cast<const float*>(a), static_cast<const uint8_t*>(b), 0, c,
                                             ldc, acc, hint, static_cast<float*>(expanded));
  });
}
void gemm_fp8_expanded(int m, int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool acc,
                       const void* pf, int64_t pf_bytes) {
  const Prefetcher hint(pf, pf_bytes, (kc + kFp8PanelBlock - 1) / kFp8PanelBlock);
  by_rows(m, [&](auto rows) {
    fp8_expanded_tile<decltype(rows)::value>(kc, static_cast<const float*>(a), static_cast<const float*>(b), c, ldc,
                                             acc, hint);
  });
}

// One row over kFewRowsPanels[1] panels (few_rows_max = 1): the decode case. Forms of 2 and 3 rows (3 and 2
// panels, 12 accumulators) measured no faster than the 2- and 3-row kernels on one panel (hot, fp8 3 rows 5.6
// against 6.2 G weights/s; mxfp4 within noise), and those keep the driver's prefetch.
template <Code F>
void gemm_few(int m, int64_t kc, const void* a, const void* b, int64_t panel_stride_bytes, float* c, int64_t ldc,
              bool acc) {
  (void)m;  // always 1
  tile<F, 1, kFewRowsPanels[1]>(kc, static_cast<const float*>(a), static_cast<const uint8_t*>(b), panel_stride_bytes,
                                c, ldc, acc, Prefetcher(nullptr, 0, 0));
}

}  // namespace

const GemmFormat kGemmFp8wF32Avx2{WeightFormat::kFp8Block128, "gemm_fp8w_f32_4x16__avx2", kMr, kNr,
                                  pack_activations_f32, gemm_rows<Code::kFp8>, gemm_few<Code::kFp8>, 1,
                                  gemm_fp8_expanding, gemm_fp8_expanded, kFp8ExpandedUnitBytes};
const GemmFormat kGemmMxfp4wF32Avx2{WeightFormat::kMxfp4Block32, "gemm_mxfp4w_f32_4x16__avx2", kMr, kNr,
                                    pack_activations_f32, gemm_rows<Code::kMxfp4>, gemm_few<Code::kMxfp4>, 1};

}  // namespace hymoe::kernels
