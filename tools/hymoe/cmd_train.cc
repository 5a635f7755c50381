// `hymoe train`: trains one MoE layer to imitate a fixed random teacher on seeded synthetic inputs (see
// hymoe/train.h), printing loss, aux loss, z loss and the per-expert load spread every N steps with a progress
// bar, and writing the curves as CSV and as an SVG plot.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <vector>

#include "commands.h"
#include "hymoe/error.h"
#include "hymoe/output_files.h"
#include "hymoe/train.h"
#include "svg_plot.h"

namespace hymoe::tool {
namespace {

struct TrainCommandOptions {
  ImitationOptions run;
  int64_t every = 50;
  std::string csv_path, svg_path;
  bool quiet_bar = false;
};

void print_progress_bar(int64_t done, int64_t total, const StepMetrics& m) {
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done / std::max<int64_t>(total, 1));
  std::fprintf(stderr, "\r[%s%s] %lld/%lld loss %.3e tokens/expert %lld..%lld ",
               std::string(static_cast<size_t>(filled), '#').c_str(),
               std::string(static_cast<size_t>(kWidth - filled), '.').c_str(), static_cast<long long>(done),
               static_cast<long long>(total), m.loss, static_cast<long long>(m.min_tokens),
               static_cast<long long>(m.max_tokens));
  if (done == total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

std::string csv_text(const std::vector<StepMetrics>& rows) {
  std::string text = "step,loss,aux_loss,z_loss,min_tokens_per_expert,max_tokens_per_expert\n";
  for (const auto& m : rows)
    text += fmt::format("{},{:.9g},{:.9g},{:.9g},{},{}\n", m.step, m.loss, m.aux_loss, m.z_loss, m.min_tokens,
                        m.max_tokens);
  return text;
}

std::string svg_text(const TrainCommandOptions& o, const std::vector<StepMetrics>& rows) {
  const MoEConfig& c = o.run.student;
  PlotSeries loss{"MSE loss", "#1f77b4", false, {}, {}}, aux{"aux loss", "#9467bd", false, {}, {}};
  PlotSeries lo{"min tokens/expert", "#2ca02c", false, {}, {}}, hi{"max tokens/expert", "#d62728", false, {}, {}};
  PlotSeries even{"balanced T*K/E", "#555", true, {}, {}};
  const double balanced = static_cast<double>(o.run.tokens * c.top_k) / static_cast<double>(c.num_experts);
  // At most ~400 points per curve: the plot stays small whatever the number of steps.
  const size_t stride = std::max<size_t>(1, rows.size() / 400);
  std::vector<size_t> picked;
  for (size_t i = 0; i < rows.size(); i += stride) picked.push_back(i);
  if (!rows.empty() && picked.back() != rows.size() - 1) picked.push_back(rows.size() - 1);  // always the last step
  for (size_t i : picked) {
    const StepMetrics& m = rows[i];
    const double s = static_cast<double>(m.step);
    loss.x.push_back(s), loss.y.push_back(m.loss);
    aux.x.push_back(s), aux.y.push_back(m.aux_loss);
    lo.x.push_back(s), lo.y.push_back(static_cast<double>(m.min_tokens));
    hi.x.push_back(s), hi.y.push_back(static_cast<double>(m.max_tokens));
    even.x.push_back(s), even.y.push_back(balanced);
  }
  std::vector<PlotPanel> panels{{"loss (log scale)", true, {loss}}, {"expert load spread", false, {hi, lo, even}}};
  if (c.router_type != "sigmoid_topk" || c.sequence_aux_loss_weight > 0) panels.push_back({"aux loss", false, {aux}});
  const std::string title = fmt::format("hymoe train: {} {} E={} K={}, aux weight {}, skew {}", c.router_type,
                                        c.activation, c.num_experts, c.top_k, o.run.aux_loss_weight, o.run.skew);
  return render_svg_plot(title, "step", panels);
}

int run_train(const TrainCommandOptions& o) {
  if (o.every < 1) fail("--every=", o.every, " must be >= 1");
  if (o.run.tokens < 1) fail("--tokens=", o.run.tokens, " must be >= 1");
  if (o.run.steps < 1) fail("--steps=", o.run.steps, " must be >= 1");
  if (!(o.run.adamw.lr > 0)) fail("--lr=", o.run.adamw.lr, " must be > 0");
  if (!(o.run.adamw.weight_decay >= 0)) fail("--weight-decay=", o.run.adamw.weight_decay, " must be >= 0");
  if (!(o.run.sgd.momentum >= 0 && o.run.sgd.momentum < 1)) fail("--momentum=", o.run.sgd.momentum, " must be in [0, 1)");
  o.run.student.validate();
  OutputFiles files;
  files.add_output("--csv", o.csv_path);
  files.add_output("--svg", o.svg_path);
  files.check();
  // One row of metrics a step is kept for the CSV and the plot.
  require_physical_memory(static_cast<double>(o.run.steps) * sizeof(StepMetrics),
                          detail::concat("--steps=", o.run.steps, " (", sizeof(StepMetrics),
                                         " bytes of metrics a step, kept for the CSV and the plot)"));
  ImitationRun run(o.run);
  const MoEConfig& c = o.run.student;
  fmt::print("hymoe train: student {} {} dim {} hidden {} E={} K={}; teacher {}; {} tokens/step, {} steps, {} "
             "(lr {}), aux weight {}, z weight {}, skew {}, seed {}\n",
             c.router_type, c.activation, c.dim, c.hidden_dim, c.num_experts, c.top_k, o.run.teacher, o.run.tokens,
             o.run.steps, o.run.optimizer, o.run.optimizer == "sgd" ? o.run.sgd.lr : o.run.adamw.lr,
             o.run.aux_loss_weight, o.run.z_loss_weight, o.run.skew, o.run.seed);
  const bool bar = !o.quiet_bar && isatty(fileno(stderr));
  std::vector<StepMetrics> rows;
  for (int64_t s = 0; s < o.run.steps; ++s) {
    const StepMetrics m = run.step();
    rows.push_back(m);
    if (m.step % o.every == 0 || m.step == 1 || m.step == o.run.steps) {
      if (bar) std::fputs("\r\033[K", stderr);
      fmt::print("step {:>6}  loss {:.4e}  aux {:.5f}  z {:.5f}  tokens/expert min {:>5} max {:>5}\n", m.step, m.loss,
                 m.aux_loss, m.z_loss, m.min_tokens, m.max_tokens);
      std::fflush(stdout);
    }
    if (bar) print_progress_bar(m.step, o.run.steps, m);
  }
  fmt::print("saved for backward: {} bytes for {} tokens ({:.0f} bytes/token)\n",
             run.student().saved_for_backward_bytes(), o.run.tokens,
             static_cast<double>(run.student().saved_for_backward_bytes()) / static_cast<double>(o.run.tokens));
  if (files.wanted("--csv")) files.stage("--csv", csv_text(rows));
  if (files.wanted("--svg")) files.stage("--svg", svg_text(o, rows));
  files.commit();
  if (!o.csv_path.empty()) fmt::print("wrote {}\n", o.csv_path);
  if (!o.svg_path.empty()) fmt::print("wrote {}\n", o.svg_path);
  return 0;
}

}  // namespace

Action add_train_command(CLI::App& app) {
  auto o = std::make_shared<TrainCommandOptions>();
  MoEConfig& c = o->run.student;
  c.dim = 32;
  c.hidden_dim = 64;
  c.num_experts = 8;
  c.top_k = 2;
  auto* cmd = app.add_subcommand("train", "Train one MoE layer to imitate a random teacher; CSV + SVG of loss and load");
  cmd->add_option("--router", c.router_type, "softmax_topk | sigmoid_topk")->capture_default_str();
  cmd->add_option("--activation", c.activation, "silu | gelu | relu")->capture_default_str();
  cmd->add_option("--dim", c.dim)->capture_default_str();
  cmd->add_option("--hidden", c.hidden_dim, "expert hidden size")->capture_default_str();
  cmd->add_option("--experts", c.num_experts)->capture_default_str();
  cmd->add_option("--top-k", c.top_k)->capture_default_str();
  cmd->add_option("--shared-experts", c.shared_experts)->capture_default_str();
  cmd->add_option("--capacity-factor", c.capacity_factor)->capture_default_str()->check(kFiniteNumber);
  cmd->add_flag("--gradient-scale", c.gradient_scale);
  cmd->add_option("--sequence-aux-loss-weight", c.sequence_aux_loss_weight)->capture_default_str()->check(kFiniteNumber);
  cmd->add_option("--bias-schedule", c.bias_schedule, "constant | cosine_decay | linear_warmup")->capture_default_str();
  cmd->add_flag("--packed", c.packed_experts, "packed (E, in, out) expert weights");
  cmd->add_option("--teacher", o->run.teacher, "moe (random layer of the same config) | dense (one MLP)")->capture_default_str();
  cmd->add_option("--tokens", o->run.tokens, "tokens per step")->capture_default_str();
  cmd->add_option("--steps", o->run.steps)->capture_default_str();
  // Parsed into uint64: without the check "-1" would wrap to 2^64 - 1.
  cmd->add_option("--seed", o->run.seed)->capture_default_str()->check(kNonNegativeInteger);
  cmd->add_option("--input-mean", o->run.input_mean, "norm of the inputs' fixed mean direction")
      ->capture_default_str()
      ->check(kFiniteNumber);
  cmd->add_option("--skew", o->run.skew, "skewed start: +skew on the first E/4 experts' bias (sigmoid) or gate (softmax)")
      ->capture_default_str()
      ->check(kFiniteNumber);
  cmd->add_option("--aux-loss-weight", o->run.aux_loss_weight)->capture_default_str()->check(kFiniteNumber);
  cmd->add_option("--z-loss-weight", o->run.z_loss_weight)->capture_default_str()->check(kFiniteNumber);
  cmd->add_flag("--no-bias-grad{false}", o->run.bias_from_gradient,
                "the optimizer leaves router.expert_bias to the balancing rule (DeepSeek-V3 style)");
  cmd->add_option("--optimizer", o->run.optimizer, "adamw | sgd")->capture_default_str();
  cmd->add_option("--lr", o->run.adamw.lr, "learning rate")
      ->capture_default_str()
      ->check(kFiniteNumber);
  cmd->add_option("--weight-decay", o->run.adamw.weight_decay)->capture_default_str()->check(kFiniteNumber);
  cmd->add_option("--momentum", o->run.sgd.momentum, "SGD momentum")
      ->capture_default_str()
      ->check(kFiniteNumber);
  cmd->add_option("--every", o->every, "print a line every N steps")->capture_default_str();
  cmd->add_option("--csv", o->csv_path, "write step,loss,aux_loss,z_loss,min/max tokens per expert");
  cmd->add_option("--svg", o->svg_path, "write an SVG plot of loss and load spread against steps");
  cmd->add_flag("--no-progress", o->quiet_bar, "no progress bar on a terminal");
  return [o] {
    o->run.sgd.lr = o->run.adamw.lr;
    o->run.sgd.weight_decay = o->run.adamw.weight_decay;
    return run_train(*o);
  };
}

}  // namespace hymoe::tool
