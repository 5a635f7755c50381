// The GGUF int8 micro-kernels (gemm_kernels.h, gguf_int8_layout), written over a vector-traits type V like
// gemm_microkernel-inl.h and included after it, in the same anonymous namespace, by an ISA's unit. Per unit of
// k_unit k (32) and panel of a units layout: integer accumulators start at -code_bias * sum(x) of the row's unit,
// take the unit's groups of four k (u8 codes times int8 activations: vpdpbusd, or the vpmaddubsw idiom), then one
// f32 FMA per C element with the product of the two scales (and one with the offset times the activations' scale
// and sum, or times q8_1's s). The integer part is exact (|dot| <= 32 * 255 * 127 < 2^24, so its conversion to f32
// is too), and every C element is one float chain over the units in increasing k: the bits do not depend on
// blocking or threads. The compact factors' and the super-block forms take their sub-blocks' integer scales into an
// int32 sum per 256 k first, as llama.cpp's K-quant dot products do (compact_int8_tile, super_int8_tile).
//
// V provides, beyond gemm_microkernel-inl.h's: load_bytes(const uint8_t*) (4 * kWidth bytes), and_bytes(ivec,
// int mask) (bytewise and), shift_bytes<S>(ivec) (16-bit lanes shifted left by S, right by -S: the bytewise shift
// for the bits a mask then keeps), or_bytes, u_dot4(ivec acc, ivec u, ivec x) (acc + the lane's four u * x, u
// unsigned: exact for u <= 63 with vpmaddubsw, for any u with vpdpbusd), set1_i32(int), kPairSums (true where
// u_dot4 is the vpmaddubsw idiom) and its parts pair_sums(u, x) (int16 sums of pairs), add_i16, madd_i16(acc, a,
// b) (acc + vpmaddwd's sums of adjacent int16 products), mul_add_i32(acc, a, b) (acc + a * b in int32 lanes),
// widen_u8 / widen_i8 (kWidth bytes to int32 lanes), and_i32 and shift_i32<S>. Q8_0 uses q8_weights,
// q8_start and q8_dot4 (the sign idiom where VNNI is missing), and so do the IQ4 types, with q8_weights_of(ivec)
// on their looked-up codes. MXFP4 uses table16(const uint8_t*) (16 bytes in
// every 128-bit lane), lookup16(table, ivec) (vpshufb: each byte, 0..15, replaced by its table entry) and
// e8m0_scales(const uint8_t*) (kWidth u8 exponents e to f32 2^(e - 127), e = 0 to 2^-127). Optionally
// add_where_bit<B, Add>(u, high) (bytewise u + Add where the high byte has bit B set), which the 5-bit codes then
// take for their fifth bit. The including unit defines kIntMr.
//
// Register budget (AVX2, 2 rows): 4 f32 and 4 int32 accumulators, 2 weight vectors and their unpacking
// temporaries (2-4), 1 broadcast, constants: 16 ymm; AVX-512, 6 rows: 12 and 12, the same beside them, up to 30
// zmm. One row over 4 panels keeps 8 f32 accumulators and the int32 ones of one panel at a time.

// MXFP4's stored nibble to u = kvalue + 12 (0..24), the unsigned operand of the dot products.
struct Mxfp4Codes {
  uint8_t u[16];
  constexpr Mxfp4Codes() : u{} {
    for (int i = 0; i < 16; ++i) u[i] = static_cast<uint8_t>(kMxfp4Kvalues[i] + 12);
  }
};
inline constexpr Mxfp4Codes kMxfp4Codes{};

// An IQ4 type's nibble to u = value + 128, the stored form of Q8_0's codes, which its int8 kernels then multiply.
template <WeightFormat F>
struct ValueCodes {
  uint8_t u[16];
  constexpr ValueCodes() : u{} {
    for (int i = 0; i < 16; ++i) u[i] = static_cast<uint8_t>(gguf_int8_layout(F).values[i] + 128);
  }
};
template <WeightFormat F>
inline constexpr ValueCodes<F> kValueCodes{};

// Rows of format F's micro-panels and tiles (its GemmFormat's mr): kIntMr, but at most 4 for the super-block form,
// whose isum and msum accumulators beside the C ones leave the registers 4 rows (6 spilled: 3-10% slower at 512
// tokens; Q3_K's 3-bit form at 6 rows measured no faster than at 4 either).
template <WeightFormat F>
inline constexpr int kIntRows = gguf_int8_layout(F).super_block && kIntMr > 4 ? 4 : kIntMr;

template <WeightFormat F>
struct Int8Layout {
  static constexpr GgufPanelLayout kL = gguf_int8_layout(F);
  static constexpr int kGroups = kL.k_unit / 4;
  static constexpr int64_t kCodeBytes = int64_t{kL.k_unit} * kNr * kL.code_bits / 8;
  static constexpr int64_t kBUnit = gguf_layout_unit_bytes(kL, kNr);  // a grid type's expanded units
  static constexpr int64_t kAUnit = (int64_t{kL.k_unit} + 8) * kIntRows<F>;
};

// The two weight vectors of group g of a unit (columns 0..kWidth-1 and kWidth..2kWidth-1, four k each).
template <WeightFormat F, int G, int Half, typename Vt = V>  // Vt: V, dependent, for the requires-expression
inline auto int8_weights(const uint8_t* bu) {
  using L = Int8Layout<F>;
  if constexpr (L::kL.code_bits == 8) {
    return V::q8_weights(bu + (G * kNr + Half * V::kWidth) * 4);
  } else {
    constexpr int kBlocks = L::kGroups / 2;
    const typename V::ivec raw = V::load_bytes(bu + ((G % kBlocks) * kNr + Half * V::kWidth) * 4);
    typename V::ivec u = G < kBlocks ? V::and_bytes(raw, 15) : V::and_bytes(V::template shift_bytes<-4>(raw), 15);
    if constexpr (L::kL.code_bits > 4) {
      constexpr int kHigh = L::kL.code_bits - 4;  // group G's bits at G * kHigh, moved to bit 4
      const typename V::ivec high = V::load_bytes(bu + (kBlocks * kNr + Half * V::kWidth) * 4);
      // The fifth bit by V's add_where_bit where it has one (AVX-512: a vptestmb and a masked vpaddb, beside the
      // vpdpbusds' ports; the 16-bit shift runs on one of them). Q6_K's two bits keep the shift: two tests and adds
      // measured slower.
      if constexpr (kHigh == 1 && requires { Vt::template add_where_bit<G, 16>(u, high); })
        u = Vt::template add_where_bit<G, 16>(u, high);
      else
        u = V::or_bytes(u, V::and_bytes(V::template shift_bytes<4 - G * kHigh>(high), ((1 << kHigh) - 1) << 4));
    }
    if constexpr (L::kL.mxfp4) u = V::lookup16(V::table16(kMxfp4Codes.u), u);
    if constexpr (L::kL.values != nullptr) {
      // u is Q8_0's stored code now (value + 128, up to 241): vpmaddubsw would saturate its pair sums, so it
      // goes the Q8_0 way (the sign idiom, or vpdpbusd against a -128 * sum start).
      return V::q8_weights_of(V::lookup16(V::table16(kValueCodes<F>.u), u));
    } else {
      return u;
    }
  }
}

