// How the expert kernels multiply bf16 weights and GGUF block weights (docs/semantics.md, "bf16 weights", "GGUF
// block weights"). Process-wide settings, like the thread count, so every layer built afterwards follows them
// without threading an option through each API.
#pragma once

#include <string_view>

namespace hymoe {

enum class Bf16Compute {
  kAuto,    // kNative where the CPU has AVX512_BF16 and its bf16 dot product outpaces its f32 FMA (AMD Zen 4 and
            // later), else kWiden (docs/semantics.md, "bf16 weights: which path runs")
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

enum class QuantCompute {
  kAuto,   // kInt8: llama.cpp's behaviour, and the faster one
  kExact,  // the exactly decoded weights times f32 activations, f32 FMA: the reference `y` of the GGUF cases
  kInt8,   // activations quantized per block as ggml's CPU backend does (q8_0 for Q8_0/Q4_0/MXFP4 weights, q8_K
           // for Q4_K/Q5_K/Q6_K), integer dot products: the reference `y.act_rounded`. FP8 block weights have no
           // int8 form: activations rounded to bf16, vdpbf16ps, where the CPU has AVX512_BF16, else exact
           // (docs/semantics.md, "FP8 blocks")
};

// The default: HYMOE_QUANT_COMPUTE=auto|exact|int8 if set, else kAuto.
QuantCompute default_quant_compute();
void set_quant_compute(QuantCompute mode);
QuantCompute quant_compute();
std::string_view quant_compute_name(QuantCompute mode);
// "auto", "exact" or "int8"; any other name is an error naming `what` (e.g. "--quant-compute").
QuantCompute quant_compute_from_name(std::string_view name, std::string_view what);

}  // namespace hymoe
