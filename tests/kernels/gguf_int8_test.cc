// The GGUF int8 formats (QuantCompute::kInt8): ggml's activation quantizers on values whose rounding tells the
// rules apart, the integer-dot panels against the exactly decoded weights, every micro-kernel against its scalar
// reference on every ISA this CPU has, and the grouped FFN against make_grouped_ffn_ref with
// RoundingModel::kGgmlActivations (ggml's rounding of each projection's input, computed in double).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "fast_kernel_test_util.h"
#include "gguf_test_util.h"
#include "hymoe/compute.h"
#include "hymoe/threads.h"
#include "kernels/driver/gemm_driver.h"
#include "kernels/formats/gemm_kernels.h"
#include "kernels/formats/iq_blocks.h"
#include "kernels/ffn/grouped_ffn_impl.h"

namespace hymoe::kernels {
namespace {

using hymoe::test::dot_error_bound;
using hymoe::test::kF32Eps;
using namespace hymoe::test::gguf;

const std::vector<WeightFormat>& kInt8Formats = kGgufInt8Formats;

// The reference packing of an activation type with units of `unit` k.
PackActivationsFn reference_packing(GgmlActivation act, int unit) {
  return act == GgmlActivation::kQ8_0   ? pack_activations_ggml_q8_0
         : act == GgmlActivation::kQ8_1 ? pack_activations_ggml_q8_1
         : unit == 16                   ? pack_activations_ggml_q8_k16
                                        : pack_activations_ggml_q8_k32;
}

GroupedFfnOptions with_quant(QuantCompute q) {
  GroupedFfnOptions o;
  o.quant = q;
  return o;
}

// q8_0 rounds x / d half away from zero and keeps d as f16; q8_K divides by the signed largest value, rounds half
// to even and keeps d in f32 (negative when that value is positive).
TEST(GgmlActivationQuant, Q8_0AndQ8_KRoundAsGgml) {
  std::vector<float> x(kQ8KBlock, 0.0f);
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 0.5f;
  x[4] = -126.5f;
  int8_t q[kQ8KBlock];
  float d;
  quantize_ggml_q8_0_block(x.data(), kQ8Block, q, &d);
  EXPECT_EQ(d, 1.0f);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[1], 3);
  EXPECT_EQ(q[2], -3);
  EXPECT_EQ(q[3], 1);
  EXPECT_EQ(q[4], -127);
  quantize_ggml_q8_k_block(x.data(), kQ8KBlock, q, &d);
  EXPECT_EQ(d, -1.0f);
  EXPECT_EQ(q[0], -127);
  EXPECT_EQ(q[1], -2);
  EXPECT_EQ(q[2], 2);
  EXPECT_EQ(q[3], 0);
  EXPECT_EQ(q[4], 126);
  // The f16 rounding of q8_0's d; q8_K's stays f32.
  const float one[1] = {1.0f};
  quantize_ggml_q8_0_block(one, 1, q, &d);
  EXPECT_EQ(d, f16_to_float(float_to_f16(1.0f / 127.0f)));
  EXPECT_NE(d, 1.0f / 127.0f);
  EXPECT_EQ(q[0], 127);
  const float neg[2] = {-3.0f, 1.0f};
  quantize_ggml_q8_k_block(neg, 2, q, &d);
  EXPECT_EQ(d, 1.0f / (-127.0f / -3.0f));
  EXPECT_EQ(q[0], -127);
  EXPECT_EQ(q[1], 42);  // 42.33
  // All zeros: d = 0.
  const float zeros[3] = {0, 0, 0};
  quantize_ggml_q8_k_block(zeros, 3, q, &d);
  EXPECT_EQ(d, 0.0f);
  EXPECT_EQ(q[0], 0);
  // q8_1: q8_0's codes and d, and s = f16(f32 d * sum of codes) (here 1/127 * 127 * 3 = 3.0000002 in f32, which
  // f16 rounds to 3; d * sum with the f16 d would be 3.0009766).
  const float three[3] = {1.0f, 1.0f, 1.0f};
  float s_q8_1;
  quantize_ggml_q8_1_block(three, 3, q, &d, &s_q8_1);
  EXPECT_EQ(d, f16_to_float(float_to_f16(1.0f / 127.0f)));
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[2], 127);
  EXPECT_EQ(q[3], 0);
  EXPECT_EQ(s_q8_1, 3.0f);
  EXPECT_NE(s_q8_1, d * 381.0f);
  quantize_ggml_q8_1_block(x.data(), kQ8Block, q, &d, &s_q8_1);  // 127, 2.5, -2.5, 0.5, -126.5: codes sum to 1
  EXPECT_EQ(d, 1.0f);
  EXPECT_EQ(s_q8_1, 1.0f);
}

