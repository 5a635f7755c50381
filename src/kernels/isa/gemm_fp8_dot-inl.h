// The fp8 dot format's micro-kernel bodies (kFp8Block128Dot, gemm_quantized.h), written once over a vector-traits
// type V like gemm_microkernel-inl.h (include it after that header, inside the same anonymous namespace) and
// instantiated by gemm_avx512bf16.cc and by the software model of tests/kernels/emulated_isa_test.cc.
//
// V provides, beyond the bf16-dot members: store_pairs(p, bvec), the expanding form's store; fp8row fp8_row(const
// uint8_t* p), a k-pair row of 4 * kWidth codes (one panel's, NR = 2 * kWidth columns); and fp8_pairs<H>(row), its
// half H (columns H * kWidth + l) as bf16 pairs of fp8(b) * 2^-8, exactly: lane l holds codes 4l + H (even k) and
// 4l + 2 + H of the row, the order fp8_code_offset (gemm_quantized.cc) packs. The including unit defines kFp8Mr,
// the rows of the M-row tile.
//
// Per block of 128 k (one unit: 64 k pairs) each C element gets one vdpbf16ps chain in k-pair order, started from
// zero, then c = fma(chain, multiplier, c), or chain * multiplier for the first block of a call that does not
// accumulate: so the few-rows form, K blocking at whole units and any split of rows give the same bits.
// Register budget (AVX-512, kFp8Mr = 10): 20 chains, two decoded weight vectors, one activation broadcast, the
// decode's temporaries and its three constants; the running sums stay in C (L1), read and written once a block.
//
// The expanded form (GemmFormat::gemm_expanding / gemm_expanded): of a tile's several micro-tiles over one weight
// block, the first decodes it as above and also stores the decoded bf16 pairs to an L1 buffer, and the others read
// them from there, so the decode is paid once per block, under the first micro-tile's dot products, rather than
// once per micro-tile. The chains see the same bf16 values in the same order: the same bits as the direct form.

constexpr int64_t kFp8DotPairs = 64;                        // k pairs per unit
constexpr int64_t kFp8DotBUnit = 132 * kNr;                 // bytes of a panel's unit: codes, then kNr f32
constexpr int64_t kFp8DotPairRow = 2 * kNr;                 // bytes of one k pair of a panel's codes
constexpr int64_t kFp8DotExpandedUnit = 260 * kNr;          // an expanded unit: (64, kNr) bf16 pairs, then kNr f32
constexpr int64_t kFp8DotExpandedPairRow = 4 * kNr;         // bytes of one k pair of an expanded unit
constexpr int64_t kFp8DotAhead = 1024;                      // the decode form's prefetch distance, bytes a panel