// Whether format F multiplies its weights as Q8_0's codes (8 bits, or the IQ4 types' looked-up values).
template <WeightFormat F>
constexpr bool kQ8Codes = gguf_int8_layout(F).code_bits == 8 || gguf_int8_layout(F).values != nullptr;

template <WeightFormat F>
inline typename V::ivec int8_dot(typename V::ivec acc, const auto& w, typename V::ivec x) {
  if constexpr (kQ8Codes<F>) return V::q8_dot4(acc, w, x);
  else return V::u_dot4(acc, w, x);
}

// Groups whose vpmaddubsw pair sums can be added in int16 before one vpmaddwd widens them (the idiom's second
// and third instruction once per chunk instead of once per group): a pair sum is at most 2 * umax * 127, so 8 of
// them for 4-bit codes, 4 for 5-bit and 2 for 6-bit stay below 2^15; MXFP4's u <= 24 allows 5 (2 * 24 * 127 * 5 =
// 30480), so its 8 groups go in two chunks of 4. 1 (no chunks) where V has vpdpbusd or for Q8_0's sign idiom.
template <WeightFormat F>
constexpr int kPairChunk = !V::kPairSums || kQ8Codes<F> ? 1 : gguf_int8_layout(F).mxfp4 ? 4
                                             : gguf_int8_layout(F).code_bits == 4 ? 8
                                             : gguf_int8_layout(F).code_bits == 5 ? 4
                                             : gguf_int8_layout(F).code_bits == 6 ? 2
                                                                                  : 1;

// Groups [G, End) of a chunk into the int16 pair sums p, of the halves [H0, H0 + NH) of the panel's columns.
template <WeightFormat F, int M, int G, int End, int H0, int NH>
inline void int8_pair_chunk(const uint8_t* au, const uint8_t* bu, typename V::ivec (&p)[M][2]) {
  if constexpr (G < End) {
    const auto w0 = int8_weights<F, G, H0>(bu);
    const auto w1 = int8_weights<F, G, H0 + NH - 1>(bu);  // w0 again when NH is 1, and unused
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      const typename V::ivec x = V::broadcast4(au + (G * kIntRows<F> + i) * 4);
      if constexpr (G % kPairChunk<F> == 0) {
        p[i][H0] = V::pair_sums(w0, x);
        if constexpr (NH == 2) p[i][1] = V::pair_sums(w1, x);
      } else {
        p[i][H0] = V::add_i16(p[i][H0], V::pair_sums(w0, x));
        if constexpr (NH == 2) p[i][1] = V::add_i16(p[i][1], V::pair_sums(w1, x));
      }
    }
    int8_pair_chunk<F, M, G + 1, End, H0, NH>(au, bu, p);
  }
}

// The unit's groups from G on into s, for the halves [H0, H0 + NH) of the panel's columns (both, or one: the
// compact form's loops). The vpmaddubsw idiom widens each chunk's pair sums of half h by a vpmaddwd with
// pair_factor[h] (each int16 half of a lane; 1 gives the plain sums, a sub-block scale the scaled ones).
template <WeightFormat F, int M, int G, int H0 = 0, int NH = 2>
inline void int8_groups(const uint8_t* au, const uint8_t* bu, typename V::ivec (&s)[M][2],
                        [[maybe_unused]] const typename V::ivec (&pair_factor)[2]) {
  if constexpr (G < Int8Layout<F>::kGroups && kPairChunk<F> > 1) {
    typename V::ivec p[M][2];
    int8_pair_chunk<F, M, G, (G + kPairChunk<F> < Int8Layout<F>::kGroups ? G + kPairChunk<F> : Int8Layout<F>::kGroups),
                    H0, NH>(au, bu, p);
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      s[i][H0] = V::madd_i16(s[i][H0], p[i][H0], pair_factor[H0]);
      if constexpr (NH == 2) s[i][1] = V::madd_i16(s[i][1], p[i][1], pair_factor[1]);
    }
    int8_groups<F, M, G + kPairChunk<F>, H0, NH>(au, bu, s, pair_factor);
  } else if constexpr (G < Int8Layout<F>::kGroups) {
    const auto w0 = int8_weights<F, G, H0>(bu);
    const auto w1 = int8_weights<F, G, H0 + NH - 1>(bu);
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      const typename V::ivec x = V::broadcast4(au + (G * kIntRows<F> + i) * 4);
      s[i][H0] = int8_dot<F>(s[i][H0], w0, x);
      if constexpr (NH == 2) s[i][1] = int8_dot<F>(s[i][1], w1, x);
    }
    int8_groups<F, M, G + 1, H0, NH>(au, bu, s, pair_factor);
  }
}

// A tile's C accumulators (M rows of 2P vectors): loaded where the call accumulates, else zero; and stored.
template <int M, int P>
inline void load_tile_acc(typename V::vec (&acc)[M][2 * P], const float* c, int64_t ldc, bool accumulate) {
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < 2 * P; ++j) acc[i][j] = accumulate ? V::load(c + i * ldc + j * V::kWidth) : V::zero();
}
template <int M, int P>
inline void store_tile_acc(const typename V::vec (&acc)[M][2 * P], float* c, int64_t ldc) {
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < 2 * P; ++j) V::store(c + i * ldc + j * V::kWidth, acc[i][j]);
}

// The driver's prefetch hint (gemm_kernels.h) spread evenly over a call's units, toward L2.
class HintPrefetch {
 public:
  HintPrefetch(const char* from, const char* end, int64_t units) : at_(from), end_(end) {
    const int64_t lines = end > from ? (end - from + 63) / 64 : 0;
    per_unit_ = units > 0 ? (lines + units - 1) / units : 0;
  }
  void unit() {
    for (int64_t l = 0; l < per_unit_ && at_ < end_; ++l, at_ += 64) __builtin_prefetch(at_, 0, 2);
  }

