// The hymoe command's behaviour on bad input: a clear message naming the file/field/value, a non-zero exit,
// and no output file. Also `inspect`, `demo` and `bench` (its JSON contract) on their happy paths.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "hymoe/safetensors.h"
#include "models/model_test_util.h"
#include "test_util.h"

namespace hymoe::test {
namespace {

namespace fs = std::filesystem;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class ForwardCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path();
    case_ = data_dir() + "/conformance/moe/softmax_silu_basic";
    fs::copy_file(case_ + "/config.json", dir_ + "/config.json");
  }

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
      EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << "temporary left behind";
  }
  TempDir tmp_{"cli"};
  std::string dir_, case_;
};

// --bf16-compute and --quant-compute are options of every subcommand that computes; a value outside their names is
// refused by name, before the command does any work.
TEST(ComputeOptions, EveryComputingCommandTakesThemAndNamesABadValue) {
  // (forward's required options are given files that do not exist: the settings are refused before they are read.)
  for (const std::string command : {"forward --config c.json --weights w.safetensors --input i.safetensors --output "
                                    "o.safetensors", "bench", "demo", "train"}) {
    std::string log;
    EXPECT_NE(run_command(tool_path() + " " + command + " --bf16-compute fast", &log), 0) << command;
    EXPECT_NE(log.find("--bf16-compute=fast is not one of auto, widen, native"), std::string::npos) << command << log;
    EXPECT_NE(run_command(tool_path() + " " + command + " --quant-compute int4", &log), 0) << command;
    EXPECT_NE(log.find("--quant-compute=int4 is not one of auto, exact, int8"), std::string::npos) << command << log;
  }
}

// An integer flag keeps its exact value or is refused by name: CLI11 alone turns 2^63 into 2^63 - 1 silently (and
// reports that number), reads 0x10 as hex and 010 as octal.
TEST(IntegerFlags, AValueBeyondTheTypeOrNotDecimalIsRefusedByName) {
  for (const std::string args : {"demo --tokens", "train --steps", "bench --tokens", "plan --num-gpu-experts"}) {
    std::string log;
    EXPECT_NE(run_command(tool_path() + " " + args + " 9223372036854775808", &log), 0) << args;
    EXPECT_NE(log.find("must be an integer in [-9223372036854775808, 9223372036854775807], got '9223372036854775808'"),
              std::string::npos)
        << args << ": " << log;
    EXPECT_EQ(log.find("9223372036854775807 "), std::string::npos) << args << ": " << log;
    EXPECT_NE(run_command(tool_path() + " " + args + " 0x10", &log), 0) << args;
    EXPECT_NE(log.find("must be a decimal integer, got '0x10'"), std::string::npos) << args << ": " << log;
    EXPECT_NE(run_command(tool_path() + " " + args + " 010", &log), 0) << args;
    EXPECT_NE(log.find("without leading zeros (010 would be read as octal), got '010'"), std::string::npos)
        << args << ": " << log;
  }
}

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
                 "13 missing tensors 'router.gate.weight'");
  EXPECT_NE(log.find("the prefix 'model.layers.3.mlp.' would match"), std::string::npos) << log;
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

