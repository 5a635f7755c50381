// The compact panel formats of block-quantized checkpoint weights (gemm_kernels.h, WeightFormat kFp8Block128 and
// kMxfp4Block32): their packing from a QuantizedMatrix view (never through bf16 or f32), the scalar references of
// their micro-kernels, and the AVX2 kernels. The formats keep the checkpoint's codes and decode them exactly in
// registers, then run the f32 FMA chain: exact weights, activations not rounded (docs/kernels.md, "Formats").
#pragma once

#include "kernels/formats/gemm_kernels.h"

namespace hymoe::kernels {

// One panel's k unit of the fp8 format: (128, NR) u8 e4m3 codes, then NR f32 multipliers, each the checkpoint's
// scale of the column's block times 2^8: the kernels decode a code to the f16 bits
// ((b & 0x80) << 8 | (b & 0x7f) << 7), whose value is fp8(b) * 2^-8 (subnormals included: the exponent bias
// differs by 8), so f16(b) * multiplier is fp8(b) * scale rounded once, the reference's value to the bit.
// The fp8 dot format (kFp8Block128Dot) holds the same codes and multipliers with the codes in k-pair rows (64, 2 NR):
// its kernels decode a code to the bf16 bits of fp8(b) * 2^-8 (exact: every e4m3 value, subnormals included, is a
// normal bf16 value once scaled by 2^-8), take activations rounded to bf16, and per block of 128 k run one
// vdpbf16ps chain in k-pair order, then c = fma(chain, multiplier, c) (the block's first: chain * multiplier).
// The products are exact; the rounding is the activations' (2^-9 relative) and the f32 chain's.
inline constexpr int kFp8PanelBlock = 128;
// One k unit of the mxfp4 format: (16, NR) u8 code pairs, then NR u8 E8M0 scales (as stored).
inline constexpr int kMxfp4PanelGroup = 32;

// Whether a panel format runs the quantized view natively, and which (into *format): fp8 blocks whose
// k extent is a multiple of 128 (every 128-k unit lies in one block; block_n is free), every mxfp4 view, and
// GGUF's MXFP4 blocks (a kGgml view of type 39: the same codes and scales, another byte order).
bool quantized_panel_format(const MatrixView& b, WeightFormat* format);
// Whether pack_matrix and pack_gate_up pack the view here (pack_quantized_*): fp8 and mxfp4 views, GGUF MXFP4 ones.
bool packs_as_quantized(const MatrixView& b);

// Packs a quantized view (kFp8Block, kMxfp4 or GGUF MXFP4) into its panel format (an fp8 view: kFp8Block128 or
// kFp8Block128Dot); a gate/up pair interleaved as
// pack_gate_up does. Codes the format cannot run fail with an error naming the value and its place: fp8 NaN codes
// (0x7f, 0xff; the checkpoints have none), non-finite fp8 scales or scales times 2^8 past float's range, and E8M0
// scale 255 (NaN).
PackedMatrix pack_quantized_matrix(const MatrixView& b, int nr, WeightFormat format);
PackedMatrix pack_quantized_gate_up(const MatrixView& gate, const MatrixView& up, int nr, WeightFormat format);

// References of the two micro-kernels on their packed operands (a: f32 activation micro-panel (kc, mr) from k 0,
// b: one weight panel of nr columns from unit 0): the same exact weights (each decoded by the scalar decoders of
// quant_decode.h), double accumulation.
void gemm_fp8w_f32__ref(int m, int mr, int nr, int64_t kc, const void* a, const void* b, float* c, int64_t ldc,
                        bool accumulate);
void gemm_mxfp4w_f32__ref(int m, int mr, int nr, int64_t kc, const void* a, const void* b, float* c, int64_t ldc,
                          bool accumulate);
// Reference of the fp8 dot micro-kernels (a: pack_activations_bf16_pairs128's micro-panel, b: one kFp8Block128Dot
// panel): the bf16-rounded activations times the exact weights, double accumulation.
void gemm_fp8w_bf16__ref(int m, int mr, int nr, int64_t kc, const void* a, const void* b, float* c, int64_t ldc,
                         bool accumulate);
// The fp8 dot format's activation packing: pack_activations_bf16_pairs, zero up to a whole unit of 128 k.
void pack_activations_bf16_pairs128(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k, int mr,
                                    void* out);
// The same with AVX2's rounding, to the same bits (activation_quantize_avx2.cc): what the fp8 dot format packs with.
void pack_activations_bf16_pairs128__avx2(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k,
                                          int mr, void* out);
// Zeros a micro-panel of mr rows' bf16 pairs from k's last pair up to a whole unit of 128 k.
void zero_pairs_to_fp8_unit(int64_t k, int mr, void* out);

// The AVX2 (+F16C) kernels of the two formats (gemm_quantized_avx2.cc). The AVX-512 IsaKernels point at the mxfp4
// one too: exact mxfp4 is bound by the decode and the f32 FMA chain, and Zen 4 runs a 512-bit f32 FMA as two
// 256-bit halves, so a 512-bit version would add throughput only on Intel's cores (and AVX-512 levels run mxfp4
// on its int8 twin unless asked for exact).
extern const GemmFormat kGemmFp8wF32Avx2;
extern const GemmFormat kGemmMxfp4wF32Avx2;
// The exact fp8 format on every AVX-512 level (gemm_fp8_avx512-inl.h, exported by gemm_avx512.cc): 12 x 32 tiles,
// the bits of the AVX2 kernel. fp8's default on AVX-512 without AVX512_BF16, and its `exact` compute everywhere.
extern const GemmFormat kGemmFp8wF32Avx512;

}  // namespace hymoe::kernels
