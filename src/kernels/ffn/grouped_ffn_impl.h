// Constructors of the individual grouped-FFN implementations, for the dispatcher and the tests that compare
// each against the reference. Not part of the kernels' interface to the layers above.
#pragma once

#include "kernels/formats/gemm_kernels.h"
#include "kernels/ffn/grouped_ffn.h"

namespace hymoe::kernels {

// Portable C++ (auto-vectorized for the baseline ISA), weights repacked once into f32 (K, N) per matrix.
std::unique_ptr<GroupedFfn> make_grouped_ffn_portable(const GroupedFfnShape& shape,
                                                      std::span<const MlpWeightsView> weights);

// ISA micro-kernels over weights packed at construction in one weight format (all matrices; the f32 and
// bf16-widen formats need every matrix of that dtype), one schedule of (group, row-block, column-block) tiles over
// the thread pool. `isa` must not be Isa::kScalar and must have the format. Without a format: the weights' own
// (f32, or bf16 widened).
std::unique_ptr<GroupedFfn> make_grouped_ffn_packed(const GroupedFfnShape& shape,
                                                    std::span<const MlpWeightsView> weights, Isa isa);
std::unique_ptr<GroupedFfn> make_grouped_ffn_packed(const GroupedFfnShape& shape,
                                                    std::span<const MlpWeightsView> weights, Isa isa,
                                                    WeightFormat format);
// Gate/up in one format and down in another (GGUF layers: Q4_K gate/up with Q6_K down).
std::unique_ptr<GroupedFfn> make_grouped_ffn_packed(const GroupedFfnShape& shape,
                                                    std::span<const MlpWeightsView> weights, Isa isa,
                                                    WeightFormat first_format, WeightFormat down_format);
// The format make_grouped_ffn would pack these weights' gate/up (or up) in on `isa` (never called for
// Isa::kScalar), and the one of their down projections (the same but for GGUF views of another type).
WeightFormat choose_weight_format(std::span<const MlpWeightsView> weights, Isa isa, const GroupedFfnOptions& options);
WeightFormat choose_down_format(std::span<const MlpWeightsView> weights, Isa isa, const GroupedFfnOptions& options);
// The format a quantized view's panel format `natural` (quantized_panel_format) runs in on `isa` under the
// options: unless they ask for exact compute (kAuto does not), MXFP4's integer-dot twin (as for GGUF weights) and
// fp8's bf16-dot form where `isa` has one (AVX512_BF16; fp8 has no int8 form, so kInt8 means the same); others
// unchanged.
WeightFormat quantized_compute_format(WeightFormat natural, Isa isa, const GroupedFfnOptions& options);

}  // namespace hymoe::kernels
