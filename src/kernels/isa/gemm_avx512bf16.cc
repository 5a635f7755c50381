// AVX-512 with AVX512_VNNI and AVX512_BF16: gemm_bf16w_bf16_12x32__avx512bf16 (vdpbf16ps on bf16 k pairs),
// gemm_fp8w_bf16_10x32__avx512bf16 (fp8 codes decoded to bf16 in registers, then vdpbf16ps) and
// gemm_q8w_q8_6x32__avx512bf16 (vpdpbusd), beside the AVX-512F kernels built again with these flags. Compiled with
// -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mavx512bf16 -mfma (and only this file); run only where
// detect_best_isa() found AVX512_BF16.
#include <immintrin.h>

#include "kernels/formats/gemm_kernels.h"
#include "kernels/formats/gemm_quantized.h"  // fp8 / mxfp4: the AVX2 kernels (see there why)

namespace hymoe::kernels {
namespace {

#include "kernels/isa/avx512_vec-inl.h"

// With AVX512_BF16: vdpbf16ps adds both products of each lane's k pair to the f32 accumulator.
struct V : V512Vnni {
  using bvec = __m512bh;
  static bvec load_pairs(const void* p) { return reinterpret_cast<bvec>(_mm512_loadu_si512(p)); }
  static void store_pairs(void* p, bvec v) { _mm512_storeu_si512(p, reinterpret_cast<__m512i>(v)); }
  static bvec broadcast_pair(const uint32_t* p) { return reinterpret_cast<bvec>(_mm512_set1_epi32(static_cast<int>(*p))); }
  static vec dot_bf16(vec acc, bvec a, bvec b) { return _mm512_dpbf16_ps(acc, a, b); }
  // The fp8 dot format's decode (gemm_fp8_dot-inl.h): a k-pair row of 64 codes, word i of the row holding codes
  // 2i and 2i + 1, gives two vectors of 16 k pairs, half H from the words' byte H, each code as the bf16 bits of
  // fp8(b) * 2^-8. With the code in a word's high byte, x = word (H = 1) or word << 8 (H = 0), an arithmetic
  // shift by 4 puts magnitude bits 0-6 on bf16's bits 4-10 and copies the sign into bit 15, so
  // ((x >>a 4) & 0x87F0) | (112 << 7) is the code with exponent field e >= 1 (2^(e - 7) * 2^-8 is bf16 exponent
  // e + 112, and 112 + e = 112 | e for e < 16: one vpternlogd). Codes with e = 0 (zero, subnormal m * 2^-9) are
  // rare in real weights (below 2^-6 of the largest e4m3 value): the row is tested for them once (vptestnmb), and
  // only a row that holds one looks them up by m in kFp8SubnormalBf16 (vpermw), under the mask of those lanes. Per
  // 64 codes: 7 vector ops and a mask test, no shuffle.
  struct fp8row {
    __m512i codes;
    bool has_low;  // some code of the row has exponent field 0
  };
  static fp8row fp8_row(const uint8_t* p) {
    const __m512i codes = _mm512_loadu_si512(p);
    return {codes, _mm512_testn_epi8_mask(codes, _mm512_set1_epi8(0x78)) != 0};
  }
  template <int H>
  static bvec fp8_pairs(const fp8row& row) {
    const __m512i x = H == 0 ? _mm512_slli_epi16(row.codes, 8) : row.codes;
    // (A & B) | C: vpternlogd with the truth table 0xEA.
    __m512i bits = _mm512_ternarylogic_epi32(_mm512_srai_epi16(x, 4), _mm512_set1_epi16(static_cast<short>(0x87F0)),
                                             _mm512_set1_epi16(112 << 7), 0xEA);
    if (__builtin_expect(row.has_low, 0)) {
      const __mmask32 low = _mm512_testn_epi16_mask(x, _mm512_set1_epi16(0x7800));
      const __m512i looked_up = _mm512_permutexvar_epi16(_mm512_srli_epi16(x, 8), _mm512_loadu_si512(kFp8SubnormalBf16));
      // looked_up | (x & 0x8000): vpternlogd with the truth table A | (B & C).
      bits = _mm512_mask_mov_epi16(bits, low, _mm512_ternarylogic_epi32(looked_up, x, _mm512_set1_epi16(static_cast<short>(0x8000)), 0xF8));
    }
    return reinterpret_cast<bvec>(bits);
  }
  // bf16 bits of m * 2^-9 * 2^-8 for the e = 0 codes' mantissa m (0 for 0); vpermw reads 32 entries.
  alignas(64) static constexpr uint16_t kFp8SubnormalBf16[32] = {0x0000, 0x3700, 0x3780, 0x37C0,
                                                                 0x3800, 0x3820, 0x3840, 0x3860};
};

constexpr int kMr = 12;  // 12 rows x 2 zmm = 24 accumulators (see the register budget in the -inl header)
constexpr int kQ8Mr = 6;  // 6 rows x 2 zmm x (float + int32) = 24 accumulators
constexpr int kFp8Mr = 10;  // 10 rows x 2 zmm = 20 chains (see the register budget in gemm_fp8_dot-inl.h)

#include "kernels/isa/gemm_microkernel-inl.h"
#include "kernels/isa/gemm_fp8_dot-inl.h"

static_assert(kNr == 32);

const GemmFormat kF32{WeightFormat::kF32, "gemm_f32w_f32_12x32__avx512bf16", kMr, kNr, pack_activations_f32,
                     gemm_format_widen<float>, gemm_format_widen_few<float>, 3};
const GemmFormat kBf16Widen{WeightFormat::kBf16Widen, "gemm_bf16w_f32_12x32__avx512bf16", kMr, kNr, pack_activations_f32,
                           gemm_format_widen<uint16_t>, gemm_format_widen_few<uint16_t>, 2};
const GemmFormat kQ8{WeightFormat::kQ8Block32, "gemm_q8w_q8_6x32__avx512bf16", kQ8Mr, kNr, pack_activations_q8__avx2,
                    gemm_format_q8, gemm_format_q8_few, 1};

const GemmFormat kBf16Dot{WeightFormat::kBf16Dot, "gemm_bf16w_bf16_12x32__avx512bf16", kMr, kNr,
                         pack_activations_bf16_pairs__avx2, gemm_format_bf16_dot<>, gemm_format_bf16_dot_few<>, 3};
const GemmFormat kFp8Dot{WeightFormat::kFp8Block128Dot, "gemm_fp8w_bf16_10x32__avx512bf16", kFp8Mr, kNr,
                        pack_activations_bf16_pairs128__avx2, gemm_format_fp8_dot<>, gemm_format_fp8_dot_few, 3,
                        gemm_format_fp8_dot_expanding, gemm_format_fp8_dot<Fp8Operand::kExpanded>,
                        kFp8DotExpandedUnit, 2};

// The exact GGUF formats run the AVX2 kernels (see gemm_avx512.cc); their int8 twins the AVX512_VNNI ones.
constexpr const GemmFormat* kFormats[] = {
    &kF32, &kBf16Widen, &kBf16Dot, &kQ8, &kGemmFp8wF32Avx512, &kGemmMxfp4wF32Avx2,
    &gemm_mxfp4w_q8_0_6x32__avx512vnni, &kFp8Dot,
#define HYMOE_GGUF_BLOCK(T, t, type, unit, bits, bias, int8_bias, offsets, act, values, int8_form) \
  &gemm_##t##w_f32_4x16__avx2, &HYMOE_VNNI_INT8(t, act, int8_form),
#include "kernels/formats/gguf_formats.inc"
#undef HYMOE_GGUF_BLOCK
};
const IsaKernels kKernels{Isa::kAvx512Bf16, kMr, kNr, gemm_f32w, gemm_bf16w, gemm_f32w_few, gemm_bf16w_few, swiglu,
                          dot_rows,
                          "gemm_f32w_f32_12x32__avx512bf16", "gemm_bf16w_f32_12x32__avx512bf16", fma_probe, sum_probe,
                          sum_probe_streams, kFormats, bf16_dot_probe<>, int8_dot_probe};

}  // namespace

const IsaKernels& isa_kernels_avx512bf16() { return kKernels; }

}  // namespace hymoe::kernels
