// The micro-kernel and epilogue bodies, written once over a vector-traits type V and instantiated by each ISA's
// translation unit (gemm_avx2.cc, gemm_avx512.cc) with its own V and compiler flags. Include it only inside an
// anonymous namespace after defining V, so no instantiation can leak to another ISA's unit through the linker.
// It deliberately uses nothing from std: an inline std function compiled with AVX-512 flags could otherwise be
// the copy the linker keeps for an AVX2 caller.
//
// V provides: vec, kWidth, zero(), load(const float*), load_bf16(const uint16_t*) (kWidth bf16 widened to f32),
// broadcast(const float*), store(float*, vec), fma(a, b, c) = a*b+c, add, sub, mul, div, min, max, set1(float),
// round_nearest(vec), pow2(vec n) (2^n for integral n in [-126, 127]); for the q8 format: ivec, q8w (a weight
// vector prepared for q8_dot4), q8_weights(const uint8_t*) (kWidth columns x 4 k of u8 w + 128),
// broadcast4(const uint8_t*) (four int8 activations in every 32-bit lane), q8_start(const uint8_t*) (the
// accumulator a block starts from: the activations' -128 * sum(q) where q8_dot4 multiplies by w + 128, else 0),
// q8_dot4(ivec acc, q8w, ivec x) (acc + the lane's four w * x products), to_float(ivec). The bf16-dot format
// needs bvec, load_pairs(const Bf16Pair*) (kWidth k pairs), broadcast_pair(const uint32_t*) and dot_bf16(vec acc,
// bvec a, bvec b) (acc + the two products of each lane's pair: vdpbf16ps) and is instantiated only where V has
// them. The including unit also defines kQ8Mr, the q8 kernels' rows.

// Register budget: MR*2 accumulators + 2 panel vectors + 1 broadcast must fit the register file (AVX2: 6*2+3 =
// 15 of 16 ymm; AVX-512: 12*2+3 = 27 of 32 zmm).
constexpr int kNr = 2 * V::kWidth;

// A k pair of bf16 weights (the bf16-dot format's element); its activations are pairs too, one 32-bit word.
struct Bf16Pair {
  uint16_t even, odd;
};
template <typename W>
struct ActivationOf {
  using type = float;
};
template <>
struct ActivationOf<Bf16Pair> {
  using type = uint32_t;
};
template <typename W>
using Act = typename ActivationOf<W>::type;
// V, as a type that depends on W: members only one ISA's V has are looked up when the template is instantiated.
template <typename W>
struct VFor {
  using type = V;
};

template <typename W>
inline typename V::vec load_w(const W* p) {
  if constexpr (sizeof(W) == 2) return V::load_bf16(p);
  else return V::load(p);
}

// Step k of an M-row tile. Every loop over rows is fully unrolled (the pragmas): that is what lets the compiler
// keep acc0/acc1 in registers instead of spilling the arrays to the stack on every k. For bf16 pairs a step is a k
// pair: one vdpbf16ps per accumulator.
template <int M, typename W>
inline void tile_step(int64_t k, const Act<W>* a, const W* b, typename V::vec (&acc0)[M], typename V::vec (&acc1)[M]) {
  if constexpr (__is_same(W, Bf16Pair)) {
    using VV = typename VFor<W>::type;
    const auto b0 = VV::load_pairs(b + k * kNr);
    const auto b1 = VV::load_pairs(b + k * kNr + V::kWidth);
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      const auto av = VV::broadcast_pair(a + k * kMr + i);
      acc0[i] = VV::dot_bf16(acc0[i], av, b0);
      acc1[i] = VV::dot_bf16(acc1[i], av, b1);
    }
  } else {
    const typename V::vec b0 = load_w(b + k * kNr);
    const typename V::vec b1 = load_w(b + k * kNr + V::kWidth);
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      const typename V::vec av = V::broadcast(a + k * kMr + i);
      acc0[i] = V::fma(av, b0, acc0[i]);
      acc1[i] = V::fma(av, b1, acc1[i]);
    }
  }
}

