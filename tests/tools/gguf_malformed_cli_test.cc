// Every kind of malformed GGUF file (tests/data/conformance/gguf/README.md "Malformed files": broken GGUF, and
// well-formed files that cannot be a MoE block 1) through both `hymoe inspect` and `hymoe forward --model`: each
// must exit with status 1 (an error, not a crash), print a message that starts with the file's path and names the
// key or tensor at fault, and leave no output file. One file per kind is built from a valid two-block qwen3moe file
// (which both commands accept: the positive control) by changing one thing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "hymoe/gguf.h"
#include "hymoe/safetensors.h"
#include "io/gguf_test_builder.h"
#include "test_util.h"

namespace hymoe::test {
namespace {

using namespace gguf;

constexpr uint64_t D = 32, H = 32, E = 4;

// Block 1 MoE, F32 tensors, all zero (a valid layer: every expert ties, y = 0).
FileSpec valid_file() {
  FileSpec spec;
  spec.kvs = {kv_string("general.architecture", "qwen3moe"), kv_u32("qwen3moe.block_count", 2),
              kv_u32("qwen3moe.embedding_length", D), kv_u32("qwen3moe.expert_count", E),
              kv_u32("qwen3moe.expert_used_count", 2), kv_u32("qwen3moe.expert_feed_forward_length", H)};
  spec.tensors = {{"blk.1.ffn_gate_inp.weight", 0, {D, E}},
                  {"blk.1.ffn_gate_exps.weight", 0, {D, H, E}},
                  {"blk.1.ffn_up_exps.weight", 0, {D, H, E}},
                  {"blk.1.ffn_down_exps.weight", 0, {H, D, E}}};
  spec.data_fill = 0;
  return spec;
}

// A gpt-oss file: MXFP4 experts (all-zero blocks: scale 2^-128, codes 0), F32 router and biases.
FileSpec gpt_oss_file() {
  FileSpec spec;
  spec.kvs = {kv_string("general.architecture", "gpt-oss"), kv_u32("gpt-oss.block_count", 2),
              kv_u32("gpt-oss.embedding_length", D), kv_u32("gpt-oss.expert_count", E),
              kv_u32("gpt-oss.expert_used_count", 2), kv_u32("gpt-oss.expert_feed_forward_length", H)};
  const uint64_t mxfp4_bytes = D / 32 * 17 * H * E;
  spec.tensors = {{"blk.1.ffn_gate_inp.weight", 0, {D, E}},
                  {"blk.1.ffn_gate_inp.bias", 0, {E}},
                  {"blk.1.ffn_gate_exps.weight", 39, {D, H, E}, std::nullopt, mxfp4_bytes},
                  {"blk.1.ffn_gate_exps.bias", 0, {H, E}},
                  {"blk.1.ffn_up_exps.weight", 39, {D, H, E}, std::nullopt, mxfp4_bytes},
                  {"blk.1.ffn_up_exps.bias", 0, {H, E}},
                  {"blk.1.ffn_down_exps.weight", 39, {H, D, E}, std::nullopt, mxfp4_bytes},
                  {"blk.1.ffn_down_exps.bias", 0, {D, E}}};
  spec.data_fill = 0;
  return spec;
}

std::vector<std::byte> gpt_oss_with(const std::function<void(FileSpec&)>& change) {
  FileSpec spec = gpt_oss_file();
  change(spec);
  return build(spec);
}

struct Kind {
  std::string name;
  std::function<std::vector<std::byte>()> bytes;
  std::string message;  // what the error says after "<path>: " (a part of it)
  // The file's only fault is in MoE block 1: inspect lists the file, block 1 flagged with the message (status 0).
  bool inspect_flags_the_block = false;
};

std::vector<std::byte> with(const std::function<void(FileSpec&)>& change) {
  FileSpec spec = valid_file();
  change(spec);
  return build(spec);
}

std::vector<Kind> broken_files() {
  const std::string router = "blk.1.ffn_gate_inp.weight", gate = "blk.1.ffn_gate_exps.weight";
  return {
      {"empty", [] { return std::vector<std::byte>{}; }, "truncated"},
      {"bad_magic", [] { auto b = build(valid_file()); b[0] = std::byte{'g'}; return b; },
       "not a GGUF file: magic is 67 47 55 46"},
      {"version_0", [] { return with([](FileSpec& s) { s.version = 0; }); }, "not a valid version"},
      {"version_1", [] { return with([](FileSpec& s) { s.version = 1; }); }, "version 1 (32-bit counts) is not supported"},
      {"version_4", [] { return with([](FileSpec& s) { s.version = 4; }); }, "GGUF version 4 is newer"},
      {"big_endian", [] { return with([](FileSpec& s) { s.version = 0x03000000; }); }, "big-endian"},
      {"truncated_infos", [] { return with([](FileSpec& s) { s.truncate_to = 300; }); }, "truncated"},
      {"tensor_count_too_large", [] { return with([](FileSpec& s) { s.n_tensors = uint64_t{1} << 60; }); },
       "tensor count 1152921504606846976 cannot fit"},
      {"key_count_too_large", [] { return with([](FileSpec& s) { s.n_kv = ~uint64_t{0}; }); },
       "metadata key-value count 18446744073709551615 cannot fit"},
      // The extra key is read from the first tensor info's bytes; what is left of the infos is then misread.
      {"key_count_above_the_keys", [] { return with([](FileSpec& s) { s.n_kv = s.kvs.size() + 1; }); },
       "tensor info #0 name has length 1125899906842624, more than the limit of 63"},
      {"string_longer_than_file",
       [] { return with([](FileSpec& s) { s.kvs.push_back(kv_raw("s", 8, [](Writer& w) { w.put<uint64_t>(1000000); })); }); },
       "metadata key 's' string needs 1000000 bytes"},
      {"string_over_limit",
       [] { return with([](FileSpec& s) { s.kvs.push_back(kv_raw("s", 8, [](Writer& w) { w.put<uint64_t>(~uint64_t{0}); })); }); },
       "metadata key 's' string has length 18446744073709551615, more than the limit"},
      {"key_length_over_limit",
       [] { return with([](FileSpec& s) { s.kvs.push_back([](Writer& w) { w.put<uint64_t>(uint64_t{1} << 40); }); }); },
       "metadata key #6 has length 1099511627776"},
      {"empty_key", [] { return with([](FileSpec& s) { s.kvs.push_back(kv_u32("", 1)); }); }, "metadata key #6 is empty"},
      {"duplicate_key", [] { return with([](FileSpec& s) { s.kvs.push_back(kv_u32("qwen3moe.block_count", 2)); }); },
       "duplicate metadata key 'qwen3moe.block_count'"},
      {"unknown_value_type",
       [] { return with([](FileSpec& s) { s.kvs.push_back(kv_raw("k", 13, [](Writer& w) { w.put<uint32_t>(0); })); }); },
       "metadata key 'k' has unknown value type 13"},
      {"unknown_array_element_type",
       [] {
         return with([](FileSpec& s) {
           s.kvs.push_back(kv_raw("k", 9, [](Writer& w) { w.put<uint32_t>(77); w.put<uint64_t>(0); }));
         });
       },
       "metadata key 'k' is an array of unknown value type 77"},
      {"array_count_above_file",
       [] {
         return with([](FileSpec& s) {
           s.kvs.push_back(kv_raw("k", 9, [](Writer& w) { w.put<uint32_t>(10); w.put<uint64_t>(uint64_t{1} << 61); }));
         });
       },
       "metadata key 'k' declares 2305843009213693952 UINT64 elements"},
      {"string_array_count_above_file",
       [] {
         return with([](FileSpec& s) {
           s.kvs.push_back(kv_raw("tokens", 9, [](Writer& w) { w.put<uint32_t>(8); w.put<uint64_t>(uint64_t{1} << 40); }));
         });
       },
       "metadata key 'tokens' declares 1099511627776 STRING elements"},
      {"nested_array",
       [] {
         return with([](FileSpec& s) {
           s.kvs.push_back(kv_raw("nested", 9, [](Writer& w) {
             w.put<uint32_t>(9);
             w.put<uint64_t>(1);
             w.put<uint32_t>(0);
             w.put<uint64_t>(1);
             w.put<uint8_t>(1);
           }));
         });
       },
       "metadata key 'nested' is an array of arrays"},
      {"alignment_wrong_type",
       [] { return with([](FileSpec& s) { s.kvs.push_back(kv_raw("general.alignment", 10, [](Writer& w) { w.put<uint64_t>(32); })); }); },
       "metadata key 'general.alignment' has type UINT64, expected UINT32"},
      {"alignment_not_power_of_two", [] { return with([](FileSpec& s) { s.kvs.push_back(kv_u32("general.alignment", 48)); }); },
       "'general.alignment' is 48, expected a power of two"},
      {"alignment_zero", [] { return with([](FileSpec& s) { s.kvs.push_back(kv_u32("general.alignment", 0)); }); },
       "'general.alignment' is 0, expected a power of two"},
      {"tensor_name_too_long", [] { return with([](FileSpec& s) { s.tensors[0].name = std::string(64, 'x'); }); },
       "tensor info #0 name has length 64, more than the limit of 63"},
      {"duplicate_tensor_name", [=] { return with([=](FileSpec& s) { s.tensors[2].name = gate; }); },
       "duplicate tensor name '" + gate + "'"},
      {"too_many_dimensions", [] { return with([](FileSpec& s) { s.tensors[0].ne = {1, 1, 1, 1, 1}; }); },
       "tensor '" + router + "' has 5 dimensions"},
      {"negative_dimension", [] { return with([](FileSpec& s) { s.tensors[0].ne = {D, ~uint64_t{0}}; }); },
       "tensor '" + router + "' has a negative dimension ne[1] = -1"},
      {"element_count_overflows",
       [] { return with([](FileSpec& s) { s.tensors[0].ne = {uint64_t{1} << 32, uint64_t{1} << 32}; }); },
       "tensor '" + router + "' has shape ne = [4294967296, 4294967296] whose element count overflows"},
      {"byte_size_overflows",
       [=] { return with([=](FileSpec& s) { s.tensors[0] = {router, 28, {uint64_t{1} << 61}}; }); },
       "tensor '" + router + "' of type F64 and shape ne = [2305843009213693952] has a byte size that overflows"},
      {"unknown_type_id", [] { return with([](FileSpec& s) { s.tensors[1].type = 43; }); },
       "tensor '" + gate + "' has unknown or unsupported ggml type id 43"},
      {"removed_type_id", [] { return with([](FileSpec& s) { s.tensors[1].type = 4; }); },
       "tensor '" + gate + "' has unknown or unsupported ggml type id 4"},
      {"row_not_a_multiple_of_the_block",
       [=] { return with([=](FileSpec& s) { s.tensors[0] = {router, 8, {48, 2}, std::nullopt, 68}; }); },
       "tensor '" + router + "' of type Q8_0 has ne[0] = 48, not a multiple of the type's block of 32"},
      {"misaligned_offset", [] { return with([](FileSpec& s) { s.tensors[1].offset = 520; }); },
       "tensor '" + gate + "' has data offset 520, not a multiple of the alignment 32"},
      {"overlapping_tensors", [] { return with([](FileSpec& s) { s.tensors[1].offset = 0; }); },
       "tensor '" + gate + "' at data offset 0 overlaps tensor '" + router + "'"},
      {"gap_between_tensors", [] { return with([](FileSpec& s) { s.tensors[1].offset = 544; }); },
       "tensor '" + gate + "' has data offset 544, expected 512"},
      {"offset_wraps_around", [] { return with([](FileSpec& s) { s.tensors[0].offset = ~uint64_t{31}; }); },
       "tensor '" + router + "' has data offset 18446744073709551584, expected 0"},
      {"data_past_the_end",
       [] {
         auto b = build(valid_file());
         b.resize(b.size() - 100);
         return b;
       },
       "truncated: tensor 'blk.1.ffn_down_exps.weight' data"},
  };
}

std::vector<Kind> not_a_moe_block() {
  return {
      {"missing_tensor", [] { return with([](FileSpec& s) { s.tensors.pop_back(); }); },
       "missing tensor 'blk.1.ffn_down_exps.weight' of MoE block 1"},
      {"shape_mismatch", [] { return with([](FileSpec& s) { s.tensors[2].ne = {D, H + 32, E}; }); },
       "tensor 'blk.1.ffn_up_exps.weight' has ne = [32, 64, 4], expected [32, 32, 4]"},
      {"used_count_above_expert_count", [] { return with([](FileSpec& s) { s.kvs[4] = kv_u32("qwen3moe.expert_used_count", 5); }); },
       "metadata key 'qwen3moe.expert_used_count' is 5, expected 1 .. expert_count = 4"},
      {"key_of_wrong_type",
       [] { return with([](FileSpec& s) { s.kvs[3] = kv_raw("qwen3moe.expert_count", 5, [](Writer& w) { w.put<int32_t>(4); }); }); },
       "metadata key 'qwen3moe.expert_count' has type INT32, expected UINT32"},
      {"no_architecture", [] { return with([](FileSpec& s) { s.kvs.erase(s.kvs.begin()); }); },
       "missing metadata key 'general.architecture'"},
      {"unknown_architecture", [] { return with([](FileSpec& s) { s.kvs[0] = kv_string("general.architecture", "gpt2"); }); },
       "architecture 'gpt2' is not one hymoe runs"},
      {"unsupported_type",
       [] { return with([](FileSpec& s) { s.tensors[1] = {"blk.1.ffn_gate_exps.weight", 9, {D, H, E}, std::nullopt, 36 * H * E}; }); },
       "tensor 'blk.1.ffn_gate_exps.weight' has type Q8_1, which hymoe does not decode"},
      {"gpt_oss_missing_expert_bias", [] { return gpt_oss_with([](FileSpec& s) { s.tensors.pop_back(); }); },
       "missing tensor 'blk.1.ffn_down_exps.bias' of MoE block 1"},
      {"gpt_oss_expert_bias_of_wrong_shape", [] { return gpt_oss_with([](FileSpec& s) { s.tensors[5].ne = {H, 1}; }); },
       "tensor 'blk.1.ffn_up_exps.bias' has ne = [32, 1], expected [32, 4]"},
      {"gpt_oss_missing_router_bias", [] { return gpt_oss_with([](FileSpec& s) { s.tensors.erase(s.tensors.begin() + 1); }); },
       "missing tensor 'blk.1.ffn_gate_inp.bias' of MoE block 1"},
      {"gpt_oss_without_expert_feed_forward_length", [] { return gpt_oss_with([](FileSpec& s) { s.kvs.pop_back(); }); },
       "missing metadata key 'gpt-oss.expert_feed_forward_length'"},
      // An expert count no tensor agrees with is a shape error, before anything is sized by it.
      {"huge_expert_count", [] { return with([](FileSpec& s) { s.kvs[3] = kv_u32("qwen3moe.expert_count", 0xffffffffu); }); },
       "tensor 'blk.1.ffn_gate_inp.weight' has ne = [32, 4], expected [32, 4294967295]"},
  };
}

class GgufMalformedCli : public ::testing::Test {
 protected:
  GgufMalformedCli() : dir_("gguf_malformed_cli") {
    SafetensorsWriter w;
    w.add("x", Tensor(Shape{2, static_cast<int64_t>(D)}));
    w.write(dir_.path("in.safetensors"));
  }

