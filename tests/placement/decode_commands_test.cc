// `hymoe replay --policy`, `--json` on stats / plan / replay, and the wording of in-sample figures, as a user runs
// them on small synthetic files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace hymoe::test {
namespace {

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// Prompt (step 0): 4 tokens on {0, 1}; decode steps 1..16: 2 tokens each on {4, 5}; 2 layers, 8 experts, top-2.
std::string prompt_then_decode_csv(bool reversed) {
  std::vector<std::string> rows;
  int tok = 0;
  auto add = [&](int step, const char* ids) {
    for (int l = 0; l < 2; ++l)
      rows.push_back(std::to_string(tok) + "," + std::to_string(step) + "," + std::to_string(l) + "," + ids + "\n");
    ++tok;
  };
  for (int i = 0; i < 4; ++i) add(0, "0,1");
  for (int s = 1; s <= 16; ++s) add(s, "4,5"), add(s, "4,5");
  if (reversed) std::reverse(rows.begin(), rows.end());
  std::string csv = "token,step,layer,e1,e2\n";
  for (const auto& r : rows) csv += r;
  return csv;
}

nlohmann::json run_json(const std::string& args) {
  std::string output;
  EXPECT_EQ(run_command(tool_path() + " " + args + " --json", &output), 0) << output;
  return nlohmann::json::parse(output);
}

struct TempDir {
  std::string path = temp_dir("decode_cmd");
  ~TempDir() { std::filesystem::remove_all(path); }
};

TEST(DecodeReplayCommand, PolicyReportsHalvesAndMovesAsJsonAndText) {
  TempDir dir;
  write(dir.path + "/t.csv", prompt_then_decode_csv(false));
  write(dir.path + "/r.csv", prompt_then_decode_csv(true));
  const std::string flags = " --num-experts 8 --num-gpu-experts 4 --policy score-cache --decay 0.9 --move-rate 0.5";
  const nlohmann::json j = run_json("replay --trace " + dir.path + "/t.csv" + flags);
  ASSERT_EQ(j["parts"].size(), 4u);
  EXPECT_EQ(j["parts"][1]["part"], "decode");
  EXPECT_DOUBLE_EQ(j["parts"][1]["hit_rate"].get<double>(), 104.0 / 128.0);  // worked out in decode_policy_test
  EXPECT_EQ(j["parts"][1]["moves"], 4);
  EXPECT_DOUBLE_EQ(j["parts"][1]["moves_per_layer_per_8_steps"].get<double>(), 1.0);
  EXPECT_EQ(j["parts"][2]["steps"], 8);
  EXPECT_DOUBLE_EQ(j["parts"][3]["hit_rate"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j["oracle_hit_rate_on_decode"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j["static_prompt_plan_hit_rate_on_decode"].get<double>(), 0.0);
  // The same rows in reverse order give the same answer.
  EXPECT_EQ(run_json("replay --trace " + dir.path + "/r.csv" + flags)["parts"], j["parts"]);
  std::string output;
  ASSERT_EQ(run_command(tool_path() + " replay --trace " + dir.path + "/t.csv" + flags, &output), 0) << output;
  EXPECT_NE(output.find("decode                 16      32     81.2%      4                  1.000"), std::string::npos)
      << output;
  // Re-plan flags belong to --policy replan.
  EXPECT_EQ(run_command(tool_path() + " replay --trace " + dir.path + "/t.csv" + flags + " --replan-every 4", &output), 1);
  EXPECT_NE(output.find("belong to --policy replan"), std::string::npos) << output;
}

TEST(DecodeReplayCommand, ReplanJsonSplitsWarmupAndScoredMoves) {
  TempDir dir;
  write(dir.path + "/t.csv", prompt_then_decode_csv(false));
  const nlohmann::json j = run_json("replay --trace " + dir.path + "/t.csv --num-experts 8 --num-gpu-experts 4 "
                                    "--replan-every 1 --score-from 4 --expert-bytes 10");
  EXPECT_EQ(j["policy"], "replan");
  EXPECT_EQ(j["scored_from"], 4);
  EXPECT_EQ(j["warmup_steps"], 1);
  EXPECT_EQ(j["scored_steps"], 16);
  EXPECT_EQ(j["warmup_moves"].get<int64_t>() + j["scored_moves"].get<int64_t>(), j["moves"].get<int64_t>());
  EXPECT_DOUBLE_EQ(j["scored_moves_per_layer_per_step"].get<double>(), j["scored_moves"].get<double>() / (2 * 16));
  EXPECT_EQ(j["bytes_moved"], 10 * j["moves"].get<int64_t>());
  EXPECT_EQ(j["windows"].size(), 17u);  // one step per window
}

TEST(PlanAndStatsJson, CarryEveryFigureAtFullPrecisionAndLabelInSample) {
  TempDir dir;
  write(dir.path + "/train.csv", "layer,expert,count\n0,0,3\n0,1,1\n0,2,0\n1,0,0\n1,1,2\n1,2,1\n");
  write(dir.path + "/test.csv", "layer,expert,count\n0,0,1\n0,1,2\n0,2,0\n1,0,0\n1,1,1\n1,2,2\n");
  std::string output;
  ASSERT_EQ(run_command(tool_path() + " plan --stats " + dir.path + "/train.csv --num-gpu-experts 2 --output " +
                            dir.path + "/p.json",
                        &output),
            0)
      << output;
  EXPECT_NE(output.find("in-sample hit rate 71.4% (on the planning data; not a forecast"), std::string::npos) << output;
  const nlohmann::json p = run_json("plan --stats " + dir.path + "/train.csv --num-gpu-experts 2 --evaluate " +
                                    dir.path + "/test.csv --sweep");
  EXPECT_DOUBLE_EQ(p["in_sample_hit_rate"].get<double>(), 5.0 / 7.0);
  EXPECT_EQ(p["forecast"], true);
  EXPECT_DOUBLE_EQ(p["evaluation"]["realized_hit_rate"].get<double>(), 2.0 / 6.0);  // (0,0) and (1,1): 1 + 1 of 6
  EXPECT_DOUBLE_EQ(p["evaluation"]["oracle_hit_rate"].get<double>(), 4.0 / 6.0);
  EXPECT_EQ(p["sweep"]["rows"].size(), 9u);
  const nlohmann::json s = run_json("stats " + dir.path + "/train.csv " + dir.path + "/test.csv");
  ASSERT_EQ(s["files"].size(), 2u);
  EXPECT_DOUBLE_EQ(s["files"][0]["routed"].get<double>(), 7.0);
  EXPECT_EQ(s["files"][0]["per_layer"].size(), 2u);
  EXPECT_DOUBLE_EQ(s["summed"]["routed"].get<double>(), 13.0);
  EXPECT_NE(s["files"][0]["verdict"].get<std::string>().find("in-sample"), std::string::npos);
}

}  // namespace
}  // namespace hymoe::test
