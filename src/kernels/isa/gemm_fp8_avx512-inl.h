// The exact fp8 block format's AVX-512 micro-kernel (gemm_quantized.h), gemm_fp8w_f32_12x32__avx512: the 512-bit
// twin of gemm_fp8w_f32_4x16__avx2. Included by gemm_avx512.cc after gemm_microkernel-inl.h (inside its anonymous
// namespace, with its kMr and kNr), which exports the format to every AVX-512 level. Each k row of a 32-column
// panel is decoded exactly into two f32 vectors (times the column multipliers), then every C element takes one f32
// FMA per k in increasing k: the chain of the AVX2 kernel and of the f32 kernel, so the bits are those of the AVX2
// kernel, of any blocking, of the few-rows form and of any thread count.
//
// Why a 512-bit version: fp8 runs this format by default on the AVX-512 levels without AVX512_BF16, and under
// `--quant-compute exact` on all of them; on Intel's AVX-512 cores a 512-bit FMA does twice a 256-bit one's work
// (Zen 4 splits it in two, so there it only matches the AVX2 kernel). Its expanded form is the f32 format's panel
// layout, so the micro-tiles after a block's first run the f32 kernel itself (gemm_format_widen<float>) on the
// decoded block. At one token its decode (three integer ops, the multiplier's product and the FMA per 16 weights,
// all on the two 512-bit ports) binds it below the bf16 dot format's (docs/performance.md).
//
// Register budget (12 rows, one panel): 24 accumulators, 2 multipliers, 2 decoded weights and a broadcast: 29 of
// 32 zmm, the decode's two constants as broadcast memory operands where registers run out.

static_assert(kNr == 32 && kMr == 12);
constexpr int64_t kFp8UnitBytes = weight_unit_bytes(WeightFormat::kFp8Block128, kNr);
constexpr int64_t kFp8UnitLines = (kFp8UnitBytes + 63) / 64;
// An expanded unit: the block's (128, kNr) exact f32 weights, the f32 format's panel layout.
constexpr int64_t kFp8ExpandedUnitBytes = int64_t{kFp8PanelBlock} * kNr * 4;

// 16 codes to f32 fp8(b) * 2^-8, exactly. Normal codes (exponent field e >= 1), integer ops only: the codes
// sign-extended to 32 bits and shifted left by 20 put the code's 7 low bits on f32's bits 20-26 (3 mantissa bits
// under the 4 exponent bits) and copies of the sign on 27-31; the mask 0x87F00000 keeps bit 31 and bits 20-26, and
// or-ing 112 << 23 (bits 27-29, clear of e's 23-26) makes the exponent e + 112: 2^(e - 15) = 2^(e - 7) * 2^-8.
// One vpternlogd, (A & B) | C (truth table 0xEA), does both.
inline __m512 fp8_normal16(const uint8_t* codes) {
  const __m512i x = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
  return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_slli_epi32(x, 20), _mm512_set1_epi32(0x87F00000),
                                                       _mm512_set1_epi32(112 << 23), 0xEA));
}

// Any finite code, through the f16 bits (b & 0x80) << 8 | (b & 0x7f) << 7, whose value is fp8(b) * 2^-8
// (subnormals included: the exponent biases differ by 8), as the AVX2 kernel's fp8_weights.
inline __m512 fp8_any16(const uint8_t* codes) {
  const __m256i wide = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
  return _mm512_cvtph_ps(_mm256_and_si256(_mm256_slli_epi16(wide, 7), _mm256_set1_epi16(static_cast<short>(0xBF80))));
}

constexpr int64_t kFp8NormalRows = 32;
static_assert(kFp8PanelBlock % kFp8NormalRows == 0, "the decode is chosen per group of rows of a unit");