// M rows over P adjacent panels (panel p at b + p * panel_stride bytes, its C at c + p * kNr), `units` units from
// a's and b's unit 0. a holds kFp8Mr pairs per k pair (pack_activations_bf16_pairs128 with mr = kFp8Mr). b is the
// codes, also written to `expanded` in the expanded layout when kOperand is kCodesExpanding (P = 1), or the expanded
// bf16 pairs (kExpanded, P = 1).
enum class Fp8Operand { kCodes, kCodesExpanding, kExpanded };
template <int M, int P, Fp8Operand kOperand = Fp8Operand::kCodes>
void fp8_dot_tile(int64_t units, const uint32_t* a, const uint8_t* b, int64_t panel_stride, float* c, int64_t ldc,
                  bool accumulate, const char* prefetch, const char* prefetch_end, uint8_t* expanded = nullptr) {
  constexpr bool kExpanded = kOperand == Fp8Operand::kExpanded, kExpanding = kOperand == Fp8Operand::kCodesExpanding;
  static_assert(P == 1 || kOperand == Fp8Operand::kCodes);
  using VV = typename VFor<Bf16Pair>::type;
  // The prefetch hint spread over the first half of each unit in four bursts (a burst every 8 k pairs): the last
  // micro-tile of a block issues the end of the next block, whose first micro-tile starts right after it; bursts
  // over the whole unit left those lines (the next unit's multipliers among them) arriving late.
  const int64_t lines = prefetch_end > prefetch ? (prefetch_end - prefetch + 63) / 64 : 0;
  const int64_t lines_per_burst = units > 0 ? (lines + 4 * units - 1) / (4 * units) : 0;
  for (int64_t u = 0; u < units; ++u) {
    const uint32_t* au = a + u * kFp8DotPairs * kFp8Mr;
    const uint8_t* bu = b + u * (kExpanded ? kFp8DotExpandedUnit : kFp8DotBUnit);
    typename V::vec s[M][2 * P];
    // Unrolled whole, as every loop over the chains: a partly unrolled one (4 of M) kept s on the stack there.
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
      for (int j = 0; j < 2 * P; ++j) s[i][j] = V::zero();
    // The unit's two lines of multipliers, read after its 64 k pairs, fetched into L1 before them: without, their
    // load missed in a 512-token layer (perf: 15-24% of the expanding micro-tile's samples on it, 4% with).
    if constexpr (P == 1 && !kExpanded) {
      __builtin_prefetch(bu + 128 * kNr, 0, 3);
      __builtin_prefetch(bu + 128 * kNr + 64, 0, 3);
    }
    for (int64_t t = 0; t < kFp8DotPairs; ++t) {
      if (t % 8 == 0 && t < 32)
        for (int64_t l = 0; l < lines_per_burst && prefetch < prefetch_end; ++l, prefetch += 64)
          __builtin_prefetch(prefetch, 0, 2);
      // The decode form (P > 1, which the driver gives no hint) fetches its panels into L1 itself, kFp8DotAhead
      // bytes ahead: a line per k pair and the unit's two lines of multipliers, so each unit covers its own 66
      // lines, shifted. Without it the hardware prefetchers alone streamed 10 GB/s a thread cold where Q4_0's
      // form reaches 14 (hymoe_decode_stream_bench, docs/performance.md); 1, 2 or 4 KiB ahead measured alike.
      if constexpr (P > 1) {
#pragma GCC unroll 8
        for (int p = 0; p < P; ++p) {
          const uint8_t* ahead = bu + p * panel_stride + kFp8DotAhead;
          __builtin_prefetch(ahead + t * kFp8DotPairRow, 0, 3);
          if (t % 32 == 0) __builtin_prefetch(ahead + 128 * kNr + t / 32 * 64, 0, 3);
        }
      }
      // A panel's two decoded weight vectors, then each row's activation pair broadcast once and used on both:
      // 2M chains, two weights and one broadcast live (a broadcast reused across the halves would keep M of them
      // in registers, past the 32 zmm).
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) {
        typename VV::bvec w[2];
        if constexpr (kExpanded) {
          w[0] = VV::load_pairs(bu + t * kFp8DotExpandedPairRow);
          w[1] = VV::load_pairs(bu + t * kFp8DotExpandedPairRow + 4 * V::kWidth);
        } else {
          const typename VV::fp8row row = VV::fp8_row(bu + p * panel_stride + t * kFp8DotPairRow);
          w[0] = VV::template fp8_pairs<0>(row);
          w[1] = VV::template fp8_pairs<1>(row);
        }
        // Stored a vector at a time: a memcpy of the array w took its address, and GCC then also wrote both
        // vectors to the stack every k pair.
        if constexpr (kExpanding) {
          uint8_t* const out = expanded + u * kFp8DotExpandedUnit + t * kFp8DotExpandedPairRow;
          VV::store_pairs(out, w[0]);
          VV::store_pairs(out + 4 * V::kWidth, w[1]);
        }
#pragma GCC unroll 16
        for (int i = 0; i < M; ++i) {
          const auto ai = VV::broadcast_pair(au + t * kFp8Mr + i);
          s[i][2 * p] = VV::dot_bf16(s[i][2 * p], ai, w[0]);
          s[i][2 * p + 1] = VV::dot_bf16(s[i][2 * p + 1], ai, w[1]);
        }
      }
    }
    if constexpr (kExpanding) std::memcpy(expanded + u * kFp8DotExpandedUnit + 256 * kNr, bu + 128 * kNr, 4 * kNr);
    const bool first = u == 0 && !accumulate;
#pragma GCC unroll 8
    for (int j = 0; j < 2 * P; ++j) {
      const uint8_t* multipliers = kExpanded ? bu + 256 * kNr : bu + (j / 2) * panel_stride + 128 * kNr;
      const typename V::vec mult = V::load(reinterpret_cast<const float*>(multipliers) + (j % 2) * V::kWidth);
#pragma GCC unroll 16
      for (int i = 0; i < M; ++i) {
        float* cij = c + i * ldc + (j / 2) * kNr + (j % 2) * V::kWidth;
        V::store(cij, first ? V::mul(s[i][j], mult) : V::fma(s[i][j], mult, V::load(cij)));
      }
    }
  }
  // A call with no unit (kc = 0) still defines C.
  if (units == 0 && !accumulate)
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
      for (int j = 0; j < 2 * P; ++j) V::store(c + i * ldc + j * V::kWidth, V::zero());
}