 private:
  const char* at_;
  const char* end_;
  int64_t per_unit_;
};

// The compact and super-block forms' loops and their offsets per 256 k are unrolled in the ISA units. The software model
// (tests/kernels/emulated_isa_test.cc) defines HYMOE_MODEL_NO_UNROLL: unrolled over the model's vector type, the
// super-block form's three formats' bodies took clang with the sanitizers over half an hour to compile (3 minutes
// not unrolled), the offsets' loops of Q4_K and Q5_K past a quarter of an hour more, and the model checks the
// arithmetic, not the schedule.
#define HYMOE_INT8_PRAGMA(x) _Pragma(#x)
#ifdef HYMOE_MODEL_NO_UNROLL
#define HYMOE_INT8_UNROLL(n)
#else
#define HYMOE_INT8_UNROLL(n) HYMOE_INT8_PRAGMA(GCC unroll n)
#endif

// The decode form's own prefetch (the driver gives it no hint): share `share` of kShares of the kUnitBytes unit at
// `unit`, kDecodePrefetchBytes ahead of those lines, toward L2, a line at a time. With the hardware prefetchers
// alone the core waits on a unit's lines, then computes, and the two barely overlap (docs/performance.md, "The
// decode form's prefetch"). Spread over a unit's kShares steps of work, the fetches keep pace with it.
template <int64_t kUnitBytes, int kShares>
inline void prefetch_decode_share(const uint8_t* unit, int share) {
  HYMOE_INT8_UNROLL(16)
  for (int64_t o = share * kUnitBytes / kShares / 64 * 64; o < (share + 1) * kUnitBytes / kShares; o += 64)
    __builtin_prefetch(unit + o + kDecodePrefetchBytes, 0, 2);
}

// The offsets' integer sums of one panel over a 256-k unit, shared by int8_tile's compact types with offsets and the
// super-block form: msum[i][h] (zeroed by the caller) += the sum over the unit's sub-blocks s of m * (row i's
// activation sum of s), exact in int32 (madd_i16: m in each lane's low half, the sum, |sum| <= 32 * 127, in the
// other's). The panel's m bytes are (Subs, kNr) u8 at `mins`, m itself (compact) or in each byte's high nibble (the
// super-block form's scale bytes); sub-block s's int32 sums of the rows at sums + s * sums_stride. Always inlined:
// inlined late, GCC 12 allocated the registers of the super-block form's one-row decode worse (15% more code, moves).
template <int M, int Subs, bool kHighNibble>
[[gnu::always_inline]] inline void add_offset_sums(typename V::ivec (&msum)[M][2], const uint8_t* mins,
                                                   const uint8_t* sums, int64_t sums_stride) {
  HYMOE_INT8_UNROLL(16)
  for (int s = 0; s < Subs; ++s) {
    const int32_t* sum = reinterpret_cast<const int32_t*>(sums + s * sums_stride);
    HYMOE_INT8_UNROLL(2)
    for (int h = 0; h < 2; ++h) {
      typename V::ivec m = V::widen_u8(mins + s * kNr + h * V::kWidth);
      if constexpr (kHighNibble) m = V::template shift_i32<-4>(m);
      HYMOE_INT8_UNROLL(8)
      for (int i = 0; i < M; ++i) msum[i][h] = V::madd_i16(msum[i][h], m, V::set1_i32(sum[i]));
    }
  }
}

// The offsets' float step of panel p, both halves: C += float(msum) * (-dmin * d_a), after the scale terms (int8_tile's
// compact types with offsets and the super-block form, once per 256 k).
template <int M, int P>
[[gnu::always_inline]] inline void add_offset_step(typename V::vec (&acc)[M][2 * P], int p,
                                                   const typename V::ivec (&msum)[M][2], const float* neg_dmin,
                                                   const float* da) {
  HYMOE_INT8_UNROLL(2)
  for (int h = 0; h < 2; ++h) {
    const typename V::vec nd = V::load(neg_dmin + h * V::kWidth);
    HYMOE_INT8_UNROLL(8)
    for (int i = 0; i < M; ++i)
      acc[i][2 * p + h] = V::fma(V::to_float(msum[i][h]), V::mul(nd, V::broadcast(da + i)), acc[i][2 * p + h]);
  }
}