// Weights and x agree on dim 32, the config says 16: the config is the odd one out, so the message names it, the
// weights file and tensor that contradict it, and not x.
TEST_F(ForwardCli, AConfigDisagreeingWithItsWeightsIsNamedBeforeTheInput) {
  write_config(R"({"dim": 16, "hidden_dim": 64, "num_experts": 4, "top_k": 2})");
  std::string log;
  const std::string weights = case_ + "/weights.safetensors";
  expect_failure(forward(weights, case_ + "/input.safetensors", &log), log,
                 dir_ + "/config.json: num_experts=4 and dim=16 disagree with " + weights +
                     ", whose tensor 'router.gate.weight' has shape (4, 32) (the config implies (4, 16))");
  EXPECT_EQ(log.find("'x'"), std::string::npos) << log;
  // With the config and the weights in agreement, a misshapen x is the input's fault and named so.
  write_config(R"({"dim": 32, "hidden_dim": 64, "num_experts": 4, "top_k": 2})");
  SafetensorsWriter x;
  x.add("x", Tensor(Shape{2, 3, 16}));
  x.write(dir_ + "/x16.safetensors");
  expect_failure(forward(weights, dir_ + "/x16.safetensors", &log), log,
                 dir_ + "/x16.safetensors: tensor 'x' has shape (2, 3, 16), expected (batch, seq_len, 32)");
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

TEST_F(ForwardCli, NonFloatInputsAreNamed) {
  const Tensor x = SafetensorsFile::open(case_ + "/input.safetensors").read_f32("x");
  const Shape shape = x.shape();
  const auto raw = [&](DType dtype) {
    return std::vector<std::byte>(static_cast<size_t>(x.numel() * dtype_size(dtype)), std::byte{1});
  };
  std::string log;
  for (const DType dtype : {DType::kBool, DType::kI32, DType::kU8}) {
    SafetensorsWriter w;
    w.add_raw("x", dtype, shape, raw(dtype));
    w.write(dir_ + "/x.safetensors");
    expect_failure(forward(case_ + "/weights.safetensors", dir_ + "/x.safetensors", &log), log,
                   "x.safetensors: tensor 'x' has dtype " + std::string(dtype_name(dtype)) + "; it must be floating point");
  }
  // grad_output for the backward, likewise; and F16 activations are accepted.
  SafetensorsWriter w;
  w.add_raw("x", DType::kF16, shape, std::vector<std::byte>(static_cast<size_t>(x.numel() * 2), std::byte{0}));
  w.add_raw("grad_output", DType::kBool, shape, raw(DType::kBool));
  w.write(dir_ + "/xg.safetensors");
  expect_failure(forward(case_ + "/weights.safetensors", dir_ + "/xg.safetensors", &log, "--train --backward"), log,
                 "tensor 'grad_output' has dtype BOOL");
  ASSERT_EQ(forward(case_ + "/weights.safetensors", dir_ + "/xg.safetensors", &log, "--train"), 0) << log;
}

TEST_F(ForwardCli, UnusedWeightsAreRefusedByStrictLoading) {
  // softmax_silu_basic has no shared expert and a softmax router: a shared expert and an expert bias are unused.
  const auto w = SafetensorsFile::open(case_ + "/weights.safetensors");
  SafetensorsWriter writer;
  for (const auto& t : w.tensors()) writer.add(t.name, w.read_f32(t.name));
  writer.add("shared_expert.up_proj.weight", w.read_f32("experts.0.up_proj.weight"));
  writer.add("router.expert_bias", Tensor(Shape{4}));
  writer.add("experts.4.up_proj.weight", w.read_f32("experts.0.up_proj.weight"));
  writer.write(dir_ + "/w.safetensors");
  std::string log;
  expect_failure(forward(dir_ + "/w.safetensors", case_ + "/input.safetensors", &log), log,
                 "3 unexpected tensors 'experts.4.up_proj.weight', 'router.expert_bias', 'shared_expert.up_proj.weight'");
}

TEST_F(ForwardCli, OverflowIsAnErrorNamingTheStage) {
  Tensor x = SafetensorsFile::open(case_ + "/input.safetensors").read_f32("x");
  std::fill(x.values().begin(), x.values().end(), 1e30f);
  SafetensorsWriter w;
  w.add("x", x);
  w.write(dir_ + "/x.safetensors");
  std::string log;
  expect_failure(forward(case_ + "/weights.safetensors", dir_ + "/x.safetensors", &log), log,
                 "forward: a non-finite value inf appeared in the router's z_loss although");
  EXPECT_NE(log.find("largest |x| is 1e+30"), std::string::npos) << log;
}

TEST_F(ForwardCli, ASizeBeyondTheMachineIsRefusedBeforeAllocation) {
  // The issue's example: every input is opened before the layer is built, so a missing weights file is reported
  // at once instead of after gigabytes were zero-filled.
  write_config(R"({"dim": 16384, "hidden_dim": 16384, "num_experts": 64, "top_k": 2})");
  std::string log;
  expect_failure(forward(dir_ + "/no_such_weights.safetensors", case_ + "/input.safetensors", &log), log,
                 "no_such_weights.safetensors: cannot open");
  // With inputs that exist, the layer's size is compared with the machine's memory: named fields, no bad_alloc.
  write_config(R"({"dim": 1024, "hidden_dim": 1048576, "num_experts": 65536, "top_k": 2})");
  SafetensorsWriter x;
  x.add("x", Tensor(Shape{1, 2, 1024}));
  x.write(dir_ + "/x.safetensors");
  // Weights without a router gate: the case's (dim 32) would be named first as disagreeing with the config.
  SafetensorsWriter w;
  w.add("experts.0.up_proj.weight", Tensor(Shape{1, 1}));
  w.write(dir_ + "/w.safetensors");
  expect_failure(forward(dir_ + "/w.safetensors", dir_ + "/x.safetensors", &log), log,
                 "config.json: a layer of dim=1024, hidden_dim=1048576, num_experts=65536");
  EXPECT_NE(log.find("more than this machine's physical memory"), std::string::npos) << log;
  EXPECT_EQ(log.find("bad_alloc"), std::string::npos) << log;
}

TEST_F(ForwardCli, NumericFlagsAreRangeChecked) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--step -1", "--step"},
      {"--max-steps -5", "--max-steps"},
      {"--step 99999999999999999999", "--step"},
      {"--train --backward --aux-loss-weight nan", "--aux-loss-weight"},
      {"--train --backward --z-loss-weight inf", "--z-loss-weight"},
  };
  for (const auto& [flags, fragment] : cases) {
    std::string log;
    expect_failure(forward(case_ + "/weights.safetensors", case_ + "/input.safetensors", &log, flags), log, fragment);
  }
  // A config's step past int64 is refused as it is, not wrapped to a negative number.
  write_config(R"({"dim": 16, "hidden_dim": 32, "num_experts": 4, "top_k": 2, "step": 18446744073709551615})");
  std::string log;
  expect_failure(forward(case_ + "/weights.safetensors", case_ + "/input.safetensors", &log), log,
                 "field 'step' = 18446744073709551615 is out of range [0, 9223372036854775807]");
}

TEST_F(ForwardCli, ConfigErrors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"dim": 16, "hidden_dim": 32, "num_experts": 4, "top_k": 5})", "top_k=5 must be in 1..num_experts=4"},
      {R"({"dim": 16, "hidden_dim": 0, "num_experts": 4, "top_k": 2})", "field 'hidden_dim' = 0 is out of range [1, 1048576]"},
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

