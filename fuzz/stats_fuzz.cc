// Fuzz target for the placement statistics readers: any byte string given to the JSON, CSV and safetensors count
// readers and to the trace CSV reader either parses into a table whose shape and values obey the documented
// limits, or is rejected with hymoe::Error. The first byte picks the reader, so one corpus covers all four.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "hymoe/error.h"
#include "hymoe/placement.h"

namespace {

using namespace hymoe::placement;

void check_table(const CountTable& t) {
  if (t.num_layers < 1 || t.num_experts < 1 || t.num_layers > kMaxStatsLayers || t.num_experts > kMaxStatsExperts)
    __builtin_trap();
  if (t.counts.size() != static_cast<size_t>(t.num_layers * t.num_experts)) __builtin_trap();
  for (double c : t.counts)
    if (!std::isfinite(c) || c < 0) __builtin_trap();
  // A table that reads must also summarize and plan without anything but hymoe::Error (small ones: planning a
  // 16M-entry table per input would starve the fuzzer).
  summarize(t);
  if (t.counts.size() <= 4096) plan_gpu_expert_placement(t.to_scores(), t.num_layers, "critical_path");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 4) {
      case 0: check_table(require_table(parse_counts_json(text, "fuzz.json"), "fuzz.json")); break;
      case 1: check_table(parse_counts_csv(text, "fuzz.csv")); break;
      case 2: {
        std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(text.data()),
                                     reinterpret_cast<const std::byte*>(text.data()) + text.size());
        check_table(require_table(parse_counts_safetensors(std::move(bytes), "fuzz.safetensors"), "fuzz.safetensors"));
        break;
      }
      case 3: {
        const RoutingTrace t = parse_trace_csv(text, "fuzz-trace.csv");
        if (t.experts.size() != static_cast<size_t>(t.num_tokens * t.num_layers * t.top_k)) __builtin_trap();
        check_table(t.counts());
        break;
      }
    }
  } catch (const hymoe::Error&) {
  }
  return 0;
}
