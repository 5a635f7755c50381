// The grid types' one-row int8 kernel (the decode form: m = 1 over kFewRowsPanels[1] panels), with AVX2 intrinsics;
// included by the AVX2 and AVX-512 units after gemm_gguf_int8-inl.h, inside the same anonymous namespace (the
// software model of tests/kernels/emulated_isa_test.cc keeps the expanding form instead).
//
// At one row nothing amortizes grid_int8_rows' expansion into the tile layout, which then bounds decode. This kernel
// skips it: per column and 32 values, the grid entries' magnitude bytes come from their table words (four scalar
// loads, or a gather for IQ3's eight 4-byte words), the signs move onto the activations (vpsignb: the byte masks of
// 7-bit fields from a table, explicit sign bytes spread by a shuffle) and vpmaddubsw / vpmaddwd give eight int32
// partial sums (|magnitude| <= 62, so no pair sum saturates); a horizontal
// sum per sub-block then gives the exact integer dot of the sub-block's codes and the activations, the same integer
// the tile kernels reach. Then, per sub-block in increasing k, their float step: c = fma(float(dot), scale * d_a,
// c) with the same scale (grid_block_scales) and d_a. So the bits are the tile kernels' (tested, few-rows calls
// against one-row calls of every format).

// 32 bytes: byte i set to all ones where bit i % 8 of byte i / 8 of `signs` is set, else to 1 (vpsignb's operand).
inline __m256i grid_sign_bytes(uint32_t signs) {
  const __m256i select = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(signs)), select);
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
  return _mm256_or_si256(set, _mm256_set1_epi8(1));
}

// vpsignb's operand from four 7-bit sign fields (bits 0-6, 7-13, 14-20, 21-27 of `fields`): their byte masks.
inline __m256i grid_sign7_bytes(uint32_t f0, uint32_t f1, uint32_t f2, uint32_t f3) {
  const __m256i masks = _mm256_setr_epi64x(
      static_cast<int64_t>(kSign7ByteMasks.m[f0 & 127]), static_cast<int64_t>(kSign7ByteMasks.m[f1 & 127]),
      static_cast<int64_t>(kSign7ByteMasks.m[f2 & 127]), static_cast<int64_t>(kSign7ByteMasks.m[f3 & 127]));
  return _mm256_or_si256(masks, _mm256_set1_epi8(1));
}

// Chunk q (values 32 q .. 32 q + 31) of one block of a grid type: the multiplier bytes (unsigned) and vpsignb's
// operand for the activations.
template <uint32_t kType>
inline void grid_chunk(const uint8_t* b, int q, __m256i& magnitude, __m256i& sign) {
  const uint64_t* const table64 = kType == 16 ? kIq2XxsMagnitudes.u : kType == 17 ? kIq2XsMagnitudes.u
                                  : kType == 22 ? kIq2SMagnitudes.u : kIq1SCodes.u;
  // Four table words by scalar loads (a vpgatherqq measured slower here: 3.9 against 3.3 ms for IQ2_XXS).
  auto words4 = [&](uint32_t i0, uint32_t i1, uint32_t i2, uint32_t i3) {
    return _mm256_setr_epi64x(static_cast<int64_t>(table64[i0]), static_cast<int64_t>(table64[i1]),
                              static_cast<int64_t>(table64[i2]), static_cast<int64_t>(table64[i3]));
  };
  if constexpr (kType == 16) {  // IQ2_XXS: 4 groups of 8, 4 index bytes, four 7-bit sign fields
    uint32_t indices, aux;
    std::memcpy(&indices, b + 2 + 8 * q, 4);
    std::memcpy(&aux, b + 6 + 8 * q, 4);
    magnitude = words4(indices & 255, (indices >> 8) & 255, (indices >> 16) & 255, indices >> 24);
    sign = grid_sign7_bytes(aux, aux >> 7, aux >> 14, aux >> 21);
  } else if constexpr (kType == 17) {  // IQ2_XS: 9-bit index and 7 sign bits a group
    uint16_t qs[4];
    std::memcpy(qs, b + 2 + 8 * q, 8);
    magnitude = words4(qs[0] & 511u, qs[1] & 511u, qs[2] & 511u, qs[3] & 511u);
    sign = grid_sign7_bytes(qs[0] >> 9, qs[1] >> 9, qs[2] >> 9, qs[3] >> 9);
  } else if constexpr (kType == 22) {  // IQ2_S: 10-bit indices, explicit sign bytes
    const uint8_t* low = b + 2 + 4 * q;
    const uint32_t high = b[66 + q];
    magnitude = words4(low[0] | (high & 3) << 8, low[1] | (high >> 2 & 3) << 8, low[2] | (high >> 4 & 3) << 8,
                       low[3] | (high >> 6) << 8);
    uint32_t signs;
    std::memcpy(&signs, b + 34 + 4 * q, 4);
    sign = grid_sign_bytes(signs);
  } else if constexpr (kType == 18) {  // IQ3_XXS: 8 groups of 4, index bytes, four 7-bit sign fields
    const __m256i index = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 2 + 8 * q)));
    uint32_t aux;
    std::memcpy(&aux, b + 66 + 4 * q, 4);
    magnitude = _mm256_i32gather_epi32(reinterpret_cast<const int*>(kIq3XxsMagnitudes.u), index, 4);
    sign = grid_sign7_bytes(aux, aux >> 7, aux >> 14, aux >> 21);
  } else if constexpr (kType == 21) {  // IQ3_S: 9-bit indices (the ninth bits in one byte), explicit sign bytes
    const __m256i high = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(b[66 + q]), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
        _mm256_set1_epi32(1));
    const __m256i index = _mm256_or_si256(
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 2 + 8 * q))),
        _mm256_slli_epi32(high, 8));
    magnitude = _mm256_i32gather_epi32(reinterpret_cast<const int*>(kIq3SMagnitudes.u), index, 4);
    uint32_t signs;
    std::memcpy(&signs, b + 74 + 4 * q, 4);
    sign = grid_sign_bytes(signs);
  } else {  // the IQ1 types: signed codes 8 g + 1, less 2 where the delta is -1/8; |code| and the code's sign
    __m256i minus;  // per group of 8: all ones where its delta is negative
    __m256i words;
    if constexpr (kType == 19) {
      const uint8_t* low = b + 2 + 4 * q;
      uint16_t qh;
      std::memcpy(&qh, b + 34 + 2 * q, 2);
      words = words4(low[0] | (qh & 7u) << 8, low[1] | (qh >> 3 & 7u) << 8, low[2] | (qh >> 6 & 7u) << 8,
                     low[3] | (qh >> 9 & 7u) << 8);
      minus = _mm256_set1_epi64x(-static_cast<int64_t>(qh >> 15));
    } else {
      const uint8_t* low = b + 4 * q;
      uint16_t qh;
      std::memcpy(&qh, b + 32 + 2 * q, 2);
      words = words4(low[0] | (qh & 7u) << 8, low[1] | (qh >> 4 & 7u) << 8, low[2] | (qh >> 8 & 7u) << 8,
                     low[3] | (qh >> 12 & 7u) << 8);
      const __m128i nibbles = _mm_srlv_epi32(_mm_set1_epi32(qh), _mm_setr_epi32(0, 4, 8, 12));
      const __m128i negative = _mm_cmpeq_epi32(_mm_and_si128(nibbles, _mm_set1_epi32(8)), _mm_set1_epi32(8));
      minus = _mm256_cvtepi32_epi64(negative);
    }
    const __m256i code = _mm256_sub_epi8(words, _mm256_and_si256(minus, _mm256_set1_epi8(2)));
    magnitude = _mm256_abs_epi8(code);
    sign = code;  // never zero: 8 g +- 1
  }
}

