// hidden_act, the expert MLPs' activation: transformers computes down(act(gate x) * up x) with
// act = ACT2FN[config.hidden_act] in the routed and the shared experts of every family but gpt-oss. Each float32
// shared case runs with its config's hidden_act rewritten, against a float64 computation of the block written here
// from the checkpoint's tensors; an activation hymoe does not run is a named error from the library, from
// `hymoe forward --model` and from `hymoe inspect`, which names the activation it runs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <numbers>

#include <nlohmann/json.hpp>

#include "hymoe/model.h"
#include "hymoe/safetensors.h"
#include "models/model_test_util.h"
#include "test_util.h"

namespace hymoe {
namespace {

using test::TempDir;

// The functions of transformers' activations.py, written out here rather than taken from the kernels'
// activation.h: the erf GELU (nn.functional.gelu), the tanh form (gelu(approximate="tanh"), NewGELUActivation).
double act_of(const std::string& name, double z) {
  if (name == "silu" || name == "swish") return z / (1.0 + std::exp(-z));
  if (name == "gelu") return 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0)));
  if (name == "gelu_pytorch_tanh" || name == "gelu_new")
    return 0.5 * z * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (z + 0.044715 * z * z * z)));
  if (name == "relu") return z > 0 ? z : 0.0;
  ADD_FAILURE() << "no reference for " << name;
  return 0.0;
}

// The case's directory copied with config.json's hidden_act set to `act`.
void copy_with_hidden_act(const std::string& name, const std::string& dir, const std::string& act) {
  test::copy_hf_case(name, dir);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
  config["hidden_act"] = act;
  std::ofstream(dir + "/config.json") << config.dump(2);
}

// act-gated MLP of one token in float64: down(act(gate x) * up x); gate and up (H, D), down (D, H) as nn.Linear.
std::vector<double> mlp(const std::string& act, const Tensor& gate, const Tensor& up, const Tensor& down,
                        const float* x) {
  const int64_t H = gate.dim(0), D = gate.dim(1);
  std::vector<double> h(static_cast<size_t>(H)), y(static_cast<size_t>(D), 0.0);
  for (int64_t i = 0; i < H; ++i) {
    double g = 0, u = 0;
    for (int64_t d = 0; d < D; ++d) {
      g += static_cast<double>(gate[i * D + d]) * x[d];
      u += static_cast<double>(up[i * D + d]) * x[d];
    }
    h[static_cast<size_t>(i)] = act_of(act, g) * u;
  }
  for (int64_t d = 0; d < D; ++d)
    for (int64_t i = 0; i < H; ++i)
      y[static_cast<size_t>(d)] += static_cast<double>(down[d * H + i]) * h[static_cast<size_t>(i)];
  return y;
}

