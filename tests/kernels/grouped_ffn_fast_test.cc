// The fast grouped FFN and grouped GEMM forms against their references over ragged batches (empty groups, one
// group holding every row, a single group, a single row, groups spanning several row blocks), on every ISA this
// CPU has, with error bounds derived from the float32 rounding of each stage; and identical bits across thread
// counts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "hymoe/error.h"
#include "hymoe/threads.h"
#include "fast_kernel_test_util.h"
#include "kernels/driver/gemm_driver.h"
#include "kernels/formats/gemm_kernels.h"
#include "kernels/ffn/grouped_ffn_impl.h"
#include "kernels/driver/grouped_gemm_impl.h"

namespace hymoe::kernels {
namespace {

using test::dot_error_bound;
using test::kF32Eps;
using test::random_values;

struct Problem {
  GroupedFfnShape shape;
  DType dtype = DType::kF32;
  std::vector<int64_t> offsets;
  std::vector<float> x, scale, gate, up, down;  // weights (E, H, D) / (E, H, D) / (E, D, H): nn.Linear per group
  std::vector<uint16_t> gate_bits, up_bits, down_bits;
  std::vector<MlpWeightsView> views;

  Problem(Activation act, DType dt, int64_t dim, int64_t hidden, const std::vector<int64_t>& rows, uint64_t seed)
      : dtype(dt) {
    shape = {static_cast<int64_t>(rows.size()), dim, hidden, act};
    offsets.assign(1, 0);
    for (int64_t r : rows) offsets.push_back(offsets.back() + r);
    Rng rng(seed);
    const int64_t E = shape.num_groups, R = offsets.back();
    x = random_values(rng, R * dim);
    scale = random_values(rng, R);
    const bool bf16 = dt == DType::kBF16;
    gate = random_values(rng, E * hidden * dim, bf16);
    up = random_values(rng, E * hidden * dim, bf16);
    down = random_values(rng, E * dim * hidden, bf16);
    auto bits = [](const std::vector<float>& v) {
      std::vector<uint16_t> b(v.size());
      for (size_t i = 0; i < v.size(); ++i) b[i] = float_to_bf16(v[i]);
      return b;
    };
    gate_bits = bits(gate);
    up_bits = bits(up);
    down_bits = bits(down);
    for (int64_t e = 0; e < E; ++e) {
      auto view = [&](const std::vector<float>& f, const std::vector<uint16_t>& b, int64_t k, int64_t n) {
        const int64_t off = e * k * n;
        return MatrixView{bf16 ? static_cast<const void*>(b.data() + off) : f.data() + off, dt, WeightLayout::kOutIn, k, n};
      };
      MlpWeightsView w;
      if (is_gated(act)) w.gate = view(gate, gate_bits, dim, hidden);
      w.up = view(up, up_bits, dim, hidden);
      w.down = view(down, down_bits, hidden, dim);
      views.push_back(w);
    }
  }

  int64_t rows() const { return offsets.back(); }

