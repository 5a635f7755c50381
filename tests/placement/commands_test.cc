// `hymoe plan`, `hymoe stats` and `hymoe replay` as a user runs them: every conformance case through the command
// line, bad input (message, exit status 1, nothing written), the heat map, evaluation and the replay report.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hymoe/placement.h"
#include "placement/conformance_util.h"
#include "test_util.h"

namespace hymoe::test {
namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

class PlanCommandConformance : public ::testing::TestWithParam<std::string> {};

TEST_P(PlanCommandConformance, Cli) {
  const PlacementCase c = load_placement_case(GetParam());
  const TempDir tmp("plan_" + c.name);
  const std::string& dir = tmp.path();
  const std::string out = dir + "/plan.json";
  const auto& in = c.input;
  std::string strategy = in["strategy"].get<std::string>();
  std::string expected_error = c.expected.contains("error") ? c.expected["error"]["message"].get<std::string>() : "";
  if (expected_error.starts_with("Unknown expert placement strategy")) {
    // hymoe implements the name the reference rejects (see the library test): ask for one neither knows.
    expected_error = "Unknown expert placement strategy: 'no_such_strategy'. Supported strategies: ['frequency', "
                     "'score_aware_layer_balanced'";
    strategy = "no_such_strategy";
  }
  std::string cmd = tool_path() + " plan --stats " + c.dir + "/input.json --num-gpu-experts " +
                    std::to_string(in["num_gpu_experts"].get<int64_t>()) + " --strategy " + strategy + " --alpha " +
                    nlohmann::json(in["alpha"]).dump() + " --min-experts-per-layer " +
                    std::to_string(in["min_experts_per_layer"].get<int64_t>()) + " --output " + out;
  if (!in["max_experts_per_layer"].is_null())
    cmd += " --max-experts-per-layer " + std::to_string(in["max_experts_per_layer"].get<int64_t>());
  if (in.contains("previous_scores")) {
    spit(dir + "/previous.json", in["previous_scores"].dump());
    cmd += " --previous " + dir + "/previous.json";
  }
  std::string output;
  const int status = run_command(cmd, &output);
  if (!expected_error.empty()) {
    EXPECT_EQ(status, 1) << output;
    EXPECT_TRUE(carries_facts(output, expected_error));
    EXPECT_FALSE(fs::exists(out)) << "a failed plan must write nothing";
    return;
  }
  ASSERT_EQ(status, 0) << output;
  const nlohmann::json plan = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(plan["format"], "hymoe.placement.v1");
  EXPECT_TRUE(matches_expected(plan["mask"], plan["report"], c.expected));
}

INSTANTIATE_TEST_SUITE_P(Cases, PlanCommandConformance, ::testing::ValuesIn(placement_case_names()),
                         [](const auto& info) { return info.param; });

TEST(PlanCommand, BadStatisticsFailCleanlyAndWriteNothing) {
  const TempDir tmp("plan_bad");
  const std::string& dir = tmp.path();
  spit(dir + "/bad.csv", "layer,expert,count\n0,0,5\n0,1,-2\n");
  std::string output;
  const std::string cmd = tool_path() + " plan --stats " + dir + "/bad.csv --num-gpu-experts 1 --output " + dir +
                          "/p.json --svg " + dir + "/p.svg";
  EXPECT_EQ(run_command(cmd, &output), 1);
  EXPECT_NE(output.find("hymoe: error: " + dir + "/bad.csv: line 3: count must be a non-negative count, got -2"),
            std::string::npos)
      << output;
  EXPECT_FALSE(fs::exists(dir + "/p.json"));
  EXPECT_FALSE(fs::exists(dir + "/p.svg"));
  // No budget, or two: a usage error, nothing written.
  EXPECT_EQ(run_command(tool_path() + " plan --stats " + data_dir() + "/placement/olmoe_c4.csv --output " + dir +
                            "/p.json",
                        &output),
            1);
  EXPECT_NE(output.find("give the GPU budget exactly once"), std::string::npos) << output;
  EXPECT_NE(run_command(tool_path() + " plan --stats " + data_dir() + "/placement/olmoe_c4.csv --num-gpu-experts 3 "
                            "--gpu-experts-ratio 0.5 --output " + dir + "/p.json",
                        &output),
            0);
  EXPECT_FALSE(fs::exists(dir + "/p.json"));
}

TEST(PlanCommand, WritesPlanAndHeatMapAndEvaluatesOnHeldOutData) {
  const TempDir tmp("plan_ok");
  const std::string& dir = tmp.path();
  const std::string data = data_dir() + "/placement/";
  std::string output;
  const std::string cmd = tool_path() + " plan --stats " + data + "olmoe_arxiv.csv --stats " + data +
                          "olmoe_wikipedia.csv --gpu-experts-ratio 0.25 --strategy critical_path --expert-bytes 1000 "
                          "--output " + dir + "/p.json --svg " + dir + "/p.svg --evaluate " + data + "olmoe_github.csv";
  ASSERT_EQ(run_command(cmd, &output), 0) << output;
  const nlohmann::json plan = nlohmann::json::parse(slurp(dir + "/p.json"));
  EXPECT_EQ(plan["report"]["actual_num_gpu_experts"], 48);
  EXPECT_EQ(plan["report"]["gpu_bytes"], 48000);
  EXPECT_EQ(plan["mask"].size(), 3u);
  const std::string svg = slurp(dir + "/p.svg");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  int64_t outlined = 0;
  for (size_t at = svg.find("stroke=\"black\""); at != std::string::npos; at = svg.find("stroke=\"black\"", at + 1)) ++outlined;
  EXPECT_EQ(outlined, 48);
  EXPECT_NE(output.find("realized hit rate"), std::string::npos) << output;
  EXPECT_NE(output.find("(oracle)"), std::string::npos) << output;

  // The plan file evaluates again later, on other data.
  ASSERT_EQ(run_command(tool_path() + " plan --plan " + dir + "/p.json --evaluate " + data + "olmoe_c4.csv", &output), 0)
      << output;
  EXPECT_NE(output.find("realized hit rate"), std::string::npos);
  // And the sweep prints every strategy and the oracle for 10%..90%.
  ASSERT_EQ(run_command(tool_path() + " plan --stats " + data + "olmoe_arxiv.csv --num-gpu-experts 1 --evaluate " +
                            data + "olmoe_github.csv --sweep",
                        &output),
            0)
      << output;
  EXPECT_NE(output.find("critical_path"), std::string::npos);
  EXPECT_NE(output.find(" 90.0%"), std::string::npos);
}

TEST(StatsCommand, PrintsSkewAndVerdictAndConverts) {
  const TempDir tmp("stats");
  const std::string& dir = tmp.path();
  std::string output;
  ASSERT_EQ(run_command(tool_path() + " stats --curve " + data_dir() +
                            "/placement/mixtral_mmlu_instruct_high_school_mathematics.csv --write " + dir + "/m.json",
                        &output),
            0)
      << output;
  EXPECT_NE(output.find("32 layers x 8 experts"), std::string::npos) << output;
  EXPECT_NE(output.find("verdict: routing is near-uniform: expected gain from frequency placement is small"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("100% -> 100.0%"), std::string::npos);
  const placement::CountTable back = placement::read_counts(dir + "/m.json");
  EXPECT_EQ(back.counts, placement::read_counts(data_dir() + "/placement/mixtral_mmlu_instruct_high_school_mathematics.csv").counts);
  EXPECT_NE(run_command(tool_path() + " stats " + dir + "/missing.csv", &output), 0);
}

// plan and stats refuse an output that is one of their inputs, or two outputs naming one file, and check every
// output's directory before writing any: nothing is written, the inputs keep their bytes.
TEST(PlanCommand, RefusesOutputsThatReplaceInputsOrCannotAllBeWritten) {
  const TempDir tmp("plan_outputs");
  const std::string& dir = tmp.path();
  fs::copy_file(data_dir() + "/placement/olmoe_c4.csv", dir + "/stats.csv");
  spit(dir + "/stats.json", placement::counts_to_json(placement::read_counts(dir + "/stats.csv")));
  const std::string stats = slurp(dir + "/stats.json");
  const std::string plan = "cd " + dir + " && " + tool_path() + " plan --num-gpu-experts 64 ";
  struct Case {
    std::string args, fragment;
  };
  const Case cases[] = {
      {"--stats stats.json --output stats.json", "--output stats.json is the same file as --stats stats.json"},
      {"--stats stats.csv --stats ./stats.json --output " + dir + "/stats.json",
       "--output " + dir + "/stats.json is the same file as --stats ./stats.json"},
      {"--stats stats.csv --output p.json --svg ./p.json", "--output p.json and --svg ./p.json name the same file"},
      {"--stats stats.csv --output p.json --svg nodir/p.svg", "--svg nodir/p.svg: its directory nodir cannot be used"},
  };
  for (const Case& c : cases) {
    std::string output;
    EXPECT_EQ(run_command(plan + c.args, &output), 1) << c.args << ": " << output;
    EXPECT_NE(output.find(c.fragment), std::string::npos) << output;
    EXPECT_EQ(output.find("strategy"), std::string::npos) << "the refusal comes before any work: " << output;
  }
  EXPECT_EQ(slurp(dir + "/stats.json"), stats);
  EXPECT_FALSE(fs::exists(dir + "/p.json")) << "--output must not be written when --svg cannot be";
  std::string output;
  ASSERT_EQ(run_command(plan + "--stats stats.csv --output p.json --svg /dev/null", &output), 0) << output;
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_EQ(nlohmann::json::parse(slurp(dir + "/p.json"))["report"]["actual_num_gpu_experts"], 64);
}

TEST(StatsCommand, RefusesToWriteOverItsInput) {
  const TempDir tmp("stats_outputs");
  const std::string& dir = tmp.path();
  fs::copy_file(data_dir() + "/placement/olmoe_c4.csv", dir + "/c4.csv");
  const std::string before = slurp(dir + "/c4.csv");
  fs::create_hard_link(dir + "/c4.csv", dir + "/same.csv");
  for (const std::string& write : {dir + "/c4.csv", dir + "/./c4.csv", dir + "/same.csv"}) {
    std::string output;
    EXPECT_EQ(run_command(tool_path() + " stats " + dir + "/c4.csv --write " + write, &output), 1) << output;
    EXPECT_NE(output.find("--write " + write + " is the same file as input file " + dir + "/c4.csv"),
              std::string::npos)
        << output;
    EXPECT_EQ(output.find("verdict"), std::string::npos) << "the refusal comes before any work: " << output;
  }
  EXPECT_EQ(slurp(dir + "/c4.csv"), before);
}

TEST(ReplayCommand, ReportsHitRateMovesAndBytes) {
  const TempDir tmp("replay");
  const std::string& dir = tmp.path();
  std::string csv = "token,step,layer,e1,e2\n";
  for (int t = 0; t < 256; ++t)
    for (int l = 0; l < 2; ++l) csv += std::to_string(t) + "," + std::to_string(t) + "," + std::to_string(l) + "," +
                                       (t < 128 ? "0,1\n" : "4,5\n");
  spit(dir + "/trace.csv", csv);
  std::string output;
  ASSERT_EQ(run_command(tool_path() + " replay --trace " + dir + "/trace.csv --num-experts 8 --num-gpu-experts 4 "
                            "--replan-every 16 --held-out-half --expert-bytes 100",
                        &output),
            0)
      << output;
  EXPECT_NE(output.find("hit rate 75.0% over tokens 128..256; over the whole trace 15 re-plans, 4 expert moves, 400 bytes moved"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("static frequency plan from tokens 0..128: 0.0%"), std::string::npos) << output;
  EXPECT_EQ(run_command(tool_path() + " replay --trace " + dir + "/trace.csv --num-experts 3 --num-gpu-experts 4",
                        &output),
            1);
  EXPECT_NE(output.find("expert id 4 is outside [-1, 2]"), std::string::npos) << output;
}

// stats, plan and replay read a pipe as they read a file: process substitution (/dev/fd/N: no extension, so the
// format comes from the first bytes), /dev/stdin fed by a pipe, and a FIFO whose writer comes after the reader
// opened it. Each gives what the regular file gives.
TEST(StatsCommand, ReadsPipesFifosAndStdin) {
  const TempDir tmp("stats_pipe");
  const std::string& dir = tmp.path();
  const std::string c4 = data_dir() + "/placement/olmoe_c4.csv";
  std::string output;
  ASSERT_EQ(run_command(tool_path() + " stats --json " + c4 + " --write " + dir + "/c4.json", &output), 0) << output;
  const auto summary = [](const std::string& text) {
    nlohmann::json j = nlohmann::json::parse(text);
    j.erase("wrote");
    for (auto& f : j["files"]) f.erase("file");
    return j;
  };
  const nlohmann::json want = summary(output);
  ASSERT_EQ(run_command(tool_path() + " stats " + c4 + " --write " + dir + "/c4.safetensors", &output), 0) << output;
  for (const std::string& source :
       {"<(cat " + c4 + ")", "<(cat " + dir + "/c4.json)", "<(cat " + dir + "/c4.safetensors)"}) {
    ASSERT_EQ(run_command("bash -c 'timeout 60 " + tool_path() + " stats --json " + source + "'", &output), 0)
        << source << ": " << output;
    EXPECT_EQ(summary(output), want) << source;
  }
  ASSERT_EQ(run_command("cat " + dir + "/c4.json | timeout 60 " + tool_path() + " stats --json /dev/stdin", &output), 0)
      << output;
  EXPECT_EQ(summary(output), want);

  // A trace through a FIFO, and through process substitution to replay and plan.
  std::string csv = "token,step,layer,e1,e2\n";
  for (int t = 0; t < 64; ++t)
    for (int l = 0; l < 2; ++l)
      csv += std::to_string(t) + "," + std::to_string(t) + "," + std::to_string(l) + "," + (t < 32 ? "0,1\n" : "4,5\n");
  spit(dir + "/trace.csv", csv);
  ASSERT_EQ(run_command(tool_path() + " stats --json " + dir + "/trace.csv", &output), 0) << output;
  const nlohmann::json trace_want = summary(output);
  ASSERT_EQ(mkfifo((dir + "/trace.fifo").c_str(), 0600), 0);
  ASSERT_EQ(run_command("bash -c '(sleep 0.3; cat " + dir + "/trace.csv > " + dir + "/trace.fifo) & timeout 60 " +
                            tool_path() + " stats --json " + dir + "/trace.fifo; s=$?; wait; exit $s'",
                        &output),
            0)
      << output;
  EXPECT_EQ(summary(output), trace_want);
  std::string regular, piped;
  const std::string replay = " replay --num-experts 8 --num-gpu-experts 4 --replan-every 8 --trace ";
  ASSERT_EQ(run_command(tool_path() + replay + dir + "/trace.csv", &regular), 0) << regular;
  ASSERT_EQ(run_command("bash -c 'timeout 60 " + tool_path() + replay + "<(cat " + dir + "/trace.csv)'", &piped), 0)
      << piped;
  EXPECT_EQ(piped.substr(piped.find(':')), regular.substr(regular.find(':')));  // the same report, another name
  ASSERT_EQ(run_command(tool_path() + " plan --num-gpu-experts 8 --stats " + c4 + " --output " + dir + "/a.json", &output),
            0)
      << output;
  ASSERT_EQ(run_command("bash -c 'timeout 60 " + tool_path() + " plan --num-gpu-experts 8 --stats <(cat " + c4 +
                            ") --output " + dir + "/b.json'",
                        &output),
            0)
      << output;
  EXPECT_EQ(nlohmann::json::parse(slurp(dir + "/a.json"))["mask"], nlohmann::json::parse(slurp(dir + "/b.json"))["mask"]);
}

}  // namespace
}  // namespace hymoe::test
