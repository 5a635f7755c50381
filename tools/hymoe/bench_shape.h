// A benchmark shape file (bench/shapes/*.json): one model's MoE layer dimensions. Parsed apart from the benchmark so
// the fuzz target can reach the parser without the benchmark around it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace hymoe::tool {

struct BenchShape {
  std::string name, model;
  int64_t dim = 0, hidden = 0, experts = 0, top_k = 0, shared = 0;
};

// Parses a shape file's text; throws hymoe::Error starting with `label` and naming the field at fault.
BenchShape parse_bench_shape(std::string_view text, const std::string& label);
// Reads (at most kMaxConfigFileBytes of a regular file) and parses `path`.
BenchShape read_bench_shape(const std::string& path);

}  // namespace hymoe::tool
