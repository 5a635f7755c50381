// The MoE layer against the naive double-precision reference on random configurations of awkward sizes, plus
// the properties that the semantics promise (packed == unpacked, eval leaves state alone, capacity, load scale).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "hymoe/error.h"
#include "hymoe/moe.h"
#include "hymoe/threads.h"
#include "moe/reference_layer.h"
#include "test_util.h"

namespace hymoe::test {
namespace {

std::map<std::string, Tensor> tensors_of(MoELayer& layer) {
  std::map<std::string, Tensor> out;
  for (auto& [name, t] : layer.named_tensors()) out[name] = *t;
  return out;
}

struct LayerCase {
  int64_t B, L, D, H, E, K;
  std::string activation, router;
  int64_t shared;
  double capacity;
  bool gradient_scale, packed, train;
  double seq_aux;
  std::string schedule;
};

std::string describe(const LayerCase& c) {
  return "B" + std::to_string(c.B) + " L" + std::to_string(c.L) + " D" + std::to_string(c.D) + " H" +
         std::to_string(c.H) + " E" + std::to_string(c.E) + " K" + std::to_string(c.K) + " " + c.activation + " " +
         c.router + " shared" + std::to_string(c.shared) + " cap" + std::to_string(c.capacity) +
         (c.gradient_scale ? " gscale" : "") + (c.packed ? " packed" : "") + (c.train ? " train" : " eval");
}

void check_against_reference(const LayerCase& lc, uint64_t seed) {
  SCOPED_TRACE(describe(lc));
  MoEConfig c;
  c.dim = lc.D;
  c.hidden_dim = lc.H;
  c.num_experts = lc.E;
  c.top_k = lc.K;
  c.activation = lc.activation;
  c.router_type = lc.router;
  c.shared_experts = lc.shared;
  c.capacity_factor = lc.capacity;
  c.gradient_scale = lc.gradient_scale;
  c.packed_experts = lc.packed;
  c.sequence_aux_loss_weight = lc.seq_aux;
  c.bias_schedule = lc.schedule;
  MoELayer layer(c);
  Rng rng(seed);
  layer.init_random(rng);
  if (lc.router == "sigmoid_topk") {
    for (auto& [name, t] : layer.named_tensors())
      if (name == "router.expert_bias") *t = random_normal(rng, t->shape(), 0.3);
  }
  const Tensor x = random_normal(rng, Shape{lc.B, lc.L, lc.D}, 1.0);
  const auto before = tensors_of(layer);
  const int64_t step = 3, max_steps = 10;
  const Tensor y = layer.forward(x, lc.train ? Mode::kTrain : Mode::kEval, step, max_steps);
  const ReferenceOutput ref = reference_forward(c, before, x, lc.train, step, max_steps);
  const Routing& r = layer.last_routing();
  const int64_t T = lc.B * lc.L;
  ASSERT_EQ(r.indices.size(), static_cast<size_t>(T * lc.K));
  for (size_t i = 0; i < r.indices.size(); ++i) ASSERT_EQ(r.indices[i], ref.indices[i]) << "assignment " << i;
  for (size_t i = 0; i < r.weights.size(); ++i) ASSERT_NEAR(r.weights[i], ref.weights[i], 2e-6) << "weight " << i;
  for (int64_t e = 0; e < lc.E; ++e) ASSERT_EQ(layer.expert_counts()[e], ref.counts[static_cast<size_t>(e)]);
  EXPECT_NEAR(layer.aux_loss(), ref.aux, 1e-5 * std::max(1.0, std::abs(ref.aux)));
  EXPECT_NEAR(layer.z_loss(), ref.z, 1e-5 * std::max(1.0, std::abs(ref.z)));
  double max_abs = 0;
  for (double v : ref.y) max_abs = std::max(max_abs, std::abs(v));
  for (int64_t i = 0; i < y.numel(); ++i)
    ASSERT_NEAR(y[i], ref.y[static_cast<size_t>(i)], 1e-5 * std::max(1.0, max_abs)) << "y[" << i << "]";
  const auto after = tensors_of(layer);
  if (lc.router == "sigmoid_topk") {
    for (int64_t e = 0; e < lc.E; ++e) {
      const double bias = after.at("router.expert_bias")[e], ema = after.at("router.expert_ema")[e];
      if (lc.train) {
        EXPECT_NEAR(bias, ref.bias_after[static_cast<size_t>(e)], 1e-7);
        EXPECT_NEAR(ema, ref.ema_after[static_cast<size_t>(e)], 1e-7);
      } else {
        EXPECT_EQ(bias, before.at("router.expert_bias")[e]) << "eval must not touch the bias";
        EXPECT_EQ(ema, before.at("router.expert_ema")[e]) << "eval must not touch the EMA";
      }
    }
  }
}

TEST(MoELayer, MatchesNaiveReferenceOnAwkwardShapes) {
  const std::vector<LayerCase> cases = {
      // B, L, D, H, E, K, act, router, shared, cap, gscale, packed, train, seq_aux, schedule
      {1, 1, 3, 5, 1, 1, "silu", "softmax_topk", 0, 0, false, false, false, 0, "constant"},      // T=1, E=1
      {1, 7, 5, 3, 4, 4, "gelu", "softmax_topk", 0, 0, false, false, true, 0, "constant"},       // top_k = E
      {2, 5, 8, 13, 7, 1, "relu", "softmax_topk", 1, 0, false, true, false, 0, "constant"},      // top-1, packed
      {3, 11, 6, 7, 5, 2, "silu", "softmax_topk", 2, 0.5, false, false, true, 0, "constant"},    // drops
      {1, 13, 4, 9, 6, 3, "silu", "softmax_topk", 0, 1.25, true, true, true, 0, "constant"},     // gscale + cap
      {2, 3, 7, 4, 8, 2, "gelu", "sigmoid_topk", 0, 0, false, false, true, 0, "cosine_decay"},
      {1, 17, 5, 6, 6, 2, "silu", "sigmoid_topk", 1, 0, true, true, true, 0.01, "linear_warmup"},
      {1, 9, 5, 6, 3, 2, "relu", "sigmoid_topk", 0, 0.75, false, false, false, 0.1, "constant"},
      {1, 2, 31, 37, 2, 1, "silu", "sigmoid_topk", 0, 0, true, false, true, 0, "constant"},
  };
  uint64_t seed = 100;
  for (const auto& c : cases) check_against_reference(c, seed++);
}

TEST(MoELayer, PackedAndUnpackedGiveTheSameResult) {
  MoEConfig c;
  c.dim = 6;
  c.hidden_dim = 10;
  c.num_experts = 5;
  c.top_k = 2;
  MoELayer unpacked(c);
  Rng rng(4);
  unpacked.init_random(rng);
  c.packed_experts = true;
  MoELayer packed(c);
  auto src = tensors_of(unpacked);
  for (auto& [name, t] : packed.named_tensors()) {
    if (name.starts_with("router.")) {
      *t = src.at(name);
      continue;
    }
    const std::string which = name.substr(0, name.find('_'));  // up / down / gate
    for (int64_t e = 0; e < c.num_experts; ++e) {
      const Tensor& w = src.at("experts." + std::to_string(e) + "." + which + "_proj.weight");  // (out, in)
      const int64_t out = w.dim(0), in = w.dim(1);
      for (int64_t o = 0; o < out; ++o)
        for (int64_t i = 0; i < in; ++i) (*t)[(e * in + i) * out + o] = w[o * in + i];
    }
  }
  const Tensor x = random_normal(rng, Shape{2, 9, 6}, 1.0);
  const Tensor a = unpacked.forward(x, Mode::kEval), b = packed.forward(x, Mode::kEval);
  EXPECT_TRUE(all_close(a, b, 1e-6, 1e-6));
}

TEST(MoELayer, AllTokensOnOneExpertAndZeroTokenExperts) {
  MoEConfig c;
  c.dim = 4;
  c.hidden_dim = 6;
  c.num_experts = 6;
  c.top_k = 1;
  MoELayer layer(c);
  Rng rng(8);
  layer.init_random(rng);
  // A gate whose row 3 dominates for positive inputs sends every token to expert 3.
  for (auto& [name, t] : layer.named_tensors())
    if (name == "router.gate.weight") {
      std::fill(t->values().begin(), t->values().end(), 0.0f);
      for (int64_t d = 0; d < c.dim; ++d) (*t)[3 * c.dim + d] = 1.0f;
    }
  const Tensor x = random_uniform(rng, Shape{1, 10, 4}, 0.1, 1.0);
  const auto before = tensors_of(layer);
  const Tensor y = layer.forward(x, Mode::kEval);
  EXPECT_EQ(layer.expert_counts()[3], 10.0f);
  for (int64_t e : {0, 1, 2, 4, 5}) EXPECT_EQ(layer.expert_counts()[e], 0.0f);
  const auto ref = reference_forward(c, before, x, false, 0, 1);
  for (int64_t i = 0; i < y.numel(); ++i) EXPECT_NEAR(y[i], ref.y[static_cast<size_t>(i)], 1e-5);
}

TEST(MoELayer, GradientScaleOnlyInTrainMode) {
  MoEConfig c;
  c.dim = 4;
  c.hidden_dim = 5;
  c.num_experts = 4;
  c.top_k = 2;
  c.gradient_scale = true;
  MoELayer layer(c);
  Rng rng(2);
  layer.init_random(rng);
  const Tensor x = random_normal(rng, Shape{1, 12, 4}, 1.0);
  const Tensor eval = layer.forward(x, Mode::kEval);
  c.gradient_scale = false;
  MoELayer plain(c);
  auto src = tensors_of(layer);
  for (auto& [name, t] : plain.named_tensors()) *t = src.at(name);
  EXPECT_TRUE(all_close(eval, plain.forward(x, Mode::kEval), 0, 0)) << "gradient_scale must not act in eval";
  const Tensor train = layer.forward(x, Mode::kTrain);
  EXPECT_FALSE(all_close(train, eval, 1e-3, 0)) << "gradient_scale must change the train-mode forward";
}

TEST(MoELayer, RejectsBadInputs) {
  MoEConfig c;
  c.dim = 4;
  c.hidden_dim = 4;
  c.num_experts = 2;
  c.top_k = 1;
  MoELayer layer(c);
  EXPECT_THROW(layer.forward(Tensor(Shape{2, 4}), Mode::kEval), Error);
  EXPECT_THROW(layer.forward(Tensor(Shape{1, 2, 5}), Mode::kEval), Error);
  EXPECT_THROW(layer.forward(Tensor(Shape{0, 2, 4}), Mode::kEval), Error);
  Tensor nan(Shape{1, 2, 4});
  nan[5] = std::nanf("");
  try {
    layer.forward(nan, Mode::kEval);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("non-finite"), std::string::npos);
  }
}

TEST(MoEConfig, ValidationNamesFieldAndRange) {
  auto message = [](auto mutate) {
    MoEConfig c;
    c.dim = 4;
    c.hidden_dim = 4;
    c.num_experts = 3;
    c.top_k = 2;
    mutate(c);
    try {
      c.validate();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message([](MoEConfig&) {}), "");
  EXPECT_NE(message([](MoEConfig& c) { c.top_k = 4; }).find("top_k=4 must be in 1..num_experts=3"), std::string::npos);
  EXPECT_NE(message([](MoEConfig& c) { c.top_k = 0; }).find("top_k=0"), std::string::npos);
  EXPECT_NE(message([](MoEConfig& c) { c.dim = 0; }).find("dim=0"), std::string::npos);
  EXPECT_NE(message([](MoEConfig& c) { c.hidden_dim = -1; }).find("hidden_dim=-1"), std::string::npos);
  EXPECT_NE(message([](MoEConfig& c) { c.activation = "tanh"; }).find("activation='tanh'"), std::string::npos);
  EXPECT_NE(message([](MoEConfig& c) { c.router_type = "hash"; }).find("router_type='hash'"), std::string::npos);
  EXPECT_NE(message([](MoEConfig& c) { c.bias_schedule = "cosine"; }).find("bias_schedule='cosine'"), std::string::npos);
  EXPECT_NE(message([](MoEConfig& c) { c.capacity_factor = -0.5; }).find("capacity_factor=-0.5"), std::string::npos);
  EXPECT_NE(message([](MoEConfig& c) { c.shared_experts = -1; }).find("shared_experts=-1"), std::string::npos);
}

TEST(MoEConfig, ParsesJsonAndRejectsUnknownFields) {
  const MoEConfig c = parse_moe_config(R"({"dim": 8, "hidden_dim": 16, "num_experts": 4, "top_k": 2,
      "activation": "gelu", "router_type": "sigmoid_topk", "capacity_factor": 1.5, "bias_schedule": "cosine_decay"})",
                                       "c.json");
  EXPECT_EQ(c.activation, "gelu");
  EXPECT_EQ(c.capacity_factor, 1.5);
  EXPECT_THROW(parse_moe_config(R"({"dim": 8, "hidden_dim": 16, "num_experts": 4, "top_k": 2, "topk": 1})", "c.json"),
               Error);
  EXPECT_THROW(parse_moe_config(R"({"dim": 8})", "c.json"), Error);
  EXPECT_THROW(parse_moe_config(R"({"dim": "8", "hidden_dim": 16, "num_experts": 4, "top_k": 2})", "c.json"), Error);
  EXPECT_THROW(parse_moe_config("{", "c.json"), Error);
}

