// The public grouped-expert entry points (grouped_expert_forward[_packed], scale_by_expert_load) and the
// translation of expert weights to kernel views.
#include <algorithm>

#include "hymoe/error.h"
#include "moe/expert_views.h"

namespace hymoe {

std::vector<std::pair<std::string, Tensor*>> ExpertMlp::named_tensors() {
  std::vector<std::pair<std::string, Tensor*>> out;
  if (activation == MlpActivation::kSwiGLU) out.emplace_back("gate_proj.weight", &gate_proj);
  out.emplace_back("up_proj.weight", &up_proj);
  out.emplace_back("down_proj.weight", &down_proj);
  return out;
}

kernels::Activation to_kernel_activation(MlpActivation a) {
  switch (a) {
    case MlpActivation::kSwiGLU: return kernels::Activation::kSwiGLU;
    case MlpActivation::kGelu: return kernels::Activation::kGelu;
    case MlpActivation::kRelu: return kernels::Activation::kRelu;
  }
  return kernels::Activation::kSwiGLU;
}

kernels::MlpWeightsView mlp_view(const ExpertMlp& mlp) {
  using kernels::MatrixView;
  using kernels::WeightLayout;
  const int64_t D = mlp.dim(), H = mlp.hidden();
  kernels::MlpWeightsView v;
  if (mlp.activation == MlpActivation::kSwiGLU) v.gate = MatrixView{mlp.gate_proj.data(), DType::kF32, WeightLayout::kOutIn, D, H, {}};
  v.up = MatrixView{mlp.up_proj.data(), DType::kF32, WeightLayout::kOutIn, D, H, {}};
  v.down = MatrixView{mlp.down_proj.data(), DType::kF32, WeightLayout::kOutIn, H, D, {}};
  return v;
}

kernels::MlpWeightsView packed_view(const Tensor& up_w, const Tensor& down_w, const Tensor* gate_w, int64_t e) {
  using kernels::MatrixView;
  using kernels::WeightLayout;
  const int64_t D = up_w.dim(1), H = up_w.dim(2);
  kernels::MlpWeightsView v;
  if (gate_w) v.gate = MatrixView{gate_w->data() + e * D * H, DType::kF32, WeightLayout::kInOut, D, H, {}};
  v.up = MatrixView{up_w.data() + e * D * H, DType::kF32, WeightLayout::kInOut, D, H, {}};
  v.down = MatrixView{down_w.data() + e * H * D, DType::kF32, WeightLayout::kInOut, H, D, {}};
  return v;
}

std::vector<int64_t> offsets_from_counts(std::span<const int64_t> tokens_per_expert, int64_t rows) {
  std::vector<int64_t> offsets(tokens_per_expert.size() + 1, 0);
  for (size_t e = 0; e < tokens_per_expert.size(); ++e) {
    if (tokens_per_expert[e] < 0) fail("tokens_per_expert[", e, "]=", tokens_per_expert[e], " is negative");
    offsets[e + 1] = offsets[e] + tokens_per_expert[e];
  }
  if (offsets.back() != rows)
    fail("tokens_per_expert sums to ", offsets.back(), " but x_sorted has ", rows, " rows");
  return offsets;
}

namespace {

Tensor run_grouped(const Tensor& x_sorted, std::span<const int64_t> tokens_per_expert,
                   const std::vector<kernels::MlpWeightsView>& views, MlpActivation activation, int64_t hidden) {
  if (x_sorted.rank() != 2) fail("x_sorted must be (rows, dim), got ", shape_to_string(x_sorted.shape()));
  const int64_t rows = x_sorted.dim(0), dim = x_sorted.dim(1);
  const auto offsets = offsets_from_counts(tokens_per_expert, rows);
  Tensor y(Shape{rows, dim});
  if (rows == 0) return y;
  kernels::GroupedFfnShape shape{static_cast<int64_t>(views.size()), dim, hidden, to_kernel_activation(activation)};
  auto ffn = kernels::make_grouped_ffn(shape, views);
  kernels::GroupedFfnArgs args;
  args.offsets = offsets.data();
  args.x = x_sorted.data();
  args.y = y.data();
  ffn->run(args);
  return y;
}

}  // namespace

Tensor grouped_expert_forward(const Tensor& x_sorted, std::span<const int64_t> tokens_per_expert,
                              std::span<const ExpertMlp> experts) {
  if (tokens_per_expert.size() != experts.size())
    fail("grouped_expert_forward: ", tokens_per_expert.size(), " token counts for ", experts.size(), " experts");
  if (experts.empty()) fail("grouped_expert_forward: no experts");
  std::vector<kernels::MlpWeightsView> views;
  for (const auto& m : experts) {
    if (m.activation != experts[0].activation || m.dim() != experts[0].dim() || m.hidden() != experts[0].hidden())
      fail("grouped_expert_forward: experts differ in activation or shape");
    if (x_sorted.rank() == 2 && m.dim() != x_sorted.dim(1))
      fail("grouped_expert_forward: x_sorted has ", x_sorted.dim(1), " features, experts expect ", m.dim());
    views.push_back(mlp_view(m));
  }
  return run_grouped(x_sorted, tokens_per_expert, views, experts[0].activation, experts[0].hidden());
}

Tensor grouped_expert_forward_packed(const Tensor& x_sorted, std::span<const int64_t> tokens_per_expert,
                                     const Tensor& up_w, const Tensor& down_w, const Tensor* gate_w,
                                     MlpActivation activation) {
  if (up_w.rank() != 3) fail("up_w must be (E, dim, hidden), got ", shape_to_string(up_w.shape()));
  const int64_t E = up_w.dim(0), D = up_w.dim(1), H = up_w.dim(2);
  if (down_w.shape() != Shape{E, H, D})
    fail("down_w has shape ", shape_to_string(down_w.shape()), ", expected ", shape_to_string({E, H, D}));
  const bool gated = activation == MlpActivation::kSwiGLU;
  if (gated != (gate_w != nullptr)) fail("gate_w must be given exactly when the activation is SwiGLU");
  if (gate_w && gate_w->shape() != up_w.shape())
    fail("gate_w has shape ", shape_to_string(gate_w->shape()), ", expected ", shape_to_string(up_w.shape()));
  if (static_cast<int64_t>(tokens_per_expert.size()) != E)
    fail("grouped_expert_forward_packed: ", tokens_per_expert.size(), " token counts for ", E, " experts");
  if (x_sorted.rank() == 2 && x_sorted.dim(1) != D)
    fail("grouped_expert_forward_packed: x_sorted has ", x_sorted.dim(1), " features, weights expect ", D);
  std::vector<kernels::MlpWeightsView> views;
  for (int64_t e = 0; e < E; ++e) views.push_back(packed_view(up_w, down_w, gate_w, e));
  return run_grouped(x_sorted, tokens_per_expert, views, activation, H);
}

Tensor scale_by_expert_load(const Tensor& expert_out, std::span<const int64_t> tokens_per_expert, int64_t num_experts) {
  if (expert_out.rank() != 2) fail("expert_out must be (rows, dim), got ", shape_to_string(expert_out.shape()));
  const int64_t rows = expert_out.dim(0), dim = expert_out.dim(1);
  const auto offsets = offsets_from_counts(tokens_per_expert, rows);
  const double avg = static_cast<double>(rows) / static_cast<double>(std::max<int64_t>(num_experts, 1));
  Tensor out = expert_out;
  for (size_t e = 0; e < tokens_per_expert.size(); ++e) {
    const float s = static_cast<float>(avg / static_cast<double>(std::max<int64_t>(tokens_per_expert[e], 1)));
    for (int64_t i = offsets[e] * dim; i < offsets[e + 1] * dim; ++i) out[i] *= s;
  }
  return out;
}

}  // namespace hymoe