// [prefetch, prefetch_end) is brought toward L2 while the tile computes from L1 (see run_gemm_groups): one line
// every `every` steps (a power of two), not in a burst at the start. The steps are run in groups between the
// prefetches, never with a test per step: a per-step test (two compare-and-branch pairs per 12 FMAs) takes issue
// slots from the FMAs and runs below the bare loop whenever a neighbour competes for the core (docs/performance.md,
// "Kernel design measurements"). The hint is prefetcht1: L2 on Intel and on AMD from Zen 4, but AMD cores before
// Zen 4 fill L1 with it too, so there the next block shares L1 with the current one (with KC = 128, both fit).
template <int M, typename W>
void gemm_tile(int64_t kc, const Act<W>* a, const W* b, float* c, int64_t ldc, bool accumulate, const char* prefetch,
               const char* prefetch_end) {
  typename V::vec acc0[M], acc1[M];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) {
    acc0[i] = accumulate ? V::load(c + i * ldc) : V::zero();
    acc1[i] = accumulate ? V::load(c + i * ldc + V::kWidth) : V::zero();
  }
  int64_t k = 0;
  if (prefetch_end > prefetch) {
    const int64_t lines = (prefetch_end - prefetch + 63) / 64;
    int64_t every = 1;
    while (2 * every * lines <= kc) every *= 2;
    const int64_t end = (lines * every < kc ? lines * every : kc) / every * every;  // whole groups only
    // One and two steps per line written out: an unrolled loop of one or two steps costs a remainder dispatch.
    if (every == 1) {
      for (; k < end; ++k, prefetch += 64) {
        __builtin_prefetch(prefetch, 0, 2);
        tile_step<M, W>(k, a, b, acc0, acc1);
      }
    } else if (every == 2) {
      for (; k < end; k += 2, prefetch += 64) {
        __builtin_prefetch(prefetch, 0, 2);
        tile_step<M, W>(k, a, b, acc0, acc1);
        tile_step<M, W>(k + 1, a, b, acc0, acc1);
      }
    } else {
      for (; k < end; prefetch += 64) {
        __builtin_prefetch(prefetch, 0, 2);
        const int64_t group_end = k + every;
#pragma GCC unroll 4
        for (; k < group_end; ++k) tile_step<M, W>(k, a, b, acc0, acc1);
      }
    }
  }
#pragma GCC unroll 4
  for (; k < kc; ++k) tile_step<M, W>(k, a, b, acc0, acc1);
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) {
    V::store(c + i * ldc, acc0[i]);
    V::store(c + i * ldc + V::kWidth, acc1[i]);
  }
}

// m in 1..kMr picks the instantiation with exactly m rows, so tails cost no masking.
template <typename W, int M = kMr>
void gemm_rows(int m, int64_t kc, const Act<W>* a, const W* b, float* c, int64_t ldc, bool accumulate,
               const void* prefetch, int64_t prefetch_bytes) {
  if constexpr (M >= 1) {
    if (m == M) {
      const char* pf = static_cast<const char*>(prefetch);
      return gemm_tile<M, W>(kc, a, b, c, ldc, accumulate, pf, pf ? pf + prefetch_bytes : pf);
    }
    return gemm_rows<W, M - 1>(m, kc, a, b, c, ldc, accumulate, prefetch, prefetch_bytes);
  }
}