std::string config_error(const std::string& text) {
  return error_of([&] { parse_moe_config(text, "c.json"); });
}

TEST(MoEConfig, RefusesNumbersItCannotRepresentNamingTheField) {
  // Once read as dim=-1 (an unsigned JSON integer wrapped to int64).
  EXPECT_NE(config_error(R"({"dim": 18446744073709551615, "hidden_dim": 16, "num_experts": 4, "top_k": 2})")
                .find("c.json: field 'dim' = 18446744073709551615 is out of range [1, 1048576]"),
            std::string::npos);
  EXPECT_NE(config_error(R"({"dim": 8, "hidden_dim": 16, "num_experts": 1e400, "top_k": 2})")
                .find("c.json: not valid JSON: number overflow parsing '1e400'"),
            std::string::npos);
  EXPECT_NE(config_error(R"({"dim": 8, "hidden_dim": 16, "num_experts": 4, "top_k": 2, "shared_experts": -1})")
                .find("field 'shared_experts' = -1 is out of range [0, 65536]"),
            std::string::npos);
  EXPECT_NE(config_error(R"({"dim": 8, "hidden_dim": 4194304, "num_experts": 4, "top_k": 2})")
                .find("field 'hidden_dim' = 4194304 is out of range"),
            std::string::npos);
  // The largest legal values still parse.
  EXPECT_EQ(parse_moe_config(R"({"dim": 1048576, "hidden_dim": 8, "num_experts": 65536, "top_k": 1})", "c.json").dim,
            1048576);
}

