// parse_json: nlohmann's parser with a callback that bounds the nesting depth and refuses duplicate keys as the
// document is read. nlohmann's parser is iterative, so a deep document costs no stack until something walks the
// parsed tree recursively; refusing depth while parsing means nothing ever does.
#include "io/json_io.h"

#include <cmath>

#include "hymoe/error.h"

namespace hymoe {

void JsonStructureGuard::open() {
  if (static_cast<int>(open_.size()) >= kMaxJsonDepth)
    fail(label_, ": JSON nested deeper than ", kMaxJsonDepth, " levels of arrays and objects");
  open_.emplace_back();  // an array's set stays empty
}

void JsonStructureGuard::key(std::string_view key) {
  HYMOE_CHECK(!open_.empty(), "a JSON key outside any object");
  if (!open_.back().emplace(key).second)
    fail(label_, ": duplicate key ", quote_for_message(key), " in a JSON object (each key may appear once)");
}

void JsonStructureGuard::close() {
  HYMOE_CHECK(!open_.empty(), "a JSON container closed that was never opened");
  open_.pop_back();
}

namespace {

// nlohmann's message without its "[json.exception.parse_error.101] " tag, and with its excerpt of the input
// ("last read: '...'", "number overflow parsing '...'": the whole of a token, which can be megabytes of digits or
// of an unterminated string) cut to a quoted prefix.
std::string parse_error_text(const std::string& what) {
  std::string text = what;
  if (text.starts_with("[json.exception.")) {
    const size_t close = text.find("] ");
    if (close != std::string::npos) text.erase(0, close + 2);
  }
  for (const std::string_view marker : {std::string_view("last read: '"), std::string_view("parsing '")}) {
    const size_t at = text.find(marker);
    if (at == std::string::npos) continue;
    const size_t begin = at + marker.size();
    // nlohmann's "; expected <kind of token>" follows the excerpt and is short; the excerpt itself may contain
    // "'; expected " (an unterminated string does), so only a last occurrence with a short tail is nlohmann's.
    static constexpr size_t kMaxExpectedTail = 48;
    size_t end = text.rfind("'; expected ");
    std::string tail;
    if (end != std::string::npos && end >= begin && text.size() - end <= kMaxExpectedTail) {
      tail = text.substr(end + 1);
    } else {
      end = text.ends_with('\'') ? text.size() - 1 : text.size();
    }
    return text.substr(0, at) + std::string(marker.substr(0, marker.size() - 1)) +
           quote_for_message(std::string_view(text).substr(begin, end - begin)) + tail;
  }
  return text;
}

}  // namespace

nlohmann::json parse_json(std::string_view text, const std::string& label) {
  JsonStructureGuard guard(label);
  using Event = nlohmann::json::parse_event_t;
  auto callback = [&guard](int /*depth*/, Event event, nlohmann::json& parsed) {
    switch (event) {
      case Event::object_start:
      case Event::array_start: guard.open(); break;
      case Event::key: guard.key(parsed.get_ref<const std::string&>()); break;
      case Event::object_end:
      case Event::array_end: guard.close(); break;
      case Event::value: break;
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), callback);
  } catch (const nlohmann::json::exception& e) {
    fail(label, ": not valid JSON: ", parse_error_text(e.what()));
  }
}

std::string describe_json(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::string: return quote_for_message(value.get_ref<const std::string&>());
    case nlohmann::json::value_t::array: return "an array of " + std::to_string(value.size()) + " entries";
    case nlohmann::json::value_t::object: return "an object of " + std::to_string(value.size()) + " fields";
    case nlohmann::json::value_t::number_float:
      // dump() would print a number too large for a double (1e400, parsed as inf) as null.
      if (!std::isfinite(value.get<double>())) return "a number too large to represent";
      return value.dump();
    default: return value.dump();  // null, a boolean or an integer: short by construction
  }
}

int64_t json_int64(const nlohmann::json& value, const std::string& label, std::string_view field, int64_t lo,
                   int64_t hi) {
  int64_t v = 0;
  if (value.is_number_unsigned()) {
    if (value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(label, ": field '", field, "' = ", value.dump(), " is out of range [", lo, ", ", hi, "]");
    v = static_cast<int64_t>(value.get<uint64_t>());
  } else if (value.is_number_integer()) {
    v = value.get<int64_t>();
  } else if (value.is_number_float() && std::isfinite(value.get<double>()) &&
             std::floor(value.get<double>()) == value.get<double>()) {
    if (std::abs(value.get<double>()) >= 1e15)
      fail(label, ": field '", field, "' = ", value.dump(), " is out of range [", lo, ", ", hi,
           "] or too large to be exact as a float (write it as a plain integer)");
    v = static_cast<int64_t>(value.get<double>());
  } else {
    fail(label, ": field '", field, "' must be an integer, got ", describe_json(value));
  }
  if (v < lo || v > hi) fail(label, ": field '", field, "' = ", v, " is out of range [", lo, ", ", hi, "]");
  return v;
}

}  // namespace hymoe
