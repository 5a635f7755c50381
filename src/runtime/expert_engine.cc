// ExpertEngine: the routed experts of one layer behind an asynchronous call with explicit routing and a residency
// mask. The call is the expert half every MoE forward shares (moe/expert_pass.h) over a dispatch built from the
// caller's ids with the resident experts left out, so a row's bits are the all-CPU layer's whatever the mask.
#include "hymoe/runtime.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <functional>
#include <thread>

#include "hymoe/error.h"
#include "hymoe/ggml_type.h"
#include "hymoe/quant_encode.h"
#include "kernels/ffn/grouped_ffn.h"
#include "kernels/driver/thread_pool.h"
#include "models/expert_loader.h"
#include "moe/dispatch.h"
#include "moe/expert_pass.h"
#include "runtime/cuda_stream.h"
#include "runtime/executor.h"

namespace hymoe {

std::string engine_weight_format_name(EngineWeightFormat format) {
  switch (format) {
    case EngineWeightFormat::kStored: return "stored";
    case EngineWeightFormat::kInt8: return "int8";
    case EngineWeightFormat::kInt4: return "int4";
  }
  return "?";
}

namespace {

// Buffers a view of one expert points into while it is packed (int4 codes encoded from the caller's tensors).
struct ViewScratch {
  std::deque<std::vector<std::byte>> bytes;
};
using ExpertViewFn = std::function<kernels::MlpWeightsView(int64_t expert, ViewScratch& scratch)>;

// Id i of a call's (T, K) ids, whichever integer type they come in.
int64_t id_at(const EngineCall& c, int64_t i) {
  return c.ids_dtype == DType::kI64 ? static_cast<const int64_t*>(c.ids)[i] : static_cast<const int32_t*>(c.ids)[i];
}

// Rows of whole tasks for the conversions: any split gives the same bits.
constexpr int64_t kRowsPerTask = 32;

void check_call_dtype(DType got, std::initializer_list<DType> allowed, const char* what) {
  for (DType d : allowed)
    if (got == d) return;
  std::string names;
  for (DType d : allowed) names += (names.empty() ? "" : " or ") + std::string(dtype_name(d));
  fail("ExpertEngine: ", what, " has dtype ", dtype_name(got), "; expected ", names);
}

// A call's temporaries. Calls run one at a time on the executor thread, so every engine shares one set, grown to
// the largest call (or reservation) seen and never shrunk: a steady state allocates nothing, and a model of many
// layers holds one layer's worth of buffers, not one per layer.
struct CallScratch {
  std::vector<float> x32, y32, row_scale, shared_scale;  // (T, D), (T, D), (T*K), (T)
  std::vector<int64_t> ids64;                            // (T*K)
  Dispatch dispatch;

  void reserve(int64_t tokens, int64_t k, int64_t dim, int64_t experts) {
    auto grow = [](auto& v, int64_t n) {
      if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
    };
    auto room = [](auto& v, int64_t n) { v.reserve(static_cast<size_t>(n)); };
    grow(x32, tokens * dim);
    grow(y32, tokens * dim);
    grow(row_scale, tokens * k);
    grow(ids64, tokens * k);
    grow(shared_scale, tokens);
    room(dispatch.offsets, experts + 1);
    room(dispatch.next, experts);
    room(dispatch.row_token, tokens * k);
    room(dispatch.row_slot, tokens * k);
    room(dispatch.position, tokens * k);
  }
};

// Only the executor thread touches it.
CallScratch& executor_scratch() {
  static CallScratch* s = new CallScratch;  // never destroyed, like the executor
  return *s;
}

}  // namespace

struct ExpertEngine::Impl final : runtime::Job {
  int64_t E = 0, D = 0, H = 0;
  std::unique_ptr<kernels::GroupedFfn> routed, shared;
  std::vector<float> shared_gate;  // (D) Qwen2-MoE's sigmoid gate of the shared expert, or empty
  bool shared_average = false;     // Cohere2-MoE: (routed + shared) / 2
  bool keep_host = true;
  // What released experts are packed again from (only when keep_host is false): expert_view gives a slot's view,
  // into the model's mapped files (kept open by `model`) or into the caller's tensors.
  std::shared_ptr<const Model> model;
  ExpertViewFn expert_view;

