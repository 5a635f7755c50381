// safetensors: round trips, every dtype's conversion, and one test per way a file can be malformed (each must
// be a hymoe::Error naming the file and the problem).
#include "hymoe/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "hymoe/error.h"
#include "test_util.h"

namespace hymoe {
namespace {

std::vector<std::byte> image(const std::string& header, size_t data_bytes, uint64_t declared_len = UINT64_MAX) {
  const uint64_t n = declared_len == UINT64_MAX ? header.size() : declared_len;
  std::vector<std::byte> out(8 + header.size() + data_bytes, std::byte{0});
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<std::byte>((n >> (8 * i)) & 0xff);
  std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

std::string error_of(const std::vector<std::byte>& bytes) {
  try {
    SafetensorsFile::from_bytes(bytes, "bad.safetensors");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, RoundTripThroughFile) {
  SafetensorsWriter w;
  Tensor a(Shape{2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  w.add("a", a);
  w.add("scalar", Tensor::scalar(-7.5f));
  w.add("empty", Tensor(Shape{0, 4}));
  w.set_metadata("format", "pt");
  const std::string dir = test::temp_dir("st");
  const std::string path = dir + "/t.safetensors";
  w.write(path);
  const auto f = SafetensorsFile::open(path);
  EXPECT_EQ(f.read_f32("a").values()[4], 5.0f);
  EXPECT_EQ(f.read_f32("a").shape(), (Shape{2, 3}));
  EXPECT_EQ(f.read_f32("scalar").shape(), Shape{});
  EXPECT_EQ(f.read_f32("scalar")[0], -7.5f);
  EXPECT_EQ(f.read_f32("empty").numel(), 0);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  // The data section starts 8-byte aligned.
  const auto bytes = w.serialize();
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_THROW(f.read_f32("a", Shape{3, 2}), Error);
  std::filesystem::remove_all(dir);
}

TEST(Safetensors, ConvertsEveryDtype) {
  SafetensorsWriter w;
  auto raw = [](auto... v) {
    std::vector<std::byte> out;
    (
        [&](auto x) {
          const auto* p = reinterpret_cast<const std::byte*>(&x);
          out.insert(out.end(), p, p + sizeof(x));
        }(v),
        ...);
    return out;
  };
  w.add_raw("f64", DType::kF64, {2}, raw(1.5, -2.25));
  w.add_raw("f16", DType::kF16, {2}, raw(uint16_t{0x3c00}, uint16_t{0xc000}));
  w.add_raw("bf16", DType::kBF16, {2}, raw(uint16_t{0x3f80}, uint16_t{0x4040}));
  w.add_raw("i8", DType::kI8, {2}, raw(int8_t{-3}, int8_t{4}));
  w.add_raw("i16", DType::kI16, {1}, raw(int16_t{-300}));
  w.add_raw("i32", DType::kI32, {1}, raw(int32_t{70000}));
  w.add_raw("i64", DType::kI64, {1}, raw(int64_t{-5}));
  w.add_raw("u8", DType::kU8, {1}, raw(uint8_t{250}));
  w.add_raw("u16", DType::kU16, {1}, raw(uint16_t{65000}));
  w.add_raw("u32", DType::kU32, {1}, raw(uint32_t{123456}));
  w.add_raw("u64", DType::kU64, {1}, raw(uint64_t{9}));
  w.add_raw("bool", DType::kBool, {2}, raw(uint8_t{0}, uint8_t{1}));
  const auto f = SafetensorsFile::from_bytes(w.serialize(), "mem");
  EXPECT_EQ(f.read_f32("f64")[1], -2.25f);
  EXPECT_EQ(f.read_f32("f16")[1], -2.0f);
  EXPECT_EQ(f.read_f32("bf16")[1], 3.0f);
  EXPECT_EQ(f.read_f32("i8")[0], -3.0f);
  EXPECT_EQ(f.read_f32("i16")[0], -300.0f);
  EXPECT_EQ(f.read_f32("i32")[0], 70000.0f);
  EXPECT_EQ(f.read_f32("i64")[0], -5.0f);
  EXPECT_EQ(f.read_f32("u8")[0], 250.0f);
  EXPECT_EQ(f.read_f32("u16")[0], 65000.0f);
  EXPECT_EQ(f.read_f32("u32")[0], 123456.0f);
  EXPECT_EQ(f.read_f32("u64")[0], 9.0f);
  EXPECT_EQ(f.read_f32("bool")[1], 1.0f);
  EXPECT_EQ(f.info("bf16").dtype, DType::kBF16);
}

TEST(Safetensors, AcceptsMetadataAndRejectsBadMetadata) {
  EXPECT_EQ(error_of(image(R"({"__metadata__":{"a":"b"}})", 0)), "");
  EXPECT_NE(error_of(image(R"({"__metadata__":{"a":1}})", 0)).find("__metadata__"), std::string::npos);
}

struct BadCase {
  const char* name;
  std::vector<std::byte> bytes;
  const char* expected_fragment;
};

TEST(Safetensors, RejectsMalformedFilesWithClearErrors) {
  const std::string ok = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::vector<BadCase> cases = {
      {"empty file", {}, "too short"},
      {"truncated length", std::vector<std::byte>(5), "too short"},
      {"header past end", image(ok, 8, 4096), "runs past the end"},
      {"absurd header length", image(ok, 8, 1ull << 40), "exceeds the limit"},
      {"invalid json", image("{\"x\": [", 0), "not valid JSON"},
      {"not an object", image("[1,2]", 0), "must be a JSON object"},
      {"unknown dtype", image(R"({"x":{"dtype":"F8","shape":[2],"data_offsets":[0,2]}})", 2), "unknown dtype 'F8'"},
      {"missing dtype", image(R"({"x":{"shape":[2],"data_offsets":[0,8]}})", 8), "'dtype'"},
      {"negative dim", image(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), "non-negative"},
      {"offsets outside data", image(ok, 4), "outside the data section"},
      {"begin after end", image(R"({"x":{"dtype":"U8","shape":[0],"data_offsets":[4,2]}})", 8), "begin after end"},
      {"size mismatch", image(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), "needs 12 bytes"},
      {"overflowing shape",
       image(R"({"x":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}})", 8), "impossible"},
      {"overlap",
       image(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
             6),
       "overlap"},
      {"bad offsets arity", image(R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", 1), "data_offsets"},
  };
  for (const auto& c : cases) {
    const std::string msg = error_of(c.bytes);
    EXPECT_NE(msg.find("bad.safetensors"), std::string::npos) << c.name << ": " << msg;
    EXPECT_NE(msg.find(c.expected_fragment), std::string::npos) << c.name << ": " << msg;
  }
}

TEST(Safetensors, RefusesDuplicateTensorNames) {
  // nlohmann would keep the second entry silently; the format has one entry per name.
  const std::string msg = error_of(image(
      R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"x":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", 2));
  EXPECT_NE(msg.find("bad.safetensors (header): duplicate key 'x'"), std::string::npos) << msg;
}

TEST(Safetensors, RefusesDeeplyNestedShapesWithANamedError) {
  // 100,000 nested arrays in a shape once crashed the message that printed the value.
  const std::string deep(100000, '[');
  const std::string header = R"({"x":{"dtype":"U8","shape":)" + deep + std::string(100000, ']') + R"(,"data_offsets":[0,1]}})";
  const std::string msg = error_of(image(header, 1));
  EXPECT_NE(msg.find("bad.safetensors (header): JSON nested deeper than 64"), std::string::npos) << msg.substr(0, 300);
  // Nesting within the limit reaches the shape check, whose message describes the value instead of printing it.
  const std::string msg2 = error_of(image(R"({"x":{"dtype":"U8","shape":[[[[1]]]],"data_offsets":[0,1]}})", 1));
  EXPECT_NE(msg2.find("shape entry must be a non-negative integer, got an array of 1 entries"), std::string::npos) << msg2;
}

TEST(Safetensors, EscapesControlCharactersInTensorNames) {
  const std::string msg = error_of(image("{\"evil\\u001b]0;owned\\u0007\":{\"dtype\":\"F8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1));
  EXPECT_NE(msg.find("tensor 'evil\\x1b]0;owned\\x07' has unknown dtype 'F8'"), std::string::npos) << msg;
  for (char c : msg) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20) << "raw control character in: " << msg;
}

TEST(Safetensors, MissingFileAndTensorAreNamed) {
  try {
    SafetensorsFile::open("/nonexistent/w.safetensors");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/w.safetensors"), std::string::npos);
  }
  const auto f = SafetensorsFile::from_bytes(image(R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1), "m");
  try {
    f.read_f32("y");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing tensor 'y'"), std::string::npos);
  }
}

TEST(Safetensors, FailedWriteLeavesNoFile) {
  SafetensorsWriter w;
  w.add("a", Tensor(Shape{1}));
  EXPECT_THROW(w.write("/nonexistent-dir/out.safetensors"), Error);
  EXPECT_FALSE(std::filesystem::exists("/nonexistent-dir/out.safetensors"));
}

}  // namespace
}  // namespace hymoe