// M = 1-3 rows over P adjacent weight panels (panel j at b + j * panel_stride, its C at c + j * kNr): a group of
// 1-3 rows is a single micro-tile with 2-6 FMA chains, too few to cover the FMA latency (decode: a 1 x NR tile
// caps at about 16 bytes of f32 weights a cycle, too slow to stream at memory bandwidth on a busy core); over P
// panels it has 2 * M * P (8-12) chains and streams P panels at once. Every C element is still one chain in k
// order (for bf16 pairs: one vdpbf16ps chain in k-pair order): the same bits as P calls of the M-row gemm_tile.
template <int M, int P, typename W>
void gemm_rows_panels(int64_t kc, const Act<W>* a, const W* b, int64_t panel_stride, float* c, int64_t ldc,
                      bool accumulate) {
  typename V::vec acc[M][2 * P];
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < 2 * P; ++j) acc[i][j] = accumulate ? V::load(c + i * ldc + j * V::kWidth) : V::zero();
  for (int64_t k = 0; k < kc; ++k) {
    // One weight vector live at a time: up to 12 accumulators, the widening's temporaries and a broadcast fit
    // the 16 ymm registers (holding both halves of a panel spilled an accumulator of the 3-row bf16 form).
#pragma GCC unroll 8
    for (int j = 0; j < 2 * P; ++j) {
      const W* bj = b + (j / 2) * panel_stride + k * kNr + (j % 2) * V::kWidth;
      // One row (the decode form) prefetches each panel kDecodePrefetchBytes ahead toward L2: per vector where a
      // vector is a line, else per k row's first half (a line, or twice per line for AVX2's bf16 rows of 32 bytes).
      if constexpr (M == 1)
        if (V::kWidth * sizeof(W) >= 64 || j % 2 == 0)
          __builtin_prefetch(reinterpret_cast<const char*>(bj) + kDecodePrefetchBytes, 0, 2);
      if constexpr (__is_same(W, Bf16Pair)) {
        using VV = typename VFor<W>::type;
        const auto bv = VV::load_pairs(bj);
#pragma GCC unroll 4
        for (int i = 0; i < M; ++i) acc[i][j] = VV::dot_bf16(acc[i][j], VV::broadcast_pair(a + k * kMr + i), bv);
      } else {
        const typename V::vec bv = load_w(bj);
#pragma GCC unroll 4
        for (int i = 0; i < M; ++i) acc[i][j] = V::fma(V::broadcast(a + k * kMr + i), bv, acc[i][j]);
      }
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < 2 * P; ++j) V::store(c + i * ldc + j * V::kWidth, acc[i][j]);
}

template <typename W>
void gemm_few_rows(int m, int64_t kc, const Act<W>* a, const W* b, int64_t panel_stride, float* c, int64_t ldc,
                   bool accumulate) {
  if (m == 1) return gemm_rows_panels<1, kFewRowsPanels[1], W>(kc, a, b, panel_stride, c, ldc, accumulate);
  if (m == 2) return gemm_rows_panels<2, kFewRowsPanels[2], W>(kc, a, b, panel_stride, c, ldc, accumulate);
  return gemm_rows_panels<3, kFewRowsPanels[3], W>(kc, a, b, panel_stride, c, ldc, accumulate);
}

// Dot products straight from the weights' (N, K) layout: out[t * ldo + j] = x_t . w_j for up to kDotMaxTokens rows
// x_t = x + t * ldx and kDotMaxRows rows w_j = w + j * ldw. Every output is one vector chain over the whole vectors
// of k, its lanes then summed in order, then the k % kWidth tail in order: its bits depend only on x_t and w_j,
// never on the block it was computed in, the batch or the thread count.
//
// Blocking: register blocks of 4 tokens x 3 rows (12 chains, 7 loads for 12 FMAs where V can pin the loaded
// vectors in registers: GCC otherwise folds each token's load into its three FMAs, 15 loads for 12 FMAs; pinned,
// Qwen3-30B-A3B's router ran 0.70-0.75x the time on Zen 4, docs/performance.md), over k blocks of kDotKc when
// there are several blocks of tokens, so a block of tokens stays in L1 while the rows stream from L2; the chains
// wait in `acc` between k blocks (a store and a load are exact, so the blocking never changes a bit). The tokens'
// k block is copied into rows kDotXLd floats apart first: in rows of a power-of-two length (the 2048 of both target
// models) every token's line of the same k falls in one set of the 8-way L1. Qwen3-30B-A3B's router (2048 x 128)
// on 2 threads of Zen 4, four alternating pairs: 0.77-0.83x the time at 512 tokens, 0.75-0.80x at 32
// (docs/performance.md, "The router and the combine beside the experts").
constexpr int kDotTt = 4, kDotNn = 3;  // the register block; the call's limits are kDotMaxTokens x kDotMaxRows
constexpr int64_t kDotKc = 512;
constexpr int64_t kDotXLd = kDotKc + 16;  // one line past the block: consecutive tokens' lines in different sets

