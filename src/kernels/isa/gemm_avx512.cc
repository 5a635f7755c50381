// AVX-512F micro-kernels: gemm_f32w_f32_12x32__avx512, gemm_bf16w_f32_12x32__avx512, gemm_q8w_q8_6x32__avx512
// (the vpmaddubsw idiom), the SwiGLU epilogue, and gemm_fp8w_f32_12x32__avx512 (exact fp8, which every AVX-512
// level runs: gemm_fp8_avx512-inl.h).
// Compiled with -mavx512f -mavx512bw -mavx512vl -mfma (and only this file); always built, run only where
// detect_best_isa() found AVX-512.
#include <immintrin.h>

#include "kernels/formats/gemm_kernels.h"
#include "kernels/formats/gemm_quantized.h"  // fp8 / mxfp4: the AVX2 kernels (see there why)

namespace hymoe::kernels {
namespace {

#include "kernels/isa/avx512_vec-inl.h"

struct V : V512 {};

constexpr int kMr = 12;  // 12 rows x 2 zmm = 24 accumulators (see the register budget in the -inl header)
constexpr int kQ8Mr = 6;  // 6 rows x 2 zmm x (float + int32) = 24 accumulators

#include "kernels/isa/gemm_microkernel-inl.h"
#include "kernels/isa/gemm_fp8_avx512-inl.h"

const GemmFormat kF32{WeightFormat::kF32, "gemm_f32w_f32_12x32__avx512", kMr, kNr, pack_activations_f32,
                     gemm_format_widen<float>, gemm_format_widen_few<float>, 3};
const GemmFormat kBf16Widen{WeightFormat::kBf16Widen, "gemm_bf16w_f32_12x32__avx512", kMr, kNr, pack_activations_f32,
                           gemm_format_widen<uint16_t>, gemm_format_widen_few<uint16_t>, 2};
const GemmFormat kQ8{WeightFormat::kQ8Block32, "gemm_q8w_q8_6x32__avx512", kQ8Mr, kNr, pack_activations_q8__avx2,
                    gemm_format_q8, gemm_format_q8_few, 1};

// The GGUF formats run the AVX2 kernels (4 x 16 tiles; the packed FFN takes each format's own panel width): they
// are f32 FMA chains after an integer decode, and on Zen 4 a 512-bit f32 FMA issues as two 256-bit halves, so
// 512-bit versions would give no more FMA throughput there; wider decode would help Intel cores, not yet written.
constexpr const GemmFormat* kFormats[] = {
    &kF32, &kBf16Widen, &kQ8, &kGemmFp8wF32Avx512, &kGemmMxfp4wF32Avx2, &gemm_mxfp4w_q8_0_2x16__avx2,
#define HYMOE_GGUF_BLOCK(T, t, type, unit, bits, bias, int8_bias, offsets, act, values, int8_form) \
  &gemm_##t##w_f32_4x16__avx2, &gemm_##t##w_##act##_2x16__avx2,
#include "kernels/formats/gguf_formats.inc"
#undef HYMOE_GGUF_BLOCK
};
const IsaKernels kKernels{Isa::kAvx512, kMr, kNr, gemm_f32w, gemm_bf16w, gemm_f32w_few, gemm_bf16w_few, swiglu,
                          dot_rows,
                          "gemm_f32w_f32_12x32__avx512", "gemm_bf16w_f32_12x32__avx512", fma_probe, sum_probe,
                          sum_probe_streams, kFormats, nullptr, int8_dot_probe};

}  // namespace

// The expanded blocks run on the f32 kernel: the same chain on the same weights.
const GemmFormat kGemmFp8wF32Avx512{WeightFormat::kFp8Block128, "gemm_fp8w_f32_12x32__avx512", kMr, kNr,
                                    pack_activations_f32, gemm_fp8, gemm_fp8_few, 3,
                                    gemm_fp8_expanding, gemm_format_widen<float>, kFp8ExpandedUnitBytes};

const IsaKernels& isa_kernels_avx512() { return kKernels; }

}  // namespace hymoe::kernels
