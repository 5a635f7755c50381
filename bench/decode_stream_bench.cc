// Why decode streams below the read bandwidth (docs/performance.md). First, bf16 against f32 on AVX2: the
// decode kernel (one row over four weight panels, the driver's K blocks) streaming cold weights, f32 against bf16,
// beside copies of the f32 kernel that do extra work per k step without reading new memory (register-only adds,
// or loads of a line that stays in L1). If the copies lose about what bf16 loses, the bf16 kernel's loss is the
// cost of its extra instructions, not of its data. Second, the quantized decode forms (GGUF, MXFP4 and fp8 weights at
// T = 1) cold, against the same access pattern with loads only and against themselves hot in L2. Third, what a
// phase boundary of the decode step costs in the thread pool (BM_PoolRoundTrip, BM_PoolWorkerJoin).
//
//   hymoe_decode_stream_bench --benchmark_enable_random_interleaving=true --benchmark_repetitions=10
//                             --benchmark_report_aggregates_only=true
//
// Weights: Qwen3-30B-A3B's gate/up shape (dim 2048, 96 panels of 16 columns) for 8 experts, in 6 sets used in
// turn so every pass reads from memory (about 600 MB of f32 and 300 MB of bf16, allocated on first use).
// bytes_per_second counts the weights read. range(0) is the thread count.
#include <benchmark/benchmark.h>

#include <immintrin.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bench_isa.h"
#include "hymoe/dtype.h"
#include "hymoe/threads.h"
#include "kernels/driver/gemm_driver.h"
#include "kernels/formats/gemm_kernels.h"
#include "kernels/isa/isa.h"
#include "kernels/driver/thread_pool.h"

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

// The quantized decode forms at T = 1, on the ISA the layer runs (active_isa(): HYMOE_ISA forces another; the
// label names it): the GGUF and MXFP4 integer formats (Int8* rows), fp8's exact kernel and its bf16-dot form
// (Fp8*, Fp8Dot*), MXFP4's exact kernel (Mxfp4Exact*) and native bf16 (Bf16Dot*). The same 8 experts x 96 panels x
// K = 2048 in the format's packed panels (16 sets used in turn, so every pass reads from memory), streamed the
// driver's way (tiles of 8 panels, four panels per call, whole K where one row's packed activations fit half of L1,
// else K blocks); beside it the same access pattern with loads only (what memory gives this pattern) and the kernel
// on one tile's panels hot in L2 (what the core gives). The codes are a constant byte: the kernels' speed does not
// depend on the values.
struct PackedWeights {
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> a;  // one row, quantized and packed as the driver packs it
  int64_t panel_bytes = 0;
  int next_set = 0;
};
constexpr int64_t kPackedSets = 16;
PackedWeights& packed_weights(const GemmFormat& f) {
  static PackedWeights all[kNumWeightFormats];
  PackedWeights& w = all[static_cast<int>(f.format)];
  if (w.bytes.empty()) {
    w.panel_bytes = f.units(kK) * f.b_unit_bytes();
    w.bytes.assign(static_cast<size_t>(kPackedSets * kExperts * kPanels * w.panel_bytes), 0x11);
    const std::vector<float> x(static_cast<size_t>(kK), 0.5f);
    w.a.resize(static_cast<size_t>(f.units(kK) * f.a_unit_bytes()));
    f.pack_a(x.data(), kK, nullptr, 1, kK, f.mr, w.a.data());
  }
  return w;
}

// Reads four panels side by side, a line of each in turn, as the decode form does.
__attribute__((target("avx2"))) void read_four_panels(int64_t bytes, const uint8_t* b, int64_t panel_stride,
                                                       float* c) {
  __m256i acc[4];
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) acc[p] = _mm256_setzero_si256();
  for (int64_t o = 0; o < bytes; o += 64)
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      const uint8_t* line = b + p * panel_stride + o;
      acc[p] = _mm256_or_si256(acc[p], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(line)));
      acc[p] = _mm256_or_si256(acc[p], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(line + 32)));
    }
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + p * 8), acc[p]);
}

