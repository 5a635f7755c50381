// Instruction-set selection: detected once at run time, forceable with HYMOE_ISA=scalar|avx2|avx512 so tests can
// exercise every path the CPU has. isa.cc is compiled without ISA flags so detection never raises SIGILL.
#pragma once

#include <string_view>
#include <vector>

namespace hymoe::kernels {

enum class Isa { kScalar, kAvx2, kAvx512 };

std::string_view isa_name(Isa isa);
// Best ISA this CPU (and OS, for the vector state) supports.
Isa detect_best_isa();
// Every ISA this CPU can run, scalar first.
std::vector<Isa> supported_isas();
// The ISA kernels use: HYMOE_ISA if set (an error if the CPU lacks it or the name is unknown), else the best.
// Read once; later changes to the environment are ignored.
Isa active_isa();

}  // namespace hymoe::kernels
