// The grid types' few-rows int8 kernel (the decode form: m = 1 to 3 rows over kFewRowsPanels[m] panels), with AVX2
// intrinsics; included by the AVX2 and AVX-512 units after gemm_gguf_int8-inl.h, inside the same anonymous namespace
// (the software model of tests/kernels/emulated_isa_test.cc keeps the expanding form instead).
//
// At a few rows nothing amortizes grid_int8_rows' expansion into the tile layout, which then bounds decode. This
// kernel skips it: per column and 32 values, the grid entries' magnitude bytes come from their table words (scalar
// loads), the signs move onto each row's activations (vpsignb: the byte masks of 7-bit fields from a table,
// explicit sign bytes spread by a shuffle) and vpdpbusd (or vpmaddubsw / vpmaddwd) gives eight int32 partial sums
// (|magnitude| <= 62, so no pair sum saturates). Eight columns go side by side: a horizontal-add tree turns their
// partial sums into one vector per sub-block, lane j the exact integer dot of column j's codes and the activations,
// the same integer the tile kernels reach (IQ1_S multiplies the grid as unsigned bytes 8 g + 8 and subtracts
// (7 + 2 n) times the sub-block's activation sum from that vector; IQ1_M, with a delta per group, subtracts a second
// dot product of those bytes where pext finds the groups' signs). Then, per sub-block in increasing k, their float
// step for all eight
// columns at once: c = fma(float(dot), scale * d_a, c) with the same scale (grid_block_scales, computed 8 at a
// time and transposed) and d_a. So the bits are the tile kernels' (tested: few-rows calls against micro-kernel calls
// of every format and row count).

// 32 bytes: byte i set to all ones where bit i % 8 of byte i / 8 of `signs` is set, else to 1 (vpsignb's operand).
inline __m256i grid_sign_bytes(uint32_t signs) {
  const __m256i select = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(signs)), select);
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
  return _mm256_or_si256(set, _mm256_set1_epi8(1));
}

// vpsignb's operand of a 7-bit sign field with its parity: kSign7ByteMasks' bytes with 1 in the positive ones.
struct Sign7Operands {
  uint64_t m[128];
};
constexpr Sign7Operands sign7_operands() {
  Sign7Operands t{};
  for (int i = 0; i < 128; ++i) t.m[i] = kSign7ByteMasks.m[i] | 0x0101010101010101ull;
  return t;
}
inline constexpr Sign7Operands kSign7Operands = sign7_operands();

// vpsignb's operand from four 7-bit sign fields (bits 0-6, 7-13, 14-20, 21-27 of `fields`).
inline __m256i grid_sign7_bytes(uint32_t f0, uint32_t f1, uint32_t f2, uint32_t f3) {
  return _mm256_setr_epi64x(
      static_cast<int64_t>(kSign7Operands.m[f0 & 127]), static_cast<int64_t>(kSign7Operands.m[f1 & 127]),
      static_cast<int64_t>(kSign7Operands.m[f2 & 127]), static_cast<int64_t>(kSign7Operands.m[f3 & 127]));
}

// Four table indices of kBits bits: index l = low[l] | the low kBits - 8 bits of field l of `high` (fields of
// kFieldBits, taken from `high` low bits first) << 8. Where BMI2 is compiled in (the AVX-512 units), two pdeps
// build all four (IQ1_S hot, one thread: 1.35 against 1.84 ms; IQ2_S 1.48 against 1.75; IQ3_S 2.21 against 2.76);
// the AVX2 unit keeps byte loads, shifts and masks, as pdep is microcoded on AMD's Zen 1 and 2.
template <int kFieldBits, int kBits>
inline void grid_indices4(const uint8_t* low, uint32_t high, uint32_t (&index)[4]) {
#ifdef __BMI2__
  constexpr uint64_t kField = (uint64_t{1} << kFieldBits) - 1;
  constexpr uint64_t kHighMask = (kField << 8) * 0x0001000100010001ull;
  uint32_t low4;
  std::memcpy(&low4, low, 4);
  const uint64_t lanes = _pdep_u64(low4, 0x00ff00ff00ff00ffull) | _pdep_u64(high, kHighMask);
  for (int l = 0; l < 4; ++l) index[l] = static_cast<uint32_t>(lanes >> (16 * l)) & ((1u << kBits) - 1);
#else
  for (int l = 0; l < 4; ++l) index[l] = low[l] | ((high >> (kFieldBits * l)) & ((1u << (kBits - 8)) - 1)) << 8;
#endif
}

