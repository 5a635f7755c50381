// Fuzz target for the JSON readers of untrusted input outside the statistics files: the JSON helper itself, MoE
// config files, PLAN.json and bench shape files. Any byte string either parses into a value that obeys the
// reader's documented limits, or is rejected with hymoe::Error. Anything else (a crash, a stack overflow on deep
// nesting, a sanitizer report, another exception type) is a bug. The first byte picks the reader, so one corpus
// covers all four.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "bench_shape.h"
#include "hymoe/error.h"
#include "hymoe/moe.h"
#include "hymoe/placement/plan_file.h"
#include "io/json_io.h"

namespace {

// Every message is bounded: no reader may echo the input whole.
void check_message(const hymoe::Error& e, size_t input_size) {
  const std::string_view what = e.what();
  if (what.size() > 1024 && what.size() > input_size) __builtin_trap();
  for (const char c : what)
    if (static_cast<unsigned char>(c) < 0x20 && c != '\n') __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 4) {
      case 0: {
        const nlohmann::json j = hymoe::parse_json(text, "fuzz.json");
        (void)j.dump();  // recursive: safe only because the depth is bounded
        break;
      }
      case 1: {
        const hymoe::MoEConfig c = hymoe::parse_moe_config(text, "fuzz-config.json");
        c.validate();
        if (c.dim < 1 || c.dim > (1 << 20) || c.hidden_dim < 1 || c.hidden_dim > (1 << 20) || c.top_k > c.num_experts)
          __builtin_trap();
        break;
      }
      case 2: {
        const hymoe::placement::PlanMask m = hymoe::placement::parse_plan_json(std::string(text), "fuzz-PLAN.json");
        if (m.num_layers < 1 || m.num_experts < 1 || m.mask.size() != static_cast<size_t>(m.num_layers * m.num_experts))
          __builtin_trap();
        for (uint8_t v : m.mask)
          if (v > 1) __builtin_trap();
        break;
      }
      case 3: {
        const hymoe::tool::BenchShape s = hymoe::tool::parse_bench_shape(text, "fuzz-shape.json");
        if (s.dim < 1 || s.hidden < 1 || s.experts < 1 || s.top_k < 1 || s.top_k > s.experts || s.shared < 0)
          __builtin_trap();
        break;
      }
    }
  } catch (const hymoe::Error& e) {
    check_message(e, size);
  }
  return 0;
}