enum class DecodePass { kCold, kLoadsOnly, kHot };
void decode_form(benchmark::State& state, WeightFormat format, DecodePass pass) {
  const IsaKernels* kernels = isa_kernels(active_isa());
  if (!kernels->format(format)) return state.SkipWithError("no such format on this ISA");
  const GemmFormat& f = *kernels->format(format);
  state.SetLabel(f.name);
  PackedWeights& w = packed_weights(f);
  set_num_threads(static_cast<int>(state.range(0)));
  const int64_t nr = f.nr;
  std::vector<float> out(static_cast<size_t>(num_threads() * 8 * nr));
  // Hot: each thread runs one tile's 8 panels (320 KiB in Q4_0) kHotRepeats times.
  constexpr int64_t kHotRepeats = 64;
  // As the driver (gemm_driver.h): whole K per call for the GGUF int8 forms and where one row's packed activations
  // fit half of L1, else K blocks.
  const bool whole_k = is_gguf_int8_format(f.format) || f.units(kK) * f.a_unit_bytes() <= kFewWholeKActivationBytes;
  const int64_t tiles = pass == DecodePass::kHot ? num_threads() : kExperts * kPanels / 8;
  for (auto _ : state) {
    const int64_t set = w.next_set;
    w.next_set = (w.next_set + 1) % kPackedSets;
    parallel_for(tiles, [&](int64_t t, int thread) {
      float* c = out.data() + thread * 8 * nr;
      const uint8_t* tile = w.bytes.data() + (pass == DecodePass::kHot ? t * 8 : set * kExperts * kPanels + t * 8) *
                                                 w.panel_bytes;
      for (int64_t r = 0; r < (pass == DecodePass::kHot ? kHotRepeats : 1); ++r)
        for (int64_t p = 0; p < 8; p += kFewRowsPanels[1]) {
          const uint8_t* b = tile + p * w.panel_bytes;
          if (pass == DecodePass::kLoadsOnly) read_four_panels(w.panel_bytes, b, w.panel_bytes, c + p * 8);
          else if (whole_k) f.gemm_few(1, kK, w.a.data(), b, w.panel_bytes, c + p * nr, 8 * nr, false);
          else
            for (int64_t k0 = 0; k0 < kK; k0 += kKc) {
              const int64_t units = k0 / k_unit(f.format);
              f.gemm_few(1, kKc, w.a.data() + units * f.a_unit_bytes(), b + units * f.b_unit_bytes(), w.panel_bytes,
                         c + p * nr, 8 * nr, k0 > 0);
            }
        }
    });
    benchmark::DoNotOptimize(out.data());
  }
  const int64_t panels_read = pass == DecodePass::kHot ? num_threads() * 8 * kHotRepeats : kExperts * kPanels;
  state.SetBytesProcessed(state.iterations() * panels_read * w.panel_bytes);
  set_num_threads(default_num_threads());
}
// Every GGUF type's int8 form, cold and hot, from the format registry (gguf_formats.inc): BM_Int8Stream<TYPE>,
// BM_Int8Hot<TYPE>.
const bool kGgufDecodeFormsRegistered = [] {
  for (const kernels::GgufBlockFormat& b : kernels::kGgufBlockFormats)
    for (const auto& [pass, what] : {std::pair{DecodePass::kCold, "Stream"}, std::pair{DecodePass::kHot, "Hot"}})
      benchmark::RegisterBenchmark((std::string("BM_Int8") + what + b.type_name).c_str(),  // the name is copied
                                   [format = b.int8, pass](benchmark::State& s) { decode_form(s, format, pass); })
          ->Arg(1)
          ->Arg(2)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
  return true;
}();
void BM_Int8StreamMxfp4(benchmark::State& s) { decode_form(s, WeightFormat::kMxfp4Block32I8, DecodePass::kCold); }
void BM_Fp8Stream(benchmark::State& s) { decode_form(s, WeightFormat::kFp8Block128, DecodePass::kCold); }
void BM_Fp8Hot(benchmark::State& s) { decode_form(s, WeightFormat::kFp8Block128, DecodePass::kHot); }
void BM_Fp8DotStream(benchmark::State& s) { decode_form(s, WeightFormat::kFp8Block128Dot, DecodePass::kCold); }
void BM_Fp8DotHot(benchmark::State& s) { decode_form(s, WeightFormat::kFp8Block128Dot, DecodePass::kHot); }
void BM_Bf16DotStream(benchmark::State& s) { decode_form(s, WeightFormat::kBf16Dot, DecodePass::kCold); }
void BM_Bf16DotHot(benchmark::State& s) { decode_form(s, WeightFormat::kBf16Dot, DecodePass::kHot); }
void BM_Mxfp4ExactStream(benchmark::State& s) { decode_form(s, WeightFormat::kMxfp4Block32, DecodePass::kCold); }
void BM_Mxfp4ExactHot(benchmark::State& s) { decode_form(s, WeightFormat::kMxfp4Block32, DecodePass::kHot); }
void BM_Int8StreamLoadsOnlyQ4_0(benchmark::State& s) {
  decode_form(s, WeightFormat::kGgmlQ4_0I8, DecodePass::kLoadsOnly);
}
void BM_Int8HotMxfp4(benchmark::State& s) { decode_form(s, WeightFormat::kMxfp4Block32I8, DecodePass::kHot); }

