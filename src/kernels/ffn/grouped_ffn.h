// The ragged grouped expert-MLP kernel interface. Knows nothing of experts, routers or tokens: it runs G
// independent MLPs, group g on rows [offsets[g], offsets[g+1]) of a row-major activation matrix.
//
// Data contract of the ragged batch (see docs/kernels.md):
//   offsets  (G+1)       exclusive scan of rows per group; offsets[0] = 0, non-decreasing; empty groups legal
//   x        (R, dim)    rows grouped by group, R = offsets[G]; or, with x_rows, any (N, dim) matrix of which row
//                        r of the batch is x[x_rows[r]] (the dispatch's gather, fused into the kernel's packing)
//   scale    (R)         optional per-row factor applied to the output row (routing weight x load scale)
//   y        (R, dim)    overwritten with scale[r] * mlp_g(x[r])
// Implementations are chosen once (make_grouped_ffn) and may pack the weights in their own layout then; running
// takes its temporaries from a pooled workspace (kernels/driver/workspace.h), is safe to call concurrently, and gives the
// same bits for any thread count.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "hymoe/compute.h"
#include "hymoe/dtype.h"
#include "kernels/ffn/activation.h"
#include "kernels/formats/matrix_view.h"
#include "kernels/isa/isa.h"

namespace hymoe::kernels {

// One expert MLP's weights: gate (dim->hidden, gated activations only), up (dim->hidden), down (hidden->dim).
// Optional float32 biases (gpt-oss's experts have them) are added to the projections' outputs: gate and up
// before the activation, down before the row scale.
struct MlpWeightsView {
  MatrixView gate;  // data == nullptr when the activation is not gated
  MatrixView up;
  MatrixView down;
  const float* gate_bias = nullptr;  // (hidden) or nullptr
  const float* up_bias = nullptr;    // (hidden) or nullptr
  const float* down_bias = nullptr;  // (dim) or nullptr
};

struct GroupedFfnShape {
  int64_t num_groups = 0;
  int64_t dim = 0;
  int64_t hidden = 0;
  Activation activation = Activation::kSwiGLU;
  float swiglu_alpha = 1.702f;  // kClampedSwiGLU only
  float swiglu_limit = 7.0f;    // kClampedSwiGLU only
};

struct GroupedFfnArgs {
  const int64_t* offsets = nullptr;  // (G+1)
  const float* x = nullptr;          // (R, dim), or (N, dim) indexed by x_rows
  const float* scale = nullptr;      // (R) or nullptr for 1
  float* y = nullptr;                // (R, dim)
  // Optional, for the backward pass: pre-activation gate and up projections, (R, hidden) each. saved_gate is
  // only written for gated activations.
  float* saved_gate = nullptr;
  float* saved_up = nullptr;
  const int64_t* x_rows = nullptr;  // optional (R): row r of the batch is x[x_rows[r]]
};

class GroupedFfn {
 public:
  virtual ~GroupedFfn() = default;
  virtual void run(const GroupedFfnArgs& args) const = 0;
  virtual const GroupedFfnShape& shape() const = 0;
  // Kernel name following docs/kernels.md, e.g. "grouped_ffn_f32w_f32__ref".
  virtual const char* name() const = 0;
  // Bytes of weights (and biases) the implementation holds in its own memory, e.g. its packed panels; 0 for one
  // that reads the caller's views in place (the reference).
  virtual int64_t weight_bytes() const { return 0; }
  // Frees what the implementation holds of group g (its packed panels) or, for one that reads the caller's views in
  // place, nothing; a later run must give g no rows until restore_group(g, ...) (HYMOE_CHECK). Not to be called
  // while run() is in progress. The hybrid engine (src/runtime/) drops experts resident elsewhere this way.
  virtual void release_group(int64_t g) { (void)g; }
  // Packs group g again from `weights` (the view it was built from, or one with the same shapes and storage); the
  // group then computes the same bits as before it was released.
  virtual void restore_group(int64_t g, const MlpWeightsView& weights) { (void)g, (void)weights; }
  virtual bool group_released(int64_t g) const { (void)g; return false; }
};

// How the fast implementations compute with the weights they are given (docs/kernels.md, "Formats").
struct GroupedFfnOptions {
  Bf16Compute bf16 = bf16_compute();  // for bf16 weights: widen to f32, or the native bf16 dot product
  QuantCompute quant = quant_compute();  // GGUF block and MXFP4 weights: exact f32 activations, or ggml's int8 dot
  bool quantize_q8 = false;           // pack the weights (f32 or bf16) as q8 blocks of 32 along K with an f32 scale
                                      // each, and quantize the activations per block the same way when packed
};

// The bf16 path `setting` means on `isa`: kWiden or kNative (kAuto resolved as include/hymoe/compute.h says).
// kNative on an ISA without AVX512_BF16 is an error. Tests take their expected numerics from it.
Bf16Compute resolve_bf16_compute(Isa isa, Bf16Compute setting = bf16_compute());
// Whether fp8 block weights run on the bf16 dot product on `isa` under `setting` (activations rounded to bf16,
// RoundingModel::kBf16Activations), rather than exactly: any setting but kExact, where `isa` has AVX512_BF16.
bool fp8_rounds_activations(Isa isa, QuantCompute setting = quant_compute());

// How a grouped FFN rounds what it multiplies, for the reference: f32 (nothing rounded; also bf16 widening),
// bf16 dot (activations rounded to bf16 before each projection, weights to bf16; quantized views' weights stay
// exact, as the fp8 dot format has them), q8 blocks (activations and
// weights quantized per block of 32 along K, exactly as the packed kernels do), ggml activations (GGUF block
// weights exactly decoded; each projection's input rows quantized as ggml's CPU backend does for the weights'
// type, its vec_dot_type in gguf_formats.inc: q8_0, q8_1 or q8_K, and q8_0 for MXFP4: QuantCompute::kInt8).
enum class RoundingModel { kNone, kBf16Activations, kQ8Blocks, kGgmlActivations };

// Plain reference: double accumulation, no SIMD, no threads. The yardstick for every other implementation. With a
// rounding model it rounds the inputs of each projection as that format does, then computes exactly.
std::unique_ptr<GroupedFfn> make_grouped_ffn_ref(const GroupedFfnShape& shape, std::span<const MlpWeightsView> weights,
                                                 RoundingModel rounding = RoundingModel::kNone);
// The implementation for `isa` (the fastest available one for that ISA). Weights must outlive the result unless
// the implementation packs them (documented per implementation). Native bf16 asked for on an ISA without it, or
// q8 on the scalar ISA, is an error.
std::unique_ptr<GroupedFfn> make_grouped_ffn(const GroupedFfnShape& shape, std::span<const MlpWeightsView> weights,
                                             Isa isa = active_isa(), const GroupedFfnOptions& options = {});

// Checks the args against the shape (offsets monotone, pointers present); used by every implementation.
void validate_grouped_ffn_args(const GroupedFfnShape& shape, const GroupedFfnArgs& args);
void validate_grouped_ffn_weights(const GroupedFfnShape& shape, std::span<const MlpWeightsView> weights);

}  // namespace hymoe::kernels
