// The packing of activations into the integer kernels' units (gemm_kernels.h, ActivationUnitLayout): the GGUF
// int8 formats (q8_0, q8_1, q8_K) and hymoe's q8 blocks, written once over the block quantizer so the ISA-free
// references (gemm_gguf_int8.cc, gemm_formats.cc) and the AVX2 packers (activation_quantize_avx2.cc) lay out the
// same bytes. Per unit of kUnit k and row: its int8 codes, the f32 scale of its block, and kSumFactor times the sum
// of its codes (GGUF: the sum; q8: -128 times it, the correction of its u8 weights); rows past `rows` and k past `k`
// zero. Included inside namespace hymoe::kernels by exactly those units; it depends on nothing but
// ActivationUnitLayout and the quantizer it is given.

// Quantize(x, n, q, d): one block (kBlock values, x[n..) taken as 0), e.g. quantize_ggml_q8_0_block; with
// kStoreS, Quantize(x, n, q, d, s) (quantize_ggml_q8_1_block) and the block's s in place of the sum (kUnit ==
// kBlock).
template <int kUnit, int kBlock, int kSumFactor, bool kStoreS = false, typename Quantize>
void pack_activation_units(const float* a, int64_t lda, const int64_t* row_index, int rows, int64_t k, int mr,
                           void* out, Quantize&& quantize) {
  static_assert(kBlock % kUnit == 0 && kUnit % 4 == 0 && (!kStoreS || kUnit == kBlock));
  uint8_t* dst = static_cast<uint8_t*>(out);
  constexpr int kGroups = kUnit / 4;
  const ActivationUnitLayout layout{kUnit, mr};
  const int64_t units = (k + kUnit - 1) / kUnit, unit_bytes = layout.bytes();
  std::memset(dst, 0, static_cast<size_t>(units * unit_bytes));
  alignas(64) int8_t q[kBlock];
  for (int i = 0; i < rows; ++i) {
    const float* row = a + (row_index ? row_index[i] : i) * lda;
    for (int64_t b0 = 0; b0 < k; b0 += kBlock) {
      const int n = static_cast<int>(std::min<int64_t>(kBlock, k - b0));
      float d, s = 0.0f;
      if constexpr (kStoreS) quantize(row + b0, n, q, &d, &s);
      else quantize(row + b0, n, q, &d);
      for (int64_t u = b0 / kUnit; u < std::min(units, (b0 + kBlock) / kUnit); ++u) {
        uint8_t* unit = dst + u * unit_bytes;
        const int8_t* qu = q + (u * kUnit - b0);
        int32_t sum = 0;
        for (int kk = 0; kk < kUnit; ++kk) sum += qu[kk];
        sum *= kSumFactor;
        for (int g = 0; g < kGroups; ++g) std::memcpy(unit + layout.codes(g, i), qu + 4 * g, 4);
        std::memcpy(unit + layout.scale(i), &d, sizeof d);
        if constexpr (kStoreS) std::memcpy(unit + layout.sum(i), &s, sizeof s);
        else std::memcpy(unit + layout.sum(i), &sum, sizeof sum);
      }
    }
  }
}
