// GGUF files through the engine's model path: load_model_layer(model.gguf, block) and `hymoe forward --model
// model.gguf` reproduce every GGUF conformance case — the three shared ones (tests/data/conformance/gguf/) and the
// extra ones scripts/make_gguf_cases.py writes (tests/data/conformance/gguf-extra/) — with y within the case's
// suggested tolerance, route.indices exact slot by slot and route.weights; the extra deepseek2 case fails if either
// the selection bias or the group limit is ignored.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "hymoe/compute.h"
#include "hymoe/file_io.h"
#include "hymoe/gguf.h"
#include "hymoe/gguf_moe.h"
#include "hymoe/model.h"
#include "hymoe/safetensors.h"
#include "kernels/formats/gemm_kernels.h"
#include "kernels/isa/isa.h"
#include "models/model_router.h"
#include "test_util.h"

namespace hymoe {
namespace {

struct GgufCase {
  std::string dir;
  nlohmann::json meta;
  std::string model() const { return dir + "/model.gguf"; }
};

GgufCase load_case(const std::string& dir) {
  return {dir, nlohmann::json::parse(read_text_file(dir + "/meta.json"))};
}

std::vector<GgufCase> shared_cases() {
  std::vector<GgufCase> out;
  for (const char* c : {"qwen3moe_q8_0", "qwen3moe_q4_k", "qwen2moe_q8_0"})
    out.push_back(load_case(test::data_dir() + "/conformance/gguf/" + c));
  return out;
}

std::vector<GgufCase> extra_cases() {
  std::vector<std::string> dirs;
  for (const auto& e : std::filesystem::directory_iterator(test::data_dir() + "/conformance/gguf-extra"))
    if (e.is_directory()) dirs.push_back(e.path().string());
  std::sort(dirs.begin(), dirs.end());
  std::vector<GgufCase> out;
  for (const auto& d : dirs) out.push_back(load_case(d));
  return out;
}

// Whether the case's experts are of a type QuantCompute::kInt8 runs with ggml's activation rounding (then its
// output is compared with y.act_rounded); F32/F16/BF16 experts are computed the same under every setting.
bool rounds_activations(const GgufCase& c, QuantCompute mode) {
  if (mode == QuantCompute::kExact) return false;
  const std::string block = "blk." + std::to_string(c.meta["block"].get<int>());
  const auto& types = c.meta.at("tensor_types");
  // The up projection's type: fused, merged with gate (ffn_gate_up_exps), or split per expert.
  const std::string fused = block + ".ffn_up_exps.weight", merged = block + ".ffn_gate_up_exps.weight",
                    split = block + ".ffn_up.0.weight";
  const std::string t =
      types.at(types.contains(fused) ? fused : types.contains(merged) ? merged : split).get<std::string>();
  if (t == "MXFP4") return true;
  for (const kernels::GgufBlockFormat& b : kernels::kGgufBlockFormats)  // every type of the kernels' registry
    if (t == b.type_name) return true;
  return false;
}

// y, route.indices and route.weights against expected.safetensors with the case's tolerances: y, or y.act_rounded
// where the setting rounds the activations as ggml's CPU backend does.
void expect_case_output(const GgufCase& c, const Tensor& y, const Tensor& indices, const Tensor& weights,
                        QuantCompute mode) {
  const auto expected = SafetensorsFile::open(c.dir + "/expected.safetensors");
  // The extra cases (scripts/make_gguf_cases.py) carry only y: under int8 they are held to y within the activation
  // rounding's own size (the shared cases measure it at 1.1e-2 to 1.9e-2 of max|y|), routing exactly.
  const bool act_rounded = rounds_activations(c, mode) && expected.contains("y.act_rounded");
  const bool rounded_vs_y = rounds_activations(c, mode) && !act_rounded;
  const Tensor y_exp = expected.read_f32(act_rounded ? "y.act_rounded" : "y"), idx_exp = expected.read_f32("route.indices"),
               w_exp = expected.read_f32("route.weights");
  ASSERT_EQ(indices.shape(), idx_exp.shape());
  for (int64_t i = 0; i < idx_exp.numel(); ++i)
    EXPECT_EQ(indices[i], idx_exp[i]) << "token " << i / idx_exp.dim(1) << " slot " << i % idx_exp.dim(1);
  const auto& tol = c.meta["suggested_tolerance"];
  EXPECT_TRUE(test::all_close(weights, w_exp, tol["route_weights"]["rtol"].get<double>(),
                              tol["route_weights"]["atol"].get<double>()));
  const auto& y_tol = tol[act_rounded ? "y_act_rounded" : "y"];
  double max_y = 0;
  for (int64_t i = 0; i < y_exp.numel(); ++i) max_y = std::max(max_y, static_cast<double>(std::abs(y_exp[i])));
  EXPECT_TRUE(test::all_close(y.reshaped(y_exp.shape()), y_exp, y_tol["rtol"].get<double>(),
                              rounded_vs_y ? 3e-2 * std::max(1.0, max_y) : y_tol["atol"].get<double>()))
      << (act_rounded ? "y.act_rounded" : "y");
}

void expect_library_matches(const GgufCase& c, QuantCompute mode) {
  SCOPED_TRACE(c.dir + " " + std::string(quant_compute_name(mode)));
  ModelMoELayer layer = load_model_layer(c.model(), c.meta["block"].get<int64_t>());
  const auto& dims = c.meta["dims"];
  EXPECT_EQ(layer.spec().num_experts, dims["E"].get<int64_t>());
  EXPECT_EQ(layer.spec().top_k, dims["K"].get<int64_t>());
  EXPECT_EQ(layer.spec().hidden, dims["H"].get<int64_t>());
  EXPECT_EQ(layer.spec().family, c.meta["arch"].get<std::string>());
  const Tensor x = SafetensorsFile::open(c.dir + "/input.safetensors").read_f32("x");  // (T, D)
  const Tensor y = layer.forward(x);
  EXPECT_EQ(y.shape(), x.shape());
  const Routing& r = layer.last_routing();
  const int64_t T = x.dim(0), K = r.top_k;
  Tensor indices(Shape{T, K});
  for (int64_t i = 0; i < T * K; ++i) indices[i] = static_cast<float>(r.indices[static_cast<size_t>(i)]);
  expect_case_output(c, y, indices, Tensor(Shape{T, K}, r.weights), mode);
  // Expert counts are the selections per expert.
  float selections = 0;
  for (float n : layer.expert_counts().values()) selections += n;
  EXPECT_EQ(selections, static_cast<float>(T * K));
  // (1, T, D) gives the same y, shaped like x.
  const Tensor y3 = layer.forward(x.reshaped(Shape{1, T, x.dim(1)}));
  EXPECT_EQ(y3.shape(), (Shape{1, T, x.dim(1)}));
  EXPECT_TRUE(test::all_close(y3.reshaped(y.shape()), y, 0.0, 0.0));
}

// Under each setting of QuantCompute (the layer keeps the kernels it was built with).
void expect_library_matches(const GgufCase& c) {
  const QuantCompute before = quant_compute();
  for (QuantCompute mode : {QuantCompute::kExact, QuantCompute::kInt8}) {
    set_quant_compute(mode);
    expect_library_matches(c, mode);
  }
  set_quant_compute(before);
}

TEST(GgufModel, SharedCasesThroughTheLibrary) {
  for (const auto& c : shared_cases()) expect_library_matches(c);
}

TEST(GgufModel, ExtraCasesThroughTheLibrary) {
  const auto cases = extra_cases();
  ASSERT_GE(cases.size(), 26u);
  for (const auto& c : cases) expect_library_matches(c);
}

// An architecture counts as run only with a case: every declared one has at least one.
TEST(GgufModel, EveryArchitectureHasACase) {
  std::set<std::string> covered;
  for (const auto& cases : {shared_cases(), extra_cases()})
    for (const GgufCase& c : cases) covered.insert(c.meta["arch"].get<std::string>());
  for (const std::string& arch : gguf_moe_architectures())
    EXPECT_TRUE(covered.count(arch)) << "GGUF architecture '" << arch << "' has no conformance case";
}

TEST(GgufModel, EveryCaseThroughTheCli) {
  test::TempDir dir("gguf_forward_cli");
  auto cases = shared_cases();
  for (auto& c : extra_cases()) cases.push_back(std::move(c));
  // The default (auto: int8) on every case, and --quant-compute exact on the quantized ones; inspect on each.
  for (const auto& c : cases)
  for (QuantCompute mode : {QuantCompute::kAuto, QuantCompute::kExact}) {
    if (mode == QuantCompute::kExact && !rounds_activations(c, QuantCompute::kInt8)) continue;
    SCOPED_TRACE(c.dir + " " + std::string(quant_compute_name(mode)));
    const std::string out = dir.path("out.safetensors");
    std::string log;
    if (mode == QuantCompute::kAuto)  // the listing of every block, which reads the same declarations
      ASSERT_EQ(test::run_command(test::tool_path() + " inspect " + c.model(), &log), 0) << log;
    ASSERT_EQ(test::run_command(test::tool_path() + " forward --model " + c.model() + " --layer " +
                                    std::to_string(c.meta["block"].get<int>()) + " --input " + c.dir +
                                    "/input.safetensors --output " + out +
                                    (mode == QuantCompute::kExact ? " --quant-compute exact" : ""),
                                &log),
              0)
        << log;
    const auto got = SafetensorsFile::open(out);
    EXPECT_EQ(got.info("route.indices").dtype, DType::kI64);
    EXPECT_EQ(got.info("route.weights").dtype, DType::kF32);
    expect_case_output(c, got.read_f32("y"), got.read_f32("route.indices"), got.read_f32("route.weights"),
                       mode == QuantCompute::kAuto ? QuantCompute::kInt8 : mode);
    std::filesystem::remove(out);
  }
}

// An early Mixtral file's split experts (one tensor per expert and projection) run as the fused layout of the same
// weights does, to the bit, under every setting; the layer names each expert's tensors.
TEST(GgufModel, SplitExpertsGiveTheFusedLayoutsBits) {
  const std::string root = test::data_dir() + "/conformance/gguf-extra/";
  const QuantCompute before = quant_compute();
  for (QuantCompute mode : {QuantCompute::kExact, QuantCompute::kInt8}) {
    SCOPED_TRACE(quant_compute_name(mode));
    set_quant_compute(mode);
    ModelMoELayer fused = load_model_layer(root + "llama_mixtral_q4_0/model.gguf", 1);
    ModelMoELayer split = load_model_layer(root + "llama_mixtral_split_q4_0/model.gguf", 1);
    EXPECT_EQ(split.spec().storage, ExpertStorage::kSplitOutIn);
    const Tensor x = SafetensorsFile::open(root + "llama_mixtral_q4_0/input.safetensors").read_f32("x");
    const Tensor yf = fused.forward(x), ys = split.forward(x);
    ASSERT_EQ(yf.shape(), ys.shape());
    EXPECT_EQ(std::memcmp(yf.data(), ys.data(), static_cast<size_t>(yf.numel()) * sizeof(float)), 0);
  }
  set_quant_compute(before);
  const Model m = Model::open(root + "llama_mixtral_split_q4_0/model.gguf");
  const auto names = m.layer_tensor_names(1);
  EXPECT_NE(std::find(names.begin(), names.end(), "blk.1.ffn_down.7.weight"), names.end());
  EXPECT_EQ(names.size(), 1 + 3 * 8u);
}

TEST(GgufModel, BenchTimesAGgufLayer) {
  std::string log;
  const std::string model = test::data_dir() + "/conformance/gguf-extra/llama_mixtral_q4_0/model.gguf";
  ASSERT_EQ(test::run_command(test::tool_path() + " bench --model " + model + " --layer 1 --tokens 1 3 --repeats 1 --json",
                              &log),
            0)
      << log;
  EXPECT_NE(log.find("\"family\": \"llama\""), std::string::npos) << log;
  EXPECT_NE(log.find("{\"tokens\": 3, \"median_ms\": "), std::string::npos) << log;
}

TEST(GgufModel, DeepSeek2SpecCarriesLlamaCppRouting) {
  const std::string path = test::data_dir() + "/conformance/gguf-extra/deepseek2_sigmoid_groups_q4_k/model.gguf";
  const Model m = Model::open(path);
  EXPECT_TRUE(m.is_gguf());
  EXPECT_EQ(m.family().name(), "deepseek2");
  EXPECT_EQ(m.family().num_layers(), 2);
  EXPECT_FALSE(m.family().is_moe_layer(0));
  EXPECT_TRUE(m.family().is_moe_layer(1));
  const MoELayerSpec s = m.family().moe_layer(1);
  EXPECT_EQ(s.router.scoring, RouterScoring::kSigmoid);
  EXPECT_TRUE(s.router.selection_bias);
  EXPECT_EQ(s.selection_bias, "blk.1.exp_probs_b.bias");
  EXPECT_TRUE(s.router.group_limited);
  EXPECT_EQ(s.router.n_group, 4);
  EXPECT_EQ(s.router.top_group, 2);
  EXPECT_EQ(s.router.group_score, GroupScore::kTop2Sum);
  EXPECT_TRUE(s.router.normalize);
  EXPECT_EQ(s.router.normalize_min_sum, 6.103515625e-5);
  EXPECT_EQ(s.router.scaling_factor, 2.5);
  EXPECT_EQ(s.shared.hidden, 32);
  EXPECT_TRUE(s.shared.gate_weight.empty());
  EXPECT_EQ(m.layer_tensor_names(1),
            (std::vector<std::string>{"blk.1.ffn_gate_inp.weight", "blk.1.exp_probs_b.bias", "blk.1.ffn_gate_exps.weight",
                                      "blk.1.ffn_up_exps.weight", "blk.1.ffn_down_exps.weight",
                                      "blk.1.ffn_gate_shexp.weight", "blk.1.ffn_up_shexp.weight",
                                      "blk.1.ffn_down_shexp.weight"}));
  EXPECT_NE(test::error_of([&] { m.family().moe_layer(0); })
                .find("model.gguf: block 0 is dense (deepseek2.leading_dense_block_count = 1)"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { m.family().moe_layer(2); })
                .find("model.gguf: block 2 does not exist (deepseek2.block_count = 2)"),
            std::string::npos);
}

// gpt-oss: the HF family's routing and activation from llama.cpp's fixed settings, MXFP4 experts kept in their
// 0.53-byte panels, and a case that needs the router bias, the expert biases and the clamps.
TEST(GgufModel, GptOssSpecCarriesLlamaCppSemantics) {
  const std::string dir = test::data_dir() + "/conformance/gguf-extra/gpt_oss_mxfp4";
  const Model m = Model::open(dir + "/model.gguf");
  EXPECT_EQ(m.family().name(), "gpt-oss");
  EXPECT_FALSE(m.family().is_moe_layer(0));
  const MoELayerSpec s = m.family().moe_layer(1);
  EXPECT_EQ(s.router.scoring, RouterScoring::kSoftmaxOverTopKLogits);
  EXPECT_TRUE(s.router.logit_bias);
  EXPECT_FALSE(s.router.selection_bias);
  EXPECT_FALSE(s.router.normalize);
  EXPECT_EQ(s.router.scaling_factor, 1.0);
  EXPECT_EQ(s.activation, ExpertActivation::kClampedSwiGLU);
  EXPECT_EQ(s.swiglu_alpha, 1.702);
  EXPECT_EQ(s.swiglu_limit, 7.0);
  EXPECT_TRUE(s.expert_biases);
  EXPECT_EQ(m.layer_tensor_names(1),
            (std::vector<std::string>{"blk.1.ffn_gate_inp.weight", "blk.1.ffn_gate_inp.bias",
                                      "blk.1.ffn_gate_exps.weight", "blk.1.ffn_up_exps.weight",
                                      "blk.1.ffn_down_exps.weight", "blk.1.ffn_gate_exps.bias",
                                      "blk.1.ffn_up_exps.bias", "blk.1.ffn_down_exps.bias"}));
  // Resident: the MXFP4 panels (17 bytes per 32 weights) plus the router, its bias and the expert biases in f32.
  const GgufCase c = load_case(dir);
  const auto& d = c.meta["dims"];
  const int64_t D = d["D"], H = d["H"], E = d["E"];
  const ModelMoELayer layer = m.load_layer(1);
  // (Under HYMOE_ISA=scalar the layer runs on the reference, which holds the decoded weights instead of panels.)
  if (kernels::active_isa() != kernels::Isa::kScalar)
    EXPECT_EQ(layer.resident_weight_bytes(), 3 * D * H * E / 32 * 17 + 4 * E * (2 * H + D) + 4 * (E * D + E));

  // Without the biases or the clamps, y moves far outside the case's tolerance: the case exercises each.
  const Tensor x = SafetensorsFile::open(dir + "/input.safetensors").read_f32("x");
  const Tensor y_exp = SafetensorsFile::open(dir + "/expected.safetensors").read_f32("y");
  const double atol = c.meta["suggested_tolerance"]["y"]["atol"].get<double>();
  const QuantCompute before = quant_compute();
  set_quant_compute(QuantCompute::kExact);
  auto max_error = [&](const MoELayerSpec& changed) {
    ModelMoELayer l = ModelMoELayer::load(m.source(), changed, m.quantization());
    const Tensor y = l.forward(x);
    double worst = 0;
    for (int64_t i = 0; i < y.numel(); ++i) worst = std::max(worst, std::abs(static_cast<double>(y[i]) - y_exp[i]));
    return worst;
  };
  EXPECT_LT(max_error(s), atol);
  MoELayerSpec no_clamp = s;
  no_clamp.swiglu_limit = 1e30;
  EXPECT_GT(max_error(no_clamp), 100 * atol);
  MoELayerSpec plain = s;
  plain.activation = ExpertActivation::kSwiGLU;
  plain.expert_biases = false;
  EXPECT_GT(max_error(plain), 100 * atol);
  set_quant_compute(before);
}

// --model is a GGUF file by its extension or by its magic; anything else is a model directory.
TEST(GgufModel, ModelPathRule) {
  test::TempDir dir("gguf_model_path");
  const std::string gguf = test::data_dir() + "/conformance/gguf/qwen3moe_q8_0/model.gguf";
  std::filesystem::copy_file(gguf, dir.path("renamed.bin"));
  EXPECT_TRUE(is_gguf_model_path(gguf));
  EXPECT_TRUE(is_gguf_model_path(dir.path("renamed.bin")));      // by its magic
  EXPECT_TRUE(is_gguf_model_path(dir.path("absent.gguf")));      // by its name: the reader says what is wrong
  EXPECT_FALSE(is_gguf_model_path(dir.path()));                  // a directory
  EXPECT_FALSE(is_gguf_model_path(test::data_dir() + "/conformance/gguf/qwen3moe_q8_0/input.safetensors"));
  EXPECT_EQ(Model::open(dir.path("renamed.bin")).family().name(), "qwen3moe");
  EXPECT_NE(test::error_of([&] { Model::open(dir.path("absent.gguf")); }).find("absent.gguf"), std::string::npos);
}

TEST(GgufModel, Qwen3DenseBlockIsNamed) {
  const Model m = Model::open(test::data_dir() + "/conformance/gguf/qwen3moe_q8_0/model.gguf");
  EXPECT_FALSE(m.family().is_moe_layer(0));
  EXPECT_NE(test::error_of([&] { m.family().moe_layer(0); })
                .find("model.gguf: block 0 is not a MoE block (no tensor 'blk.0.ffn_gate_inp.weight')"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { m.config(); }).find("a GGUF model has no config.json"), std::string::npos);
}

// The deepseek2 case is built so that ignoring the selection bias, or the group limit, changes the selected experts
// of some tokens: routing without either must disagree with the expected indices.
TEST(GgufModel, DeepSeek2CaseNeedsTheBiasAndTheGroupLimit) {
  const std::string dir = test::data_dir() + "/conformance/gguf-extra/deepseek2_sigmoid_groups_q4_k";
  const Model m = Model::open(dir + "/model.gguf");
  const MoELayerSpec s = m.family().moe_layer(1);
  const GgufFile f = GgufFile::open(dir + "/model.gguf");
  auto f32 = [&](const std::string& name) {
    const auto bytes = f.bytes(name);
    std::vector<float> v(bytes.size() / sizeof(float));
    std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
  };
  ModelRouterWeights w;
  w.weight = Tensor(Shape{s.num_experts, s.dim}, f32(s.router_weight));
  w.selection_bias = f32(s.selection_bias);
  const Tensor x = SafetensorsFile::open(dir + "/input.safetensors").read_f32("x");
  const Tensor expected = SafetensorsFile::open(dir + "/expected.safetensors").read_f32("route.indices");
  auto tokens_differing = [&](RouterOptions o) {
    const Routing r = route_model_tokens(o, w, x, s.top_k);
    int differing = 0;
    for (int64_t t = 0; t < x.dim(0); ++t)
      for (int64_t k = 0; k < s.top_k; ++k)
        if (r.indices[static_cast<size_t>(t * s.top_k + k)] != expected[t * s.top_k + k]) {
          ++differing;
          break;
        }
    return differing;
  };
  EXPECT_EQ(tokens_differing(s.router), 0);
  RouterOptions no_bias = s.router;
  no_bias.selection_bias = false;
  EXPECT_GE(tokens_differing(no_bias), 2);
  RouterOptions no_groups = s.router;
  no_groups.group_limited = false;
  EXPECT_GE(tokens_differing(no_groups), 2);
}

}  // namespace
}  // namespace hymoe