  std::vector<uint8_t> resident;  // (E) the mask applied last
  std::vector<int64_t> counts;    // (E)

  // The batch the engine's buffers are to hold from its first call on (reserve(), max_tokens, capture sizes).
  int64_t want_tokens = 0, want_k = 0;
  EngineCall call;
  bool from_stream = false;  // ids arrive with the stream's copies: checked when the call runs
  // The stream path. Calls enqueued on streams wait in slots until their host function runs (a caller may enqueue the next layer's
  // call before the stream reaches this one's): a few slots, reused in turn.
  struct StreamSlot {
    Impl* impl = nullptr;
    EngineCall call;
    std::atomic<bool> queued{false};
  };
  static constexpr int kStreamSlots = 4;
  std::array<StreamSlot, kStreamSlots> stream_slots;
  int next_stream_slot = 0;
  std::exception_ptr stream_error;  // what went wrong on a stream's thread, rethrown by the next wait()

  // Host functions of wait_on_stream not yet finished: they hold the engine, so it must outlive them.
  std::atomic<int> stream_waits{0};

  // Waits for calls enqueued on streams to start (their host functions to run), then for the call in flight, then
  // for the streams' waits on it (so their errors are in, and nothing on a stream still refers to the engine).
  void wait_all() {
    for (const StreamSlot& slot : stream_slots)
      while (slot.queued.load(std::memory_order_acquire)) std::this_thread::yield();
    std::exception_ptr e;
    try {
      Job::wait();
    } catch (...) {
      e = std::current_exception();
    }
    while (stream_waits.load(std::memory_order_acquire) > 0) std::this_thread::yield();
    if (!e) std::swap(e, stream_error);
    stream_error = nullptr;
    if (e) std::rethrow_exception(e);
  }
  static void host_submit(void* slot_ptr) {
    auto* slot = static_cast<StreamSlot*>(slot_ptr);
    Impl* impl = slot->impl;
    try {
      impl->start(slot->call, true);
    } catch (...) {
      impl->stream_error = std::current_exception();
    }
    slot->queued.store(false, std::memory_order_release);
  }
  static void host_wait(void* self) {
    auto* impl = static_cast<Impl*>(self);
    try {
      impl->Job::wait();
    } catch (...) {
      impl->stream_error = std::current_exception();
    }
    impl->stream_waits.fetch_sub(1, std::memory_order_release);
  }

  static std::unique_ptr<Impl> make(int64_t experts, int64_t dim, int64_t hidden, const ExpertEngineOptions& options) {
    for (int64_t s : options.capture_sizes)
      if (s < 1) fail("ExpertEngine: capture size ", s, " must be >= 1");
    if (options.max_tokens < 0) fail("ExpertEngine: max_tokens=", options.max_tokens, " must be >= 0");
    auto impl = std::make_unique<Impl>();
    impl->E = experts;
    impl->D = dim;
    impl->H = hidden;
    impl->keep_host = options.keep_resident_host_copy;
    impl->resident.assign(static_cast<size_t>(experts), 0);
    impl->counts.assign(static_cast<size_t>(experts), 0);
    return impl;
  }

  void reserve(int64_t tokens, int64_t k) {
    want_tokens = std::max(want_tokens, tokens);
    want_k = std::max(want_k, k);
  }

  // Builds the routed kernels over the slots' views; `logical` gives each logical expert's view (valid while it is
  // packed). Keeps what restoring a released slot needs when the options free resident experts.
  void build_routed(const MoELayerSpec& spec, std::shared_ptr<const std::vector<kernels::MlpWeightsView>> logical,
                    const std::vector<int64_t>& slots, const ExpertEngineOptions& options);

  void apply_mask(const uint8_t* mask) {
    for (int64_t e = 0; e < E; ++e) {
      const uint8_t now = mask[e] ? 1 : 0;
      if (!keep_host) {
        if (now && !routed->group_released(e)) routed->release_group(e);
        if (!now && routed->group_released(e)) {
          ViewScratch scratch;
          routed->restore_group(e, expert_view(e, scratch));
        }
      }
      resident[static_cast<size_t>(e)] = now;
    }
  }

