// The router of a released checkpoint's MoE layer: one function over RouterOptions (scoring, biases, group
// limiting, normalization, scaling) that covers every family; the families only choose the options.
#pragma once

#include <vector>

#include "hymoe/model.h"
#include "hymoe/moe.h"

namespace hymoe {

struct ModelRouterWeights {
  Tensor weight;                      // (E, D) float32
  std::vector<float> logit_bias;      // (E) or empty
  std::vector<float> selection_bias;  // (E) or empty
};

// Routes x (T, D). Fills indices and router_weights (T, K) in descending selection-score order (ties to the lower
// expert), weights (= router_weights), dropped (none), logits (T, E) (with the logit bias, as transformers returns
// them), scores (T, E) (the selection scores before group masking) and expert_counts.
Routing route_model_tokens(const RouterOptions& options, const ModelRouterWeights& weights, const Tensor& x,
                           int64_t top_k);

}  // namespace hymoe
