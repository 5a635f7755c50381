// Helpers for the kernel tests: the ISAs to sweep (skipping those the CPU lacks) and error bounds derived from the
// dtype and the reduction length instead of guessed tolerances.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "hymoe/dtype.h"
#include "hymoe/rng.h"
#include "kernels/gemm_kernels.h"
#include "kernels/grouped_ffn.h"
#include "kernels/isa.h"

namespace hymoe::test {

// Unit roundoff of float32: every product-sum the kernels do rounds to float.
constexpr double kF32Eps = 1.0 / (1 << 24);

// Bound on |float FMA chain - exact| for a dot product of length k whose terms have absolute sum abs_sum: the
// classic gamma_k = k*u/(1-k*u) bound, with one extra rounding for storing and a floor for denormal noise.
inline double dot_error_bound(int64_t k, double abs_sum) {
  const double ku = static_cast<double>(k + 1) * kF32Eps;
  return ku / (1.0 - ku) * abs_sum + 1e-30;
}

inline bool isa_supported(kernels::Isa isa) {
  for (kernels::Isa s : kernels::supported_isas())
    if (s == isa) return true;
  return false;
}

inline std::string isa_param_name(const ::testing::TestParamInfo<kernels::Isa>& info) {
  return std::string(kernels::isa_name(info.param));
}

// uniform(-1, 1) values; for bf16 weights already rounded to bf16 so the reference sees the same numbers.
inline std::vector<float> random_values(Rng& rng, int64_t n, bool bf16_exact = false) {
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) {
    x = static_cast<float>(2.0 * rng.uniform() - 1.0);
    if (bf16_exact) x = bf16_to_float(float_to_bf16(x));
  }
  return v;
}

// A grouped FFN's outputs with the saved pre-activation gate and up rows (every element first set to -7, so an
// element left unwritten shows).
struct FfnOutputs {
  std::vector<float> y, gate, up;
};
inline FfnOutputs run_ffn_saving(const kernels::GroupedFfn& ffn, const std::vector<int64_t>& offsets,
                                 const std::vector<float>& x, const std::vector<float>& scale) {
  const int64_t R = offsets.back();
  const kernels::GroupedFfnShape& shape = ffn.shape();
  FfnOutputs o;
  o.y.assign(static_cast<size_t>(R * shape.dim), -7.0f);
  o.gate.assign(static_cast<size_t>(R * shape.hidden), -7.0f);
  o.up = o.gate;
  kernels::GroupedFfnArgs args;
  args.offsets = offsets.data();
  args.x = x.data();
  args.scale = scale.data();
  args.y = o.y.data();
  args.saved_gate = o.gate.data();
  args.saved_up = o.up.data();
  ffn.run(args);
  return o;
}

// A suite run once per ISA (instantiated over kernels::Isa): skipped where the CPU lacks the ISA; ik_ holds its
// kernels.
class IsaKernelsTest : public ::testing::TestWithParam<kernels::Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) GTEST_SKIP() << "CPU lacks " << kernels::isa_name(GetParam());
    ik_ = kernels::isa_kernels(GetParam());
    ASSERT_NE(ik_, nullptr);
  }
  const kernels::IsaKernels* ik_ = nullptr;
};

}  // namespace hymoe::test