// The packed activations: codes where the layout says, the unit's block scale and the sum of its codes.
TEST(GgmlActivationQuant, PackedUnitsHoldCodesScalesAndSums) {
  Rng rng(11);
  const int mr = 3, rows = 2;
  const int64_t k = 512;
  const std::vector<float> x = hymoe::test::random_values(rng, rows * k);
  for (WeightFormat f : {WeightFormat::kGgmlQ4_0I8, WeightFormat::kGgmlQ4_1I8, WeightFormat::kGgmlQ4_KI8,
                         WeightFormat::kGgmlQ6_KI8}) {
    const GgmlActivation act = gguf_int8_activation(f);
    // The activations' unit is the sub-block (a compact format's unit of 256 k holds 8 of them).
    const int unit = gguf_int8_layout(f).k_unit, block = act == GgmlActivation::kQ8_K ? kQ8KBlock : kQ8Block;
    const int64_t unit_bytes = activation_unit_bytes(f, mr) * unit / k_unit(f);
    std::vector<uint8_t> a(static_cast<size_t>(k / unit * unit_bytes), 0xAB);
    reference_packing(act, unit)(x.data(), k, nullptr, rows, k, mr, a.data());
    for (int i = 0; i < mr; ++i)
      for (int64_t b0 = 0; b0 < k; b0 += block) {
        int8_t q[kQ8KBlock] = {};
        float d = 0, s_q8_1 = 0;
        if (i < rows) {
          if (block == kQ8KBlock) quantize_ggml_q8_k_block(x.data() + i * k + b0, block, q, &d);
          else if (act == GgmlActivation::kQ8_1) quantize_ggml_q8_1_block(x.data() + i * k + b0, block, q, &d, &s_q8_1);
          else quantize_ggml_q8_0_block(x.data() + i * k + b0, block, q, &d);
        }
        for (int64_t u = b0 / unit; u < (b0 + block) / unit; ++u) {
          const uint8_t* au = a.data() + u * unit_bytes;
          int32_t sum = 0, got_sum;
          float got_d;
          for (int kk = 0; kk < unit; ++kk) {
            const int8_t want = q[u * unit - b0 + kk];
            ASSERT_EQ(static_cast<int8_t>(au[(kk / 4 * mr + i) * 4 + kk % 4]), want) << weight_format_operands(f);
            sum += want;
          }
          std::memcpy(&got_d, au + unit * mr + 4 * i, 4);
          std::memcpy(&got_sum, au + (unit + 4) * mr + 4 * i, 4);
          EXPECT_EQ(got_d, d);
          if (act == GgmlActivation::kQ8_1) EXPECT_EQ(std::bit_cast<float>(got_sum), s_q8_1);  // s in the sum's slot
          else EXPECT_EQ(got_sum, sum);
        }
      }
  }
}

