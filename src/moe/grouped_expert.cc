// The public grouped-expert entry points (grouped_expert_forward[_packed], scale_by_expert_load) and the
// translation of expert weights to kernel views.
#include <algorithm>

#include "hymoe/error.h"
#include "moe/expert_backward.h"
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

struct GroupedExperts::Impl {
  Impl(std::vector<kernels::MlpWeightsView> v, MlpActivation activation, int64_t d, int64_t h, bool p)
      : views(std::move(v)),
        shape{static_cast<int64_t>(views.size()), d, h, to_kernel_activation(activation)},
        gated(activation == MlpActivation::kSwiGLU),
        packed(p),
        ffn(kernels::make_grouped_ffn(shape, views)) {}
  std::vector<kernels::MlpWeightsView> views;  // the weights it was built from, for the backward
  kernels::GroupedFfnShape shape;
  bool gated = false;
  bool packed = false;  // built from (E, in, out) tensors
  std::unique_ptr<kernels::GroupedFfn> ffn;
};

GroupedExperts::GroupedExperts(std::span<const ExpertMlp> experts) {
  if (experts.empty()) fail("grouped_expert_forward: no experts");
  std::vector<kernels::MlpWeightsView> views;
  for (const auto& m : experts) {
    if (m.activation != experts[0].activation || m.dim() != experts[0].dim() || m.hidden() != experts[0].hidden())
      fail("grouped_expert_forward: experts differ in activation or shape");
    views.push_back(mlp_view(m));
  }
  impl_ = std::make_unique<Impl>(std::move(views), experts[0].activation, experts[0].dim(), experts[0].hidden(),
                                 false);
}

GroupedExperts::GroupedExperts(const Tensor& up_w, const Tensor& down_w, const Tensor* gate_w,
                               MlpActivation activation) {
  if (up_w.rank() != 3) fail("up_w must be (E, dim, hidden), got ", shape_to_string(up_w.shape()));
  const int64_t E = up_w.dim(0), D = up_w.dim(1), H = up_w.dim(2);
  if (E == 0) fail("grouped_expert_forward_packed: no experts");
  if (down_w.shape() != Shape{E, H, D})
    fail("down_w has shape ", shape_to_string(down_w.shape()), ", expected ", shape_to_string({E, H, D}));
  const bool gated = activation == MlpActivation::kSwiGLU;
  if (gated != (gate_w != nullptr)) fail("gate_w must be given exactly when the activation is SwiGLU");
  if (gate_w && gate_w->shape() != up_w.shape())
    fail("gate_w has shape ", shape_to_string(gate_w->shape()), ", expected ", shape_to_string(up_w.shape()));
  std::vector<kernels::MlpWeightsView> views;
  for (int64_t e = 0; e < E; ++e) views.push_back(packed_view(up_w, down_w, gate_w, e));
  impl_ = std::make_unique<Impl>(std::move(views), activation, D, H, true);
}

GroupedExperts::GroupedExperts(GroupedExperts&&) noexcept = default;
GroupedExperts& GroupedExperts::operator=(GroupedExperts&&) noexcept = default;
GroupedExperts::~GroupedExperts() = default;

int64_t GroupedExperts::num_experts() const { return impl_->shape.num_groups; }

Tensor GroupedExperts::forward(const Tensor& x_sorted, std::span<const int64_t> tokens_per_expert, Saved* saved,
                               const float* row_scale) const {
  if (x_sorted.rank() != 2) fail("x_sorted must be (rows, dim), got ", shape_to_string(x_sorted.shape()));
  if (static_cast<int64_t>(tokens_per_expert.size()) != num_experts())
    fail("grouped_expert_forward: ", tokens_per_expert.size(), " token counts for ", num_experts(), " experts");
  if (x_sorted.dim(1) != impl_->shape.dim)
    fail("grouped_expert_forward: x_sorted has ", x_sorted.dim(1), " features, experts expect ", impl_->shape.dim);
  const int64_t rows = x_sorted.dim(0), dim = x_sorted.dim(1), hidden = impl_->shape.hidden;
  auto offsets = offsets_from_counts(tokens_per_expert, rows);
  Tensor y(Shape{rows, dim});
  kernels::GroupedFfnArgs args;
  if (saved) {
    saved->x = x_sorted;
    saved->up.assign(static_cast<size_t>(rows * hidden), 0.0f);
    saved->gate.assign(impl_->gated ? static_cast<size_t>(rows * hidden) : 0, 0.0f);
    args.saved_up = saved->up.data();
    args.saved_gate = impl_->gated ? saved->gate.data() : nullptr;
    if (row_scale) saved->scale.assign(row_scale, row_scale + rows);
    else saved->scale.clear();
  }
  if (rows > 0) {
    args.offsets = offsets.data();
    args.x = x_sorted.data();
    args.scale = row_scale;
    args.y = y.data();
    impl_->ffn->run(args);
  }
  if (saved) saved->offsets = std::move(offsets);
  return y;
}

