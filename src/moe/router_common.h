// Pieces shared by the routers: gate logits, top-k selection with a fixed tie rule, assignment counts and the
// router z-loss. Each is a plain function over row-major arrays so routers stay short and testable.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "hymoe/moe.h"
#include "hymoe/tensor.h"

namespace hymoe::router_detail {

// logits (T, E) = x (T, D) . gate^T, gate (E, D); a float32 GEMM on the grouped kernels (as PyTorch computes it).
std::vector<float> gate_logits(const Tensor& x, const Tensor& gate);

// Runs fn(t0, t1) over consecutive blocks of the tokens [0, T) on the thread pool. fn must write only its tokens'
// outputs (and its own scratch), so every token's result is the same bits for any thread count.
void for_token_blocks(int64_t T, const std::function<void(int64_t t0, int64_t t1)>& fn);

// p (E) = softmax(l) in double: the largest logit, each exp(l - max) once, their sum in order, then each quotient.
// The softmax router's scores and the model families' softmax scoring.
void softmax_row(const float* l, int64_t E, double* p);

// For each token, the top_k columns of scores (T, E) in descending order; ties go to the lower expert index.
// Fills routing.indices and routing.router_weights (selected scores divided by their sum).
void select_top_k(const std::vector<float>& scores, int64_t T, int64_t E, int64_t K, Routing& routing);

// expert_counts (E) from routing.indices.
Tensor count_assignments(const Routing& routing);

// mean_t logsumexp(logits_t)^2.
float z_loss(const std::vector<float>& logits, int64_t T, int64_t E);

// E * sum_e f_e * mean_t scores[t, e], f = counts / (T*K): the Switch load-balancing term.
float switch_balance_loss(const std::vector<float>& scores, const Tensor& counts, int64_t T, int64_t K);

// ---- Backward pieces (double precision; the routing decisions and token fractions are constants) ----

// d loss / d scores (T, E) from d loss / d router_weights (T, K), router_weights = selected scores / their sum:
// every selected score gets its own term and a share through the normalizing sum (dropped assignments too).
std::vector<double> top_k_weights_backward(const Routing& routing, const float* grad_weights);

// Adds d(coef * E * sum_e f_e * mean_t scores[t, e]) / d scores to grad_scores (T, E); f = counts / (T*K) constant.
void add_balance_loss_grad(const Tensor& counts, int64_t T, int64_t K, double coef, std::vector<double>& grad_scores);

// Adds d(coef * mean_t logsumexp(logits_t)^2) / d logits to grad_logits (T, E).
void add_z_loss_grad(const std::vector<float>& logits, int64_t T, int64_t E, double coef,
                     std::vector<double>& grad_logits);

// logits = x . gate^T: returns d loss / d gate (E, D) and accumulates d loss / d x into grad_x (T, D).
Tensor gate_backward(const std::vector<double>& grad_logits, const Tensor& x, const Tensor& gate, float* grad_x);

}  // namespace hymoe::router_detail
