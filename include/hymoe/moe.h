// The Mixture-of-Experts layer: KempnerForge's kempnerforge.model.moe in C++ (docs/semantics.md states every
// rule). A router picks top_k experts per token, each routed expert MLP runs on exactly its tokens (a ragged
// grouped batch: nothing padded to the busiest expert), outputs are combined with the routing weights, and an
// optional shared expert sees every token.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hymoe/rng.h"
#include "hymoe/safetensors.h"
#include "hymoe/tensor.h"

namespace hymoe {

// Exactly build_moe's arguments.
struct MoEConfig {
  int64_t dim = 0;
  int64_t hidden_dim = 0;
  int64_t num_experts = 0;
  int64_t top_k = 0;
  std::string activation = "silu";  // "silu" (SwiGLU) | "gelu" | "relu"
  std::string router_type = "softmax_topk";  // "softmax_topk" | "sigmoid_topk"
  int64_t shared_experts = 0;  // > 0 builds one shared MLP of hidden_dim
  double capacity_factor = 0.0;  // 0 = no capacity limit
  bool gradient_scale = false;
  double sequence_aux_loss_weight = 0.0;  // sigmoid router only
  std::string bias_schedule = "constant";  // "constant" | "cosine_decay" | "linear_warmup"
  bool packed_experts = false;

