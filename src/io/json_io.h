// Internal: the one way hymoe parses JSON from files and the command line. Every reader of untrusted JSON (MoE
// configs, safetensors headers, PLAN.json, bench shape files, count files) goes through parse_json or, for a
// streaming reader, through JsonStructureGuard, so each gets the same limits and the same messages:
//   - nesting deeper than kMaxJsonDepth is refused while parsing, before anything recursive (printing, copying,
//     comparing) can meet it;
//   - a key that appears twice in one object is an error naming the key and the file (nlohmann keeps the last
//     silently);
//   - messages name the source label and quote input only through quote_for_message.
// nlohmann_json stays private to the library, its tools and tests: this header is not installed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace hymoe {

// The deepest nesting of arrays and objects any hymoe JSON input may have (the real inputs need 3 or 4).
inline constexpr int kMaxJsonDepth = 64;

// Depth and duplicate-key bookkeeping for one JSON document, driven by a parser's events. parse_json drives it
// from nlohmann's parser callback; a streaming (SAX) reader calls the same three methods itself.
class JsonStructureGuard {
 public:
  explicit JsonStructureGuard(std::string label) : label_(std::move(label)) {}
  // An array or object opens: throws hymoe::Error naming the label past kMaxJsonDepth.
  void open();
  // The key of the innermost open object: throws hymoe::Error naming the key and the label when seen before.
  void key(std::string_view key);
  // The innermost open array or object closes.
  void close();

 private:
  std::string label_;
  // One entry per open container: the keys seen so far for an object, an empty set for an array.
  std::vector<std::unordered_set<std::string>> open_;
};

// Parses `text` as one JSON document with the limits above. Throws hymoe::Error starting with `label` for
// malformed JSON (with line and column, and at most a short quoted excerpt of the input), nesting past
// kMaxJsonDepth, and duplicate keys.
nlohmann::json parse_json(std::string_view text, const std::string& label);

// A short description of a JSON value for messages: scalars as written (strings quoted by quote_for_message),
// arrays and objects by their kind and size, never their contents.
std::string describe_json(const nlohmann::json& value);

// The integer in field `field` of a parsed document: a JSON integer, or a number with an integral value up to 1e15
// written as a float (64.0, 1e3), in [lo, hi]. Anything else (a fraction, a string, a number past int64 that
// nlohmann would keep as unsigned and a plain get<int64_t>() would wrap to a negative) is an error naming the label,
// the field and the value.
int64_t json_int64(const nlohmann::json& value, const std::string& label, std::string_view field,
                   int64_t lo = std::numeric_limits<int64_t>::min(), int64_t hi = std::numeric_limits<int64_t>::max());

}  // namespace hymoe
