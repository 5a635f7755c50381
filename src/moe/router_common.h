// Pieces shared by the routers: gate logits, top-k selection with a fixed tie rule, assignment counts and the
// router z-loss. Each is a plain function over row-major arrays so routers stay short and testable.
#pragma once

#include <cstdint>
#include <vector>

#include "hymoe/moe.h"
#include "hymoe/tensor.h"

namespace hymoe::router_detail {

// logits (T, E) = x (T, D) . gate^T, gate (E, D); double accumulation, rounded once to float.
std::vector<float> gate_logits(const Tensor& x, const Tensor& gate);

// For each token, the top_k columns of scores (T, E) in descending order; ties go to the lower expert index.
// Fills routing.indices and routing.router_weights (selected scores divided by their sum).
void select_top_k(const std::vector<float>& scores, int64_t T, int64_t E, int64_t K, Routing& routing);

// expert_counts (E) from routing.indices.
Tensor count_assignments(const Routing& routing);

// mean_t logsumexp(logits_t)^2.
float z_loss(const std::vector<float>& logits, int64_t T, int64_t E);

// E * sum_e f_e * mean_t scores[t, e], f = counts / (T*K): the Switch load-balancing term.
float switch_balance_loss(const std::vector<float>& scores, const Tensor& counts, int64_t T, int64_t K);

}  // namespace hymoe::router_detail
