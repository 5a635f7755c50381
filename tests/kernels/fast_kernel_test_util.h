// Helpers for the kernel tests: the ISAs to sweep (skipping those the CPU lacks) and error bounds derived from the
// dtype and the reduction length instead of guessed tolerances.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "hymoe/dtype.h"
#include "hymoe/rng.h"
#include "kernels/driver/gemm_driver.h"
#include "kernels/formats/gemm_kernels.h"
#include "kernels/ffn/grouped_ffn.h"
#include "kernels/isa/isa.h"

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

// How a layer hands each token to its top-k experts: row r of the batch read through x_rows as token
// (7 r + 3) mod `tokens` of a fresh (tokens, dim) matrix, so most tokens are read by several groups. Expects the
// bits of the same rows copied out into a plain batch.
inline void expect_x_rows_give_the_copied_bits(const kernels::GroupedFfn& ffn, const std::vector<int64_t>& offsets,
                                               const std::vector<float>& scale, int64_t tokens, Rng& rng) {
  const int64_t R = offsets.back(), D = ffn.shape().dim;
  std::vector<int64_t> x_rows(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) x_rows[static_cast<size_t>(r)] = (7 * r + 3) % tokens;
  const std::vector<float> token_x = random_values(rng, tokens * D);
  std::vector<float> copied(static_cast<size_t>(R * D));
  for (int64_t r = 0; r < R; ++r)
    std::copy_n(token_x.data() + x_rows[static_cast<size_t>(r)] * D, D, copied.data() + r * D);
  std::vector<float> want(copied.size(), -7.0f), y(copied.size(), -7.0f);
  kernels::GroupedFfnArgs args;
  args.offsets = offsets.data();
  args.x = copied.data();
  args.scale = scale.data();
  args.y = want.data();
  ffn.run(args);
  args.x = token_x.data();
  args.x_rows = x_rows.data();
  args.y = y.data();
  ffn.run(args);
  EXPECT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * sizeof(float))) << ffn.name();
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

// A few-rows form (m = 1..few_rows_max rows over kFewRowsPanels[m] panels: the decode case) of a format whose
// activations pack from f32 gives the bits of one m-row call per panel, with and without accumulate, for K odd,
// around and across the driver's K block and N not a multiple of the panels; a call split at the K block gives the
// same bits; nothing outside its rows is written.
inline void expect_few_rows_form_equals_row_calls(const kernels::GemmFormat& format) {
  using namespace kernels;
  const GemmFormat* f = &format;
  ASSERT_NE(f->gemm_few, nullptr);
  ASSERT_GE(f->few_rows_max, 1);
  Rng rng(12);
  const int mr = f->mr, nr = f->nr;
  const int64_t unit = k_unit(f->format);
  for (int m = 1; m <= f->few_rows_max; ++m)
    for (int64_t k : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{64}, int64_t{129}, 2 * kKc + 5}) {
      const int panels = kFewRowsPanels[m];
      const int64_t n = panels * nr - 3, lda = k + 1, ldc = panels * nr + 5;
      const auto w = random_values(rng, k * n);
      const PackedMatrix b = pack_matrix(MatrixView{w.data(), DType::kF32, WeightLayout::kOutIn, k, n}, nr, f->format);
      ASSERT_EQ(b.panels, panels);
      const auto a = random_values(rng, mr * lda);
      std::vector<uint8_t> ap(static_cast<size_t>(f->units(k) * f->a_unit_bytes()));
      f->pack_a(a.data(), lda, nullptr, m, k, mr, ap.data());
      const auto c0 = random_values(rng, mr * ldc);
      for (bool acc : {false, true}) {
        std::vector<float> few = c0, rows = c0, split = c0;
        f->gemm_few(m, k, ap.data(), b.data(), b.panel_bytes(), few.data(), ldc, acc);
        for (int p = 0; p < panels; ++p)
          f->gemm(m, k, ap.data(), b.buffer.data() + p * b.panel_bytes(), rows.data() + p * nr, ldc, acc, nullptr, 0);
        ASSERT_EQ(0, std::memcmp(few.data(), rows.data(), few.size() * sizeof(float))) << "m=" << m << " k=" << k;
        for (int i = m; i < mr; ++i)
          for (int64_t j = 0; j < ldc; ++j) ASSERT_EQ(few[static_cast<size_t>(i * ldc + j)], c0[static_cast<size_t>(i * ldc + j)]) << "wrote row " << i;
        if (k <= kKc) continue;
        f->gemm_few(m, kKc, ap.data(), b.data(), b.panel_bytes(), split.data(), ldc, acc);
        f->gemm_few(m, k - kKc, ap.data() + kKc / unit * f->a_unit_bytes(), b.buffer.data() + kKc / unit * f->b_unit_bytes(),
                    b.panel_bytes(), split.data(), ldc, true);
        ASSERT_EQ(0, std::memcmp(split.data(), few.data(), few.size() * sizeof(float))) << "m=" << m << " k=" << k;
      }
    }
}

}  // namespace hymoe::test
