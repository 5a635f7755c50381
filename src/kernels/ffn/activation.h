// Element-wise activations of the expert MLPs and their derivatives, in one place so the reference kernels, the
// fast kernels and the backward pass agree on the exact formulas (kGelu and kGeGLU are the exact erf form; the
// tanh approximation has its own name, kGeGLUTanh).
#pragma once

#include <cmath>

namespace hymoe::kernels {

enum class Activation {
  kSwiGLU,  // gated: silu(gate) * up
  kGelu,    // gelu(up), exact erf form
  kRelu,    // relu(up)
  kRelu2,   // relu(up)^2 (Nemotron-H's relu2), no gate
  // gated, gpt-oss's clamped SwiGLU: g = min(gate, limit), u = clamp(up, -limit, limit),
  // (u + 1) * g * sigmoid(alpha * g); alpha and limit come with the kernel's shape. Inference only.
  kClampedSwiGLU,
  // gated, GLM-5-Next's limited SwiGLU: silu(min(gate, limit)) * clamp(up, -limit, limit); limit comes with the
  // kernel's shape (swiglu_limit). Inference only.
  kLimitedSwiGLU,
  // gated, Step-3.7's SwiGLU clamped after the silu: min(silu(gate), limit) * clamp(up, -limit, limit) (llama.cpp's
  // swiglu clamp for every architecture outside ggml_swiglu_clamp's list). Inference only.
  kSiluClampedSwiGLU,
  // gated like kSwiGLU with another nonlinearity on the gate (transformers' ACT2FN[hidden_act] on gate_proj):
  kGeGLU,      // gelu(gate) * up, exact erf form (hidden_act "gelu")
  kGeGLUTanh,  // gelu_tanh(gate) * up (hidden_act "gelu_pytorch_tanh", "gelu_new")
  kReGLU,      // relu(gate) * up
};

inline bool is_gated(Activation a) {
  return a != Activation::kGelu && a != Activation::kRelu && a != Activation::kRelu2;
}

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
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): PyTorch's gelu(approximate="tanh") and transformers'
// NewGELUActivation, the same expression.
template <typename T>
T gelu_tanh(T x) {
  constexpr T kSqrt2OverPi = T(0.79788456080286535588);
  return T(0.5) * x * (T(1) + std::tanh(kSqrt2OverPi * (x + T(0.044715) * x * x * x)));
}
template <typename T>
T gelu_tanh_grad(T x) {  // 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
  constexpr T kSqrt2OverPi = T(0.79788456080286535588);
  const T t = std::tanh(kSqrt2OverPi * (x + T(0.044715) * x * x * x));
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * kSqrt2OverPi * (T(1) + T(3 * 0.044715) * x * x);
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
T limited_swiglu(T gate, T up, T limit) {
  const T g = gate < limit ? gate : limit;
  const T u = up < -limit ? -limit : (up > limit ? limit : up);
  return silu(g) * u;
}

template <typename T>
T silu_clamped_swiglu(T gate, T up, T limit) {
  const T s = silu(gate);
  const T g = s < limit ? s : limit;
  const T u = up < -limit ? -limit : (up > limit ? limit : up);
  return g * u;
}

template <typename T>
T clamped_swiglu(T gate, T up, T alpha, T limit) {
  const T g = gate < limit ? gate : limit;
  const T u = up < -limit ? -limit : (up > limit ? limit : up);
  return (u + T(1)) * g * sigmoid(alpha * g);
}

// The element-wise function of the activation: for the gated forms the nonlinearity applied to the gate (then
// multiplied by up; kClampedSwiGLU's clamps and alpha are not in it: use gated_activation), for kGelu and kRelu
// the one applied to up.
template <typename T>
T apply_activation(Activation a, T x) {
  switch (a) {
    case Activation::kSwiGLU:
    case Activation::kClampedSwiGLU:
    case Activation::kLimitedSwiGLU:
    case Activation::kSiluClampedSwiGLU: return silu(x);
    case Activation::kGelu:
    case Activation::kGeGLU: return gelu(x);
    case Activation::kGeGLUTanh: return gelu_tanh(x);
    case Activation::kRelu:
    case Activation::kReGLU: return relu(x);
    case Activation::kRelu2: return relu(x) * relu(x);
  }
  return x;
}
template <typename T>
T activation_grad(Activation a, T x) {
  switch (a) {
    case Activation::kSwiGLU:
    case Activation::kClampedSwiGLU:
    case Activation::kLimitedSwiGLU:
    case Activation::kSiluClampedSwiGLU: return silu_grad(x);  // no backward for the clamped forms; never reached
    case Activation::kGelu:
    case Activation::kGeGLU: return gelu_grad(x);
    case Activation::kGeGLUTanh: return gelu_tanh_grad(x);
    case Activation::kRelu:
    case Activation::kReGLU: return relu_grad(x);
    case Activation::kRelu2: return T(2) * relu(x);
  }
  return T(0);
}

// The gated activation of one hidden unit: act(gate) * up, or a clamped form.
template <typename T>
T gated_activation(Activation a, T gate, T up, T alpha, T limit) {
  if (a == Activation::kClampedSwiGLU) return clamped_swiglu(gate, up, alpha, limit);
  if (a == Activation::kLimitedSwiGLU) return limited_swiglu(gate, up, limit);
  if (a == Activation::kSiluClampedSwiGLU) return silu_clamped_swiglu(gate, up, limit);
  return apply_activation(a, gate) * up;
}

}  // namespace hymoe::kernels
