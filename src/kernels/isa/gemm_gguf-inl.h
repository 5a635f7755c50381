// The GGUF-format micro-kernels (gemm_kernels.h, GgufPanelLayout), written over a vector-traits type V like
// gemm_microkernel-inl.h and included after it, in the same anonymous namespace, by an ISA's unit. Per sub-block
// of k_unit k, each column's f32 scale (and offset) is loaded once; per k, the panel row's codes are widened to
// int32, converted to f32 and turned into the exact weights, w = fma(scale, code, offset) (or scale * code), in
// registers; then the f32 FMA chain of the f32 format: every C element is one chain in increasing k, the same
// bits as the f32 kernel on the exactly decoded weights, for any blocking or thread count.
//
// V provides, beyond gemm_microkernel-inl.h's: codes_s8(const uint8_t* p, ivec& lo, ivec& hi) (2 * kWidth signed
// bytes to int32: columns 0..kWidth-1 and kWidth..2kWidth-1), codes_u4(const uint8_t* p, ivec& lo, ivec& hi)
// (kWidth bytes: low nibbles to lo, high nibbles to hi), codes_u4_high<B>(p, lo, hi) (codes_u4, then the plane of
// B high bits per column after the nibbles: column j's at bit j * B, shifted over bit 4), codes_lookup4(p, values,
// lo, hi) (codes_u4's nibbles as indices into 16 int8 values, sign-extended), sub_i32(ivec, int).
// The including unit defines kGgufMr.
//
// Register budget (AVX2, 4 rows): 8 accumulators, 2 weight vectors, 1 broadcast, and the scales and offsets
// (4; the compiler may read them from L1 as memory operands), plus the codes' temporaries: 16 ymm.

