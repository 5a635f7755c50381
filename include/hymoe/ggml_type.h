// ggml's tensor type ids (the `ggml_type` field of a GGUF tensor info) with each type's block geometry, so a
// reader can size and validate any tensor of a known type without being able to decode it. Decoding lives in
// quant_formats.h (kernels); this table is plain data and lives in core.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace hymoe {

// The ids hymoe names; a file may hold any id ggml knows (see ggml_type_traits).
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

struct GgmlTypeTraits {
  std::string_view name;   // ggml's spelling: "Q4_K", "BF16", ...
  uint32_t block_values;   // values per block (1 for plain element types)
  uint32_t block_bytes;    // bytes per block
};

// ggml's type ids run from 0 to kGgmlTypeCount - 1 (llama.cpp 0ce8cd11); some ids inside the range were removed.
inline constexpr uint32_t kGgmlTypeCount = 43;

// The traits of type id `id`, or nullptr when the id is out of range or was removed from ggml (block size 0).
const GgmlTypeTraits* ggml_type_traits(uint32_t id);
// The name of `id` for messages: ggml's name, or "type <id>" for an unknown id.
std::string ggml_type_name(uint32_t id);

}  // namespace hymoe
