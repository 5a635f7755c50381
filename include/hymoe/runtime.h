// The expert engine: one MoE layer's routed experts (and optionally its shared expert) in a running model, called
// with the caller's routing. It is the CPU half of a hybrid CPU/GPU layer (kt-kernel's operator contract: the GPU
// computes the experts it holds, the engine the rest) and the compute of one rank under expert parallelism.
//
//   y (T, D) = sum over the token's slots k whose expert is not resident elsewhere and whose id is >= 0 of
//              weights[t, k] * expert_{ids[t, k]}(x[t])   (+ the shared expert, when the engine runs it)
//
// A residency mask (E) says which experts live elsewhere; it may change between calls, without reloading the other
// experts. Calls are asynchronous (submit returns at once, wait returns when y is written), one in flight per
// engine, run on one process-wide executor thread that drives hymoe's thread pool. The temporaries are the
// executor's, sized once for the largest batch, so a steady-state call allocates no memory proportional to it. docs/runtime.md states the
// contract, the numerics (which bits equal which) and how a serving stack drives it.
//
// Depends on models (checkpoints, GGUF files), moe (dispatch, expert pass) and kernels; placement and dist use it,
// never the reverse.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hymoe/dtype.h"
#include "hymoe/model.h"

namespace hymoe {

// How an engine built from caller tensors holds the experts.
enum class EngineWeightFormat {
  kStored,  // the tensors' own precision: f32, or bf16 (multiplied as bf16_compute() says: widened, or native dot)
  kInt8,    // q8 blocks: 32 weights along the input share one f32 scale; activations quantized per block the same
            // way; int8 dot products with f32 accumulation of the block sums
  kInt4,    // GGUF Q4_0 blocks (32 4-bit weights, one f16 scale; round to nearest, quant_encode.h); activations
            // quantized to q8_0 as ggml does for Q4_0 weights, integer dot products
};
// "stored", "int8", "int4".
std::string engine_weight_format_name(EngineWeightFormat format);

struct ExpertEngineOptions {
  // false: the packed panels of experts marked resident are freed (host RAM is what hybrid users lack) and packed
  // again from the retained weights (the model's mapped files, or the caller's tensors, which must then outlive the
  // engine) when the mask hands them back. true: kept, so a swap back costs nothing.
  bool keep_resident_host_copy = true;
  // Buffers are sized for this many tokens at construction (and for the largest capture size); 0: sized by the
  // first call. A later, larger batch grows them once (that call allocates).
  int64_t max_tokens = 0;
  std::vector<int64_t> capture_sizes;  // CUDA-graph batch sizes a caller will replay; each must be >= 1
  // From a model: also run the layer's shared expert on every token (kt-kernel's contract leaves it to the GPU).
  bool shared_expert = false;
  // How the experts are held: kStored keeps the checkpoint's (or tensors') format; kInt8 and kInt4 quantize bf16 or
  // f32 experts at load (quantized checkpoints are an error: they are run in their own format).
  EngineWeightFormat format = EngineWeightFormat::kStored;
  // Slot p of the engine holds logical expert physical_to_logical[p] (EPLB's map: a hot expert may fill several
  // slots), and call ids are slots. Empty: the identity over the layer's experts.
  std::vector<int64_t> physical_to_logical;
};

// Caller tensors of E (logical) experts, row-major: gate and up (E, H, D) (nn.Linear's (out, in) per expert), down (E, D, H).
struct ExpertTensors {
  DType dtype = DType::kBF16;  // kF32 or kBF16
  const void* gate = nullptr;
  const void* up = nullptr;
  const void* down = nullptr;
  int64_t num_experts = 0, dim = 0, hidden = 0;
  ExpertActivation activation = ExpertActivation::kSwiGLU;  // kSwiGLU or kClampedSwiGLU
  double swiglu_alpha = 1.702, swiglu_limit = 7.0;          // kClampedSwiGLU only
};

// One call's operands: caller memory, which must stay valid and unchanged (y unread) until wait() returns.
struct EngineCall {
  int64_t num_tokens = 0, top_k = 0;
  const void* x = nullptr;        // (T, D), dtype x_dtype: kF32 or kBF16
  DType x_dtype = DType::kF32;
  const void* ids = nullptr;      // (T, K), kI64 or kI32; ids < 0 are skipped (padding)
  DType ids_dtype = DType::kI64;
  const float* weights = nullptr;  // (T, K) f32
  void* y = nullptr;              // (T, D), dtype y_dtype: kF32 or kBF16; overwritten
  DType y_dtype = DType::kF32;
  // (E) bytes, non-zero = resident elsewhere, read when the call is submitted; nullptr: the mask set_resident gave.
  // A caller that shares its mask array (kt-kernel's gpu_experts_mask) passes it on every call.
  const uint8_t* resident = nullptr;
};

class ExpertEngine {
 public:
  // MoE layer (GGUF: block) `layer` of a model directory or GGUF file (Model::open), its experts at their stored
  // precision (bf16, FP8 and MXFP4 panels, GGUF blocks) as ModelMoELayer holds them.
  static ExpertEngine from_model(const Model& model, int64_t layer, const ExpertEngineOptions& options = {});
  // Caller tensors, held in options.format (packed: the tensors may go once this returns, unless
  // keep_resident_host_copy is false).
  static ExpertEngine from_tensors(const ExpertTensors& tensors, const ExpertEngineOptions& options = {});
  ~ExpertEngine();  // waits for a call in flight
  ExpertEngine(ExpertEngine&&) noexcept;
  ExpertEngine& operator=(ExpertEngine&&) noexcept;