// M rows over P panels (panel p at b + p * panel_stride bytes, its C at c + p * kNr). P > 1 is the decode form:
// one row has only 2 chains per panel, too few to cover the FMA latency; 4 panels give 8.
template <WeightFormat F, int M, int P>
void gguf_tile(int64_t units, const float* a, const uint8_t* b, int64_t panel_stride, float* c, int64_t ldc,
               bool accumulate, const char* prefetch, const char* prefetch_end) {
  constexpr GgufPanelLayout kL = gguf_panel_layout(F);
  constexpr int64_t kRowBytes = kNr * kL.code_bits / 8, kCodeBytes = kL.k_unit * kRowBytes;
  constexpr int64_t kUnitBytes = gguf_layout_unit_bytes(kL, kNr);  // a grid type's expanded units
  typename V::vec acc[M][2 * P];
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < 2 * P; ++j) acc[i][j] = accumulate ? V::load(c + i * ldc + j * V::kWidth) : V::zero();
  // The prefetch hint spread over the sub-blocks, as the q8 kernel does.
  const int64_t lines = prefetch_end > prefetch ? (prefetch_end - prefetch + 63) / 64 : 0;
  const int64_t lines_per_unit = units > 0 ? (lines + units - 1) / units : 0;
  for (int64_t u = 0; u < units; ++u) {
    for (int64_t l = 0; l < lines_per_unit && prefetch < prefetch_end; ++l, prefetch += 64)
      __builtin_prefetch(prefetch, 0, 2);
    const float* au = a + u * kL.k_unit * kGgufMr;
#pragma GCC unroll 2
    for (int kk = 0; kk < kL.k_unit; ++kk) {
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        const uint8_t* bu = b + p * panel_stride + u * kUnitBytes;
        typename V::ivec lo, hi;
        if constexpr (kL.code_bits == 8) V::codes_s8(bu + kk * kRowBytes, lo, hi);
        else if constexpr (kL.values != nullptr) V::codes_lookup4(bu + kk * kRowBytes, kL.values, lo, hi);
        else if constexpr (kL.code_bits == 4) V::codes_u4(bu + kk * kRowBytes, lo, hi);
        else V::template codes_u4_high<kL.code_bits - 4>(bu + kk * kRowBytes, lo, hi);
        if constexpr (kL.code_bias != 0) {
          lo = V::sub_i32(lo, kL.code_bias);
          hi = V::sub_i32(hi, kL.code_bias);
        }
        const float* scale = reinterpret_cast<const float*>(bu + kCodeBytes);
        typename V::vec w0, w1;
        if constexpr (kL.offsets) {
          w0 = V::fma(V::load(scale), V::to_float(lo), V::load(scale + kNr));
          w1 = V::fma(V::load(scale + V::kWidth), V::to_float(hi), V::load(scale + kNr + V::kWidth));
        } else {
          w0 = V::mul(V::load(scale), V::to_float(lo));
          w1 = V::mul(V::load(scale + V::kWidth), V::to_float(hi));
        }
#pragma GCC unroll 4
        for (int i = 0; i < M; ++i) {
          const typename V::vec av = V::broadcast(au + kk * kGgufMr + i);
          acc[i][2 * p] = V::fma(av, w0, acc[i][2 * p]);
          acc[i][2 * p + 1] = V::fma(av, w1, acc[i][2 * p + 1]);
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < 2 * P; ++j) V::store(c + i * ldc + j * V::kWidth, acc[i][j]);
}

template <WeightFormat F, int M = kGgufMr>
void gguf_rows(int m, int64_t units, const float* a, const uint8_t* b, float* c, int64_t ldc, bool accumulate,
               const char* prefetch, const char* prefetch_end) {
  if constexpr (M >= 1) {
    if (m == M) return gguf_tile<F, M, 1>(units, a, b, 0, c, ldc, accumulate, prefetch, prefetch_end);
    return gguf_rows<F, M - 1>(m, units, a, b, c, ldc, accumulate, prefetch, prefetch_end);
  }
}

// A grid type (GgufPanelLayout::grid): per unit of 256 k, the panel's nr blocks expanded into the registry line's
// exact layout in an L1 buffer, then the kernels above over that unit's sub-units (as grid_int8_rows).
template <WeightFormat F>
void grid_gguf_rows(int m, int64_t units, const float* a, const uint8_t* b, float* c, int64_t ldc, bool accumulate,
                    const char* prefetch, const char* prefetch_end) {
  constexpr GgufPanelLayout kL = gguf_panel_layout(F);
  constexpr int kSubs = kQ8KBlock / kL.k_unit;
  constexpr int64_t kBlockBytes = gguf_grid_block_bytes(kL.ggml_type);
  alignas(64) uint8_t expanded[kSubs * gguf_layout_unit_bytes(kL, kNr)];
  const int64_t lines = prefetch_end > prefetch ? (prefetch_end - prefetch + 63) / 64 : 0;
  const int64_t share = units > 0 ? (lines + units - 1) / units * 64 : 0;
  for (int64_t u = 0; u < units; ++u) {
    expand_grid_unit<false>(kL.ggml_type, kL.k_unit, kBlockBytes, b + u * kNr * kBlockBytes, kNr, expanded);
    const char* pf = std::min(prefetch + u * share, prefetch_end);
    gguf_rows<F>(m, kSubs, a + u * kQ8KBlock * kGgufMr, expanded, c, ldc, accumulate || u > 0, pf,
                 std::min(pf + share, prefetch_end));
  }
}

// A grid type's expanded form, as gemm_format_gguf_int8_expanding's.
template <WeightFormat F>
void gemm_format_gguf_expanding(int m, int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool acc,
                                const void* pf, int64_t pf_bytes, void* expanded) {
  constexpr GgufPanelLayout kL = gguf_panel_layout(F);
  constexpr int kSubs = kQ8KBlock / kL.k_unit;
  constexpr int64_t kBlockBytes = gguf_grid_block_bytes(kL.ggml_type), kUnitBytes = gguf_layout_unit_bytes(kL, kNr);
  const int64_t units = (kc + kQ8KBlock - 1) / kQ8KBlock;
  auto* out = static_cast<uint8_t*>(expanded);
  for (int64_t u = 0; u < units; ++u)
    expand_grid_unit<false>(kL.ggml_type, kL.k_unit, kBlockBytes, static_cast<const uint8_t*>(b) + u * kNr * kBlockBytes,
                            kNr, out + u * kSubs * kUnitBytes);
  const char* p = static_cast<const char*>(pf);
  gguf_rows<F>(m, units * kSubs, static_cast<const float*>(a), out, c, ldc, acc, p, p ? p + pf_bytes : p);
}
template <WeightFormat F>
void gemm_format_gguf_expanded(int m, int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool acc,
                               const void* pf, int64_t pf_bytes) {
  constexpr int kSub = gguf_panel_layout(F).k_unit;
  const char* p = static_cast<const char*>(pf);
  gguf_rows<F>(m, (kc + kQ8KBlock - 1) / kQ8KBlock * (kQ8KBlock / kSub), static_cast<const float*>(a),
               static_cast<const uint8_t*>(b), c, ldc, acc, p, p ? p + pf_bytes : p);
}
template <WeightFormat F>
constexpr GemmExpandingFn gguf_expanding() {
  if constexpr (gguf_panel_layout(F).grid) return gemm_format_gguf_expanding<F>;
  else return nullptr;
}
template <WeightFormat F>
constexpr GemmFn gguf_expanded() {
  if constexpr (gguf_panel_layout(F).grid) return gemm_format_gguf_expanded<F>;
  else return nullptr;
}
template <WeightFormat F>
constexpr int64_t gguf_expanded_unit_bytes() {
  if constexpr (gguf_panel_layout(F).grid)
    return kQ8KBlock / gguf_panel_layout(F).k_unit * gguf_layout_unit_bytes(gguf_panel_layout(F), kNr);
  else return 0;
}

// The GemmFormat entry points: kc counts k (a whole number of sub-blocks: GGUF rows are whole blocks).
template <WeightFormat F>
void gemm_format_gguf(int m, int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool acc, const void* pf,
                      int64_t pf_bytes) {
  constexpr int kUnit = k_unit(F);
  const char* p = static_cast<const char*>(pf);
  if constexpr (gguf_panel_layout(F).grid)
    grid_gguf_rows<F>(m, (kc + kUnit - 1) / kUnit, static_cast<const float*>(a), static_cast<const uint8_t*>(b), c,
                      ldc, acc, p, p ? p + pf_bytes : p);
  else
    gguf_rows<F>(m, (kc + kUnit - 1) / kUnit, static_cast<const float*>(a), static_cast<const uint8_t*>(b), c, ldc,
                 acc, p, p ? p + pf_bytes : p);
}
// One row over kFewRowsPanels[1] panels (few_rows_max = 1).
template <WeightFormat F>
void gemm_format_gguf_few(int m, int64_t kc, const void* a, const void* b, int64_t panel_stride_bytes, float* c,
                          int64_t ldc, bool acc) {
  constexpr int kUnit = k_unit(F);
  (void)m;  // always 1
  if constexpr (gguf_panel_layout(F).grid) {
    for (int p = 0; p < kFewRowsPanels[1]; ++p)
      grid_gguf_rows<F>(1, (kc + kUnit - 1) / kUnit, static_cast<const float*>(a),
                        static_cast<const uint8_t*>(b) + p * panel_stride_bytes, c + p * kNr, ldc, acc, nullptr,
                        nullptr);
  } else {
    gguf_tile<F, 1, kFewRowsPanels[1]>((kc + kUnit - 1) / kUnit, static_cast<const float*>(a),
                                       static_cast<const uint8_t*>(b), panel_stride_bytes, c, ldc, acc, nullptr,
                                       nullptr);
  }
}