  // First-order bound on |fast - exact| for y[r, d]: the gate/up dot products (length dim) round, the activation
  // adds a few ulp (|act'| <= 1.2 for SiLU, both GELUs and ReLU), the down dot product (length hidden) rounds, and the
  // scale rounds once more. Doubled to cover the second-order terms.
  std::vector<double> y_bounds() const {
    const int64_t D = shape.dim, H = shape.hidden;
    const bool gated = is_gated(shape.activation);
    std::vector<double> bound(static_cast<size_t>(rows() * D));
    for (int64_t e = 0; e < shape.num_groups; ++e)
      for (int64_t r = offsets[e]; r < offsets[e + 1]; ++r) {
        std::vector<double> hid(H), dhid(H);
        for (int64_t h = 0; h < H; ++h) {
          double g = 0, u = 0, G = 0, U = 0;
          for (int64_t d = 0; d < D; ++d) {
            const double xv = x[r * D + d];
            const size_t wi = static_cast<size_t>((e * H + h) * D + d);
            g += xv * gate[wi];
            u += xv * up[wi];
            G += std::abs(xv * gate[wi]);
            U += std::abs(xv * up[wi]);
          }
          const double eg = dot_error_bound(D, G), eu = dot_error_bound(D, U);
          const double a = gated ? apply_activation(shape.activation, g) * u : apply_activation(shape.activation, u);
          hid[h] = std::abs(a);
          dhid[h] = gated ? 1.2 * eg * std::abs(u) + std::abs(apply_activation(shape.activation, g)) * eu : 1.2 * eu;
          dhid[h] += 8 * kF32Eps * std::abs(a);
        }
        for (int64_t d = 0; d < D; ++d) {
          double mag = 0, prop = 0;
          for (int64_t h = 0; h < H; ++h) {
            const double w = std::abs(down[static_cast<size_t>((e * D + d) * H + h)]);
            mag += hid[h] * w;
            prop += dhid[h] * w;
          }
          const double s = std::abs(scale[r]);
          bound[static_cast<size_t>(r * D + d)] = 2 * (s * (dot_error_bound(H, mag) + prop) + kF32Eps * s * mag) + 1e-30;
        }
      }
    return bound;
  }
};

struct Outputs {
  std::vector<float> y, saved_gate, saved_up;
};

Outputs run(const GroupedFfn& ffn, const Problem& p) {
  Outputs o;
  o.y.assign(static_cast<size_t>(p.rows() * p.shape.dim), -7.0f);
  o.saved_gate.assign(static_cast<size_t>(p.rows() * p.shape.hidden), -7.0f);
  o.saved_up.assign(o.saved_gate.size(), -7.0f);
  GroupedFfnArgs args;
  args.offsets = p.offsets.data();
  args.x = p.x.data();
  args.scale = p.scale.data();
  args.y = o.y.data();
  args.saved_gate = o.saved_gate.data();
  args.saved_up = o.saved_up.data();
  ffn.run(args);
  return o;
}

class GroupedFfnFastTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!test::isa_supported(GetParam())) GTEST_SKIP() << "CPU lacks " << isa_name(GetParam());
    mr_ = isa_kernels(GetParam())->mr;
  }
  int64_t mr_ = 0;
};

TEST_P(GroupedFfnFastTest, MatchesReferenceOnRaggedBatches) {
  const int64_t big = 16 * mr_ + 5;  // more rows than one row block holds
  const std::vector<std::vector<int64_t>> batches = {
      {1},                                  // E=1, T=1
      {0, 3, 0, 0, 14},                     // empty groups
      {0, 0, big, 0},                       // every row on one group, several row blocks
      {1, 2, 5, mr_, mr_ + 1, 2 * mr_},     // rows around MR
  };
  // The last pair spans three K blocks in the gate/up GEMM and two in the down GEMM: the accumulation across K
  // blocks and the prefetch of the next K block's first panel. It runs with one gated and one ungated activation
  // (their panels differ): the activation is an epilogue over the hidden columns after the whole K, which the
  // smaller pairs cover for every activation, and this pair is most of the test's time (under the emulated AVX-512
  // run too).
  const std::vector<std::pair<int64_t, int64_t>> dims = {{1, 1}, {17, 9}, {16, 24}, {33, 31}, {2 * kKc + 37, kKc + 11}};
  uint64_t seed = 1;
  for (Activation act : {Activation::kSwiGLU, Activation::kGelu, Activation::kRelu, Activation::kGeGLU,
                         Activation::kGeGLUTanh, Activation::kReGLU, Activation::kRelu2})
    for (DType dt : {DType::kF32, DType::kBF16})
      for (auto [dim, hidden] : dims)
        for (const auto& rows : batches) {
          if (rows.size() == 4 && dim > 17) continue;  // the big batch once per dtype/activation is enough
          if (dim > kKc && act != Activation::kSwiGLU && act != Activation::kGelu) continue;
          const Problem p(act, dt, dim, hidden, rows, seed++);
          const auto fast = make_grouped_ffn_packed(p.shape, p.views, GetParam());
          const auto ref = make_grouped_ffn_ref(p.shape, p.views);
          const Outputs got = run(*fast, p), want = run(*ref, p);
          const auto bound = p.y_bounds();
          for (size_t i = 0; i < got.y.size(); ++i)
            ASSERT_NEAR(got.y[i], want.y[i], bound[i])
                << fast->name() << " act " << static_cast<int>(act) << " dim " << dim << " hidden " << hidden
                << " element " << i;
          for (size_t i = 0; i < got.saved_up.size(); ++i) {
            ASSERT_NEAR(got.saved_up[i], want.saved_up[i], dot_error_bound(dim, 2.0 * dim));  // |x|,|w| <= 1
            if (is_gated(act)) ASSERT_NEAR(got.saved_gate[i], want.saved_gate[i], dot_error_bound(dim, 2.0 * dim));
            else ASSERT_EQ(got.saved_gate[i], -7.0f);  // not written for ungated activations
          }
        }
}