void GroupedExperts::forward(const float* x, int64_t x_count, std::span<const int64_t> x_rows,
                             std::span<const int64_t> tokens_per_expert, float* y, const float* row_scale) const {
  if (static_cast<int64_t>(tokens_per_expert.size()) != num_experts())
    fail("grouped_expert_forward: ", tokens_per_expert.size(), " token counts for ", num_experts(), " experts");
  const int64_t rows = static_cast<int64_t>(x_rows.size());
  for (int64_t r = 0; r < rows; ++r)
    if (x_rows[static_cast<size_t>(r)] < 0 || x_rows[static_cast<size_t>(r)] >= x_count)
      fail("grouped_expert_forward: x_rows[", r, "] = ", x_rows[static_cast<size_t>(r)], " is outside [0, ", x_count,
           ")");
  const auto offsets = offsets_from_counts(tokens_per_expert, rows);
  if (rows == 0) return;
  kernels::GroupedFfnArgs args;
  args.offsets = offsets.data();
  args.x = x;
  args.x_rows = x_rows.data();
  args.scale = row_scale;
  args.y = y;
  impl_->ffn->run(args);
}

GroupedExperts::Gradients GroupedExperts::backward(const Saved& saved, const Tensor& grad_y) const {
  Gradients g;
  backward(saved, grad_y, g);
  return g;
}

