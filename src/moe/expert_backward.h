// The backward pass of G expert MLPs over a ragged grouped batch (the forward is kernels::GroupedFfn): every
// GEMM is one grouped call over exactly each group's rows (kernels/driver/grouped_gemm.h), so an empty group costs
// nothing. Used for the routed experts and, as a single group, for the shared expert. Knows nothing of routing:
// the row scales and the gradient rows come from the caller.
#pragma once

#include <cstdint>

#include "kernels/ffn/grouped_ffn.h"

namespace hymoe {

// Row r of group g computed y_r = scale_r * mlp_g(x_r) in the forward, keeping the pre-activation projections.
struct GroupedMlpBackwardArgs {
  kernels::GroupedFfnShape shape;
  const int64_t* offsets = nullptr;                 // (G+1)
  const kernels::MlpWeightsView* weights = nullptr; // (G) the weights the forward used
  const float* x = nullptr;                         // (R, dim) the forward's input rows
  const float* saved_gate = nullptr;                // (R, hidden) gate pre-activation, gated activations only
  const float* saved_up = nullptr;                  // (R, hidden) up pre-activation
  const float* scale = nullptr;                     // (R) or nullptr for 1
  const float* grad_y = nullptr;                    // (R, dim) d loss / d y_r
  // Outputs.
  float* grad_x = nullptr;                          // (R, dim) overwritten
  float* grad_scale = nullptr;                      // (R) d loss / d scale_r = <grad_y_r, mlp_g(x_r)>, or nullptr
  float* const* grad_gate = nullptr;                // (G) overwritten, stored in the layout of weights[g].gate
  float* const* grad_up = nullptr;                  // (G) ... of weights[g].up
  float* const* grad_down = nullptr;                // (G) ... of weights[g].down
};

void grouped_mlp_backward(const GroupedMlpBackwardArgs& args);

}  // namespace hymoe
