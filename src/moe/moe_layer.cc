// MoELayer: the one place the forward pass is orchestrated —
//   route -> capacity -> count -> scan/gather (dispatch) -> grouped expert MLP (gate/up, activation, down,
//   row scale) -> weighted combine -> + shared expert.
// Weight storage (per-expert nn.Linear or packed (E, in, out)) and the kernel implementation plug in below
// this orchestration; neither changes it. The backward pass runs the same stages in reverse, from what a
// train-mode forward saved (docs/training.md lists it and its bytes per token).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string_view>

#include "hymoe/error.h"
#include "hymoe/moe.h"
#include "kernels/driver/workspace.h"
#include "moe/dispatch.h"
#include "moe/expert_backward.h"
#include "moe/expert_pass.h"
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

  // What a train-mode forward keeps for the backward; released by an eval forward. The routing itself (logits,
  // scores, choices, weights, counts) lives in MoELayer::routing_, which every forward keeps.
  struct Saved {
    bool valid = false;
    Shape x_shape;
    Tensor x;                                    // (T, D) the input: router and weight gradients need it
    Dispatch dispatch;                           // the ragged batch: offsets, row -> (token, slot), positions
    std::vector<float> row_scale;                // (R) routing weight x load scale per row
    std::vector<float> gate, up;                 // (R, H) routed pre-activations (gate only for SwiGLU)
    std::vector<float> shared_gate, shared_up;   // (T, H) shared expert pre-activations
  } saved;
  std::vector<std::pair<std::string, Tensor>> grads;  // named_parameters() order
  // Per routed expert: its gradients in `grads` are all zero (an idle expert's are then not rewritten).
  std::vector<bool> expert_grads_zero;

  std::vector<kernels::MlpWeightsView> routed_views(int64_t num_experts) const {
    std::vector<kernels::MlpWeightsView> views;
    for (int64_t e = 0; e < num_experts; ++e)
      views.push_back(!experts.empty() ? mlp_view(experts[static_cast<size_t>(e)])
                                       : packed_view(up_w, down_w, activation == MlpActivation::kSwiGLU ? &gate_w : nullptr, e));
    return views;
  }
};

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

namespace {

// gradient_scale (train only): each routed output row of expert e is multiplied by (T*K/E) / max(count_e, 1),
// count_e including capacity drops.
float expert_load_scale(const MoEConfig& c, const Routing& r, Mode mode, int64_t e) {
  if (mode != Mode::kTrain || !c.gradient_scale) return 1.0f;
  const float avg_tokens = static_cast<float>(static_cast<double>(r.num_tokens * r.top_k) / static_cast<double>(r.num_experts));
  return avg_tokens / std::max(r.expert_counts[e], 1.0f);
}

template <typename T>
int64_t vector_bytes(const std::vector<T>& v) {
  return static_cast<int64_t>(v.size() * sizeof(T));
}

void check_finite(const Tensor& x, const char* what) {
  for (int64_t i = 0; i < x.numel(); ++i)
    if (!std::isfinite(x[i])) fail(what, " has a non-finite value ", x[i], " at flat index ", i);
}

// A stage's result checked as the inputs are: finite inputs can still overflow float32 on the way (x = 1e30 gives
// 1e60 in the expert MLP's product), and a NaN output returned as a success would hide it. The message names the
// first stage where a non-finite value appeared, its position, and the largest input magnitude as the likely cause.
void check_stage_finite(const char* pass, const char* stage, const float* v, int64_t n, int64_t row_len,
                        const char* row_name, const Tensor& input, const char* input_name) {
  for (int64_t i = 0; i < n; ++i) {
    if (std::isfinite(v[i])) continue;
    float largest = 0.0f;
    for (float u : input.values()) largest = std::max(largest, std::abs(u));
    const std::string at = row_name ? detail::concat(" at ", row_name, " ", i / row_len, ", column ", i % row_len) : "";
    fail(pass, ": a non-finite value ", v[i], " appeared in the ", stage, at,
         " although every input is finite: float32 overflowed in this stage (largest |", input_name, "| is ", largest,
         "; scale the ", input_name, " or the weights down)");
  }
}

}  // namespace