// M rows over P panels (panel p at b + p * panel_stride bytes, its C at c + p * kNr) of a units layout: per unit
// and C element, the integer dot, then its f32 step (and the offset's).
template <WeightFormat F, int M, int P>
void int8_tile(int64_t units, const uint8_t* a, const uint8_t* b, int64_t panel_stride, float* c, int64_t ldc,
               bool accumulate, const char* prefetch, const char* prefetch_end) {
  using L = Int8Layout<F>;
  static_assert(!L::kL.compact && !L::kL.super_block);
  typename V::vec acc[M][2 * P];
  load_tile_acc<M, P>(acc, c, ldc, accumulate);
  HintPrefetch hint(prefetch, prefetch_end, units);
  for (int64_t u = 0; u < units; ++u) {
    hint.unit();
    // The decode form (one row over P panels) prefetches each panel ahead, a unit's share per unit.
    if constexpr (P > 1)
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) prefetch_decode_share<L::kBUnit, 1>(b + p * panel_stride + u * L::kBUnit, 0);
    const uint8_t* au = a + u * L::kAUnit;
    const float* da = reinterpret_cast<const float*>(au + L::kL.k_unit * kIntRows<F>);
    const int32_t* sums = reinterpret_cast<const int32_t*>(au + (L::kL.k_unit + 4) * kIntRows<F>);
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const uint8_t* bu = b + p * panel_stride + u * L::kBUnit;
      typename V::ivec s[M][2];
#pragma GCC unroll 8
      for (int i = 0; i < M; ++i) {
        if constexpr (kQ8Codes<F>) {
          const int32_t correction = -L::kL.code_bias * sums[i];
          s[i][0] = s[i][1] = V::q8_start(reinterpret_cast<const uint8_t*>(&correction));
        } else {
          s[i][0] = s[i][1] = V::set1_i32(-L::kL.code_bias * sums[i]);
        }
      }
      const typename V::ivec ones[2] = {V::set1_i32(0x00010001), V::set1_i32(0x00010001)};
      int8_groups<F, M, 0>(au, bu, s, ones);
      [[maybe_unused]] const uint8_t* factors = bu + L::kCodeBytes;  // the units layout's f32 or f16 factors
      typename V::vec d0, d1, o0, o1;  // the unit's scales, and offsets (the types with offsets)
      if constexpr (L::kL.mxfp4) {
        // 2^(e - 127) times da / 2 (exact: da is an f16 value) is llama.cpp's 2^(e - 128) * da, rounded once.
        d0 = V::e8m0_scales(bu + L::kCodeBytes);
        d1 = V::e8m0_scales(bu + L::kCodeBytes + V::kWidth);
      } else if constexpr (L::kL.half_factors) {
        const auto* half = reinterpret_cast<const uint16_t*>(factors);  // widened exactly
        d0 = V::load_f16(half);
        d1 = V::load_f16(half + V::kWidth);
        if constexpr (L::kL.offsets) {
          o0 = V::load_f16(half + kNr);
          o1 = V::load_f16(half + kNr + V::kWidth);
        }
      } else {
        const float* scale = reinterpret_cast<const float*>(factors);
        d0 = V::load(scale);
        d1 = V::load(scale + V::kWidth);
        if constexpr (L::kL.offsets) {
          o0 = V::load(scale + kNr);
          o1 = V::load(scale + kNr + V::kWidth);
        }
      }
#pragma GCC unroll 8
      for (int i = 0; i < M; ++i) {
        typename V::vec dav = V::broadcast(da + i);
        if constexpr (L::kL.mxfp4) dav = V::mul(dav, V::set1(0.5f));
        acc[i][2 * p] = V::fma(V::to_float(s[i][0]), V::mul(d0, dav), acc[i][2 * p]);
        acc[i][2 * p + 1] = V::fma(V::to_float(s[i][1]), V::mul(d1, dav), acc[i][2 * p + 1]);
        if constexpr (L::kL.offsets && gguf_int8_activation(F) == GgmlActivation::kQ8_1) {
          // q8_1 carries s = f16(d * sum) in the sums' slot (as f32): the offset's share is m * s, as ggml's.
          const typename V::vec s_a = V::broadcast(reinterpret_cast<const float*>(sums) + i);
          acc[i][2 * p] = V::fma(o0, s_a, acc[i][2 * p]);
          acc[i][2 * p + 1] = V::fma(o1, s_a, acc[i][2 * p + 1]);
        } else if constexpr (L::kL.offsets) {
          const typename V::vec sum = V::set1(static_cast<float>(sums[i]));
          acc[i][2 * p] = V::fma(V::mul(o0, dav), sum, acc[i][2 * p]);
          acc[i][2 * p + 1] = V::fma(V::mul(o1, dav), sum, acc[i][2 * p + 1]);
        }
      }
    }
  }
  store_tile_acc<M, P>(acc, c, ldc);
}

// Zeroes the integer sums of the halves [H0, H0 + NH) of P panels' columns, for M rows: where compact_halves and
// super_halves start their unit.
template <int M, int P, int H0, int NH>
[[gnu::always_inline]] inline void clear_halves(typename V::ivec (&isum)[M][2 * P]) {
  HYMOE_INT8_UNROLL(8)
  for (int i = 0; i < M; ++i)
    HYMOE_INT8_UNROLL(4)
    for (int p = 0; p < P; ++p)
      for (int h = H0; h < H0 + NH; ++h) isum[i][2 * p + h] = V::set1_i32(0);
}

// The halves [H0, H0 + NH) of the columns of P compact panels (panel p at ub + p * panel_stride) over a 256-k unit
// (compact_int8_tile): isum[i][2p + h] = the sum over the sub-units of sc * dot. The dot's chain starts at
// -code_bias * the row's sum of the sub-unit (Q6_K's 32; IQ4_XS's codes go the Q8_0 way, against -128 * sum), then
// vpmulld by sc. The vpmaddubsw idiom of a code bias 0 (Q4_K, Q5_K on AVX2) widens its pair sums by sc itself
// instead of by 1: no multiply, as llama.cpp's AVX2 dot product does. The panels innermost: the chains of the P
// panels are independent and interleave, and each panel's unit is read (and prefetched) a share at a time, all P
// together.
template <WeightFormat F, int M, int P, int H0, int NH>
[[gnu::always_inline]] inline void compact_halves(const uint8_t* a256, const uint8_t* ub, int64_t panel_stride,
                                                  typename V::ivec (&isum)[M][2 * P], HintPrefetch& hint) {
  using L = Int8Layout<F>;
  using ivec = typename V::ivec;
  constexpr GgufCompactLayout kC = gguf_compact_layout(L::kL, kNr);
  constexpr bool kScaledPairs = V::kPairSums && kPairChunk<F> > 1 && L::kL.code_bias == 0;
  clear_halves<M, P, H0, NH>(isum);
  HYMOE_INT8_UNROLL(2)
  for (int sub = 0; sub < kC.subs; ++sub) {
    hint.unit();
    const uint8_t* au = a256 + sub * L::kAUnit;
    [[maybe_unused]] const int32_t* sums = reinterpret_cast<const int32_t*>(au + (L::kL.k_unit + 4) * kIntRows<F>);
    HYMOE_INT8_UNROLL(4)
    for (int p = 0; p < P; ++p) {
      const uint8_t* pu = ub + p * panel_stride;
      if constexpr (P > 1) prefetch_decode_share<kC.unit_bytes, 2 * kC.subs / NH>(pu, H0 * kC.subs + sub);
      const uint8_t* bu = pu + sub * kC.code_bytes;
      ivec sc[2];
      for (int h = H0; h < H0 + NH; ++h) sc[h] = V::widen_i8(pu + kC.scales + sub * kNr + h * V::kWidth);
      ivec t[M][2];  // the halves' sums or chains, as int8_groups takes them
      if constexpr (kScaledPairs) {
        for (int h = H0; h < H0 + NH; ++h) sc[h] = V::or_bytes(sc[h], V::template shift_i32<16>(sc[h]));  // 0 <= sc < 64
        HYMOE_INT8_UNROLL(8)
        for (int i = 0; i < M; ++i)
          for (int h = H0; h < H0 + NH; ++h) t[i][h] = isum[i][2 * p + h];
        int8_groups<F, M, 0, H0, NH>(au, bu, t, sc);
        HYMOE_INT8_UNROLL(8)
        for (int i = 0; i < M; ++i)
          for (int h = H0; h < H0 + NH; ++h) isum[i][2 * p + h] = t[i][h];
      } else {
        HYMOE_INT8_UNROLL(8)
        for (int i = 0; i < M; ++i) {
          ivec start;
          if constexpr (kQ8Codes<F>) {
            const int32_t correction = -L::kL.code_bias * sums[i];
            start = V::q8_start(reinterpret_cast<const uint8_t*>(&correction));
          } else {
            start = V::set1_i32(-L::kL.code_bias * sums[i]);
          }
          for (int h = H0; h < H0 + NH; ++h) t[i][h] = start;
        }
        const ivec ones[2] = {V::set1_i32(0x00010001), V::set1_i32(0x00010001)};
        int8_groups<F, M, 0, H0, NH>(au, bu, t, ones);
        HYMOE_INT8_UNROLL(8)
        for (int i = 0; i < M; ++i)
          for (int h = H0; h < H0 + NH; ++h) isum[i][2 * p + h] = V::mul_add_i32(isum[i][2 * p + h], t[i][h], sc[h]);
      }
    }
  }
}

