// What the Google Benchmark programs share: skipping a benchmark of an ISA this CPU lacks.
#pragma once

#include <benchmark/benchmark.h>

#include "kernels/formats/gemm_kernels.h"
#include "kernels/isa/isa.h"

namespace hymoe::kernels {

// The kernels of `isa`, or nullptr (the benchmark then marked skipped) when this CPU cannot run them.
inline const IsaKernels* kernels_or_skip(benchmark::State& state, Isa isa) {
  for (Isa s : supported_isas())
    if (s == isa) return isa_kernels(isa);
  state.SkipWithError("CPU lacks this ISA");
  return nullptr;
}

}  // namespace hymoe::kernels