// IQ1_M's chunk as unsigned bytes and a second dot product of the delta bytes below, where pext finds the groups'
// delta signs in one instruction (the AVX-512 units: hot, one thread, 1.57 against 1.86 ms); without BMI2 the signed
// codes with vpsignb, as the other grid types (with the unsigned form the AVX2 unit ran 1.29 against 1.0 ms).
#ifdef __BMI2__
constexpr bool kIq1MUnsigned = true;
#else
constexpr bool kIq1MUnsigned = false;
#endif

// IQ1_M's bytes to subtract from its unsigned 8 g + 8 per chunk of four groups, by the groups' delta signs (bit l:
// group l's delta is -1/8): 9 in a negative group's eight bytes, 7 in the others'.
struct Iq1DeltaBytes {
  alignas(32) uint8_t v[16][32];
};
constexpr Iq1DeltaBytes iq1_delta_bytes() {
  Iq1DeltaBytes t{};
  for (int n = 0; n < 16; ++n)
    for (int i = 0; i < 32; ++i) t.v[n][i] = static_cast<uint8_t>(n >> (i / 8) & 1 ? 9 : 7);
  return t;
}
inline constexpr Iq1DeltaBytes kIq1DeltaBytes = iq1_delta_bytes();

// Chunk q (values 32 q .. 32 q + 31) of one block of a grid type: the multiplier bytes (unsigned) and vpsignb's
// operand for the activations (the IQ1 types: see there).
template <uint32_t kType>
inline void grid_chunk(const uint8_t* b, int q, __m256i& magnitude, __m256i& sign) {
  const uint64_t* const table64 = kType == 16 ? kIq2XxsMagnitudes.u : kType == 17 ? kIq2XsMagnitudes.u
                                  : kType == 22 ? kIq2SMagnitudes.u : kIq1SUnsigned.u;
  // Four table words by scalar loads (a vpgatherqq measured slower here: 3.9 against 3.3 ms for IQ2_XXS).
  auto words4 = [&](uint32_t i0, uint32_t i1, uint32_t i2, uint32_t i3) {
    return _mm256_setr_epi64x(static_cast<int64_t>(table64[i0]), static_cast<int64_t>(table64[i1]),
                              static_cast<int64_t>(table64[i2]), static_cast<int64_t>(table64[i3]));
  };
  auto indexed4 = [&](const uint32_t (&index)[4]) { return words4(index[0], index[1], index[2], index[3]); };
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
    uint32_t index[4];
    grid_indices4<2, 10>(b + 2 + 4 * q, b[66 + q], index);
    magnitude = indexed4(index);
    uint32_t signs;
    std::memcpy(&signs, b + 34 + 4 * q, 4);
    sign = grid_sign_bytes(signs);
  } else if constexpr (kType == 18) {  // IQ3_XXS: 8 groups of 4, index bytes, four 7-bit sign fields
    uint64_t index;
    std::memcpy(&index, b + 2 + 8 * q, 8);
    const uint32_t* t = kIq3XxsMagnitudes.u;
    // Eight table words by scalar loads: a vpgatherdd measured slower (IQ3_XXS hot, one thread: 2.6 against 2.05 ms).
    auto word = [&](int g) { return static_cast<int>(t[index >> (8 * g) & 255]); };
    magnitude = _mm256_setr_epi32(word(0), word(1), word(2), word(3), word(4), word(5), word(6), word(7));
    uint32_t aux;
    std::memcpy(&aux, b + 66 + 4 * q, 4);
    sign = grid_sign7_bytes(aux, aux >> 7, aux >> 14, aux >> 21);
  } else if constexpr (kType == 21) {  // IQ3_S: 9-bit indices (the ninth bits in one byte), explicit sign bytes
    const uint32_t high = b[66 + q];
    uint32_t index[2][4];
    grid_indices4<1, 9>(b + 2 + 8 * q, high, index[0]);
    grid_indices4<1, 9>(b + 6 + 8 * q, high >> 4, index[1]);
    const uint32_t* t = kIq3SMagnitudes.u;
    auto word = [&](int g) { return static_cast<int>(t[index[g / 4][g % 4]]); };
    magnitude = _mm256_setr_epi32(word(0), word(1), word(2), word(3), word(4), word(5), word(6), word(7));
    uint32_t signs;
    std::memcpy(&signs, b + 74 + 4 * q, 4);
    sign = grid_sign_bytes(signs);
  } else if constexpr (kType == 19) {  // IQ1_S: the unsigned bytes 8 g + 8; the delta's share comes after the sums
    uint16_t qh;
    std::memcpy(&qh, b + 34 + 2 * q, 2);
    uint32_t index[4];
    grid_indices4<3, 11>(b + 2 + 4 * q, qh, index);
    magnitude = indexed4(index);
    sign = _mm256_setzero_si256();  // unused
  } else {  // IQ1_M
    uint16_t qh;
    std::memcpy(&qh, b + 32 + 2 * q, 2);
    uint32_t index[4];  // each group's nibble of qh: three index bits, then the delta's sign
    grid_indices4<4, 11>(b + 4 * q, qh, index);
    if constexpr (kIq1MUnsigned) {  // the unsigned bytes 8 g + 8, and in `sign` each group's 7 + 2 n to subtract
      magnitude = indexed4(index);
      sign = _mm256_load_si256(reinterpret_cast<const __m256i*>(kIq1DeltaBytes.v[_pext_u32(qh, 0x8888u)]));
    } else {  // the signed codes 8 g + 1, less 2 where the delta is -1/8: |code|, and the code as the sign
      auto code_word = [&](int l) { return static_cast<int64_t>(kIq1SCodes.u[index[l]]); };
      const __m256i words = _mm256_setr_epi64x(code_word(0), code_word(1), code_word(2), code_word(3));
      const __m128i nibbles = _mm_srlv_epi32(_mm_set1_epi32(qh), _mm_setr_epi32(0, 4, 8, 12));
      const __m128i negative = _mm_cmpeq_epi32(_mm_and_si128(nibbles, _mm_set1_epi32(8)), _mm_set1_epi32(8));
      const __m256i code =
          _mm256_sub_epi8(words, _mm256_and_si256(_mm256_cvtepi32_epi64(negative), _mm256_set1_epi8(2)));
      magnitude = _mm256_abs_epi8(code);
      sign = code;  // never zero: 8 g +- 1
    }
  }
}

