// How the expert kernels multiply bf16 weights (docs/semantics.md, "bf16 weights"). A process-wide setting, like
// the thread count, so every layer built afterwards follows it without threading an option through each API.
#pragma once

#include <string_view>

namespace hymoe {

enum class Bf16Compute {
  kAuto,    // kNative where the CPU has AVX512_BF16, else kWiden
  kWiden,   // each weight widened to f32, f32 FMA: exact products, the bits of the same weights given as f32
  kNative,  // activations rounded to bf16, the CPU's bf16 dot product (vdpbf16ps) with f32 accumulation; an error
            // when the CPU (or HYMOE_ISA) lacks AVX512_BF16
};

// The default: HYMOE_BF16_COMPUTE=auto|widen|native if set, else kAuto.
Bf16Compute default_bf16_compute();
// The setting layers built from now on use (a layer keeps the kernels it built).
void set_bf16_compute(Bf16Compute mode);
Bf16Compute bf16_compute();
std::string_view bf16_compute_name(Bf16Compute mode);
// "auto", "widen" or "native"; any other name is an error naming `what` (e.g. "--bf16-compute").
Bf16Compute bf16_compute_from_name(std::string_view name, std::string_view what);

}  // namespace hymoe