  // Throws hymoe::Error naming the field, its value and the allowed range.
  void validate() const;
};

// Parses a JSON object holding MoEConfig fields (missing fields keep their defaults; unknown fields are an error,
// except those listed in `extra_fields`, which are ignored here). `label` names the source in messages.
MoEConfig parse_moe_config(std::string_view json_text, const std::string& label,
                           std::span<const std::string_view> extra_fields = {});

enum class Mode { kTrain, kEval };

// What a layer of a configuration needs in memory, computed from the configuration alone (before anything is
// allocated) and in double precision, so no configuration wraps it. An upper estimate: f32 weights with the
// kernels' packed copies; per forward of `tokens` tokens, the activations and routing, and in train mode what is
// saved for the backward, the backward's buffers and one gradient per weight.
struct MoEMemoryEstimate {
  double weight_bytes = 0.0;
  double activation_bytes = 0.0;
  double total_bytes() const { return weight_bytes + activation_bytes; }
};
MoEMemoryEstimate estimate_moe_memory(const MoEConfig& config, int64_t tokens, Mode mode);
// The machine's physical memory in bytes (sysconf), or +infinity where the system does not say.
double physical_memory_bytes();
// Throws hymoe::Error when `need_bytes` exceeds the machine's physical memory, naming `what` (the fields or flags
// that set the size, e.g. "config.json: dim=16384, hidden_dim=16384, num_experts=64"), the bytes and the memory.
// Called before allocating, so that a size the machine cannot hold is a named error, never a std::bad_alloc.
void require_physical_memory(double need_bytes, const std::string& what);
// "dim=.., hidden_dim=.., num_experts=.., top_k=.., activation=.., shared_experts=..": the fields that size a layer.
std::string moe_size_fields(const MoEConfig& config);

// What a router decided for T tokens, plus everything the losses and the backward pass need.
struct Routing {
  int64_t num_tokens = 0;
  int64_t top_k = 0;
  int64_t num_experts = 0;
  std::vector<int32_t> indices;       // (T, K) selected experts, slot 0 = highest score
  std::vector<float> router_weights;  // (T, K) normalized routing weights
  std::vector<float> weights;         // (T, K) after capacity zeroing (== router_weights without capacity)
  std::vector<uint8_t> dropped;       // (T, K) 1 where capacity dropped the assignment
  std::vector<float> logits;          // (T, E) gate logits, without any bias
  std::vector<float> scores;          // (T, E) softmax probabilities or biased sigmoid scores (pre-update bias)
  Tensor expert_counts;               // (E) top-k assignments per expert before drops, as float
  float aux_loss = 0.0f;
  float z_loss = 0.0f;
};

// What a router's backward pass gets: the gradient of the loss with respect to the normalized top-k weights
// (`router_weights`, before capacity zeroing: a dropped assignment's entry is 0) and the weights of the two router
// losses. It accumulates d loss / d x into grad_x.
struct RouterBackwardArgs {
  const Tensor* x = nullptr;           // (T, dim) the input of the forward
  const Routing* routing = nullptr;    // what that forward decided
  const float* grad_weights = nullptr; // (T, K)
  float aux_loss_weight = 0.0f;
  float z_loss_weight = 0.0f;
  float* grad_x = nullptr;             // (T, dim), accumulated into
};

// A router: owns its parameters and state, names them as PyTorch does relative to the router module.
class Router {
 public:
  virtual ~Router() = default;
  virtual std::string_view type() const = 0;
  // Routes x (T, dim). In train mode a stateful router updates its state after selecting.
  virtual Routing route(const Tensor& x, Mode mode) = 0;
  // Training progress for schedules (sigmoid router); others ignore it.
  virtual void set_step(int64_t /*step*/, int64_t /*max_steps*/) {}
  // Parameters and buffers: ("gate.weight", ...), ("expert_bias", ...), ("expert_ema", ...).
  virtual std::vector<std::pair<std::string, Tensor*>> named_tensors() = 0;
  // The trainable subset of named_tensors() (buffers such as expert_ema left out).
  virtual std::vector<std::pair<std::string, Tensor*>> named_parameters() { return named_tensors(); }
  // Gradients of every parameter (named as in named_parameters(), same order) for the routing `args.routing`
  // made by this router's last train-mode route(). A router without a backward pass throws.
  virtual std::vector<std::pair<std::string, Tensor>> backward(const RouterBackwardArgs& args);
};

// Capacity, as MoELayer applies it after routing (train and eval): weights = router_weights, then, for each top-k
// slot separately, the tokens (in token order) after an expert's first ceil(T * K / E * capacity_factor) (at
// least 1) get weight 0 and dropped = 1. No re-routing, no renormalization; nothing dropped at capacity_factor 0.
void apply_capacity(const MoEConfig& config, Routing& routing);

using RouterFactory = std::function<std::unique_ptr<Router>(const MoEConfig&)>;
// Registers a router under `name` (replacing nothing: a duplicate name is an error).
void register_router(const std::string& name, RouterFactory factory);
std::unique_ptr<Router> make_router(const MoEConfig& config);
std::vector<std::string> router_names();

// The activation of an expert MLP.
enum class MlpActivation { kSwiGLU, kGelu, kRelu };

// One expert (or shared-expert) MLP, weights in nn.Linear (out, in) layout; no biases.
// SwiGLU: down(silu(gate x) * up x). Standard: down(act(up x)).
struct ExpertMlp {
  MlpActivation activation = MlpActivation::kSwiGLU;
  Tensor gate_proj;  // (hidden, dim), empty unless SwiGLU
  Tensor up_proj;    // (hidden, dim)
  Tensor down_proj;  // (dim, hidden)
  int64_t dim() const { return up_proj.dim(1); }
  int64_t hidden() const { return up_proj.dim(0); }
  std::vector<std::pair<std::string, Tensor*>> named_tensors();  // "gate_proj.weight", ...
};

using MlpFactory = std::function<ExpertMlp(int64_t dim, int64_t hidden_dim)>;
// MLP registry: "swiglu", "standard_gelu", "standard_relu" are built in.
void register_mlp(const std::string& name, MlpFactory factory);
ExpertMlp make_mlp(const std::string& name, int64_t dim, int64_t hidden_dim);
std::vector<std::string> mlp_names();
// The registry key for a config activation: "silu" -> "swiglu", "gelu" -> "standard_gelu", "relu" -> "standard_relu".
std::string mlp_name_for_activation(const std::string& activation);

// Runs experts[e] on rows [offsets[e], offsets[e+1]) of x_sorted (R, dim), offsets being the exclusive scan of
// tokens_per_expert. Returns (R, dim) in the same order. Zero-token experts cost nothing.
Tensor grouped_expert_forward(const Tensor& x_sorted, std::span<const int64_t> tokens_per_expert,
                              std::span<const ExpertMlp> experts);
// The same over packed (E, in, out) weights: up_w (E, dim, H), down_w (E, H, dim), gate_w (E, dim, H) for SwiGLU
// (nullptr otherwise).
Tensor grouped_expert_forward_packed(const Tensor& x_sorted, std::span<const int64_t> tokens_per_expert,
                                     const Tensor& up_w, const Tensor& down_w, const Tensor* gate_w,
                                     MlpActivation activation);
// Assignments grouped by destination, the permutation expert parallelism runs twice: (token, slot) pairs by the
// rank that owns their expert, and a rank's received rows by its local expert. order[r] is the assignment placed
// at row r: destinations ascending, assignment order kept within one (a stable counting sort, so the same inputs
// give the same rows on any rank or thread count); counts[g] is the number of rows for destination g. Every
// destination must lie in [0, num_groups); the error names the first that does not.
struct GroupOrder {
  std::vector<int64_t> order;   // (n)
  std::vector<int64_t> counts;  // (num_groups)
};
GroupOrder group_order(std::span<const int64_t> destinations, int64_t num_groups);

// The row moves of expert parallelism around its exchanges and their backward, each one pass over rows of `width`
// floats, split over hymoe's threads by rows (a row's bits never depend on the split). Every index is checked; an
// error names the first bad one.
// out[r] = x[index[r] / divisor] for r < index.size(): the (token, slot) pairs' rows (divisor top_k) or a
// permutation (divisor 1). x has x_rows rows, out index.size().
void permute_rows(const float* x, int64_t x_rows, int64_t width, std::span<const int64_t> index, int64_t divisor,
                  float* out);
// out[index[r]] = x[r] for r < index.size(), index a permutation of [0, index.size()): permute_rows undone.
void unpermute_rows(const float* x, int64_t width, std::span<const int64_t> index, float* out);
// y[t] = sum over k < top_k, in slot order from 0, of weights[t * top_k + k] * rows[position[t * top_k + k]]
// (weights null: 1; position -1: no row), the fused layer's combine. rows has num_rows rows, y num_tokens.
void combine_slot_rows(const float* rows, int64_t num_rows, int64_t width, std::span<const int64_t> position,
                       const float* weights, int64_t num_tokens, int64_t top_k, float* y);
// Its backward for grad_y (num_tokens, width): grad_rows[position[i]] = weights[i] * grad_y[token of i] (rows no
// pair names are zero; a row named twice is an error) and grad_weights[i] = <rows[position[i]], grad_y[token of
// i]>, summed in double (0 where position[i] is -1).
void combine_slot_rows_backward(const float* rows, int64_t num_rows, int64_t width, std::span<const int64_t> position,
                                const float* weights, const float* grad_y, int64_t num_tokens, int64_t top_k,
                                float* grad_rows, float* grad_weights);

// Experts packed once for many grouped calls: grouped_expert_forward(_packed) builds the kernels' panels on every
// call, which at real sizes costs more than the call. The tensors must outlive the object and not change while it
// lives (a kernel may read them in place); a caller whose weights change builds a new one. forward is const and
// may run from several threads on different inputs.
class GroupedExperts {
 public:
  explicit GroupedExperts(std::span<const ExpertMlp> experts);
  // Packed (E, in, out) weights, as grouped_expert_forward_packed takes them.
  GroupedExperts(const Tensor& up_w, const Tensor& down_w, const Tensor* gate_w, MlpActivation activation);
  GroupedExperts(GroupedExperts&&) noexcept;
  GroupedExperts& operator=(GroupedExperts&&) noexcept;
  ~GroupedExperts();
  int64_t num_experts() const;
  // What a forward keeps for backward: its input rows, the pre-activation projections and any row scales.
  struct Saved {
    Tensor x;
    std::vector<int64_t> offsets;
    std::vector<float> gate, up;  // (R, hidden); gate only for SwiGLU
    std::vector<float> scale;     // (R) the row scales of a scaled forward; empty for an unscaled one
  };
  // Experts e on rows [offset_e, offset_e + tokens_per_expert[e]) of x_sorted (R, dim); (R, dim) in that order.
  // With `saved`, also what backward needs; with `row_scale` (R), row r is multiplied by row_scale[r] as the
  // kernel stores it (the way MoELayer applies routing weights).
  Tensor forward(const Tensor& x_sorted, std::span<const int64_t> tokens_per_expert, Saved* saved = nullptr,
                 const float* row_scale = nullptr) const;
  // The same (inference) on rows gathered by index, into the caller's memory: row r of the grouped batch is row
  // x_rows[r] of x (x_count rows of dim), read where it lies (the gather fused into the kernels' packing, so no
  // sorted copy is made), and y (x_rows.size(), dim) is written in grouped order. For callers that run it call
  // after call on buffers they keep: fresh buffers of a large batch cost a page fault per 4 KiB on every call.
  void forward(const float* x, int64_t x_count, std::span<const int64_t> x_rows,
               std::span<const int64_t> tokens_per_expert, float* y, const float* row_scale = nullptr) const;
  // The gradients of sum(y * grad_y) for that forward: grad_x (R, dim), and one gradient per weight tensor in the
  // order and shapes it was built from (per expert gate (SwiGLU only), up, down; packed: up_w, down_w, gate_w);
  // for a scaled forward also grad_scale (R), d / d row_scale[r] = <grad_y[r], the expert's unscaled output>.
  // An expert without rows gets zeros. The same kernels as MoELayer::backward.
  struct Gradients {
    Tensor grad_x;
    std::vector<Tensor> weights;
    std::vector<float> grad_scale;  // (R) for a scaled forward; empty otherwise
    std::vector<uint8_t> zero;      // per expert: its weight gradients are known to be all zeros
  };
  Gradients backward(const Saved& saved, const Tensor& grad_y) const;
  // The same into `out`, whose weight gradients are kept from call to call (a training loop's buffers: allocating
  // every expert's gradients afresh costs more than a small batch's whole backward). Tensors of the wrong shapes
  // are replaced; an expert without rows gets zeros, written only where its buffers do not hold them already.
  void backward(const Saved& saved, const Tensor& grad_y, Gradients& out) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Multiplies each expert's rows of expert_out (sorted by expert, R rows) by avg/max(count, 1), avg = R/num_experts.
Tensor scale_by_expert_load(const Tensor& expert_out, std::span<const int64_t> tokens_per_expert, int64_t num_experts);

class MoELayer {
 public:
  explicit MoELayer(const MoEConfig& config);
  ~MoELayer();
  MoELayer(MoELayer&&) noexcept;
  MoELayer& operator=(MoELayer&&) noexcept;

