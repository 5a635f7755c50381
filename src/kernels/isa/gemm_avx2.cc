// AVX2+FMA micro-kernels: gemm_f32w_f32_6x16__avx2, gemm_bf16w_f32_6x16__avx2, gemm_q8w_q8_2x16__avx2 (the
// vpmaddubsw idiom), the GGUF formats' gemm_<t>w_f32_4x16__avx2 and their integer-dot twins gemm_<t>w_<act>_2x16__avx2
// (one pair per line of gguf_formats.inc), gemm_mxfp4w_q8_0_2x16__avx2, and the SwiGLU epilogue. Compiled
// with -mavx2 -mfma (and only this file): callers reach it through isa_kernels(), chosen at run time.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/formats/gemm_kernels.h"
#include "kernels/formats/iq_blocks.h"
#include "kernels/formats/gemm_quantized.h"

namespace hymoe::kernels {
namespace {

struct V {
  using vec = __m256;
  using ivec = __m256i;
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
  static vec to_float(ivec v) { return _mm256_cvtepi32_ps(v); }
  static ivec broadcast4(const uint8_t* p) {
    int32_t v;
    __builtin_memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
  }
  // q8 without VNNI: vpmaddubsw multiplies unsigned by signed bytes and saturates its pair sums to int16, so the
  // weights go in as |w| (<= 127) and their sign moves onto the activations (vpsignb): each pair sum is at most
  // 2 * 127 * 127 < 2^15. vpmaddwd by ones widens the pairs to int32.
  struct q8w {
    __m256i magnitude, sign;
  };
  static q8w q8_weights(const uint8_t* p) { return q8_weights_of(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static q8w q8_weights_of(__m256i stored) {  // stored = w + 128
    const __m256i w = _mm256_xor_si256(stored, _mm256_set1_epi8(static_cast<char>(0x80)));
    return {_mm256_abs_epi8(w), w};
  }
  static ivec q8_start(const uint8_t*) { return _mm256_setzero_si256(); }
  static ivec q8_dot4(ivec acc, q8w w, ivec x) {
    const __m256i pairs = _mm256_maddubs_epi16(w.magnitude, _mm256_sign_epi8(x, w.sign));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
  // GGUF panel codes (gemm_gguf-inl.h): a k row of 16 columns.
  static void codes_s8(const uint8_t* p, ivec& lo, ivec& hi) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    lo = _mm256_cvtepi8_epi32(bytes);
    hi = _mm256_cvtepi8_epi32(_mm_srli_si128(bytes, 8));
  }
  static void codes_u4(const uint8_t* p, ivec& lo, ivec& hi) {
    const __m256i wide = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    lo = _mm256_and_si256(wide, _mm256_set1_epi32(15));
    hi = _mm256_srli_epi32(wide, 4);
  }
  // The IQ4 types: codes_u4's nibbles (columns 0-7 low, 8-15 high) as indices into 16 int8 values (vpshufb).
  static void codes_lookup4(const uint8_t* p, const int8_t* values, ivec& lo, ivec& hi) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)), low4 = _mm_set1_epi8(15);
    const __m128i idx = _mm_unpacklo_epi64(_mm_and_si128(bytes, low4), _mm_and_si128(_mm_srli_epi16(bytes, 4), low4));
    const __m128i v = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)), idx);
    lo = _mm256_cvtepi8_epi32(v);
    hi = _mm256_cvtepi8_epi32(_mm_srli_si128(v, 8));
  }
  // 5- and 6-bit codes: the nibbles, then B high bits per column (2 or 4 bytes) moved over bit 4 lane by lane.
  template <int B>
  static void codes_u4_high(const uint8_t* p, ivec& lo, ivec& hi) {
    codes_u4(p, lo, hi);
    uint32_t plane = 0;
    __builtin_memcpy(&plane, p + 8, 2 * B);
    const __m256i bits = _mm256_set1_epi32(static_cast<int>(plane)), mask = _mm256_set1_epi32((1 << B) - 1);
    const __m256i shift_lo = _mm256_setr_epi32(0, B, 2 * B, 3 * B, 4 * B, 5 * B, 6 * B, 7 * B);
    const __m256i shift_hi = _mm256_add_epi32(shift_lo, _mm256_set1_epi32(8 * B));
    lo = _mm256_or_si256(lo, _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(bits, shift_lo), mask), 4));
    hi = _mm256_or_si256(hi, _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(bits, shift_hi), mask), 4));
  }
  static ivec sub_i32(ivec v, int x) { return _mm256_sub_epi32(v, _mm256_set1_epi32(x)); }
  // GGUF int8 panels (gemm_gguf_int8-inl.h): unsigned codes u <= 63 times int8 activations by vpmaddubsw, whose
  // pair sums (<= 2 * 63 * 128) cannot saturate; vpmaddwd by ones widens them to int32.
  static ivec load_bytes(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static ivec and_bytes(ivec v, int mask) { return _mm256_and_si256(v, _mm256_set1_epi8(static_cast<char>(mask))); }
  static ivec or_bytes(ivec a, ivec b) { return _mm256_or_si256(a, b); }
  template <int S>
  static ivec shift_bytes(ivec v) {
    if constexpr (S > 0) return _mm256_slli_epi16(v, S);
    else if constexpr (S < 0) return _mm256_srli_epi16(v, -S);
    else return v;
  }
  static ivec u_dot4(ivec acc, ivec u, ivec x) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), _mm256_set1_epi16(1)));
  }
  static ivec set1_i32(int v) { return _mm256_set1_epi32(v); }
  static constexpr bool kPairSums = true;
  static ivec pair_sums(ivec u, ivec x) { return _mm256_maddubs_epi16(u, x); }
  static ivec add_i16(ivec a, ivec b) { return _mm256_add_epi16(a, b); }
  // The super-block form (Q2_K, TQ1_0, TQ2_0): kWidth bytes zero-extended to int32 lanes, int32 masks and
  // shifts, and acc plus vpmaddwd's sums of adjacent int16 products.
  static ivec widen_u8(const uint8_t* p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  // The f16 factors (GgufPanelLayout::half_factors): kWidth f16 values widened, exactly (F16C).
  static vec load_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  // The compact factors' signed scales: kWidth bytes sign-extended to int32 lanes.
  static ivec widen_i8(const uint8_t* p) {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  static ivec and_i32(ivec v, int mask) { return _mm256_and_si256(v, _mm256_set1_epi32(mask)); }
  // The compact factors' integer scale step: acc + a * b, int32 lanes (vpmulld, vpaddd).
  static ivec mul_add_i32(ivec acc, ivec a, ivec b) { return _mm256_add_epi32(acc, _mm256_mullo_epi32(a, b)); }
  template <int S>
  static ivec shift_i32(ivec v) {
    if constexpr (S > 0) return _mm256_slli_epi32(v, S);
    else return _mm256_srli_epi32(v, -S);
  }
  static ivec madd_i16(ivec acc, ivec a, ivec b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }
  // MXFP4: the nibble lookup (vpshufb within each 128-bit lane) and the E8M0 exponents as f32 bits
  // max(e << 23, 2^-127's bits 0x400000).
  static ivec table16(const uint8_t* t) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t)));
  }
  static ivec lookup16(ivec table, ivec idx) { return _mm256_shuffle_epi8(table, idx); }
  static vec e8m0_scales(const uint8_t* p) {
    const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_max_epi32(_mm256_slli_epi32(e, 23), _mm256_set1_epi32(0x400000)));
  }
};

