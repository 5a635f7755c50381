// One test per router/MLP option of the families: each shows the option changing a decision or a value that
// transformers' semantics (docs/models.md) fix by hand. Logits are set directly: x is a one-hot-free row of
// the logits and the router weight the identity, so x . W^T is exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "hymoe/error.h"
#include "hymoe/model.h"
#include "hymoe/threads.h"
#include "kernels/ffn/grouped_ffn.h"
#include "models/model_router.h"

namespace hymoe {
namespace {

Routing route_logits(const RouterOptions& o, const std::vector<float>& logits, int64_t K,
                     std::vector<float> selection_bias = {}, std::vector<float> logit_bias = {}) {
  const int64_t E = static_cast<int64_t>(logits.size());
  ModelRouterWeights w;
  w.weight = Tensor(Shape{E, E});
  for (int64_t e = 0; e < E; ++e) w.weight[e * E + e] = 1.0f;
  w.selection_bias = std::move(selection_bias);
  w.logit_bias = std::move(logit_bias);
  return route_model_tokens(o, w, Tensor(Shape{1, E}, logits), K);
}

std::vector<int32_t> sorted(std::vector<int32_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

double softmax_at(const std::vector<float>& l, int i) {
  double s = 0;
  for (float v : l) s += std::exp(static_cast<double>(v));
  return std::exp(static_cast<double>(l[static_cast<size_t>(i)])) / s;
}
double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

TEST(ModelRouterOptions, GroupLimitingByMaxChangesTheSelection) {  // DeepSeek-V2 group_limited_greedy
  const std::vector<float> l{5.0f, 1.0f, 4.9f, 0.0f, 4.8f, 0.0f, 0.0f, 0.0f};
  RouterOptions o;
  o.scaling_factor = 16.0;
  const Routing greedy = route_logits(o, l, 2);
  EXPECT_EQ(greedy.indices, (std::vector<int32_t>{0, 2}));
  o.group_limited = true;
  o.n_group = 4;
  o.top_group = 1;
  o.group_score = GroupScore::kMax;
  const Routing grouped = route_logits(o, l, 2);
  EXPECT_EQ(grouped.indices, (std::vector<int32_t>{0, 1}));  // only group 0 = {0, 1} is kept
  // Weights: the unmasked probabilities times the scale, not renormalized.
  EXPECT_NEAR(grouped.weights[0], 16.0 * softmax_at(l, 0), 1e-6);
  EXPECT_NEAR(grouped.weights[1], 16.0 * softmax_at(l, 1), 1e-6);
}

// DeepSeek-V4: scores sqrt(softplus(l)), the bias added to them for choosing, weights the unbiased scores; large
// logits do not overflow (softplus(l) = l + log1p(exp(-l))).
TEST(ModelRouterOptions, SqrtSoftplusScores) {
  const std::vector<float> l{2.0f, -1.0f, 0.5f, 300.0f};
  auto score = [](double z) { return std::sqrt(std::log1p(std::exp(z))); };
  RouterOptions o;
  o.scoring = RouterScoring::kSqrtSoftplus;
  o.selection_bias = true;
  const Routing r = route_logits(o, l, 2, {0.0f, 2.0f, 0.0f, 0.0f});
  EXPECT_EQ(r.indices, (std::vector<int32_t>{3, 1}));  // the bias lifts expert 1 above expert 0
  EXPECT_NEAR(r.weights[0], std::sqrt(300.0), 1e-4);
  EXPECT_NEAR(r.weights[1], score(-1.0), 1e-6);
  EXPECT_TRUE(std::isfinite(r.scores[3]));
}

// Kolibri-1: the bias added to the logits for choosing, the weights the chosen logits' sigmoids.
TEST(ModelRouterOptions, LogitsThenSigmoid) {
  const std::vector<float> l{1.0f, 0.9f, -2.0f};
  RouterOptions o;
  o.scoring = RouterScoring::kLogitsThenSigmoid;
  o.selection_bias = true;
  const Routing r = route_logits(o, l, 1, {0.0f, 0.2f, 0.0f});
  EXPECT_EQ(r.indices, (std::vector<int32_t>{1}));  // 0.9 + 0.2 > 1.0 on the logits' scale
  EXPECT_NEAR(r.weights[0], sigmoid(0.9), 1e-6);
  o.normalize = true;
  EXPECT_NEAR(route_logits(o, l, 2, {0.0f, 0.2f, 0.0f}).weights[0], sigmoid(0.9) / (sigmoid(0.9) + sigmoid(1.0)), 1e-6);
}

TEST(ModelRouterOptions, GroupLimitingByTopTwoSumChangesTheSelection) {  // DeepSeek-V3
  // Group 0 holds the single best expert; group 1 has the better sum of two.
  const std::vector<float> l{3.0f, -3.0f, 1.0f, 0.9f};
  RouterOptions o;
  o.scoring = RouterScoring::kSigmoid;
  o.selection_bias = true;
  o.normalize = true;
  o.normalize_epsilon = 1e-20;
  o.scaling_factor = 2.5;
  const std::vector<float> zero_bias(4, 0.0f);
  o.group_limited = true;  // 1 group of 4: a no-op
  EXPECT_EQ(route_logits(o, l, 2, zero_bias).indices, (std::vector<int32_t>{0, 2}));
  o.n_group = 2;
  o.top_group = 1;
  o.group_score = GroupScore::kTop2Sum;
  o.excluded_score = -std::numeric_limits<float>::infinity();
  const Routing r = route_logits(o, l, 2, zero_bias);
  EXPECT_EQ(r.indices, (std::vector<int32_t>{2, 3}));
  const double s2 = sigmoid(1.0), s3 = sigmoid(0.9);
  EXPECT_NEAR(r.weights[0], 2.5 * s2 / (s2 + s3), 1e-6);
  EXPECT_NEAR(r.weights[1], 2.5 * s3 / (s2 + s3), 1e-6);
}

TEST(ModelRouterOptions, CorrectionBiasChangesTheSelectionNotTheWeights) {  // DeepSeek-V3
  const std::vector<float> l{2.0f, 1.9f, 0.0f, -1.0f};
  RouterOptions o;
  o.scoring = RouterScoring::kSigmoid;
  o.selection_bias = true;
  o.normalize = true;
  o.normalize_epsilon = 1e-20;
  o.scaling_factor = 2.5;
  EXPECT_EQ(route_logits(o, l, 2, {0, 0, 0, 0}).indices, (std::vector<int32_t>{0, 1}));
  const Routing r = route_logits(o, l, 2, {0.0f, 0.0f, 0.5f, 0.0f});
  EXPECT_EQ(r.indices, (std::vector<int32_t>{2, 0}));  // sigmoid(0) + 0.5 = 1.0 beats sigmoid(2) = 0.88
  const double s0 = sigmoid(2.0), s2 = sigmoid(0.0);  // weights from the unbiased scores
  EXPECT_NEAR(r.weights[0], 2.5 * s2 / (s0 + s2), 1e-6);
  EXPECT_NEAR(r.weights[1], 2.5 * s0 / (s0 + s2), 1e-6);
}

TEST(ModelRouterOptions, NormalizationOnAndOff) {  // Qwen/OLMoE norm_topk_prob; Mixtral always on
  const std::vector<float> l{1.0f, 2.0f, 0.5f, 1.5f};
  RouterOptions o;
  o.normalize = false;
  const Routing raw = route_logits(o, l, 2);
  EXPECT_EQ(raw.indices, (std::vector<int32_t>{1, 3}));
  EXPECT_NEAR(raw.weights[0], softmax_at(l, 1), 1e-7);
  EXPECT_NEAR(raw.weights[1], softmax_at(l, 3), 1e-7);
  EXPECT_LT(raw.weights[0] + raw.weights[1], 0.99f);
  o.normalize = true;
  const Routing norm = route_logits(o, l, 2);
  const double p1 = softmax_at(l, 1), p3 = softmax_at(l, 3);
  EXPECT_NEAR(norm.weights[0], p1 / (p1 + p3), 1e-7);
  EXPECT_NEAR(norm.weights[1], p3 / (p1 + p3), 1e-7);
}

TEST(ModelRouterOptions, GptOssSoftmaxOverTheChosenLogitsWithBias) {
  const std::vector<float> l{1.0f, 2.0f, 0.5f, 1.5f};
  RouterOptions o;
  o.scoring = RouterScoring::kSoftmaxOverTopKLogits;
  o.logit_bias = true;
  const Routing r = route_logits(o, l, 2, {}, {0.0f, 0.0f, 2.0f, 0.0f});  // expert 2's logit becomes 2.5
  EXPECT_EQ(r.indices, (std::vector<int32_t>{2, 1}));
  EXPECT_NEAR(r.logits[2], 2.5f, 0.0f);
  EXPECT_NEAR(r.weights[0], 1.0 / (1.0 + std::exp(-0.5)), 1e-7);
  EXPECT_NEAR(r.weights[1], 1.0 / (1.0 + std::exp(0.5)), 1e-7);
}

// The clamped SwiGLU with biases, hit on both clamps, on every grouped-FFN implementation.
TEST(ModelExpertOptions, GptOssClampIsHit) {
  using namespace kernels;
  // D = 2, H = 2: gate = x . G + gb, up = x . U + ub (in-out layout), down (H, D) in-out plus db.
  const float G[4] = {10.0f, 1.0f, 0.0f, 0.0f};   // (D, H): x = (1, 0) gives gate (10, 1)
  const float U[4] = {-9.0f, 0.5f, 0.0f, 0.0f};   // up (-9, 0.5)
  const float Dn[4] = {1.0f, 0.0f, 0.0f, 1.0f};   // identity
  const float gb[2] = {0.5f, 0.0f}, ub[2] = {0.0f, 0.25f}, db[2] = {0.125f, -1.0f};
  MlpWeightsView w;
  w.gate = {G, DType::kF32, WeightLayout::kInOut, 2, 2};
  w.up = {U, DType::kF32, WeightLayout::kInOut, 2, 2};
  w.down = {Dn, DType::kF32, WeightLayout::kInOut, 2, 2};
  w.gate_bias = gb;
  w.up_bias = ub;
  w.down_bias = db;
  GroupedFfnShape shape{1, 2, 2, Activation::kClampedSwiGLU};
  const double alpha = 1.702, limit = 7.0;
  // Unit 0: gate 10.5 -> 7 (clamped), up -9 -> -7 (clamped). Unit 1: gate 1, up 0.75 (unclamped).
  const double h0 = (-7.0 + 1.0) * 7.0 * sigmoid(alpha * 7.0);
  const double h1 = (0.75 + 1.0) * 1.0 * sigmoid(alpha * 1.0);
  const double scale = 0.5;
  const double expected[2] = {scale * (h0 + 0.125), scale * (h1 - 1.0)};
  const float x[2] = {1.0f, 0.0f};
  const float row_scale[1] = {static_cast<float>(scale)};
  const int64_t offsets[2] = {0, 1};
  for (auto make : {+[](const GroupedFfnShape& s, std::span<const MlpWeightsView> v) { return make_grouped_ffn_ref(s, v); },
                    +[](const GroupedFfnShape& s, std::span<const MlpWeightsView> v) { return make_grouped_ffn(s, v, Isa::kScalar); },
                    +[](const GroupedFfnShape& s, std::span<const MlpWeightsView> v) { return make_grouped_ffn(s, v); }}) {
    const auto ffn = make(shape, {&w, 1});
    float y[2] = {0, 0};
    GroupedFfnArgs args;
    args.offsets = offsets;
    args.x = x;
    args.scale = row_scale;
    args.y = y;
    ffn->run(args);
    EXPECT_NEAR(y[0], expected[0], 1e-5) << ffn->name();
    EXPECT_NEAR(y[1], expected[1], 1e-5) << ffn->name();
  }
}

// Which layers are MoE, and the config spellings releases and transformers differ in.
TEST(ModelFamilies, LayerRulesAndKeySpellings) {
  const HfConfig qwen = HfConfig::parse(
      R"({"model_type": "qwen3_moe", "hidden_size": 8, "num_hidden_layers": 6, "num_experts": 4,
          "num_experts_per_tok": 2, "moe_intermediate_size": 4, "decoder_sparse_step": 2, "mlp_only_layers": [3],
          "norm_topk_prob": true, "torch_dtype": "bfloat16"})", "qwen.json");
  const auto q = make_model_family(qwen);
  std::vector<int64_t> moe;
  for (int64_t l = 0; l < q->num_layers(); ++l)
    if (q->is_moe_layer(l)) moe.push_back(l);
  EXPECT_EQ(moe, (std::vector<int64_t>{1, 5}));  // (l+1) % 2 == 0, minus mlp_only_layers {3}
  EXPECT_TRUE(q->moe_layer(1).router.normalize);
  EXPECT_THROW(q->moe_layer(2), Error);
  const HfConfig qwen_t5 = HfConfig::parse(
      R"({"model_type": "qwen3_moe", "hidden_size": 8, "num_hidden_layers": 1, "num_local_experts": 4,
          "num_experts_per_tok": 2, "moe_intermediate_size": 4, "dtype": "bfloat16"})", "qwen_t5.json");
  EXPECT_EQ(make_model_family(qwen_t5)->moe_layer(0).num_experts, 4);
  EXPECT_FALSE(make_model_family(qwen_t5)->moe_layer(0).router.normalize);  // transformers' default
  const HfConfig oss = HfConfig::parse(
      R"({"model_type": "gpt_oss", "hidden_size": 64, "num_hidden_layers": 2, "num_local_experts": 4,
          "experts_per_token": 2, "intermediate_size": 32})", "oss.json");
  const MoELayerSpec s = make_model_family(oss)->moe_layer(1);
  EXPECT_EQ(s.top_k, 2);
  EXPECT_DOUBLE_EQ(s.swiglu_alpha, 1.702);
  EXPECT_DOUBLE_EQ(s.swiglu_limit, 7.0);
  const HfConfig v3 = HfConfig::parse(
      R"({"model_type": "deepseek_v3", "hidden_size": 8, "num_hidden_layers": 4, "n_routed_experts": 8,
          "num_experts_per_tok": 2, "moe_intermediate_size": 4, "first_k_dense_replace": 3, "n_group": 4,
          "topk_group": 2, "n_shared_experts": 2, "routed_scaling_factor": 2.5})", "v3.json");
  const auto f = make_model_family(v3);
  EXPECT_FALSE(f->is_moe_layer(2));
  EXPECT_TRUE(f->is_moe_layer(3));
  EXPECT_EQ(f->moe_layer(3).shared.hidden, 8);  // moe_intermediate_size * n_shared_experts
  EXPECT_EQ(f->moe_layer(3).router.n_group, 4);
  // Kimi-K2 ships the V3 architecture as model_type "kimi_k2": the same family, the same routing.
  std::string kimi_text = R"({"model_type": "kimi_k2", "hidden_size": 8, "num_hidden_layers": 4, "n_routed_experts": 8,
          "num_experts_per_tok": 2, "moe_intermediate_size": 4, "first_k_dense_replace": 1, "n_group": 1,
          "topk_group": 1, "n_shared_experts": 1, "routed_scaling_factor": 2.827})";
  const auto kimi = make_model_family(HfConfig::parse(kimi_text, "kimi.json"));
  EXPECT_FALSE(kimi->is_moe_layer(0));
  EXPECT_TRUE(kimi->is_moe_layer(1));
  EXPECT_EQ(kimi->moe_layer(1).router.scoring, RouterScoring::kSigmoid);
  EXPECT_TRUE(kimi->moe_layer(1).router.selection_bias);
  EXPECT_DOUBLE_EQ(kimi->moe_layer(1).router.scaling_factor, 2.827);
  // GLM-4.5/4.6 (glm4_moe): V3's block under Glm4MoeConfig's defaults, which a config.json may leave out:
  // first_k_dense_replace 1, n_group 1, topk_group 1, routed_scaling_factor 1.0 (DeepSeek-V3's: 3, 8, 4, 2.5).
  const auto glm = make_model_family(HfConfig::parse(
      R"({"model_type": "glm4_moe", "hidden_size": 8, "num_hidden_layers": 3, "n_routed_experts": 8,
          "num_experts_per_tok": 2, "moe_intermediate_size": 4})", "glm.json"));
  EXPECT_EQ(glm->name(), "glm4_moe");
  EXPECT_FALSE(glm->is_moe_layer(0));
  EXPECT_TRUE(glm->is_moe_layer(1));
  const MoELayerSpec g = glm->moe_layer(1);
  EXPECT_EQ(g.router.scoring, RouterScoring::kSigmoid);
  EXPECT_TRUE(g.router.selection_bias);
  EXPECT_EQ(g.router.n_group, 1);
  EXPECT_EQ(g.router.top_group, 1);
  EXPECT_DOUBLE_EQ(g.router.scaling_factor, 1.0);
  EXPECT_EQ(g.shared.hidden, 4);
  EXPECT_EQ(g.selection_bias, "model.layers.1.mlp.gate.e_score_correction_bias");
  EXPECT_TRUE(g.router.normalize);
  // dots.llm1 (dots1): Dots1Config's defaults, norm_topk_prob false among them; n_shared_experts has none.
  const std::string dots_text = R"({"model_type": "dots1", "hidden_size": 8, "num_hidden_layers": 2,
      "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 4)";
  const auto dots = make_model_family(HfConfig::parse(dots_text + R"(, "n_shared_experts": 2})", "dots.json"));
  EXPECT_TRUE(dots->is_moe_layer(0));  // first_k_dense_replace 0
  const MoELayerSpec d = dots->moe_layer(0);
  EXPECT_FALSE(d.router.normalize);
  EXPECT_DOUBLE_EQ(d.router.scaling_factor, 1.0);
  EXPECT_EQ(d.router.n_group, 1);
  EXPECT_EQ(d.shared.hidden, 8);
  try {
    make_model_family(HfConfig::parse(dots_text + "}", "dots.json"))->moe_layer(0);
    ADD_FAILURE() << "a dots1 config without n_shared_experts was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("n_shared_experts"), std::string::npos) << e.what();
  }
  // DeepSeek-V3.2 and GLM-4.7-Flash: MoE where mlp_layer_types says "sparse"; absent, the list their config
  // classes derive (first_k_dense_replace dense layers; glm4_moe_lite: the first), routed_scaling_factor 2.5 and 1.8.
  const std::string v32_text = R"({"model_type": "deepseek_v32", "hidden_size": 8, "num_hidden_layers": 4,
      "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 4, "n_group": 2, "topk_group": 1)";
  const auto v32 = make_model_family(HfConfig::parse(v32_text + R"(, "mlp_layer_types": ["dense", "sparse", "dense", "sparse"]})", "v32.json"));
  EXPECT_FALSE(v32->is_moe_layer(0));
  EXPECT_TRUE(v32->is_moe_layer(1));
  EXPECT_FALSE(v32->is_moe_layer(2));
  EXPECT_DOUBLE_EQ(v32->moe_layer(3).router.scaling_factor, 2.5);
  EXPECT_THROW(v32->moe_layer(2), Error);
  const auto v32_derived = make_model_family(HfConfig::parse(v32_text + R"(, "first_k_dense_replace": 2})", "v32.json"));
  EXPECT_FALSE(v32_derived->is_moe_layer(1));
  EXPECT_TRUE(v32_derived->is_moe_layer(2));
  EXPECT_THROW(make_model_family(HfConfig::parse(v32_text + R"(, "mlp_layer_types": ["dense", "moe", "dense", "sparse"]})", "v32.json")),
               Error);
  EXPECT_THROW(make_model_family(HfConfig::parse(v32_text + R"(, "mlp_layer_types": ["dense"]})", "v32.json")), Error);
  const auto lite = make_model_family(HfConfig::parse(
      R"({"model_type": "glm4_moe_lite", "hidden_size": 8, "num_hidden_layers": 3, "n_routed_experts": 8,
          "num_experts_per_tok": 2, "moe_intermediate_size": 4})", "lite.json"));
  EXPECT_FALSE(lite->is_moe_layer(0));
  EXPECT_TRUE(lite->is_moe_layer(2));
  EXPECT_DOUBLE_EQ(lite->moe_layer(1).router.scaling_factor, 1.8);
  EXPECT_EQ(lite->moe_layer(1).router.n_group, 1);
}

