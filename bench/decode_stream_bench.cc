// Why bf16 decode streams slower than f32 on AVX2 (docs/performance.md, "What the sixth session measured"): the
// decode kernel (one row over four weight panels, the driver's K blocks) streaming cold weights, f32 against bf16,
// beside copies of the f32 kernel that do extra work per k step without reading new memory (register-only adds,
// or loads of a line that stays in L1). If the copies lose about what bf16 loses, the bf16 kernel's loss is the
// cost of its extra instructions, not of its data.
//
//   hymoe_decode_stream_bench --benchmark_enable_random_interleaving=true --benchmark_repetitions=10
//                             --benchmark_report_aggregates_only=true
//
// Weights: Qwen3-30B-A3B's gate/up shape (dim 2048, 96 panels of 16 columns) for 8 experts, in 6 sets used in
// turn so every pass reads from memory (about 600 MB of f32 and 300 MB of bf16, allocated on first use).
// bytes_per_second counts the weights read. range(0) is the thread count.
#include <benchmark/benchmark.h>

#include <immintrin.h>

#include <cstdint>
#include <vector>

#include "bench_isa.h"
#include "hymoe/dtype.h"
#include "hymoe/threads.h"
#include "kernels/gemm_driver.h"
#include "kernels/gemm_kernels.h"
#include "kernels/isa.h"
#include "kernels/thread_pool.h"

namespace hymoe::kernels {
namespace {

// kNr: AVX2's panel width; kKc (the driver's K block) comes from gemm_driver.h.
constexpr int64_t kExperts = 8, kK = 2048, kPanels = 96, kNr = 16, kSets = 6;
constexpr int64_t kPerExpert = kPanels * kK * kNr;
static_assert(kFewRowsPanels[1] == 4, "the copies of the decode kernel below read four panels per call");

struct Weights {
  std::vector<float> f32 = std::vector<float>(static_cast<size_t>(kSets * kExperts * kPerExpert), 0.001f);
  std::vector<uint16_t> bf16 = std::vector<uint16_t>(f32.size(), float_to_bf16(0.001f));
  std::vector<float> a_packed;  // one row, packed as the driver packs it (MR-row panel)
  int next_set = 0;
};
Weights& weights(int mr) {
  static Weights w = [&] {
    Weights init;
    std::vector<float> x(static_cast<size_t>(kK), 1.0f);
    init.a_packed.resize(static_cast<size_t>(kK * mr));
    pack_rows_panel(x.data(), kK, 1, kK, mr, init.a_packed.data());
    return init;
  }();
  return w;
}

enum class Extra { kNone, kVector, kScalar, kL1Loads };
alignas(64) float g_hot_line[16];  // the extra loads of kL1Loads read this line, which stays in L1

// The f32 decode kernel's loop (one row, four panels, 8 accumulators) plus `kExtras` instructions per k step on
// registers the kernel does not use: register-only adds (vector or scalar), or 16-byte loads of a line that stays
// in L1 (bf16's kernel loads 16 bytes at a time: twice f32's loads per byte). kExtras = 0 is the plain copy, a
// check that the copy streams like the library.
template <Extra kExtra, int kExtras>
__attribute__((target("avx2,fma"))) void row_four_panels(int64_t kc, const float* a, int mr, const float* b,
                                                         int64_t panel_stride, float* c, bool accumulate) {
  // Every loop over the accumulators fully unrolled, as in the library: otherwise GCC keeps acc in memory and
  // stores all eight every k step, which alone cost 13-26% of the stream rate (docs/performance.md).
  __m256 acc[8];
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) acc[j] = accumulate ? _mm256_loadu_ps(c + j * 8) : _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 x = _mm256_broadcast_ss(a + k * mr);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j)
      acc[j] = _mm256_fmadd_ps(x, _mm256_loadu_ps(b + (j / 2) * panel_stride + k * kNr + (j % 2) * 8), acc[j]);
#pragma GCC unroll 16
    for (int i = 0; i < kExtras; i += 4) {
      if constexpr (kExtra == Extra::kVector)
        asm volatile(
            "vpaddd %%ymm12, %%ymm12, %%ymm12\n\tvpaddd %%ymm13, %%ymm13, %%ymm13\n\t"
            "vpaddd %%ymm14, %%ymm14, %%ymm14\n\tvpaddd %%ymm15, %%ymm15, %%ymm15" ::: "xmm12", "xmm13", "xmm14",
            "xmm15");
      else if constexpr (kExtra == Extra::kScalar)
        asm volatile("add %%r8, %%r8\n\tadd %%r9, %%r9\n\tadd %%r10, %%r10\n\tadd %%r11, %%r11" ::: "r8", "r9",
                     "r10", "r11", "cc");
      else if constexpr (kExtra == Extra::kL1Loads)
        asm volatile(
            "vmovdqu (%0), %%xmm12\n\tvmovdqu 16(%0), %%xmm13\n\tvmovdqu 32(%0), %%xmm14\n\tvmovdqu 48(%0), %%xmm15"
            :
            : "r"(g_hot_line)
            : "xmm12", "xmm13", "xmm14", "xmm15");
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) _mm256_storeu_ps(c + j * 8, acc[j]);
}