// x_rows (the dispatch's gather fused into the kernel) gives the same bits as running on the gathered rows, for
// the packed kernel of every ISA and for the portable and reference implementations.
TEST_P(GroupedFfnFastTest, IndexedRowsGiveTheSameBitsAsGatheredRows) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const Problem p(Activation::kSwiGLU, dt, 19, 23, {2, 0, 2 * mr_ + 3, 1}, 77);
    std::vector<std::unique_ptr<GroupedFfn>> impls;
    impls.push_back(make_grouped_ffn_packed(p.shape, p.views, GetParam()));
    impls.push_back(make_grouped_ffn_portable(p.shape, p.views));
    impls.push_back(make_grouped_ffn_ref(p.shape, p.views));
    Rng rng(78);
    for (const auto& ffn : impls) test::expect_x_rows_give_the_copied_bits(*ffn, p.offsets, p.scale, 5, rng);
  }
}

// Groups of one row that gather the same token share its packed micro-panel (gemm_driver.h): the same bits as on
// copied rows. Seven one-row groups over two tokens, a larger group among them.
TEST_P(GroupedFfnFastTest, OneRowGroupsOfOneTokenShareItsMicroPanel) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const Problem p(Activation::kSwiGLU, dt, 19, 23, {1, 1, 0, 1, mr_ + 2, 1, 1, 1}, 79);
    Rng rng(80);
    test::expect_x_rows_give_the_copied_bits(*make_grouped_ffn_packed(p.shape, p.views, GetParam()), p.offsets,
                                             p.scale, 2, rng);
  }
}

TEST_P(GroupedFfnFastTest, RowsGemmMatchesReference) {
  Rng rng(11);
  for (DType dt : {DType::kF32, DType::kBF16})
    for (WeightLayout layout : {WeightLayout::kOutIn, WeightLayout::kInOut})
      for (bool acc : {false, true}) {
        const std::vector<int64_t> offsets = {0, 0, 5, 5, 5 + 2 * mr_ + 1};
        const int64_t G = 4, K = 19, N = 37, R = offsets.back();
        const auto a = random_values(rng, R * K);
        const auto w = random_values(rng, G * K * N, dt == DType::kBF16);
        std::vector<uint16_t> bits(w.size());
        for (size_t i = 0; i < w.size(); ++i) bits[i] = float_to_bf16(w[i]);
        std::vector<MatrixView> b;
        for (int64_t g = 0; g < G; ++g)
          b.push_back({dt == DType::kBF16 ? static_cast<const void*>(bits.data() + g * K * N) : w.data() + g * K * N, dt,
                       layout, K, N});
        const auto c0 = random_values(rng, R * N);
        std::vector<float> got = c0, want = c0;
        GroupedRowsGemm p{G, offsets.data(), K, N, a.data(), b.data(), got.data(), acc};
        grouped_rows_gemm_packed(p, GetParam());
        p.c = want.data();
        grouped_rows_gemm_ref(p);
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], want[i], dot_error_bound(K + 1, K + 1.0)) << "element " << i;  // |a|,|b|,|c0| <= 1
      }
}

