// Ragged grouped GEMMs in the two forms the backward pass needs (the forward uses the fused GroupedFfn).
// Groups are row ranges [offsets[g], offsets[g+1]) of row-major activation matrices; empty groups cost nothing.
//
//   rows form:          C[rows_g, :N]  (+)=  A[rows_g, :K] . B_g           B_g a (K, N) MatrixView
//   weight-grad form:   dW_g (K, N)    (+)=  A[rows_g, :K]^T . G[rows_g, :N]  dW_g stored in `layout`
//
// Beside them, the router's logits: dot_rows_gemm, one ungrouped C = A . W^T read straight from W's layout.
//
// Every output element has one fixed summation order, so results are the same bits for any thread count.
#pragma once

#include <cstdint>

#include "kernels/formats/matrix_view.h"
#include "kernels/isa/isa.h"

namespace hymoe::kernels {

struct GroupedRowsGemm {
  int64_t num_groups = 0;
  const int64_t* offsets = nullptr;  // (G+1)
  int64_t k = 0, n = 0;
  const float* a = nullptr;          // (R, k)
  const MatrixView* b = nullptr;     // (G) views of logical shape (k, n), f32 or bf16, either layout
  float* c = nullptr;                // (R, n)
  bool accumulate = false;           // C += instead of C =
};

struct GroupedWeightGradGemm {
  int64_t num_groups = 0;
  const int64_t* offsets = nullptr;  // (G+1)
  int64_t k = 0, n = 0;
  const float* a = nullptr;          // (R, k)
  const float* g = nullptr;          // (R, n)
  float* const* dw = nullptr;        // (G) f32 outputs of logical shape (k, n); null: an empty group left as it is
  WeightLayout layout = WeightLayout::kOutIn;  // kOutIn: dw stored (n, k); kInOut: stored (k, n)
  bool accumulate = false;
};

// References: double accumulation, no SIMD, no threads.
void grouped_rows_gemm_ref(const GroupedRowsGemm& p);
void grouped_weight_grad_gemm_ref(const GroupedWeightGradGemm& p);

// C (T, N) = A (T, K) . W^T for a small f32 W stored (N, K) row-major (a router's gate): every element one dot
// product whose bits depend only on its row of A and of W, not on T, the other rows or the thread count, so a
// token routes the same way alone or in any batch. Read straight from W's layout: nothing is packed per call,
// which at one token was most of the router's time.
void dot_rows_gemm(int64_t T, int64_t K, int64_t N, const float* a, const float* w, float* c, Isa isa = active_isa());
void dot_rows_gemm_ref(int64_t T, int64_t K, int64_t N, const float* a, const float* w, float* c);

// Dispatching entry points (the active ISA's implementation).
void grouped_rows_gemm(const GroupedRowsGemm& p);
void grouped_weight_grad_gemm(const GroupedWeightGradGemm& p);

}  // namespace hymoe::kernels
