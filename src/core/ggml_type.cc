// ggml's type table: block geometry for every type id a GGUF file may hold. The numbers are ggml's
// (ggml.c type_traits, cross-checked against gguf-py 0.19.0's GGML_QUANT_SIZES, which still lists Q8_1 with
// the 40-byte block ggml replaced by 36 bytes long ago).
#include "hymoe/ggml_type.h"

#include <array>

namespace hymoe {
namespace {

constexpr GgmlTypeTraits kRemoved{"", 0, 0};

// Indexed by id. Removed ids (4, 5, 31-33, 36-38) have block size 0, as in ggml. Id 42 (Q2_0) is newer than
// the layouts hymoe knows, so it is rejected like a removed id.
constexpr std::array<GgmlTypeTraits, kGgmlTypeCount> kTraits = {{
    {"F32", 1, 4},         {"F16", 1, 2},         {"Q4_0", 32, 18},       {"Q4_1", 32, 20},     kRemoved,
    kRemoved,              {"Q5_0", 32, 22},      {"Q5_1", 32, 24},       {"Q8_0", 32, 34},     {"Q8_1", 32, 36},
    {"Q2_K", 256, 84},     {"Q3_K", 256, 110},    {"Q4_K", 256, 144},     {"Q5_K", 256, 176},   {"Q6_K", 256, 210},
    {"Q8_K", 256, 292},    {"IQ2_XXS", 256, 66},  {"IQ2_XS", 256, 74},    {"IQ3_XXS", 256, 98}, {"IQ1_S", 256, 50},
    {"IQ4_NL", 32, 18},    {"IQ3_S", 256, 110},   {"IQ2_S", 256, 82},     {"IQ4_XS", 256, 136}, {"I8", 1, 1},
    {"I16", 1, 2},         {"I32", 1, 4},         {"I64", 1, 8},          {"F64", 1, 8},        {"IQ1_M", 256, 56},
    {"BF16", 1, 2},        kRemoved,              kRemoved,               kRemoved,             {"TQ1_0", 256, 54},
    {"TQ2_0", 256, 66},    kRemoved,              kRemoved,               kRemoved,             {"MXFP4", 32, 17},
    {"NVFP4", 64, 36},     {"Q1_0", 128, 18},     kRemoved,
}};

}  // namespace

const GgmlTypeTraits* ggml_type_traits(uint32_t id) {
  if (id >= kGgmlTypeCount || kTraits[id].block_values == 0) return nullptr;
  return &kTraits[id];
}

std::string ggml_type_name(uint32_t id) {
  if (const GgmlTypeTraits* traits = ggml_type_traits(id)) return std::string(traits->name);
  return "type " + std::to_string(id);
}

}  // namespace hymoe
