// The process-wide bf16 and GGUF compute settings (include/hymoe/compute.h). Read by make_grouped_ffn when it picks a
// weight format; it never changes kernels already built.
#include "hymoe/compute.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "hymoe/error.h"

namespace hymoe {
namespace {
std::atomic<int> g_bf16_compute{-1};  // -1: not set yet, use the default
std::atomic<int> g_quant_compute{-1};
}  // namespace

std::string_view bf16_compute_name(Bf16Compute mode) {
  switch (mode) {
    case Bf16Compute::kAuto: return "auto";
    case Bf16Compute::kWiden: return "widen";
    case Bf16Compute::kNative: return "native";
  }
  return "?";
}

Bf16Compute bf16_compute_from_name(std::string_view name, std::string_view what) {
  for (Bf16Compute mode : {Bf16Compute::kAuto, Bf16Compute::kWiden, Bf16Compute::kNative})
    if (bf16_compute_name(mode) == name) return mode;
  fail(what, "=", name, " is not one of auto, widen, native");
}

Bf16Compute default_bf16_compute() {
  const char* env = std::getenv("HYMOE_BF16_COMPUTE");
  if (!env || !*env) return Bf16Compute::kAuto;
  return bf16_compute_from_name(env, "HYMOE_BF16_COMPUTE");
}

void set_bf16_compute(Bf16Compute mode) { g_bf16_compute.store(static_cast<int>(mode)); }

Bf16Compute bf16_compute() {
  const int v = g_bf16_compute.load();
  if (v >= 0) return static_cast<Bf16Compute>(v);
  const Bf16Compute d = default_bf16_compute();
  g_bf16_compute.store(static_cast<int>(d));
  return d;
}

std::string_view quant_compute_name(QuantCompute mode) {
  switch (mode) {
    case QuantCompute::kAuto: return "auto";
    case QuantCompute::kExact: return "exact";
    case QuantCompute::kInt8: return "int8";
  }
  return "?";
}

QuantCompute quant_compute_from_name(std::string_view name, std::string_view what) {
  for (QuantCompute mode : {QuantCompute::kAuto, QuantCompute::kExact, QuantCompute::kInt8})
    if (quant_compute_name(mode) == name) return mode;
  fail(what, "=", name, " is not one of auto, exact, int8");
}

QuantCompute default_quant_compute() {
  const char* env = std::getenv("HYMOE_QUANT_COMPUTE");
  if (!env || !*env) return QuantCompute::kAuto;
  return quant_compute_from_name(env, "HYMOE_QUANT_COMPUTE");
}

void set_quant_compute(QuantCompute mode) { g_quant_compute.store(static_cast<int>(mode)); }

QuantCompute quant_compute() {
  const int v = g_quant_compute.load();
  if (v >= 0) return static_cast<QuantCompute>(v);
  const QuantCompute d = default_quant_compute();
  g_quant_compute.store(static_cast<int>(d));
  return d;
}

}  // namespace hymoe
