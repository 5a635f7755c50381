// `hymoe stats`, `plan` and `replay` given what a careless or hostile user gives them: every flag out of range,
// every number the code cannot represent and every conflicting pair of flags is an error that names the flag (or
// the file and field), exits 1, and writes and prints nothing but the message.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <sys/stat.h>

#include "test_util.h"

namespace hymoe::test {
namespace {

namespace fs = std::filesystem;

// A temporary directory removed when the test ends, pass or fail, with a helper to write a file into it.
struct ScratchDir {
  TempDir dir{"placement_bad"};
  const std::string path = dir.path();
  std::string file(const std::string& name, const std::string& text) const {
    std::ofstream(path + "/" + name) << text;
    return path + "/" + name;
  }
};

// Runs `args` through the tool; expects exit status 1 and `message` in the output, and no header line before it.
void expect_error(const std::string& args, const std::string& message) {
  std::string output;
  EXPECT_EQ(run_command(tool_path() + " " + args, &output), 1) << args << "\n" << output;
  EXPECT_NE(output.find(message), std::string::npos) << args << "\n" << output;
  EXPECT_EQ(output.rfind("hymoe: error: ", 0), 0u) << "printed before the error: " << args << "\n" << output;
}

std::string stats_file() { return data_dir() + "/placement/olmoe_c4.csv"; }

// 2 layers x 8 experts, 64 tokens: experts 0 and 1, then 4 and 5.
std::string small_trace(const ScratchDir& dir) {
  std::string csv = "token,step,layer,e1,e2\n";
  for (int t = 0; t < 64; ++t)
    for (int l = 0; l < 2; ++l)
      csv += std::to_string(t) + "," + std::to_string(t) + "," + std::to_string(l) + "," + (t < 32 ? "0,1\n" : "4,5\n");
  return dir.file("trace.csv", csv);
}

TEST(PlacementBadInput, ModelLayoutIsCheckedBeforeAnyLayerIsClassified) {
  ScratchDir dir;
  const std::string plan = "plan --stats " + stats_file() + " --num-gpu-experts 4 --output " + dir.path + "/p.json ";
  expect_error(plan + "--moe-layer-freq 0", "--moe-layer-freq must be at least 1, got 0");
  expect_error(plan + "--moe-layer-freq -3", "--moe-layer-freq must be at least 1, got -3");
  expect_error(plan + "--first-k-dense-replace -1", "--first-k-dense-replace must be non-negative, got -1");
  EXPECT_FALSE(fs::exists(dir.path + "/p.json"));
}

TEST(PlacementBadInput, NumbersOutsideWhatTheCodeRepresentsNameTheFlag) {
  ScratchDir dir;
  const std::string plan = "plan --stats " + stats_file() + " --num-gpu-experts 4 --output " + dir.path + "/p.json ";
  expect_error(plan + "--seed -1", "--seed must be non-negative, got -1");
  expect_error(plan + "--expert-bytes -5", "--expert-bytes must be non-negative, got -5");
  expect_error(plan + "--cpu-us-per-token-expert inf", "--cpu-us-per-token-expert must be in [0, 3.6e+09]");
  expect_error(plan + "--gpu-layer-overhead-us nan", "--gpu-layer-overhead-us must be in [0, 3.6e+09]");
  expect_error(plan + "--routed-per-step inf", "--routed-per-step must be in (0, 1e+09]");
  // 2^63 bytes per expert times 4 experts does not fit in 64 bits: an error, not a wrapped 0.
  expect_error(plan + "--expert-bytes 9223372036854775807", "expert_bytes=9223372036854775807 times 4 GPU experts");
  EXPECT_FALSE(fs::exists(dir.path + "/p.json"));
  const std::string trace = small_trace(dir);
  const std::string replay = "replay --trace " + trace + " --num-gpu-experts 4 ";
  expect_error(replay + "--hysteresis inf", "--hysteresis must be in [0, 1e+06], got inf");
  expect_error(replay + "--hysteresis -0.5", "--hysteresis must be in [0, 1e+06], got -0.5");
  expect_error(replay + "--ema-alpha nan", "--ema-alpha must be in (0, 1], got nan");
  expect_error(replay + "--replan-every 0", "--replan-every must be at least 1 token, got 0");
  expect_error(replay + "--expert-bytes 9223372036854775807 --replan-every 8",
               "expert_bytes=9223372036854775807 times");
}

// Byte totals are exact or an error: 2 x 2^63 is 2^64, one past what 64 bits hold, so it must not come out as
// 2^64 - 2 (what --expert-bytes saturated to INT64_MAX gave); a value past 2^64 - 1 or not decimal names the flag.
TEST(PlacementBadInput, ByteTotalsAreExactOrANamedError) {
  ScratchDir dir;
  const std::string out = dir.path + "/p.json";
  const std::string plan = "plan --stats " + stats_file() + " --output " + out + " ";
  expect_error(plan + "--num-gpu-experts 2 --expert-bytes 9223372036854775808",
               "expert_bytes=9223372036854775808 times 2 GPU experts exceeds 2^64-1 bytes");
  expect_error(plan + "--num-gpu-experts 2 --expert-bytes 18446744073709551616",
               "--expert-bytes must be an integer in [0, 18446744073709551615], got '18446744073709551616'");
  expect_error(plan + "--num-gpu-experts 2 --expert-bytes 0x10",
               "--expert-bytes must be an integer in [0, 18446744073709551615], got '0x10'");
  expect_error(plan + "--num-gpu-experts 2 --expert-bytes=-1", "--expert-bytes must be non-negative, got -1");
  EXPECT_FALSE(fs::exists(out));
  // The largest total that fits is written as it is.
  std::string output;
  ASSERT_EQ(run_command(tool_path() + " " + plan + "--num-gpu-experts 1 --expert-bytes 18446744073709551615", &output), 0)
      << output;
  EXPECT_NE(output.find("GPU bytes for experts: 18446744073709551615\n"), std::string::npos) << output;
  std::ifstream in(out);
  const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(written.find("\"gpu_bytes\":18446744073709551615,"), std::string::npos) << written;
  // The decode policies' bytes moved: checked before a line is printed.
  const std::string replay = "replay --trace " + small_trace(dir) + " --num-experts 8 --num-gpu-experts 4 ";
  for (const char* policy : {"score-cache", "static"})
    ASSERT_EQ(run_command(tool_path() + " " + replay + "--policy " + policy + " --expert-bytes 1", &output), 0)
        << output;
  expect_error(replay + "--policy score-cache --expert-bytes 18446744073709551615",
               "--expert-bytes 18446744073709551615 times ");
}

TEST(PlacementBadInput, FlagsMeanOnlyWhatTheySay) {
  ScratchDir dir;
  const std::string trace = small_trace(dir);
  const std::string replay = "replay --trace " + trace + " --num-gpu-experts 4 ";
  expect_error(replay + "--max-moves-per-replan -2", "--max-moves-per-replan must be -1 (no cap) or non-negative, got -2");
  expect_error(replay + "--score-from -1", "--score-from must be non-negative, got -1");
  expect_error(replay + "--score-from 65", "--score-from 65 is past the end of " + trace + " (64 tokens)");
  expect_error(replay + "--score-from 10 --held-out-half", "--held-out-half scores the second half; it does not go "
                                                          "with --score-from");
  expect_error(replay + "--min-experts-per-layer 1", "--min-experts-per-layer has no effect with --strategy frequency");
  const std::string plan = "plan --stats " + stats_file() + " --num-gpu-experts 4 --output " + dir.path + "/p.json ";
  expect_error(plan + "--strategy uniform --max-experts-per-layer 2",
               "--max-experts-per-layer has no effect with --strategy uniform");
  expect_error(plan + "--strategy random --min-experts-per-layer 1",
               "--min-experts-per-layer has no effect with --strategy random");
  EXPECT_FALSE(fs::exists(dir.path + "/p.json"));

  // The bounds are honoured by the strategies that take them, and -1 still means no cap; --score-from at the very
  // end scores nothing but is legal.
  std::string output;
  EXPECT_EQ(run_command(tool_path() + " " + plan + "--strategy critical_path --min-experts-per-layer 1", &output), 0)
      << output;
  EXPECT_EQ(run_command(tool_path() + " " + replay + "--max-moves-per-replan -1 --score-from 64 --replan-every 8",
                        &output),
            0)
      << output;
  EXPECT_NE(output.find("over tokens 64..64"), std::string::npos) << output;
}

TEST(PlacementBadInput, SweepsNeedNoBudget) {
  ScratchDir dir;
  std::string output;
  const std::string data = data_dir() + "/placement/";
  ASSERT_EQ(run_command(tool_path() + " plan --stats " + data + "olmoe_arxiv.csv --evaluate " + data +
                            "olmoe_github.csv --sweep",
                        &output),
            0)
      << output;
  EXPECT_NE(output.find(" 90.0%"), std::string::npos) << output;
  EXPECT_EQ(output.find("strategy frequency:"), std::string::npos) << "no plan was asked for: " << output;
  // Writing a plan still needs its budget.
  expect_error("plan --stats " + data + "olmoe_arxiv.csv --evaluate " + data + "olmoe_github.csv --sweep --output " +
                   dir.path + "/p.json",
               "give the GPU budget exactly once");
  const std::string trace = small_trace(dir);
  ASSERT_EQ(run_command(tool_path() + " replay --trace " + trace + " --replan-every 8 --sweep", &output), 0) << output;
  EXPECT_NE(output.find(" 90.0%"), std::string::npos) << output;
  expect_error("replay --trace " + trace + " --sweep --held-out-half", "--sweep always scores the second half");
}

TEST(PlacementBadInput, StatisticsErrorsNameTheFile) {
  ScratchDir dir;
  const std::string out = " --num-gpu-experts 1 --output " + dir.path + "/p.json";
  const std::string empty_rows = dir.file("empty_rows.json", "[[], []]");
  expect_error("plan --stats " + empty_rows + out, empty_rows + ": count table must have at least one layer and one "
                                                               "expert, got (2, 0)");
  expect_error("stats " + empty_rows, empty_rows + ": count table must have at least one layer");
  const std::string cube = dir.file("cube.json", "[[[1, 2]], [[3, 4]]]");
  expect_error("plan --stats " + cube + out, cube + ": activation_freq must be a 2D tensor of shape (num_layers, "
                                                   "num_experts), got shape (2, 1, 2)");
  expect_error("stats " + cube, cube + ": activation_freq must be a 2D tensor");
  const std::string huge = dir.file("huge.json", "[[3e38, 3e38], [1, 2]]");
  expect_error("plan --stats " + huge + out, huge + ": counts sum to 6e+38, more than the limit of 1e+38");
  expect_error("stats " + huge, huge + ": counts sum to 6e+38");
  const std::string inf_sum = dir.file("inf.json", "[[1e308, 1e308]]");
  expect_error("stats " + inf_sum, inf_sum + ": counts sum to inf, more than the limit of 1e+38");
  // Two files each within the limit whose sum is not: the second file is named.
  const std::string half = dir.file("half.json", "[[6e37, 1]]");
  const std::string other = dir.file("other.json", "[[6e37, 1]]");
  expect_error("stats " + half + " " + other, other + " (added to the tables before it): counts sum to 1.2e+38");
  // Held-out data of another shape than the statistics: both named.
  const std::string narrow = dir.file("narrow.json", "[[1, 2]]");
  expect_error("plan --stats " + stats_file() + " --num-gpu-experts 1 --evaluate " + narrow,
               narrow + ": data is (1, 2) but the statistics planned from are (3, 64)");
  EXPECT_FALSE(fs::exists(dir.path + "/p.json"));
  // A stream (here process substitution, /dev/fd/N) is read, and its errors name it as a file's do.
  std::string output;
  EXPECT_EQ(run_command("bash -c 'timeout 60 " + tool_path() + " stats <(printf \"layer,expert,count\\n0,x,1\\n\")'",
                        &output),
            1)
      << output;
  EXPECT_EQ(output.rfind("hymoe: error: /dev/fd/", 0), 0u) << output;
  EXPECT_NE(output.find(": line 2: expert must be an integer, got 'x'"), std::string::npos) << output;
}

}  // namespace
}  // namespace hymoe::test