// The families that are another's block under their own config class: its defaults and key names.
// The OCR models' language models: DeepSeek-OCR-2 needs mlp_layer_types (its config class derives none);
// Unlimited-OCR takes its keys from text_config or, as its original configs have them, language_config, and derives
// the layer rule from first_k_dense_replace (default 1) with group defaults 1/1.
TEST(ModelFamilies, OcrLanguageModelsRunDeepSeekV2sBlock) {
  auto family = [](const std::string& text) { return make_model_family(HfConfig::parse(text, "config.json")); };
  const std::string keys = R"("hidden_size": 8, "num_hidden_layers": 3, "n_routed_experts": 8,
      "num_experts_per_tok": 2, "moe_intermediate_size": 4)";
  try {
    family(R"({"model_type": "deepseek_ocr2", "text_config": {)" + keys + "}}");
    ADD_FAILURE() << "deepseek_ocr2 without mlp_layer_types was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing key 'mlp_layer_types'"), std::string::npos) << e.what();
  }
  const auto ocr2 = family(R"({"model_type": "deepseek_ocr2", "text_config": {)" + keys +
                           R"(, "mlp_layer_types": ["sparse", "dense", "sparse"]}})");
  EXPECT_TRUE(ocr2->is_moe_layer(0));
  EXPECT_FALSE(ocr2->is_moe_layer(1));
  EXPECT_EQ(ocr2->moe_layer(2).shared.hidden, 8);  // n_shared_experts 2 by default
  EXPECT_EQ(ocr2->moe_layer(2).router_weight, "model.layers.2.mlp.gate.weight");
  const auto original = family(R"({"model_type": "unlimited_ocr", "language_config": {)" + keys +
                               R"(, "topk_method": "group_limited_greedy", "n_group": 4, "topk_group": 2}})");
  EXPECT_FALSE(original->is_moe_layer(0));  // first_k_dense_replace 1 by default
  EXPECT_TRUE(original->is_moe_layer(1));
  EXPECT_EQ(original->moe_layer(1).router.n_group, 4);
  EXPECT_EQ(original->moe_layer(1).router.group_score, GroupScore::kMax);
  const auto saved = family(R"({"model_type": "unlimited_ocr", "text_config": {)" + keys +
                            R"(, "topk_method": "group_limited_greedy", "first_k_dense_replace": 2}})");
  EXPECT_FALSE(saved->is_moe_layer(1));
  EXPECT_EQ(saved->moe_layer(2).router.n_group, 1);
  // Sarvam's MLA configs may name the counts num_experts and num_shared_experts; Beam reads no
  // first_k_dense_replace (absent mlp_layer_types: the first min(3, n) layers dense).
  const MoELayerSpec sarvam = family(R"({"model_type": "sarvam_mla", "hidden_size": 8, "num_hidden_layers": 2,
      "num_experts": 8, "num_shared_experts": 2, "num_experts_per_tok": 2, "moe_intermediate_size": 4})")->moe_layer(1);
  EXPECT_EQ(sarvam.num_experts, 8);
  EXPECT_EQ(sarvam.shared.hidden, 8);
  const auto beam = family(R"({"model_type": "beam", "hidden_size": 8, "num_hidden_layers": 4, "num_experts": 8,
      "num_experts_per_tok": 2, "moe_intermediate_size": 4, "first_k_dense_replace": 1})");
  EXPECT_FALSE(beam->is_moe_layer(2));
  EXPECT_TRUE(beam->is_moe_layer(3));
}

