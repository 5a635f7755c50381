// DType names and sizes, and IEEE binary16 conversions (done in integer arithmetic so they are exact and need no
// F16C instructions).
#include "hymoe/dtype.h"

#include <array>
#include <cmath>
#include <limits>

namespace hymoe {
namespace {
struct DTypeEntry {
  DType dtype;
  std::string_view name;
  int size;
};
constexpr std::array<DTypeEntry, 14> kDTypes{{{DType::kF64, "F64", 8},  {DType::kF32, "F32", 4},
                                              {DType::kF16, "F16", 2},  {DType::kBF16, "BF16", 2},
                                              {DType::kI64, "I64", 8},  {DType::kI32, "I32", 4},
                                              {DType::kI16, "I16", 2},  {DType::kI8, "I8", 1},
                                              {DType::kU64, "U64", 8},  {DType::kU32, "U32", 4},
                                              {DType::kU16, "U16", 2},  {DType::kU8, "U8", 1},
                                              {DType::kBool, "BOOL", 1}, {DType::kF8E4M3, "F8_E4M3", 1}}};
const DTypeEntry& entry(DType dtype) { return kDTypes[static_cast<size_t>(dtype)]; }
}  // namespace

int dtype_size(DType dtype) { return entry(dtype).size; }
std::string_view dtype_name(DType dtype) { return entry(dtype).name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& e : kDTypes)
    if (e.name == name) return e.dtype;
  return std::nullopt;
}

bool dtype_is_floating(DType dtype) {
  return dtype == DType::kF64 || dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

float f8_e4m3_to_float(uint8_t v) {
  const bool negative = (v & 0x80u) != 0;
  const int exponent = (v >> 3) & 0xf;
  const int mantissa = v & 0x7;
  if (exponent == 0xf && mantissa == 0x7) return std::numeric_limits<float>::quiet_NaN();
  // Normal: 2^(e-7) * (1 + m/8); subnormal (e = 0): 2^-6 * m/8.
  const float magnitude = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -9)
                                        : std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);
  return negative ? -magnitude : magnitude;
}

float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float32.
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t float_to_f16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to infinity
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero): round abs * 2^24 to the nearest integer, ties to even.
    const float scaled = std::bit_cast<float>(abs) * 16777216.0f;
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled)));
  }
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

}  // namespace hymoe