TEST(MoEConfig, RefusesDuplicateFieldsDeepNestingAndQuotesUserStrings) {
  EXPECT_NE(config_error(R"({"dim": 8, "hidden_dim": 16, "num_experts": 4, "top_k": 2, "dim": 16})")
                .find("c.json: duplicate key 'dim'"),
            std::string::npos);
  const std::string deep = config_error(R"({"dim": )" + std::string(100000, '[') + "}");
  EXPECT_NE(deep.find("c.json: JSON nested deeper than 64"), std::string::npos) << deep.substr(0, 200);
  const std::string value = config_error(R"({"dim": [[[[1]]]], "hidden_dim": 16, "num_experts": 4, "top_k": 2})");
  EXPECT_NE(value.find("field 'dim' must be an integer, got an array of 1 entries"), std::string::npos) << value;
  const std::string key = config_error("{\"d\\u001bim\": 1}");
  EXPECT_NE(key.find("unknown field 'd\\x1bim'"), std::string::npos) << key;
  const std::string router = config_error(
      R"({"dim": 8, "hidden_dim": 16, "num_experts": 4, "top_k": 2, "router_type": ")" + std::string(5000, 'r') + "\"}");
  EXPECT_NE(router.find("router_type='rrrr"), std::string::npos) << router.substr(0, 200);
  EXPECT_LT(router.size(), 400u) << "the 5000-byte value was echoed whole";
}