using CopyFn = void (*)(int64_t, const float*, int, const float*, int64_t, float*, bool);

// One pass over a set of weights, the driver's way: tiles of 8 panels over all threads, K blocks of kKc, four
// panels per call. `copy` == nullptr runs the library's kernel for `bf16`.
void stream(benchmark::State& state, bool bf16, CopyFn copy) {
  const IsaKernels* kernels = kernels_or_skip(state, Isa::kAvx2);
  if (!kernels) return;
  const IsaKernels& ik = *kernels;
  Weights& w = weights(ik.mr);
  set_num_threads(static_cast<int>(state.range(0)));
  std::vector<float> out(static_cast<size_t>(num_threads() * 8 * kNr));
  const int64_t tiles = kExperts * kPanels / 8;
  for (auto _ : state) {
    const int64_t set = w.next_set;
    w.next_set = (w.next_set + 1) % kSets;
    parallel_for(tiles, [&](int64_t t, int thread) {
      const int64_t e = t / (kPanels / 8), p0 = (t % (kPanels / 8)) * 8;
      float* c = out.data() + thread * 8 * kNr;
      for (int64_t k0 = 0; k0 < kK; k0 += kKc)
        for (int64_t p = 0; p < 8; p += kFewRowsPanels[1]) {
          const int64_t off = (set * kExperts + e) * kPerExpert + (p0 + p) * kK * kNr + k0 * kNr;
          const float* a = w.a_packed.data() + k0 * ik.mr;
          if (copy) copy(kKc, a, ik.mr, w.f32.data() + off, kK * kNr, c + p * kNr, k0 > 0);
          else if (bf16) ik.gemm_bf16w_few(1, kKc, a, w.bf16.data() + off, kK * kNr, c + p * kNr, 8 * kNr, k0 > 0);
          else ik.gemm_f32w_few(1, kKc, a, w.f32.data() + off, kK * kNr, c + p * kNr, 8 * kNr, k0 > 0);
        }
    });
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * kExperts * kPerExpert * (bf16 ? 2 : 4));
  set_num_threads(default_num_threads());
}

void BM_DecodeStreamF32(benchmark::State& s) { stream(s, false, nullptr); }
void BM_DecodeStreamBf16(benchmark::State& s) { stream(s, true, nullptr); }
void BM_DecodeStreamF32Copy(benchmark::State& s) { stream(s, false, row_four_panels<Extra::kNone, 0>); }
void BM_DecodeStreamF32Plus16VectorAdds(benchmark::State& s) { stream(s, false, row_four_panels<Extra::kVector, 16>); }
void BM_DecodeStreamF32Plus16ScalarAdds(benchmark::State& s) { stream(s, false, row_four_panels<Extra::kScalar, 16>); }
void BM_DecodeStreamF32Plus40VectorAdds(benchmark::State& s) { stream(s, false, row_four_panels<Extra::kVector, 40>); }
void BM_DecodeStreamF32Plus8L1Loads(benchmark::State& s) { stream(s, false, row_four_panels<Extra::kL1Loads, 8>); }

#define DECODE_STREAM(fn) BENCHMARK(fn)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()
DECODE_STREAM(BM_DecodeStreamF32);
DECODE_STREAM(BM_DecodeStreamBf16);
DECODE_STREAM(BM_DecodeStreamF32Copy);
DECODE_STREAM(BM_DecodeStreamF32Plus16VectorAdds);
DECODE_STREAM(BM_DecodeStreamF32Plus16ScalarAdds);
DECODE_STREAM(BM_DecodeStreamF32Plus40VectorAdds);
DECODE_STREAM(BM_DecodeStreamF32Plus8L1Loads);

}  // namespace
}  // namespace hymoe::kernels

BENCHMARK_MAIN();
