// The pack and micro-kernel stages against their scalar references, exhaustively over tiny shapes, on every ISA
// this CPU has (the others are skipped, not failed).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "fast_kernel_test_util.h"
#include "kernels/formats/gemm_kernels.h"

namespace hymoe::kernels {
namespace {

using test::dot_error_bound;
using test::random_values;

// The bf16 bits of values already exact in bf16 (random_values(..., true)): both dtypes' kernels see the same
// numbers.
std::vector<uint16_t> bf16_bits(const std::vector<float>& v) {
  std::vector<uint16_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) bits[i] = float_to_bf16(v[i]);
  return bits;
}

class MicroKernelTest : public test::IsaKernelsTest {};

// Row panels hold A transposed in MR-row groups, zero past the last row.
TEST(PackTest, RowPanelsHoldTheRowsAndZeroPadding) {
  Rng rng(5);
  for (int mr : {6, 12})
    for (int64_t rows : {1, 5, 6, 7, 13}) {
      const int64_t kc = 9, lda = 11;
      const auto a = random_values(rng, rows * lda);
      std::vector<float> out(static_cast<size_t>((rows + mr - 1) / mr * mr * kc), -1.0f);
      pack_rows_panel(a.data(), lda, rows, kc, mr, out.data());
      for (int64_t r = 0; r < (rows + mr - 1) / mr * mr; ++r)
        for (int64_t k = 0; k < kc; ++k)
          ASSERT_EQ(out[static_cast<size_t>((r / mr) * kc * mr + k * mr + r % mr)], r < rows ? a[static_cast<size_t>(r * lda + k)] : 0.0f);
    }
}

// With row indices the packing reads the rows it is told to (repeats allowed): the gather fused into packing.
TEST(PackTest, RowPanelsGatherIndexedRows) {
  Rng rng(6);
  for (int mr : {6, 12})
    for (int64_t rows : {1, 7, 13}) {
      const int64_t kc = 5, lda = 8, source_rows = 4;
      const auto a = random_values(rng, source_rows * lda);
      std::vector<int64_t> index(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) index[static_cast<size_t>(r)] = (3 * r + 1) % source_rows;
      std::vector<float> gathered(static_cast<size_t>(rows * lda));
      for (int64_t r = 0; r < rows; ++r)
        std::copy_n(a.data() + index[static_cast<size_t>(r)] * lda, lda, gathered.data() + r * lda);
      const size_t size = static_cast<size_t>((rows + mr - 1) / mr * mr * kc);
      std::vector<float> got(size, -1.0f), want(size, -2.0f);
      pack_rows_panel(a.data(), lda, rows, kc, mr, got.data(), index.data());
      pack_rows_panel(gathered.data(), lda, rows, kc, mr, want.data());
      EXPECT_EQ(got, want) << "mr " << mr << " rows " << rows;
    }
}

// Every m in 1..MR, K around the unroll and the K block and primes, both dtypes, with and without accumulate.
TEST_P(MicroKernelTest, MatchesReferenceOnEveryTileShape) {
  Rng rng(7);
  const int mr = ik_->mr, nr = ik_->nr;
  for (bool bf16 : {false, true})
    for (int64_t kc : {1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31, 32, 33, 97, 255, 256, 257}) {
      const int64_t lda = kc + 3, ldc = nr + 5;
      const auto a = random_values(rng, mr * lda);
      std::vector<float> ap(static_cast<size_t>(mr * kc));
      pack_rows_panel(a.data(), lda, mr, kc, mr, ap.data());
      const auto bf = random_values(rng, kc * nr, bf16);
      const std::vector<uint16_t> bb = bf16_bits(bf);
      const auto c0 = random_values(rng, mr * ldc);
      for (int m = 1; m <= mr; ++m)
        for (bool acc : {false, true}) {
          std::vector<float> got = c0, want = c0;
          if (bf16) {
            ik_->gemm_bf16w(m, kc, ap.data(), bb.data(), got.data(), ldc, acc, nullptr, 0);
            gemm_bf16w_f32__ref(m, mr, nr, kc, ap.data(), bb.data(), want.data(), ldc, acc);
          } else {
            ik_->gemm_f32w(m, kc, ap.data(), bf.data(), got.data(), ldc, acc, nullptr, 0);
            gemm_f32w_f32__ref(m, mr, nr, kc, ap.data(), bf.data(), want.data(), ldc, acc);
          }
          {  // the prefetch hint never changes a bit, even pointing past the end of every buffer
            std::vector<float> hinted = c0;
            const float* past_end = bf.data() + bf.size();
            if (bf16) ik_->gemm_bf16w(m, kc, ap.data(), bb.data(), hinted.data(), ldc, acc, past_end, kc * 64);
            else ik_->gemm_f32w(m, kc, ap.data(), bf.data(), hinted.data(), ldc, acc, past_end, kc * 64);
            ASSERT_EQ(hinted, got) << "m=" << m << " kc=" << kc << ": the prefetch hint changed the result";
          }
          for (int i = 0; i < mr; ++i)
            for (int64_t j = 0; j < ldc; ++j) {
              const size_t at = static_cast<size_t>(i * ldc + j);
              if (i >= m || j >= nr) {  // outside the tile: untouched
                ASSERT_EQ(got[at], c0[at]) << "m=" << m << " kc=" << kc << " wrote outside its tile at " << i << "," << j;
                continue;
              }
              double abs_sum = acc ? std::abs(c0[at]) : 0.0;
              for (int64_t k = 0; k < kc; ++k) abs_sum += std::abs(a[static_cast<size_t>(i * lda + k)] * bf[static_cast<size_t>(k * nr + j)]);
              ASSERT_NEAR(got[at], want[at], dot_error_bound(kc + (acc ? 1 : 0), abs_sum))
                  << (bf16 ? "bf16" : "f32") << " m=" << m << " kc=" << kc << " acc=" << acc << " at " << i << "," << j;
            }
        }
    }
}

// The few-rows variant (1-3 rows over kFewRowsPanels[m] panels; one row is decode) gives the same bits as the
// m-row micro-kernel on each of its panels.
TEST_P(MicroKernelTest, FewRowsVariantsEqualMRowTilesBitwise) {
  Rng rng(8);
  const int mr = ik_->mr, nr = ik_->nr;
  for (int m : {1, 2, 3})
    for (bool bf16 : {false, true})
      for (int64_t kc : {1, 3, 8, 17, 256}) {
        const int np = kFewRowsPanels[m];
        const int64_t panel_stride = (kc + 2) * nr, ldc = np * nr + 5;  // panels need not be adjacent
        const auto a = random_values(rng, m * kc);
        std::vector<float> ap(static_cast<size_t>(mr * kc));
        pack_rows_panel(a.data(), kc, m, kc, mr, ap.data());
        const auto bf = random_values(rng, np * panel_stride, bf16);
        const std::vector<uint16_t> bb = bf16_bits(bf);
        for (bool acc : {false, true}) {
          const auto c0 = random_values(rng, m * ldc);
          std::vector<float> got = c0, want = c0;
          if (bf16) ik_->gemm_bf16w_few(m, kc, ap.data(), bb.data(), panel_stride, got.data(), ldc, acc);
          else ik_->gemm_f32w_few(m, kc, ap.data(), bf.data(), panel_stride, got.data(), ldc, acc);
          for (int p = 0; p < np; ++p) {
            if (bf16)
              ik_->gemm_bf16w(m, kc, ap.data(), bb.data() + p * panel_stride, want.data() + p * nr, ldc, acc, nullptr, 0);
            else
              ik_->gemm_f32w(m, kc, ap.data(), bf.data() + p * panel_stride, want.data() + p * nr, ldc, acc, nullptr, 0);
          }
          ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
              << "m=" << m << " kc=" << kc << " bf16=" << bf16 << " acc=" << acc;
        }
      }
}

TEST_P(MicroKernelTest, SwigluMatchesReference) {
  std::vector<float> g, u;
  for (int i = -2000; i <= 2000; ++i) {
    g.push_back(static_cast<float>(i) * 0.05f);  // [-100, 100]: both clamps of the exp and the linear regions
    u.push_back(1.0f + static_cast<float>(i % 7) * 0.25f);
  }
  while (g.size() % static_cast<size_t>(ik_->nr)) {
    g.push_back(0.5f);
    u.push_back(-2.0f);
  }
  std::vector<float> got(g.size()), want(g.size());
  ik_->swiglu(static_cast<int64_t>(g.size()), g.data(), u.data(), got.data());
  swiglu__ref(static_cast<int64_t>(g.size()), g.data(), u.data(), want.data());
  // exp within a few ulp, then a multiply, an add and a divide; below g = -87 the exp argument is clamped, which
  // leaves an absolute error of at most |g u| e^-87 (about 1.7e-38 |g u|).
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 8 * test::kF32Eps * std::abs(want[i]) + 1.7e-38 * std::abs(g[i] * u[i]))
        << "g=" << g[i] << " u=" << u[i];
}