// ---- JSON and text inputs: every reader refuses deep nesting, duplicate keys and non-regular files by name --------

// A header of `deep` nested arrays in the first tensor's shape (200 KB at 100,000: the input that once crashed).
std::string deep_safetensors(int deep) {
  const std::string header = R"({"x":{"dtype":"U8","shape":)" + std::string(static_cast<size_t>(deep), '[') +
                             std::string(static_cast<size_t>(deep), ']') + R"(,"data_offsets":[0,1]}})";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return bytes + header + "a";
}

TEST_F(ForwardCli, DeeplyNestedConfigIsANamedErrorNotACrash) {
  write_config(R"({"dim": )" + std::string(100000, '[') + std::string(100000, ']') + "}");
  std::string log;
  const int rc = forward(case_ + "/weights.safetensors", case_ + "/input.safetensors", &log);
  EXPECT_EQ(rc, 1) << "exit status 1 (an error), not a signal: " << log.substr(0, 300);
  expect_failure(rc, log, dir_ + "/config.json: JSON nested deeper than 64 levels");
}

TEST_F(ForwardCli, DuplicateConfigKeyIsNamed) {
  write_config(R"({"dim": 16, "hidden_dim": 32, "num_experts": 4, "top_k": 2, "top_k": 3})");
  std::string log;
  expect_failure(forward(case_ + "/weights.safetensors", case_ + "/input.safetensors", &log), log,
                 dir_ + "/config.json: duplicate key 'top_k'");
}

TEST_F(ForwardCli, ConfigNumberPastInt64IsOutOfRangeNotMinusOne) {
  write_config(R"({"dim": 18446744073709551615, "hidden_dim": 32, "num_experts": 4, "top_k": 2})");
  std::string log;
  expect_failure(forward(case_ + "/weights.safetensors", case_ + "/input.safetensors", &log), log,
                 "field 'dim' = 18446744073709551615 is out of range");
}

TEST_F(ForwardCli, DirectoryAsConfigIsNamedAndAnEndlessDeviceStopsAtTheLimit) {
  std::string log;
  int rc = run_command(tool_path() + " forward --config " + dir_ + " --weights " + case_ +
                           "/weights.safetensors --input " + case_ + "/input.safetensors --output " + out(),
                       &log);
  expect_failure(rc, log, dir_ + ": is a directory, which cannot be read as a file");
  // /dev/zero is read as a stream, and never ends: the config limit ends it (`timeout` turns a regression into a
  // failure, not a hung test).
  rc = run_command("timeout 60 " + tool_path() + " forward --config /dev/zero --weights " + case_ +
                       "/weights.safetensors --input " + case_ + "/input.safetensors --output " + out(),
                   &log);
  EXPECT_EQ(rc, 1) << log;
  expect_failure(rc, log, "/dev/zero: holds more than the limit of 16777216 bytes for this kind of input (read as a stream)");
}

// Every input of forward from a pipe, as a shell gives them: process substitution (`<(...)`, a pipe named
// /dev/fd/N), /dev/stdin fed by a pipe, and a FIFO whose writer comes after the reader opened it. The result is
// the one from regular files; a stream past its limit is an error naming the file and the limit.
TEST_F(ForwardCli, ReadsPipesFifosAndStdin) {
  std::string log;
  ASSERT_EQ(forward(case_ + "/weights.safetensors", case_ + "/input.safetensors", &log), 0) << log;
  const Tensor want = SafetensorsFile::open(out()).read_f32("y");
  fs::remove(out());
  const std::string fifo = dir_ + "/weights.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string script = "(sleep 0.3; cat " + case_ + "/weights.safetensors > " + fifo + ") & cat " + case_ +
                             "/input.safetensors | timeout 60 " + tool_path() + " forward --config <(cat " + dir_ +
                             "/config.json) --weights " + fifo + " --input /dev/stdin --output " + out() + "; s=$?; wait; exit $s";
  ASSERT_EQ(run_command("bash -c '" + script + "'", &log), 0) << log;
  EXPECT_TRUE(all_close(SafetensorsFile::open(out()).read_f32("y"), want, 0, 0));
  fs::remove(out());
  const int rc = run_command("bash -c 'timeout 60 " + tool_path() + " forward --config <(head -c 16777217 /dev/zero) --weights " + case_ +
                                 "/weights.safetensors --input " + case_ + "/input.safetensors --output " + out() + "'",
                             &log);
  expect_failure(rc, log, ": holds more than the limit of 16777216 bytes for this kind of input (read as a stream)");
  EXPECT_NE(log.find("/dev/fd/"), std::string::npos) << log;
}

TEST_F(ForwardCli, DeeplyNestedOrDuplicatedSafetensorsHeaderIsNamed) {
  std::ofstream(dir_ + "/w.safetensors", std::ios::binary) << deep_safetensors(100000);
  std::string log;
  int rc = forward(dir_ + "/w.safetensors", case_ + "/input.safetensors", &log);
  EXPECT_EQ(rc, 1) << log.substr(0, 300);
  expect_failure(rc, log, "w.safetensors (header): JSON nested deeper than 64 levels");
  const std::string header =
      R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  std::string bytes(8, '\0');
  bytes[0] = static_cast<char>(header.size());
  std::ofstream(dir_ + "/x.safetensors", std::ios::binary) << bytes << header << std::string(8, '\0');
  rc = forward(case_ + "/weights.safetensors", dir_ + "/x.safetensors", &log);
  expect_failure(rc, log, "x.safetensors (header): duplicate key 'x'");
}

