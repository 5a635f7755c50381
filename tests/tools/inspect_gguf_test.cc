// `hymoe inspect model.gguf` on the conformance cases: the model summary names the architecture, the dense and
// MoE blocks, experts, top-k, routing and bytes as the files' meta.json says; a malformed file is an error
// naming the file, not a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace hymoe::test {
namespace {

std::string inspect(const std::string& path, int* status) {
  std::string log;
  *status = run_command(tool_path() + " inspect " + path, &log);
  return log;
}

TEST(InspectGguf, Qwen3MoeQ4K) {
  int status = 0;
  const std::string log = inspect(data_dir() + "/conformance/gguf/qwen3moe_q4_k/model.gguf", &status);
  ASSERT_EQ(status, 0) << log;
  EXPECT_NE(log.find("GGUF v3, 11 tensors"), std::string::npos) << log;
  EXPECT_NE(log.find("architecture qwen3moe: 2 blocks, embedding 256, 8 experts, top-4, expert hidden 512 "
                     "(from qwen3moe.expert_feed_forward_length)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("routing: softmax gating, weights normalized: yes, weights scale: none, expert groups: none"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("block   0  dense  ffn hidden 256 (Q4_K), 110592 bytes"), std::string::npos) << log;
  // 3 * 589824 bytes of experts over 8 experts; plus the 8192-byte F32 router.
  EXPECT_NE(log.find("block   1  MoE    experts 8 (gate Q4_K, up Q4_K, down Q4_K), 221184 bytes per expert; router "
                     "F32; 1777664 bytes"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("blk.1.ffn_down_exps.weight  Q4_K     [512, 256, 8]"), std::string::npos) << log;
}

TEST(InspectGguf, Qwen2MoeSharedExpert) {
  int status = 0;
  const std::string log = inspect(data_dir() + "/conformance/gguf/qwen2moe_q8_0/model.gguf", &status);
  ASSERT_EQ(status, 0) << log;
  EXPECT_NE(log.find("expert hidden 128 (from qwen2moe.expert_feed_forward_length), shared expert hidden 384 "
                     "(sigmoid-gated)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("weights normalized: no"), std::string::npos) << log;
  EXPECT_NE(log.find("; shared Q8_0;"), std::string::npos) << log;
  EXPECT_NE(log.find("tokenizer.ggml.tokens"), std::string::npos) << log;
}

TEST(InspectGguf, GptOssMxfp4) {
  int status = 0;
  const std::string log = inspect(data_dir() + "/conformance/gguf-extra/gpt_oss_mxfp4/model.gguf", &status);
  ASSERT_EQ(status, 0) << log;
  EXPECT_NE(log.find("architecture gpt-oss: 2 blocks, embedding 64, 8 experts, top-4, expert hidden 64 "
                     "(from gpt-oss.expert_feed_forward_length)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("routing: top-k logits softmax (SOFTMAX_WEIGHT) gating, weights normalized: no, weights scale: "
                     "none, expert groups: none"),
            std::string::npos)
      << log;
  // 3 * 64 * 64 weights of 17/32 bytes per expert; the block adds the router (2048), its bias (32) and the expert
  // biases (8 * (64 + 64 + 64) * 4 = 6144).
  EXPECT_NE(log.find("block   1  MoE    experts 8 (gate MXFP4, up MXFP4, down MXFP4), 6528 bytes per expert; router "
                     "F32; router and expert biases; 60448 bytes"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("blk.1.ffn_down_exps.weight  MXFP4    [64, 64, 8]"), std::string::npos) << log;
}

TEST(InspectGguf, MalformedFileIsAnError) {
  const std::string dir = temp_dir("inspect_gguf");
  const std::string path = dir + "/bad.gguf";
  std::ofstream(path, std::ios::binary) << "GGUF\x03";  // truncated after the magic
  int status = 0;
  const std::string log = inspect(path, &status);
  EXPECT_EQ(status, 1) << log;
  EXPECT_NE(log.find(path + ": truncated"), std::string::npos) << log;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hymoe::test