// The scale step of the halves [H0, H0 + NH): C += float(isum) * (d * d_a), for each panel.
template <int M, int P, int H0, int NH>
[[gnu::always_inline]] inline void compact_scale_step(typename V::vec (&acc)[M][2 * P],
                                                      const typename V::ivec (&isum)[M][2 * P], const uint8_t* d0,
                                                      int64_t panel_stride, const float* da) {
  HYMOE_INT8_UNROLL(4)
  for (int p = 0; p < P; ++p)
    for (int h = H0; h < H0 + NH; ++h) {
      const typename V::vec d = V::load(reinterpret_cast<const float*>(d0 + p * panel_stride) + h * V::kWidth);
      HYMOE_INT8_UNROLL(8)
      for (int i = 0; i < M; ++i)
        acc[i][2 * p + h] = V::fma(V::to_float(isum[i][2 * p + h]), V::mul(d, V::broadcast(da + i)), acc[i][2 * p + h]);
    }
}

// The compact factors' form (GgufPanelLayout::compact: Q4_K, Q5_K, Q6_K, IQ4_XS), M rows over P panels as
// int8_tile, with llama.cpp's arithmetic (ggml_vec_dot_q4_K_q8_K and its kin): per unit of 256 k, panel and C
// element, isum = sum over the sub-blocks s of sc_s * (sum of (u - code bias) * q) and, with offsets, msum = sum
// over s of m_s * (the activations' sum of s), both exact int32 (|isum| <= 16 * 128 * 16 * 32 * 127 < 2^31), then
// c = fma(float(isum), d * d_a, c) and c = fma(float(msum), -dmin * d_a, c): two float steps per 256 k where one
// per sub-block took eight (Q6_K: sixteen), the same bits for any blocking, rows and threads.
template <WeightFormat F, int M, int P>
void compact_int8_tile(int64_t units, const uint8_t* a, const uint8_t* b, int64_t panel_stride, float* c,
                       int64_t ldc, bool accumulate, const char* prefetch, const char* prefetch_end) {
  using L = Int8Layout<F>;
  constexpr GgufCompactLayout kC = gguf_compact_layout(L::kL, kNr);
  typename V::vec acc[M][2 * P];
  load_tile_acc<M, P>(acc, c, ldc, accumulate);
  // Tiles take one half of the columns at a time, and each half's scale step as soon as its sums are done, which
  // frees their registers for the other half: at six rows the int32 sums and chains beside the C accumulators fit
  // the registers. One row takes both halves together: its 2P chains interleave (one half's P measured 7% slower
  // hot for Q4_K).
  constexpr int kHalves = M == 1 ? 2 : 1;
  HintPrefetch hint(prefetch, prefetch_end, units * kC.subs * (2 / kHalves));
  for (int64_t u = 0; u < units; ++u) {
    const uint8_t* a256 = a + u * kC.subs * L::kAUnit;
    const float* da = reinterpret_cast<const float*>(a256 + L::kL.k_unit * kIntRows<F>);  // q8_K's d, per 256 k
    const uint8_t* ub = b + u * kC.unit_bytes;
    typename V::ivec isum[M][2 * P];
    if constexpr (kHalves == 2) {
      compact_halves<F, M, P, 0, 2>(a256, ub, panel_stride, isum, hint);
      compact_scale_step<M, P, 0, 2>(acc, isum, ub + kC.d, panel_stride, da);
    } else {
      compact_halves<F, M, P, 0, 1>(a256, ub, panel_stride, isum, hint);
      compact_scale_step<M, P, 0, 1>(acc, isum, ub + kC.d, panel_stride, da);
      compact_halves<F, M, P, 1, 1>(a256, ub, panel_stride, isum, hint);
      compact_scale_step<M, P, 1, 1>(acc, isum, ub + kC.d, panel_stride, da);
    }
    if constexpr (L::kL.offsets) {
      HYMOE_INT8_UNROLL(4)
      for (int p = 0; p < P; ++p) {
        const uint8_t* pu = ub + p * panel_stride;
        typename V::ivec msum[M][2];
        HYMOE_INT8_UNROLL(8)
        for (int i = 0; i < M; ++i) msum[i][0] = msum[i][1] = V::set1_i32(0);
        add_offset_sums<M, kC.subs, false>(msum, pu + kC.mins, a256 + (L::kL.k_unit + 4) * kIntRows<F>, L::kAUnit);
        add_offset_step<M, P>(acc, p, msum, reinterpret_cast<const float*>(pu + kC.neg_dmin), da);
      }
    }
  }
  store_tile_acc<M, P>(acc, c, ldc);
}

// Code u + 4 in the bytes whose third-bit plane byte (`high`) has bit B set: V's add_where_bit where it has one
// (AVX-512: a vptestmb and a masked vpaddb), else the bit shifted to bit 2 and or-ed in (u < 4).
template <int B, typename Vt = V>
inline typename V::ivec add_third_bit(typename V::ivec u, typename V::ivec high) {
  if constexpr (requires { Vt::template add_where_bit<B, 4>(u, high); })
    return Vt::template add_where_bit<B, 4>(u, high);
  else
    return V::or_bytes(u, V::and_bytes(V::template shift_bytes<2 - B>(high), 4));
}