// AVX2's packings (what every ISA from AVX2 up packs with; hymoe's q8 blocks' too) lay out the reference packings'
// bytes: random rows of several magnitudes, exact ties of both rounding rules (a block whose largest value is 127
// quantizes with scale 1, so x.5 is a tie), blocks of zeros, a largest magnitude held by both signs (the first one counts for q8_K), k
// ending inside a block and gathered rows.
TEST(GgmlActivationQuant, Avx2PackingsGiveTheReferenceBytes) {
  bool has_avx2 = false;
  for (Isa isa : supported_isas()) has_avx2 |= isa == Isa::kAvx2;
  if (!has_avx2) GTEST_SKIP() << "CPU lacks AVX2";
  struct Packing {
    PackActivationsFn ref, fast;
    int unit;
  };
  const Packing packings[] = {{pack_activations_ggml_q8_0, pack_activations_ggml_q8_0__avx2, 32},
                              {pack_activations_ggml_q8_1, pack_activations_ggml_q8_1__avx2, 32},
                              {pack_activations_ggml_q8_k32, pack_activations_ggml_q8_k32__avx2, 32},
                              {pack_activations_ggml_q8_k16, pack_activations_ggml_q8_k16__avx2, 16},
                              {pack_activations_q8, pack_activations_q8__avx2, 32}};
  Rng rng(21);
  const int64_t lda = 2 * 256 + 17;
  std::vector<float> x = hymoe::test::random_values(rng, 7 * lda);
  for (int64_t i = 0; i < lda; ++i) x[static_cast<size_t>(lda + i)] *= 1e-3f;  // row 1: small values
  for (int64_t i = 0; i < lda; ++i) x[static_cast<size_t>(2 * lda + i)] = 0.0f;  // row 2: zeros
  for (int64_t i = 0; i < lda; ++i)  // row 3: ties (largest 127 in every block of 32), both signs
    x[static_cast<size_t>(3 * lda + i)] = i % 32 == 0 ? 127.0f : static_cast<float>(i % 7 - 3) + 0.5f;
  for (int64_t i = 0; i < lda; ++i)  // row 4: the largest magnitude as -127 first, then +127 (q8_K: scale -1)
    x[static_cast<size_t>(4 * lda + i)] =
        i % 256 == 5 ? -127.0f : i % 256 == 9 ? 127.0f : static_cast<float>(i % 9) - 4.5f;
  const int64_t rows_index[] = {4, 3, 0, 6};
  for (const Packing& p : packings)
    for (int mr : {1, 4})
      for (int64_t k : {int64_t{1}, int64_t{31}, int64_t{32}, int64_t{33}, int64_t{255}, int64_t{256}, lda})
        for (int rows = 1; rows <= mr; ++rows)
          for (const int64_t* index : {static_cast<const int64_t*>(nullptr), rows_index}) {
            const int64_t bytes = (k + p.unit - 1) / p.unit * (p.unit + 8) * mr;
            std::vector<uint8_t> want(static_cast<size_t>(bytes), 0xAB), got(static_cast<size_t>(bytes), 0xCD);
            for (int first_row = 0; first_row + rows <= 7; first_row += 3) {
              const float* a = index ? x.data() : x.data() + first_row * lda;
              p.ref(a, lda, index, rows, k, mr, want.data());
              p.fast(a, lda, index, rows, k, mr, got.data());
              ASSERT_EQ(want, got) << "unit " << p.unit << " mr " << mr << " k " << k << " rows " << rows
                                   << (index ? " gathered" : "") << " from row " << first_row;
            }
          }
}

// Rows quantized once on their own (mr = 1) and their units copied into a micro-panel (gather_activation_units,
// the driver's form for rows gathered more than once) are the bytes each packing writes from the gathered rows:
// every activation type, 1..mr rows, k ending inside a block, a row taken twice.
TEST(GgmlActivationQuant, RowsQuantizedOnceGatherToThePackedBytes) {
  struct Packing {
    PackActivationsFn pack;
    int unit;
  };
  const Packing packings[] = {{pack_activations_ggml_q8_0, 32}, {pack_activations_ggml_q8_1, 32},
                              {pack_activations_ggml_q8_k32, 32}, {pack_activations_ggml_q8_k16, 16},
                              {pack_activations_q8, 32}};
  Rng rng(22);
  const int64_t rows_total = 5;
  for (const Packing& p : packings)
    for (int64_t k : {int64_t{32}, int64_t{33}, int64_t{256}, int64_t{2 * 256 + 17}}) {
      const std::vector<float> x = hymoe::test::random_values(rng, rows_total * k);
      const int64_t units = (k + p.unit - 1) / p.unit, row_bytes = units * (p.unit + 8);
      std::vector<uint8_t> quantized(static_cast<size_t>(rows_total * row_bytes));
      for (int64_t r = 0; r < rows_total; ++r)
        p.pack(x.data() + r * k, k, nullptr, 1, k, 1, quantized.data() + r * row_bytes);
      const int64_t index[] = {3, 0, 3, 4, 1, 2};
      for (int mr : {1, 4, 6})
        for (int rows = 1; rows <= mr; ++rows) {
          const size_t bytes = static_cast<size_t>(units * (p.unit + 8) * mr);
          std::vector<uint8_t> want(bytes, 0xAB), got(bytes, 0xCD);
          p.pack(x.data(), k, index, rows, k, mr, want.data());
          gather_activation_units(quantized.data(), row_bytes, index, rows, p.unit, mr, got.data());
          ASSERT_EQ(want, got) << "unit " << p.unit << " k " << k << " mr " << mr << " rows " << rows;
        }
    }
}

