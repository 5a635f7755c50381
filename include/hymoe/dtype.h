// Element types hymoe reads, stores and computes with, and exact conversions between the 16-bit floating formats
// and float32. Shared by io (file dtypes) and kernels (bf16 weights), so it lives in core.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace hymoe {

// kF8E4M3 is float8 e4m3fn (bias 7, no infinities, 0x7f/0xff NaN), the element of block-scaled FP8 checkpoints.
enum class DType { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU64, kU32, kU16, kU8, kBool, kF8E4M3 };

// Size of one element in bytes.
int dtype_size(DType dtype);
// The safetensors spelling: "F32", "BF16", ...
std::string_view dtype_name(DType dtype);
// Inverse of dtype_name; nullopt for names hymoe does not know.
std::optional<DType> dtype_from_name(std::string_view name);
// F64, F32, F16 or BF16: the dtypes that can hold activations and weights (an integer or BOOL tensor where one
// of those is expected is a mistake, not something to convert).
bool dtype_is_floating(DType dtype);

// bfloat16 is the top half of a float32; rounding is to nearest, ties to even, and NaN stays NaN.
inline uint16_t float_to_bf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}
inline float bf16_to_float(uint16_t value) { return std::bit_cast<float>(static_cast<uint32_t>(value) << 16); }

// float8 e4m3fn, subnormals included, exactly (every value fits float32 and bf16).
float f8_e4m3_to_float(uint8_t value);

// IEEE 754 binary16, subnormals included.
float f16_to_float(uint16_t value);
uint16_t float_to_f16(float value);

}  // namespace hymoe
