// Simple encoders of GGUF's block weight formats (every type of src/kernels/formats/gguf_formats.inc): they write valid blocks with a
// plain round-to-nearest choice of scales, for benchmarks and tests that need GGUF weights without a GGUF file.
// Not llama.cpp's quantizers (no error search, no importance weights): a file written by llama.cpp decodes to
// other values. Decoding is quant_formats.h's.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hymoe {

// Whether quantize_row_simple encodes type id `type`.
bool can_quantize_simple(uint32_t type);
// Encodes n values (a multiple of the type's block size) of x into n / block_values blocks at out.
void quantize_row_simple(uint32_t type, const float* x, int64_t n, std::byte* out);

}  // namespace hymoe
