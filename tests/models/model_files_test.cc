// Model directories as files: sharded checkpoints through model.safetensors.index.json, the named errors for bad
// files (missing shard, tensor missing from the index, shapes contradicting config.json, unknown family or
// quantization, a dense layer), and gpt-oss's MXFP4 layout loaded against the same weights stored plainly.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "hymoe/compute.h"
#include "hymoe/error.h"
#include "hymoe/model.h"
#include "hymoe/quant_decode.h"
#include "hymoe/rng.h"
#include "hymoe/safetensors.h"
#include "models/model_test_util.h"

namespace hymoe {
namespace {

using test::TempDir;

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(std::ifstream(path)); }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Splits a case's weights into two shards with an index, as sharded releases are stored.
void shard_case(const std::string& name, const std::string& dir) {
  test::copy_hf_case(name, dir);
  const SafetensorsFile all = SafetensorsFile::open(dir + "/weights.safetensors");
  SafetensorsWriter a, b;
  nlohmann::json index;
  index["metadata"] = {{"total_size", 0}};
  size_t i = 0;
  for (const auto& t : all.tensors()) {
    const auto bytes = all.bytes(t.name);
    (i % 2 ? b : a).add_raw(t.name, t.dtype, t.shape, std::vector<std::byte>(bytes.begin(), bytes.end()));
    index["weight_map"][t.name] = i++ % 2 ? "model-00002-of-00002.safetensors" : "model-00001-of-00002.safetensors";
  }
  a.write(dir + "/model-00001-of-00002.safetensors");
  b.write(dir + "/model-00002-of-00002.safetensors");
  std::filesystem::remove(dir + "/weights.safetensors");
  write_text(dir + "/model.safetensors.index.json", index.dump(2));
}

TEST(ModelFiles, ShardedCheckpointGivesTheSameLayer) {
  const TempDir tmp("hf_shards");
  shard_case("qwen2_moe_e8_k4", tmp.path());
  const std::string ref = test::hf_case_dir("qwen2_moe_e8_k4");
  const Tensor x = SafetensorsFile::open(ref + "/input.safetensors").read_f32("x");
  const Tensor y_sharded = load_model_layer(tmp.path(), 1).forward(x);
  const Tensor y_single = load_model_layer(ref, 1).forward(x);
  EXPECT_TRUE(test::all_close(y_sharded, y_single, 0, 0));
}

TEST(ModelFiles, MissingShardIsNamed) {
  const TempDir tmp("hf_missing_shard");
  shard_case("mixtral_e8_k2", tmp.path());
  std::filesystem::remove(tmp.path() + "/model-00002-of-00002.safetensors");
  const std::string msg = error_of([&] { Model::open(tmp.path()); });
  EXPECT_NE(msg.find("shard 'model-00002-of-00002.safetensors'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
}

TEST(ModelFiles, TensorMissingFromTheIndexIsNamed) {
  const TempDir tmp("hf_missing_tensor");
  shard_case("mixtral_e8_k2", tmp.path());
  auto index = read_json(tmp.path() + "/model.safetensors.index.json");
  const std::string dropped = "model.layers.1.block_sparse_moe.experts.5.w3.weight";
  ASSERT_EQ(index["weight_map"].erase(dropped), 1u);
  write_text(tmp.path() + "/model.safetensors.index.json", index.dump());
  // The shard still holds the tensor; the index is what says where tensors are, so it is an error to omit it.
  const std::string msg = error_of([&] { load_model_layer(tmp.path(), 1); });
  EXPECT_NE(msg.find("'" + dropped + "'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("weight_map"), std::string::npos) << msg;
}

TEST(ModelFiles, IndexPointingAtTheWrongShardIsNamed) {
  const TempDir tmp("hf_wrong_shard");
  shard_case("mixtral_e8_k2", tmp.path());
  auto index = read_json(tmp.path() + "/model.safetensors.index.json");
  const std::string name = "model.layers.1.block_sparse_moe.gate.weight";
  index["weight_map"][name] = index["weight_map"][name] == "model-00001-of-00002.safetensors"
                                  ? "model-00002-of-00002.safetensors" : "model-00001-of-00002.safetensors";
  write_text(tmp.path() + "/model.safetensors.index.json", index.dump());
  const std::string msg = error_of([&] { Model::open(tmp.path()); });
  EXPECT_NE(msg.find(name), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not hold it"), std::string::npos) << msg;
}

TEST(ModelFiles, ShapesContradictingTheConfigAreNamed) {
  const TempDir tmp("hf_bad_shape");
  test::copy_hf_case("deepseek_v2_greedy_e16_k6", tmp.path());
  auto config = read_json(tmp.path() + "/config.json");
  config["moe_intermediate_size"] = 48;  // the file holds 32
  write_text(tmp.path() + "/config.json", config.dump());
  const std::string msg = error_of([&] { load_model_layer(tmp.path(), 1); });
  EXPECT_NE(msg.find("has shape (32, 64)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("config.json implies (48, 64)"), std::string::npos) << msg;
}

TEST(ModelFiles, UnknownFamilyListsTheKnownOnes) {
  const TempDir tmp("hf_unknown_family");
  test::copy_hf_case("olmoe_e16_k4", tmp.path());
  auto config = read_json(tmp.path() + "/config.json");
  config["model_type"] = "switch_transformers";
  write_text(tmp.path() + "/config.json", config.dump());
  const std::string msg = error_of([&] { Model::open(tmp.path()); });
  EXPECT_NE(msg.find("model_type 'switch_transformers' is not a supported family"), std::string::npos) << msg;
  for (const char* known : {"deepseek_v2", "deepseek_v3", "gpt_oss", "mixtral", "olmoe", "qwen2_moe", "qwen3_moe"})
    EXPECT_NE(msg.find(known), std::string::npos) << msg;
}

TEST(ModelFiles, UnknownQuantizationAndDenseLayerAreNamed) {
  const TempDir tmp("hf_unknown_quant");
  test::copy_hf_case("deepseek_v3_e16_g4_tg2_k4_fp8", tmp.path());
  EXPECT_NE(error_of([&] { load_model_layer(tmp.path(), 0); }).find("layer 0 of this deepseek_v3 model is a dense MLP"),
            std::string::npos);
  EXPECT_NE(error_of([&] { load_model_layer(tmp.path(), 2); }).find("out of range"), std::string::npos);
  auto config = read_json(tmp.path() + "/config.json");
  config["quantization_config"]["quant_method"] = "awq";
  write_text(tmp.path() + "/config.json", config.dump());
  const std::string msg = error_of([&] { Model::open(tmp.path()); });
  EXPECT_NE(msg.find("quant_method='awq' is not supported"), std::string::npos) << msg;
  // An FP8 tensor without an fp8 quantization_config.
  config.erase("quantization_config");
  write_text(tmp.path() + "/config.json", config.dump());
  const std::string fp8 = error_of([&] { load_model_layer(tmp.path(), 1); });
  EXPECT_NE(fp8.find("is F8_E4M3 but config.json has no fp8 quantization_config"), std::string::npos) << fp8;
}

// gpt-oss MXFP4: random codes and scales stored as the release stores them load to the same layer as their
// decoded values stored as plain fused (E, D, 2I) / (E, I, D) tensors. Under QuantCompute::kExact the outputs
// agree to f32 summation; under kInt8 (and kAuto) the MXFP4 layer quantizes each projection's input to q8_0 as
// llama.cpp does (docs/semantics.md): each activation moves by at most 0.56 of its block's d = max|x| / 127, which
// the test holds, as the GGUF cases without y.act_rounded, to 3e-2 of max|y|, and which must show (above 1e-4).
// `hymoe forward --model ... --quant-compute exact|int8` gives the library's bits under each setting.
TEST(ModelFiles, GptOssMxfp4MatchesItsDecodedWeights) {
  const int64_t E = 4, D = 64, I = 32, K = 2;
  Rng rng(11);
  auto u8 = [&](int64_t n, int lo, int hi) {
    std::vector<std::byte> v(static_cast<size_t>(n));
    for (auto& b : v) b = static_cast<std::byte>(lo + static_cast<int>(rng.below(static_cast<uint64_t>(hi - lo + 1))));
    return v;
  };
  auto f32_bytes = [](const std::vector<float>& v) {
    std::vector<std::byte> out(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  };
  const auto gu_blocks = u8(E * 2 * I * (D / 32) * 16, 0, 255), gu_scales = u8(E * 2 * I * (D / 32), 122, 126);
  const auto dn_blocks = u8(E * D * (I / 32) * 16, 0, 255), dn_scales = u8(E * D * (I / 32), 122, 126);
  // Decoded, transposed to transformers' in-out layout.
  std::vector<float> gate_up(static_cast<size_t>(E * D * 2 * I)), down(static_cast<size_t>(E * I * D));
  auto p = [](const std::vector<std::byte>& v) { return reinterpret_cast<const uint8_t*>(v.data()); };
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t o = 0; o < 2 * I; ++o)
      for (int64_t i = 0; i < D; ++i)
        gate_up[static_cast<size_t>((e * D + i) * 2 * I + o)] =
            mxfp4_value_ref(p(gu_blocks) + e * 2 * I * (D / 2), p(gu_scales) + e * 2 * I * (D / 32), D, o, i);
    for (int64_t o = 0; o < D; ++o)
      for (int64_t i = 0; i < I; ++i)
        down[static_cast<size_t>((e * I + i) * D + o)] =
            mxfp4_value_ref(p(dn_blocks) + e * D * (I / 2), p(dn_scales) + e * D * (I / 32), I, o, i);
  }
  const std::string pre = "model.layers.0.mlp.";
  SafetensorsWriter common;
  common.add(pre + "router.weight", random_normal(rng, {E, D}, 0.3));
  common.add(pre + "router.bias", random_normal(rng, {E}, 0.1));
  common.add(pre + "experts.gate_up_proj_bias", random_normal(rng, {E, 2 * I}, 0.1));
  common.add(pre + "experts.down_proj_bias", random_normal(rng, {E, D}, 0.1));
  nlohmann::json config = {{"model_type", "gpt_oss"}, {"hidden_size", D}, {"num_hidden_layers", 1},
                           {"num_local_experts", E}, {"num_experts_per_tok", K}, {"intermediate_size", I},
                           {"swiglu_limit", 7.0}};
  const TempDir q("hf_mxfp4"), plain("hf_mxfp4_plain");
  {
    SafetensorsWriter w = common;
    w.add_raw(pre + "experts.gate_up_proj_blocks", DType::kU8, {E, 2 * I, D / 32, 16}, gu_blocks);
    w.add_raw(pre + "experts.gate_up_proj_scales", DType::kU8, {E, 2 * I, D / 32}, gu_scales);
    w.add_raw(pre + "experts.down_proj_blocks", DType::kU8, {E, D, I / 32, 16}, dn_blocks);
    w.add_raw(pre + "experts.down_proj_scales", DType::kU8, {E, D, I / 32}, dn_scales);
    w.write(q.path() + "/model.safetensors");
    nlohmann::json c = config;
    c["quantization_config"] = {{"quant_method", "mxfp4"}, {"modules_to_not_convert", nlohmann::json::array()}};
    write_text(q.path() + "/config.json", c.dump());
  }
  {
    SafetensorsWriter w = common;
    w.add_raw(pre + "experts.gate_up_proj", DType::kF32, {E, D, 2 * I}, f32_bytes(gate_up));
    w.add_raw(pre + "experts.down_proj", DType::kF32, {E, I, D}, f32_bytes(down));
    w.write(plain.path() + "/model.safetensors");
    write_text(plain.path() + "/config.json", config.dump());
  }
  const Tensor x = random_normal(rng, {2, 7, D}, 1.0);
  const TempDir io("hf_mxfp4_io");  // not in the model directory, whose safetensors are the model's
  {
    SafetensorsWriter in;
    in.add("x", x);
    in.write(io.path() + "/input.safetensors");
  }
  const QuantCompute before = quant_compute();
  for (QuantCompute mode : {QuantCompute::kExact, QuantCompute::kInt8}) {
    SCOPED_TRACE(std::string(quant_compute_name(mode)));
    set_quant_compute(mode);  // layers keep the kernels they were built with
    ModelMoELayer lq = load_model_layer(q.path(), 0), lp = load_model_layer(plain.path(), 0);
    const Tensor yq = lq.forward(x), yp = lp.forward(x);
    EXPECT_EQ(lq.last_routing().indices, lp.last_routing().indices);
    double max_abs = 0, max_err = 0;
    for (int64_t i = 0; i < yp.numel(); ++i) {
      max_abs = std::max(max_abs, static_cast<double>(std::abs(yp[i])));
      max_err = std::max(max_err, static_cast<double>(std::abs(yq[i] - yp[i])));
    }
    EXPECT_GT(max_abs, 0.1);  // a non-trivial output
    if (mode == QuantCompute::kExact) {
      // The same weight values (exact in f32); only the kernels' summation differs.
      EXPECT_TRUE(test::all_close(yq, yp, 1e-4, 1e-4));
    } else {
      EXPECT_LE(max_err, 3e-2 * max_abs);
      EXPECT_GT(max_err, 1e-4 * max_abs) << "the activations were not quantized";
    }
    const std::string out = io.path() + "/out.safetensors";
    std::string log;
    ASSERT_EQ(0, test::run_command(test::tool_path() + " forward --model " + q.path() + " --layer 0 --input " + io.path() +
                                       "/input.safetensors --output " + out + " --quant-compute " +
                                       std::string(quant_compute_name(mode)),
                                   &log))
        << log;
    const Tensor y_tool = SafetensorsFile::open(out).read_f32("y");
    ASSERT_EQ(y_tool.numel(), yq.numel());
    EXPECT_EQ(0, std::memcmp(y_tool.values().data(), yq.values().data(), sizeof(float) * static_cast<size_t>(yq.numel())));
  }
  set_quant_compute(before);
}

}  // namespace
}  // namespace hymoe