void GroupedExperts::backward(const Saved& saved, const Tensor& grad_y, Gradients& g) const {
  const Impl& m = *impl_;
  const int64_t E = m.shape.num_groups, D = m.shape.dim, H = m.shape.hidden;
  if (static_cast<int64_t>(saved.offsets.size()) != E + 1 || saved.x.rank() != 2 || saved.x.dim(1) != D)
    fail("GroupedExperts::backward: the saved state is not of a forward of these experts");
  const int64_t rows = saved.x.dim(0);
  if (!saved.scale.empty() && static_cast<int64_t>(saved.scale.size()) != rows)
    fail("GroupedExperts::backward: the saved state has ", saved.scale.size(), " row scales for ", rows, " rows");
  if (grad_y.shape() != Shape{rows, D})
    fail("GroupedExperts::backward: grad_y has shape ", shape_to_string(grad_y.shape()), ", expected ",
         shape_to_string({rows, D}));
  // The weight gradients' shapes, in the order the experts were built from.
  std::vector<Shape> shapes;
  if (m.packed) {  // up_w, down_w, gate_w: (E, D, H), (E, H, D), (E, D, H)
    shapes = {Shape{E, D, H}, Shape{E, H, D}};
    if (m.gated) shapes.push_back(Shape{E, D, H});
  } else {  // per expert: gate (H, D) for SwiGLU, up (H, D), down (D, H)
    for (int64_t e = 0; e < E; ++e) {
      if (m.gated) shapes.push_back(Shape{H, D});
      shapes.push_back(Shape{H, D});
      shapes.push_back(Shape{D, H});
    }
  }
  bool fresh = g.weights.size() != shapes.size() || g.zero.size() != static_cast<size_t>(E);
  for (size_t i = 0; !fresh && i < shapes.size(); ++i) fresh = g.weights[i].shape() != shapes[i];
  if (fresh) {  // new tensors are zeros
    g.weights.clear();
    for (const Shape& s : shapes) g.weights.emplace_back(s);
    g.zero.assign(static_cast<size_t>(E), 1);
  }
  g.grad_x = Tensor(Shape{rows, D});
  g.grad_scale.assign(saved.scale.empty() ? 0 : static_cast<size_t>(rows), 0.0f);
  // Per expert: its storage, or null for an expert without rows whose gradients are zeros already (the kernels
  // leave it; for one without rows otherwise they write zeros).
  std::vector<float*> gate(static_cast<size_t>(E)), up(static_cast<size_t>(E)), down(static_cast<size_t>(E));
  const auto used = [&](int64_t e) {
    return saved.offsets[static_cast<size_t>(e + 1)] > saved.offsets[static_cast<size_t>(e)];
  };
  const int64_t per = m.gated ? 3 : 2;
  for (int64_t e = 0; e < E; ++e) {
    const bool skip = !used(e) && g.zero[static_cast<size_t>(e)];
    const auto at = [&](Tensor& t, int64_t slice) { return skip ? nullptr : t.data() + slice; };
    if (m.packed) {
      up[static_cast<size_t>(e)] = at(g.weights[0], e * D * H);
      down[static_cast<size_t>(e)] = at(g.weights[1], e * H * D);
      gate[static_cast<size_t>(e)] = m.gated ? at(g.weights[2], e * D * H) : nullptr;
    } else {
      Tensor* w = g.weights.data() + e * per;
      gate[static_cast<size_t>(e)] = m.gated ? at(w[0], 0) : nullptr;
      up[static_cast<size_t>(e)] = at(w[per - 2], 0);
      down[static_cast<size_t>(e)] = at(w[per - 1], 0);
    }
  }
  if (rows == 0) {  // no kernel runs: the experts whose buffers were written before are cleared here
    for (int64_t e = 0; e < E; ++e)
      for (float* p : {gate[static_cast<size_t>(e)], up[static_cast<size_t>(e)], down[static_cast<size_t>(e)]})
        if (p) std::fill(p, p + D * H, 0.0f);
  } else {
    GroupedMlpBackwardArgs a;
    a.shape = m.shape;
    a.offsets = saved.offsets.data();
    a.weights = m.views.data();
    a.x = saved.x.data();
    a.saved_gate = m.gated ? saved.gate.data() : nullptr;
    a.saved_up = saved.up.data();
    a.scale = saved.scale.empty() ? nullptr : saved.scale.data();
    a.grad_y = grad_y.data();
    a.grad_x = g.grad_x.data();
    a.grad_scale = saved.scale.empty() ? nullptr : g.grad_scale.data();
    a.grad_gate = m.gated ? gate.data() : nullptr;
    a.grad_up = up.data();
    a.grad_down = down.data();
    // Cleared first, so that a backward failing part-way leaves no expert marked zero wrongly.
    std::fill(g.zero.begin(), g.zero.end(), 0);
    grouped_mlp_backward(a);
  }
  for (int64_t e = 0; e < E; ++e) g.zero[static_cast<size_t>(e)] = !used(e);
}

Tensor grouped_expert_forward(const Tensor& x_sorted, std::span<const int64_t> tokens_per_expert,
                              std::span<const ExpertMlp> experts) {
  if (tokens_per_expert.size() != experts.size())
    fail("grouped_expert_forward: ", tokens_per_expert.size(), " token counts for ", experts.size(), " experts");
  return GroupedExperts(experts).forward(x_sorted, tokens_per_expert);
}

Tensor grouped_expert_forward_packed(const Tensor& x_sorted, std::span<const int64_t> tokens_per_expert,
                                     const Tensor& up_w, const Tensor& down_w, const Tensor* gate_w,
                                     MlpActivation activation) {
  if (up_w.rank() == 3 && static_cast<int64_t>(tokens_per_expert.size()) != up_w.dim(0))
    fail("grouped_expert_forward_packed: ", tokens_per_expert.size(), " token counts for ", up_w.dim(0), " experts");
  return GroupedExperts(up_w, down_w, gate_w, activation).forward(x_sorted, tokens_per_expert);
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
