// The backward's grouped GEMM forms: dispatched implementation against the reference, ragged groups of awkward
// sizes, both layouts, f32 and bf16 B, overwrite and accumulate.
#include "kernels/driver/grouped_gemm.h"

#include <gtest/gtest.h>

#include "kernels/kernel_test_util.h"

namespace hymoe::kernels {
namespace {

TEST(GroupedGemm, RowsFormMatchesReference) {
  Rng rng(9);
  for (const auto& sizes : std::vector<std::vector<int64_t>>{{1}, {0, 5, 0, 3}, {7, 0}, {2, 3, 5, 7, 11}})
    for (auto [k, n] : {std::pair<int64_t, int64_t>{1, 1}, {13, 5}, {8, 17}, {31, 2}})
      for (WeightLayout layout : {WeightLayout::kOutIn, WeightLayout::kInOut})
        for (DType dtype : {DType::kF32, DType::kBF16})
          for (bool accumulate : {false, true}) {
            const int64_t G = static_cast<int64_t>(sizes.size());
            test::RandomExperts w(rng, G, k, n, false, layout, dtype);  // .up is a (k, n) view
            std::vector<MatrixView> b;
            for (auto& v : w.views) b.push_back(v.up);
            const auto offsets = test::offsets_of(sizes);
            const int64_t R = offsets.back();
            std::vector<float> a(static_cast<size_t>(R * k)), c0(static_cast<size_t>(R * n));
            for (float& v : a) v = static_cast<float>(rng.normal());
            for (float& v : c0) v = static_cast<float>(rng.normal());
            auto c_ref = c0, c_fast = c0;
            GroupedRowsGemm p{G, offsets.data(), k, n, a.data(), b.data(), c_ref.data(), accumulate};
            grouped_rows_gemm_ref(p);
            p.c = c_fast.data();
            grouped_rows_gemm(p);
            for (size_t i = 0; i < c_ref.size(); ++i)
              ASSERT_NEAR(c_fast[i], c_ref[i], test::f32_dot_tolerance(k + 1, 8.0 * k + 8)) << i;
          }
}

TEST(GroupedGemm, WeightGradFormMatchesReference) {
  Rng rng(10);
  for (const auto& sizes : std::vector<std::vector<int64_t>>{{1}, {0, 5, 0, 3}, {7, 0}, {2, 3, 5, 7, 11}})
    for (auto [k, n] : {std::pair<int64_t, int64_t>{1, 1}, {13, 5}, {8, 17}})
      for (WeightLayout layout : {WeightLayout::kOutIn, WeightLayout::kInOut})
        for (bool accumulate : {false, true}) {
          const int64_t G = static_cast<int64_t>(sizes.size());
          const auto offsets = test::offsets_of(sizes);
          const int64_t R = offsets.back();
          std::vector<float> a(static_cast<size_t>(R * k)), g(static_cast<size_t>(R * n));
          for (float& v : a) v = static_cast<float>(rng.normal());
          for (float& v : g) v = static_cast<float>(rng.normal());
          std::vector<std::vector<float>> dw_ref(static_cast<size_t>(G)), dw_fast;
          for (auto& d : dw_ref) {
            d.resize(static_cast<size_t>(k * n));
            for (float& v : d) v = static_cast<float>(rng.normal());
          }
          dw_fast = dw_ref;
          std::vector<float*> p_ref, p_fast;
          for (int64_t i = 0; i < G; ++i) {
            p_ref.push_back(dw_ref[static_cast<size_t>(i)].data());
            p_fast.push_back(dw_fast[static_cast<size_t>(i)].data());
          }
          GroupedWeightGradGemm p{G, offsets.data(), k, n, a.data(), g.data(), p_ref.data(), layout, accumulate};
          grouped_weight_grad_gemm_ref(p);
          p.dw = p_fast.data();
          grouped_weight_grad_gemm(p);
          for (int64_t i = 0; i < G; ++i) {
            const double tol = test::f32_dot_tolerance(sizes[static_cast<size_t>(i)] + 1, 8.0 * R + 8);
            for (size_t j = 0; j < dw_ref[static_cast<size_t>(i)].size(); ++j)
              ASSERT_NEAR(dw_fast[static_cast<size_t>(i)][j], dw_ref[static_cast<size_t>(i)][j], tol);
            if (sizes[static_cast<size_t>(i)] == 0 && !accumulate)
              for (float v : dw_fast[static_cast<size_t>(i)]) ASSERT_EQ(v, 0.0f) << "empty group must give zero";
          }
        }
}

// The weight-gradient form computes each value as one dot product over a group's rows in row order, in either
// storage layout: nn.Linear's (n, k) storage holds exactly the transpose of the (k, n) one.
TEST(GroupedGemm, WeightGradLayoutsHoldTheSameBits) {
  Rng rng(11);
  const std::vector<int64_t> sizes = {3, 0, 1, 6, 2};
  const int64_t k = 37, n = 45, G = static_cast<int64_t>(sizes.size());
  const auto offsets = test::offsets_of(sizes);
  const int64_t R = offsets.back();
  std::vector<float> a(static_cast<size_t>(R * k)), g(static_cast<size_t>(R * n));
  for (float& v : a) v = static_cast<float>(rng.normal());
  for (float& v : g) v = static_cast<float>(rng.normal());
  std::vector<std::vector<float>> out_in(static_cast<size_t>(G), std::vector<float>(static_cast<size_t>(k * n))),
      in_out = out_in;
  std::vector<float*> p_out_in, p_in_out;
  for (int64_t i = 0; i < G; ++i) {
    p_out_in.push_back(out_in[static_cast<size_t>(i)].data());
    p_in_out.push_back(in_out[static_cast<size_t>(i)].data());
  }
  GroupedWeightGradGemm p{G, offsets.data(), k, n, a.data(), g.data(), p_out_in.data(), WeightLayout::kOutIn, false};
  grouped_weight_grad_gemm(p);
  p.dw = p_in_out.data();
  p.layout = WeightLayout::kInOut;
  grouped_weight_grad_gemm(p);
  for (int64_t e = 0; e < G; ++e)
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < n; ++j)
        ASSERT_EQ(out_in[static_cast<size_t>(e)][static_cast<size_t>(j * k + i)],
                  in_out[static_cast<size_t>(e)][static_cast<size_t>(i * n + j)])
            << "group " << e << " (" << i << ", " << j << ")";
}

// More packed panels than one chunk holds (the rows form packs its groups' weights a few tens of MiB at a time):
// every group's rows still meet their own weights.
TEST(GroupedGemm, RowsFormAcrossPackingChunks) {
  Rng rng(12);
  const std::vector<int64_t> sizes = {2, 1, 0, 3, 1, 2, 1, 1, 2};
  const int64_t k = 1024, n = 1040, G = static_cast<int64_t>(sizes.size());  // about 4.3 MB of panels a group
  // (k, n) stored: the backward's transposed views of nn.Linear weights, packed by whole rows.
  test::RandomExperts w(rng, G, k, n, false, WeightLayout::kInOut, DType::kF32);
  std::vector<MatrixView> b;
  for (auto& v : w.views) b.push_back(v.up);
  const auto offsets = test::offsets_of(sizes);
  const int64_t R = offsets.back();
  std::vector<float> a(static_cast<size_t>(R * k));
  for (float& v : a) v = static_cast<float>(rng.normal());
  std::vector<float> c_ref(static_cast<size_t>(R * n)), c_fast(c_ref.size());
  GroupedRowsGemm p{G, offsets.data(), k, n, a.data(), b.data(), c_ref.data(), false};
  grouped_rows_gemm_ref(p);
  p.c = c_fast.data();
  grouped_rows_gemm(p);
  for (size_t i = 0; i < c_ref.size(); ++i)
    ASSERT_NEAR(c_fast[i], c_ref[i], test::f32_dot_tolerance(k + 1, 8.0 * k + 8)) << i;
}

}  // namespace
}  // namespace hymoe::kernels