template <Fp8Operand kOperand, int M = kFp8Mr>
void fp8_dot_rows(int m, int64_t units, const uint32_t* a, const uint8_t* b, float* c, int64_t ldc, bool accumulate,
                  const char* prefetch, const char* prefetch_end, uint8_t* expanded) {
  if constexpr (M >= 1) {
    if (m == M)
      return fp8_dot_tile<M, 1, kOperand>(units, a, b, 0, c, ldc, accumulate, prefetch, prefetch_end, expanded);
    return fp8_dot_rows<kOperand, M - 1>(m, units, a, b, c, ldc, accumulate, prefetch, prefetch_end, expanded);
  }
}

// GemmFn on the codes (kOperand kCodes) or on the expanded layout (kExpanded).
template <Fp8Operand kOperand = Fp8Operand::kCodes>
void gemm_format_fp8_dot(int m, int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool acc,
                         const void* pf, int64_t pf_bytes) {
  const char* p = static_cast<const char*>(pf);
  fp8_dot_rows<kOperand>(m, (kc + 127) / 128, static_cast<const uint32_t*>(a), static_cast<const uint8_t*>(b), c, ldc,
                         acc, p, p ? p + pf_bytes : p, nullptr);
}

// GemmExpandingFn: the direct form, also writing the expanded layout (kFp8DotExpandedUnit bytes a unit).
void gemm_format_fp8_dot_expanding(int m, int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool acc,
                                   const void* pf, int64_t pf_bytes, void* expanded) {
  const char* p = static_cast<const char*>(pf);
  fp8_dot_rows<Fp8Operand::kCodesExpanding>(m, (kc + 127) / 128, static_cast<const uint32_t*>(a),
                                            static_cast<const uint8_t*>(b), c, ldc, acc, p, p ? p + pf_bytes : p,
                                            static_cast<uint8_t*>(expanded));
}

// m = 1-3 rows over kFewRowsPanels[m] panels: 8-12 chains stream that many panels at once (the decode form).
void gemm_format_fp8_dot_few(int m, int64_t kc, const void* a, const void* b, int64_t panel_stride_bytes, float* c,
                             int64_t ldc, bool acc) {
  const int64_t units = (kc + 127) / 128;
  const auto* ap = static_cast<const uint32_t*>(a);
  const auto* bp = static_cast<const uint8_t*>(b);
  if (m == 1) return fp8_dot_tile<1, kFewRowsPanels[1]>(units, ap, bp, panel_stride_bytes, c, ldc, acc, nullptr, nullptr);
  if (m == 2) return fp8_dot_tile<2, kFewRowsPanels[2]>(units, ap, bp, panel_stride_bytes, c, ldc, acc, nullptr, nullptr);
  return fp8_dot_tile<3, kFewRowsPanels[3]>(units, ap, bp, panel_stride_bytes, c, ldc, acc, nullptr, nullptr);
}
