// GGUF reader: every value type, tensor infos and alignment on hand-built files, the conformance cases' files
// against their meta.json, and one test per way a file can be malformed (each must be a hymoe::Error naming the
// file and the key or tensor at fault).
#include "hymoe/gguf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "hymoe/error.h"
#include "hymoe/file_io.h"
#include "io/gguf_test_builder.h"
#include "test_util.h"

namespace hymoe {
namespace {

using namespace test::gguf;

// The error message of reading `bytes`, or "" when it reads.
std::string error_of(const std::vector<std::byte>& bytes, GgufReadOptions options = {}) {
  try {
    GgufFile::from_bytes(bytes, "bad.gguf", options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The message names the file and contains `part`.
::testing::AssertionResult rejects(const std::vector<std::byte>& bytes, const std::string& part) {
  const std::string message = error_of(bytes);
  if (message.empty()) return ::testing::AssertionFailure() << "file was accepted";
  if (message.rfind("bad.gguf: ", 0) != 0 || message.find(part) == std::string::npos)
    return ::testing::AssertionFailure() << "message '" << message << "' lacks the file name or '" << part << "'";
  return ::testing::AssertionSuccess();
}

FileSpec one_tensor_file() {
  FileSpec spec;
  spec.kvs = {kv_string("general.architecture", "test")};
  spec.tensors = {{"a", 0, {4, 2}}, {"b", 0, {3}}};
  return spec;
}

TEST(Gguf, ReadsTensorInfosAndData) {
  const auto f = GgufFile::from_bytes(build(one_tensor_file()), "t.gguf");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  ASSERT_EQ(f.tensors().size(), 2u);
  const GgufTensorInfo& a = f.tensor("a");
  EXPECT_EQ(a.shape(), (Shape{2, 4}));  // ne reversed
  EXPECT_EQ(a.n_dims, 2u);
  EXPECT_EQ(a.nbytes, 32u);
  EXPECT_EQ(a.row_bytes, 16u);
  EXPECT_EQ(a.rows(), 2u);
  EXPECT_EQ(f.tensor("b").offset, 32u);  // 32 bytes of a, padded to 32
  EXPECT_EQ(f.data_offset() % 32, 0u);
  // The spans view the image at data_offset + offset.
  const auto b = f.bytes("b");
  ASSERT_EQ(b.size(), 12u);
  EXPECT_EQ(static_cast<int>(b[0]), 31);
  EXPECT_EQ(static_cast<int>(b[5]), 36);
  EXPECT_EQ(f.find_tensor("c"), nullptr);
  try {
    f.tensor("c");
    FAIL() << "missing tensor accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("t.gguf: missing tensor 'c'"), std::string::npos) << e.what();
  }
}

TEST(Gguf, ReadsEveryValueType) {
  FileSpec spec;
  auto scalar = [](std::string key, uint32_t type, auto v) {
    return kv_raw(key, type, [v](Writer& w) { w.put(v); });
  };
  spec.kvs = {
      scalar("u8", 0, uint8_t{200}),
      scalar("i8", 1, int8_t{-100}),
      scalar("u16", 2, uint16_t{60000}),
      scalar("i16", 3, int16_t{-30000}),
      scalar("u32", 4, uint32_t{4000000000u}),
      scalar("i32", 5, int32_t{-2000000000}),
      scalar("f32", 6, 1.5f),
      scalar("bool", 7, uint8_t{2}),  // any non-zero byte is true, as in ggml
      kv_string("string", "\xc3\xa9t\xc3\xa9"),
      kv_string("empty", ""),
      scalar("u64", 10, uint64_t{0x8000000000000001ull}),
      scalar("i64", 11, int64_t{-5}),
      scalar("f64", 12, -0.25),
      kv_raw("ints", 9,
             [](Writer& w) {
               w.put<uint32_t>(5);
               w.put<uint64_t>(3);
               for (int32_t v : {7, -8, 9}) w.put(v);
             }),
      kv_raw("strings", 9,
             [](Writer& w) {
               w.put<uint32_t>(8);
               w.put<uint64_t>(2);
               w.str("<s>");
               w.str("");
             }),
      kv_raw("no_floats", 9,
             [](Writer& w) {
               w.put<uint32_t>(6);
               w.put<uint64_t>(0);
             }),
  };
  spec.tensors = {{"t", 0, {1}}};
  const auto f = GgufFile::from_bytes(build(spec), "kv.gguf");
  ASSERT_EQ(f.metadata().size(), spec.kvs.size());
  EXPECT_EQ(f.metadata()[0].first, "u8");  // file order
  EXPECT_EQ(f.find("u8")->as_uint(), 200u);
  EXPECT_EQ(f.find("i8")->as_int(), -100);
  EXPECT_EQ(f.find("u16")->as_uint(), 60000u);
  EXPECT_EQ(f.find("i16")->as_int(), -30000);
  EXPECT_EQ(f.get_u32("u32"), 4000000000u);
  EXPECT_EQ(f.find("i32")->as_int(), -2000000000);
  EXPECT_EQ(f.get_f32("f32"), 1.5f);
  EXPECT_EQ(f.get_bool("bool"), true);
  EXPECT_EQ(f.get_string("string"), "\xc3\xa9t\xc3\xa9");
  EXPECT_EQ(f.get_string("empty"), "");
  EXPECT_EQ(f.find("u64")->as_uint(), 0x8000000000000001ull);
  EXPECT_EQ(f.find("i64")->as_int(), -5);
  EXPECT_EQ(f.find("f64")->as_float(), -0.25);
  const GgufValue* ints = f.find("ints");
  ASSERT_EQ(ints->type(), GgufValueType::kArray);
  EXPECT_EQ(ints->element_type(), GgufValueType::kInt32);
  ASSERT_EQ(ints->size(), 3u);
  EXPECT_EQ(ints->element(1).as_int(), -8);
  EXPECT_EQ(ints->to_display(2), "[7, -8, ... (3 elements)]");
  EXPECT_EQ(f.find("strings")->element(0).as_string(), "<s>");
  EXPECT_EQ(f.find("strings")->to_display(), "[\"<s>\", \"\"]");
  EXPECT_EQ(f.find("no_floats")->size(), 0u);
  EXPECT_EQ(f.find("f32")->to_display(), "1.5");
  EXPECT_EQ(f.find("absent"), nullptr);
  EXPECT_EQ(f.get_u32("absent"), std::nullopt);
  // Typed lookups require the exact type, as llama.cpp does.
  try {
    f.get_u32("i32");
    FAIL() << "INT32 read as UINT32";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kv.gguf: metadata key 'i32' has type INT32, expected UINT32"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(f.require_u32("absent"), Error);
}

KeyValue nested_array_key() {
  return kv_raw("nested", 9, [](Writer& w) {
    w.put<uint32_t>(9);  // array of arrays
    w.put<uint64_t>(2);
    for (uint64_t n : {2, 1}) {
      w.put<uint32_t>(0);
      w.put<uint64_t>(n);
      for (uint64_t i = 0; i < n; ++i) w.put<uint8_t>(static_cast<uint8_t>(10 + i));
    }
  });
}

TEST(Gguf, NestedArraysReadWhenAllowed) {
  FileSpec spec;
  spec.kvs = {nested_array_key()};
  const auto f = GgufFile::from_bytes(build(spec), "nested.gguf", {.allow_nested_arrays = true});
  const GgufValue* v = f.find("nested");
  ASSERT_EQ(v->size(), 2u);
  EXPECT_EQ(v->element(0).size(), 2u);
  EXPECT_EQ(v->element(0).element(1).as_uint(), 11u);
  EXPECT_EQ(v->to_display(), "[[10, 11], [10]]");
}

TEST(GgufMalformed, NestedArrayRejectedByDefault) {
  FileSpec spec;
  spec.kvs = {nested_array_key()};
  EXPECT_TRUE(rejects(build(spec), "metadata key 'nested' is an array of arrays"));
}

TEST(GgufMalformed, NestedArraysTooDeep) {
  FileSpec spec;
  spec.kvs = {kv_raw("deep", 9, [](Writer& w) {
    for (int i = 0; i < 6; ++i) {
      w.put<uint32_t>(9);
      w.put<uint64_t>(1);
    }
  })};
  EXPECT_NE(error_of(build(spec), {.allow_nested_arrays = true}).find("nests arrays deeper than"), std::string::npos);
}

// llama.cpp's per-block keys (get_key_or_arr): a FLOAT32 for every block, or an ARRAY of FLOAT32 with one entry per
// block; another element type or count is an error naming the key.
TEST(Gguf, PerBlockFloatKeys) {
  auto floats = [](std::string key, uint32_t element_type, std::vector<float> values) {
    return kv_raw(key, 9, [element_type, values](Writer& w) {
      w.put<uint32_t>(element_type);
      w.put<uint64_t>(values.size());
      for (float v : values) element_type == 6 ? w.put(v) : w.put(static_cast<uint32_t>(v));
    });
  };
  FileSpec spec;
  spec.kvs = {kv_raw("one", 6, [](Writer& w) { w.put(7.0f); }), floats("each", 6, {0.0f, 2.5f, 3.0f}),
              floats("short", 6, {1.0f}), floats("ints", 4, {1, 2, 3})};
  spec.tensors = {{"t", 0, {1}}};
  const auto f = GgufFile::from_bytes(build(spec), "kv.gguf");
  EXPECT_EQ(f.get_f32_of_block("one", 2, 3), 7.0f);
  EXPECT_EQ(f.get_f32_of_block("each", 0, 3), 0.0f);
  EXPECT_EQ(f.get_f32_of_block("each", 1, 3), 2.5f);
  EXPECT_EQ(f.get_f32_of_block("absent", 1, 3), std::nullopt);
  auto error = [&](const char* key) {
    try {
      f.get_f32_of_block(key, 1, 3);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error("short").find("kv.gguf: metadata key 'short' has 1 entries, expected one per block (3)"),
            std::string::npos) << error("short");
  EXPECT_NE(error("ints").find("kv.gguf: metadata key 'ints' has type ARRAY of UINT32, expected FLOAT32 or an ARRAY"),
            std::string::npos) << error("ints");
}

TEST(Gguf, AlignmentFromMetadata) {
  FileSpec spec = one_tensor_file();
  spec.alignment = 64;
  spec.kvs.push_back(kv_u32("general.alignment", 64));
  const auto f = GgufFile::from_bytes(build(spec), "a.gguf");
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_EQ(f.tensor("b").offset, 64u);
}

TEST(Gguf, QuantizedTensorSizes) {
  FileSpec spec;
  spec.tensors = {{"q", 12, {512, 3, 2}, std::nullopt, 144 * 2 * 6}};  // Q4_K: 144 bytes per 256 values
  const auto f = GgufFile::from_bytes(build(spec), "q.gguf");
  const auto& q = f.tensor("q");
  EXPECT_EQ(q.row_bytes, 288u);
  EXPECT_EQ(q.nbytes, 288u * 6);
  EXPECT_EQ(q.shape(), (Shape{2, 3, 512}));
  EXPECT_EQ(q.ggml_type(), GgmlType::kQ4_K);
}

TEST(Gguf, OpensAFileByPathAndMapsIt) {
  const std::string dir = test::temp_dir("gguf");
  const std::string path = dir + "/m.gguf";
  write_file_atomically(path, build(one_tensor_file()));
  const auto f = GgufFile::open(path);
  EXPECT_EQ(f.label(), path);
  EXPECT_EQ(f.tensor("a").nbytes, 32u);
  EXPECT_THROW(GgufFile::open(dir + "/absent.gguf"), Error);
  std::filesystem::remove_all(dir);
}

// --- the conformance cases, against their meta.json ---

TEST(Gguf, ConformanceFilesMatchTheirMeta) {
  const std::string root = test::data_dir() + "/conformance/gguf/";
  for (const std::string c : {"qwen3moe_q8_0", "qwen3moe_q4_k", "qwen2moe_q8_0"}) {
    SCOPED_TRACE(c);
    const auto meta = nlohmann::json::parse(read_text_file(root + c + "/meta.json"));
    const auto f = GgufFile::open(root + c + "/model.gguf");
    EXPECT_EQ(f.version(), meta["gguf_file_version"].get<uint32_t>());
    EXPECT_EQ(f.alignment(), meta["alignment"].get<uint64_t>());
    EXPECT_EQ(f.data_offset(), meta["data_section_offset"].get<uint64_t>());
    EXPECT_EQ(f.file_bytes(), meta["file_bytes"].get<uint64_t>());
    ASSERT_EQ(f.tensors().size(), meta["tensors"].size());
    for (const auto& t : meta["tensors"]) {
      const GgufTensorInfo& info = f.tensor(t["name"].get<std::string>());
      EXPECT_EQ(info.type, t["ggml_type_id"].get<uint32_t>());
      EXPECT_EQ(info.nbytes, t["nbytes"].get<uint64_t>());
      EXPECT_EQ(info.offset, t["offset_in_data"].get<uint64_t>());
      EXPECT_EQ(f.data_offset() + info.offset, t["file_offset"].get<uint64_t>());
      EXPECT_EQ(info.shape(), t["numpy_shape"].get<Shape>());
    }
    ASSERT_EQ(f.metadata().size(), meta["metadata"].size());
    for (const auto& [key, m] : meta["metadata"].items()) {
      const GgufValue* v = f.find(key);
      ASSERT_NE(v, nullptr) << key;
      EXPECT_EQ(gguf_value_type_name(static_cast<uint32_t>(v->type())), m["type"].get<std::string>()) << key;
      const auto& value = m["value"];
      switch (v->type()) {
        case GgufValueType::kUint32: EXPECT_EQ(v->as_uint(), value.get<uint64_t>()) << key; break;
        case GgufValueType::kFloat32: EXPECT_EQ(v->as_float(), value.get<double>()) << key; break;
        case GgufValueType::kString: EXPECT_EQ(v->as_string(), value.get<std::string>()) << key; break;
        case GgufValueType::kBool: EXPECT_EQ(v->as_bool(), value.get<bool>()) << key; break;
        case GgufValueType::kArray:
          ASSERT_EQ(v->size(), value.size()) << key;
          for (size_t i = 0; i < value.size(); ++i) {
            const GgufValue e = v->element(i);
            if (e.type() == GgufValueType::kString) EXPECT_EQ(e.as_string(), value[i].get<std::string>()) << key;
            if (e.type() == GgufValueType::kInt32) EXPECT_EQ(e.as_int(), value[i].get<int64_t>()) << key;
          }
          break;
        default: ADD_FAILURE() << key << " has a type the cases do not use";
      }
    }
  }
}

// --- malformed files: one test per kind ---

TEST(GgufMalformed, EmptyFile) { EXPECT_TRUE(rejects({}, "truncated")); }

TEST(GgufMalformed, BadMagic) {
  auto bytes = build(one_tensor_file());
  bytes[0] = std::byte{'g'};
  EXPECT_TRUE(rejects(bytes, "not a GGUF file: magic is 67 47 55 46"));
}

TEST(GgufMalformed, Version0) {
  FileSpec spec = one_tensor_file();
  spec.version = 0;
  EXPECT_TRUE(rejects(build(spec), "not a valid version"));
}

TEST(GgufMalformed, Version1) {
  FileSpec spec = one_tensor_file();
  spec.version = 1;
  EXPECT_TRUE(rejects(build(spec), "version 1 (32-bit counts) is not supported"));
}

TEST(GgufMalformed, VersionTooNew) {
  FileSpec spec = one_tensor_file();
  spec.version = 4;
  EXPECT_TRUE(rejects(build(spec), "GGUF version 4 is newer"));
}

TEST(GgufMalformed, BigEndianVersion) {
  FileSpec spec = one_tensor_file();
  spec.version = 0x03000000;
  EXPECT_TRUE(rejects(build(spec), "big-endian"));
}

TEST(GgufMalformed, Version2IsRead) {
  FileSpec spec = one_tensor_file();
  spec.version = 2;
  EXPECT_EQ(error_of(build(spec)), "");
}

TEST(GgufMalformed, TruncatedAnywhere) {
  // Every prefix of a valid file that ends before the last tensor's data does is an error (never a crash or an
  // out-of-bounds read); the padding after the last tensor is optional, as in ggml.
  const auto bytes = build(one_tensor_file());
  const auto full = GgufFile::from_bytes(bytes, "full.gguf");
  const size_t data_end = full.data_offset() + full.tensor("b").offset + full.tensor("b").nbytes;
  ASSERT_LT(data_end, bytes.size());
  EXPECT_EQ(error_of(std::vector<std::byte>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(data_end))), "");
  for (size_t n = 0; n < data_end; ++n) {
    const std::vector<std::byte> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    const std::string message = error_of(prefix);
    EXPECT_NE(message.find("bad.gguf: "), std::string::npos) << "prefix of " << n << " bytes: '" << message << "'";
  }
}

TEST(GgufMalformed, TensorCountTooLarge) {
  FileSpec spec = one_tensor_file();
  spec.n_tensors = uint64_t{1} << 60;
  EXPECT_TRUE(rejects(build(spec), "tensor count 1152921504606846976 cannot fit"));
}

TEST(GgufMalformed, KeyCountTooLarge) {
  FileSpec spec = one_tensor_file();
  spec.n_kv = ~uint64_t{0};
  EXPECT_TRUE(rejects(build(spec), "metadata key-value count 18446744073709551615 cannot fit"));
}

TEST(GgufMalformed, KeyCountLargerThanTheKeys) {
  FileSpec spec = one_tensor_file();
  spec.n_kv = 3;  // the third key is read from the tensor infos' bytes
  EXPECT_TRUE(rejects(build(spec), "metadata key #2"));
}

TEST(GgufMalformed, StringLongerThanTheFile) {
  FileSpec spec = one_tensor_file();
  spec.kvs = {kv_raw("s", 8, [](Writer& w) { w.put<uint64_t>(1000000); })};
  EXPECT_TRUE(rejects(build(spec), "metadata key 's' string needs 1000000 bytes"));
}

TEST(GgufMalformed, StringOverTheLimit) {
  FileSpec spec = one_tensor_file();
  spec.kvs = {kv_raw("s", 8, [](Writer& w) { w.put<uint64_t>(~uint64_t{0}); })};
  EXPECT_TRUE(rejects(build(spec), "metadata key 's' string has length 18446744073709551615, more than the limit"));
}

TEST(GgufMalformed, KeyLengthOverTheLimit) {
  FileSpec spec = one_tensor_file();
  spec.kvs = {[](Writer& w) { w.put<uint64_t>(uint64_t{1} << 40); }};
  EXPECT_TRUE(rejects(build(spec), "metadata key #0 has length 1099511627776"));
}

TEST(GgufMalformed, EmptyKey) {
  FileSpec spec = one_tensor_file();
  spec.kvs = {kv_u32("", 1)};
  EXPECT_TRUE(rejects(build(spec), "metadata key #0 is empty"));
}

TEST(GgufMalformed, DuplicateKey) {
  FileSpec spec = one_tensor_file();
  spec.kvs = {kv_u32("k", 1), kv_u32("k", 2)};
  EXPECT_TRUE(rejects(build(spec), "duplicate metadata key 'k'"));
}

TEST(GgufMalformed, UnknownValueType) {
  FileSpec spec = one_tensor_file();
  spec.kvs = {kv_raw("k", 13, [](Writer& w) { w.put<uint32_t>(0); })};
  EXPECT_TRUE(rejects(build(spec), "metadata key 'k' has unknown value type 13"));
}

TEST(GgufMalformed, UnknownArrayElementType) {
  FileSpec spec = one_tensor_file();
  spec.kvs = {kv_raw("k", 9, [](Writer& w) {
    w.put<uint32_t>(77);
    w.put<uint64_t>(0);
  })};
  EXPECT_TRUE(rejects(build(spec), "metadata key 'k' is an array of unknown value type 77"));
}

TEST(GgufMalformed, ArrayCountLargerThanTheFile) {
  FileSpec spec = one_tensor_file();
  spec.kvs = {kv_raw("k", 9, [](Writer& w) {
    w.put<uint32_t>(10);  // UINT64 elements
    w.put<uint64_t>(uint64_t{1} << 61);  // 2^64 bytes: the product would wrap
  })};
  EXPECT_TRUE(rejects(build(spec), "metadata key 'k' declares 2305843009213693952 UINT64 elements"));
}

TEST(GgufMalformed, StringArrayCountLargerThanTheFile) {
  FileSpec spec = one_tensor_file();
  spec.kvs = {kv_raw("tokens", 9, [](Writer& w) {
    w.put<uint32_t>(8);
    w.put<uint64_t>(uint64_t{1} << 40);
  })};
  EXPECT_TRUE(rejects(build(spec), "metadata key 'tokens' declares 1099511627776 STRING elements"));
}

TEST(GgufMalformed, AlignmentOfWrongType) {
  FileSpec spec = one_tensor_file();
  spec.kvs.push_back(kv_raw("general.alignment", 10, [](Writer& w) { w.put<uint64_t>(32); }));
  EXPECT_TRUE(rejects(build(spec), "metadata key 'general.alignment' has type UINT64, expected UINT32"));
}

TEST(GgufMalformed, AlignmentNotAPowerOfTwo) {
  FileSpec spec = one_tensor_file();
  spec.kvs.push_back(kv_u32("general.alignment", 48));
  EXPECT_TRUE(rejects(build(spec), "'general.alignment' is 48, expected a power of two"));
}

TEST(GgufMalformed, AlignmentZero) {
  FileSpec spec = one_tensor_file();
  spec.kvs.push_back(kv_u32("general.alignment", 0));
  EXPECT_TRUE(rejects(build(spec), "'general.alignment' is 0, expected a power of two"));
}

TEST(GgufMalformed, TensorNameTooLong) {
  FileSpec spec = one_tensor_file();
  spec.tensors[0].name = std::string(64, 'x');
  EXPECT_TRUE(rejects(build(spec), "tensor info #0 name has length 64, more than the limit of 63"));
}

TEST(GgufMalformed, DuplicateTensorName) {
  FileSpec spec = one_tensor_file();
  spec.tensors[1].name = "a";
  EXPECT_TRUE(rejects(build(spec), "duplicate tensor name 'a'"));
}

TEST(GgufMalformed, TooManyDimensions) {
  FileSpec spec = one_tensor_file();
  spec.tensors[0].ne = {1, 1, 1, 1, 1};
  EXPECT_TRUE(rejects(build(spec), "tensor 'a' has 5 dimensions"));
}

TEST(GgufMalformed, NegativeDimension) {
  FileSpec spec = one_tensor_file();
  spec.tensors[0].ne = {4, ~uint64_t{0}};
  EXPECT_TRUE(rejects(build(spec), "tensor 'a' has a negative dimension ne[1] = -1"));
}

TEST(GgufMalformed, ElementCountOverflows) {
  FileSpec spec = one_tensor_file();
  spec.tensors[0].ne = {uint64_t{1} << 32, uint64_t{1} << 32};
  EXPECT_TRUE(rejects(build(spec), "tensor 'a' has shape ne = [4294967296, 4294967296] whose element count overflows"));
}

TEST(GgufMalformed, RowCountOverflowsWithAnEmptyRow) {
  FileSpec spec = one_tensor_file();
  spec.tensors[0].ne = {0, uint64_t{1} << 62, 4};
  EXPECT_TRUE(rejects(build(spec), "tensor 'a' has shape ne = [0, 4611686018427387904, 4]"));
}

TEST(GgufMalformed, ByteSizeOverflows) {
  FileSpec spec = one_tensor_file();
  spec.tensors[0] = {"a", 28, {uint64_t{1} << 61}};  // F64: 2^64 bytes
  EXPECT_TRUE(rejects(build(spec), "tensor 'a' of type F64 and shape ne = [2305843009213693952] has a byte size that overflows"));
}

TEST(GgufMalformed, UnknownTypeId) {
  FileSpec spec = one_tensor_file();
  spec.tensors[0].type = 43;
  EXPECT_TRUE(rejects(build(spec), "tensor 'a' has unknown or unsupported ggml type id 43"));
}

TEST(GgufMalformed, RemovedTypeId) {
  FileSpec spec = one_tensor_file();
  spec.tensors[0].type = 4;  // Q4_2, removed from ggml
  EXPECT_TRUE(rejects(build(spec), "tensor 'a' has unknown or unsupported ggml type id 4"));
}

TEST(GgufMalformed, RowNotAMultipleOfTheBlock) {
  FileSpec spec;
  spec.tensors = {{"q", 8, {48, 2}, std::nullopt, 68}};  // Q8_0 blocks hold 32 values
  EXPECT_TRUE(rejects(build(spec), "tensor 'q' of type Q8_0 has ne[0] = 48, not a multiple of the type's block of 32"));
}

TEST(GgufMalformed, MisalignedOffset) {
  FileSpec spec = one_tensor_file();
  spec.tensors[1].offset = 40;
  EXPECT_TRUE(rejects(build(spec), "tensor 'b' has data offset 40, not a multiple of the alignment 32"));
}

TEST(GgufMalformed, OverlappingTensors) {
  FileSpec spec = one_tensor_file();
  spec.tensors[1].offset = 0;
  EXPECT_TRUE(rejects(build(spec), "tensor 'b' at data offset 0 overlaps tensor 'a'"));
}

TEST(GgufMalformed, GapBetweenTensors) {
  FileSpec spec = one_tensor_file();
  spec.tensors[1].offset = 64;
  EXPECT_TRUE(rejects(build(spec), "tensor 'b' has data offset 64, expected 32"));
}

TEST(GgufMalformed, OffsetWrapsAround) {
  FileSpec spec;
  spec.tensors = {{"w", 0, {uint64_t{1} << 60}, ~uint64_t{31}}};
  EXPECT_TRUE(rejects(build(spec), "tensor 'w' has data offset 18446744073709551584, expected 0"));
  // F64 with 2^61 - 1 elements: 2^64 - 8 bytes fit uint64, but the data section's start plus that wraps.
  spec.tensors = {{"w", 28, {(uint64_t{1} << 61) - 1}, 0, 8}};
  EXPECT_TRUE(rejects(build(spec), "tensor 'w' data at offset 0 of 18446744073709551608 bytes wraps around 64 bits"));
}

TEST(GgufMalformed, DataPastTheEnd) {
  FileSpec spec = one_tensor_file();
  spec.tensors[1].nbytes = 4;  // declares 12 bytes, the file holds 4 (then the padding)
  auto bytes = build(spec);
  bytes.resize(bytes.size() - 32 + 4);
  EXPECT_TRUE(rejects(bytes, "truncated: tensor 'b' data"));
}

}  // namespace
}  // namespace hymoe