  const MoEConfig& config() const { return config_; }

  // x (B, L, dim) -> y (B, L, dim). Token t = b*L + l. For sigmoid routers the schedule progress is
  // step/max(max_steps, 1). Non-finite inputs are an error.
  Tensor forward(const Tensor& x, Mode mode, int64_t step = 0, int64_t max_steps = 1);

  // Gradients of sum(y * grad_y) + aux_loss_weight * aux_loss + z_loss_weight * z_loss after a train-mode
  // forward, with respect to x (returned, (B, L, dim)) and every parameter (named_gradients()); the routing
  // decisions (top-k choice, capacity drops, token fractions, load scales) are constants, as under autograd.
  // Gradients are overwritten, not accumulated. Throws unless the last forward was in train mode.
  Tensor backward(const Tensor& grad_y, float aux_loss_weight = 0.0f, float z_loss_weight = 0.0f);
  // (name, gradient) for every parameter, in named_parameters() order; zeros until the first backward.
  std::vector<std::pair<std::string, const Tensor*>> named_gradients() const;
  // Bytes the last train-mode forward kept for the backward (0 after an eval forward): see docs/training.md.
  int64_t saved_for_backward_bytes() const;

  // Results of the last forward, like the Python properties.
  float aux_loss() const { return routing_.aux_loss; }
  float z_loss() const { return routing_.z_loss; }
  const Tensor& expert_counts() const { return routing_.expert_counts; }
  const Routing& last_routing() const { return routing_; }