TEST(Registry, NewRouterIsOneRegistration) {
  // A router that always picks expert 0 with weight 1: registered once, usable through the config.
  struct FirstExpertRouter : Router {
    MoEConfig c;
    Tensor gate;
    explicit FirstExpertRouter(const MoEConfig& cfg) : c(cfg), gate(Shape{cfg.num_experts, cfg.dim}) {}
    std::string_view type() const override { return "first_expert"; }
    Routing route(const Tensor& x, Mode) override {
      Routing r;
      r.num_tokens = x.dim(0);
      r.top_k = c.top_k;
      r.num_experts = c.num_experts;
      r.indices.assign(static_cast<size_t>(r.num_tokens * r.top_k), 0);
      for (int64_t i = 0; i < r.num_tokens * r.top_k; ++i) r.indices[static_cast<size_t>(i)] = static_cast<int32_t>(i % r.top_k);
      r.router_weights.assign(r.indices.size(), 1.0f / static_cast<float>(r.top_k));
      r.expert_counts = Tensor(Shape{c.num_experts});
      for (int32_t e : r.indices) r.expert_counts[e] += 1;
      return r;
    }
    std::vector<std::pair<std::string, Tensor*>> named_tensors() override { return {{"gate.weight", &gate}}; }
  };
  register_router("first_expert_test", [](const MoEConfig& c) { return std::make_unique<FirstExpertRouter>(c); });
  EXPECT_THROW(register_router("first_expert_test", nullptr), Error);
  MoEConfig c;
  c.dim = 3;
  c.hidden_dim = 3;
  c.num_experts = 2;
  c.top_k = 1;
  c.router_type = "first_expert_test";
  MoELayer layer(c);
  layer.forward(Tensor(Shape{1, 4, 3}, 0.5f), Mode::kEval);
  EXPECT_EQ(layer.expert_counts()[0], 4.0f);
  EXPECT_EQ(make_mlp("standard_relu", 2, 3).activation, MlpActivation::kRelu);
  EXPECT_EQ(mlp_name_for_activation("silu"), "swiglu");
}