// dots.llm3's releases keep the text keys at the top level (model_type dots3_note); without mlp_layer_types its
// MoE layers come from first_k_dense_replace and moe_layer_freq, an int (l % f == 0) or a list (entry != 0); the
// shared expert is shared_experts_intermediate_size (alias moe_shared_expert_intermediate_size) times the count.
// A.X K2 scores excluded groups 0.0.
TEST(ModelFamilies, LegacyLayerFrequencyAndSharedWidthTimesCount) {
  auto family = [](const std::string& text) { return make_model_family(HfConfig::parse(text, "config.json")); };
  const std::string keys = R"("hidden_size": 8, "num_hidden_layers": 5, "n_routed_experts": 8,
      "num_experts_per_tok": 2, "moe_intermediate_size": 4, "n_shared_experts": 2)";
  const auto by_int = family(R"({"model_type": "dots3_note", )" + keys +
                             R"(, "moe_layer_freq": 2, "moe_shared_expert_intermediate_size": 3})");
  EXPECT_FALSE(by_int->is_moe_layer(0));  // first_k_dense_replace 1 by default
  EXPECT_FALSE(by_int->is_moe_layer(1));
  EXPECT_TRUE(by_int->is_moe_layer(2));
  EXPECT_FALSE(by_int->is_moe_layer(3));
  EXPECT_TRUE(by_int->is_moe_layer(4));
  EXPECT_EQ(by_int->moe_layer(2).shared.hidden, 6);
  const auto by_list = family(R"({"model_type": "dots3_note", )" + keys +
                              R"(, "moe_layer_freq": [1, 1, 0, 1, 0], "first_k_dense_replace": 0})");
  EXPECT_TRUE(by_list->is_moe_layer(0));
  EXPECT_FALSE(by_list->is_moe_layer(2));
  EXPECT_TRUE(by_list->is_moe_layer(3));
  EXPECT_EQ(by_list->moe_layer(0).shared.hidden, 2 * 1536);  // shared_experts_intermediate_size's default
  const RouterOptions axk2 = family(R"({"model_type": "axk2", )" + keys +
                                    R"(, "n_group": 4, "topk_group": 2})")->moe_layer(1).router;
  EXPECT_EQ(axk2.scoring, RouterScoring::kSigmoid);
  EXPECT_EQ(axk2.excluded_score, 0.0f);
  EXPECT_EQ(axk2.n_group, 4);
}