  void write(const std::string& path, const std::vector<std::byte>& bytes) {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                static_cast<std::streamsize>(bytes.size()));
  }

  std::string forward_command(const std::string& model, int layer = 1) const {
    return tool_path() + " forward --model " + model + " --layer " + std::to_string(layer) + " --input " +
           dir_.path("in.safetensors") + " --output " + dir_.path("out.safetensors");
  }

  // Both commands fail with status 1 and a message "<path>: ... <message> ...", and no output is written.
  void expect_rejected(const Kind& k) {
    SCOPED_TRACE(k.name);
    const std::string path = dir_.path(k.name + ".gguf");
    write(path, k.bytes());
    for (const std::string& command : {tool_path() + " inspect " + path, forward_command(path)}) {
      std::string log;
      if (k.inspect_flags_the_block && command.find(" inspect ") != std::string::npos) {
        EXPECT_EQ(run_command(command, &log), 0) << command << "\n" << log;
        EXPECT_NE(log.find("  block   1  MoE    cannot run: " + k.message), std::string::npos)
            << "expected block 1 flagged with '" << k.message << "' in\n" << log;
        EXPECT_NE(log.find("hymoe cannot run block(s) 1 (listed above)"), std::string::npos) << log;
        EXPECT_NE(log.find("tensors:"), std::string::npos) << log;  // the whole listing
        continue;
      }
      EXPECT_EQ(run_command(command, &log), 1) << command << "\n" << log;
      EXPECT_NE(log.find(path + ": "), std::string::npos) << log;
      EXPECT_NE(log.find(k.message), std::string::npos) << "expected '" << k.message << "' in\n" << log;
      EXPECT_FALSE(std::filesystem::exists(dir_.path("out.safetensors")));
    }
  }