// Eight f16 values (the low 16 bits of each lane) as f32, as f16_to_float converts them (exact; subnormals through
// an integer-to-float conversion, so no float subnormal is touched whatever the MXCSR says).
inline __m256 grid_f16_to_f32(__m256i h) {
  const __m256i exponent = _mm256_and_si256(h, _mm256_set1_epi32(0x7c00));
  const __m256i mantissa = _mm256_and_si256(h, _mm256_set1_epi32(0x3ff));
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x8000)), 16);
  const __m256i normal = _mm256_add_epi32(_mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x7fff)), 13),
                                          _mm256_set1_epi32(112 << 23));
  const __m256i special = _mm256_or_si256(_mm256_set1_epi32(0x7f800000), _mm256_slli_epi32(mantissa, 13));
  const __m256i tiny = _mm256_castps_si256(
      _mm256_mul_ps(_mm256_cvtepi32_ps(mantissa), _mm256_set1_ps(1.0f / 16777216.0f)));  // m 2^-24
  __m256i magnitude = _mm256_blendv_epi8(normal, special, _mm256_cmpeq_epi32(exponent, _mm256_set1_epi32(0x7c00)));
  magnitude = _mm256_blendv_epi8(magnitude, tiny, _mm256_cmpeq_epi32(exponent, _mm256_setzero_si256()));
  return _mm256_castsi256_ps(_mm256_or_si256(magnitude, sign));
}

// Each nibble of 4 (kBytes = 4) or 8 bytes as a lane, low nibble first: sub-blocks 0-7 (and 8-15) in k order.
template <int kBytes>
inline void grid_nibble_lanes(const uint8_t* p, __m256i* out) {
  uint64_t raw = 0;
  std::memcpy(&raw, p, kBytes);
  const __m256i bytes = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(raw)));
  const __m256i low = _mm256_and_si256(bytes, _mm256_set1_epi32(15)), high = _mm256_srli_epi32(bytes, 4);
  const __m256i a = _mm256_unpacklo_epi32(low, high), b = _mm256_unpackhi_epi32(low, high);
  out[0] = _mm256_permute2x128_si256(a, b, 0x20);
  if constexpr (kBytes == 8) out[1] = _mm256_permute2x128_si256(a, b, 0x31);
}