TEST(GroupedExpertForward, PublicFunctionsFollowTheirContract) {
  Rng rng(3);
  std::vector<ExpertMlp> experts;
  for (int e = 0; e < 3; ++e) {
    ExpertMlp m = make_mlp("swiglu", 4, 6);
    for (auto& [n, t] : m.named_tensors()) *t = random_normal(rng, t->shape(), 0.5);
    experts.push_back(m);
  }
  const std::vector<int64_t> counts = {2, 0, 3};
  const Tensor x = random_normal(rng, Shape{5, 4}, 1.0);
  const Tensor y = grouped_expert_forward(x, counts, experts);
  // Row 2 belongs to expert 2 (rows 0-1: expert 0; expert 1 has none).
  ExpertMlp& m = experts[2];
  for (int64_t d = 0; d < 4; ++d) {
    double acc = 0;
    for (int64_t h = 0; h < 6; ++h) {
      double g = 0, u = 0;
      for (int64_t i = 0; i < 4; ++i) {
        g += x[2 * 4 + i] * m.gate_proj[h * 4 + i];
        u += x[2 * 4 + i] * m.up_proj[h * 4 + i];
      }
      acc += g / (1 + std::exp(-g)) * u * m.down_proj[d * 6 + h];
    }
    EXPECT_NEAR(y[2 * 4 + d], acc, 1e-5);
  }
  // Packed form of the same weights gives the same rows.
  Tensor up(Shape{3, 4, 6}), gate(Shape{3, 4, 6}), down(Shape{3, 6, 4});
  for (int64_t e = 0; e < 3; ++e)
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t h = 0; h < 6; ++h) {
        up[(e * 4 + i) * 6 + h] = experts[static_cast<size_t>(e)].up_proj[h * 4 + i];
        gate[(e * 4 + i) * 6 + h] = experts[static_cast<size_t>(e)].gate_proj[h * 4 + i];
        down[(e * 6 + h) * 4 + i] = experts[static_cast<size_t>(e)].down_proj[i * 6 + h];
      }
  EXPECT_TRUE(all_close(grouped_expert_forward_packed(x, counts, up, down, &gate, MlpActivation::kSwiGLU), y, 1e-6, 1e-6));
  EXPECT_THROW(grouped_expert_forward(x, std::vector<int64_t>{2, 0, 2}, experts), Error);  // counts != rows
  EXPECT_THROW(grouped_expert_forward_packed(x, counts, up, down, nullptr, MlpActivation::kSwiGLU), Error);
  // scale_by_expert_load: avg = 5 rows / 3 experts; expert 0 rows x (5/3)/2, expert 2 rows x (5/3)/3.
  const Tensor s = scale_by_expert_load(y, counts, 3);
  EXPECT_NEAR(s[0], y[0] * (5.0 / 3.0) / 2.0, 1e-6);
  EXPECT_NEAR(s[4 * 4], y[4 * 4] * (5.0 / 3.0) / 3.0, 1e-6);
}