TEST(InspectCli, EscapesControlCharactersInTensorNames) {
  const TempDir dir("inspect");
  const std::string header = "{\"name\\u001b[2J\":{\"dtype\":\"F8\",\"shape\":[1],\"data_offsets\":[0,1]}}";
  std::string bytes(8, '\0');
  bytes[0] = static_cast<char>(header.size());
  std::ofstream(dir.path("t.safetensors"), std::ios::binary) << bytes << header << "a";
  std::string log;
  EXPECT_EQ(run_command(tool_path() + " inspect " + (dir.path("t.safetensors")), &log), 1) << log;
  EXPECT_NE(log.find("tensor 'name\\x1b[2J' has unknown dtype 'F8'"), std::string::npos) << log;
  EXPECT_EQ(log.find('\x1b'), std::string::npos) << "a raw escape character reached the terminal";
}

TEST(PlanCli, DeeplyNestedOrDuplicatedPlanFileIsNamed) {
  const TempDir dir("plan_json");
  const std::string data = data_dir() + "/placement/olmoe_c4.csv";
  std::ofstream(dir.path("deep.json")) << R"({"mask": )" << std::string(100000, '[') << std::string(100000, ']') << "}";
  std::string log;
  EXPECT_EQ(run_command(tool_path() + " plan --plan " + (dir.path("deep.json")) + " --evaluate " + data, &log), 1)
      << log.substr(0, 300);
  EXPECT_NE(log.find(dir.path("deep.json") + ": JSON nested deeper than 64 levels"), std::string::npos) << log.substr(0, 300);
  std::ofstream(dir.path("dup.json")) << R"({"mask": [[1, 0]], "mask": [[0, 1]]})";
  EXPECT_EQ(run_command(tool_path() + " plan --plan " + (dir.path("dup.json")) + " --evaluate " + data, &log), 1) << log;
  EXPECT_NE(log.find(dir.path("dup.json") + ": duplicate key 'mask'"), std::string::npos) << log;
}

TEST(Cli, UnknownSubcommandIsNamed) {
  std::string log;
  EXPECT_NE(run_command(tool_path() + " frobnicate --config x.json", &log), 0);
  EXPECT_NE(log.find("unknown command 'frobnicate'"), std::string::npos) << log;
  EXPECT_NE(log.find("forward"), std::string::npos) << "the known commands are listed: " << log;
  EXPECT_NE(run_command(tool_path() + " --threads 2 \"$(printf 'bad\\033name')\"", &log), 0);
  EXPECT_NE(log.find("unknown command 'bad\\x1bname'"), std::string::npos) << log;
  EXPECT_EQ(log.find('\x1b'), std::string::npos) << log;
  // No command at all is still CLI11's usage message.
  EXPECT_NE(run_command(tool_path(), &log), 0);
  EXPECT_NE(log.find("A subcommand is required"), std::string::npos) << log;
}

TEST_F(ForwardCli, MalformedWeightsFile) {
  std::ofstream(dir_ + "/w.safetensors", std::ios::binary) << "garbage";
  std::string log;
  expect_failure(forward(dir_ + "/w.safetensors", case_ + "/input.safetensors", &log), log, "w.safetensors: truncated");
}

// An output that is one of the inputs, by any spelling, is refused before any work, naming both flags; the input
// keeps its bytes.
TEST_F(ForwardCli, RefusesAnOutputThatIsAnInput) {
  fs::copy_file(case_ + "/weights.safetensors", dir_ + "/weights.safetensors");
  fs::copy_file(case_ + "/input.safetensors", dir_ + "/input.safetensors");
  fs::create_symlink(dir_ + "/config.json", dir_ + "/link.json");
  const std::string weights = read_bytes(dir_ + "/weights.safetensors"), input = read_bytes(dir_ + "/input.safetensors"),
                    config = read_bytes(dir_ + "/config.json");
  struct Case {
    std::string output, fragment;
  };
  const Case cases[] = {
      {"weights.safetensors", "--output weights.safetensors is the same file as --weights weights.safetensors"},
      {"./input.safetensors", "--output ./input.safetensors is the same file as --input input.safetensors"},
      {dir_ + "/link.json", "--output " + dir_ + "/link.json is the same file as --config config.json"},
  };
  for (const Case& c : cases) {
    std::string log;
    const int rc = run_command("cd " + dir_ + " && " + tool_path() +
                                   " forward --config config.json --weights weights.safetensors --input "
                                   "input.safetensors --output " + c.output,
                               &log);
    EXPECT_EQ(rc, 1) << log;
    EXPECT_NE(log.find(c.fragment), std::string::npos) << log;
  }
  EXPECT_EQ(read_bytes(dir_ + "/weights.safetensors"), weights);
  EXPECT_EQ(read_bytes(dir_ + "/input.safetensors"), input);
  EXPECT_EQ(read_bytes(dir_ + "/config.json"), config);
  EXPECT_TRUE(fs::is_symlink(dir_ + "/link.json"));
}