constexpr int kMr = 6;  // 6 rows x 2 ymm = 12 accumulators (see the register budget in the -inl header)
constexpr int kQ8Mr = 2;  // 2 rows x 2 ymm x (float + int32) = 8 accumulators, 4 weight vectors, 4 temporaries
constexpr int kGgufMr = 4;  // see the register budget in gemm_gguf-inl.h
constexpr int kIntMr = 2;   // see the register budget in gemm_gguf_int8-inl.h

#include "kernels/isa/gemm_microkernel-inl.h"
#include "kernels/isa/gemm_gguf-inl.h"
#include "kernels/isa/gemm_gguf_int8-inl.h"
#include "kernels/isa/gemm_grid_row_avx2-inl.h"

static_assert(kNr == 16);

const GemmFormat kF32{WeightFormat::kF32, "gemm_f32w_f32_6x16__avx2", kMr, kNr, pack_activations_f32,
                     gemm_format_widen<float>, gemm_format_widen_few<float>, 3};
const GemmFormat kBf16Widen{WeightFormat::kBf16Widen, "gemm_bf16w_f32_6x16__avx2", kMr, kNr, pack_activations_f32,
                           gemm_format_widen<uint16_t>, gemm_format_widen_few<uint16_t>, 2};
const GemmFormat kQ8{WeightFormat::kQ8Block32, "gemm_q8w_q8_2x16__avx2", kQ8Mr, kNr, pack_activations_q8__avx2,
                    gemm_format_q8, gemm_format_q8_few, 1};

}  // namespace