// V::pin(v) where V has it (the AVX-512 traits), else nothing. Vt: V, dependent, for the requires-expression.
template <typename Vt = V>
[[gnu::always_inline]] inline void pin_where_v_can(typename Vt::vec& v) {
  if constexpr (requires { Vt::pin(v); }) Vt::pin(v);
}

// len k (a whole number of vectors) from x and w on.
template <int TT, int NN>
void dot_block(int64_t len, const float* x, int64_t ldx, const float* w, int64_t ldw, typename V::vec* acc,
               int acc_ld) {
  typename V::vec a[TT][NN];
#pragma GCC unroll 4
  for (int t = 0; t < TT; ++t)
#pragma GCC unroll 4
    for (int j = 0; j < NN; ++j) a[t][j] = acc[t * acc_ld + j];
  for (int64_t i = 0; i < len; i += V::kWidth) {
    typename V::vec wv[NN];
#pragma GCC unroll 4
    for (int j = 0; j < NN; ++j) {
      wv[j] = V::load(w + j * ldw + i);
      pin_where_v_can(wv[j]);
    }
    // One token (the router at decode) streams its rows: each is prefetched ahead toward L2, as the decode forms
    // do (kDecodePrefetchBytes; past a row's end it reaches the next rows). Qwen3-30B-A3B's router at T = 1 on Zen
    // 4, interleaved call by call: 38 against 42 us, DeepSeek-V2-Lite's 27 against 33.
    if constexpr (TT == 1)
#pragma GCC unroll 4
      for (int j = 0; j < NN; ++j) __builtin_prefetch(w + j * ldw + i + kDecodePrefetchBytes / 4, 0, 2);
#pragma GCC unroll 4
    for (int t = 0; t < TT; ++t) {
      typename V::vec xv = V::load(x + t * ldx + i);
      pin_where_v_can(xv);
#pragma GCC unroll 4
      for (int j = 0; j < NN; ++j) a[t][j] = V::fma(xv, wv[j], a[t][j]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < TT; ++t)
#pragma GCC unroll 4
    for (int j = 0; j < NN; ++j) acc[t * acc_ld + j] = a[t][j];
}

template <int TT>
void dot_block_rows(int nn, int64_t len, const float* x, int64_t ldx, const float* w, int64_t ldw,
                    typename V::vec* acc, int acc_ld) {
  switch (nn) {
    case 3: return dot_block<TT, 3>(len, x, ldx, w, ldw, acc, acc_ld);
    case 2: return dot_block<TT, 2>(len, x, ldx, w, ldw, acc, acc_ld);
    default: return dot_block<TT, 1>(len, x, ldx, w, ldw, acc, acc_ld);
  }
}

// tokens in 1..kDotMaxTokens, n in 1..kDotMaxRows.
void dot_rows(int64_t k, const float* x, int64_t ldx, int tokens, const float* w, int64_t ldw, int n, float* out,
              int64_t ldo) {
  typename V::vec acc[kDotMaxTokens * kDotMaxRows];
  for (int i = 0; i < tokens * kDotMaxRows; ++i) acc[i] = V::zero();
  const int64_t vector_end = k / V::kWidth * V::kWidth;
  // With one register block of tokens the rows are read once anyway: no k blocks, so each row streams whole.
  const bool blocked = tokens > kDotTt;
  const int64_t kc = blocked ? kDotKc : (vector_end > 0 ? vector_end : 1);
  alignas(64) float x_block[kDotMaxTokens * kDotXLd];  // 33 KiB of stack
  for (int64_t k0 = 0; k0 < vector_end; k0 += kc) {
    const int64_t len = k0 + kc < vector_end ? kc : vector_end - k0;
    const float* xk = x + k0;  // the tokens' k block, and its row stride
    int64_t xld = ldx;
    if (blocked) {
      for (int t = 0; t < tokens; ++t) std::memcpy(x_block + t * kDotXLd, x + t * ldx + k0, len * sizeof(float));
      xk = x_block;
      xld = kDotXLd;
    }
    for (int t = 0; t < tokens; t += kDotTt)
      for (int j = 0; j < n; j += kDotNn) {
        const int tt = tokens - t < kDotTt ? tokens - t : kDotTt, nn = n - j < kDotNn ? n - j : kDotNn;
        const float* xt = xk + t * xld;
        const float* wj = w + j * ldw + k0;
        typename V::vec* a = acc + t * kDotMaxRows + j;
        switch (tt) {
          case 4: dot_block_rows<4>(nn, len, xt, xld, wj, ldw, a, kDotMaxRows); break;
          case 3: dot_block_rows<3>(nn, len, xt, xld, wj, ldw, a, kDotMaxRows); break;
          case 2: dot_block_rows<2>(nn, len, xt, xld, wj, ldw, a, kDotMaxRows); break;
          default: dot_block_rows<1>(nn, len, xt, xld, wj, ldw, a, kDotMaxRows); break;
        }
      }
  }
  for (int t = 0; t < tokens; ++t)
    for (int j = 0; j < n; ++j) {
      float lanes[V::kWidth];
      V::store(lanes, acc[t * kDotMaxRows + j]);
      float sum = 0.0f;
      for (int l = 0; l < V::kWidth; ++l) sum += lanes[l];
      for (int64_t r = vector_end; r < k; ++r) sum += x[t * ldx + r] * w[j * ldw + r];
      out[t * ldo + j] = sum;
    }
}

// exp(x) by range reduction to [-ln2/2, ln2/2] and a degree-6 polynomial (the Cephes expf coefficients): about
// 1 ulp on [-87, 88]; inputs are clamped there, which only affects values whose silu is 0 or x to float precision.
inline typename V::vec exp_approx(typename V::vec x) {
  x = V::min(V::max(x, V::set1(-87.0f)), V::set1(88.0f));
  const typename V::vec n = V::round_nearest(V::mul(x, V::set1(1.44269504088896341f)));
  x = V::fma(n, V::set1(-0.693359375f), x);
  x = V::fma(n, V::set1(2.12194440e-4f), x);
  typename V::vec p = V::set1(1.9875691500e-4f);
  p = V::fma(p, x, V::set1(1.3981999507e-3f));
  p = V::fma(p, x, V::set1(8.3334519073e-3f));
  p = V::fma(p, x, V::set1(4.1665795894e-2f));
  p = V::fma(p, x, V::set1(1.6666665459e-1f));
  p = V::fma(p, x, V::set1(5.0000001201e-1f));
  p = V::fma(p, V::mul(x, x), V::add(x, V::set1(1.0f)));
  return V::mul(p, V::pow2(n));
}

// silu(g) * u = g * u / (1 + exp(-g)).
void swiglu(int64_t n, const float* g, const float* u, float* h) {
  for (int64_t i = 0; i < n; i += V::kWidth) {
    const typename V::vec gv = V::load(g + i);
    const typename V::vec den = V::add(V::set1(1.0f), exp_approx(V::sub(V::zero(), gv)));
    V::store(h + i, V::div(V::mul(gv, V::load(u + i)), den));
  }
}

void gemm_f32w(int m, int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool acc, const void* pf,
               int64_t pf_bytes) {
  gemm_rows<float>(m, kc, a, b, c, ldc, acc, pf, pf_bytes);
}
void gemm_bf16w(int m, int64_t kc, const float* a, const uint16_t* b, float* c, int64_t ldc, bool acc, const void* pf,
                int64_t pf_bytes) {
  gemm_rows<uint16_t>(m, kc, a, b, c, ldc, acc, pf, pf_bytes);
}
void gemm_f32w_few(int m, int64_t kc, const float* a, const float* b, int64_t panel_stride, float* c, int64_t ldc,
                   bool acc) {
  gemm_few_rows<float>(m, kc, a, b, panel_stride, c, ldc, acc);
}
void gemm_bf16w_few(int m, int64_t kc, const float* a, const uint16_t* b, int64_t panel_stride, float* c,
                    int64_t ldc, bool acc) {
  gemm_few_rows<uint16_t>(m, kc, a, b, panel_stride, c, ldc, acc);
}

// Machine-limit probes for the benchmarks, here because they need the ISA's vectors. fma_probe runs 12
// independent FMA chains (enough to cover the FMA latency on every current core) for `iters` steps and returns
// the FLOPs done; sum_probe reads n floats (n a multiple of 4 * kWidth) once.
double fma_probe(int64_t iters, float* sink) {
  typename V::vec acc[12];
  const typename V::vec m = V::set1(0.999999f), a = V::set1(1e-7f);
#pragma GCC unroll 16
  for (int i = 0; i < 12; ++i) acc[i] = V::set1(static_cast<float>(i));
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < 12; ++i) acc[i] = V::fma(acc[i], m, a);
  }
  typename V::vec total = acc[0];
#pragma GCC unroll 16
  for (int i = 1; i < 12; ++i) total = V::add(total, acc[i]);
  V::store(sink, total);
  return static_cast<double>(iters) * 12 * V::kWidth * 2;
}

