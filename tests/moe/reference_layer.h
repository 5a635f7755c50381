// A deliberately naive MoE layer forward in double precision, written straight from docs/semantics.md: per token,
// per slot, no dispatch, no grouping, no kernels. The library's layer is tested against it on random configs.
#pragma once

#include <vector>

#include "hymoe/moe.h"

namespace hymoe::test {

struct ReferenceOutput {
  std::vector<double> y;        // (T, D)
  std::vector<int> indices;     // (T, K)
  std::vector<double> weights;  // (T, K) after capacity
  std::vector<double> counts;   // (E)
  double aux = 0, z = 0;
  std::vector<double> bias_after, ema_after;  // sigmoid, train
};

// `tensors` maps PyTorch names to weights as in MoELayer::named_tensors().
ReferenceOutput reference_forward(const MoEConfig& c, const std::map<std::string, Tensor>& tensors, const Tensor& x,
                                  bool train, int64_t step, int64_t max_steps);

}  // namespace hymoe::test
