// A plain scalar double-precision reference of the MoE layer's train-mode forward, written straight from
// docs/semantics.md and independent of the library's code: parameters by PyTorch name, one token at a time, no
// grouping. Gradient checks differentiate it by central finite differences with the discrete routing decisions
// (top-k choice, capacity drops, token counts) held fixed, which is the function autograd differentiates.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hymoe/moe.h"

namespace hymoe::test {

using RefParams = std::map<std::string, std::vector<double>>;

struct RefDecisions {
  std::vector<int> indices;     // (T, K) slot 0 = highest score
  std::vector<uint8_t> kept;    // (T, K) 0 where capacity dropped the assignment
  std::vector<double> counts;   // (E) assignments per expert before drops
};

struct RefResult {
  std::vector<double> y;  // (T, D)
  double aux_loss = 0.0, z_loss = 0.0;
  RefDecisions decisions;
};

// Train-mode forward (gradient_scale applies; no router state update). With `fixed`, its decisions are used
// instead of being taken from the scores.
RefResult moe_forward_ref(const MoEConfig& c, const RefParams& params, const std::vector<double>& x, int64_t T,
                          const RefDecisions* fixed = nullptr);

// The layer's parameters as doubles (named_parameters(), PyTorch names).
RefParams ref_params(MoELayer& layer);

}  // namespace hymoe::test
