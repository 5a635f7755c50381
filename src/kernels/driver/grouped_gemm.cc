// The fast grouped GEMM forms of the backward pass, on the same micro-kernels and driver as the forward's grouped
// FFN, the router's logits on the ISA's dot kernel, and their dispatch by the active ISA.
#include <algorithm>
#include <memory>
#include <vector>

#include "hymoe/error.h"
#include "kernels/driver/gemm_driver.h"
#include "kernels/driver/grouped_gemm_impl.h"

namespace hymoe::kernels {

void grouped_rows_gemm_packed(const GroupedRowsGemm& p, Isa isa) {
  const IsaKernels* ik = isa_kernels(isa);
  HYMOE_CHECK(ik && p.offsets && p.offsets[0] == 0 && p.k > 0 && p.n > 0);
  // Training changes the weights every step, so they are packed per call: into workspace memory (a fresh
  // allocation costs a page fault per 4 KiB on every call) and as one parallel pass over the panels of every group.
  const int64_t panels = (p.n + ik->nr - 1) / ik->nr, panel_elems = panels * p.k * ik->nr;
  std::vector<GemmGroup> groups(static_cast<size_t>(p.num_groups));
  std::vector<int64_t> busy;  // groups with rows
  DType dtype = DType::kF32;
  for (int64_t g = 0; g < p.num_groups; ++g) {
    const int64_t rows = p.offsets[g + 1] - p.offsets[g];
    HYMOE_CHECK(rows >= 0 && p.b[g].k == p.k && p.b[g].n == p.n);
    if (rows == 0) continue;
    if (!busy.empty() && p.b[g].dtype != dtype) return grouped_rows_gemm_portable(p);  // mixed dtypes: no packed kernel
    dtype = p.b[g].dtype;
    busy.push_back(g);
  }
  // The groups in chunks of about kChunkBytes of packed panels, each packed and then multiplied while its panels
  // are still in cache, in one workspace reused chunk after chunk: packing every group first took a workspace the
  // size of all the weights (2.2 GB for DeepSeek-V2-Lite's experts), faulted in afresh on each call, and read the
  // panels back from memory. Each group's result does not depend on the groups beside it.
  constexpr int64_t kChunkBytes = int64_t{24} << 20;
  const WorkspaceLease ws;
  const int64_t elem_floats = dtype == DType::kBF16 ? 2 : 1;  // elements per float of workspace
  const int64_t group_bytes = panel_elems * dtype_size(dtype);
  const size_t per_chunk = static_cast<size_t>(std::max<int64_t>(1, kChunkBytes / std::max<int64_t>(group_bytes, 1)));
  const GemmFormat& format = *ik->format(dtype == DType::kBF16 ? WeightFormat::kBf16Widen : WeightFormat::kF32);
  for (size_t first = 0; first < busy.size(); first += per_chunk) {
    const size_t count = std::min(per_chunk, busy.size() - first);
    const Workspace::Scope scope(*ws);
    float* const packed = ws->floats((static_cast<int64_t>(count) * panel_elems + elem_floats - 1) / elem_floats);
    const auto packed_group = [&](size_t i) -> void* {
      return reinterpret_cast<char*>(packed) + static_cast<int64_t>(i) * group_bytes;
    };
    parallel_for(static_cast<int64_t>(count) * panels, [&](int64_t t, int) {
      const size_t i = static_cast<size_t>(t / panels);
      const int64_t panel = t % panels;
      pack_matrix_panel(p.b[busy[first + i]], ik->nr, panel,
                        static_cast<char*>(packed_group(i)) + panel * p.k * ik->nr * dtype_size(dtype));
    });
    std::fill(groups.begin(), groups.end(), GemmGroup{});
    for (size_t i = 0; i < count; ++i) {
      const int64_t g = busy[first + i];
      groups[static_cast<size_t>(g)] = {p.a + p.offsets[g] * p.k, p.k, nullptr, p.offsets[g + 1] - p.offsets[g], p.k,
                                        packed_group(i), panels};
    }
    run_gemm_groups(format, groups, *ws, [&](const GemmTile& t, const float* c, int64_t ldc) {
      const int64_t col0 = t.p0 * ik->nr, w = std::min<int64_t>(t.np * ik->nr, p.n - col0);
      for (int64_t r = 0; r < t.rows; ++r) {
        float* out = p.c + (p.offsets[t.group] + t.r0 + r) * p.n + col0;
        const float* cr = c + r * ldc;
        if (p.accumulate) for (int64_t i = 0; i < w; ++i) out[i] += cr[i];
        else std::copy(cr, cr + w, out);
      }
    });
  }
}

void grouped_weight_grad_gemm_packed(const GroupedWeightGradGemm& p, Isa isa) {
  const IsaKernels* ik = isa_kernels(isa);
  HYMOE_CHECK(ik && p.offsets && p.offsets[0] == 0 && p.k > 0 && p.n > 0);
  // dW_g = A_g^T . G_g, a GEMM over the group's rows, computed in the orientation of its storage so that each tile
  // stores whole runs of a stored row: (k, n) stored (kInOut) as A_g^T . G_g, (n, k) stored (kOutIn, nn.Linear's)
  // as G_g^T . A_g. Storing the other way wrote each tile's columns a stored row apart, one cache line per value
  // run, and read each line back for ownership. Every value is the same dot product over the rows, in row order,
  // either way.
  const bool out_in = p.layout == WeightLayout::kOutIn;
  const float* const left = out_in ? p.g : p.a;   // (R, M): transposed into the GEMM's A
  const float* const right = out_in ? p.a : p.g;  // (R, N): packed into the GEMM's B panels
  const int64_t R = p.offsets[p.num_groups], M = out_in ? p.n : p.k, N = out_in ? p.k : p.n, nr = ik->nr;
  const WorkspaceLease ws;
  const Workspace::Scope scope(*ws);
  float* const at = ws->floats(R * M);
  const int64_t panels = (N + nr - 1) / nr;
  float* const gp = ws->floats(R * panels * nr);
  std::vector<GemmGroup> groups(static_cast<size_t>(p.num_groups));
  for (int64_t g = 0; g < p.num_groups; ++g) {
    const int64_t r0 = p.offsets[g], rows = p.offsets[g + 1] - r0;
    HYMOE_CHECK(rows >= 0);
    if (rows == 0) {  // an empty group's gradient is zero
      if (!p.accumulate && p.dw[g]) std::fill(p.dw[g], p.dw[g] + M * N, 0.0f);
      continue;
    }
    HYMOE_CHECK(p.dw[g]);
    float* a_t = at + r0 * M;  // (M, rows)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < M; ++i) a_t[i * rows + r] = left[(r0 + r) * M + i];
    float* g_packed = gp + r0 * panels * nr;
    pack_rows_f32(right + r0 * N, N, rows, N, static_cast<int>(nr), g_packed);
    groups[static_cast<size_t>(g)] = {a_t, rows, nullptr, M, rows, g_packed, panels};
  }
  run_gemm_groups(*ik->format(WeightFormat::kF32), groups, *ws, [&](const GemmTile& t, const float* c, int64_t ldc) {
    float* dw = p.dw[t.group];
    const int64_t col0 = t.p0 * nr, w = std::min<int64_t>(t.np * nr, N - col0);
    for (int64_t r = 0; r < t.rows; ++r) {
      float* out = dw + (t.r0 + r) * N + col0;
      const float* src = c + r * ldc;
      if (p.accumulate)
        for (int64_t j = 0; j < w; ++j) out[j] += src[j];
      else
        std::copy(src, src + w, out);
    }
  });
}

void dot_rows_gemm(int64_t T, int64_t K, int64_t N, const float* a, const float* w, float* c, Isa isa) {
  HYMOE_CHECK(T >= 0 && K > 0 && N > 0);
  const IsaKernels* ik = isa_kernels(isa);
  if (!ik) return dot_rows_gemm_ref(T, K, N, a, w, c);
  // Tasks of the kernel's most tokens x rows (16 x 32): 32 rows of a 2048-wide gate are 256 KiB, reused from L2
  // by the tokens. With few tokens, fewer rows a task (down to 8: 64 KiB of that gate), until each thread has two:
  // at one token Qwen3-30B-A3B's 128 gate rows were 4 tasks, so 4 threads of 32 read the 1 MiB gate. A logit's bits
  // do not depend on its task.
  constexpr int64_t kTokens = kDotMaxTokens;
  const int64_t token_blocks = (T + kTokens - 1) / kTokens;
  int64_t rows = kDotMaxRows;  // a task's gate rows
  while (rows > 8 && token_blocks * ((N + rows - 1) / rows) < 2 * int64_t{num_threads()}) rows /= 2;
  const int64_t row_blocks = (N + rows - 1) / rows;
  parallel_for(token_blocks * row_blocks, [&](int64_t task, int) {
    const int64_t t0 = task / row_blocks * kTokens, n0 = task % row_blocks * rows;
    const int tokens = static_cast<int>(std::min(kTokens, T - t0)), n = static_cast<int>(std::min(rows, N - n0));
    ik->dot_rows(K, a + t0 * K, K, tokens, w + n0 * K, K, n, c + t0 * N + n0, N);
  });
}

void grouped_rows_gemm(const GroupedRowsGemm& p) {
  if (active_isa() == Isa::kScalar) return grouped_rows_gemm_portable(p);
  grouped_rows_gemm_packed(p, active_isa());
}

void grouped_weight_grad_gemm(const GroupedWeightGradGemm& p) {
  if (active_isa() == Isa::kScalar) return grouped_weight_grad_gemm_portable(p);
  grouped_weight_grad_gemm_packed(p, active_isa());
}

}  // namespace hymoe::kernels
