// softmax_topk: Mixtral-style routing with the Switch Transformer load-balancing loss.
#include <cmath>

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
    for (int64_t t = 0; t < T; ++t) {
      const float* l = r.logits.data() + t * E;
      float* p = r.scores.data() + t * E;
      double m = l[0];
      for (int64_t e = 1; e < E; ++e) m = std::max<double>(m, l[e]);
      double s = 0.0;
      for (int64_t e = 0; e < E; ++e) s += std::exp(static_cast<double>(l[e]) - m);
      for (int64_t e = 0; e < E; ++e) p[e] = static_cast<float>(std::exp(static_cast<double>(l[e]) - m) / s);
    }
    select_top_k(r.scores, T, E, K, r);
    r.expert_counts = count_assignments(r);
    r.aux_loss = switch_balance_loss(r.scores, r.expert_counts, T, K);
    r.z_loss = z_loss(r.logits, T, E);
    return r;
  }

  std::vector<std::pair<std::string, Tensor*>> named_tensors() override { return {{"gate.weight", &gate_}}; }

 private:
  MoEConfig config_;
  Tensor gate_;  // (E, D)
};

}  // namespace

std::unique_ptr<Router> make_softmax_topk_router(const MoEConfig& config) {
  return std::make_unique<SoftmaxTopKRouter>(config);
}

}  // namespace hymoe
