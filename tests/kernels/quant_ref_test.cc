// GGUF block decoders: hand-built blocks against hand-computed values (every packed field at a position where a
// wrong bit order shows), random blocks against llama.cpp's gguf-py decoder (tests/data/gguf, written by
// make_quant_checks.py), and every tensor of the conformance cases against gguf-py's values by hash.
#include "hymoe/quant_formats.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "hymoe/dtype.h"
#include "hymoe/file_io.h"
#include "hymoe/gguf.h"
#include "kernels/formats/iq_blocks.h"
#include "test_util.h"

namespace hymoe {
namespace {

template <typename Block>
std::vector<float> decode(const Block& b, void (*fn)(const std::byte*, float*), int values) {
  std::vector<float> out(static_cast<size_t>(values));
  fn(reinterpret_cast<const std::byte*>(&b), out.data());
  return out;
}

TEST(QuantRef, Q8_0HandBuilt) {
  BlockQ8_0 b{};
  b.d = float_to_f16(0.5f);
  const int8_t qs[5] = {-128, -1, 0, 1, 127};
  std::memcpy(b.qs, qs, 5);
  b.qs[31] = 9;
  const auto x = decode(b, dequantize_block_q8_0_ref, 32);
  EXPECT_EQ(x[0], -64.0f);
  EXPECT_EQ(x[1], -0.5f);
  EXPECT_EQ(x[2], 0.0f);
  EXPECT_EQ(x[3], 0.5f);
  EXPECT_EQ(x[4], 63.5f);
  EXPECT_EQ(x[31], 4.5f);
}

TEST(QuantRef, Q4_0HandBuilt) {
  BlockQ4_0 b{};
  b.d = float_to_f16(-2.0f);  // negative scales are legal (ggml stores max / -8)
  for (uint8_t& q : b.qs) q = 0x88;  // codes 8: zero
  b.qs[0] = 0x0F;   // value 0: code 15, value 16: code 0
  b.qs[15] = 0x3A;  // value 15: code 10, value 31: code 3
  const auto x = decode(b, dequantize_block_q4_0_ref, 32);
  EXPECT_EQ(x[0], -14.0f);
  EXPECT_EQ(x[16], 16.0f);
  EXPECT_EQ(x[15], -4.0f);
  EXPECT_EQ(x[31], 10.0f);
  EXPECT_EQ(x[1], 0.0f);
}

// Scales for Q4_K/Q5_K: sub-block 0 gets scale 3, min 2; sub-block 5 gets scale 37 and min 26, whose top two bits
// live in bytes 1 and 5.
template <typename Block>
void set_k_scales(Block& b) {
  b.d = float_to_f16(1.0f);
  b.dmin = float_to_f16(0.5f);
  b.scales[0] = 3;
  b.scales[4] = 2;
  b.scales[9] = 0xA5;      // sub-block 5: scale low nibble 5, min low nibble 10
  b.scales[1] = 2u << 6;   // scale 37 >> 4 = 2 (sub-block 1 keeps scale 0)
  b.scales[5] = 1u << 6;   // min 26 >> 4 = 1 (sub-block 1 keeps min 0)
}

TEST(QuantRef, Q4_KHandBuilt) {
  BlockQ4_K b{};
  set_k_scales(b);
  b.qs[0] = 0x07;             // value 0 (sub-block 0): code 7
  b.qs[64 + 3] = 0xB0;        // value 2*64 + 32 + 3 = 163 (sub-block 5): code 11
  const auto x = decode(b, dequantize_block_q4_k_ref, 256);
  EXPECT_EQ(x[0], 1.0f * 3 * 7 - 0.5f * 2);      // 20
  EXPECT_EQ(x[163], 1.0f * 37 * 11 - 0.5f * 26);  // 394
  EXPECT_EQ(x[1], -1.0f);                          // code 0 in sub-block 0: -dmin * m
  EXPECT_EQ(x[32], 0.0f);                          // sub-block 1: scale 0, min 0
  EXPECT_EQ(x[160], -13.0f);                       // sub-block 5, code 0
}

TEST(QuantRef, Q5_KHandBuilt) {
  BlockQ5_K b{};
  set_k_scales(b);
  b.qs[0] = 0x07;
  b.qs[64 + 3] = 0xB0;
  b.qh[3] = 1u << 5;  // fifth bit of value 32*5 + 3 = 163
  b.qh[0] = 1u << 1;  // fifth bit of value 32 (sub-block 1, scale 0)
  const auto x = decode(b, dequantize_block_q5_k_ref, 256);
  EXPECT_EQ(x[0], 20.0f);
  EXPECT_EQ(x[163], 1.0f * 37 * 27 - 0.5f * 26);  // 986
  EXPECT_EQ(x[32], 0.0f);
  EXPECT_EQ(x[3], -1.0f);  // qh[3] bit 0 is clear: value 3 keeps code 0
}

TEST(QuantRef, Q6_KHandBuilt) {
  BlockQ6_K b{};
  b.d = float_to_f16(0.25f);
  b.scales[0] = 1;
  b.scales[2] = 2;
  b.scales[12] = -3;
  b.ql[72] = 0xA0;       // value 128 + 64 + 8 = 200: low nibble 10 (high nibble of ql[64 + 8])
  b.qh[40] = 2u << 4;    // its high bits (bits 4-5 of qh[32 + 8]): 2 -> code 42
  b.ql[33] = 0x05;       // value 33: low nibble 5 (low nibble of ql[32 + 1])
  b.qh[1] = 3u << 2;     // its high bits (bits 2-3 of qh[1]): 3 -> code 53
  const auto x = decode(b, dequantize_block_q6_k_ref, 256);
  EXPECT_EQ(x[0], 0.25f * 1 * -32);      // code 0 -> -32
  EXPECT_EQ(x[200], 0.25f * -3 * 10);    // -7.5
  EXPECT_EQ(x[33], 0.25f * 2 * 21);      // 10.5
  EXPECT_EQ(x[1], -8.0f);                // qh[1] bits 0-1 are clear
}

// MXFP4 (ggml type 39): value j in byte j's low nibble, j + 16 in its high one (not the checkpoints' 2t, 2t + 1),
// kvalue (twice E2M1) times 2^(e - 128); code 8 is +0 as ggml decodes it; e = 255 is NaN.
TEST(QuantRef, Mxfp4HandBuilt) {
  BlockMxfp4 b{};
  b.e = 130;           // half scale 2^2
  b.qs[0] = 0xF1;      // value 0: code 1 (kvalue 1), value 16: code 15 (kvalue -12)
  b.qs[15] = 0x87;     // value 15: code 7 (kvalue 12), value 31: code 8 (kvalue 0, +0)
  b.qs[1] = 0x5A;      // value 1: code 10 (kvalue -2), value 17: code 5 (kvalue 6)
  auto x = decode(b, dequantize_block_mxfp4_ref, 32);
  EXPECT_EQ(x[0], 4.0f);
  EXPECT_EQ(x[16], -48.0f);
  EXPECT_EQ(x[15], 48.0f);
  EXPECT_EQ(std::bit_cast<uint32_t>(x[31]), 0u);
  EXPECT_EQ(x[1], -8.0f);
  EXPECT_EQ(x[17], 24.0f);
  // The same codes in the checkpoints' pair order: pair t holds values 2t (low) and 2t + 1 (high).
  uint8_t pairs[16];
  EXPECT_EQ(mxfp4_block_code_pairs(reinterpret_cast<const std::byte*>(&b), pairs), 130);
  EXPECT_EQ(pairs[0], 0xA1);  // values 0, 1: codes 1, 10
  EXPECT_EQ(pairs[7], 0x70);  // values 14, 15: codes 0, 7
  EXPECT_EQ(pairs[8], 0x5F);  // values 16, 17: codes 15, 5
  EXPECT_EQ(pairs[15], 0x80); // values 30, 31: codes 0, 8
  b.e = 0;  // 2^-128, subnormal: exact
  x = decode(b, dequantize_block_mxfp4_ref, 32);
  EXPECT_EQ(x[0], std::ldexp(1.0f, -128));
  EXPECT_EQ(x[16], -12 * std::ldexp(1.0f, -128));
  b.e = 255;
  x = decode(b, dequantize_block_mxfp4_ref, 32);
  EXPECT_TRUE(std::isnan(x[0]));
  EXPECT_TRUE(can_dequantize(static_cast<uint32_t>(GgmlType::kMXFP4)));
}

TEST(QuantRef, RowDecoderWalksBlocksAndPlainTypes) {
  BlockQ8_0 blocks[2]{};
  blocks[0].d = float_to_f16(1.0f);
  blocks[1].d = float_to_f16(2.0f);
  blocks[1].qs[0] = 3;
  std::vector<float> out(64);
  dequantize_row_ref(static_cast<uint32_t>(GgmlType::kQ8_0), reinterpret_cast<const std::byte*>(blocks), out.data(), 64);
  EXPECT_EQ(out[32], 6.0f);
  const uint16_t half[2] = {0x3C00, 0xC000}, brain[2] = {0x3F80, 0x4040};
  dequantize_row_ref(static_cast<uint32_t>(GgmlType::kF16), reinterpret_cast<const std::byte*>(half), out.data(), 2);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  dequantize_row_ref(static_cast<uint32_t>(GgmlType::kBF16), reinterpret_cast<const std::byte*>(brain), out.data(), 2);
  EXPECT_EQ(out[1], 3.0f);
  EXPECT_TRUE(can_dequantize(static_cast<uint32_t>(GgmlType::kQ6_K)));
  EXPECT_TRUE(can_dequantize(static_cast<uint32_t>(GgmlType::kQ4_1)));
  EXPECT_FALSE(can_dequantize(static_cast<uint32_t>(GgmlType::kQ8_1)));
  EXPECT_TRUE(can_dequantize(static_cast<uint32_t>(GgmlType::kQ2_K)));
  EXPECT_TRUE(can_dequantize(static_cast<uint32_t>(GgmlType::kIQ2_XXS)));
  EXPECT_TRUE(can_dequantize(static_cast<uint32_t>(GgmlType::kIQ1_M)));
  EXPECT_FALSE(can_dequantize(40));  // NVFP4
  EXPECT_FALSE(can_dequantize(999));
}

std::vector<float> dequantize_tensor(const GgufFile& f, const GgufTensorInfo& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  dequantize_row_ref(t.type, f.bytes(t).data(), out.data(), static_cast<int64_t>(t.numel()));
  return out;
}

TEST(QuantRef, RandomBlocksMatchGgufPyBitForBit) {
  const auto f = GgufFile::open(test::data_dir() + "/gguf/quant_blocks.gguf");
  int checked = 0;
  for (const char* type :
       {"F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "MXFP4", "Q2_K",
        "Q3_K", "TQ1_0", "TQ2_0", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M"}) {
    SCOPED_TRACE(type);
    const GgufTensorInfo& blocks = f.tensor(std::string(type) + ".blocks");
    const GgufTensorInfo& expected = f.tensor(std::string(type) + ".expected");
    EXPECT_EQ(ggml_type_name(blocks.type), type);
    ASSERT_EQ(expected.type, static_cast<uint32_t>(GgmlType::kF32));
    ASSERT_EQ(blocks.numel(), expected.numel());
    const auto got = dequantize_tensor(f, blocks);
    const auto want = f.bytes(expected);
    for (size_t i = 0; i < got.size(); ++i) {
      uint32_t w;
      std::memcpy(&w, want.data() + 4 * i, 4);
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), w) << "value " << i << ": got " << got[i] << ", gguf-py "
                                                    << std::bit_cast<float>(w);
    }
    checked += static_cast<int>(got.size());
  }
  EXPECT_EQ(checked, 256 + 256 + 6 * 24 * 32 + 8 * 6 * 256 + 24 * 32 + 7 * 8 * 256);  // every value the script wrote
}

uint64_t fnv1a64(const std::vector<float>& values) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* p = reinterpret_cast<const unsigned char*>(values.data());
  for (size_t i = 0; i < values.size() * sizeof(float); ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// Every entry of every IQ grid, as expanded from iq_grids.inc, is gguf-py's (the random blocks above reach only
// some of the 256-2048 entries of each).
TEST(QuantRef, IqGridsAreGgufPysEntryForEntry) {
  const auto f = GgufFile::open(test::data_dir() + "/gguf/quant_blocks.gguf");
  auto hash = [](const auto& grid) {
    uint64_t h = 0xcbf29ce484222325ull;
    const auto* p = reinterpret_cast<const unsigned char*>(&grid);
    for (size_t i = 0; i < sizeof grid; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    return std::string(hex);
  };
  using namespace kernels;
  const std::pair<const char*, std::string> grids[] = {
      {"IQ2_XXS", hash(kIq2XxsGrid)}, {"IQ2_XS", hash(kIq2XsGrid)}, {"IQ2_S", hash(kIq2SGrid)},
      {"IQ3_XXS", hash(kIq3XxsGrid)}, {"IQ3_S", hash(kIq3SGrid)},   {"IQ1_S", hash(kIq1SGrid)}};
  for (const auto& [type, got] : grids) {
    const auto want = f.get_string(std::string("grid.") + type + ".fnv1a64");
    ASSERT_TRUE(want.has_value()) << type;
    EXPECT_EQ(got, *want) << type;
  }
  // The eighth sign of a 7-bit field makes the count of minus signs even.
  for (uint32_t field = 0; field < 128; ++field) EXPECT_EQ(__builtin_popcount(iq_signs7(field)) % 2, 0) << field;
}

TEST(QuantRef, ConformanceTensorsMatchGgufPy) {
  const std::string root = test::data_dir() + "/conformance/gguf/";
  const auto hashes = nlohmann::json::parse(read_text_file(root + "dequant_fnv1a64.json"));
  ASSERT_EQ(hashes.size(), 3u);
  for (const auto& [c, tensors] : hashes.items()) {
    const auto f = GgufFile::open(root + c + "/model.gguf");
    ASSERT_EQ(tensors.size(), f.tensors().size()) << c;
    for (const auto& [name, want] : tensors.items()) {
      SCOPED_TRACE(c + " " + name);
      const GgufTensorInfo& t = f.tensor(name);
      EXPECT_EQ(ggml_type_name(t.type), want["type"].get<std::string>());
      const auto got = dequantize_tensor(f, t);
      ASSERT_EQ(got.size(), want["numel"].get<size_t>());
      for (size_t i = 0; i < want["first"].size(); ++i) EXPECT_EQ(got[i], want["first"][i].get<float>());
      char hex[17];
      std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a64(got)));
      EXPECT_EQ(std::string(hex), want["fnv1a64"].get<std::string>());
    }
  }
}

}  // namespace
}  // namespace hymoe