  void check_ids(const EngineCall& c) const {
    const int64_t n = c.num_tokens * c.top_k;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t e = id_at(c, i);
      if (e >= E)
        fail("ExpertEngine: topk_ids[", i / c.top_k, ", ", i % c.top_k, "] = ", e, " is not an expert id (",
             E, " experts; ids < 0 are skipped)");
    }
  }

  void run() override {
    const EngineCall& c = call;
    const int64_t T = c.num_tokens, K = c.top_k;
    if (from_stream) check_ids(c);
    if (c.resident) apply_mask(c.resident);
    CallScratch& scratch = executor_scratch();
    scratch.reserve(std::max(T, want_tokens), std::max(K, want_k), D, E);
    std::vector<float>&x32 = scratch.x32, &y32 = scratch.y32, &row_scale = scratch.row_scale;
    std::vector<int64_t>& ids64 = scratch.ids64;
    Dispatch& dispatch = scratch.dispatch;
    float* const shared_scale = shared && !shared_gate.empty() ? scratch.shared_scale.data() : nullptr;
    // ids as int64; counts of every routed pair, resident experts included.
    for (int64_t i = 0; i < T * K; ++i) {
      const int64_t e = id_at(c, i);
      ids64[static_cast<size_t>(i)] = e;
      if (e >= 0) ++counts[static_cast<size_t>(e)];
    }
    build_dispatch_from_ids(ids64.data(), T, K, E, resident.data(), dispatch);
    gather_row_weights(dispatch, c.weights, K, row_scale.data());

    const int64_t tasks = (T + kRowsPerTask - 1) / kRowsPerTask;
    const float* x = static_cast<const float*>(c.x);
    if (c.x_dtype == DType::kBF16) {
      const auto* xb = static_cast<const uint16_t*>(c.x);
      kernels::parallel_for(tasks, [&](int64_t task, int) {
        const int64_t end = std::min(T, (task + 1) * kRowsPerTask) * D;
        for (int64_t i = task * kRowsPerTask * D; i < end; ++i) x32[static_cast<size_t>(i)] = bf16_to_float(xb[i]);
      });
      x = x32.data();
    }
    if (shared_scale) shared_gate_scales(shared_gate, x, T, shared_scale);
    float* y = c.y_dtype == DType::kF32 ? static_cast<float*>(c.y) : y32.data();
    ExpertPassArgs pass;
    pass.routed = routed.get();
    pass.shared = shared.get();
    pass.x = x;
    pass.num_tokens = T;
    pass.top_k = K;
    pass.dispatch = &dispatch;
    pass.row_scale = row_scale.data();
    pass.shared_token_scale = shared_scale;
    pass.shared_average = shared_average && pass.shared;
    pass.y = y;
    run_expert_pass(pass);
    if (c.y_dtype == DType::kBF16) {
      auto* yb = static_cast<uint16_t*>(c.y);
      kernels::parallel_for(tasks, [&](int64_t task, int) {
        const int64_t end = std::min(T, (task + 1) * kRowsPerTask) * D;
        for (int64_t i = task * kRowsPerTask * D; i < end; ++i) yb[i] = float_to_bf16(y32[static_cast<size_t>(i)]);
      });
    }
  }

  void validate(const EngineCall& c) const {
    if (c.num_tokens < 0) fail("ExpertEngine: num_tokens=", c.num_tokens, " must be >= 0");
    if (c.top_k < 1) fail("ExpertEngine: top_k=", c.top_k, " must be >= 1");
    if (c.num_tokens > 0 && (!c.x || !c.ids || !c.weights || !c.y))
      fail("ExpertEngine: a call of ", c.num_tokens, " tokens needs x, ids, weights and y");
    check_call_dtype(c.x_dtype, {DType::kF32, DType::kBF16}, "x");
    check_call_dtype(c.y_dtype, {DType::kF32, DType::kBF16}, "y");
    check_call_dtype(c.ids_dtype, {DType::kI64, DType::kI32}, "topk_ids");
  }

  void start(const EngineCall& c, bool stream) {
    if (pending()) fail("ExpertEngine: a call is already in flight; wait() for it first");
    call = c;
    from_stream = stream;
    runtime::Executor::instance().submit(*this);
  }
};