// Keeps the calling thread busy for `us` microseconds (serial work of the caller, or a task's).
void busy_wait_us(int64_t us) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < until) {}
}

// What a phase boundary costs a decode step: one parallel_for of a task per thread that does nothing, after 20 us
// of the caller's own serial work (a decode step's gap between phases is a few microseconds; its phases take
// 50-500 us). With the pool's threads sleeping between jobs (HYMOE_POOL_SPIN_US=0) the call waits for a thread's
// wake-up; with them polling (the default), it does not.
void BM_PoolRoundTrip(benchmark::State& state) {
  set_num_threads(static_cast<int>(state.range(0)));
  std::vector<int64_t> sink(static_cast<size_t>(num_threads()) * 16);
  for (auto _ : state) {
    state.PauseTiming();
    busy_wait_us(20);
    state.ResumeTiming();
    parallel_for(num_threads(), [&](int64_t t, int thread) { sink[static_cast<size_t>(thread) * 16] += t; });
  }
  benchmark::DoNotOptimize(sink.data());
  set_num_threads(default_num_threads());
}
BENCHMARK(BM_PoolRoundTrip)->Arg(2)->Unit(benchmark::kMicrosecond);

// How late the second thread joins a parallel_for that follows 20 us of the caller's serial work after a phase in
// which both threads worked 200 us, as in a decode step (the time reported, manual): each thread takes one task of
// 200 us, the second as soon as it runs (a thread not there within the caller's 200 us counts as 200). Sleeping
// between jobs, it joins after its wake-up; polling, at once.
void BM_PoolWorkerJoin(benchmark::State& state) {
  set_num_threads(2);
  for (auto _ : state) {
    busy_wait_us(20);
    const auto start = std::chrono::steady_clock::now();
    std::chrono::steady_clock::time_point joined = start + std::chrono::microseconds(200);
    parallel_for(2, [&](int64_t task, int thread) {
      if (thread != 0) joined = std::chrono::steady_clock::now();
      if (thread != 0 || task == 0) busy_wait_us(200);
    });
    state.SetIterationTime(std::chrono::duration<double>(joined - start).count());
  }
  set_num_threads(default_num_threads());
}
BENCHMARK(BM_PoolWorkerJoin)->UseManualTime()->Iterations(2000)->Unit(benchmark::kMicrosecond);