// A character device or a pipe is written in place, never replaced by a regular file; a directory is refused.
TEST_F(ForwardCli, WritesDevicesAndPipesInPlaceAndRefusesADirectory) {
  const std::string weights = case_ + "/weights.safetensors", input = case_ + "/input.safetensors";
  std::string log;
  ASSERT_EQ(forward(weights, input, &log), 0) << log;
  const auto file_bytes = fs::file_size(out());
  ASSERT_EQ(run_command(tool_path() + " forward --config " + dir_ + "/config.json --weights " + weights + " --input " +
                            input + " --output /dev/null",
                        &log),
            0)
      << log;
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  ASSERT_EQ(run_command(tool_path() + " forward --config " + dir_ + "/config.json --weights " + weights + " --input " +
                            input + " --output /dev/stdout | wc -c",
                        &log),
            0)
      << log;
  EXPECT_EQ(std::stoull(log), file_bytes) << "the whole output goes down the pipe";
  fs::create_directory(dir_ + "/d");
  EXPECT_EQ(run_command(tool_path() + " forward --config " + dir_ + "/config.json --weights " + weights + " --input " +
                            input + " --output " + dir_ + "/d",
                        &log),
            1);
  EXPECT_NE(log.find("--output " + dir_ + "/d: is a directory"), std::string::npos) << log;
  EXPECT_TRUE(fs::is_directory(dir_ + "/d"));
}

TEST_F(ForwardCli, AcceptsA255ByteOutputNameAndRefusesAMissingDirectory) {
  const std::string weights = case_ + "/weights.safetensors", input = case_ + "/input.safetensors";
  const std::string name = dir_ + "/" + std::string(243, 'o') + ".safetensors";
  std::string log;
  ASSERT_EQ(run_command(tool_path() + " forward --config " + dir_ + "/config.json --weights " + weights + " --input " +
                            input + " --output " + name,
                        &log),
            0)
      << log;
  EXPECT_TRUE(SafetensorsFile::open(name).contains("y"));
  EXPECT_EQ(run_command(tool_path() + " forward --config " + dir_ + "/config.json --weights " + weights + " --input " +
                            input + " --output " + dir_ + "/nope/out.safetensors",
                        &log),
            1);
  EXPECT_NE(log.find("its directory " + dir_ + "/nope cannot be used"), std::string::npos) << log;
}

TEST(InspectCli, ListsTensors) {
  std::string log;
  const std::string path = data_dir() + "/conformance/moe/softmax_silu_basic/weights.safetensors";
  ASSERT_EQ(run_command(tool_path() + " inspect " + path, &log), 0) << log;
  EXPECT_NE(log.find("router.gate.weight"), std::string::npos);
  EXPECT_NE(log.find("F32"), std::string::npos);
  EXPECT_NE(run_command(tool_path() + " inspect /nonexistent.safetensors", &log), 0);
}

// A safetensors or GGUF file through a pipe is read once and described as the file itself is (the format taken from
// the bytes read, not from a second open that would find the stream already consumed).
TEST(InspectCli, ReadsSafetensorsAndGgufThroughAPipe) {
  for (const std::string path : {data_dir() + "/conformance/moe/softmax_silu_basic/weights.safetensors",
                                 data_dir() + "/conformance/gguf/qwen2moe_q8_0/model.gguf"}) {
    std::string direct, piped;
    ASSERT_EQ(run_command(tool_path() + " inspect " + path, &direct), 0) << direct;
    ASSERT_EQ(run_command("cat " + path + " | " + tool_path() + " inspect /dev/stdin", &piped), 0) << piped;
    const size_t at = direct.find(':');
    ASSERT_NE(at, std::string::npos);
    EXPECT_EQ(piped, "/dev/stdin" + direct.substr(at)) << path;
  }
}

// A Hugging Face directory is described only when every MoE layer it holds has every tensor forward loads: one
// expert matrix deleted is an error naming it (as forward's is), not "present".
TEST(InspectCli, ModelDirectoryLackingATensorForwardLoadsNamesIt) {
  const TempDir dir("inspect_model");
  copy_hf_case("mixtral_e8_k2", dir.path());
  std::string log;
  ASSERT_EQ(run_command(tool_path() + " inspect " + dir.path(), &log), 0) << log;
  EXPECT_NE(log.find("MoE weights present: 1 of 2 MoE layers"), std::string::npos) << log;  // layer 1 only

  const std::string dropped = "model.layers.1.block_sparse_moe.experts.5.w3.weight";
  {
    const SafetensorsFile all = SafetensorsFile::open(dir.path("weights.safetensors"));
    SafetensorsWriter kept;
    for (const auto& t : all.tensors())
      if (t.name != dropped) kept.add(t.name, all.read_f32(t.name));
    kept.write(dir.path("weights.safetensors"));
  }
  EXPECT_EQ(run_command(tool_path() + " inspect " + dir.path(), &log), 1) << log;
  EXPECT_NE(log.find(dir.path() + ": MoE layer 1 lacks 1 of the 25 tensors hymoe forward loads: '" + dropped + "'"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("present"), std::string::npos) << "no description before the error: " << log;
  // forward names the same tensor.
  const std::string input = hf_case_dir("mixtral_e8_k2") + "/input.safetensors";
  EXPECT_EQ(run_command(tool_path() + " forward --model " + dir.path() + " --layer 1 --input " + input + " --output " +
                            dir.path("y.safetensors"),
                        &log),
            1);
  EXPECT_NE(log.find(dropped), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(dir.path("y.safetensors")));
}

// `hymoe bench --json` on a tiny shape: one object per configuration with the fields the docs name, and FLOPs and
// weight bytes by their formulas (FLOPs 2*T*(E*D + K*3*D*H + 3*D*shared*H); bytes the distinct experts touched,
// the shared MLP and the f32 router gate).
class BenchCli : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = tmp_.path(); }
  void write_shape(const std::string& file, const std::string& text) { std::ofstream(dir_ + "/" + file) << text; }
  int bench(const std::string& args, std::string* log) {
    return run_command(tool_path() + " bench --shapes-dir " + dir_ + " --threads 1 --repeats 1 --weights hot " + args, log);
  }
  TempDir tmp_{"bench"};
  std::string dir_;
};