ExpertEngine::ExpertEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ExpertEngine::~ExpertEngine() {
  if (impl_) {
    try {
      impl_->wait_all();
    } catch (...) {  // the error belonged to a call nobody waited for
    }
  }
}
ExpertEngine::ExpertEngine(ExpertEngine&&) noexcept = default;
ExpertEngine& ExpertEngine::operator=(ExpertEngine&& other) noexcept {
  if (this != &other) {
    ExpertEngine gone(std::move(*this));  // waits for its call
    impl_ = std::move(other.impl_);
  }
  return *this;
}

int64_t ExpertEngine::num_experts() const { return impl_->E; }
int64_t ExpertEngine::dim() const { return impl_->D; }
int64_t ExpertEngine::hidden() const { return impl_->H; }
std::string ExpertEngine::kernel_name() const { return impl_->routed->name(); }
int64_t ExpertEngine::host_weight_bytes() const {
  return impl_->routed->weight_bytes() + (impl_->shared ? impl_->shared->weight_bytes() : 0) +
         static_cast<int64_t>(impl_->shared_gate.size() * sizeof(float));
}

void ExpertEngine::set_resident(std::span<const uint8_t> mask) {
  if (static_cast<int64_t>(mask.size()) != impl_->E)
    fail("ExpertEngine: the residency mask has ", mask.size(), " entries; the layer has ", impl_->E, " experts");
  if (impl_->pending()) fail("ExpertEngine: set_resident while a call is in flight; wait() first");
  impl_->apply_mask(mask.data());
}
std::span<const uint8_t> ExpertEngine::resident() const { return impl_->resident; }

void ExpertEngine::submit(const EngineCall& call) {
  impl_->validate(call);
  impl_->check_ids(call);
  impl_->start(call, false);
}
void ExpertEngine::wait() { impl_->wait_all(); }
bool ExpertEngine::in_flight() const { return impl_->pending(); }

std::span<const int64_t> ExpertEngine::counts() const { return impl_->counts; }
void ExpertEngine::reset_counts() {
  if (impl_->pending()) fail("ExpertEngine: reset_counts while a call is in flight; wait() first");
  std::fill(impl_->counts.begin(), impl_->counts.end(), 0);
}
void ExpertEngine::reserve(int64_t tokens, int64_t top_k) {
  if (tokens < 1 || top_k < 1) fail("ExpertEngine: reserve(tokens=", tokens, ", top_k=", top_k, ") needs both >= 1");
  if (impl_->pending()) fail("ExpertEngine: reserve while a call is in flight; wait() first");
  impl_->reserve(tokens, top_k);
}