// The block in float64 under activation `act`, with the routing the layer chose (routing does not read hidden_act;
// hf_conformance_test checks it against transformers): y = sum_k w_k expert_k(x) + [sigmoid(g . x)] shared(x).
Tensor reference_block(const std::string& act, const ModelMoELayer& layer, const SafetensorsFile& w, const Tensor& x) {
  const MoELayerSpec& s = layer.spec();
  const int64_t D = s.dim, K = s.top_k, T = x.numel() / D;
  const Routing& r = layer.last_routing();
  std::vector<Tensor> gate, up, down;
  for (int64_t e = 0; e < s.num_experts; ++e) {
    const std::string p = s.experts_prefix + std::to_string(e) + ".";
    gate.push_back(w.read_f32(p + s.gate_name + ".weight"));
    up.push_back(w.read_f32(p + s.up_name + ".weight"));
    down.push_back(w.read_f32(p + s.down_name + ".weight"));
  }
  Tensor y(x.shape());
  for (int64_t t = 0; t < T; ++t) {
    const float* xt = x.data() + t * D;
    std::vector<double> acc(static_cast<size_t>(D), 0.0);
    for (int64_t k = 0; k < K; ++k) {
      const int32_t e = r.indices[static_cast<size_t>(t * K + k)];
      const double wk = r.weights[static_cast<size_t>(t * K + k)];
      const std::vector<double> out =
          mlp(act, gate[static_cast<size_t>(e)], up[static_cast<size_t>(e)], down[static_cast<size_t>(e)], xt);
      for (int64_t d = 0; d < D; ++d) acc[static_cast<size_t>(d)] += wk * out[static_cast<size_t>(d)];
    }
    if (s.shared.hidden > 0) {
      const std::vector<double> out = mlp(act, w.read_f32(s.shared.prefix + s.shared.gate_name + ".weight"),
                                          w.read_f32(s.shared.prefix + s.shared.up_name + ".weight"),
                                          w.read_f32(s.shared.prefix + s.shared.down_name + ".weight"), xt);
      double scale = 1.0;
      if (!s.shared.gate_weight.empty()) {
        const Tensor g = w.read_f32(s.shared.gate_weight);
        double z = 0;
        for (int64_t d = 0; d < D; ++d) z += static_cast<double>(g[d]) * xt[d];
        scale = 1.0 / (1.0 + std::exp(-z));
      }
      for (int64_t d = 0; d < D; ++d) acc[static_cast<size_t>(d)] += scale * out[static_cast<size_t>(d)];
    }
    for (int64_t d = 0; d < D; ++d) y[t * D + d] = static_cast<float>(acc[static_cast<size_t>(d)]);
  }
  return y;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, static_cast<double>(std::abs(t[i])));
  return m;
}
double max_diff(const Tensor& a, const Tensor& b) {
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, static_cast<double>(std::abs(a[i] - b[i])));
  return m;
}

// The float32 cases of every hidden_act family: each has routed experts, Qwen2-MoE a gated shared expert and
// DeepSeek-V2/V3 ungated shared experts, so both halves of the block see the activation.
const char* const kCases[] = {"mixtral_e8_k2", "qwen2_moe_e8_k4",           "qwen3_moe_e16_k4_norm",
                              "olmoe_e16_k4",  "deepseek_v2_greedy_e16_k6", "deepseek_v3_e16_g4_tg2_k4"};

TEST(ModelActivation, HiddenActRunsTransformersActivation) {
  const struct {
    const char* hidden_act;
    ExpertActivation expected;
  } acts[] = {{"silu", ExpertActivation::kSwiGLU},        {"swish", ExpertActivation::kSwiGLU},
              {"gelu", ExpertActivation::kGeGLU},         {"gelu_pytorch_tanh", ExpertActivation::kGeGLUTanh},
              {"gelu_new", ExpertActivation::kGeGLUTanh}, {"relu", ExpertActivation::kReGLU}};
  for (const char* name : kCases) {
    const Tensor x = SafetensorsFile::open(test::hf_case_dir(name) + "/input.safetensors").read_f32("x");
    for (const auto& a : acts) {
      SCOPED_TRACE(std::string(name) + " hidden_act=" + a.hidden_act);
      const TempDir dir("hf_act");
      copy_with_hidden_act(name, dir.path(), a.hidden_act);
      const Model model = Model::open(dir.path());
      ModelMoELayer layer = model.load_layer(1);
      EXPECT_EQ(layer.spec().activation, a.expected);
      const Tensor y = layer.forward(x);
      const SafetensorsFile weights = SafetensorsFile::open(dir.path("weights.safetensors"));
      const Tensor want = reference_block(a.hidden_act, layer, weights, x);
      const double scale = max_abs(want);
      ASSERT_GT(scale, 0.1);
      // float32 compute against float64: two chained dot products of 64 and 32 terms, far inside 1e-5 of max|y|.
      EXPECT_LE(max_diff(y, want), 1e-5 * scale);
      // The test tells the activations apart: SiLU's block is far from the others' (0.08-0.34 of max|y|), and the
      // erf and tanh GELUs differ here by more than the tolerance.
      if (std::string(a.hidden_act) != "silu" && std::string(a.hidden_act) != "swish")
        EXPECT_GT(max_diff(y, reference_block("silu", layer, weights, x)), 1e-2 * scale);
      if (std::string(a.hidden_act) == "gelu")
        EXPECT_GT(max_diff(y, reference_block("gelu_new", layer, weights, x)), 3e-5 * scale);
    }
  }
}

