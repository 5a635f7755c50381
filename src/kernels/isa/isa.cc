// CPU feature detection. Built without -mavx* flags: it only executes cpuid/xgetbv through compiler builtins.
#include "kernels/isa/isa.h"

#include <cstdlib>
#include <string>

#include "hymoe/error.h"

namespace hymoe::kernels {

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx512Vnni: return "avx512vnni";
    case Isa::kAvx512Bf16: return "avx512bf16";
  }
  return "?";
}

Isa detect_best_isa() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("fma")) {
    // The VNNI unit's grid kernels use pdep (BMI2, which every AVX-512 CPU has).
    if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("bmi2")) return Isa::kAvx512;
    return __builtin_cpu_supports("avx512bf16") ? Isa::kAvx512Bf16 : Isa::kAvx512Vnni;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::kAvx2;
#endif
  return Isa::kScalar;
}

bool bf16_dot_outpaces_fma() {
#if defined(__x86_64__) || defined(__i386__)
  return detect_best_isa() >= Isa::kAvx512Bf16 && __builtin_cpu_is("amd");
#else
  return false;
#endif
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  const Isa best = detect_best_isa();
  for (Isa isa : kAllIsas)
    if (isa <= best) out.push_back(isa);
  return out;
}

namespace {
Isa resolve_active_isa() {
  const char* forced = std::getenv("HYMOE_ISA");
  const Isa best = detect_best_isa();
  if (!forced || !*forced) return best;
  const std::string name = forced;
  for (Isa isa : kAllIsas) {
    if (isa_name(isa) != name) continue;
    if (isa > best) fail("HYMOE_ISA=", name, " but this CPU supports at most ", isa_name(best));
    return isa;
  }
  fail("HYMOE_ISA=", name, " is not one of scalar, avx2, avx512, avx512vnni, avx512bf16");
}
}  // namespace

Isa active_isa() {
  static const Isa isa = resolve_active_isa();
  return isa;
}

}  // namespace hymoe::kernels