  int64_t num_experts() const;
  int64_t dim() const;
  int64_t hidden() const;
  // The routed experts' kernel, e.g. "grouped_ffn_bf16w_f32_8x16__avx512".
  std::string kernel_name() const;
  // Bytes of expert weights the engine holds now (packed panels of the experts not released, shared expert).
  int64_t host_weight_bytes() const;

  // The mask calls without their own use: mask (E), non-zero = resident elsewhere. Not while a call is in flight.
  void set_resident(std::span<const uint8_t> mask);
  std::span<const uint8_t> resident() const;  // the mask the last call (or set_resident) applied

  // Validates the call (shapes, dtypes, ids in [-inf, E)), applies its mask, adds its (token, expert) pairs to the
  // counters (resident ones included: the statistics are the routing's, not the placement's) and starts it. Errors
  // are thrown here, on the caller's thread; one call in flight per engine.
  void submit(const EngineCall& call);
  // Returns when the call's y is written; rethrows what the call threw. A no-op when nothing is in flight.
  void wait();
  bool in_flight() const;
  void forward(const EngineCall& call) { submit(call); wait(); }

  // (E) routed (token, expert) pairs of every call since construction or reset_counts.
  std::span<const int64_t> counts() const;
  void reset_counts();
  // Buffers for batches of up to `tokens` tokens and `top_k` slots from the next call on, not at the first such
  // call. (A call's temporaries are shared by every engine: calls run one at a time on the executor.)
  void reserve(int64_t tokens, int64_t top_k);

 private:
  friend void submit_on_stream(ExpertEngine& engine, const EngineCall& call, uintptr_t stream);
  friend void wait_on_stream(ExpertEngine& engine, uintptr_t stream);
  struct Impl;
  explicit ExpertEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Whether this build can order calls on CUDA streams (built with the CUDA toolkit; a GPU is needed to use it).
bool engine_cuda_support();
// kt-kernel's stream ordering, for a caller whose operands are pinned host copies of CUDA tensors: submit_on_stream
// enqueues on `stream` (a cudaStream_t) a host function that submits `call` once the stream's earlier work (the
// copies into the pinned inputs) is done; wait_on_stream enqueues one that waits for the call, so copies of y the
// caller enqueues after it see the result. Both return at once. Errors of the call are rethrown by the next wait().
// Throws when built without the CUDA toolkit.
void submit_on_stream(ExpertEngine& engine, const EngineCall& call, uintptr_t stream);
void wait_on_stream(ExpertEngine& engine, uintptr_t stream);

}  // namespace hymoe