// The bench's read probes sum exactly what they read (small integers: every partial sum is exact in float).
TEST_P(MicroKernelTest, ReadProbesSumTheirRegions) {
  const int64_t n = 64, stride = 80;  // regions of 64 floats, 80 apart: the gaps must not be read
  std::vector<float> buf(static_cast<size_t>(8 * stride));
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(i % 7);
  for (int streams : {4, 8}) {
    double want = 0;
    for (int s = 0; s < streams; ++s)
      for (int64_t i = 0; i < n; ++i) want += buf[static_cast<size_t>(s * stride + i)];
    EXPECT_EQ(ik_->sum_probe_streams(buf.data(), stride, streams, n), want) << streams << " streams";
  }
  double want = 0;
  for (int64_t i = 0; i < n; ++i) want += buf[static_cast<size_t>(i)];
  EXPECT_EQ(ik_->sum_probe(buf.data(), n), want);
}

INSTANTIATE_TEST_SUITE_P(Isas, MicroKernelTest, ::testing::Values(Isa::kAvx2, Isa::kAvx512), test::isa_param_name);

// Packing is pure data movement: every packed value is the source value (bits), padding is zero.
TEST(PackTest, PanelsHoldTheSourceColumnsInBothLayoutsAndDtypes) {
  Rng rng(3);
  for (int nr : {16, 32})
    for (WeightLayout layout : {WeightLayout::kOutIn, WeightLayout::kInOut})
      for (DType dtype : {DType::kF32, DType::kBF16})
        for (int64_t n : {1, 7, 16, 17, 40}) {
          const int64_t k = 5;
          const auto vals = random_values(rng, k * n);
          std::vector<uint16_t> bits(vals.size());
          for (size_t i = 0; i < vals.size(); ++i) bits[i] = float_to_bf16(vals[i]);
          MatrixView gate{dtype == DType::kBF16 ? static_cast<const void*>(bits.data()) : vals.data(), dtype, layout, k, n};
          const PackedMatrix p = pack_matrix(gate, nr);
          ASSERT_EQ(p.panels, (n + nr - 1) / nr);
          auto packed_at = [&](int64_t panel, int64_t kk, int j) {
            const size_t i = static_cast<size_t>((panel * k + kk) * nr + j);
            return dtype == DType::kBF16 ? bf16_to_float(p.bf16()[i]) : p.f32()[i];
          };
          for (int64_t panel = 0; panel < p.panels; ++panel)
            for (int64_t kk = 0; kk < k; ++kk)
              for (int j = 0; j < nr; ++j) {
                const int64_t col = panel * nr + j;
                ASSERT_EQ(packed_at(panel, kk, j), col < n ? gate.at(kk, col) : 0.0f);
              }
          // Interleaved gate/up: up is the same matrix negated, so each half is identifiable.
          std::vector<float> neg(vals.size());
          std::vector<uint16_t> neg_bits(vals.size());
          for (size_t i = 0; i < vals.size(); ++i) {
            neg[i] = -vals[i];
            neg_bits[i] = float_to_bf16(neg[i]);
          }
          MatrixView up = gate;
          up.data = dtype == DType::kBF16 ? static_cast<const void*>(neg_bits.data()) : neg.data();
          const PackedMatrix q = pack_gate_up(gate, up, nr);
          const int half = nr / 2;
          ASSERT_EQ(q.panels, (n + half - 1) / half);
          for (int64_t panel = 0; panel < q.panels; ++panel)
            for (int64_t kk = 0; kk < k; ++kk)
              for (int j = 0; j < nr; ++j) {
                const int64_t col = panel * half + j % half;
                const size_t i = static_cast<size_t>((panel * k + kk) * nr + j);
                const float got = dtype == DType::kBF16 ? bf16_to_float(q.bf16()[i]) : q.f32()[i];
                const float want = col >= n ? 0.0f : (j < half ? gate.at(kk, col) : up.at(kk, col));
                ASSERT_EQ(got, want) << "panel " << panel << " k " << kk << " j " << j;
              }
        }
}

}  // namespace
}  // namespace hymoe::kernels
