// Turns a layer's checkpoint tensors into the grouped kernels' weight views: per-expert nn.Linear matrices are
// viewed in place in the mapping (f32, bf16, block FP8 codes as quantized views) or converted (f16 -> f32);
// gpt-oss's fused, interleaved tensors are split into gate and up (MXFP4 viewed in place with a row step of 2);
// GGUF's fused (E, out, in) tensors are sliced by rows, one expert each (ggml block types viewed in place, F16/BF16
// widened to f32). Anything converted lives in the ExpertWeights' buffers only until the kernels have packed it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hymoe/model.h"
#include "kernels/ffn/grouped_ffn.h"

namespace hymoe {

struct ExpertWeights {
  std::vector<kernels::MlpWeightsView> views;  // one per expert (or one for a shared expert)
  // Converted matrices and biases the views point into; deques, so a reference to one buffer survives adding the
  // next.
  std::deque<std::vector<uint16_t>> bf16_buffers;
  std::deque<std::vector<float>> f32_buffers;
  int64_t weight_elements = 0;                      // matrix elements, for the resident-size report
  DType dtype = DType::kF32;                        // the element type the kernels will hold
};

// The spec's routed experts.
ExpertWeights load_routed_experts(const TensorSource& source, const MoELayerSpec& spec, const Quantization& quant);
// The spec's shared expert (spec.shared.hidden > 0).
ExpertWeights load_shared_expert(const TensorSource& source, const MoELayerSpec& spec, const Quantization& quant);

// The kernels' form of a family's expert activation.
kernels::Activation kernel_activation(ExpertActivation a);
// The grouped kernels over `views` with the spec's activation (and gpt-oss's alpha and limit). The kernels pack the
// views' weights (their stored dtype kept) and own the packed copy; the views' buffers and the mapping may go once
// this returns.
std::unique_ptr<kernels::GroupedFfn> make_expert_ffn(const MoELayerSpec& spec,
                                                     std::span<const kernels::MlpWeightsView> views, int64_t hidden,
                                                     const kernels::GroupedFfnOptions& options = {});
// The shared expert's grouped FFN (one group of spec.shared.hidden), with spec.shared.activation where it is set.
std::unique_ptr<kernels::GroupedFfn> make_shared_expert_ffn(const MoELayerSpec& spec,
                                                            std::span<const kernels::MlpWeightsView> views);

// Qwen2-MoE's shared-expert gate, (D) as float32, or empty when the spec has none. Checkpoints store it (1, D) as
// nn.Linear does; GGUF files as ne [D].
std::vector<float> load_shared_gate(const TensorSource& source, const MoELayerSpec& spec);
// out[t] = sigmoid(gate . x[t]) for x (T, D): the per-token factor of a gated shared expert (double accumulation).
void shared_gate_scales(std::span<const float> gate, const float* x, int64_t tokens, float* out);

// A small tensor (router weight, biases) as float32, its shape checked. `why` explains the expected shape.
std::vector<float> load_f32(const TensorSource& source, const std::string& name, const Shape& shape, const std::string& why);

}  // namespace hymoe
