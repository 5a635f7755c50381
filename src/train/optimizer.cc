// SGD with momentum and AdamW, with PyTorch's update rules (see hymoe/train.h). Arithmetic per element in double,
// state and parameters stored in float32.
#include <cmath>

#include "hymoe/error.h"
#include "hymoe/train.h"

namespace hymoe {
namespace {

// Per-position state buffers, created on the first step and checked against the parameters afterwards.
class StatefulOptimizer : public Optimizer {
 protected:
  std::vector<float>& state(size_t slot, size_t i, const ParamRef& p) {
    if (slots_.size() <= slot) slots_.resize(slot + 1);
    auto& buffers = slots_[slot];
    if (buffers.size() <= i) buffers.resize(i + 1);
    if (buffers[i].empty()) buffers[i].assign(static_cast<size_t>(p.value->numel()), 0.0f);
    return buffers[i];
  }
  void check(std::span<const ParamRef> params) {
    if (names_.empty())
      for (const auto& p : params) names_.push_back(p.name);
    if (names_.size() != params.size()) fail(name(), ": step got ", params.size(), " parameters, first step had ", names_.size());
    for (size_t i = 0; i < params.size(); ++i) {
      const ParamRef& p = params[i];
      if (p.name != names_[i]) fail(name(), ": parameter ", i, " is '", p.name, "', first step had '", names_[i], "'");
      HYMOE_CHECK(p.value && p.grad, p.name);
      if (p.value->shape() != p.grad->shape())
        fail(name(), ": parameter '", p.name, "' has shape ", shape_to_string(p.value->shape()), " but its gradient ",
             shape_to_string(p.grad->shape()));
    }
  }
  int64_t t_ = 0;

 private:
  std::vector<std::string> names_;
  std::vector<std::vector<std::vector<float>>> slots_;  // [slot][parameter] -> (numel)
};

class Sgd final : public StatefulOptimizer {
 public:
  explicit Sgd(const SgdOptions& o) : o_(o) {
    if (!(o.lr > 0 && std::isfinite(o.lr))) fail("sgd: lr=", o.lr, " must be a finite number > 0");
    if (!(o.momentum >= 0 && o.momentum < 1)) fail("sgd: momentum=", o.momentum, " must be in [0, 1)");
    if (!(o.weight_decay >= 0 && std::isfinite(o.weight_decay)))
      fail("sgd: weight_decay=", o.weight_decay, " must be a finite number >= 0");
  }
  std::string_view name() const override { return "sgd"; }
  void step(std::span<const ParamRef> params) override {
    check(params);
    ++t_;
    for (size_t i = 0; i < params.size(); ++i) {
      const ParamRef& p = params[i];
      std::vector<float>& buf = state(0, i, p);
      for (int64_t j = 0; j < p.value->numel(); ++j) {
        const double w = (*p.value)[j];
        const double g = (*p.grad)[j] + o_.weight_decay * w;
        double b = g;
        if (o_.momentum > 0) {
          b = t_ == 1 ? g : o_.momentum * buf[static_cast<size_t>(j)] + g;
          buf[static_cast<size_t>(j)] = static_cast<float>(b);
        }
        (*p.value)[j] = static_cast<float>(w - o_.lr * b);
      }
    }
  }

 private:
  SgdOptions o_;
};

class AdamW final : public StatefulOptimizer {
 public:
  explicit AdamW(const AdamWOptions& o) : o_(o) {
    if (!(o.lr > 0 && std::isfinite(o.lr))) fail("adamw: lr=", o.lr, " must be a finite number > 0");
    if (!(o.beta1 >= 0 && o.beta1 < 1)) fail("adamw: beta1=", o.beta1, " must be in [0, 1)");
    if (!(o.beta2 >= 0 && o.beta2 < 1)) fail("adamw: beta2=", o.beta2, " must be in [0, 1)");
    if (!(o.eps >= 0 && std::isfinite(o.eps))) fail("adamw: eps=", o.eps, " must be a finite number >= 0");
    if (!(o.weight_decay >= 0 && std::isfinite(o.weight_decay)))
      fail("adamw: weight_decay=", o.weight_decay, " must be a finite number >= 0");
  }
  std::string_view name() const override { return "adamw"; }
  void step(std::span<const ParamRef> params) override {
    check(params);
    ++t_;
    const double bc1 = 1.0 - std::pow(o_.beta1, static_cast<double>(t_));
    const double bc2_sqrt = std::sqrt(1.0 - std::pow(o_.beta2, static_cast<double>(t_)));
    for (size_t i = 0; i < params.size(); ++i) {
      const ParamRef& p = params[i];
      std::vector<float>& m = state(0, i, p);
      std::vector<float>& v = state(1, i, p);
      for (int64_t j = 0; j < p.value->numel(); ++j) {
        const size_t s = static_cast<size_t>(j);
        const double g = (*p.grad)[j];
        const double w = (*p.value)[j] * (1.0 - o_.lr * o_.weight_decay);
        const double mj = o_.beta1 * m[s] + (1.0 - o_.beta1) * g;
        const double vj = o_.beta2 * v[s] + (1.0 - o_.beta2) * g * g;
        m[s] = static_cast<float>(mj);
        v[s] = static_cast<float>(vj);
        (*p.value)[j] = static_cast<float>(w - (o_.lr / bc1) * mj / (std::sqrt(vj) / bc2_sqrt + o_.eps));
      }
    }
  }

 private:
  AdamWOptions o_;
};

}  // namespace

std::vector<ParamRef> trainable_parameters(MoELayer& layer) {
  const auto grads = layer.named_gradients();
  const auto params = layer.named_parameters();
  HYMOE_CHECK(grads.size() == params.size());
  std::vector<ParamRef> out;
  for (size_t i = 0; i < params.size(); ++i) {
    HYMOE_CHECK(params[i].first == grads[i].first);
    out.push_back({params[i].first, params[i].second, grads[i].second});
  }
  return out;
}

std::unique_ptr<Optimizer> make_sgd(const SgdOptions& options) { return std::make_unique<Sgd>(options); }
std::unique_ptr<Optimizer> make_adamw(const AdamWOptions& options) { return std::make_unique<AdamW>(options); }

}  // namespace hymoe