  Router& router() { return *router_; }

  // Every parameter and buffer under its PyTorch state_dict name. Non-const access marks the weights as changed
  // (kernels re-prepare their packed copies on the next forward).
  std::vector<std::pair<std::string, Tensor*>> named_tensors();
  // The trainable subset of named_tensors() (no buffers), in the same order: what an optimizer updates.
  std::vector<std::pair<std::string, Tensor*>> named_parameters();
  // Loads every tensor from `file`, names prefixed with `prefix` (e.g. "model.layers.3.mlp."). Strict, as
  // PyTorch's load_state_dict(strict=True): tensors under the prefix that the configuration does not use and
  // tensors it uses that are absent are both errors, listing them all; tensors outside the prefix are ignored.
  // Misshapen, non-floating or non-finite tensors are errors naming the file, the tensor and the shapes; the layer
  // is unchanged on error.
  void load(const SafetensorsFile& file, const std::string& prefix = "");
  // All tensors into a writer under their PyTorch names.
  void save(SafetensorsWriter& writer, const std::string& prefix = "") const;
  // PyTorch-like initialization: nn.Linear's U(-1/sqrt(in), 1/sqrt(in)); bias 0, EMA 1/E.
  void init_random(Rng& rng);

  // Bytes of weights the experts hold (routed + shared).
  int64_t expert_weight_bytes() const;

 private:
  void allocate_gradients() const;  // the gradient buffers, zeroed, on first use; kept for the layer's life
  std::vector<std::pair<std::string, Tensor*>> collect_tensors(bool parameters_only) const;

  struct Impl;
  MoEConfig config_;
  std::unique_ptr<Router> router_;
  Routing routing_;
  std::unique_ptr<Impl> impl_;
};

std::unique_ptr<MoELayer> build_moe(const MoEConfig& config);

}  // namespace hymoe
