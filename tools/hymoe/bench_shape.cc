// Benchmark shape files: JSON through the project's one parser, every field checked with the file and field named.
#include "bench_shape.h"

#include "hymoe/error.h"
#include "hymoe/file_io.h"
#include "io/json_io.h"

namespace hymoe::tool {

BenchShape parse_bench_shape(std::string_view text, const std::string& label) {
  const nlohmann::json j = parse_json(text, label);
  if (!j.is_object()) fail(label, ": a shape file must be a JSON object, got ", describe_json(j));
  auto string_field = [&](const char* key, const char* fallback) -> std::string {
    if (!j.contains(key)) {
      if (fallback) return fallback;
      fail(label, ": missing field '", key, "'");
    }
    const nlohmann::json& v = j[key];
    if (!v.is_string()) fail(label, ": field '", key, "' must be a string, got ", describe_json(v));
    return v.get<std::string>();
  };
  auto int_field = [&](const char* key) {
    if (!j.contains(key)) fail(label, ": missing field '", key, "'");
    return json_int64(j[key], label, key);
  };
  BenchShape s;
  s.name = string_field("name", nullptr);
  s.model = string_field("model", nullptr);
  s.dim = int_field("dim");
  s.hidden = int_field("expert_hidden");
  s.experts = int_field("experts");
  s.top_k = int_field("top_k");
  s.shared = int_field("shared_experts");
  // The timed layer is SwiGLU experts under a softmax router; a shape that says otherwise is refused rather than
  // timed as something it is not.
  const std::string activation = string_field("activation", "swiglu");
  const std::string router = string_field("router", "softmax");
  if (activation != "swiglu" || router != "softmax")
    fail(label, ": activation ", quote_for_message(activation), " with router ", quote_for_message(router),
         ": the bench times SwiGLU experts under a softmax router only");
  if (s.dim < 1 || s.hidden < 1 || s.experts < 1 || s.top_k < 1 || s.top_k > s.experts || s.shared < 0)
    fail(label, ": inconsistent shape (dim ", s.dim, ", expert_hidden ", s.hidden, ", experts ", s.experts,
         ", top_k ", s.top_k, ", shared_experts ", s.shared, ")");
  return s;
}

BenchShape read_bench_shape(const std::string& path) {
  return parse_bench_shape(read_text_file(path, kMaxConfigFileBytes), path);
}

}  // namespace hymoe::tool
