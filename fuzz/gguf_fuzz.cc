// Fuzz target: any byte string given to the GGUF reader either parses, with every tensor's bytes inside the image
// and of the size its type and shape say, or is rejected with hymoe::Error. Parsed metadata is printed, the MoE
// config and blocks are read (read_gguf_moe_config, find_gguf_moe_block) and decodable tensors are dequantized,
// so the sanitizers see every byte a reader would touch. Anything else (a crash, a sanitizer report, another
// exception type) is a bug. Seeds: fuzz/corpus/gguf, small files written by
// tests/data/gguf/make_quant_checks.py --fuzz-seeds (MXFP4 among the types), and four tiny MoE models (qwen3moe,
// qwen2moe, deepseek2, gpt-oss with MXFP4 experts and biases).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "hymoe/error.h"
#include "hymoe/gguf.h"
#include "hymoe/gguf_moe.h"
#include "hymoe/quant_formats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data), reinterpret_cast<const std::byte*>(data) + size);
  // Odd sizes read nested arrays too, so both paths of the array parser are fuzzed.
  const hymoe::GgufReadOptions options{.allow_nested_arrays = (size & 1) != 0};
  try {
    const auto file = hymoe::GgufFile::from_bytes(std::move(bytes), "fuzz-input", options);
    size_t text = 0;
    for (const auto& [key, value] : file.metadata()) text += key.size() + value.to_display(4).size();
    if (text == SIZE_MAX) __builtin_trap();
    std::vector<float> values;
    for (const auto& t : file.tensors()) {
      const auto span = file.bytes(t);
      if (span.size() != t.nbytes) __builtin_trap();
      if (hymoe::can_dequantize(t.type) && t.numel() <= (1u << 18)) {
        values.resize(static_cast<size_t>(t.numel()));
        hymoe::dequantize_row_ref(t.type, span.data(), values.data(), static_cast<int64_t>(t.numel()));
      }
    }
    // The MoE config reader and block finder trust nothing in the metadata either (what `hymoe inspect` runs).
    const hymoe::GgufMoeConfig config = hymoe::read_gguf_moe_config(file);
    for (uint32_t block = 0; block < config.block_count && block < 4; ++block) {
      if (config.expert_count == 0 || !hymoe::gguf_block_is_moe(file, block)) continue;
      const hymoe::GgufMoeBlock b = hymoe::find_gguf_moe_block(file, config, block);
      if (b.total_bytes() < b.expert_bytes(config.expert_count)) __builtin_trap();
    }
  } catch (const hymoe::Error&) {
  }
  return 0;
}