constexpr const char* kTinyShape =
    R"({"name": "tiny", "model": "Tiny", "dim": 64, "expert_hidden": 32, "experts": 4, "top_k": 2, )"
    R"("shared_experts": 1, "activation": "swiglu", "router": "softmax"})";

TEST_F(BenchCli, JsonRowsCarryTheDocumentedFieldsAndCounts) {
  write_shape("tiny.json", kTinyShape);
  std::string log;
  ASSERT_EQ(bench("--shape tiny --tokens 1 3 --dtype f32 bf16 --no-baseline --json", &log), 0) << log;
  std::istringstream lines(log);
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line[0] == '{') rows.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(rows.size(), 4u) << log;
  const int64_t D = 64, H = 32, E = 4, K = 2, shared_hidden = 32;
  for (const auto& r : rows) {
    for (const char* key : {"shape", "tokens", "dtype", "threads", "routing", "layer_ms", "expert_ms", "baseline_ms",
                            "flops", "weight_bytes", "peak_gflops", "read_gbps", "kernel_gflops", "frac_peak_paired",
                            "frac_kernel_paired", "frac_bandwidth_paired", "dispatch_frac"})
      ASSERT_TRUE(r.contains(key)) << key << " missing in " << r.dump();
    EXPECT_EQ(r["shape"], "tiny");
    EXPECT_EQ(r["threads"], 1);
    EXPECT_TRUE(r["baseline_ms"].is_null());
    const int64_t T = r["tokens"];
    EXPECT_EQ(r["flops"].get<double>(), 2.0 * T * (E * D + K * 3 * D * H + 3 * D * shared_hidden));
    const int64_t elem = r["dtype"] == "bf16" ? 2 : 4;
    if (T == 1)  // one token touches exactly top_k experts
      EXPECT_EQ(r["weight_bytes"].get<double>(), static_cast<double>((K * 3 * D * H + 3 * D * shared_hidden) * elem + E * D * 4));
    EXPECT_GT(r["layer_ms"].get<double>(), 0.0);
    EXPECT_LE(r["expert_ms"].get<double>(), r["layer_ms"].get<double>());
    EXPECT_GT(r["peak_gflops"].get<double>(), 0.0);
    EXPECT_GT(r["read_gbps"].get<double>(), 0.0);
    EXPECT_GT(r["kernel_gflops"].get<double>(), 0.0);
    // Both fractions divide the same GFLOP/s, so they stand in the ratio of the two best probe passes.
    EXPECT_NEAR(r["frac_kernel"].get<double>() * r["kernel_gflops"].get<double>(),
                r["frac_peak"].get<double>() * r["peak_gflops"].get<double>(), 1e-9 * r["gflops"].get<double>());
  }
}

// GGUF dtypes: the weights encoded into GGUF blocks and run from their panel formats, exact or int8 as
// --quant-compute says (the int8 ones against the int8-dot peak); weight_bytes counts the panels' bytes per weight
// (docs/kernels.md, "Formats"): Q4_0 0.625, Q4_K 0.75 and Q6_K 1.0 (int8: Q4_0's f16 factors, 18 / 32, and the
// K-quants' compact ones, 152 / 256 and 212 / 256).
TEST_F(BenchCli, GgufDtypesRunTheirFormatsAndCountTheirBytes) {
  write_shape("tiny256.json",
              R"({"name": "tiny256", "model": "Tiny", "dim": 256, "expert_hidden": 256, "experts": 4, "top_k": 2, )"
              R"("shared_experts": 1, "activation": "swiglu", "router": "softmax"})");
  for (const std::string mode : {"exact", "int8"}) {
  SCOPED_TRACE(mode);
  const bool int8 = mode == "int8";
  std::string log;
  ASSERT_EQ(bench("--shape tiny256 --tokens 1 --dtype q4_0 q4_k q6_k --no-baseline --json --quant-compute " + mode,
                  &log),
            0)
      << log;
  std::istringstream lines(log);
  std::map<std::string, nlohmann::json> rows;
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line[0] == '{') {
      const auto j = nlohmann::json::parse(line);
      rows[j["dtype"].get<std::string>()] = j;
    }
  ASSERT_EQ(rows.size(), 3u) << log;
  const int64_t D = 256, H = 256, E = 4, K = 2;
  const std::map<std::string, std::pair<double, std::string>> want = {
      {"q4_0", {int8 ? 18 / 32.0 : 0.625, int8 ? "grouped_ffn_q4_0w_q8_0" : "grouped_ffn_q4_0w_f32"}},
      {"q4_k", {int8 ? 152 / 256.0 : 0.75, int8 ? "grouped_ffn_q4_kw_q8_k" : "grouped_ffn_q4_kw_f32"}},
      {"q6_k", {int8 ? 212 / 256.0 : 1.0, int8 ? "grouped_ffn_q6_kw_q8_k" : "grouped_ffn_q6_kw_f32"}}};
  for (const auto& [dtype, expected] : want) {
    const nlohmann::json& r = rows[dtype];
    const std::string kernel = r["kernel"];
    // HYMOE_ISA=scalar decodes to f32 (exact) or runs the reference (int8).
    if (kernel.find("portable") != std::string::npos || kernel.find("__ref") != std::string::npos) continue;
    EXPECT_EQ(kernel.rfind(expected.second, 0), 0u) << kernel;
    EXPECT_EQ(r["peak_kind"].get<std::string>(), int8 ? "int8dot" : "fma") << kernel;
    EXPECT_DOUBLE_EQ(r["weight_bytes"].get<double>(), (K + 1) * 3 * D * H * expected.first + E * D * 4.0) << dtype;
  }
  }
  std::string log;
  EXPECT_NE(bench("--shape tiny256 --tokens 1 --dtype q4_0 --no-baseline --quant-compute int4", &log), 0);
  EXPECT_NE(log.find("--quant-compute=int4 is not one of auto, exact, int8"), std::string::npos) << log;
  EXPECT_NE(bench("--shape tiny256 --tokens 1 --dtype nvfp4 --no-baseline", &log), 0);
  EXPECT_NE(log.find("--dtype=nvfp4 must be f32, bf16, bf16w, bf16n, q8_0, gguf_q8_0, q4_0, q4_1, q5_0, q5_1, "),
            std::string::npos)
      << log;
}

