// Instruction-set selection: detected once at run time, forceable with
// HYMOE_ISA=scalar|avx2|avx512|avx512vnni|avx512bf16 so tests can exercise every path the CPU has. isa.cc is
// compiled without ISA flags so detection never raises SIGILL.
#pragma once

#include <string_view>
#include <vector>

namespace hymoe::kernels {

// Ordered: each level includes the ones below it. kAvx512Vnni adds AVX512_VNNI (vpdpbusd: the int8 kernels);
// kAvx512Bf16 adds AVX512_BF16 (vdpbf16ps: the native bf16 kernels) to it. Every CPU with AVX512_BF16 so far
// (Cooper Lake, Sapphire Rapids and later, Zen 4 and later) also has VNNI; one without it is classed kAvx512Vnni
// or kAvx512 and runs the widening bf16 kernels.
enum class Isa { kScalar, kAvx2, kAvx512, kAvx512Vnni, kAvx512Bf16 };
constexpr Isa kAllIsas[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Vnni, Isa::kAvx512Bf16};

std::string_view isa_name(Isa isa);
// Best ISA this CPU (and OS, for the vector state) supports.
Isa detect_best_isa();
// Every ISA this CPU can run, scalar first.
std::vector<Isa> supported_isas();
// The ISA kernels use: HYMOE_ISA if set (an error if the CPU lacks it or the name is unknown), else the best.
// Read once; later changes to the environment are ignored.
Isa active_isa();
// Whether this CPU's bf16 dot product (vdpbf16ps) multiplies faster than its f32 FMA, so that bf16 weights run
// faster on the native kernels than widened (Bf16Compute::kAuto's choice, docs/semantics.md): AMD's cores with
// AVX512_BF16 (Zen 4 and later: two products per lane at the FMA's rate, measured 1.8-2.0x the f32 FMA peak). On
// Intel's the instruction issues at half the FMA's products a cycle (Xeon family 6 model 207, docs/performance.md),
// so the native kernels lose wherever compute counts (T >= 32) and gain only a few percent where bandwidth binds
// (T = 1). False on a CPU without AVX512_BF16.
bool bf16_dot_outpaces_fma();

}  // namespace hymoe::kernels
