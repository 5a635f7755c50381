// softmax_topk: Mixtral-style routing with the Switch Transformer load-balancing loss.
#include <vector>

#include "hymoe/moe.h"
#include "moe/router_common.h"
#include "moe/routers.h"

namespace hymoe {
namespace {

class SoftmaxTopKRouter final : public Router {
 public:
  explicit SoftmaxTopKRouter(const MoEConfig& c) : config_(c), gate_(Shape{c.num_experts, c.dim}) {}

  std::string_view type() const override { return "softmax_topk"; }

  Routing route(const Tensor& x, Mode /*mode*/) override {
    using namespace router_detail;
    const int64_t T = x.dim(0), E = config_.num_experts, K = config_.top_k;
    Routing r;
    r.num_tokens = T;
    r.top_k = K;
    r.num_experts = E;
    r.logits = gate_logits(x, gate_);
    r.scores.resize(r.logits.size());
    for_token_blocks(T, [&](int64_t t0, int64_t t1) {
      std::vector<double> p(static_cast<size_t>(E));
      for (int64_t t = t0; t < t1; ++t) {
        softmax_row(r.logits.data() + t * E, E, p.data());
        float* scores = r.scores.data() + t * E;
        for (int64_t e = 0; e < E; ++e) scores[e] = static_cast<float>(p[static_cast<size_t>(e)]);
      }
    });
    select_top_k(r.scores, T, E, K, r);
    r.expert_counts = count_assignments(r);
    r.aux_loss = switch_balance_loss(r.scores, r.expert_counts, T, K);
    r.z_loss = z_loss(r.logits, T, E);
    return r;
  }

  std::vector<std::pair<std::string, Tensor*>> named_tensors() override { return {{"gate.weight", &gate_}}; }

  // scores = softmax(logits); the aux loss reaches the mean probabilities, the z-loss the logits.
  std::vector<std::pair<std::string, Tensor>> backward(const RouterBackwardArgs& a) override {
    using namespace router_detail;
    const Routing& r = *a.routing;
    const int64_t T = r.num_tokens, E = r.num_experts;
    std::vector<double> grad = top_k_weights_backward(r, a.grad_weights);
    if (a.aux_loss_weight != 0.0f) add_balance_loss_grad(r.expert_counts, T, r.top_k, a.aux_loss_weight, grad);
    for (int64_t t = 0; t < T; ++t) {  // softmax backward in place: dl = p * (dp - <p, dp>)
      const float* p = r.scores.data() + t * E;
      double* g = grad.data() + t * E;
      double dot = 0.0;
      for (int64_t e = 0; e < E; ++e) dot += p[e] * g[e];
      for (int64_t e = 0; e < E; ++e) g[e] = p[e] * (g[e] - dot);
    }
    if (a.z_loss_weight != 0.0f) add_z_loss_grad(r.logits, T, E, a.z_loss_weight, grad);
    std::vector<std::pair<std::string, Tensor>> out;
    out.emplace_back("gate.weight", gate_backward(grad, *a.x, gate_, a.grad_x));
    return out;
  }

 private:
  MoEConfig config_;
  Tensor gate_;  // (E, D)
};

}  // namespace

std::unique_ptr<Router> make_softmax_topk_router(const MoEConfig& config) {
  return std::make_unique<SoftmaxTopKRouter>(config);
}

}  // namespace hymoe