// The pool's polling time is read from the environment when the pool is made: a bad value is a named error before
// any work, 0 (sleep at once) runs as any other.
TEST_F(BenchCli, PoolSpinSettingIsCheckedAndZeroRuns) {
  write_shape("tiny.json", kTinyShape);
  const std::string args = " bench --shapes-dir " + dir_ + " --shape tiny --tokens 1 --dtype f32 --no-baseline --repeats 1";
  std::string log;
  EXPECT_NE(run_command("HYMOE_POOL_SPIN_US=soon " + tool_path() + args, &log), 0);
  EXPECT_NE(log.find("HYMOE_POOL_SPIN_US=soon must be an integer in [0, 1000000]"), std::string::npos) << log;
  EXPECT_EQ(run_command("HYMOE_POOL_SPIN_US=0 " + tool_path() + args, &log), 0) << log;
}

TEST_F(BenchCli, RefusesBadShapesNamingFileAndField) {
  struct Case {
    const char* text;
    const char* fragment;
  };
  const Case cases[] = {
      {R"({"name": "bad", "model": "B", "dim": "wide", "expert_hidden": 32, "experts": 4, "top_k": 2, "shared_experts": 0})",
       "field 'dim' must be an integer"},
      {R"({"name": "bad", "model": "B", "dim": 64, "experts": 4, "top_k": 2, "shared_experts": 0})",
       "missing field 'expert_hidden'"},
      {R"({"name": "bad", "model": "B", "dim": 64, "expert_hidden": 32, "experts": 4, "top_k": 5, "shared_experts": 0})",
       "inconsistent shape"},
      {R"({"name": "bad", "model": "B", "dim": 64, "expert_hidden": 32, "experts": 4, "top_k": 2, "shared_experts": 0,
          "activation": "gelu", "router": "softmax"})",
       "activation 'gelu'"},
      {R"({"name": "bad", "model": "B", "dim": 64)", "not valid JSON"},
      {R"({"name": "bad", "name": "b", "model": "B", "dim": 64, "expert_hidden": 32, "experts": 4, "top_k": 2, "shared_experts": 0})",
       "duplicate key 'name'"},
      {R"({"name": "bad", "model": "B", "dim": 1e400, "expert_hidden": 32, "experts": 4, "top_k": 2, "shared_experts": 0})",
       "not valid JSON: number overflow parsing '1e400'"},
      {R"({"name": "bad", "model": "B", "dim": 1e300, "expert_hidden": 32, "experts": 4, "top_k": 2, "shared_experts": 0})",
       "field 'dim' = 1e+300 is out of range"},
  };
  for (const Case& c : cases) {
    write_shape("bad.json", c.text);
    std::string log;
    const int rc = bench("--shape bad --tokens 1 --dtype f32 --no-baseline --json", &log);
    EXPECT_NE(rc, 0) << c.text;
    EXPECT_NE(log.find("bad.json"), std::string::npos) << "message lacks the file: " << log;
    EXPECT_NE(log.find(c.fragment), std::string::npos) << "message lacks '" << c.fragment << "': " << log;
    EXPECT_EQ(log.find('{'), std::string::npos) << "no row may be printed: " << log;
  }
  write_shape("bad.json", R"({"name": "bad", "dim": )" + std::string(100000, '[') + std::string(100000, ']') + "}");
  std::string deep_log;
  EXPECT_EQ(bench("--shape bad --tokens 1 --dtype f32 --no-baseline --json", &deep_log), 1) << deep_log.substr(0, 300);
  EXPECT_NE(deep_log.find("bad.json: JSON nested deeper than 64 levels"), std::string::npos) << deep_log.substr(0, 300);
  write_shape("tiny.json", kTinyShape);
  std::string log;
  EXPECT_NE(bench("--shape nosuch --tokens 1 --dtype f32 --no-baseline", &log), 0);
  EXPECT_NE(log.find("--shape=nosuch is not in"), std::string::npos) << log;
  EXPECT_NE(log.find("tiny"), std::string::npos) << "the known shapes are listed: " << log;
}

