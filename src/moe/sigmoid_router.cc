// sigmoid_topk: DeepSeek-V3 routing. Per-expert sigmoid scores plus a learned bias both select and weigh; in
// train mode an EMA of expert utilization nudges the bias toward balance after each selection.
#include <cmath>

#include "hymoe/moe.h"
#include "moe/bias_schedule.h"
#include "moe/router_common.h"
#include "moe/routers.h"

namespace hymoe {
namespace {

class SigmoidTopKRouter final : public Router {
 public:
  explicit SigmoidTopKRouter(const MoEConfig& c)
      : config_(c),
        schedule_(parse_bias_schedule(c.bias_schedule)),
        gate_(Shape{c.num_experts, c.dim}),
        expert_bias_(Shape{c.num_experts}, 0.0f),
        expert_ema_(Shape{c.num_experts}, 1.0f / static_cast<float>(c.num_experts)) {}

  std::string_view type() const override { return "sigmoid_topk"; }

  void set_step(int64_t step, int64_t max_steps) override {
    step_ = step;
    max_steps_ = max_steps;
  }

  Routing route(const Tensor& x, Mode mode) override {
    using namespace router_detail;
    const int64_t T = x.dim(0), E = config_.num_experts, K = config_.top_k;
    Routing r;
    r.num_tokens = T;
    r.top_k = K;
    r.num_experts = E;
    r.logits = gate_logits(x, gate_);
    r.scores.resize(r.logits.size());
    for_token_blocks(T, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t)
        for (int64_t e = 0; e < E; ++e) {
          const size_t i = static_cast<size_t>(t * E + e);
          const float biased = r.logits[i] + expert_bias_[e];  // float32 add, as PyTorch does
          r.scores[i] = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(biased))));
        }
    });
    select_top_k(r.scores, T, E, K, r);
    r.expert_counts = count_assignments(r);
    if (mode == Mode::kTrain) update_balance_state(r.expert_counts, T, K);
    r.aux_loss = config_.sequence_aux_loss_weight > 0
                     ? static_cast<float>(config_.sequence_aux_loss_weight *
                                          switch_balance_loss(r.scores, r.expert_counts, T, K))
                     : 0.0f;
    r.z_loss = z_loss(r.logits, T, E);
    return r;
  }

  std::vector<std::pair<std::string, Tensor*>> named_tensors() override {
    return {{"gate.weight", &gate_}, {"expert_bias", &expert_bias_}, {"expert_ema", &expert_ema_}};
  }
  std::vector<std::pair<std::string, Tensor*>> named_parameters() override {
    return {{"gate.weight", &gate_}, {"expert_bias", &expert_bias_}};
  }

  // scores = sigmoid(logits + bias) with the bias from before the forward's state update (the one that selected
  // and weighed). The sequence aux loss reaches the scores; the z-loss reaches the logits only, never the bias.
  std::vector<std::pair<std::string, Tensor>> backward(const RouterBackwardArgs& a) override {
    using namespace router_detail;
    const Routing& r = *a.routing;
    const int64_t T = r.num_tokens, E = r.num_experts;
    std::vector<double> grad = top_k_weights_backward(r, a.grad_weights);
    const double aux_coef = static_cast<double>(a.aux_loss_weight) * config_.sequence_aux_loss_weight;
    if (aux_coef != 0.0) add_balance_loss_grad(r.expert_counts, T, r.top_k, aux_coef, grad);
    Tensor grad_bias(Shape{E});
    std::vector<double> bias_acc(static_cast<size_t>(E), 0.0);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t e = 0; e < E; ++e) {
        const size_t i = static_cast<size_t>(t * E + e);
        const double s = r.scores[i];
        grad[i] *= s * (1.0 - s);
        bias_acc[static_cast<size_t>(e)] += grad[i];
      }
    for (int64_t e = 0; e < E; ++e) grad_bias[e] = static_cast<float>(bias_acc[static_cast<size_t>(e)]);
    if (a.z_loss_weight != 0.0f) add_z_loss_grad(r.logits, T, E, a.z_loss_weight, grad);
    std::vector<std::pair<std::string, Tensor>> out;
    out.emplace_back("gate.weight", gate_backward(grad, *a.x, gate_, a.grad_x));
    out.emplace_back("expert_bias", std::move(grad_bias));
    return out;
  }

 private:
  // Step by step in float32, in the reference's order, so the state matches it to the last few ulps:
  //   util = counts / (T*K);  ema = ema + 0.01 * (util - ema);  bias = bias + rate * (1/E - ema).
  void update_balance_state(const Tensor& counts, int64_t T, int64_t K) {
    const int64_t E = config_.num_experts;
    const float denom = static_cast<float>(static_cast<double>(T * K) + 1e-8);
    const float ema_weight = static_cast<float>(1.0 - 0.99);
    const float rate = static_cast<float>(bias_update_rate(schedule_, step_, max_steps_));
    const float target = static_cast<float>(1.0 / static_cast<double>(E));
    for (int64_t e = 0; e < E; ++e) {
      const float util = counts[e] / denom;
      const float ema = expert_ema_[e] + ema_weight * (util - expert_ema_[e]);
      expert_ema_[e] = ema;
      const float delta = rate * (target - ema);
      expert_bias_[e] = expert_bias_[e] + delta;
    }
  }

  MoEConfig config_;
  BiasSchedule schedule_;
  int64_t step_ = 0;
  int64_t max_steps_ = 1;
  Tensor gate_;         // (E, D)
  Tensor expert_bias_;  // (E) parameter
  Tensor expert_ema_;   // (E) buffer
};

}  // namespace

std::unique_ptr<Router> make_sigmoid_topk_router(const MoEConfig& config) {
  return std::make_unique<SigmoidTopKRouter>(config);
}

}  // namespace hymoe