// Step-3.7's legacy configs: moe_layers_enum (a comma-separated string or a list) in place of mlp_layer_types, and
// per-layer limits that may run past num_hidden_layers (MTP entries); null and 0 are no limit.
TEST(ModelFamilies, Step3p7LegacyLayerListAndPerLayerLimits) {
  auto family = [](const std::string& text_keys) {
    return make_model_family(HfConfig::parse(R"({"model_type": "step3p7", "text_config": {"hidden_size": 8,
        "num_hidden_layers": 4, "n_routed_experts": 8, "moe_top_k": 2, "moe_intermediate_size": 4)" + text_keys + "}}",
                                             "config.json"));
  };
  const auto by_string = family(R"(, "moe_layers_enum": "1, 3", "swiglu_limits": [0, null, 0, 7, 7],
      "swiglu_limits_shared": [0, 0, 0, 16, 16])");
  EXPECT_FALSE(by_string->is_moe_layer(0));
  EXPECT_TRUE(by_string->is_moe_layer(1));
  EXPECT_FALSE(by_string->is_moe_layer(2));
  const MoELayerSpec plain = by_string->moe_layer(1);
  EXPECT_EQ(plain.activation, ExpertActivation::kSwiGLU);
  EXPECT_EQ(plain.shared.activation, ExpertActivation::kSwiGLU);
  const MoELayerSpec clamped = by_string->moe_layer(3);
  EXPECT_EQ(clamped.activation, ExpertActivation::kSiluClampedSwiGLU);
  EXPECT_DOUBLE_EQ(clamped.swiglu_limit, 7.0);
  EXPECT_EQ(clamped.shared.activation, ExpertActivation::kSiluClampedSwiGLU);
  EXPECT_DOUBLE_EQ(clamped.shared.swiglu_limit.value_or(0.0), 16.0);
  EXPECT_EQ(clamped.shared.hidden, 1280);  // share_expert_dim's default
  EXPECT_TRUE(family(R"(, "moe_layers_enum": [2])")->is_moe_layer(2));
  EXPECT_TRUE(family("")->is_moe_layer(3));  // absent: layers >= 3
  EXPECT_FALSE(family("")->is_moe_layer(2));
  EXPECT_THROW(family(R"(, "moe_layers_enum": "1,x")"), Error);
}