// The router's logits: near the double reference at awkward sizes, and batch-invariant (a token alone gets the
// same bits as inside any batch) for any thread count.
TEST_P(GroupedFfnFastTest, DotRowsGemmMatchesReferenceAndIsBatchInvariant) {
  Rng rng(13);
  for (int64_t K : {1, 7, 16, 17, 33, 64, 131, 1031})  // 1031: over two k blocks of the dot kernel
    for (int64_t N : {1, 3, 4, 5, 33, 70}) {
      const int64_t T = 20;
      const auto a = random_values(rng, T * K);
      const auto w = random_values(rng, N * K);
      std::vector<float> got(static_cast<size_t>(T * N)), want(got.size()), alone(static_cast<size_t>(N));
      dot_rows_gemm(T, K, N, a.data(), w.data(), got.data(), GetParam());
      dot_rows_gemm_ref(T, K, N, a.data(), w.data(), want.data());
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], dot_error_bound(K, static_cast<double>(K))) << "K=" << K << " N=" << N << " at " << i;
      for (int64_t t = 0; t < T; ++t) {
        dot_rows_gemm(1, K, N, a.data() + t * K, w.data(), alone.data(), GetParam());
        ASSERT_EQ(0, std::memcmp(alone.data(), got.data() + t * N, alone.size() * sizeof(float)))
            << "K=" << K << " N=" << N << ": token " << t << " alone differs from the batch";
      }
      // Thread counts also change the rows a task takes when the tokens are few (one token, 3 threads: 8 rows).
      const int before = num_threads();
      for (int threads : {1, 2, 3}) {
        set_num_threads(threads);
        std::vector<float> again(got.size()), again_alone(alone.size());
        dot_rows_gemm(T, K, N, a.data(), w.data(), again.data(), GetParam());
        dot_rows_gemm(1, K, N, a.data() + (T - 1) * K, w.data(), again_alone.data(), GetParam());
        set_num_threads(before);
        ASSERT_EQ(again, got) << threads << " threads";
        ASSERT_EQ(0, std::memcmp(again_alone.data(), got.data() + (T - 1) * N, alone.size() * sizeof(float)))
            << threads << " threads, the last token alone";
      }
    }
}

TEST_P(GroupedFfnFastTest, WeightGradGemmMatchesReference) {
  Rng rng(12);
  for (WeightLayout layout : {WeightLayout::kOutIn, WeightLayout::kInOut})
    for (bool acc : {false, true}) {
      const std::vector<int64_t> offsets = {0, 3, 3, 3 + 2 * mr_ + 1, 40};
      const int64_t G = 4, K = 13, N = 35, R = offsets.back();
      const auto a = random_values(rng, R * K);
      const auto gr = random_values(rng, R * N);
      std::vector<std::vector<float>> got(G), want(G);
      std::vector<float*> got_p, want_p;
      for (int64_t g = 0; g < G; ++g) {
        got[g] = want[g] = random_values(rng, K * N);
        got_p.push_back(got[g].data());
        want_p.push_back(want[g].data());
      }
      GroupedWeightGradGemm p{G, offsets.data(), K, N, a.data(), gr.data(), got_p.data(), layout, acc};
      grouped_weight_grad_gemm_packed(p, GetParam());
      p.dw = want_p.data();
      grouped_weight_grad_gemm_ref(p);
      for (int64_t g = 0; g < G; ++g)
        for (size_t i = 0; i < got[g].size(); ++i) {
          const double rows = static_cast<double>(offsets[g + 1] - offsets[g]);
          ASSERT_NEAR(got[g][i], want[g][i], dot_error_bound(static_cast<int64_t>(rows) + 1, rows + 1.0))
              << "group " << g << " element " << i;
        }
    }
}

// A null output for an empty group (an idle expert whose gradient is zero already) is left alone; the other
// groups are computed as usual.
TEST_P(GroupedFfnFastTest, WeightGradGemmSkipsANullEmptyGroup) {
  Rng rng(14);
  const std::vector<int64_t> offsets = {0, 3, 3, 8};
  const int64_t G = 3, K = 13, N = 35, R = offsets.back();
  const auto a = random_values(rng, R * K);
  const auto gr = random_values(rng, R * N);
  std::vector<float> first(static_cast<size_t>(K * N), 7.0f), last(first.size(), 7.0f), want0(first.size()),
      want2(first.size());
  std::vector<float*> got_p = {first.data(), nullptr, last.data()}, want_p = {want0.data(), nullptr, want2.data()};
  GroupedWeightGradGemm p{G, offsets.data(), K, N, a.data(), gr.data(), got_p.data(), WeightLayout::kOutIn, false};
  grouped_weight_grad_gemm_packed(p, GetParam());
  p.dw = want_p.data();
  grouped_weight_grad_gemm_ref(p);
  for (size_t i = 0; i < first.size(); ++i) {
    ASSERT_NEAR(first[i], want0[i], dot_error_bound(4, 4.0)) << "group 0 element " << i;
    ASSERT_NEAR(last[i], want2[i], dot_error_bound(6, 6.0)) << "group 2 element " << i;
  }
}

