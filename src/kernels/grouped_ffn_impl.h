// Constructors of the individual grouped-FFN implementations, for the dispatcher and the tests that compare
// each against the reference. Not part of the kernels' interface to the layers above.
#pragma once

#include "kernels/grouped_ffn.h"

namespace hymoe::kernels {

// Portable C++ (auto-vectorized for the baseline ISA), weights repacked once into f32 (K, N) per matrix.
std::unique_ptr<GroupedFfn> make_grouped_ffn_portable(const GroupedFfnShape& shape,
                                                      std::span<const MlpWeightsView> weights);

// ISA micro-kernels over weights packed at construction (f32 or bf16, all matrices one dtype), one schedule of
// (group, row-block, column-block) tiles over the thread pool. `isa` must not be Isa::kScalar.
std::unique_ptr<GroupedFfn> make_grouped_ffn_packed(const GroupedFfnShape& shape,
                                                    std::span<const MlpWeightsView> weights, Isa isa);

}  // namespace hymoe::kernels