// DeepSeek-V4: its hash_moe layers (the first num_hash_layers, 3 by default) choose experts by token id and are
// refused with a reason; its other layers run sqrt-softplus scores and the limited SwiGLU.
TEST(ModelFamilies, DeepseekV4RefusesHashLayers) {
  const auto v4 = make_model_family(HfConfig::parse(R"({"model_type": "deepseek_v4", "hidden_size": 8,
      "num_hidden_layers": 4, "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 4})",
                                                    "config.json"));
  EXPECT_TRUE(v4->is_moe_layer(2));
  try {
    v4->moe_layer(2);
    ADD_FAILURE() << "a hash_moe layer was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 2 of this deepseek_v4 model is \"hash_moe\""), std::string::npos)
        << e.what();
  }
  const MoELayerSpec s = v4->moe_layer(3);
  EXPECT_EQ(s.router.scoring, RouterScoring::kSqrtSoftplus);
  EXPECT_DOUBLE_EQ(s.router.scaling_factor, 1.5);
  EXPECT_EQ(s.activation, ExpertActivation::kLimitedSwiGLU);
  EXPECT_DOUBLE_EQ(s.swiglu_limit, 10.0);
  EXPECT_EQ(s.shared.hidden, 4);
}

TEST(ModelFamilies, BlocksOfOtherFamiliesUnderTheirOwnDefaults) {
  auto family = [](const std::string& text) { return make_model_family(HfConfig::parse(text, "config.json")); };
  // Qwen3-Next: Qwen2-MoE's block, norm_topk_prob true and a 512-wide shared expert by default.
  const auto next = family(R"({"model_type": "qwen3_next", "hidden_size": 8, "num_hidden_layers": 2,
      "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 4})");
  const MoELayerSpec n = next->moe_layer(1);
  EXPECT_TRUE(n.router.normalize);
  EXPECT_EQ(n.shared.hidden, 512);
  EXPECT_EQ(n.shared.gate_weight, "model.layers.1.mlp.shared_expert_gate.weight");
  EXPECT_FALSE(family(R"({"model_type": "qwen2_moe", "hidden_size": 8, "num_hidden_layers": 2, "num_experts": 8,
      "num_experts_per_tok": 2, "moe_intermediate_size": 4})")->moe_layer(1).router.normalize);
  // FlexOlmo: OLMoE's block.
  const MoELayerSpec f = family(R"({"model_type": "flex_olmo", "hidden_size": 8, "num_hidden_layers": 2,
      "num_experts": 8, "num_experts_per_tok": 2, "intermediate_size": 4})")->moe_layer(0);
  EXPECT_FALSE(f.router.normalize);
  EXPECT_EQ(f.hidden, 4);
  // Solar Open: V3's block on every layer (a stray first_k_dense_replace is not read, as transformers does not).
  const auto solar = family(R"({"model_type": "solar_open", "hidden_size": 8, "num_hidden_layers": 2,
      "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 4, "first_k_dense_replace": 1})");
  EXPECT_TRUE(solar->is_moe_layer(0));
  EXPECT_DOUBLE_EQ(solar->moe_layer(0).router.scaling_factor, 1.0);
  EXPECT_EQ(solar->moe_layer(0).shared.hidden, 4);
  // EXAONE-MoE: num_experts, num_shared_experts, scale 2.5, mlp_layer_types from first_k_dense_replace 1, the bias
  // under the block.
  const auto exaone = family(R"({"model_type": "exaone_moe", "hidden_size": 8, "num_hidden_layers": 2,
      "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 4, "num_shared_experts": 3})");
  EXPECT_FALSE(exaone->is_moe_layer(0));
  const MoELayerSpec e = exaone->moe_layer(1);
  EXPECT_EQ(e.num_experts, 8);
  EXPECT_EQ(e.shared.hidden, 12);
  EXPECT_DOUBLE_EQ(e.router.scaling_factor, 2.5);
  EXPECT_EQ(e.selection_bias, "model.layers.1.mlp.e_score_correction_bias");
  // MiniMax-M2: sigmoid with the block's correction bias, always renormalized, no groups, no scale, Mixtral's names.
  const MoELayerSpec m = family(R"({"model_type": "minimax_m2", "hidden_size": 8, "num_hidden_layers": 2,
      "num_local_experts": 8, "num_experts_per_tok": 2, "intermediate_size": 4, "norm_topk_prob": false})")
                             ->moe_layer(1);
  EXPECT_EQ(m.router.scoring, RouterScoring::kSigmoid);
  EXPECT_TRUE(m.router.selection_bias);
  EXPECT_TRUE(m.router.normalize);
  EXPECT_FALSE(m.router.group_limited);
  EXPECT_DOUBLE_EQ(m.router.scaling_factor, 1.0);
  EXPECT_EQ(m.selection_bias, "model.layers.1.block_sparse_moe.e_score_correction_bias");
  EXPECT_EQ(m.down_name, "w2");
  // ERNIE-4.5-MoE: its own count keys with defaults, MoE every moe_layer_interval layers from the start index up
  // to the end index (-1: the last), the sum clamped at moe_norm_min, use_bias refused with shared experts.
  const std::string ernie_text = R"({"model_type": "ernie4_5_moe", "hidden_size": 8, "num_hidden_layers": 6,
      "moe_intermediate_size": 4, "moe_layer_interval": 2, "moe_layer_end_index": 4)";
  const auto ernie = family(ernie_text + "}");
  EXPECT_FALSE(ernie->is_moe_layer(0));  // start index 1 by default; (0 + 1) % 2 != 0 too
  EXPECT_TRUE(ernie->is_moe_layer(1));
  EXPECT_FALSE(ernie->is_moe_layer(2));
  EXPECT_TRUE(ernie->is_moe_layer(3));
  EXPECT_FALSE(ernie->is_moe_layer(5));  // past moe_layer_end_index
  const MoELayerSpec r = ernie->moe_layer(3);
  EXPECT_EQ(r.num_experts, 64);
  EXPECT_EQ(r.top_k, 6);
  EXPECT_EQ(r.shared.hidden, 8);  // 2 shared experts of 4
  EXPECT_TRUE(r.router.selection_bias);
  EXPECT_DOUBLE_EQ(r.router.normalize_min_sum, 1e-12);
  EXPECT_EQ(r.selection_bias, "model.layers.3.mlp.moe_statics.e_score_correction_bias");
  EXPECT_THROW(family(ernie_text + R"(, "use_bias": true})")->moe_layer(1), Error);
  EXPECT_EQ(family(ernie_text + R"(, "use_bias": true, "moe_num_shared_experts": 0})")->moe_layer(1).shared.hidden, 0);
  // Hunyuan-A13B: moe_topk an integer or one per layer; the shared MLP as wide as the experts.
  const std::string hunyuan_text = R"({"model_type": "hunyuan_v1_moe", "hidden_size": 8, "num_hidden_layers": 2,
      "num_experts": 8, "intermediate_size": 4)";
  const auto hy = family(hunyuan_text + R"(, "moe_topk": [2, 3]})");
  EXPECT_EQ(hy->moe_layer(0).top_k, 2);
  EXPECT_EQ(hy->moe_layer(1).top_k, 3);
  EXPECT_EQ(hy->moe_layer(1).shared.hidden, 4);
  EXPECT_EQ(hy->moe_layer(1).router_weight, "model.layers.1.mlp.gate.wg.weight");
  EXPECT_EQ(family(hunyuan_text + R"(, "moe_topk": 3})")->moe_layer(0).top_k, 3);
  EXPECT_THROW(family(hunyuan_text + R"(, "moe_topk": [2]})")->moe_layer(1), Error);
  // Qwen3-VL-MoE: the keys are text_config's (mlp_only_layers among them), the names the language model's.
  const auto vl = family(R"({"model_type": "qwen3_vl_moe", "text_config": {"hidden_size": 8, "num_hidden_layers": 3,
      "num_local_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 4, "mlp_only_layers": [1]}})");
  EXPECT_TRUE(vl->is_moe_layer(0));
  EXPECT_FALSE(vl->is_moe_layer(1));
  const MoELayerSpec v = vl->moe_layer(2);
  EXPECT_TRUE(v.router.normalize);
  EXPECT_EQ(v.storage, ExpertStorage::kFusedConcatInOut);
  EXPECT_EQ(v.experts_prefix, "model.language_model.layers.2.mlp.experts.");
  try {
    family(R"({"model_type": "qwen3_vl_moe", "hidden_size": 8})");
    ADD_FAILURE() << "a qwen3_vl_moe config without text_config was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing object 'text_config'"), std::string::npos) << e.what();
  }
}

