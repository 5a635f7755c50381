// The GEMM stages below the grouped drivers: packing (weights into micro-panels, once at load), the per-ISA
// micro-kernels (one MR x NR tile over a K block: no blocking loops, no threads, no allocation) and their scalar
// references. Knows nothing of experts, routing or the MLP; the drivers (grouped_ffn_packed.cc,
// grouped_gemm.cc) do the blocking and scheduling.
//
// Packed layout (docs/kernels.md): a (K, N) weight matrix becomes ceil(N / NR) panels of (K, NR), columns past N
// zero-padded, stored one after another: // (N/NR, K, NR). Packing keeps the dtype (f32 stays f32, bf16 stays
// bf16 and is widened in registers). A gate/up pair is packed interleaved: panel p holds gate columns
// [p*NR/2, (p+1)*NR/2) then up columns of the same range, so one tile produces both halves of SwiGLU's input.
#pragma once

#include <cstdint>
#include <vector>

#include "hymoe/dtype.h"
#include "kernels/grouped_ffn.h"
#include "kernels/isa.h"

namespace hymoe::kernels {

struct PackedMatrix {
  DType dtype = DType::kF32;  // kF32 or kBF16
  int nr = 0;                 // panel width in columns
  int64_t k = 0;              // rows of every panel
  int64_t n = 0;              // logical columns (for a gate/up pair: the hidden width, each panel holds nr/2 of it)
  int64_t panels = 0;
  bool gate_up = false;
  std::vector<float> f32;      // (panels, k, nr) when dtype == kF32
  std::vector<uint16_t> bf16;  // (panels, k, nr) when dtype == kBF16

