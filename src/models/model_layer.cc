// ModelMoELayer: a released checkpoint's MoE layer. Loading reads only the layer's tensors, hands them to the
// grouped kernels (which pack them once at their stored precision) and keeps nothing else of the checkpoint.
// The forward routes with the family's RouterOptions, then runs the same expert pass as MoELayer.
#include <cmath>

#include "hymoe/error.h"
#include "hymoe/model.h"
#include "kernels/ffn/grouped_ffn.h"
#include "models/expert_loader.h"
#include "models/model_router.h"
#include "moe/dispatch.h"
#include "moe/expert_pass.h"

namespace hymoe {

struct ModelMoELayer::Impl {
  ModelRouterWeights router;
  std::vector<float> shared_gate;  // (D) Qwen2-MoE's shared_expert_gate, or empty
  std::vector<float> output_bias, output_norm;  // (D) each, or empty
  std::unique_ptr<kernels::GroupedFfn> routed_ffn, shared_ffn;
  int64_t resident_bytes = 0;
};

ModelMoELayer::ModelMoELayer(MoELayerSpec spec, std::unique_ptr<Impl> impl) : spec_(std::move(spec)), impl_(std::move(impl)) {}
ModelMoELayer::~ModelMoELayer() = default;
ModelMoELayer::ModelMoELayer(ModelMoELayer&&) noexcept = default;

int64_t ModelMoELayer::resident_weight_bytes() const { return impl_->resident_bytes; }

namespace {

int64_t bias_bytes(const ExpertWeights& w) {
  int64_t n = 0;
  for (const auto& v : w.views) n += (v.gate_bias ? 2 * v.up.n : 0) + (v.down_bias ? v.down.n : 0);
  return n * static_cast<int64_t>(sizeof(float));
}

// What the kernels hold for the experts: their packed copy where they report one (the quantized formats keep
// about 1.03 (fp8) or 0.53 (mxfp4) bytes a weight), else the elements at the loaded dtype.
int64_t held_bytes(const kernels::GroupedFfn& ffn, const ExpertWeights& w) {
  const int64_t packed = ffn.weight_bytes();
  return packed > 0 ? packed : w.weight_elements * dtype_size(w.dtype) + bias_bytes(w);
}

}  // namespace

ModelMoELayer ModelMoELayer::load(const TensorSource& source, const MoELayerSpec& spec, const Quantization& quant) {
  auto impl = std::make_unique<Impl>();
  const int64_t E = spec.num_experts + spec.zero_experts, D = spec.dim;  // router rows
  const std::string router_why = "num_experts=" + std::to_string(spec.num_experts) +
                                 (spec.zero_experts ? " + zero_experts=" + std::to_string(spec.zero_experts) : "") +
                                 ", hidden_size=" + std::to_string(D);
  impl->router.weight = Tensor(Shape{E, D}, load_f32(source, spec.router_weight, {E, D}, router_why));
  if (spec.router.logit_bias) impl->router.logit_bias = load_f32(source, spec.router_bias, {E}, router_why);
  if (spec.router.selection_bias && spec.selection_bias_optional && !source.contains(spec.selection_bias)) {
    impl->router.selection_bias.assign(static_cast<size_t>(E), 0.0f);
  } else if (spec.router.selection_bias) {
    // (E), or (1, E) as ERNIE-4.5's moe_statics stores it.
    const bool row = source.tensor(spec.selection_bias).shape == Shape{1, E};
    impl->router.selection_bias = load_f32(source, spec.selection_bias, row ? Shape{1, E} : Shape{E}, router_why);
  }
  const std::string output_why = "hidden_size=" + std::to_string(D);
  if (!spec.output_bias.empty()) impl->output_bias = load_f32(source, spec.output_bias, {D}, output_why);
  if (!spec.output_norm.empty()) impl->output_norm = load_f32(source, spec.output_norm, {D}, output_why);
  for (float f : impl->router.weight.values())
    if (!std::isfinite(f)) fail(source.label(), ": tensor '", spec.router_weight, "' has a non-finite value");
  int64_t bytes = static_cast<int64_t>((impl->router.weight.numel() + impl->router.logit_bias.size() +
                                        impl->router.selection_bias.size() + impl->output_bias.size() +
                                        impl->output_norm.size()) * sizeof(float));
  {
    const ExpertWeights routed = load_routed_experts(source, spec, quant);
    impl->routed_ffn = make_expert_ffn(spec, routed.views, spec.hidden);
    bytes += held_bytes(*impl->routed_ffn, routed);
  }
  if (spec.shared.hidden > 0) {
    const ExpertWeights shared = load_shared_expert(source, spec, quant);
    impl->shared_ffn = make_shared_expert_ffn(spec, shared.views);
    bytes += held_bytes(*impl->shared_ffn, shared);
    impl->shared_gate = load_shared_gate(source, spec);
    bytes += static_cast<int64_t>(impl->shared_gate.size() * sizeof(float));
  }
  impl->resident_bytes = bytes;
  return ModelMoELayer(spec, std::move(impl));
}

Tensor ModelMoELayer::forward(const Tensor& x) {
  const int64_t D = spec_.dim, K = spec_.top_k;
  if ((x.rank() != 2 && x.rank() != 3) || x.dim(x.rank() - 1) != D)
    fail("forward: x must be (batch, seq_len, hidden_size=", D, ") or (tokens, hidden_size=", D, "), got ",
         shape_to_string(x.shape()));
  const int64_t T = x.numel() / D;
  if (T == 0) fail("forward: x ", shape_to_string(x.shape()), " has no tokens");
  for (int64_t i = 0; i < x.numel(); ++i)
    if (!std::isfinite(x[i])) fail("forward: input x has a non-finite value ", x[i], " at flat index ", i);
  const Tensor x2 = x.reshaped(Shape{T, D});

  Routing routing = route_model_tokens(spec_.router, impl_->router, x2, K);
  // Zero-computation experts (rows >= num_experts) run no expert: they leave the dispatch and add w x below.
  const bool identities = spec_.zero_experts > 0;
  Routing experts_only;
  if (identities) {
    experts_only.num_tokens = routing.num_tokens;
    experts_only.top_k = K;
    experts_only.num_experts = spec_.num_experts;
    experts_only.indices = routing.indices;
    experts_only.dropped = routing.dropped;
    for (size_t i = 0; i < experts_only.indices.size(); ++i)
      if (experts_only.indices[i] >= spec_.num_experts) experts_only.dropped[i] = 1;
  }
  const Dispatch dispatch = build_dispatch(identities ? experts_only : routing);
  std::vector<float> row_scale(static_cast<size_t>(dispatch.rows()));
  gather_row_weights(dispatch, routing.weights.data(), K, row_scale.data());
  // Qwen2-MoE's shared expert is scaled per token by sigmoid(shared_expert_gate . x).
  std::vector<float> shared_scale;
  if (!impl_->shared_gate.empty()) {
    shared_scale.resize(static_cast<size_t>(T));
    shared_gate_scales(impl_->shared_gate, x2.data(), T, shared_scale.data());
  }
  Tensor y(x.shape());
  ExpertPassArgs pass;
  pass.routed = impl_->routed_ffn.get();
  pass.shared = impl_->shared_ffn.get();
  pass.x = x2.data();
  pass.num_tokens = T;
  pass.top_k = K;
  pass.dispatch = &dispatch;
  (spec_.router.scale_input ? pass.input_scale : pass.row_scale) = row_scale.data();
  pass.shared_token_scale = shared_scale.empty() ? nullptr : shared_scale.data();
  pass.shared_average = spec_.shared.average && pass.shared;
  pass.y = y.data();
  run_expert_pass(pass);
  if (identities)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t k = 0; k < K; ++k) {
        const size_t i = static_cast<size_t>(t * K + k);
        if (routing.indices[i] < spec_.num_experts) continue;
        const float w = routing.weights[i];
        for (int64_t d = 0; d < D; ++d) y.data()[t * D + d] += w * x2.data()[t * D + d];
      }
  // The block's own output stage: JetMoE adds a bias, A.X K1 an RMSNorm (in double, rounded once).
  float* out = y.data();
  if (!impl_->output_bias.empty())
    for (int64_t t = 0; t < T; ++t)
      for (int64_t d = 0; d < D; ++d) out[t * D + d] += impl_->output_bias[static_cast<size_t>(d)];
  if (!impl_->output_norm.empty())
    for (int64_t t = 0; t < T; ++t) {
      float* row = out + t * D;
      double sq = 0.0;
      for (int64_t d = 0; d < D; ++d) sq += static_cast<double>(row[d]) * row[d];
      const double inv = 1.0 / std::sqrt(sq / static_cast<double>(D) + spec_.output_norm_eps);
      for (int64_t d = 0; d < D; ++d)
        row[d] = static_cast<float>(impl_->output_norm[static_cast<size_t>(d)] * (row[d] * inv));
    }
  routing_ = std::move(routing);
  return y;
}

}  // namespace hymoe