// Work is split into tiles whose arithmetic does not depend on the thread running them: the same bits for 1, 2
// and 3 threads, on a batch with enough tiles for every thread to take some.
TEST_P(GroupedFfnFastTest, IdenticalBitsForAnyThreadCount) {
  const int before = num_threads();
  for (DType dt : {DType::kF32, DType::kBF16}) {
    // Groups of 1-3 rows run the few-rows kernels, the rest the micro-kernel over row blocks.
    const Problem p(Activation::kSwiGLU, dt, 70, 90, {5, 0, 40, 1, 120, 9, 2, 3}, 99);
    const auto fast = make_grouped_ffn_packed(p.shape, p.views, GetParam());
    std::vector<float> first;
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      const Outputs o = run(*fast, p);
      if (first.empty()) first = o.y;
      else ASSERT_EQ(0, std::memcmp(first.data(), o.y.data(), first.size() * sizeof(float))) << threads << " threads";
    }
  }
  set_num_threads(before);
}

// bf16 weights are widened exactly, in registers, by every kernel (the micro-kernel, the few-rows and decode
// variants): the layer's bits are those of the same weight values given as f32, for every group size.
TEST_P(GroupedFfnFastTest, Bf16WeightsGiveTheBitsOfTheSameValuesInF32) {
  const Problem p(Activation::kSwiGLU, DType::kBF16, 70, 90, {5, 0, 40, 1, 120, 9, 2, 3, 13, 6}, 5);
  std::vector<MlpWeightsView> f32_views;
  const int64_t D = p.shape.dim, H = p.shape.hidden;
  for (int64_t e = 0; e < p.shape.num_groups; ++e) {
    MlpWeightsView w;
    w.gate = MatrixView{p.gate.data() + e * H * D, DType::kF32, WeightLayout::kOutIn, D, H};
    w.up = MatrixView{p.up.data() + e * H * D, DType::kF32, WeightLayout::kOutIn, D, H};
    w.down = MatrixView{p.down.data() + e * D * H, DType::kF32, WeightLayout::kOutIn, H, D};
    f32_views.push_back(w);
  }
  const Outputs bf16 = run(*make_grouped_ffn_packed(p.shape, p.views, GetParam()), p);
  const Outputs f32 = run(*make_grouped_ffn_packed(p.shape, f32_views, GetParam()), p);
  ASSERT_EQ(0, std::memcmp(bf16.y.data(), f32.y.data(), bf16.y.size() * sizeof(float)));
  ASSERT_EQ(0, std::memcmp(bf16.saved_gate.data(), f32.saved_gate.data(), bf16.saved_gate.size() * sizeof(float)));
}

// The driver's row blocks are whole micro-tiles but for the last, and a block's micro-tiles tile its rows in order,
// ceil(rows / MR) of them, their sizes differing by at most one: no short remainder tile (32 rows: 6,6,5,5,5,5).
TEST(GemmDriverTest, MicroTilesSplitARowBlockIntoNearEqualSizes) {
  for (int mr : {6, 12})
    for (int64_t m = 1; m <= 40 * mr; ++m) {
      const int64_t per = row_block_rows(m, mr);
      ASSERT_EQ(per % mr, 0) << m;
      ASSERT_LE(per, kMaxRowBlockTiles * mr) << m;
      const int64_t max_block = kMaxRowBlockTiles * mr;
      ASSERT_EQ((m + per - 1) / per, (m + max_block - 1) / max_block) << m;  // as few blocks as fit
      for (int64_t r0 = 0; r0 < m; r0 += per) {
        const int64_t n = std::min(per, m - r0), tiles = (n + mr - 1) / mr;
        int64_t next = 0, smallest = mr, largest = 0;
        for (int64_t i = 0; i < tiles; ++i) {
          const MicroTile t = micro_tile(n, mr, i);
          ASSERT_EQ(t.start, next) << "m " << m << " mr " << mr << " tile " << i;
          ASSERT_GE(t.rows, 1);
          ASSERT_LE(t.rows, mr);
          next += t.rows;
          smallest = std::min<int64_t>(smallest, t.rows);
          largest = std::max<int64_t>(largest, t.rows);
        }
        ASSERT_EQ(next, n) << "m " << m << " mr " << mr;
        ASSERT_LE(largest - smallest, 1) << "m " << m << " mr " << mr;
      }
    }
  EXPECT_EQ(micro_tile(32, 6, 5).rows, 5);
  EXPECT_EQ(micro_tile(32, 6, 5).start, 27);
  EXPECT_EQ(micro_tile(7, 6, 1).rows, 3);
}

