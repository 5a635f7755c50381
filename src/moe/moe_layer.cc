// MoELayer: the one place the forward pass is orchestrated —
//   route -> capacity -> count -> scan/gather (dispatch) -> grouped expert MLP (gate/up, activation, down,
//   row scale) -> weighted combine -> + shared expert.
// Weight storage (per-expert nn.Linear or packed (E, in, out)) and the kernel implementation plug in below
// this orchestration; neither changes it.
#include <algorithm>
#include <cmath>

#include "hymoe/error.h"
#include "hymoe/moe.h"
#include "moe/dispatch.h"
#include "moe/expert_views.h"

namespace hymoe {

struct MoELayer::Impl {
  MlpActivation activation = MlpActivation::kSwiGLU;
  std::vector<ExpertMlp> experts;  // unpacked storage
  Tensor up_w, gate_w, down_w;     // packed storage: (E, D, H), (E, D, H), (E, H, D)
  bool has_shared = false;
  ExpertMlp shared;
  // Kernels prepared from the current weights; rebuilt after any non-const access to the weights.
  std::unique_ptr<kernels::GroupedFfn> routed_ffn, shared_ffn;
  bool weights_dirty = true;
};

namespace {

MlpActivation activation_of(const ExpertMlp& m) { return m.activation; }

// Capacity (train and eval): for each top-k slot separately, the first `cap` tokens (token order) choosing an
// expert keep their weight; later ones are dropped. No re-routing, no renormalization.
void apply_capacity(const MoEConfig& c, Routing& r) {
  r.weights = r.router_weights;
  r.dropped.assign(r.router_weights.size(), 0);
  if (c.capacity_factor <= 0) return;
  const int64_t T = r.num_tokens, K = r.top_k, E = r.num_experts;
  const double cap_real = static_cast<double>(T * K) / static_cast<double>(E) * c.capacity_factor;
  const int64_t cap = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(cap_real)));
  std::vector<int64_t> seen(static_cast<size_t>(E));
  for (int64_t k = 0; k < K; ++k) {
    std::fill(seen.begin(), seen.end(), 0);
    for (int64_t t = 0; t < T; ++t) {
      const size_t i = static_cast<size_t>(t * K + k);
      if (++seen[static_cast<size_t>(r.indices[i])] > cap) {
        r.weights[i] = 0.0f;
        r.dropped[i] = 1;
      }
    }
  }
}

void check_finite(const Tensor& x, const char* what) {
  for (int64_t i = 0; i < x.numel(); ++i)
    if (!std::isfinite(x[i])) fail(what, " has a non-finite value ", x[i], " at flat index ", i);
}

}  // namespace

MoELayer::MoELayer(const MoEConfig& config) : config_(config), impl_(std::make_unique<Impl>()) {
  config_.validate();
  router_ = make_router(config_);
  const std::string mlp_name = mlp_name_for_activation(config_.activation);
  const int64_t E = config_.num_experts, D = config_.dim, H = config_.hidden_dim;
  const ExpertMlp prototype = make_mlp(mlp_name, D, H);
  impl_->activation = activation_of(prototype);
  if (config_.packed_experts) {
    impl_->up_w = Tensor(Shape{E, D, H});
    impl_->down_w = Tensor(Shape{E, H, D});
    if (impl_->activation == MlpActivation::kSwiGLU) impl_->gate_w = Tensor(Shape{E, D, H});
  } else {
    impl_->experts.assign(static_cast<size_t>(E), prototype);
  }
  if (config_.shared_experts > 0) {
    impl_->has_shared = true;
    impl_->shared = prototype;
  }
}

MoELayer::~MoELayer() = default;
MoELayer::MoELayer(MoELayer&&) noexcept = default;
MoELayer& MoELayer::operator=(MoELayer&&) noexcept = default;

std::vector<std::pair<std::string, Tensor*>> MoELayer::named_tensors() {
  impl_->weights_dirty = true;
  std::vector<std::pair<std::string, Tensor*>> out;
  for (auto& [name, t] : router_->named_tensors()) out.emplace_back("router." + name, t);
  if (config_.packed_experts) {
    out.emplace_back("up_w", &impl_->up_w);
    out.emplace_back("down_w", &impl_->down_w);
    if (impl_->activation == MlpActivation::kSwiGLU) out.emplace_back("gate_w", &impl_->gate_w);
  } else {
    for (size_t e = 0; e < impl_->experts.size(); ++e)
      for (auto& [name, t] : impl_->experts[e].named_tensors())
        out.emplace_back("experts." + std::to_string(e) + "." + name, t);
  }
  if (impl_->has_shared)
    for (auto& [name, t] : impl_->shared.named_tensors()) out.emplace_back("shared_expert." + name, t);
  return out;
}

void MoELayer::load(const SafetensorsFile& file, const std::string& prefix) {
  auto targets = named_tensors();
  // Read everything first so a failure leaves the layer as it was.
  std::vector<Tensor> loaded;
  loaded.reserve(targets.size());
  for (auto& [name, t] : targets) {
    Tensor v = file.read_f32(prefix + name, t->shape());
    check_finite(v, (file.label() + ": tensor '" + prefix + name + "'").c_str());
    loaded.push_back(std::move(v));
  }
  for (size_t i = 0; i < targets.size(); ++i) *targets[i].second = std::move(loaded[i]);
}