// Q3_K's 3-bit codes (u = q + 4), signed scales and no offsets.
template <WeightFormat F>
constexpr bool kSuperThreeBit = gguf_int8_layout(F).code_bits == 3;
// The ternary types' sc = m = 1 (gguf_super_unit_factors): isum is the plain sum of the sub-blocks' dots, so the
// dots chain into it directly, and msum is the 256-block's sum of q, one integer a row for every column. The
// same integers as the general form, so the same bits.
template <WeightFormat F>
constexpr bool kSuperUnitFactors = gguf_super_unit_factors(F);

// The halves [H0, H0 + NH) of the columns of P super-block panels (panel p at ub + p * panel_stride) over a 256-k
// unit (super_int8_tile): isum[i][2p + h] = the sum over the sub-blocks of sc * dot. The panels innermost, as
// compact_halves: one row's chains of the P panels interleave.
template <WeightFormat F, int M, int P, int H0, int NH>
[[gnu::always_inline]] inline void super_halves(const uint8_t* au, const uint8_t* ub, int64_t panel_stride,
                                                typename V::ivec (&isum)[M][2 * P]) {
  using ivec = typename V::ivec;
  constexpr int kSubs = kQ8KBlock / 16;
  constexpr GgufSuperLayout kL = gguf_super_layout(gguf_int8_layout(F), kNr);
  constexpr int64_t kSubA = (16 + 8) * int64_t{kIntRows<F>};
  constexpr bool kThreeBit = kSuperThreeBit<F>, kUnitFactors = kSuperUnitFactors<F>;
  clear_halves<M, P, H0, NH>(isum);
  HYMOE_INT8_UNROLL(2)
  for (int s = 0; s < kSubs; ++s) {
    const uint8_t* as = au + s * kSubA;
    // 3-bit codes: each chain starts at -4 * the row's sum of the sub-block (the code bias; int16, in the low half,
    // against pair sums).
    [[maybe_unused]] ivec start[M];
    if constexpr (kThreeBit)
      HYMOE_INT8_UNROLL(8)
      for (int i = 0; i < M; ++i) {
        const int32_t bias = -4 * reinterpret_cast<const int32_t*>(as + 20 * kIntRows<F>)[i];
        start[i] = V::set1_i32(V::kPairSums ? bias & 0xffff : bias);
      }
    HYMOE_INT8_UNROLL(4)
    for (int p = 0; p < P; ++p) {
      const uint8_t* bu = ub + p * panel_stride;
      // The decode form prefetches each panel ahead itself, as int8_tile's does, a share of the unit per sub-block
      // (and half) so the fetches spread over the unit's work.
      if constexpr (P > 1) prefetch_decode_share<kL.unit_bytes, 2 * kSubs / NH>(bu, H0 * kSubs + s);
      [[maybe_unused]] ivec high;
      if constexpr (kThreeBit) high = V::load_bytes(bu + kL.high + s * kNr / 2 * 4);
      for (int h = H0; h < H0 + NH; ++h) {  // a constant once unrolled: one form a half
        const ivec raw = V::load_bytes(bu + (s * kNr + h * V::kWidth) * 4);
        ivec w0 = V::and_bytes(raw, 3), w1 = V::and_bytes(V::template shift_bytes<-2>(raw), 3);
        ivec w2 = V::and_bytes(V::template shift_bytes<-4>(raw), 3);
        ivec w3 = V::and_bytes(V::template shift_bytes<-6>(raw), 3);
        if constexpr (kThreeBit) {
          w0 = h == 0 ? add_third_bit<0>(w0, high) : add_third_bit<4>(w0, high);
          w1 = h == 0 ? add_third_bit<1>(w1, high) : add_third_bit<5>(w1, high);
          w2 = h == 0 ? add_third_bit<2>(w2, high) : add_third_bit<6>(w2, high);
          w3 = h == 0 ? add_third_bit<3>(w3, high) : add_third_bit<7>(w3, high);
        }
        ivec sc;
        if constexpr (kUnitFactors) sc = V::set1_i32(V::kPairSums ? 0x00010001 : 1);
        else if constexpr (kThreeBit) sc = V::and_i32(V::widen_i8(bu + kL.scales + s * kNr + h * V::kWidth), 0xffff);
        else sc = V::and_i32(V::widen_u8(bu + kL.scales + s * kNr + h * V::kWidth), 15);
        if constexpr (V::kPairSums && !kUnitFactors) sc = V::or_bytes(sc, V::template shift_i32<16>(sc));
        HYMOE_INT8_UNROLL(8)
        for (int i = 0; i < M; ++i) {
          const ivec x0 = V::broadcast4(as + (0 * kIntRows<F> + i) * 4);
          const ivec x1 = V::broadcast4(as + (1 * kIntRows<F> + i) * 4);
          const ivec x2 = V::broadcast4(as + (2 * kIntRows<F> + i) * 4);
          const ivec x3 = V::broadcast4(as + (3 * kIntRows<F> + i) * 4);
          ivec& sum = isum[i][2 * p + h];
          if constexpr (V::kPairSums) {
            ivec dot = V::add_i16(V::add_i16(V::pair_sums(w0, x0), V::pair_sums(w1, x1)),
                                  V::add_i16(V::pair_sums(w2, x2), V::pair_sums(w3, x3)));
            if constexpr (kThreeBit) dot = V::add_i16(dot, start[i]);
            sum = V::madd_i16(sum, dot, sc);
          } else if constexpr (kUnitFactors) {
            sum = V::u_dot4(V::u_dot4(V::u_dot4(V::u_dot4(sum, w0, x0), w1, x1), w2, x2), w3, x3);
          } else {
            const ivec dot = V::u_dot4(
                V::u_dot4(V::u_dot4(V::u_dot4(kThreeBit ? start[i] : V::set1_i32(0), w0, x0), w1, x1), w2, x2), w3,
                x3);
            sum = V::madd_i16(sum, dot, sc);
          }
        }
      }
    }
  }
}