// A group of few rows keeps tiles of at least one decode-form call's panels (kFewRowsPanels[m]) while every thread
// has a tile, where a prefill group's tiles still narrow to one panel to give each thread 8.
TEST(GemmDriverTest, FewRowTilesKeepTheDecodeFormsPanelsOnManyThreads) {
  for (const Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Vnni})
    for (const WeightFormat wf : {WeightFormat::kF32, WeightFormat::kGgmlQ4_0I8, WeightFormat::kGgmlIQ2_XXSI8}) {
      const GemmFormat* f = isa_kernels(isa)->format(wf);
      if (!f) continue;
      ASSERT_GE(f->few_rows_max, 1) << f->name;
      for (const int64_t rows : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{32}})
        for (const int threads : {1, 2, 13, 32, 64}) {
          // Qwen3-30B-A3B's gate/up at one token: 8 groups of 1536 columns; and a group of 7 panels.
          std::vector<GemmGroup> groups(8);
          for (GemmGroup& g : groups) g = {nullptr, 0, nullptr, rows, 2048, nullptr, 1536 / f->nr};
          groups.push_back({nullptr, 0, nullptr, rows, 2048, nullptr, 7});
          int64_t max_rows = 0, max_panels = 0;
          const std::vector<GemmTile> tiles = plan_tiles(*f, groups, threads, max_rows, max_panels);
          const bool few = rows <= f->few_rows_max;
          const int64_t start = std::max<int64_t>(1, kNcColumns / f->nr);
          const int64_t floor = few ? std::min<int64_t>(kFewRowsPanels[rows], start) : 1;
          ASSERT_GE(max_panels, floor) << f->name << " rows " << rows << " threads " << threads;
          if (!few)  // as narrow as the threads need
            EXPECT_TRUE(max_panels == 1 || static_cast<int64_t>(tiles.size()) >= 8 * threads)
                << f->name << " threads " << threads;
          int64_t panels = 0;
          for (const GemmTile& t : tiles) {
            panels += t.np;
            if (t.p0 + t.np < groups[static_cast<size_t>(t.group)].panels)  // all but a group's last tile
              ASSERT_EQ(t.np, max_panels) << f->name << " rows " << rows << " threads " << threads;
          }
          ASSERT_EQ(panels, 8 * (1536 / f->nr) + 7);
        }
      // One row of a lone group of 64 panels (a shared expert's down at one token): 16 tiles of 4 panels, narrower
      // only where some thread would otherwise have none.
      if (f->few_rows_max >= 1 && kNcColumns / f->nr >= 4)
        for (const auto& [threads, want] : {std::pair{2, 4}, {16, 4}, {17, 2}, {32, 2}, {33, 1}, {64, 1}}) {
          const std::vector<GemmGroup> lone{{nullptr, 0, nullptr, 1, 2048, nullptr, 64}};
          int64_t max_rows = 0, max_panels = 0;
          const std::vector<GemmTile> tiles = plan_tiles(*f, lone, threads, max_rows, max_panels);
          EXPECT_EQ(max_panels, want) << f->name << " threads " << threads;
          EXPECT_EQ(static_cast<int64_t>(tiles.size()), 64 / want) << f->name << " threads " << threads;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Isas, GroupedFfnFastTest, ::testing::Values(Isa::kAvx2, Isa::kAvx512), test::isa_param_name);

TEST(ThreadsTest, SetNumThreadsRejectsNonPositiveCounts) {
  EXPECT_THROW(set_num_threads(0), Error);
  EXPECT_GE(default_num_threads(), 1);
}

}  // namespace
}  // namespace hymoe::kernels