MoELayer::MoELayer(const MoEConfig& config) : config_(config), impl_(std::make_unique<Impl>()) {
  config_.validate();
  // Before the first allocation: a configuration the machine cannot hold is a named error, not a std::bad_alloc.
  require_physical_memory(estimate_moe_memory(config_, 0, Mode::kEval).weight_bytes,
                          "a MoE layer of " + moe_size_fields(config_) + " (f32 weights and packed copies)");
  router_ = make_router(config_);
  const std::string mlp_name = mlp_name_for_activation(config_.activation);
  const int64_t E = config_.num_experts, D = config_.dim, H = config_.hidden_dim;
  const ExpertMlp prototype = make_mlp(mlp_name, D, H);
  impl_->activation = prototype.activation;
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
  return collect_tensors(false);
}

std::vector<std::pair<std::string, Tensor*>> MoELayer::named_parameters() {
  impl_->weights_dirty = true;
  return collect_tensors(true);
}

void MoELayer::allocate_gradients() const {
  if (!impl_->grads.empty()) return;
  for (auto& [name, t] : collect_tensors(true)) impl_->grads.emplace_back(name, Tensor(t->shape()));
  impl_->expert_grads_zero.assign(static_cast<size_t>(config_.num_experts), true);
}

std::vector<std::pair<std::string, const Tensor*>> MoELayer::named_gradients() const {
  allocate_gradients();
  std::vector<std::pair<std::string, const Tensor*>> out;
  for (auto& [name, t] : impl_->grads) out.emplace_back(name, &t);
  return out;
}

int64_t MoELayer::saved_for_backward_bytes() const {
  const auto& s = impl_->saved;
  if (!s.valid) return 0;
  const Routing& r = routing_;
  const Dispatch& d = s.dispatch;
  return static_cast<int64_t>(s.x.numel() * sizeof(float)) + vector_bytes(d.offsets) + vector_bytes(d.row_token) +
         vector_bytes(d.row_slot) + vector_bytes(d.position) + vector_bytes(s.row_scale) + vector_bytes(s.gate) +
         vector_bytes(s.up) + vector_bytes(s.shared_gate) + vector_bytes(s.shared_up) + vector_bytes(r.indices) +
         vector_bytes(r.router_weights) + vector_bytes(r.weights) + vector_bytes(r.dropped) + vector_bytes(r.logits) +
         vector_bytes(r.scores) + static_cast<int64_t>(r.expert_counts.numel() * sizeof(float));
}