// Panels hold every weight exactly (padding columns zero) in the same bytes per weight as the exact formats
// (docs/kernels.md, N a multiple of NR); and the stored codes fit the AVX2 idiom (u <= 63 but for Q8_0).
// The grid types' fast int8 expansion (operand words, bytewise negation) writes the bytes of the plain one (each
// block taken apart value by value), over random blocks that reach every sign pattern and d of either sign.
template <uint32_t kType, int kSub>
void expect_fast_grid_expansion(Rng& rng, int nr) {
  using namespace kernels;
  const int64_t block_bytes = gguf_grid_block_bytes(kType);
  ASSERT_EQ(block_bytes, ggml_type_traits(kType)->block_bytes) << ggml_type_name(kType);
  for (int round = 0; round < 20; ++round) {
    std::vector<std::byte> blocks(static_cast<size_t>(nr * block_bytes));
    for (int j = 0; j < nr; ++j) random_block(rng, kType, blocks.data() + j * block_bytes);
    const size_t bytes = static_cast<size_t>((256 / kSub) * (kSub * nr + 4 * nr));
    std::vector<uint8_t> plain(bytes, 0xaa), fast(bytes, 0x55);
    const auto* raw = reinterpret_cast<const uint8_t*>(blocks.data());
    expand_grid_unit<true>(kType, kSub, block_bytes, raw, nr, plain.data());
    expand_grid_unit_int8<kType, kSub>(raw, nr, fast.data());
    ASSERT_EQ(0, std::memcmp(plain.data(), fast.data(), bytes)) << ggml_type_name(kType) << " nr " << nr;
  }
}

TEST(GgufInt8Pack, FastGridExpansionWritesThePlainBytes) {
  Rng rng(14);
  for (int nr : {16, 32}) {
    expect_fast_grid_expansion<16, 32>(rng, nr);
    expect_fast_grid_expansion<17, 16>(rng, nr);
    expect_fast_grid_expansion<22, 16>(rng, nr);
    expect_fast_grid_expansion<18, 32>(rng, nr);
    expect_fast_grid_expansion<21, 32>(rng, nr);
    expect_fast_grid_expansion<19, 32>(rng, nr);
    expect_fast_grid_expansion<29, 16>(rng, nr);
  }
  // Every grid type of the registry is among those.
  int grids = 0;
  for (const kernels::GgufBlockFormat& b : kernels::kGgufBlockFormats) grids += b.grid;
  EXPECT_EQ(grids, 7);
}