// The routers run their per-token scores, selections and logsumexps in blocks on the pool: the same routing and
// losses, bit for bit, for any thread count (41 tokens: blocks of 8 and a remainder).
TEST(Routers, SameRoutingAndLossesForAnyThreadCount) {
  for (const std::string router_type : {"softmax_topk", "sigmoid_topk"}) {
    SCOPED_TRACE(router_type);
    MoEConfig cfg;
    cfg.dim = 24;
    cfg.hidden_dim = 8;
    cfg.num_experts = 12;
    cfg.top_k = 3;
    cfg.router_type = router_type;
    cfg.sequence_aux_loss_weight = router_type == "sigmoid_topk" ? 0.01 : 0.0;
    const auto router = make_router(cfg);
    for (auto& [name, t] : router->named_tensors())
      for (int64_t i = 0; i < t->numel(); ++i)
        t->data()[i] = static_cast<float>((static_cast<uint64_t>(i) * 40503u) % 997) * 0.002f - 1.0f;
    const int64_t T = 41;
    Tensor x(Shape{T, cfg.dim});
    for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] = static_cast<float>((i * 2654435761u) % 1009) * 0.002f - 1.0f;
    const int before = num_threads();
    set_num_threads(1);
    const Routing one = router->route(x, Mode::kEval);
    for (const int threads : {2, 3}) {
      set_num_threads(threads);
      const Routing r = router->route(x, Mode::kEval);
      EXPECT_EQ(r.indices, one.indices) << threads << " threads";
      EXPECT_EQ(0, std::memcmp(r.router_weights.data(), one.router_weights.data(), one.router_weights.size() * 4));
      EXPECT_EQ(0, std::memcmp(r.scores.data(), one.scores.data(), one.scores.size() * 4));
      EXPECT_EQ(0, std::memcmp(&r.z_loss, &one.z_loss, 4));
      EXPECT_EQ(0, std::memcmp(&r.aux_loss, &one.aux_loss, 4));
    }
    set_num_threads(before);
  }
}

}  // namespace
}  // namespace hymoe::test
