// Translation from the layer's weight tensors to the kernels' weight views: the one place where the moe layer
// meets the kernel interface's types.
#pragma once

#include <vector>

#include "hymoe/moe.h"
#include "kernels/ffn/grouped_ffn.h"

namespace hymoe {

kernels::Activation to_kernel_activation(MlpActivation a);
// nn.Linear (out, in) weights of one MLP.
kernels::MlpWeightsView mlp_view(const ExpertMlp& mlp);
// Expert e of packed (E, in, out) tensors; gate_w may be null.
kernels::MlpWeightsView packed_view(const Tensor& up_w, const Tensor& down_w, const Tensor* gate_w, int64_t e);
// offsets (E+1) from counts (E); throws on negative counts or when the total differs from `rows`.
std::vector<int64_t> offsets_from_counts(std::span<const int64_t> tokens_per_expert, int64_t rows);

}  // namespace hymoe