TEST(GgufInt8Pack, PanelsHoldTheExactWeightsInTheDocumentedBytes) {
  Rng rng(12);
  // The f16 factors: the file's bytes.
  const std::map<std::string, double> documented = {{"Q8_0", 34 / 32.0}, {"Q4_0", 18 / 32.0}, {"Q4_1", 20 / 32.0},
                                                    {"Q5_0", 22 / 32.0}, {"Q5_1", 24 / 32.0}, {"IQ4_NL", 18 / 32.0},
                                                    // The compact factors: a byte of scale (and of min) per
                                                    // sub-block, f32 d (and -dmin) per 256.
                                                    {"Q4_K", 152 / 256.0}, {"Q5_K", 184 / 256.0},
                                                    {"Q6_K", 212 / 256.0}, {"IQ4_XS", 140 / 256.0},
                                                    // The super-block form: 2-bit codes, a scale byte per 16,
                                                    // f32 d and -dmin per 256; Q3_K a third bit a code and
                                                    // no -dmin.
                                                    {"Q2_K", 88 / 256.0}, {"TQ1_0", 88 / 256.0},
                                                    {"TQ2_0", 88 / 256.0}, {"Q3_K", 116 / 256.0},
                                                    // The grid types keep their blocks: the file's bytes.
                                                    {"IQ2_XXS", 66 / 256.0}, {"IQ2_XS", 74 / 256.0},
                                                    {"IQ2_S", 82 / 256.0},   {"IQ3_XXS", 98 / 256.0},
                                                    {"IQ3_S", 110 / 256.0},  {"IQ1_S", 50 / 256.0},
                                                    {"IQ1_M", 56 / 256.0}};
  for (int nr : {16, 32})
    for (const WeightFormat f : kInt8Formats) {
      const std::string type = gguf_block_format(f)->type_name;
      ASSERT_TRUE(documented.contains(type)) << type << " has no documented size here";
      const bool unit_factors = gguf_super_unit_factors(f);  // the ternary types
      for (int64_t blocks : {1, 3})
        for (int64_t n : {5, 32}) {
          const int64_t k = blocks * block_values(f);
          const GgufMatrix m(rng, gguf_exact_twin(f), k, n);
          const std::vector<float> want = decoded(m.view);
          const PackedMatrix p = pack_matrix(m.view, nr, f);
          const int64_t panels = (n + nr - 1) / nr;
          ASSERT_EQ(p.bytes(), static_cast<size_t>(panels * k / k_unit(f) * weight_unit_bytes(f, nr)));
          if (n % nr == 0) {
            EXPECT_DOUBLE_EQ(static_cast<double>(p.bytes()) / static_cast<double>(k * n), documented.at(type));
          }
          for (int64_t col = 0; col < panels * nr; ++col)
            for (int64_t kk = 0; kk < k; ++kk) {
              const uint8_t* panel = p.buffer.data() + col / nr * p.panel_bytes();
              const int j = static_cast<int>(col % nr);
              const float got = gguf_panel_weight(f, panel, nr, kk, j);
              const float w = col < n ? want[static_cast<size_t>(kk * n + col)] : 0.0f;
              if (gguf_int8_layout(f).code_bits < 8 && !gguf_int8_layout(f).values)  // the others go the Q8_0 way
                ASSERT_LE(gguf_int8_panel_code(f, panel, nr, kk, j), 63);
              // The ternary types' super-block form holds fmaf(d, q, -d): +0 where the block decodes (q - 1) * d
              // to -0 (d < 0), a sign the integer dot never sees. Every other weight to the bit.
              if (unit_factors && got == 0.0f && w == 0.0f) continue;
              ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(w))
                  << weight_format_operands(f) << " k " << kk << " col " << col << " n " << n << " nr " << nr;
            }
        }
    }
}

class GgufInt8KernelTest : public hymoe::test::IsaKernelsTest {};

// Each micro-kernel against the reference on m = 1..MR rows, K of 1, 3 and 9 blocks (odd counts of units, of
// blocks and of the driver's 128-k blocks), N not a multiple of NR; splitting K at 128 (accumulate) and the
// one-row-over-4-panels form give the same bits as one call. The bound: per unit a product of two scales and one
// or two FMAs (3 roundings of the unit's terms), then the chain over the units.
TEST_P(GgufInt8KernelTest, MicroKernelsMatchTheReference) {
  Rng rng(13);
  for (WeightFormat fmt : kInt8Formats) {
    const GemmFormat* f = ik_->format(fmt);
    ASSERT_NE(f, nullptr) << weight_format_operands(fmt);
    expect_int8_kernel_matches_reference(*f, rng);
  }
}

// The K-quant forms' float steps to the bit (expect_k_quant_float_steps), on every ISA this CPU has.
TEST_P(GgufInt8KernelTest, KQuantFormsTakeLlamaCppsFloatSteps) {
  Rng rng(31);
  for (WeightFormat fmt : kInt8Formats) {
    const GemmFormat* f = ik_->format(fmt);
    ASSERT_NE(f, nullptr) << weight_format_operands(fmt);
    expect_k_quant_float_steps(*f, rng);
  }
}

