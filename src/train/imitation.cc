// Imitation training: a student MoE layer learns to reproduce a fixed random teacher (an MoE layer of the same
// shape, or one dense MLP) on seeded synthetic inputs. Small enough to run in seconds, and enough to watch the
// load balancers work: a skewed start concentrates tokens on a few experts, then the sigmoid router's bias
// updates (or the softmax router's aux loss) spread them out again.
#include <algorithm>
#include <cmath>

#include "hymoe/error.h"
#include "hymoe/rng.h"
#include "hymoe/train.h"

namespace hymoe {
namespace {

std::unique_ptr<MoELayer> make_teacher(const ImitationOptions& o, Rng& rng) {
  MoEConfig c = o.student;
  if (o.teacher == "dense") {
    // A dense MLP is an MoE layer with one expert chosen with weight exactly 1.
    c = MoEConfig{};
    c.dim = o.student.dim;
    c.hidden_dim = o.teacher_hidden > 0 ? o.teacher_hidden : o.student.hidden_dim * o.student.top_k;
    c.num_experts = 1;
    c.top_k = 1;
    c.activation = o.student.activation;
  } else if (o.teacher != "moe") {
    fail("train: teacher=", quote_for_message(o.teacher), " is not one of moe, dense");
  }
  auto t = build_moe(c);
  t->init_random(rng);
  return t;
}

}  // namespace

ImitationRun::ImitationRun(const ImitationOptions& o) : options_(o), data_rng_(o.seed ^ 0x9e3779b97f4a7c15ull) {
  if (o.tokens < 1) fail("train: tokens=", o.tokens, " must be >= 1");
  if (o.steps < 1) fail("train: steps=", o.steps, " must be >= 1");
  if (!(o.input_mean >= 0)) fail("train: input_mean=", o.input_mean, " must be >= 0");
  if (!std::isfinite(o.skew)) fail("train: skew=", o.skew, " must be finite");
  Rng rng(o.seed);
  student_ = build_moe(o.student);
  student_->init_random(rng);
  teacher_ = make_teacher(o, rng);
  const int64_t D = o.student.dim, E = o.student.num_experts;
  // The input mean: a fixed random direction of norm input_mean.
  input_mean_ = random_normal(rng, Shape{D}, 1.0);
  double norm = 0.0;
  for (float v : input_mean_.values()) norm += static_cast<double>(v) * v;
  norm = std::sqrt(norm);
  for (float& v : input_mean_.values()) v = static_cast<float>(v / norm * o.input_mean);
  if (o.skew != 0.0) {
    const int64_t favored = std::max<int64_t>(1, E / 4);
    for (auto& [name, t] : student_->named_parameters()) {
      if (name == "router.expert_bias") {
        for (int64_t e = 0; e < favored; ++e) (*t)[e] += static_cast<float>(o.skew);
      } else if (name == "router.gate.weight" && o.student.router_type != "sigmoid_topk") {
        if (o.input_mean <= 0) fail("train: a skewed softmax start needs input_mean > 0");
        for (int64_t e = 0; e < favored; ++e)
          for (int64_t d = 0; d < D; ++d) (*t)[e * D + d] += static_cast<float>(o.skew * input_mean_[d] / o.input_mean);
      }
    }
  }
  if (o.optimizer == "adamw") optimizer_ = make_adamw(o.adamw);
  else if (o.optimizer == "sgd") optimizer_ = make_sgd(o.sgd);
  else fail("train: optimizer=", quote_for_message(o.optimizer), " is not one of adamw, sgd");
}

ImitationRun::~ImitationRun() = default;

StepMetrics ImitationRun::step() {
  const int64_t T = options_.tokens, D = options_.student.dim;
  Tensor x = random_normal(data_rng_, Shape{1, T, D}, 1.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t d = 0; d < D; ++d) x[t * D + d] += input_mean_[d];
  const Tensor target = teacher_->forward(x, Mode::kEval);
  const Tensor y = student_->forward(x, Mode::kTrain, step_, options_.steps);
  // MSE = mean((y - target)^2); its gradient is 2 (y - target) / n.
  Tensor grad(y.shape());
  double sq = 0.0;
  const double n = static_cast<double>(y.numel());
  for (int64_t i = 0; i < y.numel(); ++i) {
    const double diff = static_cast<double>(y[i]) - target[i];
    sq += diff * diff;
    grad[i] = static_cast<float>(2.0 * diff / n);
  }
  student_->backward(grad, static_cast<float>(options_.aux_loss_weight), static_cast<float>(options_.z_loss_weight));
  std::vector<ParamRef> params = trainable_parameters(*student_);
  if (!options_.bias_from_gradient)
    std::erase_if(params, [](const ParamRef& p) { return p.name == "router.expert_bias"; });
  optimizer_->step(params);
  ++step_;
  StepMetrics m;
  m.step = step_;
  m.loss = sq / n;
  m.aux_loss = student_->aux_loss();
  m.z_loss = student_->z_loss();
  const auto counts = student_->expert_counts().values();
  m.min_tokens = static_cast<int64_t>(*std::min_element(counts.begin(), counts.end()));
  m.max_tokens = static_cast<int64_t>(*std::max_element(counts.begin(), counts.end()));
  return m;
}

}  // namespace hymoe
