// A deliberately naive MoE layer forward in double precision, written straight from docs/semantics.md: per token,
// per slot, no dispatch, no grouping, no kernels. The library's layer is tested against it on random configs, and
// the backward against its central finite differences (with the routing decisions held fixed, which is the
// function autograd differentiates).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hymoe/moe.h"

namespace hymoe::test {

// The discrete decisions of one forward: what finite differences hold fixed.
struct ReferenceDecisions {
  std::vector<int> indices;    // (T, K) slot 0 = highest score
  std::vector<uint8_t> kept;   // (T, K) 0 where capacity dropped the assignment
  std::vector<double> counts;  // (E) assignments per expert before drops
};

struct ReferenceOutput {
  std::vector<double> y;        // (T, D)
  std::vector<int> indices;     // (T, K)
  std::vector<double> weights;  // (T, K) after capacity
  std::vector<double> counts;   // (E)
  double aux = 0, z = 0;
  std::vector<double> bias_after, ema_after;  // sigmoid, train
  ReferenceDecisions decisions;
};

// Parameters and buffers by PyTorch name, as doubles.
using ReferenceParams = std::map<std::string, std::vector<double>>;

// x is (T, D) row-major. With `fixed`, its decisions are used instead of being taken from the scores.
ReferenceOutput reference_forward(const MoEConfig& c, const ReferenceParams& params, const std::vector<double>& x,
                                  bool train, int64_t step, int64_t max_steps,
                                  const ReferenceDecisions* fixed = nullptr);

// `tensors` maps PyTorch names to weights as in MoELayer::named_tensors().
ReferenceOutput reference_forward(const MoEConfig& c, const std::map<std::string, Tensor>& tensors, const Tensor& x,
                                  bool train, int64_t step, int64_t max_steps);

// The layer's parameters and buffers (named_tensors()) as doubles.
ReferenceParams reference_params(MoELayer& layer);

}  // namespace hymoe::test
