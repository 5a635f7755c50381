// Grouped expert-MLP backward. With hidden h = act(x Wg) * (x Wu) (or act(x Wu)) and y = scale * h Wd:
//   dh = scale * (dy Wd^T),  dWd = (scale h)^T dy,  d pre-activations from dh,  dWu = x^T dup,
//   dx = dup Wu^T (+ dgate Wg^T),  d scale = <dy Wd^T, h> = <dy, mlp(x)>.
// The transposed products reuse the forward's weight views with the layout flipped: no weight is copied.
#include "moe/expert_backward.h"

#include <vector>

#include "hymoe/error.h"
#include "kernels/driver/grouped_gemm.h"

namespace hymoe {
namespace {

// The view of B^T: same storage, logical shape (n, k).
kernels::MatrixView transposed(const kernels::MatrixView& m) {
  kernels::MatrixView t = m;
  t.layout = m.layout == kernels::WeightLayout::kOutIn ? kernels::WeightLayout::kInOut : kernels::WeightLayout::kOutIn;
  t.k = m.n;
  t.n = m.k;
  return t;
}

}  // namespace

void grouped_mlp_backward(const GroupedMlpBackwardArgs& a) {
  using namespace kernels;
  const int64_t G = a.shape.num_groups, D = a.shape.dim, H = a.shape.hidden;
  const bool gated = is_gated(a.shape.activation);
  // The clamped form's derivative has kinks at both clamps and no caller trains it; the other gated forms are
  // act(gate) * up with act's derivative beside it in activation.h.
  HYMOE_CHECK(a.shape.activation != Activation::kClampedSwiGLU && a.shape.activation != Activation::kLimitedSwiGLU &&
                  a.shape.activation != Activation::kSiluClampedSwiGLU,
              "no backward for the clamped SwiGLU forms");
  HYMOE_CHECK(a.offsets && a.weights && a.x && a.saved_up && a.grad_y && a.grad_x);
  HYMOE_CHECK(!gated || a.saved_gate);
  const int64_t R = a.offsets[G];
  std::vector<MatrixView> down_t, up_t, gate_t;
  for (int64_t g = 0; g < G; ++g) {
    down_t.push_back(transposed(a.weights[g].down));
    up_t.push_back(transposed(a.weights[g].up));
    if (gated) gate_t.push_back(transposed(a.weights[g].gate));
  }
  // 1. dh_unscaled = dy Wd^T (R, H).
  std::vector<float> dh(static_cast<size_t>(R * H));
  grouped_rows_gemm({.num_groups = G, .offsets = a.offsets, .k = D, .n = H, .a = a.grad_y, .b = down_t.data(), .c = dh.data()});
  // 2. Recompute h from the saved pre-activations; d scale; scale both.
  std::vector<float> h(static_cast<size_t>(R * H));
  for (int64_t r = 0; r < R; ++r) {
    const float* up = a.saved_up + r * H;
    float* hr = h.data() + r * H;
    float* dr = dh.data() + r * H;
    if (gated) {
      const float* gt = a.saved_gate + r * H;
      for (int64_t j = 0; j < H; ++j) hr[j] = apply_activation(a.shape.activation, gt[j]) * up[j];
    } else {
      for (int64_t j = 0; j < H; ++j) hr[j] = apply_activation(a.shape.activation, up[j]);
    }
    if (a.grad_scale) {
      double dot = 0.0;
      for (int64_t j = 0; j < H; ++j) dot += static_cast<double>(dr[j]) * hr[j];
      a.grad_scale[r] = static_cast<float>(dot);
    }
    if (a.scale) {
      const float s = a.scale[r];
      for (int64_t j = 0; j < H; ++j) {
        hr[j] *= s;
        dr[j] *= s;
      }
    }
  }
  // 3. dWd = (scale h)^T dy, stored like Wd.
  grouped_weight_grad_gemm({.num_groups = G, .offsets = a.offsets, .k = H, .n = D, .a = h.data(), .g = a.grad_y,
                            .dw = a.grad_down, .layout = a.weights[0].down.layout});
  // 4. Pre-activation gradients: dup (into h, no longer needed) and dgate (into dh).
  for (int64_t r = 0; r < R; ++r) {
    const float* up = a.saved_up + r * H;
    float* dup = h.data() + r * H;
    float* dr = dh.data() + r * H;
    if (gated) {
      const float* gt = a.saved_gate + r * H;
      for (int64_t j = 0; j < H; ++j) {
        dup[j] = dr[j] * apply_activation(a.shape.activation, gt[j]);
        dr[j] = dr[j] * up[j] * activation_grad(a.shape.activation, gt[j]);
      }
    } else {
      for (int64_t j = 0; j < H; ++j) dup[j] = dr[j] * activation_grad(a.shape.activation, up[j]);
    }
  }
  // 5. dWu = x^T dup, dWg = x^T dgate; 6. dx = dup Wu^T (+ dgate Wg^T).
  grouped_weight_grad_gemm({.num_groups = G, .offsets = a.offsets, .k = D, .n = H, .a = a.x, .g = h.data(),
                            .dw = a.grad_up, .layout = a.weights[0].up.layout});
  grouped_rows_gemm({.num_groups = G, .offsets = a.offsets, .k = H, .n = D, .a = h.data(), .b = up_t.data(), .c = a.grad_x});
  if (gated) {
    grouped_weight_grad_gemm({.num_groups = G, .offsets = a.offsets, .k = D, .n = H, .a = a.x, .g = dh.data(),
                              .dw = a.grad_gate, .layout = a.weights[0].gate.layout});
    grouped_rows_gemm({.num_groups = G, .offsets = a.offsets, .k = H, .n = D, .a = dh.data(), .b = gate_t.data(),
                       .c = a.grad_x, .accumulate = true});
  }
}

}  // namespace hymoe