// The read probe over `streams` regions of n floats each (region s at p + s * stride; streams a multiple of 4, n
// of a cache line), read interleaved a cache line at a time: the decode kernel's pattern, four weight panels side
// by side. One accumulator per stream of a group of four keeps the adds off one dependency chain.
float sum_probe_streams(const float* p, int64_t stride, int streams, int64_t n) {
  constexpr int kLine = 64 / static_cast<int>(sizeof(float));
  typename V::vec s0 = V::zero(), s1 = V::zero(), s2 = V::zero(), s3 = V::zero();
  for (int64_t i = 0; i < n; i += kLine)
    for (int s = 0; s < streams; s += 4) {
      const float* q = p + s * stride + i;
#pragma GCC unroll 4
      for (int j = 0; j < kLine; j += V::kWidth) {
        s0 = V::add(s0, V::load(q + j));
        s1 = V::add(s1, V::load(q + stride + j));
        s2 = V::add(s2, V::load(q + 2 * stride + j));
        s3 = V::add(s3, V::load(q + 3 * stride + j));
      }
    }
  float out[V::kWidth];
  V::store(out, V::add(V::add(s0, s1), V::add(s2, s3)));
  float total = 0.0f;
  for (int i = 0; i < V::kWidth; ++i) total += out[i];
  return total;
}

