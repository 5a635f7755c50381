// Micro-benchmarks of the kernel stages: one micro-kernel call over a K block (operands hot in L1/L2), the
// packing of one expert, and the grouped FFN on a DeepSeek-V2-Lite-sized expert batch. GFLOP/s in the
// "FLOPS" counter (2*M*N*K per GEMM).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include "bench_isa.h"
#include "hymoe/threads.h"
#include "kernels/formats/gemm_kernels.h"
#include "kernels/ffn/grouped_ffn.h"

namespace hymoe::kernels {
namespace {

// One MR x NR tile over kc = range(0), f32 or bf16 weights.
template <bool kBf16>
void BM_MicroKernel(benchmark::State& state, Isa isa) {
  const IsaKernels* ik = kernels_or_skip(state, isa);
  if (!ik) return;
  const int64_t kc = state.range(0);
  std::vector<float> a(static_cast<size_t>(ik->mr * kc), 0.5f), b(static_cast<size_t>(kc * ik->nr), 0.25f);
  std::vector<uint16_t> bb(b.size(), float_to_bf16(0.25f));
  std::vector<float> c(static_cast<size_t>(ik->mr * ik->nr));
  for (auto _ : state) {
    if constexpr (kBf16) ik->gemm_bf16w(ik->mr, kc, a.data(), bb.data(), c.data(), ik->nr, false, nullptr, 0);
    else ik->gemm_f32w(ik->mr, kc, a.data(), b.data(), c.data(), ik->nr, false, nullptr, 0);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["FLOPS"] = benchmark::Counter(2.0 * ik->mr * ik->nr * kc, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(kBf16 ? ik->gemm_bf16w_name : ik->gemm_f32w_name);
}
void BM_MicroKernelF32w(benchmark::State& state, Isa isa) { BM_MicroKernel<false>(state, isa); }
void BM_MicroKernelBf16w(benchmark::State& state, Isa isa) { BM_MicroKernel<true>(state, isa); }
BENCHMARK_CAPTURE(BM_MicroKernelF32w, avx2, Isa::kAvx2)->Arg(64)->Arg(256)->Arg(1024);
BENCHMARK_CAPTURE(BM_MicroKernelBf16w, avx2, Isa::kAvx2)->Arg(64)->Arg(256)->Arg(1024);
BENCHMARK_CAPTURE(BM_MicroKernelF32w, avx512, Isa::kAvx512)->Arg(256);
BENCHMARK_CAPTURE(BM_MicroKernelBf16w, avx512, Isa::kAvx512)->Arg(256);

// The few-rows variant for groups of 1-3 rows (rows = range(1); one row is decode) over kFewRowsPanels[rows]
// panels and kc = range(0); operands hot, so this is its compute rate, which the 1-3 row micro-kernel caps by
// the FMA latency (compare BM_MicroKernel at the same kc).
template <bool kBf16>
void BM_FewRows(benchmark::State& state, Isa isa) {
  const IsaKernels* ik = kernels_or_skip(state, isa);
  if (!ik) return;
  const int64_t kc = state.range(0);
  const int m = static_cast<int>(state.range(1)), panels = kFewRowsPanels[m];
  const int64_t stride = kc * ik->nr, ldc = panels * ik->nr;
  std::vector<float> a(static_cast<size_t>(ik->mr * kc), 0.5f), b(static_cast<size_t>(panels * stride), 0.25f);
  std::vector<uint16_t> bb(b.size(), float_to_bf16(0.25f));
  std::vector<float> c(static_cast<size_t>(m * ldc));
  for (auto _ : state) {
    if constexpr (kBf16) ik->gemm_bf16w_few(m, kc, a.data(), bb.data(), stride, c.data(), ldc, false);
    else ik->gemm_f32w_few(m, kc, a.data(), b.data(), stride, c.data(), ldc, false);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["FLOPS"] =
      benchmark::Counter(2.0 * m * panels * ik->nr * kc, benchmark::Counter::kIsIterationInvariantRate);
}
void BM_FewRowsF32w(benchmark::State& state, Isa isa) { BM_FewRows<false>(state, isa); }
void BM_FewRowsBf16w(benchmark::State& state, Isa isa) { BM_FewRows<true>(state, isa); }
BENCHMARK_CAPTURE(BM_FewRowsF32w, avx2, Isa::kAvx2)->ArgsProduct({{256}, {1, 2, 3}});
BENCHMARK_CAPTURE(BM_FewRowsBf16w, avx2, Isa::kAvx2)->ArgsProduct({{256}, {1, 2, 3}});
BENCHMARK_CAPTURE(BM_FewRowsF32w, avx512, Isa::kAvx512)->ArgsProduct({{256}, {1, 2, 3}});

// The fp8 and mxfp4 kernels, operands hot: range(0) rows; range(1) = 0 runs the m-row kernel on one panel, 1 the
// few-rows form over kFewRowsPanels[rows] panels (rows <= few_rows_max, which is 1). K = 256. The packed bytes are built directly: normal
// e4m3 codes of both signs with unit multipliers (the fp8 kernels' fast decode; a unit holding a subnormal or zero
// code takes the F16C one), any E2M1 codes with the scale 2^0.
void BM_QuantizedKernel(benchmark::State& state, WeightFormat format) {
  const IsaKernels* ik = kernels_or_skip(state, Isa::kAvx2);
  if (!ik) return;
  const GemmFormat& f = *ik->format(format);
  const int m = static_cast<int>(state.range(0));
  const bool few = state.range(1) != 0;
  const int panels = few ? kFewRowsPanels[m] : 1;
  const int64_t kc = 256, units = f.units(kc), panel_bytes = units * f.b_unit_bytes();
  std::vector<uint8_t> b(static_cast<size_t>(panels * panel_bytes));
  for (int64_t u = 0; u < panels * units; ++u) {
    uint8_t* unit = b.data() + u * f.b_unit_bytes();
    const int64_t code_bytes = format == WeightFormat::kFp8Block128 ? kc / units * f.nr : kc / units / 2 * f.nr;
    for (int64_t i = 0; i < code_bytes; ++i)
      unit[i] = static_cast<uint8_t>(8 + (i * 37 + u) % 119 + (i % 3 == 0 ? 0x80 : 0));
    for (int j = 0; j < f.nr; ++j) {
      if (format == WeightFormat::kFp8Block128) reinterpret_cast<float*>(unit + code_bytes)[j] = 1.0f;
      else unit[code_bytes + j] = 127;
    }
  }
  std::vector<float> a(static_cast<size_t>(f.mr * kc), 0.5f), c(static_cast<size_t>(f.mr * panels * f.nr));
  for (auto _ : state) {
    if (few) f.gemm_few(m, kc, a.data(), b.data(), panel_bytes, c.data(), panels * f.nr, false);
    else f.gemm(m, kc, a.data(), b.data(), c.data(), f.nr, false, nullptr, 0);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["weights/s"] =
      benchmark::Counter(static_cast<double>(panels * f.nr * kc), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(f.name);
}
BENCHMARK_CAPTURE(BM_QuantizedKernel, fp8, WeightFormat::kFp8Block128)
    ->Args({1, 0})->Args({2, 0})->Args({3, 0})->Args({4, 0})->Args({1, 1});
BENCHMARK_CAPTURE(BM_QuantizedKernel, mxfp4, WeightFormat::kMxfp4Block32)
    ->Args({1, 0})->Args({2, 0})->Args({3, 0})->Args({4, 0})->Args({1, 1});

// Times fn over one micro-tile of format f (MR rows, one panel, kc k) on operands hot in L1, and reports the rate as
// `counter` (two operations a multiply-add) beside the kernel's name.
void time_hot_tile(benchmark::State& state, const GemmFormat& f, GemmFn fn, int64_t kc, const void* a, const void* b,
                   const char* counter) {
  std::vector<float> c(static_cast<size_t>(f.mr * f.nr));
  for (auto _ : state) {
    fn(f.mr, kc, a, b, c.data(), f.nr, false, nullptr, 0);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters[counter] = benchmark::Counter(2.0 * f.mr * f.nr * kc, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(f.name);
}

// A format's full micro-tile (MR rows, one panel) over one K block of 128, operands hot, on the AVX512_BF16 table:
// bf16 dot against fp8 dot on its codes and on its expanded block (range(0) = 1; the form later micro-tiles of a
// tile run). Bytes are all zero: the rate does not depend on the values.
void BM_DotFormatKernel(benchmark::State& state, WeightFormat format) {
  const IsaKernels* ik = kernels_or_skip(state, Isa::kAvx512Bf16);
  if (!ik) return;
  const GemmFormat& f = *ik->format(format);
  const bool expanded = state.range(0) != 0;
  if (expanded && !f.gemm_expanded) return state.SkipWithError("no expanded form");
  const int64_t kc = 128;
  std::vector<uint8_t> a(static_cast<size_t>(f.units(kc) * f.a_unit_bytes())),
      b(static_cast<size_t>(f.units(kc) * std::max(f.b_unit_bytes(), f.expanded_unit_bytes)));
  // Weights as real ones are: codes of normal e4m3 values, rarely the zeros and subnormals the fp8 decode looks up
  // on a slower path (bytes 0x20-0x6f, also finite positive multipliers and bf16 values).
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(0x20 + i * 37 % 0x50);
  time_hot_tile(state, f, expanded ? f.gemm_expanded : f.gemm, kc, a.data(), b.data(), "FLOPS");
}
BENCHMARK_CAPTURE(BM_DotFormatKernel, bf16_dot, WeightFormat::kBf16Dot)->Arg(0);
BENCHMARK_CAPTURE(BM_DotFormatKernel, fp8_dot, WeightFormat::kFp8Block128Dot)->Arg(0)->Arg(1);

// An int8 format's full micro-tile (MR rows, one panel) over K = 512, operands hot in L1, on the best ISA this CPU
// runs: the kernel's own rate, to read against the int8-dot probe beside the layer's (docs/performance.md, "Where
// the misses come from"). The activations are packed from real values; every weight byte is 0x3c, so each f32,
// f16 or E8M0 factor the panels hold is a normal number (subnormal operands would cost microcode assists real
// weights never do) and the codes are valid: the rate of these formats does not depend on the values.
void BM_Int8Tile(benchmark::State& state, WeightFormat format) {
  const IsaKernels* ik = isa_kernels(supported_isas().back());
  const GemmFormat& f = *ik->format(format);
  const int64_t kc = 512;
  std::vector<uint8_t> a(static_cast<size_t>(f.units(kc) * f.a_unit_bytes())),
      b(static_cast<size_t>(f.units(kc) * f.b_unit_bytes()), 0x3c);
  std::vector<float> x(static_cast<size_t>(f.mr * kc));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i * 37 % 201) - 100) / 64.0f;
  f.pack_a(x.data(), kc, nullptr, f.mr, kc, f.mr, a.data());
  time_hot_tile(state, f, f.gemm, kc, a.data(), b.data(), "OPS");
}
BENCHMARK_CAPTURE(BM_Int8Tile, q8_0, WeightFormat::kGgmlQ8_0I8);
BENCHMARK_CAPTURE(BM_Int8Tile, q4_0, WeightFormat::kGgmlQ4_0I8);
BENCHMARK_CAPTURE(BM_Int8Tile, q5_0, WeightFormat::kGgmlQ5_0I8);
BENCHMARK_CAPTURE(BM_Int8Tile, q4_k, WeightFormat::kGgmlQ4_KI8);
BENCHMARK_CAPTURE(BM_Int8Tile, q5_k, WeightFormat::kGgmlQ5_KI8);
BENCHMARK_CAPTURE(BM_Int8Tile, q6_k, WeightFormat::kGgmlQ6_KI8);
BENCHMARK_CAPTURE(BM_Int8Tile, iq4_xs, WeightFormat::kGgmlIQ4_XSI8);
BENCHMARK_CAPTURE(BM_Int8Tile, q2_k, WeightFormat::kGgmlQ2_KI8);
BENCHMARK_CAPTURE(BM_Int8Tile, mxfp4, WeightFormat::kMxfp4Block32I8);

// Packing one expert's gate/up pair (dim 2048, hidden 1408) from nn.Linear layout.
void BM_PackGateUp(benchmark::State& state) {
  const int64_t D = 2048, H = 1408;
  std::vector<float> g(static_cast<size_t>(D * H), 0.5f), u(g.size(), 0.25f);
  const MatrixView gv{g.data(), DType::kF32, WeightLayout::kOutIn, D, H}, uv{u.data(), DType::kF32, WeightLayout::kOutIn, D, H};
  for (auto _ : state) benchmark::DoNotOptimize(pack_gate_up(gv, uv, 16).f32());
  state.SetBytesProcessed(state.iterations() * 2 * D * H * 4);
}
BENCHMARK(BM_PackGateUp)->Unit(benchmark::kMillisecond);

// The grouped FFN on E experts of DeepSeek-V2-Lite size with range(0) rows each (hot: the same weights each
// iteration; range(1) threads).
void BM_GroupedFfn(benchmark::State& state) {
  const int64_t D = 2048, H = 1408, E = 8, rows = state.range(0);
  set_num_threads(static_cast<int>(state.range(1)));
  std::vector<float> w(static_cast<size_t>(E * 3 * D * H), 0.01f);
  std::vector<MlpWeightsView> views;
  for (int64_t e = 0; e < E; ++e) {
    const float* base = w.data() + e * 3 * D * H;
    views.push_back({{base, DType::kF32, WeightLayout::kOutIn, D, H},
                     {base + D * H, DType::kF32, WeightLayout::kOutIn, D, H},
                     {base + 2 * D * H, DType::kF32, WeightLayout::kOutIn, H, D}});
  }
  const auto ffn = make_grouped_ffn({E, D, H, Activation::kSwiGLU}, views);
  std::vector<int64_t> offsets;
  for (int64_t e = 0; e <= E; ++e) offsets.push_back(e * rows);
  std::vector<float> x(static_cast<size_t>(E * rows * D), 0.5f), y(x.size());
  GroupedFfnArgs args;
  args.offsets = offsets.data();
  args.x = x.data();
  args.y = y.data();
  for (auto _ : state) {
    ffn->run(args);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["FLOPS"] = benchmark::Counter(2.0 * 3 * D * H * E * rows, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(ffn->name());
  set_num_threads(default_num_threads());
}
BENCHMARK(BM_GroupedFfn)->Args({1, 1})->Args({48, 1})->Args({48, 2})->Args({256, 2})->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace hymoe::kernels

BENCHMARK_MAIN();
