// Every config.json key that changes a Hugging Face family's MoE block, one test each: honoured as transformers'
// modeling code uses it (its default when absent), ignored where transformers ignores it, or refused by name
// (docs/models.md, "Config keys"). hidden_act has its own file (model_activation_test.cc).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hymoe/model.h"
#include "test_util.h"

namespace hymoe {
namespace {

// The minimal config of each family (sizes only), plus `extra` keys; a key set to null is removed.
nlohmann::json base_config(const std::string& type) {
  nlohmann::json c = {{"model_type", type}, {"hidden_size", 8}, {"num_hidden_layers", 4}, {"num_experts_per_tok", 2}};
  if (type == "mixtral") c.update({{"num_local_experts", 8}, {"intermediate_size", 4}});
  if (type == "olmoe") c.update({{"num_experts", 8}, {"intermediate_size", 4}});
  if (type == "qwen2_moe" || type == "qwen3_moe") c.update({{"num_experts", 8}, {"moe_intermediate_size", 4}});
  if (type == "deepseek_v2" || type == "deepseek_v3") c.update({{"n_routed_experts", 8}, {"moe_intermediate_size", 4}});
  if (type == "gpt_oss") c.update({{"num_local_experts", 8}, {"intermediate_size", 4}});
  return c;
}

std::unique_ptr<ModelFamily> family(const std::string& type, const nlohmann::json& extra = nlohmann::json::object()) {
  nlohmann::json c = base_config(type);
  for (auto it = extra.begin(); it != extra.end(); ++it) {
    if (it.value().is_null())
      c.erase(it.key());
    else
      c[it.key()] = it.value();
  }
  return make_model_family(HfConfig::parse(c.dump(), "/models/" + type + "/config.json"));
}

MoELayerSpec spec(const std::string& type, const nlohmann::json& extra = nlohmann::json::object(), int64_t layer = 3) {
  return family(type, extra)->moe_layer(layer);
}

std::string error_of(const std::string& type, const nlohmann::json& extra, int64_t layer = 3) {
  return test::error_of([&] { spec(type, extra, layer); });
}

// DeepSeek-V3's group defaults (8 groups) need more than the 8 experts of base_config: one group, a no-op.
const nlohmann::json kOneGroup = {{"n_group", 1}, {"topk_group", 1}};
nlohmann::json with(nlohmann::json a, const nlohmann::json& b) {
  a.update(b);
  return a;
}

TEST(ModelConfigKeys, NormTopkProb) {
  for (const char* type : {"qwen2_moe", "qwen3_moe", "olmoe"}) {
    EXPECT_FALSE(spec(type, {{"shared_expert_intermediate_size", 0}}).router.normalize)
        << type;  // transformers' default
    EXPECT_TRUE(spec(type, {{"norm_topk_prob", true}}).router.normalize) << type;
  }
  // MixtralTopKRouter always renormalizes and DeepseekV2Moe never does, whatever the key says.
  EXPECT_TRUE(spec("mixtral", {{"norm_topk_prob", false}}).router.normalize);
  EXPECT_FALSE(spec("deepseek_v2", {{"norm_topk_prob", true}}).router.normalize);
  EXPECT_TRUE(spec("deepseek_v3", kOneGroup).router.normalize);  // V3's default
  EXPECT_FALSE(spec("deepseek_v3", with(kOneGroup, {{"norm_topk_prob", false}})).router.normalize);
}

TEST(ModelConfigKeys, RoutedScalingFactor) {
  EXPECT_DOUBLE_EQ(spec("deepseek_v2").router.scaling_factor, 1.0);
  EXPECT_DOUBLE_EQ(spec("deepseek_v2", {{"routed_scaling_factor", 16.0}}).router.scaling_factor, 16.0);
  EXPECT_DOUBLE_EQ(spec("deepseek_v3", kOneGroup).router.scaling_factor, 2.5);
  EXPECT_DOUBLE_EQ(spec("deepseek_v3", with(kOneGroup, {{"routed_scaling_factor", 2.827}})).router.scaling_factor,
                   2.827);
}

TEST(ModelConfigKeys, TopkMethod) {
  EXPECT_FALSE(spec("deepseek_v2", {{"topk_method", "greedy"}}).router.group_limited);
  const MoELayerSpec g =
      spec("deepseek_v2", {{"topk_method", "group_limited_greedy"}, {"n_group", 4}, {"topk_group", 2}});
  EXPECT_TRUE(g.router.group_limited);
  EXPECT_EQ(g.router.group_score, GroupScore::kMax);
  EXPECT_EQ(g.router.n_group, 4);
  EXPECT_EQ(g.router.top_group, 2);
  EXPECT_EQ(g.router.excluded_score, 0.0f);
  const std::string msg = error_of("deepseek_v2", {{"topk_method", "noaux_tc"}});
  EXPECT_NE(msg.find("config.json: topk_method='noaux_tc'"), std::string::npos) << msg;
  // group_limited_greedy needs its groups (transformers' default None fails in its forward).
  EXPECT_NE(error_of("deepseek_v2", {{"topk_method", "group_limited_greedy"}}).find("'n_group'"), std::string::npos);
  // DeepseekV3TopkRouter always runs its one method: the key changes nothing.
  const MoELayerSpec v3 = spec("deepseek_v3", with(kOneGroup, {{"topk_method", "greedy"}}));
  EXPECT_EQ(v3.router.scoring, RouterScoring::kSigmoid);
  EXPECT_EQ(v3.router.group_score, GroupScore::kTop2Sum);
  EXPECT_TRUE(v3.router.group_limited);
}

TEST(ModelConfigKeys, ScoringFuncIsIgnoredAsTransformersDoes) {
  EXPECT_EQ(spec("deepseek_v2", {{"scoring_func", "sigmoid"}}).router.scoring, RouterScoring::kSoftmax);
  EXPECT_EQ(spec("deepseek_v3", with(kOneGroup, {{"scoring_func", "softmax"}})).router.scoring,
            RouterScoring::kSigmoid);
}

TEST(ModelConfigKeys, NGroupAndTopkGroup) {
  const MoELayerSpec d = spec("deepseek_v3", {{"n_routed_experts", 16}, {"num_experts_per_tok", 4}});
  EXPECT_EQ(d.router.n_group, 8);  // DeepseekV3Config's defaults
  EXPECT_EQ(d.router.top_group, 4);
  const MoELayerSpec s = spec("deepseek_v3", {{"n_group", 2}, {"topk_group", 1}});
  EXPECT_EQ(s.router.n_group, 2);
  EXPECT_EQ(s.router.top_group, 1);
  // The defaults checked like given values: 8 experts cannot form 8 groups of two.
  EXPECT_NE(error_of("deepseek_v3", {}).find("n_group=8 leaves fewer than 2 experts per group"), std::string::npos);
}

TEST(ModelConfigKeys, SharedExpertSizes) {
  // Qwen2-MoE: shared_expert_intermediate_size, 5632 when absent (Qwen2MoeConfig), 0 for none; always gated.
  EXPECT_EQ(spec("qwen2_moe").shared.hidden, 5632);
  EXPECT_EQ(spec("qwen2_moe", {{"shared_expert_intermediate_size", 0}}).shared.hidden, 0);
  const MoELayerSpec q = spec("qwen2_moe", {{"shared_expert_intermediate_size", 12}});
  EXPECT_EQ(q.shared.hidden, 12);
  EXPECT_EQ(q.shared.gate_weight, "model.layers.3.mlp.shared_expert_gate.weight");
  // DeepSeek: one MLP of moe_intermediate_size * n_shared_experts, ungated; 2 (V2) and 1 (V3) when absent.
  EXPECT_EQ(spec("deepseek_v2").shared.hidden, 8);
  EXPECT_EQ(spec("deepseek_v2", {{"n_shared_experts", 0}}).shared.hidden, 0);
  EXPECT_EQ(spec("deepseek_v3", kOneGroup).shared.hidden, 4);
  EXPECT_EQ(spec("deepseek_v3", with(kOneGroup, {{"n_shared_experts", 3}})).shared.hidden, 12);
  EXPECT_TRUE(spec("deepseek_v3", kOneGroup).shared.gate_weight.empty());
  // Qwen3-MoE, OLMoE and Mixtral have none, whatever keys a config carries.
  for (const char* type : {"qwen3_moe", "olmoe", "mixtral"})
    EXPECT_EQ(spec(type, {{"shared_expert_intermediate_size", 64}, {"n_shared_experts", 2}}).shared.hidden, 0) << type;
}

TEST(ModelConfigKeys, ExpertIntermediateSize) {
  EXPECT_EQ(spec("qwen3_moe", {{"intermediate_size", 96}}).hidden, 4);  // the dense MLP's, not the experts'
  EXPECT_EQ(spec("deepseek_v2", {{"intermediate_size", 96}}).hidden, 4);
  EXPECT_EQ(spec("mixtral").hidden, 4);
  for (const char* type : {"qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3"}) {
    const std::string msg = error_of(type, with(kOneGroup, {{"moe_intermediate_size", nullptr}}));
    EXPECT_NE(msg.find("config.json: missing 'moe_intermediate_size'"), std::string::npos) << msg;
  }
  EXPECT_NE(error_of("olmoe", {{"intermediate_size", nullptr}}).find("missing 'intermediate_size'"), std::string::npos);
}

TEST(ModelConfigKeys, DecoderSparseStepAndMlpOnlyLayers) {
  for (const char* type : {"qwen2_moe", "qwen3_moe"}) {
    const auto f = family(type, {{"decoder_sparse_step", 2}, {"mlp_only_layers", nlohmann::json::array({1})}});
    EXPECT_FALSE(f->is_moe_layer(0)) << type;  // (0 + 1) % 2 != 0
    EXPECT_FALSE(f->is_moe_layer(1)) << type;  // listed
    EXPECT_FALSE(f->is_moe_layer(2)) << type;
    EXPECT_TRUE(f->is_moe_layer(3)) << type;
    EXPECT_NE(error_of(type, {{"decoder_sparse_step", 2}}, 2)
                  .find("layer 2 of this " + std::string(type) + " model is a dense MLP"),
              std::string::npos);
    EXPECT_NE(error_of(type, {{"decoder_sparse_step", 0}}).find("decoder_sparse_step=0 must be positive"),
              std::string::npos);
    EXPECT_FALSE(family(type, {{"num_experts", 0}})->is_moe_layer(3)) << type;
  }
}

TEST(ModelConfigKeys, FirstKDenseReplaceAndMoeLayerFreq) {
  EXPECT_TRUE(family("deepseek_v2")->is_moe_layer(0));   // DeepseekV2Config's default 0
  EXPECT_FALSE(family("deepseek_v3")->is_moe_layer(2));  // DeepseekV3Config's default 3
  EXPECT_TRUE(family("deepseek_v3")->is_moe_layer(3));
  EXPECT_FALSE(family("deepseek_v2", {{"first_k_dense_replace", 2}})->is_moe_layer(1));
  EXPECT_TRUE(family("deepseek_v3", {{"first_k_dense_replace", 1}})->is_moe_layer(1));
  // transformers builds the MoE block on every layer >= first_k_dense_replace, whatever moe_layer_freq says.
  for (const char* type : {"deepseek_v2", "deepseek_v3"})
    EXPECT_TRUE(family(type, {{"moe_layer_freq", 2}})->is_moe_layer(3)) << type;
}

TEST(ModelConfigKeys, MlpBias) {
  EXPECT_EQ(spec("deepseek_v2", {{"mlp_bias", false}}).shared.hidden, 8);
  const std::string msg = error_of("deepseek_v2", {{"mlp_bias", true}});
  EXPECT_NE(msg.find("/models/deepseek_v2/config.json: mlp_bias=true"), std::string::npos) << msg;
  EXPECT_EQ(spec("deepseek_v2", {{"mlp_bias", true}, {"n_shared_experts", 0}}).shared.hidden, 0);  // no MLP to bias
}

TEST(ModelConfigKeys, GptOssSwigluAlphaAndLimit) {
  const MoELayerSpec d = spec("gpt_oss");
  EXPECT_DOUBLE_EQ(d.swiglu_alpha, 1.702);
  EXPECT_DOUBLE_EQ(d.swiglu_limit, 7.0);
  const MoELayerSpec s = spec("gpt_oss", {{"swiglu_alpha", 1.5}, {"swiglu_limit", 5.0}});
  EXPECT_DOUBLE_EQ(s.swiglu_alpha, 1.5);
  EXPECT_DOUBLE_EQ(s.swiglu_limit, 5.0);
}

// Training-only keys change nothing at inference, in transformers or here.
TEST(ModelConfigKeys, TrainingOnlyKeysChangeNothing) {
  const nlohmann::json training = {{"router_aux_loss_coef", 0.5},
                                   {"output_router_logits", true},
                                   {"router_jitter_noise", 0.5},
                                   {"aux_loss_alpha", 0.5},
                                   {"seq_aux", false}};
  for (const char* type : {"mixtral", "qwen3_moe", "olmoe", "deepseek_v2"}) {
    const MoELayerSpec a = spec(type), b = spec(type, training);
    EXPECT_EQ(a.router.normalize, b.router.normalize) << type;
    EXPECT_EQ(a.router.scaling_factor, b.router.scaling_factor) << type;
    EXPECT_EQ(a.activation, b.activation) << type;
    EXPECT_EQ(a.hidden, b.hidden) << type;
    EXPECT_EQ(a.shared.hidden, b.shared.hidden) << type;
  }
}

}  // namespace
}  // namespace hymoe