namespace {

// The tokens the options ask buffers for up front (0: none).
int64_t reserved_tokens(const ExpertEngineOptions& options) {
  int64_t n = options.max_tokens;
  for (int64_t s : options.capture_sizes) n = std::max(n, s);
  return n;
}

// One matrix (logical (in, out), any layout, bf16 or f32) as GGUF Q4_0 rows, encoded into `scratch`.
kernels::MatrixView encode_q4_0(const kernels::MatrixView& m, ViewScratch& scratch) {
  const GgmlTypeTraits* q4 = ggml_type_traits(static_cast<uint32_t>(GgmlType::kQ4_0));
  const int64_t in = m.k, out = m.n, row_bytes = in / q4->block_values * q4->block_bytes;
  auto& codes = scratch.bytes.emplace_back(static_cast<size_t>(out * row_bytes));
  std::vector<float> row(static_cast<size_t>(in));
  for (int64_t r = 0; r < out; ++r) {
    for (int64_t i = 0; i < in; ++i) row[static_cast<size_t>(i)] = m.at(i, r);
    quantize_row_simple(static_cast<uint32_t>(GgmlType::kQ4_0), row.data(), in, codes.data() + r * row_bytes);
  }
  return kernels::MatrixView{codes.data(), DType::kF32, kernels::WeightLayout::kOutIn, in, out,
                             {kernels::QuantScheme::kGgml, static_cast<uint32_t>(GgmlType::kQ4_0)}};
}

// The view the kernels pack for a slot: the logical expert's own, or (int4) its Q4_0 encoding.
kernels::MlpWeightsView held_view(const kernels::MlpWeightsView& v, EngineWeightFormat format, ViewScratch& scratch) {
  if (format != EngineWeightFormat::kInt4) return v;
  kernels::MlpWeightsView q = v;
  if (v.gate.data) q.gate = encode_q4_0(v.gate, scratch);
  q.up = encode_q4_0(v.up, scratch);
  q.down = encode_q4_0(v.down, scratch);
  return q;
}

// Checks that the layer's experts can be held in `format`: int8 and int4 quantize plain bf16 or f32 weights with
// inputs in whole blocks of 32.
void check_requantizable(std::span<const kernels::MlpWeightsView> views, EngineWeightFormat format, int64_t dim,
                         int64_t hidden, const std::string& what) {
  if (format == EngineWeightFormat::kStored) return;
  for (const auto& v : views)
    if (v.up.quantized() || v.down.quantized())
      fail(what, ": its experts are stored quantized; the ", engine_weight_format_name(format),
           " format quantizes bf16 or f32 experts (run quantized checkpoints in their own format)");
  if (format == EngineWeightFormat::kInt4 && (dim % 32 != 0 || hidden % 32 != 0))
    fail(what, ": int4 (Q4_0 blocks of 32) needs hidden_size and moe_intermediate_size divisible by 32; got ", dim,
         " and ", hidden);
}

// The slots' logical experts: the identity, or the caller's map (each entry a logical expert).
std::vector<int64_t> slot_experts(const ExpertEngineOptions& options, int64_t logical_experts) {
  std::vector<int64_t> map = options.physical_to_logical;
  if (map.empty()) {
    for (int64_t e = 0; e < logical_experts; ++e) map.push_back(e);
    return map;
  }
  for (size_t p = 0; p < map.size(); ++p)
    if (map[p] < 0 || map[p] >= logical_experts)
      fail("ExpertEngine: physical_to_logical[", p, "] = ", map[p], " is not one of the layer's ", logical_experts,
           " experts");
  return map;
}


}  // namespace

void ExpertEngine::Impl::build_routed(const MoELayerSpec& spec, std::shared_ptr<const std::vector<kernels::MlpWeightsView>> logical,
                                      const std::vector<int64_t>& slots, const ExpertEngineOptions& options) {
  Impl& impl = *this;
  kernels::GroupedFfnOptions ffn_options;
  ffn_options.quantize_q8 = options.format == EngineWeightFormat::kInt8;
  {
    ViewScratch scratch;
    std::vector<kernels::MlpWeightsView> views;
    for (int64_t e : slots) views.push_back(held_view((*logical)[static_cast<size_t>(e)], options.format, scratch));
    impl.routed = make_expert_ffn(spec, views, spec.hidden, ffn_options);
  }
  if (!options.keep_resident_host_copy)
    impl.expert_view = [logical, slots, format = options.format](int64_t p, ViewScratch& scratch) {
      return held_view((*logical)[static_cast<size_t>(slots[static_cast<size_t>(p)])], format, scratch);
    };
  if (const int64_t n = reserved_tokens(options); n > 0) impl.reserve(n, 1);
}

