// MoELayer::load is strict, as PyTorch's load_state_dict(strict=True): every tensor under the prefix must be one
// the configuration uses, and every one it uses must be there; both lists are reported whole. Tensors outside
// the prefix are ignored. Every conformance case (saved from the PyTorch reference) must still load.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "hymoe/error.h"
#include "hymoe/moe.h"
#include "hymoe/rng.h"
#include "hymoe/safetensors.h"
#include "test_util.h"

namespace hymoe::test {
namespace {

MoEConfig small_config() {
  MoEConfig c;
  c.dim = 4;
  c.hidden_dim = 6;
  c.num_experts = 4;
  c.top_k = 2;
  return c;
}

// The layer's own tensors (random), plus `extra` tensors, as an in-memory safetensors file.
SafetensorsFile file_of(const MoEConfig& c, const std::vector<std::string>& extra, const std::string& prefix = "",
                        const std::string& drop = "") {
  MoELayer layer(c);
  Rng rng(7);
  layer.init_random(rng);
  SafetensorsWriter w;
  for (auto& [name, t] : layer.named_tensors())
    if (name != drop) w.add(prefix + name, *t);
  for (const auto& name : extra) w.add(name, Tensor(Shape{2, 2}));
  return SafetensorsFile::from_bytes(w.serialize(), "w.safetensors");
}

std::string load_error(const MoEConfig& c, const SafetensorsFile& f, const std::string& prefix = "") {
  MoELayer layer(c);
  try {
    layer.load(f, prefix);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(StrictLoad, ExactStateDictLoads) {
  const MoEConfig c = small_config();
  EXPECT_EQ(load_error(c, file_of(c, {})), "");
}

TEST(StrictLoad, UnusedTensorsUnderThePrefixAreErrorsListedWhole) {
  MoEConfig c = small_config();
  struct Case {
    const char* what;
    MoEConfig config;
    std::vector<std::string> extra;
    std::vector<std::string> fragments;
  };
  MoEConfig gelu = c;
  gelu.activation = "gelu";
  const std::vector<Case> cases = {
      {"shared expert with shared_experts 0", c,
       {"shared_expert.up_proj.weight", "shared_expert.down_proj.weight", "shared_expert.gate_proj.weight"},
       {"3 unexpected tensors 'shared_expert.down_proj.weight', 'shared_expert.gate_proj.weight', "
        "'shared_expert.up_proj.weight'",
        "shared_experts=0"}},
      {"expert bias under a softmax router", c, {"router.expert_bias"},
       {"unexpected tensor 'router.expert_bias'", "router_type=softmax_topk"}},
      {"gate_proj with a GELU expert", gelu, {"experts.0.gate_proj.weight", "experts.3.gate_proj.weight"},
       {"2 unexpected tensors 'experts.0.gate_proj.weight', 'experts.3.gate_proj.weight'", "activation=gelu"}},
      {"a fifth expert with four", c, {"experts.4.up_proj.weight", "experts.4.down_proj.weight"},
       {"2 unexpected tensors 'experts.4.down_proj.weight', 'experts.4.up_proj.weight'", "num_experts=4"}},
  };
  for (const Case& k : cases) {
    const std::string msg = load_error(k.config, file_of(k.config, k.extra));
    EXPECT_NE(msg.find("w.safetensors"), std::string::npos) << k.what << ": " << msg;
    EXPECT_NE(msg.find("loading is strict"), std::string::npos) << k.what << ": " << msg;
    for (const auto& f : k.fragments) EXPECT_NE(msg.find(f), std::string::npos) << k.what << ": " << msg;
  }
}

TEST(StrictLoad, MissingAndUnexpectedAreBothListed) {
  const MoEConfig c = small_config();
  MoEConfig shared = c;
  shared.shared_experts = 1;
  // A checkpoint with a shared expert loaded into a config without one, less one routed tensor.
  const std::string msg =
      load_error(c, file_of(shared, {}, "", "experts.1.down_proj.weight"));
  EXPECT_NE(msg.find("missing tensor 'experts.1.down_proj.weight'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("3 unexpected tensors"), std::string::npos) << msg;
  // The layer is unchanged by a failed load (it still runs with its own weights).
  MoELayer layer(c);
  Rng rng(1);
  layer.init_random(rng);
  const Tensor before = *layer.named_tensors().front().second;
  EXPECT_THROW(layer.load(file_of(shared, {}), ""), Error);
  const Tensor after = *layer.named_tensors().front().second;
  EXPECT_TRUE(all_close(after, before, 0, 0));
}

TEST(StrictLoad, TensorsOutsideThePrefixAreIgnoredAndAMissedPrefixIsSuggested) {
  const MoEConfig c = small_config();
  const std::string prefix = "model.layers.3.mlp.";
  const SafetensorsFile f =
      file_of(c, {"model.embed_tokens.weight", "model.layers.3.mlp_norm.weight", "model.layers.4.mlp.router.gate.weight"},
              prefix);
  EXPECT_EQ(load_error(c, f, prefix), "");
  // Without the prefix every name is missing and every tensor unexpected; the message says which prefix would do.
  const std::string msg = load_error(c, f, "");
  EXPECT_NE(msg.find("missing tensors 'router.gate.weight'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the prefix 'model.layers.3.mlp.' would match"), std::string::npos) << msg;
  // Under a prefix one level too short, the neighbouring modules' tensors are unexpected.
  const std::string shallow = load_error(c, f, "model.layers.3.");
  EXPECT_NE(shallow.find("unexpected"), std::string::npos) << shallow;
}

TEST(StrictLoad, NonFloatingWeightsAreNamed) {
  const MoEConfig c = small_config();
  MoELayer layer(c);
  SafetensorsWriter w;
  for (auto& [name, t] : layer.named_tensors()) {
    if (name == "experts.2.up_proj.weight")
      w.add_raw(name, DType::kBool, t->shape(), std::vector<std::byte>(static_cast<size_t>(t->numel())));
    else
      w.add(name, *t);
  }
  const std::string msg = load_error(c, SafetensorsFile::from_bytes(w.serialize(), "w.safetensors"));
  EXPECT_NE(msg.find("tensor 'experts.2.up_proj.weight' has dtype BOOL"), std::string::npos) << msg;
}

TEST(StrictLoad, EveryConformanceCaseLoads) {
  int cases = 0;
  for (const auto& dir : std::filesystem::directory_iterator(data_dir() + "/conformance/moe")) {
    if (!dir.is_directory()) continue;
    SCOPED_TRACE(dir.path().string());
    const MoEConfig c = parse_moe_config(read_text_file((dir.path() / "config.json").string()), "config.json",
                                         std::vector<std::string_view>{"train", "step", "max_steps"});
    MoELayer layer(c);
    EXPECT_NO_THROW(layer.load(SafetensorsFile::open((dir.path() / "weights.safetensors").string())));
    ++cases;
  }
  EXPECT_GE(cases, 16);
}

}  // namespace
}  // namespace hymoe::test