// grid_block_scales' floats, 8 sub-blocks a vector (sub-blocks 8 i .. 8 i + 7 in out[i]), with the block's d in
// every lane of `d`: d * (2 l + 1) * the type's power of two, each product exact.
template <uint32_t kType>
inline void grid_scale_vectors(const uint8_t* b, __m256 d, __m256* out) {
  constexpr int kVectors = kType == 17 || kType == 22 || kType == 29 ? 2 : 1;
  constexpr float kFactor = kType == 18 ? 0.25f : kType == 21 ? 1.0f : 0.125f;
  __m256i l[kVectors];
  if constexpr (kType == 16) {  // IQ2_XXS: the top 4 bits of each group's second word
    const __m256i lo = _mm256_srli_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2)), 60);
    const __m256i hi = _mm256_srli_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 34)), 60);
    l[0] = _mm256_permutevar8x32_epi32(_mm256_or_si256(lo, _mm256_slli_epi64(hi, 32)),
                                       _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
  } else if constexpr (kType == 18) {  // IQ3_XXS: the top 4 bits of each sub-block's sign word
    l[0] = _mm256_srli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 66)), 28);
  } else if constexpr (kType == 17 || kType == 22) {  // IQ2_XS, IQ2_S: 16 nibbles
    grid_nibble_lanes<8>(b + (kType == 17 ? 66 : 74), l);
  } else if constexpr (kType == 21) {  // IQ3_S: 8 nibbles
    grid_nibble_lanes<4>(b + 106, l);
  } else if constexpr (kType == 19) {  // IQ1_S: bits 12-14 of each sub-block's high word
    const __m256i qh = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 34)));
    l[0] = _mm256_and_si256(_mm256_srli_epi32(qh, 12), _mm256_set1_epi32(7));
  } else {  // IQ1_M: four 3-bit fields in each of the four scale words
    const __m256i words = _mm256_cvtepu16_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 48)));
    const __m256i shifts = _mm256_setr_epi32(0, 3, 6, 9, 0, 3, 6, 9);
    for (int i = 0; i < 2; ++i) {
      const int lo = 2 * i, hi = 2 * i + 1;
      const __m256i w = _mm256_permutevar8x32_epi32(words, _mm256_setr_epi32(lo, lo, lo, lo, hi, hi, hi, hi));
      l[i] = _mm256_and_si256(_mm256_srlv_epi32(w, shifts), _mm256_set1_epi32(7));
    }
  }
  for (int i = 0; i < kVectors; ++i) {
    const __m256 odd = _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_slli_epi32(l[i], 1), _mm256_set1_epi32(1)));
    out[i] = _mm256_mul_ps(_mm256_mul_ps(d, odd), _mm256_set1_ps(kFactor));
  }
}

// 8 x 8 floats transposed: r[i] lane j becomes r[j] lane i.
inline void grid_transpose8(__m256* r) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// The chunk's eight int32 partial sums of |magnitude| times the signed activations (each pair sum fits int16:
// |magnitude| <= 62). With VNNI one vpdpbusd; the same integers.
inline __m256i grid_chunk_dot(__m256i magnitude, __m256i signed_x) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), magnitude, signed_x);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, signed_x), _mm256_set1_epi16(1));
#endif
}