float sum_probe(const float* p, int64_t n) {
  typename V::vec s0 = V::zero(), s1 = V::zero(), s2 = V::zero(), s3 = V::zero();
  for (int64_t i = 0; i < n; i += 4 * V::kWidth) {
    s0 = V::add(s0, V::load(p + i));
    s1 = V::add(s1, V::load(p + i + V::kWidth));
    s2 = V::add(s2, V::load(p + i + 2 * V::kWidth));
    s3 = V::add(s3, V::load(p + i + 3 * V::kWidth));
  }
  float out[V::kWidth];
  V::store(out, V::add(V::add(s0, s1), V::add(s2, s3)));
  float total = 0.0f;
  for (int i = 0; i < V::kWidth; ++i) total += out[i];
  return total;
}

// ---- q8 blocks (gemm_kernels.h): per block of 32 k, integer dot products into int32 chains that start from
// the activations' correction, then one float FMA per accumulator with the product of the two scales. The
// integer part is exact (|sum| <= 32 * 127 * 127 < 2^24, so its float conversion is exact too); each C element
// is one float chain over the blocks in increasing k.
// Register budget (AVX-512, 6 rows): 12 float + 12 int accumulators, 2 weight vectors, 1 broadcast.
constexpr int64_t kQ8AUnit = 40 * kQ8Mr, kQ8BUnit = 36 * kNr;