void MoELayer::save(SafetensorsWriter& writer, const std::string& prefix) const {
  for (auto& [name, t] : const_cast<MoELayer*>(this)->named_tensors()) writer.add(prefix + name, *t);
}

void MoELayer::init_random(Rng& rng) {
  const int64_t E = config_.num_experts;
  for (auto& [name, t] : named_tensors()) {
    if (name == "router.expert_bias") {
      std::fill(t->values().begin(), t->values().end(), 0.0f);
    } else if (name == "router.expert_ema") {
      std::fill(t->values().begin(), t->values().end(), 1.0f / static_cast<float>(E));
    } else {
      // nn.Linear stores (out, in) and packed tensors (E, in, out): the fan-in is dimension 1 either way.
      const int64_t fan_in = t->dim(1);
      const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
      for (float& v : t->values()) v = static_cast<float>(-bound + 2.0 * bound * rng.uniform());  // in place
    }
  }
}

int64_t MoELayer::expert_weight_bytes() const {
  const int64_t per_mlp = (impl_->activation == MlpActivation::kSwiGLU ? 3 : 2) * config_.dim * config_.hidden_dim;
  return (config_.num_experts + (impl_->has_shared ? 1 : 0)) * per_mlp * static_cast<int64_t>(sizeof(float));
}

Tensor MoELayer::forward(const Tensor& x, Mode mode, int64_t step, int64_t max_steps) {
  if (x.rank() != 3 || x.dim(2) != config_.dim)
    fail("forward: x must be (batch, seq_len, dim=", config_.dim, "), got ", shape_to_string(x.shape()));
  const int64_t T = x.dim(0) * x.dim(1), D = config_.dim, E = config_.num_experts, K = config_.top_k;
  if (T == 0) fail("forward: x ", shape_to_string(x.shape()), " has no tokens");
  check_finite(x, "forward: input x");
  const Tensor x2 = x.reshaped(Shape{T, D});

  if (impl_->weights_dirty) {
    const kernels::Activation act = to_kernel_activation(impl_->activation);
    std::vector<kernels::MlpWeightsView> views;
    for (int64_t e = 0; e < E; ++e)
      views.push_back(config_.packed_experts
                          ? packed_view(impl_->up_w, impl_->down_w,
                                        impl_->activation == MlpActivation::kSwiGLU ? &impl_->gate_w : nullptr, e)
                          : mlp_view(impl_->experts[static_cast<size_t>(e)]));
    impl_->routed_ffn = kernels::make_grouped_ffn({E, D, config_.hidden_dim, act}, views);
    if (impl_->has_shared) {
      const kernels::MlpWeightsView shared = mlp_view(impl_->shared);
      impl_->shared_ffn = kernels::make_grouped_ffn({1, D, config_.hidden_dim, act}, {&shared, 1});
    }
    impl_->weights_dirty = false;
  }

  // 1. Route (a stateful router updates its balancing state here, after selecting).
  router_->set_step(step, max_steps);
  Routing routing = router_->route(x2, mode);
  // 2. Capacity.
  apply_capacity(config_, routing);
  // 3. Count, scan, gather: the ragged batch.
  const Dispatch dispatch = build_dispatch(routing);
  const std::vector<float> x_sorted = gather_rows(x2.data(), D, dispatch);
  // 4. Per-row output scale: routing weight x (train-mode gradient_scale) load scale of the row's expert.
  std::vector<float> row_scale(static_cast<size_t>(dispatch.rows()));
  const bool load_scale = mode == Mode::kTrain && config_.gradient_scale;
  const float avg_tokens = static_cast<float>(static_cast<double>(T * K) / static_cast<double>(E));
  for (int64_t r = 0; r < dispatch.rows(); ++r) {
    const size_t a = static_cast<size_t>(dispatch.row_token[static_cast<size_t>(r)] * K + dispatch.row_slot[static_cast<size_t>(r)]);
    float s = routing.weights[a];
    if (load_scale) s *= avg_tokens / std::max(routing.expert_counts[routing.indices[a]], 1.0f);
    row_scale[static_cast<size_t>(r)] = s;
  }
  // 5. Grouped expert MLPs over exactly the routed rows.
  std::vector<float> expert_out(x_sorted.size());
  if (dispatch.rows() > 0) {
    kernels::GroupedFfnArgs args;
    args.offsets = dispatch.offsets.data();
    args.x = x_sorted.data();
    args.scale = row_scale.data();
    args.y = expert_out.data();
    impl_->routed_ffn->run(args);
  }
  // 6. Weighted combine back to token order, 7. plus the shared expert.
  Tensor y(x.shape());
  combine_rows(expert_out.data(), D, dispatch, T, K, y.data());
  if (impl_->has_shared) {
    std::vector<float> shared_out(static_cast<size_t>(T * D));
    const int64_t offsets[2] = {0, T};
    kernels::GroupedFfnArgs args;
    args.offsets = offsets;
    args.x = x2.data();
    args.y = shared_out.data();
    impl_->shared_ffn->run(args);
    for (int64_t i = 0; i < T * D; ++i) y[i] += shared_out[static_cast<size_t>(i)];
  }
  routing_ = std::move(routing);
  return y;
}

std::unique_ptr<MoELayer> build_moe(const MoEConfig& config) { return std::make_unique<MoELayer>(config); }

}  // namespace hymoe
