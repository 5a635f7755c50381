// Reference grouped GEMMs (the definitions), plus the portable fallbacks the dispatchers use for Isa::kScalar.
#include <algorithm>
#include <vector>

#include "hymoe/error.h"
#include "kernels/driver/grouped_gemm.h"
#include "kernels/driver/grouped_gemm_impl.h"

namespace hymoe::kernels {

void grouped_rows_gemm_ref(const GroupedRowsGemm& p) {
  HYMOE_CHECK(p.offsets && p.offsets[0] == 0);
  for (int64_t g = 0; g < p.num_groups; ++g) {
    const MatrixView& b = p.b[g];
    HYMOE_CHECK(b.k == p.k && b.n == p.n);
    for (int64_t r = p.offsets[g]; r < p.offsets[g + 1]; ++r)
      for (int64_t j = 0; j < p.n; ++j) {
        double acc = p.accumulate ? p.c[r * p.n + j] : 0.0;
        for (int64_t i = 0; i < p.k; ++i) acc += static_cast<double>(p.a[r * p.k + i]) * b.at(i, j);
        p.c[r * p.n + j] = static_cast<float>(acc);
      }
  }
}

void grouped_weight_grad_gemm_ref(const GroupedWeightGradGemm& p) {
  HYMOE_CHECK(p.offsets && p.offsets[0] == 0);
  for (int64_t g = 0; g < p.num_groups; ++g) {
    float* dw = p.dw[g];
    if (!dw) {  // an empty group the caller asked to leave as it is
      HYMOE_CHECK(p.offsets[g + 1] == p.offsets[g]);
      continue;
    }
    for (int64_t i = 0; i < p.k; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        float& out = p.layout == WeightLayout::kOutIn ? dw[j * p.k + i] : dw[i * p.n + j];
        double acc = p.accumulate ? out : 0.0;
        for (int64_t r = p.offsets[g]; r < p.offsets[g + 1]; ++r)
          acc += static_cast<double>(p.a[r * p.k + i]) * p.g[r * p.n + j];
        out = static_cast<float>(acc);
      }
  }
}

// Portable rows form: B widened to a (k, n) f32 block per group so the inner loop is a contiguous axpy.
void grouped_rows_gemm_portable(const GroupedRowsGemm& p) {
  std::vector<float> b;
  for (int64_t g = 0; g < p.num_groups; ++g) {
    const int64_t r0 = p.offsets[g], r1 = p.offsets[g + 1];
    if (r0 == r1) continue;
    const MatrixView& view = p.b[g];
    HYMOE_CHECK(view.k == p.k && view.n == p.n);
    b.resize(static_cast<size_t>(p.k * p.n));
    for (int64_t i = 0; i < p.k; ++i)
      for (int64_t j = 0; j < p.n; ++j) b[static_cast<size_t>(i * p.n + j)] = view.at(i, j);
    for (int64_t r = r0; r < r1; ++r) {
      float* c = p.c + r * p.n;
      if (!p.accumulate) std::fill(c, c + p.n, 0.0f);
      for (int64_t i = 0; i < p.k; ++i) {
        const float av = p.a[r * p.k + i];
        const float* brow = b.data() + i * p.n;
        for (int64_t j = 0; j < p.n; ++j) c[j] += av * brow[j];
      }
    }
  }
}

// Portable weight-grad form: accumulate a (k, n) f32 block over the group's rows (axpy over n), then store.
void grouped_weight_grad_gemm_portable(const GroupedWeightGradGemm& p) {
  std::vector<float> acc;
  for (int64_t g = 0; g < p.num_groups; ++g) {
    float* dw = p.dw[g];
    if (!dw) {  // an empty group the caller asked to leave as it is
      HYMOE_CHECK(p.offsets[g + 1] == p.offsets[g]);
      continue;
    }
    acc.assign(static_cast<size_t>(p.k * p.n), 0.0f);
    for (int64_t r = p.offsets[g]; r < p.offsets[g + 1]; ++r)
      for (int64_t i = 0; i < p.k; ++i) {
        const float av = p.a[r * p.k + i];
        const float* grow = p.g + r * p.n;
        float* out = acc.data() + i * p.n;
        for (int64_t j = 0; j < p.n; ++j) out[j] += av * grow[j];
      }
    for (int64_t i = 0; i < p.k; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        float& out = p.layout == WeightLayout::kOutIn ? dw[j * p.k + i] : dw[i * p.n + j];
        out = (p.accumulate ? out : 0.0f) + acc[static_cast<size_t>(i * p.n + j)];
      }
  }
}

void dot_rows_gemm_ref(int64_t T, int64_t K, int64_t N, const float* a, const float* w, float* c) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < N; ++j) {
      double sum = 0.0;
      for (int64_t i = 0; i < K; ++i) sum += static_cast<double>(a[t * K + i]) * w[j * K + i];
      c[t * N + j] = static_cast<float>(sum);
    }
}

}  // namespace hymoe::kernels