// Loads only, in other access patterns: a set of the f32 weights read in 4 MiB chunks over the threads, each chunk as
// range(1) regions side by side in runs of range(2) bytes (1 region: one sequential stream; 4 regions of 640-byte
// runs: the GGUF decode form's pattern, four panels of Q4_0's 640-byte int8 units). Which pattern the memory system
// serves fastest bounds what any panel layout could stream at T = 1; range(0) is the thread count.
__attribute__((target("avx2"))) float read_regions(const char* p, int64_t bytes, int regions, int64_t run) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  const int64_t region = bytes / regions;
  for (int64_t o = 0; o < region; o += run)
    for (int r = 0; r < regions; ++r)
      for (const char* q = p + r * region + o; q < p + r * region + o + run; q += 128) {
        s0 = _mm256_add_ps(s0, _mm256_loadu_ps(reinterpret_cast<const float*>(q)));
        s1 = _mm256_add_ps(s1, _mm256_loadu_ps(reinterpret_cast<const float*>(q + 32)));
        s2 = _mm256_add_ps(s2, _mm256_loadu_ps(reinterpret_cast<const float*>(q + 64)));
        s3 = _mm256_add_ps(s3, _mm256_loadu_ps(reinterpret_cast<const float*>(q + 96)));
      }
  alignas(32) float out[8];
  _mm256_store_ps(out, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}
void BM_ReadRegions(benchmark::State& state) {
  if (!kernels_or_skip(state, Isa::kAvx2)) return;
  Weights& w = weights(1);
  set_num_threads(static_cast<int>(state.range(0)));
  const int regions = static_cast<int>(state.range(1));
  const int64_t run = state.range(2), chunk = int64_t{4} << 20, set_bytes = kExperts * kPerExpert * 4;
  static_assert(kExperts * kPerExpert * 4 % (int64_t{4} << 20) == 0, "a set is whole chunks");
  const int64_t chunks = set_bytes / chunk;
  std::vector<float> sums(static_cast<size_t>(chunks));
  for (auto _ : state) {
    const char* base = reinterpret_cast<const char*>(w.f32.data() + w.next_set * kExperts * kPerExpert);
    w.next_set = (w.next_set + 1) % kSets;
    parallel_for(chunks, [&](int64_t c, int) {
      sums[static_cast<size_t>(c)] = read_regions(base + c * chunk, chunk, regions, run);
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetBytesProcessed(state.iterations() * set_bytes);
  set_num_threads(default_num_threads());
}
BENCHMARK(BM_ReadRegions)
    ->ArgsProduct({{2}, {1, 2, 4, 8}, {128, 640, 4096}})
    ->ArgNames({"threads", "regions", "run"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

#define DECODE_STREAM(fn) BENCHMARK(fn)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()
DECODE_STREAM(BM_DecodeStreamF32);
DECODE_STREAM(BM_DecodeStreamBf16);
DECODE_STREAM(BM_DecodeStreamF32Copy);
DECODE_STREAM(BM_DecodeStreamF32Plus16VectorAdds);
DECODE_STREAM(BM_DecodeStreamF32Plus16ScalarAdds);
DECODE_STREAM(BM_DecodeStreamF32Plus40VectorAdds);
DECODE_STREAM(BM_DecodeStreamF32Plus8L1Loads);
DECODE_STREAM(BM_Int8StreamMxfp4);
DECODE_STREAM(BM_Fp8Stream);
DECODE_STREAM(BM_Fp8Hot);
DECODE_STREAM(BM_Fp8DotStream);
DECODE_STREAM(BM_Fp8DotHot);
DECODE_STREAM(BM_Bf16DotStream);
DECODE_STREAM(BM_Bf16DotHot);
DECODE_STREAM(BM_Mxfp4ExactStream);
DECODE_STREAM(BM_Mxfp4ExactHot);
DECODE_STREAM(BM_Int8StreamLoadsOnlyQ4_0);
DECODE_STREAM(BM_Int8HotMxfp4);

}  // namespace
}  // namespace hymoe::kernels

BENCHMARK_MAIN();
