// Every grouped-FFN implementation against the reference on ragged batches of awkward sizes: zero-row groups,
// one group holding every row, a single group, single rows, primes; every activation, layout and weight dtype.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <tuple>

#include "kernels/ffn/grouped_ffn_impl.h"
#include "kernels/kernel_test_util.h"

namespace hymoe::kernels {
namespace {

using test::RandomExperts;

struct FfnCase {
  std::vector<int64_t> group_rows;
  int64_t dim, hidden;
};

std::vector<FfnCase> ffn_cases() {
  return {{{1}, 1, 1},           {{0, 3, 0, 5}, 7, 13}, {{11, 0, 0, 0}, 5, 3},  {{2, 3, 5, 7}, 17, 19},
          {{0}, 4, 4},           {{1, 1, 1}, 31, 8},    {{9}, 33, 29},          {{4, 0, 13}, 16, 24}};
}

using Factory = std::function<std::unique_ptr<GroupedFfn>(const GroupedFfnShape&, std::span<const MlpWeightsView>)>;

// `bf16_native`: the fast path runs bf16 weights on the native kernels (docs/semantics.md: activations rounded to
// bf16), so the reference rounds them too, and a hidden value the two compute a few f32 ulps apart can round to
// neighbouring bf16 values: the y bound adds one bf16 step (2^-8 |h|) per hidden element, weighted by |w_down|.
void compare_to_reference(const Factory& make_fast, const char* label, bool bf16_native = false) {
  Rng rng(123);
  for (const auto& c : ffn_cases())
    for (Activation act : {Activation::kSwiGLU, Activation::kGelu, Activation::kRelu, Activation::kGeGLU,
                           Activation::kGeGLUTanh, Activation::kReGLU, Activation::kRelu2})
      for (WeightLayout layout : {WeightLayout::kOutIn, WeightLayout::kInOut})
        for (DType dtype : {DType::kF32, DType::kBF16}) {
          const int64_t G = static_cast<int64_t>(c.group_rows.size());
          RandomExperts experts(rng, G, c.dim, c.hidden, is_gated(act), layout, dtype);
          const auto offsets = test::offsets_of(c.group_rows);
          const int64_t R = offsets.back();
          std::vector<float> x(static_cast<size_t>(R * c.dim)), scale(static_cast<size_t>(R));
          for (float& v : x) v = static_cast<float>(rng.normal());
          for (float& v : scale) v = static_cast<float>(rng.uniform() + 0.25);
          const GroupedFfnShape shape{G, c.dim, c.hidden, act};
          const bool rounded = bf16_native && dtype == DType::kBF16;
          auto ref = make_grouped_ffn_ref(shape, experts.views,
                                          rounded ? RoundingModel::kBf16Activations : RoundingModel::kNone);
          auto fast = make_fast(shape, experts.views);
          std::vector<float> y_ref(x.size(), -1.0f), y_fast(x.size(), -2.0f);
          std::vector<float> g_ref(static_cast<size_t>(R * c.hidden)), u_ref(g_ref.size());
          std::vector<float> g_fast(g_ref.size()), u_fast(g_ref.size());
          ref->run({offsets.data(), x.data(), scale.data(), y_ref.data(), g_ref.data(), u_ref.data()});
          fast->run({offsets.data(), x.data(), scale.data(), y_fast.data(), g_fast.data(), u_fast.data()});
          // The output's error budget: two chained dot products (dim then hidden), each bounded relative to the
          // magnitude of its terms; we use the sum of |terms| from the reference's hidden activations.
          for (int64_t r = 0; r < R; ++r) {
            for (int64_t h = 0; h < c.hidden; ++h) {
              const size_t i = static_cast<size_t>(r * c.hidden + h);
              ASSERT_NEAR(u_fast[i], u_ref[i], test::f32_dot_tolerance(c.dim, 8.0 * std::sqrt(c.dim) + 1))
                  << label << " saved up, row " << r;
              if (is_gated(act)) ASSERT_NEAR(g_fast[i], g_ref[i], test::f32_dot_tolerance(c.dim, 8.0 * std::sqrt(c.dim) + 1));
            }
            int64_t e = 0;  // the row's group
            while (offsets[static_cast<size_t>(e + 1)] <= r) ++e;
            for (int64_t d = 0; d < c.dim; ++d) {
              const size_t i = static_cast<size_t>(r * c.dim + d);
              double flip = 0;
              if (rounded)
                for (int64_t h = 0; h < c.hidden; ++h) {
                  const size_t at = static_cast<size_t>(r * c.hidden + h);
                  const double hv = is_gated(act) ? gated_activation<double>(act, g_ref[at], u_ref[at], 0, 0)
                                                  : apply_activation<double>(act, u_ref[at]);
                  flip += 0x1p-8 * std::abs(hv) * std::abs(experts.views[static_cast<size_t>(e)].down.at(h, d));
                }
              const double tol =
                  (test::f32_dot_tolerance(c.dim + c.hidden, 64.0 * (c.hidden + c.dim)) + flip) * scale[r];
              ASSERT_NEAR(y_fast[i], y_ref[i], tol) << label << " G=" << G << " D=" << c.dim << " H=" << c.hidden
                                                    << " act=" << static_cast<int>(act) << " row " << r;
            }
          }
        }
}

TEST(GroupedFfn, PortableMatchesReference) { compare_to_reference(make_grouped_ffn_portable, "portable"); }

// The default dispatch, held to the numerics of the bf16 path it resolves to on this CPU.
TEST(GroupedFfn, DispatchedMatchesReference) {
  compare_to_reference([](const GroupedFfnShape& s, std::span<const MlpWeightsView> w) { return make_grouped_ffn(s, w); },
                       "dispatched", resolve_bf16_compute(active_isa()) == Bf16Compute::kNative);
}

// Each bf16 setting forced in turn: widen to the exact reference, native (where this CPU has AVX512_BF16; the
// software model of EmulatedIsaTest covers the kernels elsewhere) to the reference with bf16 activations.
TEST(GroupedFfn, DispatchedMatchesReferenceOnEachBf16Path) {
  int ran = 0;
  for (Bf16Compute setting : {Bf16Compute::kWiden, Bf16Compute::kNative}) {
    if (setting == Bf16Compute::kNative && active_isa() < Isa::kAvx512Bf16) continue;
    GroupedFfnOptions options;
    options.bf16 = setting;
    ASSERT_EQ(resolve_bf16_compute(active_isa(), setting), setting);
    compare_to_reference(
        [&](const GroupedFfnShape& s, std::span<const MlpWeightsView> w) {
          return make_grouped_ffn(s, w, active_isa(), options);
        },
        setting == Bf16Compute::kNative ? "dispatched native" : "dispatched widen", setting == Bf16Compute::kNative);
    ++ran;
  }
  EXPECT_EQ(ran, active_isa() >= Isa::kAvx512Bf16 ? 2 : 1);
}

TEST(GroupedFfn, ReferenceIsTheDefinition) {
  // One SwiGLU row by hand: x = [1, 2], gate = I, up = 2I, down = I  =>  y = silu(x) * 2x.
  const float eye[4] = {1, 0, 0, 1}, two[4] = {2, 0, 0, 2};
  MlpWeightsView w{{eye, DType::kF32, WeightLayout::kOutIn, 2, 2},
                   {two, DType::kF32, WeightLayout::kOutIn, 2, 2},
                   {eye, DType::kF32, WeightLayout::kOutIn, 2, 2}};
  auto ref = make_grouped_ffn_ref({1, 2, 2, Activation::kSwiGLU}, {&w, 1});
  const int64_t offsets[2] = {0, 1};
  const float x[2] = {1, 2}, scale[1] = {0.5f};
  float y[2];
  ref->run({offsets, x, scale, y, nullptr, nullptr});
  EXPECT_NEAR(y[0], 0.5 * silu(1.0) * 2.0, 1e-6);
  EXPECT_NEAR(y[1], 0.5 * silu(2.0) * 4.0, 1e-6);
}

// The gated forms transformers' hidden_act selects, one row by hand with x = [1, -0.5], gate = I, up = 2I,
// down = I: y = scale * act(x) * 2x. The activation values were computed apart from activation.h, in double with
// Python's math module (0.5 x (1 + erf(x / sqrt 2)) and 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))); the
// two GELUs differ by 1.5e-4 at x = 1, well above the tolerance.
TEST(GroupedFfn, GatedFormsAreTheirDefinition) {
  const float eye[4] = {1, 0, 0, 1}, two[4] = {2, 0, 0, 2};
  MlpWeightsView w{{eye, DType::kF32, WeightLayout::kOutIn, 2, 2},
                   {two, DType::kF32, WeightLayout::kOutIn, 2, 2},
                   {eye, DType::kF32, WeightLayout::kOutIn, 2, 2}};
  struct Want {
    Activation act;
    double at_one, at_minus_half;
  };
  const Want wants[] = {{Activation::kGeGLU, 0.8413447460685429, -0.15426876936299344},
                        {Activation::kGeGLUTanh, 0.8411919906082768, -0.15428599017485606},
                        {Activation::kReGLU, 1.0, 0.0}};
  const int64_t offsets[2] = {0, 1};
  const float x[2] = {1.0f, -0.5f}, scale[1] = {0.5f};
  for (const Want& want : wants)
    for (Isa isa : {Isa::kScalar, active_isa()}) {
      const GroupedFfnShape shape{1, 2, 2, want.act};
      for (const auto& ffn : {make_grouped_ffn_ref(shape, {&w, 1}), make_grouped_ffn(shape, {&w, 1}, isa)}) {
        float y[2];
        ffn->run({offsets, x, scale, y, nullptr, nullptr});
        EXPECT_NEAR(y[0], 0.5 * want.at_one * 2.0, 1e-6) << ffn->name() << " act " << static_cast<int>(want.act);
        EXPECT_NEAR(y[1], 0.5 * want.at_minus_half * -1.0, 1e-6)
            << ffn->name() << " act " << static_cast<int>(want.act);
      }
    }
}

// GLM-5-Next's limited SwiGLU with limit 0.75, by hand: x = [1, -0.5], gate = I, up = 2I, down = I, so the gate
// clamps at 0.75 for the first unit (silu(0.75) * clamp(2, -0.75, 0.75)) and the up at -0.75 for none.
TEST(GroupedFfn, LimitedSwiGluClampsGateAboveAndUpBothWays) {
  const float eye[4] = {1, 0, 0, 1}, two[4] = {2, 0, 0, 2};
  MlpWeightsView w{{eye, DType::kF32, WeightLayout::kOutIn, 2, 2},
                   {two, DType::kF32, WeightLayout::kOutIn, 2, 2},
                   {eye, DType::kF32, WeightLayout::kOutIn, 2, 2}};
  const int64_t offsets[2] = {0, 1};
  const float x[2] = {1.0f, -0.5f}, scale[1] = {1.0f};
  const double silu_075 = 0.75 / (1.0 + std::exp(-0.75)), silu_m05 = -0.5 / (1.0 + std::exp(0.5));
  for (Isa isa : {Isa::kScalar, active_isa()}) {
    GroupedFfnShape shape{1, 2, 2, Activation::kLimitedSwiGLU};
    shape.swiglu_limit = 0.75f;
    for (const auto& ffn : {make_grouped_ffn_ref(shape, {&w, 1}), make_grouped_ffn(shape, {&w, 1}, isa)}) {
      float y[2];
      ffn->run({offsets, x, scale, y, nullptr, nullptr});
      EXPECT_NEAR(y[0], silu_075 * 0.75, 1e-6) << ffn->name();    // gate 1 -> 0.75, up 2 -> 0.75
      EXPECT_NEAR(y[1], silu_m05 * -0.75, 1e-6) << ffn->name();   // gate -0.5 kept, up -1 -> -0.75
    }
  }
}

// Step-3.7's SwiGLU clamped after the silu, limit 0.5, by hand with the same weights: min(silu(1), 0.5) *
// clamp(2, +-0.5) for the first unit (the limited form would give silu(0.5) * 0.5), min(silu(-0.5), 0.5) *
// clamp(-1, +-0.5) for the second.
TEST(GroupedFfn, SiluClampedSwiGluClampsTheSiluNotTheGate) {
  const float eye[4] = {1, 0, 0, 1}, two[4] = {2, 0, 0, 2};
  MlpWeightsView w{{eye, DType::kF32, WeightLayout::kOutIn, 2, 2},
                   {two, DType::kF32, WeightLayout::kOutIn, 2, 2},
                   {eye, DType::kF32, WeightLayout::kOutIn, 2, 2}};
  const int64_t offsets[2] = {0, 1};
  const float x[2] = {1.0f, -0.5f}, scale[1] = {1.0f};
  const double silu_m05 = -0.5 / (1.0 + std::exp(0.5));
  for (Isa isa : {Isa::kScalar, active_isa()}) {
    GroupedFfnShape shape{1, 2, 2, Activation::kSiluClampedSwiGLU};
    shape.swiglu_limit = 0.5f;
    for (const auto& ffn : {make_grouped_ffn_ref(shape, {&w, 1}), make_grouped_ffn(shape, {&w, 1}, isa)}) {
      float y[2];
      ffn->run({offsets, x, scale, y, nullptr, nullptr});
      EXPECT_NEAR(y[0], 0.5 * 0.5, 1e-6) << ffn->name();        // silu(1) 0.73 -> 0.5, up 2 -> 0.5
      EXPECT_NEAR(y[1], silu_m05 * -0.5, 1e-6) << ffn->name();  // silu(-0.5) kept, up -1 -> -0.5
    }
  }
}

// With a rounding model the reference holds what it reads, biases included, so the caller's buffers may go once it
// is built (the scalar ISA runs a checkpoint's MXFP4 layer on it, after the loader has freed gpt-oss's biases).
TEST(GroupedFfn, RoundingReferenceOwnsItsBiases) {
  Rng rng(9);
  const int64_t D = 8, H = 6;
  RandomExperts experts(rng, 1, D, H, true, WeightLayout::kOutIn, DType::kF32);
  std::vector<float> biases(static_cast<size_t>(2 * H + D));
  for (float& v : biases) v = static_cast<float>(rng.normal());
  MlpWeightsView w = experts.views[0];
  w.gate_bias = biases.data();
  w.up_bias = biases.data() + H;
  w.down_bias = biases.data() + 2 * H;
  const GroupedFfnShape shape{1, D, H, Activation::kClampedSwiGLU};
  const int64_t offsets[2] = {0, 2};
  std::vector<float> x(static_cast<size_t>(2 * D));
  for (float& v : x) v = static_cast<float>(rng.normal());
  for (RoundingModel rounding : {RoundingModel::kBf16Activations, RoundingModel::kGgmlActivations}) {
    std::vector<float> live(x.size()), freed(x.size());
    make_grouped_ffn_ref(shape, {&w, 1}, rounding)->run({offsets, x.data(), nullptr, live.data(), nullptr, nullptr});
    auto ref = make_grouped_ffn_ref(shape, {&w, 1}, rounding);
    const std::vector<float> kept = biases;
    std::fill(biases.begin(), biases.end(), 1e30f);
    ref->run({offsets, x.data(), nullptr, freed.data(), nullptr, nullptr});
    biases = kept;
    EXPECT_EQ(freed, live) << static_cast<int>(rounding);
  }
}

TEST(GroupedFfn, EmptyBatchTouchesNothing) {
  Rng rng(5);
  RandomExperts experts(rng, 3, 4, 4, true, WeightLayout::kOutIn, DType::kF32);
  auto fast = make_grouped_ffn({3, 4, 4, Activation::kSwiGLU}, experts.views);
  const int64_t offsets[4] = {0, 0, 0, 0};
  fast->run({offsets, nullptr, nullptr, nullptr, nullptr, nullptr});  // no rows: null buffers are legal
  SUCCEED();
}

}  // namespace
}  // namespace hymoe::kernels