template <WeightFormat F>
void grid_int8_one_row(int m, int64_t kc, const void* a, const void* b, int64_t panel_stride, float* c, int64_t ldc,
                       bool accumulate) {
  (void)m;    // always 1
  (void)ldc;  // one row
  using L = Int8Layout<F>;
  constexpr uint32_t kType = L::kL.ggml_type;
  constexpr int kSub = L::kL.k_unit, kSubs = kQ8KBlock / kSub, kPanels = kFewRowsPanels[1];
  constexpr int64_t kBlockBytes = gguf_grid_block_bytes(kType);
  const auto* ap = static_cast<const uint8_t*>(a);
  const auto* bp = static_cast<const uint8_t*>(b);
  if (!accumulate) std::fill(c, c + kPanels * kNr, 0.0f);
  const int64_t units = (kc + kQ8KBlock - 1) / kQ8KBlock;
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t u = 0; u < units; ++u) {
    // Row 0's codes of the unit, contiguous (the packing interleaves the tile's rows four k at a time), and the
    // activations' scale of each sub-block unit.
    alignas(32) int8_t x[kQ8KBlock];
    float da[kSubs];
    for (int t = 0; t < kSubs; ++t) {
      const uint8_t* au = ap + (u * kSubs + t) * L::kAUnit;
      for (int g = 0; g < kSub / 4; ++g) std::memcpy(x + t * kSub + 4 * g, au + g * kIntMr * 4, 4);
      std::memcpy(&da[t], au + kSub * kIntMr, 4);
    }
    __m256i xv[8];
    for (int q = 0; q < 8; ++q) xv[q] = _mm256_load_si256(reinterpret_cast<const __m256i*>(x + 32 * q));
    for (int p = 0; p < kPanels; ++p)
      for (int j = 0; j < kNr; ++j) {
        const uint8_t* block = bp + p * panel_stride + (u * kNr + j) * kBlockBytes;
        __m256i v[8];
        for (int q = 0; q < 8; ++q) {
          __m256i magnitude, sign;
          grid_chunk<kType>(block, q, magnitude, sign);
          v[q] = _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(xv[q], sign)), ones);
        }
        // Lane sums per 128-bit half of each chunk: h lanes 0-3 the low halves of chunks 0-3, 4-7 their high
        // halves, and the same for chunks 4-7 in h2.
        const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
        const __m256i h2 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
        alignas(32) int32_t half[16];
        _mm256_store_si256(reinterpret_cast<__m256i*>(half), h);
        _mm256_store_si256(reinterpret_cast<__m256i*>(half + 8), h2);
        int32_t dot[16];  // per sub-block
        for (int q = 0; q < 8; ++q) {
          const int32_t low = half[8 * (q / 4) + q % 4], high = half[8 * (q / 4) + 4 + q % 4];
          if constexpr (kSub == 32) {
            dot[q] = low + high;
          } else {
            dot[2 * q] = low;
            dot[2 * q + 1] = high;
          }
        }
        float scales[kSubs];
        grid_block_scales<kType>(block, scales);
        float cj = c[p * kNr + j];
        for (int s = 0; s < kSubs; ++s) cj = std::fmaf(static_cast<float>(dot[s]), scales[s] * da[s], cj);
        c[p * kNr + j] = cj;
      }
  }
}

// The decode form of every GGUF int8 format: this kernel for the grid types, the tile kernels' otherwise.
template <WeightFormat F>
constexpr GemmFewFn int8_few() {
  if constexpr (gguf_int8_layout(F).grid) return grid_int8_one_row<F>;
  else return gemm_format_gguf_int8_few<F>;
}