inline float load_scalar_f32(const uint8_t* p) {
  float v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

// M rows over P panels (panel p at b + p * panel_stride bytes, its C at c + p * kNr): P = 1 is the micro-kernel,
// M = 1 over kFewRowsPanels[1] panels the decode form, whose chains are the same per panel (the same bits).
template <int M, int P = 1>
void q8_tile(int64_t units, const uint8_t* a, const uint8_t* b, int64_t panel_stride, float* c, int64_t ldc,
             bool accumulate, const char* prefetch, const char* prefetch_end) {
  typename V::vec acc0[M][P], acc1[M][P];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      acc0[i][p] = accumulate ? V::load(c + i * ldc + p * kNr) : V::zero();
      acc1[i][p] = accumulate ? V::load(c + i * ldc + p * kNr + V::kWidth) : V::zero();
    }
  // The prefetch hint spread over the blocks: a block is 8 * 2 * M dot instructions, so a test per block is free.
  const int64_t lines = prefetch_end > prefetch ? (prefetch_end - prefetch + 63) / 64 : 0;
  const int64_t lines_per_unit = units > 0 ? (lines + units - 1) / units : 0;
  for (int64_t u = 0; u < units; ++u) {
    const uint8_t* au = a + u * kQ8AUnit;
    for (int64_t l = 0; l < lines_per_unit && prefetch < prefetch_end; ++l, prefetch += 64)
      __builtin_prefetch(prefetch, 0, 2);
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const uint8_t* bu = b + p * panel_stride + u * kQ8BUnit;
      typename V::ivec s0[M], s1[M];
#pragma GCC unroll 16
      for (int i = 0; i < M; ++i) s0[i] = s1[i] = V::q8_start(au + (kQ8Block + 4) * kQ8Mr + 4 * i);
#pragma GCC unroll 8
      for (int g = 0; g < kQ8Block / 4; ++g) {
        const typename V::q8w w0 = V::q8_weights(bu + g * kNr * 4);
        const typename V::q8w w1 = V::q8_weights(bu + g * kNr * 4 + V::kWidth * 4);
#pragma GCC unroll 16
        for (int i = 0; i < M; ++i) {
          const typename V::ivec x = V::broadcast4(au + (g * kQ8Mr + i) * 4);
          s0[i] = V::q8_dot4(s0[i], w0, x);
          s1[i] = V::q8_dot4(s1[i], w1, x);
        }
      }
      const typename V::vec d0 = V::load(reinterpret_cast<const float*>(bu + kQ8Block * kNr));
      const typename V::vec d1 = V::load(reinterpret_cast<const float*>(bu + kQ8Block * kNr) + V::kWidth);
#pragma GCC unroll 16
      for (int i = 0; i < M; ++i) {
        const typename V::vec da = V::set1(load_scalar_f32(au + kQ8Block * kQ8Mr + 4 * i));
        acc0[i][p] = V::fma(V::to_float(s0[i]), V::mul(d0, da), acc0[i][p]);
        acc1[i][p] = V::fma(V::to_float(s1[i]), V::mul(d1, da), acc1[i][p]);
      }
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      V::store(c + i * ldc + p * kNr, acc0[i][p]);
      V::store(c + i * ldc + p * kNr + V::kWidth, acc1[i][p]);
    }
}

template <int M = kQ8Mr>
void q8_rows(int m, int64_t units, const uint8_t* a, const uint8_t* b, float* c, int64_t ldc, bool accumulate,
             const char* prefetch, const char* prefetch_end) {
  if constexpr (M >= 1) {
    if (m == M) return q8_tile<M>(units, a, b, 0, c, ldc, accumulate, prefetch, prefetch_end);
    return q8_rows<M - 1>(m, units, a, b, c, ldc, accumulate, prefetch, prefetch_end);
  }
}