// The super-block form (GgufPanelLayout::super_block), M rows over P panels as int8_tile. Per unit of 256 k,
// panel and sub-block s: the four groups' 2-bit codes come out of one byte plane by a shift and a mask each (3-bit
// codes: plus 4 where the group's bit of the third-bit plane is set, bit g for the first nr / 2 columns and 4 + g
// for the others), dot = the sub-block's sum of (u - code bias) * q (int32 by vpdpbusd, or the int16 pair sums of
// vpmaddubsw added over the four groups: at most 4 * 2 * 7 * 127; the code bias enters as -4 * the activations' sum
// of the sub-block, |sum| <= 16 * 127, the start of the chain, in the low half against pair sums), then isum += dot *
// sc by vpmaddwd / vpdpwssd (|dot| <= 16 * 4 * 127 fits int16; sc sits in the low half of each lane, and in both
// halves against pair sums). For the types with offsets, a second pass over the scale bytes takes msum += m * (the
// activations' sum of sub-block s). Both are exact integers (|isum| <= 16 * 32 * 16 * 4 * 127 < 2^24), so every
// kernel reaches the same ones; then per C element c = fma(float(isum), d * d_a, c) and c = fma(float(msum), -dmin
// * d_a, c): one chain over the super-blocks in increasing k, the bits independent of blocking, rows and threads.
template <WeightFormat F, int M, int P>
void super_int8_tile(int64_t units, const uint8_t* a, const uint8_t* b, int64_t panel_stride, float* c, int64_t ldc,
                     bool accumulate, const char* prefetch, const char* prefetch_end) {
  constexpr int kSubs = kQ8KBlock / 16;
  constexpr GgufSuperLayout kL = gguf_super_layout(gguf_int8_layout(F), kNr);
  constexpr int64_t kBUnit = kL.unit_bytes, kSubA = (16 + 8) * int64_t{kIntRows<F>};
  constexpr bool kThreeBit = kSuperThreeBit<F>, kUnitFactors = kSuperUnitFactors<F>;
  static_assert(!kThreeBit || (gguf_int8_layout(F).code_bias == 4 && !gguf_int8_layout(F).offsets));
  typename V::vec acc[M][2 * P];
  load_tile_acc<M, P>(acc, c, ldc, accumulate);
  HintPrefetch hint(prefetch, prefetch_end, units);
  for (int64_t u = 0; u < units; ++u) {
    hint.unit();
    const uint8_t* au = a + u * kSubs * kSubA;
    const float* da = reinterpret_cast<const float*>(au + 16 * kIntRows<F>);  // the 256-block's d, in every sub-unit
    const uint8_t* ub = b + u * kBUnit;
    // As the compact form: tiles a half of the columns at a time, its scale step at once (the halves inside each
    // sub-block spilled the 4-row tiles' accumulators); one row both halves, its 2P chains interleaved.
    typename V::ivec isum[M][2 * P];
    if constexpr (M == 1) {
      super_halves<F, M, P, 0, 2>(au, ub, panel_stride, isum);
      compact_scale_step<M, P, 0, 2>(acc, isum, ub + kL.d, panel_stride, da);
    } else {
      super_halves<F, M, P, 0, 1>(au, ub, panel_stride, isum);
      compact_scale_step<M, P, 0, 1>(acc, isum, ub + kL.d, panel_stride, da);
      super_halves<F, M, P, 1, 1>(au, ub, panel_stride, isum);
      compact_scale_step<M, P, 1, 1>(acc, isum, ub + kL.d, panel_stride, da);
    }
    if constexpr (!kThreeBit) {  // 3-bit codes have no offsets
      [[maybe_unused]] int32_t block_sums[M] = {};
      if constexpr (kUnitFactors)
        for (int s = 0; s < kSubs; ++s)
          HYMOE_INT8_UNROLL(8)
          for (int i = 0; i < M; ++i) block_sums[i] += reinterpret_cast<const int32_t*>(au + s * kSubA + 20 * kIntRows<F>)[i];
      HYMOE_INT8_UNROLL(4)
      for (int p = 0; p < P; ++p) {
        const uint8_t* bu = ub + p * panel_stride;
        typename V::ivec msum[M][2];
        if constexpr (kUnitFactors) {
          HYMOE_INT8_UNROLL(8)
          for (int i = 0; i < M; ++i) msum[i][0] = msum[i][1] = V::set1_i32(block_sums[i]);
        } else {
          HYMOE_INT8_UNROLL(8)
          for (int i = 0; i < M; ++i) msum[i][0] = msum[i][1] = V::set1_i32(0);
          add_offset_sums<M, kSubs, true>(msum, bu + kL.scales, au + 20 * kIntRows<F>, kSubA);  // m: the high nibble
        }
        add_offset_step<M, P>(acc, p, msum, reinterpret_cast<const float*>(bu + kL.neg_dmin), da);
      }
    }
  }
  store_tile_acc<M, P>(acc, c, ldc);
}
#undef HYMOE_INT8_UNROLL
#undef HYMOE_INT8_PRAGMA

template <WeightFormat F, int M = kIntRows<F>>
void int8_rows(int m, int64_t units, const uint8_t* a, const uint8_t* b, float* c, int64_t ldc, bool accumulate,
               const char* prefetch, const char* prefetch_end) {
  if constexpr (M >= 1) {
    if (m == M) {
      if constexpr (gguf_int8_layout(F).super_block)
        return super_int8_tile<F, M, 1>(units, a, b, 0, c, ldc, accumulate, prefetch, prefetch_end);
      else if constexpr (gguf_int8_layout(F).compact)
        return compact_int8_tile<F, M, 1>(units, a, b, 0, c, ldc, accumulate, prefetch, prefetch_end);
      else
        return int8_tile<F, M, 1>(units, a, b, 0, c, ldc, accumulate, prefetch, prefetch_end);
    }
    return int8_rows<F, M - 1>(m, units, a, b, c, ldc, accumulate, prefetch, prefetch_end);
  }
}

// A grid type (GgufPanelLayout::grid): per unit of 256 k, the panel's nr blocks expanded into the registry line's
// int8 layout in an L1 buffer, then the kernels above on it over that unit's 256 / k_unit sub-units, accumulating
// after the first: every C element is still one chain over the sub-units in increasing k.
template <WeightFormat F>
void grid_int8_rows(int m, int64_t units, const uint8_t* a, const uint8_t* b, float* c, int64_t ldc, bool accumulate,
                    const char* prefetch, const char* prefetch_end) {
  using L = Int8Layout<F>;
  constexpr int kSubs = kQ8KBlock / L::kL.k_unit;
  constexpr int64_t kBlockBytes = gguf_grid_block_bytes(L::kL.ggml_type);
  alignas(64) uint8_t expanded[kSubs * L::kBUnit];
  const int64_t lines = prefetch_end > prefetch ? (prefetch_end - prefetch + 63) / 64 : 0;
  const int64_t share = units > 0 ? (lines + units - 1) / units * 64 : 0;
  for (int64_t u = 0; u < units; ++u) {
    expand_grid_unit_int8<L::kL.ggml_type, L::kL.k_unit>(b + u * kNr * kBlockBytes, kNr, expanded);
    const char* pf = std::min(prefetch + u * share, prefetch_end);
    int8_rows<F>(m, kSubs, a + u * kSubs * L::kAUnit, expanded, c, ldc, accumulate || u > 0, pf,
                 std::min(pf + share, prefetch_end));
  }
}

