// The bf16-dot, fp8-dot, VNNI q8 and VNNI GGUF int8 micro-kernel bodies (gemm_microkernel-inl.h,
// gemm_fp8_dot-inl.h, gemm_gguf_int8-inl.h) instantiated over a software model of the
// vector unit: plain C++ lanes whose dot_bf16 and q8_dot4 do what the Intel SDM's pseudocode of vdpbf16ps and
// vpdpbusd says. No emulator at hand runs AVX512_BF16 (Bochs 2.7 implements VNNI but not BF16; QEMU's TCG has no
// AVX-512), so this is what checks, on any host, that the kernels' layouts, loops, k pairs, block corrections and
// the driver's use of them are right: the hardware units (gemm_avx512bf16.cc, gemm_avx512vnni.cc) instantiate the
// same bodies and differ only in the V they map onto intrinsics. What it cannot check: that mapping itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "fast_kernel_test_util.h"
#include "fp8_test_util.h"
#include "gguf_test_util.h"
#include "kernels/driver/gemm_driver.h"
#include "kernels/formats/gemm_kernels.h"
#include "kernels/formats/iq_blocks.h"
#include "hymoe/quant_decode.h"

namespace hymoe::kernels {
namespace {

// 16 lanes, as a zmm.
struct V {
  static constexpr int kWidth = 16;
  struct vec {
    float f[kWidth];
  };
  struct ivec {
    int32_t i[kWidth];
  };
  struct bvec {
    uint32_t pair[kWidth];  // bf16 pairs: even k in the low half
  };
  using q8w = ivec;  // four u8 (w + 128) per lane
  template <typename F>
  static vec map(F f) {
    vec r;
    for (int l = 0; l < kWidth; ++l) r.f[l] = f(l);
    return r;
  }
  static vec zero() { return map([](int) { return 0.0f; }); }
  static vec load(const float* p) { return map([&](int l) { return p[l]; }); }
  static vec load_bf16(const uint16_t* p) { return map([&](int l) { return bf16_to_float(p[l]); }); }
  static vec broadcast(const float* p) { return map([&](int) { return *p; }); }
  static void store(float* p, vec v) { std::memcpy(p, v.f, sizeof v.f); }
  static vec fma(vec a, vec b, vec c) { return map([&](int l) { return std::fma(a.f[l], b.f[l], c.f[l]); }); }
  static vec add(vec a, vec b) { return map([&](int l) { return a.f[l] + b.f[l]; }); }
  static vec sub(vec a, vec b) { return map([&](int l) { return a.f[l] - b.f[l]; }); }
  static vec mul(vec a, vec b) { return map([&](int l) { return a.f[l] * b.f[l]; }); }
  static vec div(vec a, vec b) { return map([&](int l) { return a.f[l] / b.f[l]; }); }
  static vec min(vec a, vec b) { return map([&](int l) { return std::min(a.f[l], b.f[l]); }); }
  static vec max(vec a, vec b) { return map([&](int l) { return std::max(a.f[l], b.f[l]); }); }
  static vec set1(float v) { return map([&](int) { return v; }); }
  static vec round_nearest(vec v) { return map([&](int l) { return std::nearbyint(v.f[l]); }); }
  static vec pow2(vec n) { return map([&](int l) { return std::ldexp(1.0f, static_cast<int>(n.f[l])); }); }
  static vec to_float(ivec v) { return map([&](int l) { return static_cast<float>(v.i[l]); }); }
  static ivec broadcast4(const uint8_t* p) {
    ivec r;
    int32_t v;
    std::memcpy(&v, p, 4);
    for (int l = 0; l < kWidth; ++l) r.i[l] = v;
    return r;
  }
  // vpdpbusd: each lane adds the four products of its unsigned bytes of w and signed bytes of x.
  static q8w q8_weights(const uint8_t* p) {
    q8w r;
    std::memcpy(r.i, p, sizeof r.i);
    return r;
  }
  static q8w q8_weights_of(ivec stored) { return stored; }
  static ivec q8_start(const uint8_t* correction) { return broadcast4(correction); }
  static ivec q8_dot4(ivec acc, q8w w, ivec x) {
    for (int l = 0; l < kWidth; ++l)
      for (int b = 0; b < 4; ++b)
        acc.i[l] += static_cast<int32_t>(static_cast<uint8_t>(w.i[l] >> (8 * b))) *
                    static_cast<int32_t>(static_cast<int8_t>(x.i[l] >> (8 * b)));
    return acc;
  }
  // The GGUF int8 kernels' byte operations (gemm_gguf_int8-inl.h) and vpdpbusd on unsigned codes.
  static ivec load_bytes(const uint8_t* p) {
    ivec r;
    std::memcpy(r.i, p, sizeof r.i);
    return r;
  }
  template <typename F>
  static ivec map_bits(ivec a, F f) {
    ivec r;
    for (int l = 0; l < kWidth; ++l) r.i[l] = static_cast<int32_t>(f(static_cast<uint32_t>(a.i[l])));
    return r;
  }
  static ivec and_bytes(ivec v, int mask) {
    return map_bits(v, [&](uint32_t x) { return x & (static_cast<uint32_t>(mask & 255) * 0x01010101u); });
  }
  static ivec or_bytes(ivec a, ivec b) {
    ivec r;
    for (int l = 0; l < kWidth; ++l) r.i[l] = a.i[l] | b.i[l];
    return r;
  }
  template <int S>  // vpsllw / vpsrlw: each 16-bit half of a lane shifted on its own
  static ivec shift_bytes(ivec v) {
    return map_bits(v, [](uint32_t x) {
      auto shift = [](uint32_t h) { return (S >= 0 ? h << S : h >> -S) & 0xffffu; };
      return shift(x & 0xffffu) | shift(x >> 16) << 16;
    });
  }
  // vptestmb then a masked vpaddb: byte b gets + Add (mod 256) where byte b of high has bit B set.
  template <int B, int Add>
  static ivec add_where_bit(ivec u, ivec high) {
    ivec r;
    for (int l = 0; l < kWidth; ++l) {
      uint32_t out = 0;
      for (int b = 0; b < 4; ++b) {
        const uint32_t byte = static_cast<uint32_t>(u.i[l]) >> (8 * b) & 255u;
        const bool set = (static_cast<uint32_t>(high.i[l]) >> (8 * b) >> B & 1u) != 0;
        out |= ((set ? byte + Add : byte) & 255u) << (8 * b);
      }
      r.i[l] = static_cast<int32_t>(out);
    }
    return r;
  }
  static ivec u_dot4(ivec acc, ivec u, ivec x) { return q8_dot4(acc, u, x); }
  static ivec set1_i32(int v) {
    ivec r;
    for (int l = 0; l < kWidth; ++l) r.i[l] = v;
    return r;
  }
  static constexpr bool kPairSums = false;  // vpdpbusd sums in int32 directly
  // The vpmaddubsw idiom (unused while kPairSums is false, but named by the header): int16 pair sums, saturated.
  static ivec pair_sums(ivec u, ivec x) {
    ivec r;
    for (int l = 0; l < kWidth; ++l) {
      uint32_t out = 0;
      for (int h = 0; h < 2; ++h) {
        int32_t sum = 0;
        for (int b = 2 * h; b < 2 * h + 2; ++b)
          sum += static_cast<int32_t>(static_cast<uint8_t>(u.i[l] >> (8 * b))) *
                 static_cast<int32_t>(static_cast<int8_t>(x.i[l] >> (8 * b)));
        out |= static_cast<uint32_t>(static_cast<uint16_t>(std::clamp(sum, -32768, 32767))) << (16 * h);
      }
      r.i[l] = static_cast<int32_t>(out);
    }
    return r;
  }
  static int32_t half(int32_t v, int h) { return static_cast<int16_t>(static_cast<uint32_t>(v) >> (16 * h)); }
  static ivec add_i16(ivec a, ivec b) {
    ivec r;
    for (int l = 0; l < kWidth; ++l)
      r.i[l] = static_cast<int32_t>(static_cast<uint16_t>(half(a.i[l], 0) + half(b.i[l], 0)) |
                                    static_cast<uint32_t>(static_cast<uint16_t>(half(a.i[l], 1) + half(b.i[l], 1))) << 16);
    return r;
  }
  // The super-block form: vpmovzxbd, int32 masks and shifts, and vpdpwssd (each lane adds the products of its two
  // signed 16-bit halves).
  static ivec widen_u8(const uint8_t* p) {
    ivec r;
    for (int l = 0; l < kWidth; ++l) r.i[l] = p[l];
    return r;
  }
  // The f16 factors: vcvtph2ps.
  static vec load_f16(const uint16_t* p) { return map([&](int l) { return f16_to_float(p[l]); }); }
  // The compact factors' signed scales: vpmovsxbd.
  static ivec widen_i8(const uint8_t* p) {
    ivec r;
    for (int l = 0; l < kWidth; ++l) r.i[l] = static_cast<int8_t>(p[l]);
    return r;
  }
  static ivec and_i32(ivec v, int mask) {
    return map_bits(v, [&](uint32_t x) { return x & static_cast<uint32_t>(mask); });
  }
  template <int S>
  static ivec shift_i32(ivec v) {
    return map_bits(v, [](uint32_t x) { return S > 0 ? x << (S & 31) : x >> (-S & 31); });
  }
  // vpmulld (the low 32 bits of each product, as unsigned wrap-around) and vpaddd.
  static ivec mul_add_i32(ivec acc, ivec a, ivec b) {
    for (int l = 0; l < kWidth; ++l)
      acc.i[l] = static_cast<int32_t>(static_cast<uint32_t>(acc.i[l]) +
                                      static_cast<uint32_t>(a.i[l]) * static_cast<uint32_t>(b.i[l]));
    return acc;
  }
  static ivec madd_i16(ivec acc, ivec a, ivec b) {
    for (int l = 0; l < kWidth; ++l) acc.i[l] += half(a.i[l], 0) * half(b.i[l], 0) + half(a.i[l], 1) * half(b.i[l], 1);
    return acc;
  }
  // MXFP4 (gemm_gguf_int8-inl.h): vpshufb (each byte's low four bits index the 16 table bytes of its 128-bit
  // lane; a set top bit gives 0) and the E8M0 exponents widened to f32 bits max(e << 23, 0x400000).
  static ivec table16(const uint8_t* t) {
    ivec r;
    for (int l = 0; l < kWidth; ++l) std::memcpy(&r.i[l], t + 4 * (l % 4), 4);
    return r;
  }
  static ivec lookup16(ivec table, ivec idx) {
    ivec r;
    for (int l = 0; l < kWidth; ++l) {
      uint32_t out = 0;
      for (int b = 0; b < 4; ++b) {
        const uint8_t i = static_cast<uint8_t>(static_cast<uint32_t>(idx.i[l]) >> (8 * b));
        const int at = l / 4 * 16 + (i & 15);  // byte `at` of the table vector, within the lane's 128 bits
        const uint8_t v = i & 0x80 ? 0 : static_cast<uint8_t>(static_cast<uint32_t>(table.i[at / 4]) >> (8 * (at % 4)));
        out |= static_cast<uint32_t>(v) << (8 * b);
      }
      r.i[l] = static_cast<int32_t>(out);
    }
    return r;
  }
  static vec e8m0_scales(const uint8_t* p) {
    return map([&](int l) { return std::bit_cast<float>(std::max(static_cast<uint32_t>(p[l]) << 23, 0x400000u)); });
  }
  // vdpbf16ps: per lane, acc += a.odd * b.odd, then acc += a.even * b.even, each rounded to f32 (a bf16 product
  // is exact in f32, so each step is one rounding). DAZ/FTZ are not modelled: the tests' values are normal.
  static bvec load_pairs(const void* p) {
    bvec r;
    std::memcpy(r.pair, p, sizeof r.pair);
    return r;
  }
  static void store_pairs(void* p, const bvec& v) { std::memcpy(p, v.pair, sizeof v.pair); }
  static bvec broadcast_pair(const uint32_t* p) {
    bvec r;
    for (int l = 0; l < kWidth; ++l) r.pair[l] = *p;
    return r;
  }
  // The fp8 dot format's decode (gemm_fp8_dot-inl.h): of a k-pair row of 4 * kWidth codes, half H's lane l holds
  // codes 4l + H (even k, low half) and 4l + 2 + H, each as the bf16 bits of fp8(b) * 2^-8, computed here from the
  // value (exact in bf16) rather than the bits.
  struct fp8row {
    uint8_t code[4 * kWidth];
  };
  static fp8row fp8_row(const uint8_t* p) {
    fp8row r;
    std::memcpy(r.code, p, sizeof r.code);
    return r;
  }
  static uint32_t fp8_bf16_bits(uint8_t code) { return float_to_bf16(f8_e4m3_to_float(code) * 0x1p-8f); }
  template <int H>
  static bvec fp8_pairs(const fp8row& row) {
    bvec r;
    for (int l = 0; l < kWidth; ++l)
      r.pair[l] = fp8_bf16_bits(row.code[4 * l + H]) | fp8_bf16_bits(row.code[4 * l + 2 + H]) << 16;
    return r;
  }
  static vec dot_bf16(vec acc, bvec a, bvec b) {
    auto half = [](uint32_t pair, int h) { return bf16_to_float(static_cast<uint16_t>(pair >> (16 * h))); };
    return map([&](int l) {
      float r = acc.f[l] + half(a.pair[l], 1) * half(b.pair[l], 1);
      return r + half(a.pair[l], 0) * half(b.pair[l], 0);
    });
  }
};

constexpr int kMr = 12;
constexpr int kQ8Mr = 6;
constexpr int kIntMr = 6;
constexpr int kFp8Mr = 10;

#include "kernels/isa/gemm_microkernel-inl.h"
// The super-block form not unrolled over the model (why: gemm_gguf_int8-inl.h).
#define HYMOE_MODEL_NO_UNROLL
#include "kernels/isa/gemm_gguf_int8-inl.h"
#include "kernels/isa/gemm_fp8_dot-inl.h"

const GemmFormat kBf16Dot{WeightFormat::kBf16Dot, "gemm_bf16w_bf16_12x32__model", kMr, kNr, pack_activations_bf16_pairs,
                          gemm_format_bf16_dot<>, gemm_format_bf16_dot_few<>, 3};
const GemmFormat kQ8Vnni{WeightFormat::kQ8Block32, "gemm_q8w_q8_6x32__model", kQ8Mr, kNr, pack_activations_q8,
                         gemm_format_q8, gemm_format_q8_few, 1};

// The fp8 dot format as gemm_avx512bf16.cc builds it.
const GemmFormat kFp8Dot{WeightFormat::kFp8Block128Dot, "gemm_fp8w_bf16_10x32__model", kFp8Mr, kNr,
                         pack_activations_bf16_pairs128, gemm_format_fp8_dot<>, gemm_format_fp8_dot_few, 3,
                         gemm_format_fp8_dot_expanding, gemm_format_fp8_dot<Fp8Operand::kExpanded>,
                        kFp8DotExpandedUnit};

// The GGUF int8 formats as gemm_avx512vnni.cc builds them, one per registry line, and MXFP4's.
#define HYMOE_GGUF_BLOCK(T, t, type, unit, bits, bias, int8_bias, offsets, act, values, int8_form) \
  const GemmFormat HYMOE_INT8_NAME(t, act, HYMOE_VNNI_ROWS_##int8_form, model){                                 \
      WeightFormat::kGgml##T##I8, "gemm_" #t "w_" #act "_" HYMOE_STRING(HYMOE_VNNI_ROWS_##int8_form) "x32__model", \
      kIntRows<WeightFormat::kGgml##T##I8>, kNr,                                                                \
      int8_pack_a<WeightFormat::kGgml##T##I8>(), gemm_format_gguf_int8<WeightFormat::kGgml##T##I8>,             \
      gemm_format_gguf_int8_few<WeightFormat::kGgml##T##I8>, 1};
#include "kernels/formats/gguf_formats.inc"
#undef HYMOE_GGUF_BLOCK
const GemmFormat gemm_mxfp4w_q8_0_6x32__model{WeightFormat::kMxfp4Block32I8, "gemm_mxfp4w_q8_0_6x32__model", kIntMr, kNr,
                                              int8_pack_a<WeightFormat::kMxfp4Block32I8>(),
                                              gemm_format_gguf_int8<WeightFormat::kMxfp4Block32I8>,
                                              gemm_format_gguf_int8_few<WeightFormat::kMxfp4Block32I8>, 1};
constexpr const GemmFormat* kModelInt8Formats[] = {
#define HYMOE_GGUF_BLOCK(T, t, type, unit, bits, bias, int8_bias, offsets, act, values, int8_form) \
  &HYMOE_INT8_NAME(t, act, HYMOE_VNNI_ROWS_##int8_form, model),
#include "kernels/formats/gguf_formats.inc"
#undef HYMOE_GGUF_BLOCK
    &gemm_mxfp4w_q8_0_6x32__model};

// The whole table, as an ISA unit builds it (this also instantiates every body of the header over the model).
constexpr const GemmFormat* kModelFormats[] = {&kBf16Dot, &kQ8Vnni};
const IsaKernels kModelKernels{Isa::kAvx512Bf16, kMr, kNr, gemm_f32w, gemm_bf16w, gemm_f32w_few, gemm_bf16w_few,
                               swiglu, dot_rows, "gemm_f32w_f32_12x32__model", "gemm_bf16w_f32_12x32__model",
                               fma_probe, sum_probe, sum_probe_streams, kModelFormats, bf16_dot_probe<>,
                               int8_dot_probe};

using test::dot_error_bound;
using test::random_values;

// The dot probes count what they do: 12 chains x 16 lanes x (2 bf16 or 4 int8 products) x 2 operations a step.
TEST(EmulatedIsaTest, DotProbesCountTheirOperations) {
  float sink[16];
  EXPECT_EQ(kModelKernels.bf16_dot_probe(10, sink), 10.0 * 12 * 16 * 2 * 2);
  EXPECT_EQ(sink[0], 66.0f + 12 * 10 * 2);  // chain i starts at i and gains 1 * 1 + 1 * 1 a step
  EXPECT_EQ(kModelKernels.int8_dot_probe(1, sink), 12.0 * 16 * 4 * 2);
  EXPECT_GT(sink[0], 12 * 16843009.0f);  // the chains start at bytes (1, 1, 1, 1) and only grow in one step
}

// The micro-kernel bodies over the model against the references, every m and K around the units and K block.
TEST(EmulatedIsaTest, Bf16DotAndVnniQ8MicroKernelsMatchTheirReferences) {
  Rng rng(21);
  for (const GemmFormat* f : {&kBf16Dot, &kQ8Vnni}) {
    const int mr = f->mr, nr = f->nr;
    for (int64_t kc : {1, 2, 3, 5, 31, 32, 33, 65, 128, 257}) {
      const int64_t lda = kc + 1, ldc = nr + 3;
      const auto a = random_values(rng, mr * lda);
      const auto w = random_values(rng, kc * nr);
      const PackedMatrix b = pack_matrix(MatrixView{w.data(), DType::kF32, WeightLayout::kOutIn, kc, nr}, nr, f->format);
      std::vector<uint8_t> ap(static_cast<size_t>(f->units(kc) * f->a_unit_bytes()));
      f->pack_a(a.data(), lda, nullptr, mr, kc, mr, ap.data());
      const auto c0 = random_values(rng, mr * ldc);
      for (int m = 1; m <= mr; ++m)
        for (bool acc : {false, true}) {
          std::vector<float> got = c0, want = c0;
          f->gemm(m, kc, ap.data(), b.data(), got.data(), ldc, acc, nullptr, 0);
          if (f->format == WeightFormat::kBf16Dot) gemm_bf16w_bf16__ref(m, mr, nr, kc, ap.data(), b.data(), want.data(), ldc, acc);
          else gemm_q8w_q8__ref(m, mr, nr, kc, ap.data(), b.data(), want.data(), ldc, acc);
          const bool q8 = f->format == WeightFormat::kQ8Block32;
          for (int i = 0; i < mr; ++i)
            for (int64_t j = 0; j < ldc; ++j) {
              const size_t at = static_cast<size_t>(i * ldc + j);
              if (i >= m || j >= nr) {
                ASSERT_EQ(got[at], c0[at]);
                continue;
              }
              double abs_sum = acc ? std::abs(c0[at]) : 0.0;
              for (int64_t k = 0; k < kc; ++k)
                abs_sum += q8 ? 1.0 : 1.01 * std::abs(a[static_cast<size_t>(i * lda + k)] * w[static_cast<size_t>(j * kc + k)]);
              const int64_t chain = q8 ? f->units(kc) + 2 : kc;
              ASSERT_NEAR(got[at], want[at], dot_error_bound(chain + (acc ? 1 : 0), abs_sum))
                  << f->name << " m=" << m << " kc=" << kc << " acc=" << acc << " at " << i << "," << j;
            }
        }
    }
  }
}

// The bf16-dot decode form over the vdpbf16ps model: the bits of its row calls.
TEST(EmulatedIsaTest, Bf16DotFewRowsFormEqualsItsRowCalls) { test::expect_few_rows_form_equals_row_calls(kBf16Dot); }

// The q8 blocks' decode form over the vpdpbusd model: the bits of its row calls.
TEST(EmulatedIsaTest, Q8FewRowsFormEqualsItsRowCalls) { test::expect_few_rows_form_equals_row_calls(kQ8Vnni); }

// Through the one grouped driver: ragged groups (empty, 1 row, several row blocks), K across several K blocks and
// odd, row gather fused into the packing; each output against a double reference on the format's rounded inputs.
TEST(EmulatedIsaTest, GroupedDriverRunsTheModelFormats) {
  Rng rng(22);
  for (const GemmFormat* f : {&kBf16Dot, &kQ8Vnni})
    for (int64_t k : {int64_t{7}, 2 * kKc + 45}) {
      const int64_t n = 70, source_rows = 300;
      const std::vector<int64_t> rows = {0, 1, 3, 16 * f->mr + 5, 0, 2};
      const auto x = random_values(rng, source_rows * k);
      std::vector<PackedMatrix> packed;
      std::vector<std::vector<float>> weights;
      std::vector<std::vector<int64_t>> index;
      std::vector<GemmGroup> groups;
      for (int64_t m : rows) {
        weights.push_back(random_values(rng, n * k));
        packed.push_back(pack_matrix(MatrixView{weights.back().data(), DType::kF32, WeightLayout::kOutIn, k, n}, kNr, f->format));
        std::vector<int64_t> idx(static_cast<size_t>(m));
        for (auto& v : idx) v = static_cast<int64_t>(rng.uniform() * source_rows) % source_rows;
        index.push_back(idx);
      }
      for (size_t g = 0; g < rows.size(); ++g)
        groups.push_back({x.data(), k, index[g].data(), rows[g], k, packed[g].data(), packed[g].panels});
      std::vector<std::vector<float>> out(rows.size());
      for (size_t g = 0; g < rows.size(); ++g) out[g].assign(static_cast<size_t>(rows[g] * n), -7.0f);
      Workspace ws;
      run_gemm_groups(*f, groups, ws, [&](const GemmTile& t, const float* c, int64_t ldc) {
        for (int64_t r = 0; r < t.rows; ++r)
          for (int64_t j = 0; j < t.np * kNr && t.p0 * kNr + j < n; ++j)
            out[static_cast<size_t>(t.group)][static_cast<size_t>((t.r0 + r) * n + t.p0 * kNr + j)] = c[r * ldc + j];
      });
      const bool q8 = f->format == WeightFormat::kQ8Block32;
      for (size_t g = 0; g < rows.size(); ++g)
        for (int64_t r = 0; r < rows[g]; ++r)
          for (int64_t j = 0; j < n; ++j) {
            const float* xr = x.data() + index[g][static_cast<size_t>(r)] * k;
            const float* wj = weights[g].data() + j * k;
            double want = 0, mag = 0;
            if (q8) {
              for (int64_t b = 0; b < k; b += kQ8Block) {
                const int len = static_cast<int>(std::min<int64_t>(kQ8Block, k - b));
                int8_t qa[kQ8Block], qw[kQ8Block];
                float da, dw;
                quantize_q8_block(xr + b, len, qa, &da);
                quantize_q8_block(wj + b, len, qw, &dw);
                int64_t dot = 0;
                for (int i = 0; i < len; ++i) dot += qa[i] * qw[i];
                want += static_cast<double>(dot) * da * dw;
                mag += len;
              }
            } else {
              for (int64_t i = 0; i < k; ++i) {
                const double p = static_cast<double>(bf16_to_float(float_to_bf16(xr[i]))) * bf16_to_float(float_to_bf16(wj[i]));
                want += p;
                mag += std::abs(p);
              }
            }
            ASSERT_NEAR(out[g][static_cast<size_t>(r * n + j)], want, dot_error_bound(q8 ? f->units(k) + 2 : k, mag))
                << f->name << " k " << k << " group " << g << " row " << r << " column " << j;
          }
    }
}

// The fp8 dot kernel bodies over the vdpbf16ps model (what gemm_avx512bf16.cc runs): every code decoded exactly,
// the micro-kernel and its few-rows form against the reference on every m and K around the 128-k units.
TEST(EmulatedIsaTest, Fp8DotMicroKernelsMatchTheReference) {
  test::fp8::expect_fp8_dot_decodes_every_code_exactly(kFp8Dot);
  Rng rng(25);
  test::fp8::expect_fp8_dot_kernels_match_reference(kFp8Dot, rng);
}

// The GGUF int8 kernel bodies over the vpdpbusd model (what gemm_avx512vnni.cc runs, which no emulator here
// reaches), MXFP4's int8 twin (vpshufb lookup, E8M0 scales) among them: every format against its scalar reference on m = 1..4 rows and 1, 3, 9 blocks, the one-row decode form
// bit-identical to one-row calls, split K bit-identical to one call.
TEST(EmulatedIsaTest, VnniGgufInt8MicroKernelsMatchTheReference) {
  Rng rng(23);
  for (const GemmFormat* f : kModelInt8Formats) {
    SCOPED_TRACE(f->name);
    test::gguf::expect_int8_kernel_matches_reference(*f, rng);
    test::gguf::expect_k_quant_float_steps(*f, rng);
  }
}

// MXFP4's int8 body over the model: one block gives llama.cpp's bits, subnormal scales included.
TEST(EmulatedIsaTest, VnniMxfp4Int8BlockGivesLlamaCppBits) {
  Rng rng(24);
  test::gguf::expect_mxfp4_int8_block_matches_llama_cpp(gemm_mxfp4w_q8_0_6x32__model, rng);
}

}  // namespace
}  // namespace hymoe::kernels
