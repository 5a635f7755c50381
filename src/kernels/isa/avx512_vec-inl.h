// The AVX-512F/BW vector traits the micro-kernel bodies (gemm_microkernel-inl.h) are written over, shared by the
// three AVX-512 units (gemm_avx512.cc, gemm_avx512vnni.cc, gemm_avx512bf16.cc), each of which derives its V from
// V512 and adds what its extra instructions change. Include only inside an anonymous namespace, in a unit built
// with at least -mavx512f -mavx512bw -mavx512vl -mfma.

struct V512 {
  using vec = __m512;
  using ivec = __m512i;
  static constexpr int kWidth = 16;
  static vec zero() { return _mm512_setzero_ps(); }
  static vec load(const float* p) { return _mm512_loadu_ps(p); }
  // Keeps a loaded vector in its register: GCC folds the load into every FMA that uses the vector, even with 32
  // registers free to hold it (dot_rows: each token's vector, loaded once for three FMAs, became three loads).
  static void pin(vec& v) { asm("" : "+v"(v)); }
  static vec load_bf16(const uint16_t* p) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  static vec broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static void store(float* p, vec v) { _mm512_storeu_ps(p, v); }
  static vec fma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
  static vec add(vec a, vec b) { return _mm512_add_ps(a, b); }
  static vec sub(vec a, vec b) { return _mm512_sub_ps(a, b); }
  static vec mul(vec a, vec b) { return _mm512_mul_ps(a, b); }
  static vec div(vec a, vec b) { return _mm512_div_ps(a, b); }
  static vec min(vec a, vec b) { return _mm512_min_ps(a, b); }
  static vec max(vec a, vec b) { return _mm512_max_ps(a, b); }
  static vec set1(float v) { return _mm512_set1_ps(v); }
  static vec round_nearest(vec v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static vec pow2(vec n) {
    const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_castsi512_ps(bits);
  }
  static vec to_float(ivec v) { return _mm512_cvtepi32_ps(v); }
  static ivec broadcast4(const uint8_t* p) {
    int32_t v;
    __builtin_memcpy(&v, p, sizeof v);
    return _mm512_set1_epi32(v);
  }

  // q8 without VNNI: vpmaddubsw multiplies unsigned by signed bytes and saturates its pair sums to int16, so the
  // weights go in as |w| (<= 127) and their sign moves onto the activations (a masked negation; AVX-512 has no
  // vpsignb): each pair sum is at most 2 * 127 * 127 < 2^15. vpmaddwd by ones widens the pairs to int32.
  struct q8w {
    __m512i magnitude;
    __mmask64 negative;
  };
  static q8w q8_weights(const uint8_t* p) { return q8_weights_of(_mm512_loadu_si512(p)); }
  static q8w q8_weights_of(__m512i stored) {  // stored = w + 128
    const __m512i w = _mm512_xor_si512(stored, _mm512_set1_epi8(static_cast<char>(0x80)));
    return {_mm512_abs_epi8(w), _mm512_movepi8_mask(w)};
  }
  static ivec q8_start(const uint8_t*) { return _mm512_setzero_si512(); }
  static ivec q8_dot4(ivec acc, q8w w, ivec x) {
    const __m512i signed_x = _mm512_mask_sub_epi8(x, w.negative, _mm512_setzero_si512(), x);
    const __m512i pairs = _mm512_maddubs_epi16(w.magnitude, signed_x);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(pairs, _mm512_set1_epi16(1)));
  }
  // GGUF int8 panels (gemm_gguf_int8-inl.h): unsigned codes u <= 63 by vpmaddubsw (pair sums <= 2 * 63 * 128).
  static ivec load_bytes(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static ivec and_bytes(ivec v, int mask) { return _mm512_and_si512(v, _mm512_set1_epi8(static_cast<char>(mask))); }
  static ivec or_bytes(ivec a, ivec b) { return _mm512_or_si512(a, b); }
  template <int S>
  static ivec shift_bytes(ivec v) {
    if constexpr (S > 0) return _mm512_slli_epi16(v, S);
    else if constexpr (S < 0) return _mm512_srli_epi16(v, -S);
    else return v;
  }
  static ivec u_dot4(ivec acc, ivec u, ivec x) {
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, x), _mm512_set1_epi16(1)));
  }
  static ivec set1_i32(int v) { return _mm512_set1_epi32(v); }
  static constexpr bool kPairSums = true;
  static ivec pair_sums(ivec u, ivec x) { return _mm512_maddubs_epi16(u, x); }
  static ivec add_i16(ivec a, ivec b) { return _mm512_add_epi16(a, b); }
  // The super-block form (Q2_K, TQ1_0, TQ2_0): kWidth bytes zero-extended to int32 lanes, int32 masks and
  // shifts, and acc plus vpmaddwd's sums of adjacent int16 products (vpdpwssd with VNNI).
  static ivec widen_u8(const uint8_t* p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  // The f16 factors (GgufPanelLayout::half_factors): kWidth f16 values widened, exactly.
  static vec load_f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  // The compact factors' signed scales: kWidth bytes sign-extended to int32 lanes.
  static ivec widen_i8(const uint8_t* p) {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static ivec and_i32(ivec v, int mask) { return _mm512_and_si512(v, _mm512_set1_epi32(mask)); }
  // The compact factors' integer scale step: acc + a * b, int32 lanes (vpmulld, vpaddd).
  static ivec mul_add_i32(ivec acc, ivec a, ivec b) { return _mm512_add_epi32(acc, _mm512_mullo_epi32(a, b)); }
  template <int S>
  static ivec shift_i32(ivec v) {
    if constexpr (S > 0) return _mm512_slli_epi32(v, S);
    else return _mm512_srli_epi32(v, -S);
  }
  static ivec madd_i16(ivec acc, ivec a, ivec b) { return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b)); }
  // The 5-bit codes' fifth bit: u + Add in the bytes whose high-plane byte has bit B set (u < 16, Add = 16: an or):
  // a vptestmb and a masked vpaddb where the portable form takes a 16-bit shift, a mask and an or; the shift
  // issues on one port only, one of the two vpdpbusd takes (docs/performance.md, "Q4_K's and Q5_K's offsets
  // per 256 k, and the fifth bit").
  template <int B, int Add>
  static ivec add_where_bit(ivec u, ivec high) {
    const __mmask64 set = _mm512_test_epi8_mask(high, _mm512_set1_epi8(static_cast<char>(1 << B)));
    return _mm512_mask_add_epi8(u, set, u, _mm512_set1_epi8(Add));
  }
  // MXFP4: the nibble lookup (vpshufb within each 128-bit lane) and the E8M0 exponents as f32 bits
  // max(e << 23, 2^-127's bits 0x400000).
  static ivec table16(const uint8_t* t) {
    return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t)));
  }
  static ivec lookup16(ivec table, ivec idx) { return _mm512_shuffle_epi8(table, idx); }
  static vec e8m0_scales(const uint8_t* p) {
    const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm512_castsi512_ps(_mm512_max_epi32(_mm512_slli_epi32(e, 23), _mm512_set1_epi32(0x400000)));
  }
};

// With AVX512_VNNI: vpdpbusd takes the biased weights w + 128 as its unsigned operand and the activations as the
// signed one; the block's accumulator starts at -128 * sum(x) (packed with the activations), which cancels the bias
// exactly.
struct V512Vnni : V512 {
  using q8w = __m512i;
  static q8w q8_weights(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static q8w q8_weights_of(__m512i stored) { return stored; }
  static ivec q8_start(const uint8_t* correction) { return broadcast4(correction); }
  static ivec q8_dot4(ivec acc, q8w w, ivec x) { return _mm512_dpbusd_epi32(acc, w, x); }
  static ivec u_dot4(ivec acc, ivec u, ivec x) { return _mm512_dpbusd_epi32(acc, u, x); }
  static ivec madd_i16(ivec acc, ivec a, ivec b) { return _mm512_dpwssd_epi32(acc, a, b); }
  static constexpr bool kPairSums = false;  // vpdpbusd sums in int32 directly
};