// The router runs its tokens in blocks on the pool (router_detail::for_token_blocks): every scoring gives the same
// bits for any thread count, and each token the bits it gets routed alone. 37 tokens: blocks of 8 and a remainder.
TEST(ModelRouterOptions, EveryScoringGivesTheSameBitsForAnyThreadCountAndAlone) {
  const int64_t T = 37, E = 16, K = 4;
  std::vector<float> logits(static_cast<size_t>(T * E));
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>((i * 2654435761u) % 2001) * 0.004f - 4.0f;
  ModelRouterWeights w;
  w.weight = Tensor(Shape{E, E});
  for (int64_t e = 0; e < E; ++e) w.weight[e * E + e] = 1.0f;
  const Tensor x(Shape{T, E}, logits);
  const int before = num_threads();
  for (const RouterScoring scoring : {RouterScoring::kSoftmax, RouterScoring::kSigmoid, RouterScoring::kSqrtSoftplus,
                                      RouterScoring::kLogitsThenSigmoid, RouterScoring::kSoftmaxOverTopKLogits}) {
    for (const bool grouped : {false, true}) {
      RouterOptions o;
      o.scoring = scoring;
      o.normalize = true;
      if (grouped) {
        o.group_limited = true;
        o.n_group = 4;
        o.top_group = 2;
      }
      SCOPED_TRACE(testing::Message() << "scoring " << static_cast<int>(scoring) << (grouped ? " grouped" : ""));
      set_num_threads(1);
      const Routing one = route_model_tokens(o, w, x, K);
      for (const int threads : {2, 3}) {
        set_num_threads(threads);
        const Routing r = route_model_tokens(o, w, x, K);
        EXPECT_EQ(r.indices, one.indices) << threads << " threads";
        EXPECT_EQ(0, std::memcmp(r.router_weights.data(), one.router_weights.data(), one.router_weights.size() * 4));
        EXPECT_EQ(0, std::memcmp(r.scores.data(), one.scores.data(), one.scores.size() * 4));
      }
      for (const int64_t t : {int64_t{0}, int64_t{9}, T - 1}) {
        const auto row = logits.begin() + t * E;
        const Routing alone = route_model_tokens(o, w, Tensor(Shape{1, E}, std::vector<float>(row, row + E)), K);
        EXPECT_EQ(0, std::memcmp(alone.router_weights.data(), one.router_weights.data() + t * K, K * 4)) << t;
        for (int64_t k = 0; k < K; ++k) EXPECT_EQ(alone.indices[k], one.indices[t * K + k]) << t;
      }
    }
  }
  set_num_threads(before);
}

}  // namespace
}  // namespace hymoe
