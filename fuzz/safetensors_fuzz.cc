// Fuzz target: any byte string given to the safetensors reader either parses, with every tensor's bytes inside
// the image and of the size its dtype and shape say, or is rejected with hymoe::Error. Anything else (a crash,
// a sanitizer report, another exception type) is a bug.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "hymoe/error.h"
#include "hymoe/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data), reinterpret_cast<const std::byte*>(data) + size);
  try {
    const auto file = hymoe::SafetensorsFile::from_bytes(std::move(bytes), "fuzz-input");
    for (const auto& t : file.tensors()) {
      // Converting touches every byte of every tensor: the sanitizers catch any read outside the image.
      if (t.bytes() <= (1u << 20)) {
        const hymoe::Tensor v = file.read_f32(t.name);
        if (static_cast<uint64_t>(v.numel()) * hymoe::dtype_size(t.dtype) != t.bytes()) __builtin_trap();
      }
    }
  } catch (const hymoe::Error&) {
  }
  return 0;
}