// Whether rows [0, rows) of the P panels' unit hold only normal codes (b & 0x78 != 0): vpminub over the masked
// codes in four independent chains, then one test for a zero byte.
template <int P>
inline bool rows_normal(const uint8_t* unit, int64_t panel_stride, int64_t rows) {
  const __m512i exponent = _mm512_set1_epi8(0x78);
  const auto masked = [&](const uint8_t* p) { return _mm512_and_si512(_mm512_loadu_si512(p), exponent); };
  __m512i low[4] = {exponent, exponent, exponent, exponent};
  const int64_t bytes = rows * kNr;
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p) {
    const uint8_t* codes = unit + p * panel_stride;
    int64_t i = 0;
    for (; i + 256 <= bytes; i += 256)
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) low[j] = _mm512_min_epu8(low[j], masked(codes + i + 64 * j));
    for (; i + 64 <= bytes; i += 64) low[0] = _mm512_min_epu8(low[0], masked(codes + i));
    if (i < bytes)  // one row of 32 codes left; the masked-off bytes read as 0x78
      low[1] = _mm512_min_epu8(low[1], _mm512_and_si512(_mm512_mask_loadu_epi8(exponent, 0xFFFFFFFFull, codes + i),
                                                        exponent));
  }
  const __m512i all = _mm512_min_epu8(_mm512_min_epu8(low[0], low[1]), _mm512_min_epu8(low[2], low[3]));
  return _mm512_testn_epi8_mask(all, all) == 0;
}

// Rows [k_begin, k_end) of one unit of the P panels (a: the unit's activations, kMr a k), decoded by fp8_normal16
// (kNormal) or fp8_any16; with kExpanding (P = 1) each row's weights are also stored at expanded + kNr k. With
// P > 1 (the few-rows form, which the driver gives no prefetch hint) it fetches the panels' next unit toward L2,
// its lines spread evenly over the k of this one, over the panels in turn, as the AVX2 kernel does.
template <bool kNormal, bool kExpanding, int M, int P>
inline void fp8_rows(const uint8_t* unit, int64_t panel_stride, int64_t k_begin, int64_t k_end, const float* a,
                     const __m512 (&m)[P][2], __m512 (&acc)[M][2 * P], float* expanded) {
  static_assert(P == 1 || !kExpanding);
#pragma GCC unroll 2
  for (int64_t k = k_begin; k < k_end; ++k) {
    if constexpr (P > 1) {
      constexpr int64_t kLines = kFp8UnitLines * P;  // the next unit's, over the panels, kLines / 128 a k
      for (int64_t line = k * kLines / kFp8PanelBlock; line < (k + 1) * kLines / kFp8PanelBlock; ++line)
        __builtin_prefetch(unit + kFp8UnitBytes + line % P * panel_stride + line / P * 64, 0, 2);
    }
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const uint8_t* row = unit + p * panel_stride + k * kNr;
      const __m512 w0 = _mm512_mul_ps(kNormal ? fp8_normal16(row) : fp8_any16(row), m[p][0]);
      const __m512 w1 = _mm512_mul_ps(kNormal ? fp8_normal16(row + 16) : fp8_any16(row + 16), m[p][1]);
      if constexpr (kExpanding) {
        _mm512_storeu_ps(expanded + k * kNr, w0);
        _mm512_storeu_ps(expanded + k * kNr + 16, w1);
      }
#pragma GCC unroll 16
      for (int i = 0; i < M; ++i) {
        const __m512 av = _mm512_set1_ps(a[k * kMr + i]);
        acc[i][2 * p] = _mm512_fmadd_ps(av, w0, acc[i][2 * p]);
        acc[i][2 * p + 1] = _mm512_fmadd_ps(av, w1, acc[i][2 * p + 1]);
      }
    }
  }
}

