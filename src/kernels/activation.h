// Element-wise activations of the expert MLPs and their derivatives, in one place so the reference kernels, the
// fast kernels and the backward pass agree on the exact formulas (GELU is the exact erf form, not tanh).
#pragma once

#include <cmath>

namespace hymoe::kernels {

enum class Activation {
  kSwiGLU,  // gated: silu(gate) * up
  kGelu,    // gelu(up), exact erf form
  kRelu,    // relu(up)
  // gated, gpt-oss's clamped SwiGLU: g = min(gate, limit), u = clamp(up, -limit, limit),
  // (u + 1) * g * sigmoid(alpha * g); alpha and limit come with the kernel's shape. Inference only.
  kClampedSwiGLU,
};

inline bool is_gated(Activation a) { return a == Activation::kSwiGLU || a == Activation::kClampedSwiGLU; }

template <typename T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}
template <typename T>
T silu(T x) {
  return x * sigmoid(x);
}
template <typename T>
T silu_grad(T x) {  // d/dx x*s(x) = s(x) * (1 + x*(1 - s(x)))
  const T s = sigmoid(x);
  return s * (T(1) + x * (T(1) - s));
}
template <typename T>
T gelu(T x) {
  return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
}
template <typename T>
T gelu_grad(T x) {
  const T cdf = T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440)));
  const T pdf = std::exp(T(-0.5) * x * x) * T(0.39894228040143267794);
  return cdf + x * pdf;
}
template <typename T>
T relu(T x) {
  return x > T(0) ? x : T(0);
}
template <typename T>
T relu_grad(T x) {
  return x > T(0) ? T(1) : T(0);
}

template <typename T>
T clamped_swiglu(T gate, T up, T alpha, T limit) {
  const T g = gate < limit ? gate : limit;
  const T u = up < -limit ? -limit : (up > limit ? limit : up);
  return (u + T(1)) * g * sigmoid(alpha * g);
}

// The gated activation of one hidden unit: silu(gate) * up, or the clamped form.
template <typename T>
T gated_activation(Activation a, T gate, T up, T alpha, T limit) {
  return a == Activation::kClampedSwiGLU ? clamped_swiglu(gate, up, alpha, limit) : silu(gate) * up;
}

// The non-gated activation applied to the up projection (for kSwiGLU: silu applied to the gate).
template <typename T>
T apply_activation(Activation a, T x) {
  switch (a) {
    case Activation::kSwiGLU:
    case Activation::kClampedSwiGLU: return silu(x);
    case Activation::kGelu: return gelu(x);
    case Activation::kRelu: return relu(x);
  }
  return x;
}
template <typename T>
T activation_grad(Activation a, T x) {
  switch (a) {
    case Activation::kSwiGLU:
    case Activation::kClampedSwiGLU: return silu_grad(x);  // no backward for the clamped form; never reached
    case Activation::kGelu: return gelu_grad(x);
    case Activation::kRelu: return relu_grad(x);
  }
  return T(0);
}

}  // namespace hymoe::kernels