// ---- the GemmFormat entry points (gemm_kernels.h): type-erased operands, kc in k ----
template <typename W>
void gemm_format_widen(int m, int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool acc,
                       const void* pf, int64_t pf_bytes) {
  gemm_rows<W>(m, kc, static_cast<const float*>(a), static_cast<const W*>(b), c, ldc, acc, pf, pf_bytes);
}
template <typename W>
void gemm_format_widen_few(int m, int64_t kc, const void* a, const void* b, int64_t panel_stride_bytes, float* c,
                           int64_t ldc, bool acc) {
  gemm_few_rows<W>(m, kc, static_cast<const float*>(a), static_cast<const W*>(b),
                   panel_stride_bytes / static_cast<int64_t>(sizeof(W)), c, ldc, acc);
}
template <typename W = Bf16Pair>
void gemm_format_bf16_dot(int m, int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool acc,
                          const void* pf, int64_t pf_bytes) {
  gemm_rows<W>(m, (kc + 1) / 2, static_cast<const uint32_t*>(a), static_cast<const W*>(b), c, ldc, acc, pf, pf_bytes);
}
template <typename W = Bf16Pair>
void gemm_format_bf16_dot_few(int m, int64_t kc, const void* a, const void* b, int64_t panel_stride_bytes, float* c,
                              int64_t ldc, bool acc) {
  gemm_few_rows<W>(m, (kc + 1) / 2, static_cast<const uint32_t*>(a), static_cast<const W*>(b),
                   panel_stride_bytes / static_cast<int64_t>(sizeof(W)), c, ldc, acc);
}
void gemm_format_q8(int m, int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool acc, const void* pf,
                    int64_t pf_bytes) {
  const char* p = static_cast<const char*>(pf);
  q8_rows(m, (kc + kQ8Block - 1) / kQ8Block, static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b), c, ldc,
          acc, p, p ? p + pf_bytes : p);
}
// One row over kFewRowsPanels[1] panels (few_rows_max = 1): the decode case.
void gemm_format_q8_few(int m, int64_t kc, const void* a, const void* b, int64_t panel_stride_bytes, float* c,
                        int64_t ldc, bool acc) {
  (void)m;  // always 1
  q8_tile<1, kFewRowsPanels[1]>((kc + kQ8Block - 1) / kQ8Block, static_cast<const uint8_t*>(a),
                                static_cast<const uint8_t*>(b), panel_stride_bytes, c, ldc, acc, nullptr, nullptr);
}

// Peak probes of the dot instructions, as fma_probe: 12 independent chains; returns the operations done (a
// multiply and an add per product). The q8 probe runs this unit's q8_dot4, so where that is the vpmaddubsw idiom it
// measures the idiom's rate.
template <typename W = Bf16Pair>
double bf16_dot_probe(int64_t iters, float* sink) {
  using VV = typename VFor<W>::type;
  typename V::vec acc[12];
  const uint32_t pair = 0x3f803f80u;  // (1.0, 1.0) in bf16
  const auto x = VV::broadcast_pair(&pair);
#pragma GCC unroll 16
  for (int i = 0; i < 12; ++i) acc[i] = V::set1(static_cast<float>(i));
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < 12; ++i) acc[i] = VV::dot_bf16(acc[i], x, x);
  }
  typename V::vec total = acc[0];
#pragma GCC unroll 16
  for (int i = 1; i < 12; ++i) total = V::add(total, acc[i]);
  V::store(sink, total);
  return static_cast<double>(iters) * 12 * V::kWidth * 2 * 2;
}

double int8_dot_probe(int64_t iters, float* sink) {
  typename V::ivec acc[12];
  uint8_t bytes[4 * V::kWidth];
  for (int i = 0; i < 4 * V::kWidth; ++i) bytes[i] = 129;  // w = 1
  const typename V::q8w w = V::q8_weights(bytes);
  const uint8_t ones[4] = {1, 1, 1, 1};
#pragma GCC unroll 16
  for (int i = 0; i < 12; ++i) acc[i] = V::broadcast4(ones);
  // Each chain's activations are the next chain's accumulator bytes: with a constant input the integer idiom
  // (vpmaddubsw on constants, then a loop-invariant add) is folded by the compiler into a closed form.
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < 12; ++i) acc[i] = V::q8_dot4(acc[i], w, acc[i == 11 ? 0 : i + 1]);
  }
  typename V::vec total = V::to_float(acc[0]);
#pragma GCC unroll 16
  for (int i = 1; i < 12; ++i) total = V::add(total, V::to_float(acc[i]));
  V::store(sink, total);
  return static_cast<double>(iters) * 12 * V::kWidth * 4 * 2;
}