  const void* data() const { return dtype == DType::kBF16 ? static_cast<const void*>(bf16.data()) : f32.data(); }
  size_t bytes() const { return f32.size() * sizeof(float) + bf16.size() * sizeof(uint16_t); }
};

// Packs b (logical (K, N), any layout, f32 or bf16) into panels of nr columns.
PackedMatrix pack_matrix(const MatrixView& b, int nr);
// Packs panel p (of ceil(N / nr)) of pack_matrix(b, nr) into out (k * nr elements of b's dtype): the unit of work
// for callers that pack per call into their own memory and in parallel with other matrices.
void pack_matrix_panel(const MatrixView& b, int nr, int64_t p, void* out);
// Packs gate and up (both (K, H), same dtype) interleaved, nr/2 columns of each per panel.
PackedMatrix pack_gate_up(const MatrixView& gate, const MatrixView& up, int nr);
// Packs a plain row-major f32 (K, N) matrix with leading dimension ldb (the backward's activation gradients).
void pack_rows_f32(const float* b, int64_t ldb, int64_t k, int64_t n, int nr, float* out);

// Micro-kernel contract: C[m, 0:NR] (=, or += when accumulate) A[m, 0:kc] . P[0:kc, 0:NR], where m in 1..MR, A is
// a packed row panel (element (i, k) at a[k * MR + i], see pack_rows_panel; rows [k0, k0 + kc) of it), P one packed weight panel's
// rows [k0, k0 + kc) (contiguous, NR per row), and C row-major with leading dimension ldc. Every C element is one
// float FMA chain in increasing k, so blocking K and splitting rows never change the bits.
// prefetch / prefetch_bytes: a hint, up to min(kc, ceil(bytes / 64)) cache lines from `prefetch` on, fetched toward
// L2 evenly over the k loop while the tile computes (the driver passes a share of the next weight block). Never dereferenced: any
// address, or nullptr, is allowed and the result does not depend on it.
using GemmF32wFn = void (*)(int m, int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate,
                            const void* prefetch, int64_t prefetch_bytes);
using GemmBf16wFn = void (*)(int m, int64_t kc, const float* a, const uint16_t* b, float* c, int64_t ldc,
                             bool accumulate, const void* prefetch, int64_t prefetch_bytes);
// The few-rows variant: m = 1-3 rows (a packed row panel as above) over kFewRowsPanels[m] adjacent weight panels,
// panel i at b + i * panel_stride and its C at c + i * NR, C's rows ldc apart. Same bits as that many calls of the
// m-row micro-kernel. One row is the decode case.
constexpr int kFewRowsPanels[4] = {0, 4, 3, 2};
using GemmFewF32wFn = void (*)(int m, int64_t kc, const float* a, const float* b, int64_t panel_stride, float* c,
                               int64_t ldc, bool accumulate);
using GemmFewBf16wFn = void (*)(int m, int64_t kc, const float* a, const uint16_t* b, int64_t panel_stride, float* c,
                                int64_t ldc, bool accumulate);
// out[t * ldo + j] = x_t . w_j for t < tokens (1..kDotMaxTokens) and j < n (1..kDotMaxRows), x_t the row
// x + t * ldx and w_j the row w + j * ldw, k floats each: dot products straight from an (N, K) layout, each with a
// fixed summation order that depends on nothing but x_t and w_j (see dot_rows_gemm).
constexpr int kDotMaxTokens = 16, kDotMaxRows = 32;
using DotRowsFn = void (*)(int64_t k, const float* x, int64_t ldx, int tokens, const float* w, int64_t ldw, int n,
                           float* out, int64_t ldo);
// h[i] = silu(g[i]) * u[i] for i < n (n a multiple of the vector width).
using SwigluFn = void (*)(int64_t n, const float* g, const float* u, float* h);

// One ISA's kernels and tile.
struct IsaKernels {
  Isa isa;
  int mr, nr;
  GemmF32wFn gemm_f32w;
  GemmBf16wFn gemm_bf16w;
  GemmFewF32wFn gemm_f32w_few;  // m = 1-3 rows over kFewRowsPanels[m] panels per call
  GemmFewBf16wFn gemm_bf16w_few;
  SwigluFn swiglu;
  DotRowsFn dot_rows;
  const char* gemm_f32w_name;   // e.g. "gemm_f32w_f32_6x16__avx2"
  const char* gemm_bf16w_name;  // e.g. "gemm_bf16w_f32_6x16__avx2"
  // Probes of the machine's limits for the benchmarks (not used by the kernels): FLOPs of `iters` steps of 12
  // independent vector FMA chains, and a single streaming read of n floats (n a multiple of 4 vectors).
  double (*fma_probe)(int64_t iters, float* sink);
  float (*sum_probe)(const float* p, int64_t n);
  // The same read over `streams` (a multiple of 4) regions of n floats, region s at p + s * stride, interleaved a
  // cache line at a time (the decode kernel's access pattern).
  float (*sum_probe_streams)(const float* p, int64_t stride, int streams, int64_t n);
};

// The kernels of `isa`, or nullptr for Isa::kScalar (which uses the portable implementations).
const IsaKernels* isa_kernels(Isa isa);
const IsaKernels& isa_kernels_avx2();
const IsaKernels& isa_kernels_avx512();

// Packs rows [0, rows) x columns [0, kc) of a row-major A (leading dimension lda) into ceil(rows / mr) row panels
// of (kc, mr): // (rows/MR, kc, MR); rows past `rows` are zero. The drivers pack activations once per run: rows of a
// large lda would otherwise alias in the L1 sets (2048 floats = 8 KiB apart), and the micro-kernel reads the
// panel contiguously.
// With row_index, row i is read from a + row_index[i] * lda: the dispatch's gather fused into the packing, so the
// sorted copy of the routed rows is never written.
void pack_rows_panel(const float* a, int64_t lda, int64_t rows, int64_t kc, int mr, float* out,
                     const int64_t* row_index = nullptr);

// Scalar references of the micro-kernel contract for any tile (mr, nr) (double accumulation).
void gemm_f32w_f32__ref(int m, int mr, int nr, int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                        bool accumulate);
void gemm_bf16w_f32__ref(int m, int mr, int nr, int64_t kc, const float* a, const uint16_t* b, float* c,
                         int64_t ldc, bool accumulate);
void swiglu__ref(int64_t n, const float* g, const float* u, float* h);

}  // namespace hymoe::kernels