struct Int8FfnCase {
  WeightFormat first, down;  // exact formats of the GGUF types
  int64_t D, H;
};

const Int8FfnCase kInt8FfnCases[] = {
    {WeightFormat::kGgmlQ8_0, WeightFormat::kGgmlQ8_0, 32, 96},    // K of one block (gate/up)
    {WeightFormat::kGgmlQ4_0, WeightFormat::kGgmlQ4_0, 96, 160},   // 3 blocks, 5 in down
    {WeightFormat::kGgmlQ4_K, WeightFormat::kGgmlQ4_K, 256, 768},  // down of three super-blocks
    {WeightFormat::kGgmlQ5_K, WeightFormat::kGgmlQ5_K, 512, 256},
    {WeightFormat::kGgmlQ6_K, WeightFormat::kGgmlQ6_K, 256, 256},
    {WeightFormat::kGgmlQ4_K, WeightFormat::kGgmlQ6_K, 256, 256},  // Q4_K_M: gate/up Q4_K, down Q6_K
    {WeightFormat::kGgmlQ8_0, WeightFormat::kGgmlQ4_K, 64, 256},   // q8_0 activations then q8_K ones
    {WeightFormat::kGgmlQ4_1, WeightFormat::kGgmlQ4_1, 96, 160},   // q8_1 activations: offsets times s
    {WeightFormat::kGgmlQ5_0, WeightFormat::kGgmlQ5_0, 64, 96},
    {WeightFormat::kGgmlQ5_1, WeightFormat::kGgmlQ5_1, 96, 64},
    {WeightFormat::kGgmlQ4_K, WeightFormat::kGgmlQ5_0, 256, 96},   // Q4_K_M where H is no multiple of 256
    {WeightFormat::kGgmlQ5_K, WeightFormat::kGgmlQ5_1, 256, 160},  // Q5_K_M likewise: q8_K then q8_1
    {WeightFormat::kGgmlIQ4_NL, WeightFormat::kGgmlIQ4_NL, 96, 64},
    {WeightFormat::kGgmlIQ4_XS, WeightFormat::kGgmlIQ4_NL, 256, 96},  // IQ4_XS files where H is no multiple of 256
    {WeightFormat::kGgmlIQ4_XS, WeightFormat::kGgmlIQ4_XS, 512, 256},
    {WeightFormat::kGgmlQ2_K, WeightFormat::kGgmlQ3_K, 256, 256},     // Q2_K files: down Q3_K
    {WeightFormat::kGgmlQ2_K, WeightFormat::kGgmlQ2_K, 512, 768},     // Q2_K's super-block form in both roles
    {WeightFormat::kGgmlQ3_K, WeightFormat::kGgmlQ4_0, 256, 96},      // Q3_K files where H is no multiple of 256
    {WeightFormat::kGgmlTQ1_0, WeightFormat::kGgmlTQ2_0, 512, 256},
    {WeightFormat::kGgmlTQ2_0, WeightFormat::kGgmlQ4_0, 256, 160},    // TQ files: Q4_0 where H is no multiple of 256
    {WeightFormat::kGgmlIQ2_XXS, WeightFormat::kGgmlIQ2_XS, 512, 256},  // grid types: blocks expanded per unit
    {WeightFormat::kGgmlIQ2_S, WeightFormat::kGgmlIQ3_XXS, 256, 512},
    {WeightFormat::kGgmlIQ3_S, WeightFormat::kGgmlIQ1_S, 256, 256},
    {WeightFormat::kGgmlIQ1_M, WeightFormat::kGgmlQ4_0, 256, 96},     // IQ1_M files where H is no multiple of 256
};

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float e : v) m = std::max(m, static_cast<double>(std::abs(e)));
  return m;
}