// M rows (1 to kGridFewRows) over kFewRowsPanels[M] panels: each chunk of a column is decoded once and multiplied
// with every row's activations.
template <WeightFormat F, int M>
void grid_int8_few_rows(int64_t kc, const uint8_t* ap, const uint8_t* bp, int64_t panel_stride, float* c,
                        int64_t ldc, bool accumulate) {
  using L = Int8Layout<F>;
  constexpr uint32_t kType = L::kL.ggml_type;
  constexpr int kSub = L::kL.k_unit, kSubs = kQ8KBlock / kSub, kPanels = kFewRowsPanels[M];
  constexpr int64_t kBlockBytes = gguf_grid_block_bytes(kType);
  static_assert(kNr % 8 == 0 && M <= kIntRows<F>);
  if (!accumulate)
    for (int i = 0; i < M; ++i) std::fill(c + i * ldc, c + i * ldc + kPanels * kNr, 0.0f);
  const int64_t units = (kc + kQ8KBlock - 1) / kQ8KBlock;
  for (int64_t u = 0; u < units; ++u) {
    // Each row's codes of the unit, contiguous (the packing interleaves the tile's rows four k at a time), and the
    // activations' scale of each sub-block unit.
    alignas(32) int8_t x[M][kQ8KBlock];
    float da[M][kSubs];
    int32_t sum[M][kSubs];  // the activations' sum over each sub-block (IQ1_S's delta term; IQ1_S only)
    for (int t = 0; t < kSubs; ++t) {
      const uint8_t* au = ap + (u * kSubs + t) * L::kAUnit;
      for (int i = 0; i < M; ++i) {
        for (int g = 0; g < kSub / 4; ++g) std::memcpy(x[i] + t * kSub + 4 * g, au + (g * kIntRows<F> + i) * 4, 4);
        std::memcpy(&da[i][t], au + kSub * kIntRows<F> + 4 * i, 4);
        if constexpr (kType == 19) std::memcpy(&sum[i][t], au + (kSub + 4) * kIntRows<F> + 4 * i, 4);
      }
    }
    for (int p = 0; p < kPanels; ++p)
      for (int j0 = 0; j0 < kNr; j0 += 8) {  // eight columns, one per lane
        const uint8_t* blocks = bp + p * panel_stride + (u * kNr + j0) * kBlockBytes;
        // The same columns' blocks of the next unit, 16 groups of work from now (at one row): the hardware
        // prefetchers do not run ahead of a stream consumed this slowly, so without it each group waits for its
        // lines (hymoe_decode_stream_bench, IQ2_XXS cold: 4.3 GB/s without, 4.9 with; 5.2 hot).
        for (int64_t o = 0; o < 8 * kBlockBytes; o += 64)
          _mm_prefetch(reinterpret_cast<const char*>(blocks + kNr * kBlockBytes + o), _MM_HINT_T0);
        // scales[s]: the eight columns' scale of sub-block s (grid_scale_vectors' per-column vectors, transposed).
        alignas(32) float scales[kSubs][8];
        {
          alignas(32) uint32_t d_bits[8];
          for (int j = 0; j < 8; ++j) d_bits[j] = grid_block_d_bits<kType>(blocks + j * kBlockBytes);
          const __m256 d = grid_f16_to_f32(_mm256_load_si256(reinterpret_cast<const __m256i*>(d_bits)));
          __m256 rows[kSubs / 8][8];
          for (int j = 0; j < 8; ++j) {
            __m256 per_column[kSubs / 8];
            grid_scale_vectors<kType>(blocks + j * kBlockBytes, _mm256_permutevar8x32_ps(d, _mm256_set1_epi32(j)),
                                      per_column);
            for (int h = 0; h < kSubs / 8; ++h) rows[h][j] = per_column[h];
          }
          for (int h = 0; h < kSubs / 8; ++h) {
            grid_transpose8(rows[h]);
            for (int s = 0; s < 8; ++s) _mm256_store_ps(scales[8 * h + s], rows[h][s]);
          }
        }
        // IQ1_S: negative[s] = all ones in the lanes of the columns whose sub-block s has the delta -1/8 (bit 15 of
        // its qh word), transposed like the scales.
        alignas(32) int32_t negative[kType == 19 ? 8 : 1][8];
        if constexpr (kType == 19) {
          __m256 rows[8];
          for (int j = 0; j < 8; ++j) {
            const __m128i qh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks + j * kBlockBytes + 34));
            rows[j] = _mm256_castsi256_ps(_mm256_cvtepi16_epi32(_mm_srai_epi16(qh, 15)));
          }
          grid_transpose8(rows);
          for (int s = 0; s < 8; ++s) _mm256_store_ps(reinterpret_cast<float*>(negative[s]), rows[s]);
        }
        // Per chunk of 32 k and row: the eight columns' exact integer dots of each sub-block, reduced into one
        // vector (lane j: column j), then the tile kernels' float step c = fma(dot, scale * d_a, c), sub-block by
        // sub-block in increasing k.
        __m256 cv[M];
        for (int i = 0; i < M; ++i) cv[i] = _mm256_loadu_ps(c + i * ldc + p * kNr + j0);
        auto step = [&](int i, __m256i dot, int s) {
          cv[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot),
                                  _mm256_mul_ps(_mm256_load_ps(scales[s]), _mm256_set1_ps(da[i][s])), cv[i]);
        };
        for (int q = 0; q < 8; ++q) {
          __m256i xq[M];
          for (int i = 0; i < M; ++i) xq[i] = _mm256_load_si256(reinterpret_cast<const __m256i*>(x[i] + 32 * q));
          __m256i v[M][8];
#pragma GCC unroll 8
          for (int j = 0; j < 8; ++j) {
            __m256i magnitude, sign;
            grid_chunk<kType>(blocks + j * kBlockBytes, q, magnitude, sign);
            for (int i = 0; i < M; ++i) {
              if constexpr (kType == 19)  // IQ1_S: 8 g + 8 times x; the rest after the sums
                v[i][j] = grid_chunk_dot(magnitude, xq[i]);
              else if constexpr (kType == 29 && kIq1MUnsigned)  // IQ1_M: (8 g + 8) x - (7 + 2 n) x per group
                v[i][j] = _mm256_sub_epi32(grid_chunk_dot(magnitude, xq[i]), grid_chunk_dot(sign, xq[i]));
              else
                v[i][j] = grid_chunk_dot(magnitude, _mm256_sign_epi8(xq[i], sign));
            }
          }
          for (int i = 0; i < M; ++i) {
            // Lanes 0-3 of `low4`: columns 0-3's sums over the chunk's first 16 k, lanes 4-7 over its last 16;
            // the same for columns 4-7 in `high4`.
            const __m256i low4 =
                _mm256_hadd_epi32(_mm256_hadd_epi32(v[i][0], v[i][1]), _mm256_hadd_epi32(v[i][2], v[i][3]));
            const __m256i high4 =
                _mm256_hadd_epi32(_mm256_hadd_epi32(v[i][4], v[i][5]), _mm256_hadd_epi32(v[i][6], v[i][7]));
            const __m256i first16 = _mm256_permute2x128_si256(low4, high4, 0x20);
            const __m256i last16 = _mm256_permute2x128_si256(low4, high4, 0x31);
            if constexpr (kType == 19) {
              // Less (7 + 2 n) times the sub-block's activation sum: the exact integer of the codes 8 g + 1 - 2 n.
              const __m256i dot = _mm256_add_epi32(first16, last16);
              const __m256i delta = _mm256_add_epi32(
                  _mm256_set1_epi32(7 * sum[i][q]),
                  _mm256_and_si256(_mm256_load_si256(reinterpret_cast<const __m256i*>(negative[q])),
                                   _mm256_set1_epi32(2 * sum[i][q])));
              step(i, _mm256_sub_epi32(dot, delta), q);
            } else if constexpr (kSub == 32) {
              step(i, _mm256_add_epi32(first16, last16), q);
            } else {
              step(i, first16, 2 * q);
              step(i, last16, 2 * q + 1);
            }
          }
        }
        for (int i = 0; i < M; ++i) _mm256_storeu_ps(c + i * ldc + p * kNr + j0, cv[i]);
      }
  }
}

