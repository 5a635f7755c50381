// Imitation training for a few steps: the loss goes down, through the library and through `hymoe train`, whose
// CSV and SVG outputs exist and parse. Not timed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "hymoe/train.h"
#include "test_util.h"

namespace hymoe::test {
namespace {

ImitationOptions small_run(const char* router) {
  ImitationOptions o;
  o.student.dim = 8;
  o.student.hidden_dim = 8;
  o.student.num_experts = 4;
  o.student.top_k = 2;
  o.student.router_type = router;
  o.tokens = 32;
  o.steps = 40;
  o.adamw.lr = 1e-2;
  o.aux_loss_weight = 0.01;
  return o;
}

double mean_loss(ImitationRun& run, int steps) {
  double sum = 0.0;
  for (int i = 0; i < steps; ++i) sum += run.step().loss;
  return sum / steps;
}

TEST(ImitationTraining, LossDecreases) {
  for (const char* router : {"softmax_topk", "sigmoid_topk"}) {
    for (const char* teacher : {"moe", "dense"}) {
      ImitationOptions o = small_run(router);
      o.teacher = teacher;
      ImitationRun run(o);
      const double first = mean_loss(run, 5);
      for (int i = 0; i < 25; ++i) run.step();
      const double last = mean_loss(run, 5);
      EXPECT_LT(last, 0.7 * first) << router << " " << teacher;
    }
  }
}

TEST(ImitationTraining, SgdAlsoLearns) {
  ImitationOptions o = small_run("softmax_topk");
  o.optimizer = "sgd";
  o.sgd.lr = 0.5;
  ImitationRun run(o);
  const double first = mean_loss(run, 5);
  for (int i = 0; i < 25; ++i) run.step();
  EXPECT_LT(mean_loss(run, 5), first);
}

TEST(ImitationTraining, CommandWritesCsvAndSvg) {
  const TempDir tmp("train");
  const std::string& dir = tmp.path();
  std::string log;
  const int rc = run_command(tool_path() +
                                 " train --router sigmoid_topk --dim 8 --hidden 8 --experts 4 --top-k 2 --tokens 32 "
                                 "--steps 30 --lr 0.01 --skew 0.5 --every 10 --csv " + dir + "/run.csv --svg " + dir + "/run.svg",
                             &log);
  ASSERT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("step     10"), std::string::npos) << log;
  std::ifstream csv(dir + "/run.csv");
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line, "step,loss,aux_loss,z_loss,min_tokens_per_expert,max_tokens_per_expert");
  std::vector<double> loss;
  int64_t rows = 0;
  while (std::getline(csv, line)) {
    std::stringstream ss(line);
    std::string field;
    std::vector<double> f;
    while (std::getline(ss, field, ',')) f.push_back(std::stod(field));
    ASSERT_EQ(f.size(), 6u) << line;
    EXPECT_EQ(f[0], static_cast<double>(++rows));
    EXPECT_LE(f[4], f[5]);
    loss.push_back(f[1]);
  }
  ASSERT_EQ(rows, 30);
  EXPECT_LT(loss[25] + loss[26] + loss[27] + loss[28] + loss[29], loss[0] + loss[1] + loss[2] + loss[3] + loss[4]);
  std::ifstream svg(dir + "/run.svg");
  std::stringstream text;
  text << svg.rdbuf();
  EXPECT_EQ(text.str().rfind("<svg", 0), 0u);
  EXPECT_NE(text.str().find("</svg>"), std::string::npos);
  EXPECT_NE(text.str().find("<polyline"), std::string::npos);
}

// Both outputs are checked before training: an --svg that cannot be written fails at once and --csv is not written;
// --csv and --svg naming one file are refused.
TEST(ImitationTraining, CommandChecksEveryOutputBeforeTraining) {
  const TempDir tmp("train_outputs");
  const std::string& dir = tmp.path();
  const std::string train = tool_path() + " train --dim 8 --hidden 8 --experts 4 --top-k 2 --tokens 32 --steps 3 ";
  std::string log;
  EXPECT_EQ(run_command(train + "--csv " + dir + "/run.csv --svg " + dir + "/nodir/run.svg", &log), 1) << log;
  EXPECT_NE(log.find("--svg " + dir + "/nodir/run.svg: its directory " + dir + "/nodir cannot be used"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("step "), std::string::npos) << "the refusal comes before training: " << log;
  EXPECT_FALSE(std::filesystem::exists(dir + "/run.csv"));
  EXPECT_EQ(run_command(train + "--csv " + dir + "/run.out --svg " + dir + "/./run.out", &log), 1) << log;
  EXPECT_NE(log.find("name the same file"), std::string::npos) << log;
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

TEST(ImitationTraining, CommandRejectsBadOptions) {
  std::string log;
  EXPECT_NE(run_command(tool_path() + " train --steps 0", &log), 0);
  EXPECT_NE(log.find("steps"), std::string::npos) << log;
  EXPECT_NE(run_command(tool_path() + " train --optimizer lamb --steps 1", &log), 0);
  EXPECT_NE(log.find("optimizer"), std::string::npos) << log;
}

}  // namespace
}  // namespace hymoe::test