// The int8 grouped FFN against the reference with ggml's rounding: they differ by f32 summation order, and where
// the f32 hidden row of the kernels quantizes to a neighbouring code where the double one of the reference sits
// on a rounding boundary, by that one code (|w| d of the down block): 1e-5 of max|y| covers both by far (the
// exact computation, `y`, is 1e-2 away). Same bits on 1 and 2 threads.
void expect_int8_ffn_matches_ref(Isa isa, const Int8FfnCase& c) {
  SCOPED_TRACE(std::string(weight_format_operands(c.first)) + "+" + weight_format_operands(c.down));
  Rng rng(14);
  const std::vector<int64_t> sizes{0, 1, 50, 3, 0, 7};
  const int64_t G = static_cast<int64_t>(sizes.size());
  const GgufExperts experts(rng, G, c.D, c.H, c.first, c.down);
  const GroupedFfnShape shape{G, c.D, c.H, Activation::kSwiGLU};
  std::vector<int64_t> offsets{0};
  for (int64_t n : sizes) offsets.push_back(offsets.back() + n);
  const int64_t R = offsets.back();
  const std::vector<float> x = hymoe::test::random_values(rng, R * c.D), scale = hymoe::test::random_values(rng, R);
  const auto ffn = make_grouped_ffn(shape, experts.views, isa, with_quant(QuantCompute::kInt8));
  if (isa != Isa::kScalar) {
    EXPECT_NE(std::string(ffn->name()).find(weight_format_operands(gguf_int8_twin(c.first))), std::string::npos)
        << ffn->name();
  }
  const auto ref = make_grouped_ffn_ref(shape, experts.views, RoundingModel::kGgmlActivations);
  const auto exact = make_grouped_ffn_ref(shape, experts.views);
  std::vector<float> y(static_cast<size_t>(R * c.D)), want(y.size()), y_exact(y.size());
  GroupedFfnArgs args{offsets.data(), x.data(), scale.data(), want.data()};
  ref->run(args);
  args.y = y_exact.data();
  exact->run(args);
  args.y = y.data();
  ffn->run(args);
  const double tol = 1e-5 * max_abs(want);
  ASSERT_GT(tol, 0.0);
  double worst = 0, worst_exact = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(y[i]) - want[i]));
    worst_exact = std::max(worst_exact, std::abs(static_cast<double>(y_exact[i]) - want[i]));
  }
  EXPECT_LE(worst, tol) << ffn->name();
  EXPECT_GT(worst_exact, 10 * tol) << "the rounding model makes no difference";

  expect_same_bits_on_1_and_2_threads(*ffn, args, y.size());

  // Each token's row read by about three groups (its top-k experts): the driver then quantizes a token's row once
  // and copies its units into every micro-panel that takes it.
  hymoe::test::expect_x_rows_give_the_copied_bits(*ffn, offsets, scale, std::max<int64_t>(1, R / 3), rng);
}

TEST_P(GgufInt8KernelTest, GroupedFfnMatchesTheReference) {
  for (const Int8FfnCase& c : kInt8FfnCases) expect_int8_ffn_matches_ref(GetParam(), c);
}