// Rows the grid kernel takes in one call: up to 3, within one packed micro-panel of kIntMr rows.
constexpr int kGridFewRows = kIntMr < 3 ? kIntMr : 3;

template <WeightFormat F>
void grid_int8_few(int m, int64_t kc, const void* a, const void* b, int64_t panel_stride, float* c, int64_t ldc,
                   bool accumulate) {
  const auto* ap = static_cast<const uint8_t*>(a);
  const auto* bp = static_cast<const uint8_t*>(b);
  if (m == 1) return grid_int8_few_rows<F, 1>(kc, ap, bp, panel_stride, c, ldc, accumulate);
  if constexpr (kGridFewRows >= 2)
    if (m == 2) return grid_int8_few_rows<F, 2>(kc, ap, bp, panel_stride, c, ldc, accumulate);
  if constexpr (kGridFewRows >= 3)
    if (m == 3) return grid_int8_few_rows<F, 3>(kc, ap, bp, panel_stride, c, ldc, accumulate);
}

// The decode form of every GGUF int8 format: this kernel for the grid types, the tile kernels' otherwise.
template <WeightFormat F>
constexpr GemmFewFn int8_few() {
  if constexpr (gguf_int8_layout(F).grid) return grid_int8_few<F>;
  else return gemm_format_gguf_int8_few<F>;
}
// Its row count: up to kGridFewRows for the grid types, one for the others.
template <WeightFormat F>
constexpr int int8_few_rows() {
  return gguf_int8_layout(F).grid ? kGridFewRows : 1;
}
