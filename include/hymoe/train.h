// Training: optimizers over named parameters, and a small imitation-training loop (a student MoE layer learns a
// fixed random teacher on seeded synthetic inputs) that shows the balancing mechanisms at work. Depends on the
// moe layer only through its public API (forward, backward, named_parameters, named_gradients).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hymoe/moe.h"

namespace hymoe {

// A parameter and its gradient (same shape).
struct ParamRef {
  std::string name;
  Tensor* value = nullptr;
  const Tensor* grad = nullptr;
};

// The layer's parameters paired with the gradients of its last backward.
std::vector<ParamRef> trainable_parameters(MoELayer& layer);

// torch.optim.SGD: g = grad + weight_decay * p; buf = g on the first step, else momentum * buf + g;
// p -= lr * buf (no dampening, no Nesterov).
struct SgdOptions {
  double lr = 0.01;
  double momentum = 0.9;
  double weight_decay = 0.0;
};

// torch.optim.AdamW (decoupled weight decay): p *= 1 - lr * weight_decay; m, v moving averages of g and g^2;
// p -= (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps).
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update of every parameter from its gradient. Every call must pass the same parameters (names and
  // shapes) in the same order; state is kept per position.
  virtual void step(std::span<const ParamRef> params) = 0;
  virtual std::string_view name() const = 0;
};

// Throw on non-positive lr, momentum/betas outside [0, 1), negative weight decay or eps.
std::unique_ptr<Optimizer> make_sgd(const SgdOptions& options);
std::unique_ptr<Optimizer> make_adamw(const AdamWOptions& options);

// ---- Imitation training ----

struct ImitationOptions {
  MoEConfig student;              // the layer being trained
  std::string teacher = "moe";    // "moe": a random layer of the student's config; "dense": one dense MLP
  int64_t teacher_hidden = 0;     // dense teacher's hidden size (0: hidden_dim * top_k)
  int64_t tokens = 256;           // tokens per batch (one sequence)
  int64_t steps = 500;            // also the schedule length (max_steps) of sigmoid bias schedules
  uint64_t seed = 0;
  double input_mean = 1.0;        // inputs are N(0, 1) plus a fixed random direction of this norm
  // Skewed start: the first max(1, E/4) experts get +skew on their sigmoid bias, or for softmax routers their
  // gate rows moved by skew along the input mean direction, so they attract most tokens at step 0.
  double skew = 0.0;
  double aux_loss_weight = 0.0;
  double z_loss_weight = 0.0;
  // false: the optimizer leaves router.expert_bias alone, so only the balancing rule moves it (DeepSeek-V3's
  // auxiliary-loss-free scheme); its gradient is still computed.
  bool bias_from_gradient = true;
  std::string optimizer = "adamw";  // "adamw" | "sgd"
  SgdOptions sgd;
  AdamWOptions adamw;
};

struct StepMetrics {
  int64_t step = 0;         // 1-based
  double loss = 0.0;        // mean squared error to the teacher
  double aux_loss = 0.0;
  double z_loss = 0.0;
  int64_t min_tokens = 0;   // fewest top-k assignments any expert got this step
  int64_t max_tokens = 0;   // most
};

class ImitationRun {
 public:
  explicit ImitationRun(const ImitationOptions& options);
  ~ImitationRun();
  // One batch: forward both layers, backward of MSE + aux + z through the student, one optimizer step.
  StepMetrics step();
  int64_t steps_done() const { return step_; }
  MoELayer& student() { return *student_; }

 private:
  ImitationOptions options_;
  std::unique_ptr<MoELayer> student_, teacher_;
  std::unique_ptr<Optimizer> optimizer_;
  Rng data_rng_;
  Tensor input_mean_;  // (dim)
  int64_t step_ = 0;
};

}  // namespace hymoe