// Groups of one row that gather the same token (a decode step's top-k experts) share that token's packed
// micro-panel: the same bits as each group running on its own copy of the row. Eight one-row groups over two
// tokens, one larger group among them; a units format, a compact one, the super-block form and a grid type.
TEST_P(GgufInt8KernelTest, OneRowGroupsOfOneTokenShareItsMicroPanel) {
  for (const auto& [first, down] : {std::pair{WeightFormat::kGgmlQ4_0, WeightFormat::kGgmlQ8_0},
                                    std::pair{WeightFormat::kGgmlQ4_K, WeightFormat::kGgmlQ6_K},
                                    std::pair{WeightFormat::kGgmlQ2_K, WeightFormat::kGgmlQ3_K},
                                    std::pair{WeightFormat::kGgmlIQ2_XXS, WeightFormat::kGgmlQ4_0}}) {
    SCOPED_TRACE(std::string(weight_format_operands(first)) + "+" + weight_format_operands(down));
    Rng rng(21);
    const std::vector<int64_t> sizes{1, 1, 0, 1, 4, 1, 1, 1, 1};
    const int64_t G = static_cast<int64_t>(sizes.size());
    const GgufExperts experts(rng, G, 256, 256, first, down);
    std::vector<int64_t> offsets{0};
    for (int64_t n : sizes) offsets.push_back(offsets.back() + n);
    const auto ffn = make_grouped_ffn({G, 256, 256, Activation::kSwiGLU}, experts.views, GetParam(),
                                      with_quant(QuantCompute::kInt8));
    const std::vector<float> scale = hymoe::test::random_values(rng, offsets.back());
    hymoe::test::expect_x_rows_give_the_copied_bits(*ffn, offsets, scale, 2, rng);
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, GgufInt8KernelTest,
                         ::testing::Values(Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Vnni, Isa::kAvx512Bf16),
                         hymoe::test::isa_param_name);

// The scalar ISA computes ggml's rounding with the reference.
TEST(GgufInt8GroupedFfn, ScalarIsaRunsTheRoundingReference) {
  expect_int8_ffn_matches_ref(Isa::kScalar, {WeightFormat::kGgmlQ4_K, WeightFormat::kGgmlQ6_K, 256, 256});
}

TEST(GgufInt8GroupedFfn, TheSettingPicksTheFormatsPerRole) {
  Rng rng(15);
  const GgufExperts experts(rng, 2, 256, 256, WeightFormat::kGgmlQ4_K, WeightFormat::kGgmlQ6_K);
  for (QuantCompute q : {QuantCompute::kAuto, QuantCompute::kInt8}) {
    EXPECT_EQ(choose_weight_format(experts.views, Isa::kAvx2, with_quant(q)), WeightFormat::kGgmlQ4_KI8);
    EXPECT_EQ(choose_down_format(experts.views, Isa::kAvx2, with_quant(q)), WeightFormat::kGgmlQ6_KI8);
  }
  EXPECT_EQ(choose_weight_format(experts.views, Isa::kAvx2, with_quant(QuantCompute::kExact)), WeightFormat::kGgmlQ4_K);
  if (hymoe::test::isa_supported(Isa::kAvx2)) {
    EXPECT_STREQ(make_grouped_ffn({2, 256, 256, Activation::kSwiGLU}, experts.views, Isa::kAvx2,
                                  with_quant(QuantCompute::kInt8))->name(),
                 "grouped_ffn_q4_kw_q8_k+q6_kw_q8_k_2x16__avx2");
  }
}

TEST(QuantComputeSetting, NamesParseAndBadOnesNameTheirSource) {
  EXPECT_EQ(quant_compute_from_name("auto", "--quant-compute"), QuantCompute::kAuto);
  EXPECT_EQ(quant_compute_from_name("exact", "--quant-compute"), QuantCompute::kExact);
  EXPECT_EQ(quant_compute_from_name("int8", "--quant-compute"), QuantCompute::kInt8);
  for (QuantCompute q : {QuantCompute::kAuto, QuantCompute::kExact, QuantCompute::kInt8})
    EXPECT_EQ(quant_compute_from_name(quant_compute_name(q), "x"), q);
  try {
    quant_compute_from_name("fast", "--quant-compute");
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("--quant-compute=fast is not one of auto, exact, int8"), std::string::npos)
        << e.what();
  }
  const char* old = std::getenv("HYMOE_QUANT_COMPUTE");
  const std::string saved = old ? old : "";
  setenv("HYMOE_QUANT_COMPUTE", "exact", 1);
  EXPECT_EQ(default_quant_compute(), QuantCompute::kExact);
  setenv("HYMOE_QUANT_COMPUTE", "int4", 1);
  try {
    default_quant_compute();
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("HYMOE_QUANT_COMPUTE=int4"), std::string::npos) << e.what();
  }
  if (old) setenv("HYMOE_QUANT_COMPUTE", saved.c_str(), 1);
  else unsetenv("HYMOE_QUANT_COMPUTE");
  // The setting is what layers built afterwards read; kAuto is int8.
  const QuantCompute before = quant_compute();
  set_quant_compute(QuantCompute::kExact);
  EXPECT_EQ(GroupedFfnOptions{}.quant, QuantCompute::kExact);
  set_quant_compute(before);
}

}  // namespace
}  // namespace hymoe::kernels