// M rows over P panels (panel p at b + p * panel_stride bytes, its C at c + p * kNr), kc k from unit 0. With
// kExpanding (P = 1) the decoded weights also go to `expanded`, kFp8ExpandedUnitBytes a unit.
template <int M, int P, bool kExpanding = false>
void fp8_tile(int64_t kc, const float* a, const uint8_t* b, int64_t panel_stride, float* c, int64_t ldc,
              bool accumulate, const char* prefetch, int64_t prefetch_bytes, float* expanded = nullptr) {
  __m512 acc[M][2 * P];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < 2 * P; ++j) acc[i][j] = accumulate ? _mm512_loadu_ps(c + i * ldc + j * 16) : _mm512_setzero_ps();
  const int64_t units = (kc + kFp8PanelBlock - 1) / kFp8PanelBlock;
  const int64_t lines_per_unit = prefetch && units > 0 ? ((prefetch_bytes + 63) / 64 + units - 1) / units : 0;
  const char* const prefetch_end = prefetch ? prefetch + prefetch_bytes : prefetch;
  for (int64_t k0 = 0; k0 < kc; k0 += kFp8PanelBlock) {
    const uint8_t* unit = b + k0 / kFp8PanelBlock * kFp8UnitBytes;
    float* const expanded_unit = kExpanding ? expanded + k0 * kNr : nullptr;
    for (int64_t l = 0; l < lines_per_unit && prefetch < prefetch_end; ++l, prefetch += 64)
      __builtin_prefetch(prefetch, 0, 2);
    __m512 m[P][2];
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const float* multipliers = reinterpret_cast<const float*>(unit + p * panel_stride + kFp8PanelBlock * kNr);
      m[p][0] = _mm512_loadu_ps(multipliers);
      m[p][1] = _mm512_loadu_ps(multipliers + 16);
    }
    const int64_t steps = kc - k0 < kFp8PanelBlock ? kc - k0 : kFp8PanelBlock;
    for (int64_t r0 = 0; r0 < steps; r0 += kFp8NormalRows) {
      const int64_t r1 = steps - r0 < kFp8NormalRows ? steps : r0 + kFp8NormalRows;
      if (rows_normal<P>(unit + r0 * kNr, panel_stride, r1 - r0))
        fp8_rows<true, kExpanding, M, P>(unit, panel_stride, r0, r1, a + k0 * kMr, m, acc, expanded_unit);
      else
        fp8_rows<false, kExpanding, M, P>(unit, panel_stride, r0, r1, a + k0 * kMr, m, acc, expanded_unit);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < 2 * P; ++j) _mm512_storeu_ps(c + i * ldc + j * 16, acc[i][j]);
}

// m in 1..kMr picks the instantiation with exactly m rows (P = 1), as gemm_rows does.
template <bool kExpanding, int M = kMr>
void fp8_rows_of(int m, int64_t kc, const float* a, const uint8_t* b, float* c, int64_t ldc, bool accumulate,
                 const char* prefetch, int64_t prefetch_bytes, float* expanded) {
  if constexpr (M >= 1) {
    if (m == M) return fp8_tile<M, 1, kExpanding>(kc, a, b, 0, c, ldc, accumulate, prefetch, prefetch_bytes, expanded);
    return fp8_rows_of<kExpanding, M - 1>(m, kc, a, b, c, ldc, accumulate, prefetch, prefetch_bytes, expanded);
  }
}

void gemm_fp8(int m, int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool acc, const void* pf,
              int64_t pf_bytes) {
  fp8_rows_of<false>(m, kc, static_cast<const float*>(a), static_cast<const uint8_t*>(b), c, ldc, acc,
                     static_cast<const char*>(pf), pf_bytes, nullptr);
}
void gemm_fp8_expanding(int m, int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool acc,
                        const void* pf, int64_t pf_bytes, void* expanded) {
  fp8_rows_of<true>(m, kc, static_cast<const float*>(a), static_cast<const uint8_t*>(b), c, ldc, acc,
                    static_cast<const char*>(pf), pf_bytes, static_cast<float*>(expanded));
}

// 1-3 rows over kFewRowsPanels[m] panels: the decode and few-tokens case (2 * m * P chains: 8, 12 and 12).
void gemm_fp8_few(int m, int64_t kc, const void* a, const void* b, int64_t panel_stride_bytes, float* c, int64_t ldc,
                  bool acc) {
  const auto* ap = static_cast<const float*>(a);
  const auto* bp = static_cast<const uint8_t*>(b);
  if (m == 1) return fp8_tile<1, kFewRowsPanels[1]>(kc, ap, bp, panel_stride_bytes, c, ldc, acc, nullptr, 0);
  if (m == 2) return fp8_tile<2, kFewRowsPanels[2]>(kc, ap, bp, panel_stride_bytes, c, ldc, acc, nullptr, 0);
  return fp8_tile<3, kFewRowsPanels[3]>(kc, ap, bp, panel_stride_bytes, c, ldc, acc, nullptr, 0);
}