std::vector<std::pair<std::string, Tensor*>> MoELayer::collect_tensors(bool parameters_only) const {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (auto& [name, t] : parameters_only ? router_->named_parameters() : router_->named_tensors())
    out.emplace_back("router." + name, t);
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

namespace {

// "'a', 'b', 'c'", at most kMaxListed names and then how many more: a whole-model checkpoint loaded without its
// prefix would otherwise put thousands of names into one message.
std::string list_names(const std::vector<std::string>& names) {
  constexpr size_t kMaxListed = 64;
  std::string out;
  // Names come from the file: quoted and escaped, so a control character in one cannot reach the terminal.
  for (size_t i = 0; i < names.size() && i < kMaxListed; ++i) out += (i ? ", " : "") + quote_for_message(names[i]);
  if (names.size() > kMaxListed) out += detail::concat(" and ", names.size() - kMaxListed, " more");
  return out;
}

// "missing tensor 'a'", "3 missing tensors 'a', 'b', 'c'".
std::string name_list(const char* adjective, const std::vector<std::string>& names) {
  if (names.size() == 1) return detail::concat(adjective, " tensor ", list_names(names));
  return detail::concat(names.size(), " ", adjective, " tensors ", list_names(names));
}

}  // namespace

void MoELayer::load(const SafetensorsFile& file, const std::string& prefix) {
  auto targets = named_tensors();
  // Strict, as PyTorch's load_state_dict(strict=True): every tensor under the prefix must be one the configuration
  // uses and every one it uses must be there. A tensor the configuration ignores (a shared expert with
  // shared_experts 0, a gate_proj under GELU, experts.4.* with four experts) means the config and the checkpoint
  // disagree, and running anyway would compute something other than the model the file came from.
  std::vector<std::string> missing, unexpected;
  std::set<std::string> wanted;
  for (const auto& [name, t] : targets) {
    wanted.insert(name);
    if (!file.contains(prefix + name)) missing.push_back(prefix + name);
  }
  for (const TensorInfo& info : file.tensors()) {
    if (info.name.compare(0, prefix.size(), prefix) != 0) continue;  // outside the layer: not ours to judge
    if (wanted.count(info.name.substr(prefix.size())) == 0) unexpected.push_back(info.name);
  }
  std::sort(unexpected.begin(), unexpected.end());
  if (!missing.empty() || !unexpected.empty()) {
    std::string what;
    if (!missing.empty()) what += name_list("missing", missing);
    if (!unexpected.empty()) what += (what.empty() ? "" : "; ") + name_list("unexpected", unexpected);
    // A checkpoint whose names hold the layer's under a longer path: say which prefix would have matched.
    std::string hint;
    if (!missing.empty() && !unexpected.empty()) {
      const std::string local = missing.front().substr(prefix.size());
      for (const std::string& u : unexpected)
        if (u.size() > local.size() && u.compare(u.size() - local.size(), local.size(), local) == 0) {
          hint = " (the prefix '" + u.substr(0, u.size() - local.size()) + "' would match '" + u + "')";
          break;
        }
    }
    const MoEConfig& c = config_;
    fail(file.label(), ": ", what, hint, "; loading is strict: the tensors under prefix '", prefix,
         "' must be exactly those of the configuration (num_experts=", c.num_experts, ", activation=", c.activation,
         ", router_type=", c.router_type, ", shared_experts=", c.shared_experts,
         ", packed_experts=", c.packed_experts ? "true" : "false", ")");
  }
  // Read everything first so a failure leaves the layer as it was.
  std::vector<Tensor> loaded;
  loaded.reserve(targets.size());
  for (auto& [name, t] : targets) {
    const TensorInfo& info = file.info(prefix + name);
    if (!dtype_is_floating(info.dtype))
      fail(file.label(), ": tensor '", info.name, "' has dtype ", dtype_name(info.dtype),
           "; weights must be floating point (F32, F16, BF16 or F64)");
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
  require_physical_memory(estimate_moe_memory(config_, T, mode).activation_bytes,
                          detail::concat("forward: the activations of ", T, " tokens of x ", shape_to_string(x.shape()),
                                         " through a layer of ", moe_size_fields(config_)));
  const Tensor x2 = x.reshaped(Shape{T, D});

  if (impl_->weights_dirty) {
    const kernels::Activation act = to_kernel_activation(impl_->activation);
    const std::vector<kernels::MlpWeightsView> views = impl_->routed_views(E);
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
  const auto check_forward = [&](const char* stage, const float* v, int64_t n, int64_t row_len, const char* row_name) {
    check_stage_finite("forward", stage, v, n, row_len, row_name, x2, "x");
  };
  // By their sizes: a registered router may leave logits and scores empty.
  const auto check_routing = [&](const char* stage, const std::vector<float>& v, int64_t row_len) {
    check_forward(stage, v.data(), static_cast<int64_t>(v.size()), row_len, "token");
  };
  check_routing("router logits", routing.logits, E);
  check_routing("router scores", routing.scores, E);
  check_routing("routing weights", routing.router_weights, K);
  check_forward("router's aux_loss", &routing.aux_loss, 1, 1, nullptr);
  check_forward("router's z_loss", &routing.z_loss, 1, 1, nullptr);
  // 2. Capacity.
  apply_capacity(config_, routing);
  // 3. Count and scan: the ragged batch. Its gather is fused into the kernel's packing of the rows (x_rows).
  const Dispatch dispatch = build_dispatch(routing);
  // 4. Per-row output scale: routing weight x (train-mode gradient_scale) load scale of the row's expert.
  std::vector<float> row_scale(static_cast<size_t>(dispatch.rows()));
  for (int64_t r = 0; r < dispatch.rows(); ++r) {
    const size_t a = static_cast<size_t>(dispatch.row_token[static_cast<size_t>(r)] * K + dispatch.row_slot[static_cast<size_t>(r)]);
    row_scale[static_cast<size_t>(r)] = routing.weights[a] * expert_load_scale(config_, routing, mode, routing.indices[a]);
  }
  // Train mode keeps the pre-activations for the backward; eval keeps nothing.
  auto& saved = impl_->saved;
  saved = {};
  const bool train = mode == Mode::kTrain;
  const bool gated = impl_->activation == MlpActivation::kSwiGLU;
  const size_t H = static_cast<size_t>(config_.hidden_dim);
  if (train) {
    saved.up.resize(static_cast<size_t>(dispatch.rows()) * H);
    if (gated) saved.gate.resize(saved.up.size());
  }
  // 5. Grouped expert MLPs over exactly the routed rows, 6. weighted combine back to token order, 7. plus the
  // shared expert.
  Tensor y(x.shape());
  ExpertPassArgs pass;
  pass.routed = impl_->routed_ffn.get();
  pass.shared = impl_->has_shared ? impl_->shared_ffn.get() : nullptr;
  pass.x = x2.data();
  pass.num_tokens = T;
  pass.top_k = K;
  pass.dispatch = &dispatch;
  pass.row_scale = row_scale.data();
  pass.y = y.data();
  if (train) {
    pass.saved_up = saved.up.data();
    pass.saved_gate = gated ? saved.gate.data() : nullptr;
    if (impl_->has_shared) {
      saved.shared_up.resize(static_cast<size_t>(T) * H);
      pass.saved_shared_up = saved.shared_up.data();
      if (gated) {
        saved.shared_gate.resize(saved.shared_up.size());
        pass.saved_shared_gate = saved.shared_gate.data();
      }
    }
  }
  pass.check_stage = check_forward;
  run_expert_pass(pass);
  if (train) {
    saved.valid = true;
    saved.x_shape = x.shape();
    saved.x = x2;
    saved.dispatch = dispatch;
    saved.row_scale = std::move(row_scale);
  }
  routing_ = std::move(routing);
  return y;
}

Tensor MoELayer::backward(const Tensor& grad_y, float aux_loss_weight, float z_loss_weight) {
  auto& s = impl_->saved;
  if (!s.valid) fail("backward: needs a train-mode forward first (none ran, or the last one was in eval mode)");
  if (grad_y.shape() != s.x_shape)
    fail("backward: grad_y has shape ", shape_to_string(grad_y.shape()), ", the forward's output had ",
         shape_to_string(s.x_shape));
  check_finite(grad_y, "backward: grad_y");
  if (!std::isfinite(aux_loss_weight) || !std::isfinite(z_loss_weight))
    fail("backward: aux_loss_weight=", aux_loss_weight, " and z_loss_weight=", z_loss_weight, " must be finite");
  const Routing& r = routing_;
  const Dispatch& d = s.dispatch;
  const int64_t T = r.num_tokens, K = r.top_k, E = r.num_experts, D = config_.dim, H = config_.hidden_dim;
  const int64_t R = d.rows();
  const bool gated = impl_->activation == MlpActivation::kSwiGLU;
  const kernels::GroupedFfnShape routed_shape{E, D, H, to_kernel_activation(impl_->activation)};

  // The gradient buffers outlive a backward, which overwrites them: allocating fresh zeroed ones the size of all
  // the weights (2.2 GB for DeepSeek-V2-Lite's layer) each time cost more than the rest of a 1-token backward.
  // Every buffer is written below, or zeroed where nothing writes it (no routed row; a router tensor its backward
  // does not return).
  allocate_gradients();
  std::map<std::string, Tensor*> grad_of;
  for (auto& [name, t] : impl_->grads) grad_of[name] = &t;
  // Gradient storage per expert, in the layout of the weights (packed: expert e's slice of the (E, ., .) tensor);
  // null for an expert that got no row and whose gradients are zero already, which the kernels then leave: at one
  // token, 58 of DeepSeek-V2-Lite's 64 experts, 2 GB not rewritten with zeros.
  const auto expert_used = [&](int64_t e) {
    return d.offsets[static_cast<size_t>(e + 1)] > d.offsets[static_cast<size_t>(e)];
  };
  auto expert_grads = [&](const char* unpacked, const char* packed, int64_t slice) {
    std::vector<float*> out;
    for (int64_t e = 0; e < E; ++e) {
      out.push_back(!expert_used(e) && impl_->expert_grads_zero[static_cast<size_t>(e)] ? nullptr
                    : config_.packed_experts ? grad_of.at(packed)->data() + e * slice
                                             : grad_of.at("experts." + std::to_string(e) + "." + unpacked)->data());
    }
    return out;
  };

  const Tensor g2 = grad_y.reshaped(Shape{T, D});
  const auto check_backward = [&](const char* stage, const float* v, int64_t n, int64_t row_len, const char* row_name) {
    check_stage_finite("backward", stage, v, n, row_len, row_name, g2, "grad_y");
  };
  // Parameter gradients chosen by name (routed experts, shared expert, router), each checked under its own name.
  const auto is_router = [](const std::string& name) { return name.starts_with("router."); };
  const auto is_shared = [](const std::string& name) { return name.starts_with("shared_expert."); };
  const auto is_routed = [&](const std::string& name) { return !is_router(name) && !is_shared(name); };
  const auto zero_gradients = [&](const auto& chosen) {
    for (auto& [name, g] : impl_->grads)
      if (chosen(name)) std::fill(g.values().begin(), g.values().end(), 0.0f);
  };
  const auto check_parameter_gradients = [&](const auto& chosen) {
    for (const auto& [name, g] : impl_->grads)
      if (chosen(name))
        check_backward(("gradients of '" + name + "'").c_str(), g.data(), g.numel(), g.rank() >= 1 ? g.dim(g.rank() - 1) : 1,
                       "row");
  };
  Tensor grad_x(Shape{T, D});
  std::vector<float> grad_weights(static_cast<size_t>(T * K), 0.0f);  // d loss / d router_weights; 0 if dropped
  // Routed experts, over exactly the kept rows of the forward's ragged batch.
  if (R > 0) {
    const std::vector<float> x_sorted = gather_rows(s.x.data(), D, d);
    const std::vector<float> g_sorted = gather_rows(g2.data(), D, d);
    std::vector<float> grad_x_sorted(static_cast<size_t>(R * D)), grad_scale(static_cast<size_t>(R));
    const std::vector<kernels::MlpWeightsView> views = impl_->routed_views(E);
    const std::vector<float*> grad_gate = gated ? expert_grads("gate_proj.weight", "gate_w", D * H) : std::vector<float*>{};
    const std::vector<float*> grad_up = expert_grads("up_proj.weight", "up_w", D * H);
    const std::vector<float*> grad_down = expert_grads("down_proj.weight", "down_w", H * D);
    GroupedMlpBackwardArgs a;
    a.shape = routed_shape;
    a.offsets = d.offsets.data();
    a.weights = views.data();
    a.x = x_sorted.data();
    a.saved_gate = gated ? s.gate.data() : nullptr;
    a.saved_up = s.up.data();
    a.scale = s.row_scale.data();
    a.grad_y = g_sorted.data();
    a.grad_x = grad_x_sorted.data();
    a.grad_scale = grad_scale.data();
    a.grad_gate = grad_gate.data();
    a.grad_up = grad_up.data();
    a.grad_down = grad_down.data();
    // Cleared before the kernels write, so that a backward failing part-way leaves no expert marked zero wrongly.
    for (int64_t e = 0; e < E; ++e)
      if (expert_used(e)) impl_->expert_grads_zero[static_cast<size_t>(e)] = false;
    grouped_mlp_backward(a);
    check_backward("routed experts' input gradients", grad_x_sorted.data(), R * D, D, "routed row");
    check_backward("routing-weight gradients of the routed rows", grad_scale.data(), R, 1, "routed row");
    // An expert that got no row has the zeros the kernels wrote, finite by construction: only the used experts'
    // gradients are scanned (at 1 token, 6 of 64).
    for (const auto& [name, g] : impl_->grads) {
      if (!is_routed(name)) continue;
      const std::string stage = "gradients of '" + name + "'";
      const int64_t row_len = g.dim(g.rank() - 1);
      if (config_.packed_experts) {  // (E, ., .): expert e's slice
        const int64_t slice = g.numel() / E;
        for (int64_t e = 0; e < E; ++e)
          if (expert_used(e))
            check_backward((stage + " of expert " + std::to_string(e)).c_str(), g.data() + e * slice, slice, row_len,
                           "row");
      } else if (expert_used(std::stoll(name.substr(std::string_view("experts.").size())))) {
        check_backward(stage.c_str(), g.data(), g.numel(), row_len, "row");
      }
    }
    // row_scale = weight x load scale, so d loss / d weight = d loss / d row_scale x load scale.
    for (int64_t row = 0; row < R; ++row) {
      const size_t i = static_cast<size_t>(d.row_token[static_cast<size_t>(row)] * K + d.row_slot[static_cast<size_t>(row)]);
      grad_weights[i] = grad_scale[static_cast<size_t>(row)] * expert_load_scale(config_, r, Mode::kTrain, r.indices[i]);
    }
    combine_rows(grad_x_sorted.data(), D, d, T, K, grad_x.data());
  } else {
    zero_gradients(is_routed);
  }
  for (int64_t e = 0; e < E; ++e)  // the kernels wrote zeros for, or left zero, every expert that got no row
    impl_->expert_grads_zero[static_cast<size_t>(e)] = !expert_used(e);
  // The shared expert: one group of all T tokens, unscaled.
  if (impl_->has_shared) {
    const kernels::MlpWeightsView view = mlp_view(impl_->shared);
    const int64_t offsets[2] = {0, T};
    float* gg = gated ? grad_of.at("shared_expert.gate_proj.weight")->data() : nullptr;
    float* gu = grad_of.at("shared_expert.up_proj.weight")->data();
    float* gd = grad_of.at("shared_expert.down_proj.weight")->data();
    std::vector<float> grad_x_shared(static_cast<size_t>(T * D));
    GroupedMlpBackwardArgs a;
    a.shape = {1, D, H, routed_shape.activation};
    a.offsets = offsets;
    a.weights = &view;
    a.x = s.x.data();
    a.saved_gate = gated ? s.shared_gate.data() : nullptr;
    a.saved_up = s.shared_up.data();
    a.grad_y = g2.data();
    a.grad_x = grad_x_shared.data();
    a.grad_gate = &gg;
    a.grad_up = &gu;
    a.grad_down = &gd;
    grouped_mlp_backward(a);
    check_backward("shared expert's input gradients", grad_x_shared.data(), T * D, D, "token");
    check_parameter_gradients(is_shared);
    for (int64_t i = 0; i < T * D; ++i) grad_x[i] += grad_x_shared[static_cast<size_t>(i)];
  }
  // The router: through the normalized top-k weights, the aux loss and the z-loss.
  RouterBackwardArgs ra;
  ra.x = &s.x;
  ra.routing = &r;
  ra.grad_weights = grad_weights.data();
  ra.aux_loss_weight = aux_loss_weight;
  ra.z_loss_weight = z_loss_weight;
  ra.grad_x = grad_x.data();
  std::set<std::string> router_written;
  for (auto& [name, g] : router_->backward(ra)) {
    Tensor* dst = grad_of.at("router." + name);
    HYMOE_CHECK(dst->shape() == g.shape(), "router gradient ", name);
    *dst = std::move(g);
    router_written.insert("router." + name);
  }
  zero_gradients([&](const std::string& name) { return is_router(name) && !router_written.contains(name); });
  check_parameter_gradients(is_router);
  check_backward("input gradients grad_x (routed + shared + router)", grad_x.data(), T * D, D, "token");
  return grad_x.reshaped(s.x_shape);
}

std::unique_ptr<MoELayer> build_moe(const MoEConfig& config) { return std::make_unique<MoELayer>(config); }

}  // namespace hymoe
