// The hymoe command's behaviour on bad input: a clear message naming the file/field/value, a non-zero exit,
// and no output file. Also `inspect` and `demo` on their happy paths.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "hymoe/safetensors.h"
#include "test_util.h"

namespace hymoe::test {
namespace {

namespace fs = std::filesystem;

class ForwardCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir("cli");
    case_ = data_dir() + "/conformance/moe/softmax_silu_basic";
    fs::copy_file(case_ + "/config.json", dir_ + "/config.json");
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write_config(const std::string& text) {
    std::ofstream(dir_ + "/config.json", std::ios::trunc) << text;
  }
  // Runs forward with the given weights/input paths; returns the exit code and the output in *log.
  int forward(const std::string& weights, const std::string& input, std::string* log, const std::string& extra = "") {
    return run_command(tool_path() + " forward --config " + dir_ + "/config.json --weights " + weights + " --input " +
                           input + " --output " + out() + " " + extra,
                       log);
  }
  std::string out() const { return dir_ + "/out.safetensors"; }
  void expect_failure(int rc, const std::string& log, const std::string& fragment) {
    EXPECT_NE(rc, 0) << log;
    EXPECT_NE(log.find(fragment), std::string::npos) << "message lacks '" << fragment << "': " << log;
    EXPECT_FALSE(fs::exists(out())) << "a failed run must not write its output";
    for (const auto& e : fs::directory_iterator(dir_))
      EXPECT_EQ(e.path().filename().string().find("out.safetensors.tmp"), std::string::npos) << "temporary left behind";
  }
  std::string dir_, case_;
};

TEST_F(ForwardCli, SucceedsOnAValidCase) {
  std::string log;
  ASSERT_EQ(forward(case_ + "/weights.safetensors", case_ + "/input.safetensors", &log), 0) << log;
  const auto f = SafetensorsFile::open(out());
  EXPECT_EQ(f.info("aux_loss").shape, Shape{});
  EXPECT_TRUE(f.contains("route.indices"));
}

TEST_F(ForwardCli, ReadsALayerOutOfAWholeModelCheckpointByPrefix) {
  // The layer's tensors under "model.layers.3.mlp." beside an unrelated tensor, as in a whole-model file.
  const auto w = SafetensorsFile::open(case_ + "/weights.safetensors");
  SafetensorsWriter writer;
  for (const auto& t : w.tensors()) writer.add("model.layers.3.mlp." + t.name, w.read_f32(t.name));
  writer.add("model.embed_tokens.weight", Tensor(Shape{4, 4}));
  writer.write(dir_ + "/model.safetensors");
  std::string log;
  ASSERT_EQ(forward(dir_ + "/model.safetensors", case_ + "/input.safetensors", &log, "--prefix model.layers.3.mlp."), 0)
      << log;
  const auto got = SafetensorsFile::open(out());
  const auto exp = SafetensorsFile::open(case_ + "/expected.safetensors");
  EXPECT_TRUE(all_close(got.read_f32("y"), exp.read_f32("y"), 1e-4, 1e-4));
  fs::remove(out());
  expect_failure(forward(dir_ + "/model.safetensors", case_ + "/input.safetensors", &log), log,
                 "missing tensor 'router.gate.weight'");
}

TEST_F(ForwardCli, MissingWeightTensor) {
  const auto w = SafetensorsFile::open(case_ + "/weights.safetensors");
  SafetensorsWriter writer;
  for (const auto& t : w.tensors())
    if (t.name != "experts.2.up_proj.weight") writer.add(t.name, w.read_f32(t.name));
  writer.write(dir_ + "/w.safetensors");
  std::string log;
  expect_failure(forward(dir_ + "/w.safetensors", case_ + "/input.safetensors", &log), log,
                 "missing tensor 'experts.2.up_proj.weight'");
}

TEST_F(ForwardCli, MisshapenWeightTensor) {
  const auto w = SafetensorsFile::open(case_ + "/weights.safetensors");
  SafetensorsWriter writer;
  for (const auto& t : w.tensors()) {
    Tensor v = w.read_f32(t.name);
    if (t.name == "router.gate.weight") v = v.reshaped(Shape{v.dim(1), v.dim(0)});
    writer.add(t.name, v);
  }
  writer.write(dir_ + "/w.safetensors");
  std::string log;
  expect_failure(forward(dir_ + "/w.safetensors", case_ + "/input.safetensors", &log), log, "'router.gate.weight' has shape");
}

TEST_F(ForwardCli, MissingAndMisshapenInput) {
  SafetensorsWriter a;
  a.add("not_x", Tensor(Shape{1, 2, 3}));
  a.write(dir_ + "/a.safetensors");
  std::string log;
  expect_failure(forward(case_ + "/weights.safetensors", dir_ + "/a.safetensors", &log), log, "missing tensor 'x'");
  SafetensorsWriter b;
  b.add("x", Tensor(Shape{4, 5}));
  b.write(dir_ + "/b.safetensors");
  expect_failure(forward(case_ + "/weights.safetensors", dir_ + "/b.safetensors", &log), log, "tensor 'x' has shape (4, 5)");
}

TEST_F(ForwardCli, NonFiniteInput) {
  Tensor x = SafetensorsFile::open(case_ + "/input.safetensors").read_f32("x");
  x[7] = std::numeric_limits<float>::infinity();
  SafetensorsWriter w;
  w.add("x", x);
  w.write(dir_ + "/x.safetensors");
  std::string log;
  expect_failure(forward(case_ + "/weights.safetensors", dir_ + "/x.safetensors", &log), log, "non-finite value at flat index 7");
}

TEST_F(ForwardCli, ConfigErrors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"dim": 16, "hidden_dim": 32, "num_experts": 4, "top_k": 5})", "top_k=5 must be in 1..num_experts=4"},
      {R"({"dim": 16, "hidden_dim": 0, "num_experts": 4, "top_k": 2})", "hidden_dim=0 must be positive"},
      {R"({"dim": 16, "hidden_dim": 32, "num_experts": 4, "top_k": 2, "activation": "swish"})", "activation='swish'"},
      {R"({"dim": 16, "hidden_dim": 32, "num_experts": 4, "top_k": 2, "router_type": "topk"})", "router_type='topk'"},
      {R"({"dim": 16, "hidden_dim": 32, "num_experts": 4, "top_k": 2, "capacity_factor": -1})", "capacity_factor=-1"},
      {R"({"dim": 16, "hidden_dim": 32, "num_experts": 4, "top_k": 2, "router_type": "sigmoid_topk",
           "bias_schedule": "warmup"})", "bias_schedule='warmup'"},
      {R"({"dim": 16, "hidden_dim": 32, "num_experts": 4, "top_k": 2, "colour": 1})", "unknown field 'colour'"},
      {R"({"dim": 16, )", "not valid JSON"},
  };
  for (const auto& [text, fragment] : cases) {
    write_config(text);
    std::string log;
    expect_failure(forward(case_ + "/weights.safetensors", case_ + "/input.safetensors", &log), log, fragment);
    EXPECT_NE(log.find("config.json"), std::string::npos) << "message must name the config file: " << log;
  }
}

TEST_F(ForwardCli, MalformedWeightsFile) {
  std::ofstream(dir_ + "/w.safetensors", std::ios::binary) << "garbage";
  std::string log;
  expect_failure(forward(dir_ + "/w.safetensors", case_ + "/input.safetensors", &log), log, "w.safetensors: truncated");
}

TEST(InspectCli, ListsTensors) {
  std::string log;
  const std::string path = data_dir() + "/conformance/moe/softmax_silu_basic/weights.safetensors";
  ASSERT_EQ(run_command(tool_path() + " inspect " + path, &log), 0) << log;
  EXPECT_NE(log.find("router.gate.weight"), std::string::npos);
  EXPECT_NE(log.find("F32"), std::string::npos);
  EXPECT_NE(run_command(tool_path() + " inspect /nonexistent.safetensors", &log), 0);
}

TEST(DemoCli, RunsSmallBatch) {
  std::string log;
  ASSERT_EQ(run_command(tool_path() + " demo --tokens 3 --repeats 1", &log), 0) << log;
  EXPECT_NE(log.find("tokens per expert"), std::string::npos);
  EXPECT_NE(log.find("aux_loss"), std::string::npos);
}

}  // namespace
}  // namespace hymoe::test