// Every GGUF format's exact and int8 kernels, one pair per line of gguf_formats.inc (gemm_kernels.h names them).
#define HYMOE_GGUF_BLOCK(T, t, type, unit, bits, bias, int8_bias, offsets, act, values, int8_form) \
  const GemmFormat gemm_##t##w_f32_4x16__avx2{WeightFormat::kGgml##T, "gemm_" #t "w_f32_4x16__avx2", kGgufMr, kNr,  \
                                              pack_activations_f32, gemm_format_gguf<WeightFormat::kGgml##T>,      \
                                              gemm_format_gguf_few<WeightFormat::kGgml##T>, 1,                    \
                                              gguf_expanding<WeightFormat::kGgml##T>(),                            \
                                              gguf_expanded<WeightFormat::kGgml##T>(),                             \
                                              gguf_expanded_unit_bytes<WeightFormat::kGgml##T>()};                 \
  const GemmFormat gemm_##t##w_##act##_2x16__avx2{                                                               \
      WeightFormat::kGgml##T##I8, "gemm_" #t "w_" #act "_2x16__avx2", kIntRows<WeightFormat::kGgml##T##I8>, kNr,  \
      int8_pack_a<WeightFormat::kGgml##T##I8>(), gemm_format_gguf_int8<WeightFormat::kGgml##T##I8>,              \
      int8_few<WeightFormat::kGgml##T##I8>(), int8_few_rows<WeightFormat::kGgml##T##I8>(),                     \
      int8_expanding<WeightFormat::kGgml##T##I8>(),                                                               \
      int8_expanded<WeightFormat::kGgml##T##I8>(), int8_expanded_unit_bytes<WeightFormat::kGgml##T##I8>()};
#include "kernels/formats/gguf_formats.inc"
#undef HYMOE_GGUF_BLOCK
const GemmFormat gemm_mxfp4w_q8_0_2x16__avx2{WeightFormat::kMxfp4Block32I8, "gemm_mxfp4w_q8_0_2x16__avx2", kIntMr, kNr,
                                             int8_pack_a<WeightFormat::kMxfp4Block32I8>(),
                                             gemm_format_gguf_int8<WeightFormat::kMxfp4Block32I8>,
                                             gemm_format_gguf_int8_few<WeightFormat::kMxfp4Block32I8>, 1};

namespace {

constexpr const GemmFormat* kFormats[] = {
    &kF32, &kBf16Widen, &kQ8, &kGemmFp8wF32Avx2, &kGemmMxfp4wF32Avx2, &gemm_mxfp4w_q8_0_2x16__avx2,
#define HYMOE_GGUF_BLOCK(T, t, type, unit, bits, bias, int8_bias, offsets, act, values, int8_form) \
  &gemm_##t##w_f32_4x16__avx2, &gemm_##t##w_##act##_2x16__avx2,
#include "kernels/formats/gguf_formats.inc"
#undef HYMOE_GGUF_BLOCK
};
const IsaKernels kKernels{Isa::kAvx2, kMr, kNr, gemm_f32w, gemm_bf16w, gemm_f32w_few, gemm_bf16w_few, swiglu,
                          dot_rows,
                          "gemm_f32w_f32_6x16__avx2", "gemm_bf16w_f32_6x16__avx2", fma_probe, sum_probe,
                          sum_probe_streams, kFormats, nullptr, int8_dot_probe};

}  // namespace

const IsaKernels& isa_kernels_avx2() { return kKernels; }

}  // namespace hymoe::kernels