// A shape too large for this machine's memory is skipped with a notice naming it; with --json the notice goes to
// stderr, so stdout carries nothing but measurement objects.
TEST_F(BenchCli, SkipsAShapeTooLargeForMemoryOffTheJsonStream) {
  write_shape("huge.json", R"({"name": "huge", "model": "H", "dim": 65536, "expert_hidden": 65536, "experts": 4096, )"
                           R"("top_k": 2, "shared_experts": 0, "activation": "swiglu", "router": "softmax"})");
  write_shape("tiny.json", kTinyShape);
  const std::string args = " bench --shapes-dir " + dir_ +
                           " --threads 1 --repeats 1 --weights hot --shape huge tiny --tokens 1 --dtype f32 "
                           "--no-baseline --json";
  std::string both, out;
  ASSERT_EQ(run_command(tool_path() + args, &both), 0) << both;
  EXPECT_NE(both.find("huge              skipped: needs about"), std::string::npos) << both;
  ASSERT_EQ(run_command("{ " + tool_path() + args + " 2>/dev/null; }", &out), 0) << out;
  std::istringstream lines(out);
  int rows = 0;
  for (std::string line; std::getline(lines, line);) {
    ASSERT_TRUE(!line.empty() && line[0] == '{') << "not a JSON object on stdout: " << line;
    EXPECT_EQ(nlohmann::json::parse(line)["shape"], "tiny");
    ++rows;
  }
  EXPECT_EQ(rows, 1);
}

TEST(DemoCli, RunsSmallBatch) {
  std::string log;
  ASSERT_EQ(run_command(tool_path() + " demo --tokens 3 --repeats 1 --no-bench", &log), 0) << log;
  EXPECT_NE(log.find("tokens per expert"), std::string::npos);
  EXPECT_NE(log.find("aux_loss"), std::string::npos);
}

// demo, train and bench: numbers outside what the commands can represent or hold are named errors at the boundary.
struct BadFlags {
  std::string args;
  std::string fragment;
};

void expect_refused(const std::string& command, const std::vector<BadFlags>& cases) {
  for (const auto& c : cases) {
    std::string log;
    const int rc = run_command(tool_path() + " " + command + " " + c.args, &log);
    EXPECT_EQ(rc != 0, true) << c.args << ": " << log;
    EXPECT_NE(log.find(c.fragment), std::string::npos) << c.args << ": message lacks '" << c.fragment << "': " << log;
    EXPECT_EQ(log.find("bad_alloc"), std::string::npos) << c.args << ": " << log;
  }
}

TEST(DemoCli, RefusesNumbersOutOfRange) {
  expect_refused("demo --no-bench",
                 {{"--tokens 0", "--tokens=0 must be >= 1"},
                  {"--tokens 100000000000", "--tokens=100000000000 through the demo layer"},
                  {"--tokens 100000000000", "physical memory"},
                  {"--seed -1", "--seed"},
                  {"--repeats 0", "--repeats=0 must be in 1..10000"},
                  {"--repeats 1000000", "--repeats=1000000 must be in 1..10000"}});
}

TEST(TrainCli, RefusesNumbersOutOfRange) {
  expect_refused("train --no-progress",
                 {{"--lr inf", "--lr"},
                  {"--lr 0", "--lr=0 must be > 0"},
                  {"--momentum 1 --optimizer sgd", "--momentum=1 must be in [0, 1)"},
                  {"--weight-decay inf", "--weight-decay"},
                  {"--aux-loss-weight nan", "--aux-loss-weight"},
                  {"--z-loss-weight -inf", "--z-loss-weight"},
                  {"--input-mean inf", "--input-mean"},
                  {"--seed -1", "--seed"},
                  {"--tokens 0", "--tokens=0 must be >= 1"},
                  {"--steps 0", "--steps=0 must be >= 1"},
                  {"--steps 1000000000000000", "--steps=1000000000000000"},
                  {"--tokens 100000000000", "on tokens=100000000000 per step"},
                  {"--dim 1048576 --hidden 1048576 --experts 65536", "dim=1048576, hidden_dim=1048576"},
                  {"--teacher dense --hidden 4611686018427387904 --top-k 4", "does not fit in 64 bits"}});
}

TEST_F(BenchCli, RefusesNumbersOutOfRange) {
  write_shape("tiny.json", kTinyShape);
  const std::string base = "bench --shapes-dir " + dir_ + " --threads 1 --shape tiny --dtype f32 --no-baseline ";
  expect_refused(base, {{"--tokens 0", "--tokens=0 must be >= 1"},
                        {"--tokens 1000000000000", "--tokens=1000000000000 on shape tiny"},
                        {"--tokens 1 --repeats 0", "--repeats"},
                        {"--tokens 1 --repeats -1", "--repeats"},
                        {"--tokens 1 --repeats 100000", "--repeats"}});
}

}  // namespace
}  // namespace hymoe::test
