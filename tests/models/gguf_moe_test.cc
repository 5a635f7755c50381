// GGUF MoE config and block lookup: what llama.cpp reads per architecture (exact key types, fallbacks, fixed
// routing) on hand-built files and the conformance cases, and one test per way a well-formed file can fail to
// be a MoE block (each an error naming the file and the key or tensor).
#include "hymoe/gguf_moe.h"

#include <gtest/gtest.h>

#include "hymoe/error.h"
#include "io/gguf_test_builder.h"
#include "test_util.h"

namespace hymoe {
namespace {

using namespace test::gguf;

constexpr uint64_t D = 32, H = 32, E = 4;

KeyValue kv_f32(std::string key, float v) {
  return kv_raw(key, 6, [v](Writer& w) { w.put(v); });
}
KeyValue kv_bool(std::string key, bool v) {
  return kv_raw(key, 7, [v](Writer& w) { w.put<uint8_t>(v ? 1 : 0); });
}

// A two-block model whose block 1 is MoE (F32 tensors), in architecture `arch`.
FileSpec moe_file(const std::string& arch) {
  FileSpec spec;
  spec.kvs = {kv_string("general.architecture", arch), kv_u32(arch + ".block_count", 2),
              kv_u32(arch + ".embedding_length", D), kv_u32(arch + ".expert_count", E),
              kv_u32(arch + ".expert_used_count", 2), kv_u32(arch + ".expert_feed_forward_length", H),
              kv_u32(arch + ".feed_forward_length", H)};
  spec.tensors = {{"blk.1.ffn_gate_inp.weight", 0, {D, E}},
                  {"blk.1.ffn_gate_exps.weight", 0, {D, H, E}},
                  {"blk.1.ffn_up_exps.weight", 0, {D, H, E}},
                  {"blk.1.ffn_down_exps.weight", 0, {H, D, E}}};
  return spec;
}

// moe_file with its experts split one tensor per expert and projection (blk.1.ffn_gate.E.weight, ...), as early
// Mixtral files store them.
FileSpec split_moe_file(const std::string& arch) {
  FileSpec spec = moe_file(arch);
  spec.tensors.resize(1);
  for (const char* p : {"gate", "up", "down"})
    for (uint64_t e = 0; e < E; ++e)
      spec.tensors.push_back({"blk.1.ffn_" + std::string(p) + "." + std::to_string(e) + ".weight", 0, {D, H}});
  return spec;
}

std::string error_of(const FileSpec& spec, uint32_t block = 1) {
  try {
    const auto f = GgufFile::from_bytes(build(spec), "m.gguf");
    find_gguf_moe_block(f, read_gguf_moe_config(f), block);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GgufMoe, Qwen3MoeConfigAndBlock) {
  const auto f = GgufFile::from_bytes(build(moe_file("qwen3moe")), "m.gguf");
  const GgufMoeConfig c = read_gguf_moe_config(f);
  EXPECT_EQ(c.expert_count, E);
  EXPECT_EQ(c.expert_used_count, 2u);
  EXPECT_EQ(c.expert_hidden, H);
  EXPECT_EQ(c.expert_hidden_from, "qwen3moe.expert_feed_forward_length");
  EXPECT_EQ(c.gating, GgufGating::kSoftmax);
  EXPECT_TRUE(c.norm_weights);
  EXPECT_EQ(c.shared_hidden, 0u);
  EXPECT_TRUE(gguf_block_is_moe(f, 1));
  EXPECT_FALSE(gguf_block_is_moe(f, 0));
  const GgufMoeBlock b = find_gguf_moe_block(f, c, 1);
  EXPECT_EQ(b.down_exps->name, "blk.1.ffn_down_exps.weight");
  EXPECT_EQ(b.expert_bytes(E), 3 * D * H * 4);
  EXPECT_EQ(b.total_bytes(), 3 * D * H * E * 4 + D * E * 4);
  EXPECT_EQ(b.gate_shexp, nullptr);
}

TEST(GgufMoe, ArchitectureFixesOrReadsTheRouting) {
  // olmoe: feed_forward_length is the expert hidden size, weights not normalized whatever the metadata says.
  FileSpec olmoe = moe_file("olmoe");
  olmoe.kvs.push_back(kv_bool("olmoe.expert_weights_norm", true));
  const auto fo = GgufFile::from_bytes(build(olmoe), "o.gguf");
  const GgufMoeConfig o = read_gguf_moe_config(fo);
  EXPECT_FALSE(o.norm_weights);
  EXPECT_EQ(o.expert_hidden_from, "olmoe.feed_forward_length");
  // qwen3moe without expert_feed_forward_length: feed_forward_length / expert_used_count.
  FileSpec q3 = moe_file("qwen3moe");
  q3.kvs.erase(q3.kvs.begin() + 5);
  q3.kvs.back() = kv_u32("qwen3moe.feed_forward_length", 2 * H);
  EXPECT_EQ(read_gguf_moe_config(GgufFile::from_bytes(build(q3), "q.gguf")).expert_hidden, H);
  // deepseek2 reads gating, normalization, scale, groups and the shared expert from metadata.
  FileSpec ds = moe_file("deepseek2");
  ds.kvs.insert(ds.kvs.end(), {kv_u32("deepseek2.expert_gating_func", 2), kv_bool("deepseek2.expert_weights_norm", true),
                               kv_f32("deepseek2.expert_weights_scale", 2.5f), kv_u32("deepseek2.expert_group_count", 2),
                               kv_u32("deepseek2.expert_group_used_count", 1), kv_u32("deepseek2.expert_shared_count", 2),
                               kv_u32("deepseek2.leading_dense_block_count", 1)});
  ds.tensors.push_back({"blk.1.exp_probs_b.bias", 0, {E}});
  ds.tensors.push_back({"blk.1.ffn_gate_shexp.weight", 0, {D, 2 * H}});
  ds.tensors.push_back({"blk.1.ffn_up_shexp.weight", 0, {D, 2 * H}});
  ds.tensors.push_back({"blk.1.ffn_down_shexp.weight", 0, {2 * H, D}});
  const auto fd = GgufFile::from_bytes(build(ds), "d.gguf");
  const GgufMoeConfig d = read_gguf_moe_config(fd);
  EXPECT_EQ(d.gating, GgufGating::kSigmoid);
  EXPECT_TRUE(d.norm_weights);
  EXPECT_EQ(d.weights_scale, 2.5f);
  EXPECT_EQ(d.group_count, 2u);
  EXPECT_EQ(d.group_used_count, 1u);
  EXPECT_EQ(d.shared_hidden, 2 * H);
  EXPECT_FALSE(d.shared_gate);
  const GgufMoeBlock b = find_gguf_moe_block(fd, d, 1);
  ASSERT_NE(b.exp_probs_b, nullptr);
  ASSERT_NE(b.down_shexp, nullptr);
  EXPECT_NE(error_of(ds, 0).find("m.gguf: block 0 is dense (deepseek2.leading_dense_block_count = 1)"), std::string::npos)
      << error_of(ds, 0);
}

// gpt-oss: SOFTMAX_WEIGHT gating and biases fixed by the architecture, the hidden size from
// expert_feed_forward_length only (llama.cpp requires it), the router and expert biases found and shape-checked.
TEST(GgufMoe, GptOssConfigAndBlock) {
  FileSpec spec = moe_file("gpt-oss");
  spec.tensors.push_back({"blk.1.ffn_gate_inp.bias", 0, {E}});
  spec.tensors.push_back({"blk.1.ffn_gate_exps.bias", 0, {H, E}});
  spec.tensors.push_back({"blk.1.ffn_up_exps.bias", 0, {H, E}});
  spec.tensors.push_back({"blk.1.ffn_down_exps.bias", 0, {D, E}});
  const auto f = GgufFile::from_bytes(build(spec), "g.gguf");
  const GgufMoeConfig c = read_gguf_moe_config(f);
  EXPECT_EQ(c.gating, GgufGating::kSoftmaxWeight);
  EXPECT_TRUE(c.biases);
  EXPECT_FALSE(c.norm_weights);
  EXPECT_EQ(c.expert_hidden_from, "gpt-oss.expert_feed_forward_length");
  const GgufMoeBlock b = find_gguf_moe_block(f, c, 1);
  ASSERT_NE(b.router_bias, nullptr);
  EXPECT_EQ(b.down_exps_bias->name, "blk.1.ffn_down_exps.bias");
  EXPECT_EQ(b.total_bytes(), 3 * D * H * E * 4 + D * E * 4 + (E + 2 * H * E + D * E) * 4);
  FileSpec no_hidden = spec;
  no_hidden.kvs.erase(no_hidden.kvs.begin() + 5);  // expert_feed_forward_length; feed_forward_length stays
  EXPECT_NE(error_of(no_hidden).find("m.gguf: missing metadata key 'gpt-oss.expert_feed_forward_length'"),
            std::string::npos)
      << error_of(no_hidden);
  // Each bias is required.
  for (size_t i = 4; i < spec.tensors.size(); ++i) {
    FileSpec missing = spec;
    missing.tensors.erase(missing.tensors.begin() + static_cast<std::ptrdiff_t>(i));
    EXPECT_NE(error_of(missing).find("missing tensor '" + spec.tensors[i].name + "' of MoE block 1"), std::string::npos)
        << error_of(missing);
  }
}

// deepseek2's expert_gating_func 3 is SOFTMAX_WEIGHT too, 4 sqrt-softplus (build_moe_ffn runs it for any
// architecture); 5 is no gating function llama.cpp has.
TEST(GgufMoe, DeepSeek2GatingFunc3And4) {
  FileSpec ds = moe_file("deepseek2");
  ds.kvs.insert(ds.kvs.end(), {kv_u32("deepseek2.expert_shared_count", 0), kv_u32("deepseek2.expert_gating_func", 3)});
  EXPECT_EQ(read_gguf_moe_config(GgufFile::from_bytes(build(ds), "d.gguf")).gating, GgufGating::kSoftmaxWeight);
  ds.kvs.back() = kv_u32("deepseek2.expert_gating_func", 4);
  EXPECT_EQ(read_gguf_moe_config(GgufFile::from_bytes(build(ds), "d.gguf")).gating, GgufGating::kSqrtSoftplus);
  ds.kvs.back() = kv_u32("deepseek2.expert_gating_func", 5);
  EXPECT_NE(error_of(ds).find("metadata key 'deepseek2.expert_gating_func' is 5; hymoe runs 1 (softmax), 2 (sigmoid), "
                              "3 (softmax over the selected logits) and 4 (sqrt-softplus)"),
            std::string::npos)
      << error_of(ds);
}

// deepseek4's first hash_layer_count blocks choose their experts by token id: a clear error, not a routed guess.
TEST(GgufMoeRejects, HashRoutedBlocks) {
  FileSpec ds = moe_file("deepseek4");
  ds.kvs.insert(ds.kvs.end(), {kv_u32("deepseek4.expert_shared_count", 0), kv_u32("deepseek4.expert_gating_func", 4),
                               kv_u32("deepseek4.hash_layer_count", 2)});
  EXPECT_NE(error_of(ds).find("m.gguf: block 1 chooses its experts by token id from ffn_gate_tid2eid "
                              "(deepseek4.hash_layer_count = 2)"),
            std::string::npos)
      << error_of(ds);
}

// The deepseek2-like architectures differ in what an absent expert_gating_func means: softmax (deepseek2's V2
// files), sigmoid (glm4moe), or an error (dots1, bailingmoe2: llama.cpp's graph aborts on NONE); bailingmoe2's shared
// experts are expert_shared_feed_forward_length wide when the key is there.
TEST(GgufMoe, GatingWithoutTheKeyIsTheArchitectures) {
  auto with_shared = [](const std::string& arch) {
    FileSpec spec = moe_file(arch);
    spec.kvs.push_back(kv_u32(arch + ".expert_shared_count", 1));
    spec.tensors.push_back({"blk.1.ffn_gate_shexp.weight", 0, {D, H}});
    spec.tensors.push_back({"blk.1.ffn_up_shexp.weight", 0, {D, H}});
    spec.tensors.push_back({"blk.1.ffn_down_shexp.weight", 0, {H, D}});
    return spec;
  };
  auto config = [](const FileSpec& spec) { return read_gguf_moe_config(GgufFile::from_bytes(build(spec), "m.gguf")); };
  EXPECT_EQ(config(with_shared("deepseek2")).gating, GgufGating::kSoftmax);
  EXPECT_EQ(config(with_shared("glm4moe")).gating, GgufGating::kSigmoid);
  FileSpec glm_softmax = with_shared("glm4moe");
  glm_softmax.kvs.push_back(kv_u32("glm4moe.expert_gating_func", 1));
  EXPECT_EQ(config(glm_softmax).gating, GgufGating::kSoftmax);
  for (const std::string arch : {"dots1", "bailingmoe2"}) {
    FileSpec spec = with_shared(arch);
    EXPECT_NE(error_of(spec).find("m.gguf: metadata key '" + arch + ".expert_gating_func' is missing; llama.cpp's " +
                                  arch + " graph needs 1 (softmax), 2 (sigmoid), 3"),
              std::string::npos)
        << error_of(spec);
    spec.kvs.push_back(kv_u32(arch + ".expert_gating_func", 0));
    EXPECT_NE(error_of(spec).find("is 0 (none)"), std::string::npos) << error_of(spec);
    spec.kvs.back() = kv_u32(arch + ".expert_gating_func", 2);
    EXPECT_EQ(config(spec).gating, GgufGating::kSigmoid);
    EXPECT_EQ(config(spec).shared_hidden, H);
  }
  FileSpec bailing = with_shared("bailingmoe2");
  bailing.kvs.push_back(kv_u32("bailingmoe2.expert_gating_func", 2));
  bailing.kvs.push_back(kv_u32("bailingmoe2.expert_shared_feed_forward_length", 2 * H));
  bailing.kvs[7] = kv_u32("bailingmoe2.expert_shared_count", 2);  // with_shared's count: 2 of 2H each now
  EXPECT_EQ(config(bailing).shared_hidden, 4 * H);
}

// qwen3next's shared expert is there where the block has its tensors, with its sigmoid gate; hunyuan-moe's is
// required and ungated; qwen3vlmoe has none.
TEST(GgufMoe, SharedExpertRulesOfTheQwenAndHunyuanArchitectures) {
  FileSpec next = moe_file("qwen3next");
  next.kvs.push_back(kv_u32("qwen3next.expert_shared_feed_forward_length", 2 * H));
  const auto bare = GgufFile::from_bytes(build(next), "n.gguf");
  const GgufMoeConfig c = read_gguf_moe_config(bare);
  EXPECT_TRUE(c.norm_weights);
  EXPECT_EQ(c.shared_hidden, 2 * H);
  EXPECT_EQ(find_gguf_moe_block(bare, c, 1).gate_shexp, nullptr);  // none in this block
  next.tensors.push_back({"blk.1.ffn_gate_shexp.weight", 0, {D, 2 * H}});
  EXPECT_NE(error_of(next).find("missing tensor 'blk.1.ffn_up_shexp.weight' of MoE block 1"), std::string::npos)
      << error_of(next);
  next.tensors.push_back({"blk.1.ffn_up_shexp.weight", 0, {D, 2 * H}});
  next.tensors.push_back({"blk.1.ffn_down_shexp.weight", 0, {2 * H, D}});
  EXPECT_NE(error_of(next).find("missing tensor 'blk.1.ffn_gate_inp_shexp.weight'"), std::string::npos)
      << error_of(next);
  next.tensors.push_back({"blk.1.ffn_gate_inp_shexp.weight", 0, {D}});
  const auto full = GgufFile::from_bytes(build(next), "n.gguf");
  const GgufMoeBlock b = find_gguf_moe_block(full, read_gguf_moe_config(full), 1);
  ASSERT_NE(b.gate_inp_shexp, nullptr);
  EXPECT_EQ(b.down_shexp->name, "blk.1.ffn_down_shexp.weight");
  // hunyuan-moe: without expert_shared_feed_forward_length the shared expert is feed_forward_length wide, and required.
  EXPECT_NE(error_of(moe_file("hunyuan-moe")).find("missing tensor 'blk.1.ffn_gate_shexp.weight'"), std::string::npos);
  const GgufMoeConfig h = read_gguf_moe_config(GgufFile::from_bytes(build(moe_file("hunyuan-moe")), "h.gguf"));
  EXPECT_EQ(h.shared_hidden, H);
  EXPECT_FALSE(h.shared_gate);
  EXPECT_TRUE(h.norm_weights);
  const GgufMoeConfig v = read_gguf_moe_config(GgufFile::from_bytes(build(moe_file("qwen3vlmoe")), "v.gguf"));
  EXPECT_EQ(v.shared_hidden, 0u);
  EXPECT_TRUE(v.norm_weights);
}

// ernie4_5-moe: MoE blocks every interleave_moe_layer_step (required) past the leading dense ones; a shared expert
// only where expert_shared_feed_forward_length sizes one.
TEST(GgufMoe, ErnieLayerStepAndOptionalSharedExpert) {
  FileSpec spec = moe_file("ernie4_5-moe");
  EXPECT_NE(error_of(spec).find("missing metadata key 'ernie4_5-moe.interleave_moe_layer_step'"), std::string::npos)
      << error_of(spec);
  spec.kvs.push_back(kv_u32("ernie4_5-moe.interleave_moe_layer_step", 2));
  const auto f = GgufFile::from_bytes(build(spec), "e.gguf");
  const GgufMoeConfig c = read_gguf_moe_config(f);
  EXPECT_EQ(c.shared_hidden, 0u);
  EXPECT_TRUE(c.norm_weights);
  EXPECT_TRUE(c.selection_bias);
  EXPECT_EQ(find_gguf_moe_block(f, c, 1).gate_shexp, nullptr);  // (1 + 1) % 2 == 0: MoE
  spec.kvs.back() = kv_u32("ernie4_5-moe.interleave_moe_layer_step", 3);
  EXPECT_NE(error_of(spec).find("m.gguf: block 1 is dense (ernie4_5-moe.interleave_moe_layer_step = 3"),
            std::string::npos)
      << error_of(spec);
}

// ffn_gate_up_exps (ne [D, 2H, E]) in place of the separate gate and up tensors, for the architectures whose
// llama.cpp loader reads it (deepseek2, qwen3next, qwen35moe); elsewhere the separate tensors are required.
TEST(GgufMoe, MergedGateUpWhereTheArchitectureReadsIt) {
  auto merged = [](const std::string& arch) {
    FileSpec spec = moe_file(arch);
    spec.tensors[1] = {"blk.1.ffn_gate_up_exps.weight", 0, {D, 2 * H, E}};
    spec.tensors.erase(spec.tensors.begin() + 2);  // ffn_up_exps
    return spec;
  };
  FileSpec ds = merged("deepseek2");
  ds.kvs.push_back(kv_u32("deepseek2.expert_shared_count", 0));
  const auto f = GgufFile::from_bytes(build(ds), "d.gguf");
  const GgufMoeBlock b = find_gguf_moe_block(f, read_gguf_moe_config(f), 1);
  ASSERT_NE(b.gate_up_exps, nullptr);
  EXPECT_EQ(b.gate_exps, nullptr);
  EXPECT_EQ(b.expert_bytes(E), (2 * D * H + H * D) * 4);
  EXPECT_NE(error_of(merged("qwen3moe")).find("missing tensor 'blk.1.ffn_gate_exps.weight' of MoE block 1"),
            std::string::npos);
  FileSpec wrong = merged("qwen3next");
  wrong.tensors[1].ne = {D, H, E};
  EXPECT_NE(error_of(wrong).find("'blk.1.ffn_gate_up_exps.weight' has ne = [32, 32, 4], expected [32, 64, 4]"),
            std::string::npos)
      << error_of(wrong);
}

TEST(GgufMoe, ConformanceCases) {
  const std::string root = test::data_dir() + "/conformance/gguf/";
  const auto q2 = GgufFile::open(root + "qwen2moe_q8_0/model.gguf");
  const GgufMoeConfig c2 = read_gguf_moe_config(q2);
  EXPECT_EQ(c2.expert_hidden, 128u);
  EXPECT_EQ(c2.shared_hidden, 384u);
  EXPECT_TRUE(c2.shared_gate);
  EXPECT_FALSE(c2.norm_weights);
  const GgufMoeBlock b2 = find_gguf_moe_block(q2, c2, 1);
  ASSERT_NE(b2.gate_inp_shexp, nullptr);
  EXPECT_EQ(b2.gate_shexp->ggml_type(), GgmlType::kQ8_0);
  const auto q4 = GgufFile::open(root + "qwen3moe_q4_k/model.gguf");
  const GgufMoeConfig c4 = read_gguf_moe_config(q4);
  EXPECT_EQ(c4.expert_hidden, 512u);
  EXPECT_EQ(c4.expert_used_count, 4u);
  EXPECT_EQ(find_gguf_moe_block(q4, c4, 1).down_exps->ggml_type(), GgmlType::kQ4_K);
  try {
    find_gguf_moe_block(q4, c4, 0);
    FAIL() << "dense block 0 accepted as MoE";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing tensor 'blk.0.ffn_gate_inp.weight'"), std::string::npos) << e.what();
  }
}

// The split layout of early Mixtral files: every expert's three tensors found, one type per projection, sizes summed.
TEST(GgufMoe, SplitExpertsOfTheLlamaArchitecture) {
  const auto f = GgufFile::from_bytes(build(split_moe_file("llama")), "m.gguf");
  const GgufMoeBlock b = find_gguf_moe_block(f, read_gguf_moe_config(f), 1);
  ASSERT_TRUE(b.split_experts());
  EXPECT_EQ(b.gate_exps, nullptr);
  ASSERT_EQ(b.down_split.size(), E);
  EXPECT_EQ(b.down_split[3]->name, "blk.1.ffn_down.3.weight");
  EXPECT_EQ(b.expert_bytes(E), 3 * D * H * 4);
  EXPECT_EQ(b.total_bytes(), E * 3 * D * H * 4 + D * E * 4);
}

// --- well-formed files that cannot be a MoE block 1 ---

TEST(GgufMoeRejects, SplitExpertsOutsideTheLlamaArchitecture) {
  EXPECT_NE(error_of(split_moe_file("qwen3moe"))
                .find("m.gguf: MoE block 1 stores one tensor per expert ('blk.1.ffn_gate.0.weight', ...), a layout "
                      "llama.cpp reads for the 'llama' architecture only, not 'qwen3moe'"),
            std::string::npos)
      << error_of(split_moe_file("qwen3moe"));
}

TEST(GgufMoeRejects, SplitExpertsOfTwoTypes) {
  FileSpec spec = split_moe_file("llama");
  spec.tensors[1 + E + 2] = {"blk.1.ffn_up.2.weight", 1, {D, H}, std::nullopt, 2 * D * H};  // F16 among F32
  EXPECT_NE(error_of(spec).find("m.gguf: tensor 'blk.1.ffn_up.2.weight' has type F16 but expert 0's has type F32"),
            std::string::npos)
      << error_of(spec);
}

TEST(GgufMoeRejects, SplitExpertMissing) {
  FileSpec spec = split_moe_file("llama");
  spec.tensors.erase(spec.tensors.begin() + 1 + 2 * E + 3);
  EXPECT_NE(error_of(spec).find("m.gguf: missing tensor 'blk.1.ffn_down.3.weight' of MoE block 1"), std::string::npos)
      << error_of(spec);
}

TEST(GgufMoeRejects, MissingTensor) {
  FileSpec spec = moe_file("qwen3moe");
  spec.tensors.pop_back();
  EXPECT_NE(error_of(spec).find("m.gguf: missing tensor 'blk.1.ffn_down_exps.weight' of MoE block 1"), std::string::npos)
      << error_of(spec);
}

TEST(GgufMoeRejects, ShapeMismatch) {
  FileSpec spec = moe_file("qwen3moe");
  spec.tensors[2].ne = {D, H + 32, E};
  EXPECT_NE(error_of(spec).find("m.gguf: tensor 'blk.1.ffn_up_exps.weight' has ne = [32, 64, 4], expected [32, 32, 4]"),
            std::string::npos)
      << error_of(spec);
}

TEST(GgufMoeRejects, UsedCountAboveExpertCount) {
  FileSpec spec = moe_file("qwen3moe");
  spec.kvs[4] = kv_u32("qwen3moe.expert_used_count", 5);
  EXPECT_NE(error_of(spec).find("m.gguf: metadata key 'qwen3moe.expert_used_count' is 5, expected 1 .. expert_count = 4"),
            std::string::npos)
      << error_of(spec);
}

TEST(GgufMoeRejects, KeyOfWrongType) {
  FileSpec spec = moe_file("qwen3moe");
  spec.kvs[3] = kv_raw("qwen3moe.expert_count", 5, [](Writer& w) { w.put<int32_t>(4); });
  EXPECT_NE(error_of(spec).find("m.gguf: metadata key 'qwen3moe.expert_count' has type INT32, expected UINT32"),
            std::string::npos)
      << error_of(spec);
}

TEST(GgufMoeRejects, NoArchitecture) {
  FileSpec spec = moe_file("qwen3moe");
  spec.kvs.erase(spec.kvs.begin());
  EXPECT_NE(error_of(spec).find("m.gguf: missing metadata key 'general.architecture'"), std::string::npos)
      << error_of(spec);
}

// laguna's loader requires its selection bias, so a block without it is refused rather than routed without it; hy_v3
// names it exp_probs_b (no .bias suffix), so a file written that way keeps its bias.
TEST(GgufMoeRejects, RequiredSelectionBiasIsNamed) {
  FileSpec laguna = moe_file("laguna");
  laguna.kvs.insert(laguna.kvs.end(), {kv_u32("laguna.leading_dense_block_count", 1),
                                       kv_u32("laguna.expert_shared_feed_forward_length", H)});
  for (const char* p : {"gate", "up"}) laguna.tensors.push_back({"blk.1.ffn_" + std::string(p) + "_shexp.weight", 0, {D, H}});
  laguna.tensors.push_back({"blk.1.ffn_down_shexp.weight", 0, {H, D}});
  EXPECT_NE(error_of(laguna).find("m.gguf: missing tensor 'blk.1.exp_probs_b.bias' of MoE block 1"), std::string::npos)
      << error_of(laguna);
  laguna.tensors.push_back({"blk.1.exp_probs_b.bias", 0, {E}});
  EXPECT_EQ(error_of(laguna), "");

  FileSpec hy = moe_file("hy_v3");
  for (const char* p : {"gate", "up"}) hy.tensors.push_back({"blk.1.ffn_" + std::string(p) + "_shexp.weight", 0, {D, H}});
  hy.tensors.push_back({"blk.1.ffn_down_shexp.weight", 0, {H, D}});
  hy.tensors.push_back({"blk.1.exp_probs_b", 0, {E}});
  const auto f = GgufFile::from_bytes(build(hy), "h.gguf");
  const GgufMoeBlock b = find_gguf_moe_block(f, read_gguf_moe_config(f), 1);
  ASSERT_NE(b.exp_probs_b, nullptr);
  EXPECT_EQ(b.exp_probs_b->name, "blk.1.exp_probs_b");
}

TEST(GgufMoeRejects, UnknownArchitecture) {
  std::string known;
  for (const std::string& arch : gguf_moe_architectures()) known += (known.empty() ? "" : ", ") + arch;
  EXPECT_EQ(known.rfind("llama, qwen2moe, qwen3moe, olmoe, deepseek2, gpt-oss, ", 0), 0u) << known;
  EXPECT_NE(known.find(", cohere2moe, qwen4exp, granitehybrid, "), std::string::npos) << known;
  EXPECT_NE(error_of(moe_file("gpt2")).find("m.gguf: architecture 'gpt2' is not one hymoe runs (" + known + ")"),
            std::string::npos)
      << error_of(moe_file("gpt2"));
}

// Per-expert scale tensors (NVFP4 files' second level) would change every expert's output: a block with them is
// refused, naming the tensor, rather than run without them.
TEST(GgufMoeRejects, PerExpertScalesAreNotDropped) {
  for (const char* projection : {"gate", "up", "down"}) {
    FileSpec spec = moe_file("deepseek32");
    spec.kvs.insert(spec.kvs.end(), {kv_u32("deepseek32.expert_shared_count", 0), kv_u32("deepseek32.expert_gating_func", 2)});
    EXPECT_EQ(error_of(spec), "");
    spec.tensors.push_back({"blk.1.ffn_" + std::string(projection) + "_exps.scale", 0, {E}});
    EXPECT_NE(error_of(spec).find("m.gguf: MoE block 1 has per-expert scales 'blk.1.ffn_" + std::string(projection) +
                                  "_exps.scale', which hymoe does not apply"),
              std::string::npos)
        << error_of(spec);
  }
}

// exaone-moe's shared expert is expert_shared_feed_forward_length wide where that is set, else H; kimi-linear's is
// max(expert_shared_count, 1) * H, one even at a count of 0; cohere2moe's as below; as llama.cpp builds them.
TEST(GgufMoeConfig, SharedExpertRulesOfExaoneKimiLinearAndCohere2Moe) {
  FileSpec exaone = moe_file("exaone-moe");
  exaone.kvs.insert(exaone.kvs.end(), {kv_u32("exaone-moe.expert_gating_func", 2), kv_u32("exaone-moe.expert_shared_count", 3)});
  auto shared_of = [](const FileSpec& spec) {
    const auto f = GgufFile::from_bytes(build(spec), "m.gguf");
    return read_gguf_moe_config(f).shared_hidden;
  };
  EXPECT_EQ(shared_of(exaone), H);
  exaone.kvs.push_back(kv_u32("exaone-moe.expert_shared_feed_forward_length", 2 * H + 3));
  EXPECT_EQ(shared_of(exaone), 2 * H + 3);
  FileSpec kimi = moe_file("kimi-linear");
  kimi.kvs.insert(kimi.kvs.end(), {kv_u32("kimi-linear.expert_gating_func", 2), kv_u32("kimi-linear.expert_shared_count", 0)});
  EXPECT_EQ(shared_of(kimi), H);
  kimi.kvs.back() = kv_u32("kimi-linear.expert_shared_count", 3);
  EXPECT_EQ(shared_of(kimi), 3 * H);
  // cohere2moe: none without a count (the key is optional), else the length where set, else count * H.
  FileSpec cohere = moe_file("cohere2moe");
  EXPECT_EQ(shared_of(cohere), 0u);
  cohere.kvs.push_back(kv_u32("cohere2moe.expert_shared_count", 2));
  EXPECT_EQ(shared_of(cohere), 2 * H);
  cohere.kvs.push_back(kv_u32("cohere2moe.expert_shared_feed_forward_length", H + 5));
  EXPECT_EQ(shared_of(cohere), H + 5);
}

TEST(GgufMoeRejects, UnsupportedType) {
  FileSpec spec = moe_file("qwen3moe");
  spec.tensors[1] = {"blk.1.ffn_gate_exps.weight", 9, {D, H, E}, std::nullopt, 36 * H * E};  // Q8_1 (ggml's activation type)
  EXPECT_NE(error_of(spec).find("m.gguf: tensor 'blk.1.ffn_gate_exps.weight' has type Q8_1, which hymoe does not decode"),
            std::string::npos)
      << error_of(spec);
}

TEST(GgufMoeRejects, GroupsThatDoNotSplitTheExperts) {
  FileSpec spec = moe_file("deepseek2");
  spec.kvs.insert(spec.kvs.end(), {kv_u32("deepseek2.expert_shared_count", 0), kv_u32("deepseek2.expert_group_count", 3),
                                   kv_u32("deepseek2.expert_group_used_count", 1)});
  EXPECT_NE(error_of(spec).find("'deepseek2.expert_group_count' is 3, which does not split expert_count = 4"),
            std::string::npos)
      << error_of(spec);
}

}  // namespace
}  // namespace hymoe