TEST(ModelActivation, UnknownHiddenActIsNamed) {
  const TempDir dir("hf_act_unknown");
  copy_with_hidden_act("deepseek_v2_greedy_e16_k6", dir.path(), "quick_gelu");
  const std::string msg = test::error_of([&] { load_model_layer(dir.path(), 1); });
  for (const char* part : {"config.json", "hidden_act='quick_gelu'", "supported: silu, swish, gelu",
                           "gelu_pytorch_tanh", "gelu_new", "relu"})
    EXPECT_NE(msg.find(part), std::string::npos) << part << " in: " << msg;
  const std::string forward = test::tool_path() + " forward --model " + dir.path() + " --layer 1 --input " +
                              test::hf_case_dir("deepseek_v2_greedy_e16_k6") + "/input.safetensors --output " +
                              dir.path("out.safetensors");
  for (const std::string& command : {forward, test::tool_path() + " inspect " + dir.path()}) {
    std::string log;
    EXPECT_NE(test::run_command(command, &log), 0) << command << "\n" << log;
    EXPECT_NE(log.find("hidden_act='quick_gelu'"), std::string::npos) << command << "\n" << log;
  }
}

// gpt-oss's experts compute their own clamped gate: GptOssExperts never reads hidden_act.
TEST(ModelActivation, GptOssIgnoresHiddenAct) {
  const TempDir dir("hf_act_oss");
  copy_with_hidden_act("gpt_oss_e8_k2", dir.path(), "gelu");
  EXPECT_EQ(Model::open(dir.path()).family().moe_layer(1).activation, ExpertActivation::kClampedSwiGLU);
}

// `hymoe inspect` names the activation the layer runs, for the routed and the shared experts; `hymoe forward
// --model` gives the library's bits.
TEST(ModelActivation, ToolsRunTheActivation) {
  const TempDir dir("hf_act_tools");
  copy_with_hidden_act("deepseek_v2_greedy_e16_k6", dir.path(), "gelu_pytorch_tanh");
  std::string log;
  ASSERT_EQ(test::run_command(test::tool_path() + " inspect " + dir.path(), &log), 0) << log;
  EXPECT_NE(log.find("expert MLP: GeGLU (tanh-approximate GELU)"), std::string::npos) << log;
  EXPECT_NE(log.find("shared expert: GeGLU (tanh-approximate GELU) of 64"), std::string::npos) << log;
  EXPECT_EQ(log.find("SwiGLU"), std::string::npos) << log;
  const TempDir io("hf_act_io");  // outside the model directory, whose safetensors are the model's
  const std::string input = test::hf_case_dir("deepseek_v2_greedy_e16_k6") + "/input.safetensors";
  ASSERT_EQ(test::run_command(test::tool_path() + " forward --model " + dir.path() + " --layer 1 --input " + input +
                                  " --output " + io.path("out.safetensors"),
                              &log),
            0)
      << log;
  const Tensor y_tool = SafetensorsFile::open(io.path("out.safetensors")).read_f32("y");
  ModelMoELayer layer = load_model_layer(dir.path(), 1);
  const Tensor y = layer.forward(SafetensorsFile::open(input).read_f32("x"));
  ASSERT_EQ(y_tool.numel(), y.numel());
  EXPECT_EQ(0, std::memcmp(y_tool.data(), y.data(), sizeof(float) * static_cast<size_t>(y.numel())));
}

}  // namespace
}  // namespace hymoe