ExpertEngine ExpertEngine::from_tensors(const ExpertTensors& t, const ExpertEngineOptions& options) {
  if (t.dtype != DType::kF32 && t.dtype != DType::kBF16)
    fail("ExpertEngine: expert tensors have dtype ", dtype_name(t.dtype), "; expected F32 or BF16");
  if (t.num_experts < 1 || t.dim < 1 || t.hidden < 1)
    fail("ExpertEngine: experts=", t.num_experts, ", hidden_size=", t.dim, ", moe_intermediate_size=", t.hidden,
         " must all be >= 1");
  if (!t.gate || !t.up || !t.down) fail("ExpertEngine: gate, up and down tensors are all needed");
  if (t.activation != ExpertActivation::kSwiGLU && t.activation != ExpertActivation::kClampedSwiGLU)
    fail("ExpertEngine: caller tensors run SwiGLU or clamped SwiGLU, not ", expert_activation_name(t.activation));
  const std::vector<int64_t> slots = slot_experts(options, t.num_experts);
  auto impl = Impl::make(static_cast<int64_t>(slots.size()), t.dim, t.hidden, options);
  MoELayerSpec spec;
  spec.dim = t.dim;
  spec.hidden = t.hidden;
  spec.activation = t.activation;
  spec.swiglu_alpha = t.swiglu_alpha;
  spec.swiglu_limit = t.swiglu_limit;
  // Views of the caller's memory: (E, out, in) per tensor, expert e at e * out * in elements.
  auto logical = std::make_shared<std::vector<kernels::MlpWeightsView>>();
  const int64_t esize = dtype_size(t.dtype);
  auto matrix = [&](const void* base, int64_t e, int64_t out, int64_t in) {
    return kernels::MatrixView{static_cast<const std::byte*>(base) + e * out * in * esize, t.dtype,
                               kernels::WeightLayout::kOutIn, in, out, {}};
  };
  for (int64_t e = 0; e < t.num_experts; ++e) {
    kernels::MlpWeightsView v;
    v.gate = matrix(t.gate, e, t.hidden, t.dim);
    v.up = matrix(t.up, e, t.hidden, t.dim);
    v.down = matrix(t.down, e, t.dim, t.hidden);
    logical->push_back(v);
  }
  check_requantizable(*logical, options.format, t.dim, t.hidden, "ExpertEngine: the caller's tensors");
  impl->build_routed(spec, logical, slots, options);
  return ExpertEngine(std::move(impl));
}

ExpertEngine ExpertEngine::from_model(const Model& model, int64_t layer, const ExpertEngineOptions& options) {
  const MoELayerSpec spec = model.family().moe_layer(layer);
  const std::vector<int64_t> slots = slot_experts(options, spec.num_experts);
  auto impl = Impl::make(static_cast<int64_t>(slots.size()), spec.dim, spec.hidden, options);
  auto routed = std::make_shared<ExpertWeights>(load_routed_experts(model.source(), spec, model.quantization()));
  check_requantizable(routed->views, options.format, spec.dim, spec.hidden,
                      model.source().label() + ", MoE layer " + std::to_string(layer));
  // The views alias `routed` (its converted buffers) and the model's mapping: both live as long as the closure.
  std::shared_ptr<const std::vector<kernels::MlpWeightsView>> views(routed, &routed->views);
  if (!options.keep_resident_host_copy) impl->model = std::make_shared<const Model>(model);
  impl->build_routed(spec, views, slots, options);
  if (options.shared_expert) {
    if (spec.shared.hidden <= 0) fail(model.source().label(), ": MoE layer ", layer, " has no shared expert");
    const ExpertWeights shared = load_shared_expert(model.source(), spec, model.quantization());
    impl->shared = make_shared_expert_ffn(spec, shared.views);
    impl->shared_gate = load_shared_gate(model.source(), spec);
    impl->shared_average = spec.shared.average;
  }
  return ExpertEngine(std::move(impl));
}

bool engine_cuda_support() { return runtime::cuda_streams_available(); }

void submit_on_stream(ExpertEngine& engine, const EngineCall& call, uintptr_t stream) {
  ExpertEngine::Impl& impl = *engine.impl_;
  impl.validate(call);
  auto& slot = impl.stream_slots[static_cast<size_t>(impl.next_stream_slot)];
  if (slot.queued.load(std::memory_order_acquire))
    fail("ExpertEngine: ", ExpertEngine::Impl::kStreamSlots,
         " calls are already enqueued on streams and not yet started; synchronize before enqueuing more");
  impl.next_stream_slot = (impl.next_stream_slot + 1) % ExpertEngine::Impl::kStreamSlots;
  slot.impl = &impl;
  slot.call = call;
  slot.queued.store(true, std::memory_order_release);
  try {
    runtime::enqueue_on_stream(stream, &ExpertEngine::Impl::host_submit, &slot);
  } catch (...) {
    slot.queued.store(false);
    throw;
  }
}

void wait_on_stream(ExpertEngine& engine, uintptr_t stream) {
  ExpertEngine::Impl& impl = *engine.impl_;
  impl.stream_waits.fetch_add(1, std::memory_order_acq_rel);
  try {
    runtime::enqueue_on_stream(stream, &ExpertEngine::Impl::host_wait, &impl);
  } catch (...) {
    impl.stream_waits.fetch_sub(1);
    throw;
  }
}

}  // namespace hymoe