  TempDir dir_;
};

TEST_F(GgufMalformedCli, TheValidFileIsAccepted) {
  for (const auto& [name, bytes] : {std::pair{"valid.gguf", build(valid_file())}, {"gpt_oss.gguf", build(gpt_oss_file())}}) {
    const std::string path = dir_.path(name);
    write(path, bytes);
    std::string log;
    EXPECT_EQ(run_command(tool_path() + " inspect " + path, &log), 0) << log;
    EXPECT_EQ(run_command(forward_command(path), &log), 0) << log;
    EXPECT_TRUE(std::filesystem::exists(dir_.path("out.safetensors")));
    std::filesystem::remove(dir_.path("out.safetensors"));
  }
}

// An MXFP4 block with E8M0 scale 255 (NaN in OCP MX): the file is well-formed (inspect lists it), the layer is not
// built from it.
TEST_F(GgufMalformedCli, Mxfp4NanScaleIsANamedError) {
  std::vector<std::byte> bytes = build(gpt_oss_file());
  {
    const GgufFile f = GgufFile::from_bytes(bytes, "m.gguf");
    const GgufTensorInfo& up = f.tensor("blk.1.ffn_up_exps.weight");
    bytes[f.data_offset() + up.offset + (H + 3) * (D / 32) * 17] = std::byte{255};  // expert 1, its row 3, block 0
  }
  const std::string path = dir_.path("nan_scale.gguf");
  write(path, bytes);
  std::string log;
  EXPECT_EQ(run_command(tool_path() + " inspect " + path, &log), 0) << log;
  EXPECT_EQ(run_command(forward_command(path), &log), 1) << log;
  EXPECT_NE(log.find(path + ": tensor 'blk.1.ffn_up_exps.weight' has E8M0 scale 255 (NaN) in row 35, block 0"),
            std::string::npos)
      << log;
  EXPECT_FALSE(std::filesystem::exists(dir_.path("out.safetensors")));
}

// block_count is read from the file: inspect lists the blocks no tensor names as one line, however many.
TEST_F(GgufMalformedCli, HugeBlockCountIsListedInOneLine) {
  const std::string path = dir_.path("blocks.gguf");
  write(path, with([](FileSpec& s) { s.kvs[1] = kv_u32("qwen3moe.block_count", 0xffffffffu); }));
  std::string log;
  EXPECT_EQ(run_command(tool_path() + " inspect " + path, &log), 0) << log;
  EXPECT_NE(log.find("  blocks 2-4294967294  no tensors\n"), std::string::npos) << log;
  EXPECT_LT(log.size(), 10000u);
}

TEST_F(GgufMalformedCli, BrokenFilesAreNamedErrors) {
  const auto kinds = broken_files();
  EXPECT_GE(kinds.size(), 34u);
  for (const auto& k : kinds) expect_rejected(k);
}

// Two MoE blocks, block 2's gate in a type hymoe does not decode: inspect lists block 1 and flags block 2, and
// forward runs block 1 and refuses block 2 (a Q4_K_M file whose fallback type hymoe lacks, block by block).
TEST_F(GgufMalformedCli, OneBlockHymoeCannotRunLeavesTheOthers) {
  const std::string path = dir_.path("two_blocks.gguf");
  write(path, with([](FileSpec& s) {
    s.kvs[1] = kv_u32("qwen3moe.block_count", 3);
    s.tensors.push_back({"blk.2.ffn_gate_inp.weight", 0, {D, E}});
    s.tensors.push_back({"blk.2.ffn_gate_exps.weight", 9, {D, H, E}, std::nullopt, 36 * H * E});  // Q8_1
    s.tensors.push_back({"blk.2.ffn_up_exps.weight", 0, {D, H, E}});
    s.tensors.push_back({"blk.2.ffn_down_exps.weight", 0, {H, D, E}});
  }));
  std::string log;
  EXPECT_EQ(run_command(tool_path() + " inspect " + path, &log), 0) << log;
  EXPECT_NE(log.find("  block   1  MoE    experts 4 (gate F32, up F32, down F32)"), std::string::npos) << log;
  EXPECT_NE(log.find("  block   2  MoE    cannot run: tensor 'blk.2.ffn_gate_exps.weight' has type Q8_1, which hymoe "
                     "does not decode"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("MoE blocks: 2, "), std::string::npos) << log;
  EXPECT_NE(log.find("hymoe cannot run block(s) 2 (listed above)"), std::string::npos) << log;
  EXPECT_EQ(run_command(forward_command(path), &log), 0) << log;
  EXPECT_TRUE(std::filesystem::exists(dir_.path("out.safetensors")));
  std::filesystem::remove(dir_.path("out.safetensors"));
  EXPECT_EQ(run_command(forward_command(path, 2), &log), 1) << log;
  EXPECT_NE(log.find("has type Q8_1, which hymoe does not decode"), std::string::npos) << log;
  EXPECT_FALSE(std::filesystem::exists(dir_.path("out.safetensors")));
}

// A fault in the metadata refuses the file in both commands; a fault in MoE block 1 alone (a tensor missing, of
// the wrong shape or of a type hymoe does not decode) makes forward refuse the block and inspect flag it.
TEST_F(GgufMalformedCli, FilesThatAreNoMoeBlockAreNamedErrors) {
  auto kinds = not_a_moe_block();
  EXPECT_GE(kinds.size(), 7u);
  int flagged = 0;
  for (auto& k : kinds) {
    k.inspect_flags_the_block = k.message.find("tensor '") != std::string::npos;
    flagged += k.inspect_flags_the_block;
    expect_rejected(k);
  }
  EXPECT_EQ(flagged, 7);
}

}  // namespace
}  // namespace hymoe::test