// A grid type's expanded form (GemmFormat::gemm_expanding, gemm_expanded): the first micro-tile of a tile expands
// the block into the driver's per-thread buffer as it computes, the others run the body on that buffer; one call
// over all the units' sub-units, the same chains as grid_int8_rows.
template <WeightFormat F>
void gemm_format_gguf_int8_expanding(int m, int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool acc,
                                     const void* pf, int64_t pf_bytes, void* expanded) {
  using L = Int8Layout<F>;
  constexpr int kSubs = kQ8KBlock / L::kL.k_unit;
  constexpr int64_t kBlockBytes = gguf_grid_block_bytes(L::kL.ggml_type);
  const int64_t units = (kc + kQ8KBlock - 1) / kQ8KBlock;
  auto* out = static_cast<uint8_t*>(expanded);
  for (int64_t u = 0; u < units; ++u)
    expand_grid_unit_int8<L::kL.ggml_type, L::kL.k_unit>(static_cast<const uint8_t*>(b) + u * kNr * kBlockBytes, kNr,
                                                          out + u * kSubs * L::kBUnit);
  const char* p = static_cast<const char*>(pf);
  int8_rows<F>(m, units * kSubs, static_cast<const uint8_t*>(a), out, c, ldc, acc, p, p ? p + pf_bytes : p);
}
template <WeightFormat F>
void gemm_format_gguf_int8_expanded(int m, int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool acc,
                                    const void* pf, int64_t pf_bytes) {
  constexpr int kSub = Int8Layout<F>::kL.k_unit;
  const char* p = static_cast<const char*>(pf);
  int8_rows<F>(m, (kc + kQ8KBlock - 1) / kQ8KBlock * (kQ8KBlock / kSub), static_cast<const uint8_t*>(a),
               static_cast<const uint8_t*>(b), c, ldc, acc, p, p ? p + pf_bytes : p);
}
// The expanded form's entries of a GemmFormat: nullptr and 0 for every format but the grid types.
template <WeightFormat F>
constexpr GemmExpandingFn int8_expanding() {
  if constexpr (gguf_int8_layout(F).grid) return gemm_format_gguf_int8_expanding<F>;
  else return nullptr;
}
template <WeightFormat F>
constexpr GemmFn int8_expanded() {
  if constexpr (gguf_int8_layout(F).grid) return gemm_format_gguf_int8_expanded<F>;
  else return nullptr;
}
template <WeightFormat F>
constexpr int64_t int8_expanded_unit_bytes() {
  if constexpr (gguf_int8_layout(F).grid) return kQ8KBlock / Int8Layout<F>::kL.k_unit * Int8Layout<F>::kBUnit;
  else return 0;
}

// The GemmFormat entry points: kc counts k (a whole number of units: GGUF rows are whole blocks).
template <WeightFormat F>
void gemm_format_gguf_int8(int m, int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool acc,
                           const void* pf, int64_t pf_bytes) {
  constexpr int kUnit = k_unit(F);
  const char* p = static_cast<const char*>(pf);
  if constexpr (gguf_int8_layout(F).grid)
    grid_int8_rows<F>(m, (kc + kUnit - 1) / kUnit, static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b), c,
                      ldc, acc, p, p ? p + pf_bytes : p);
  else
    int8_rows<F>(m, (kc + kUnit - 1) / kUnit, static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b), c, ldc,
                 acc, p, p ? p + pf_bytes : p);
}
// One row over kFewRowsPanels[1] panels (few_rows_max = 1): the decode case.
template <WeightFormat F>
void gemm_format_gguf_int8_few(int m, int64_t kc, const void* a, const void* b, int64_t panel_stride_bytes, float* c,
                               int64_t ldc, bool acc) {
  constexpr int kUnit = k_unit(F);
  (void)m;  // always 1
  if constexpr (gguf_int8_layout(F).grid) {
    // A panel at a time: the expansion, not the chains, bounds a grid type's decode.
    for (int p = 0; p < kFewRowsPanels[1]; ++p)
      grid_int8_rows<F>(1, (kc + kUnit - 1) / kUnit, static_cast<const uint8_t*>(a),
                        static_cast<const uint8_t*>(b) + p * panel_stride_bytes, c + p * kNr, ldc, acc, nullptr,
                        nullptr);
  } else if constexpr (gguf_int8_layout(F).super_block) {
    super_int8_tile<F, 1, kFewRowsPanels[1]>((kc + kUnit - 1) / kUnit, static_cast<const uint8_t*>(a),
                                             static_cast<const uint8_t*>(b), panel_stride_bytes, c, ldc, acc, nullptr,
                                             nullptr);
  } else if constexpr (gguf_int8_layout(F).compact) {
    compact_int8_tile<F, 1, kFewRowsPanels[1]>((kc + kUnit - 1) / kUnit, static_cast<const uint8_t*>(a),
                                               static_cast<const uint8_t*>(b), panel_stride_bytes, c, ldc, acc,
                                               nullptr, nullptr);
  } else {
    int8_tile<F, 1, kFewRowsPanels[1]>((kc + kUnit - 1) / kUnit, static_cast<const uint8_t*>(a),
                                       static_cast<const uint8_t*>(b), panel_stride_bytes, c, ldc, acc, nullptr,
                                       nullptr);
  }
}

// The activation packing of format F (AVX2's quantizers: every ISA that includes this header has AVX2).
template <WeightFormat F>
constexpr PackActivationsFn int8_pack_a() {
  static_assert(gguf_int8_activation(F) != GgmlActivation::kQ8_1 || gguf_int8_layout(F).code_bias == 0,
                "q8_1 units hold s, not the codes' sum a code bias would need");
  if constexpr (gguf_int8_activation(F) == GgmlActivation::kQ8_0) return pack_activations_ggml_q8_0__avx2;
  else if constexpr (gguf_int8_activation(F) == GgmlActivation::kQ8_1) return pack_activations_ggml_q8_1__avx2;
  else if constexpr (gguf_int8_layout(F).k_unit == 16) return pack_activations_ggml_q8_k16__avx2;
  else return pack_activations_ggml_q8_k32__avx2;
}
