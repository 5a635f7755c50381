// The placement files' CSV dialect and number parsing (fuzzed through the count and trace readers).
#include "placement/text_util.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include "hymoe/error.h"

namespace hymoe::placement::detail {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

bool CsvReader::next(std::vector<std::string_view>& fields) {
  while (pos_ < text_.size()) {
    const size_t end = std::min(text_.find('\n', pos_), text_.size());
    const std::string_view line = trim(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    ++line_;
    if (line.empty() || line.front() == '#') continue;
    fields.clear();
    size_t start = 0;
    while (true) {
      const size_t comma = line.find(',', start);
      fields.push_back(trim(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    return true;
  }
  return false;
}

int64_t parse_int(std::string_view field, int64_t lo, int64_t hi, const std::string& label, int64_t line,
                  const char* what) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
  if (ec != std::errc() || end != field.data() + field.size() || field.empty())
    fail(label, ": line ", line, ": ", what, " must be an integer, got ", quote_for_message(field));
  if (v < lo || v > hi) fail(label, ": line ", line, ": ", what, " ", v, " is outside [", lo, ", ", hi, "]");
  return v;
}

int64_t parse_index(std::string_view field, int64_t limit, const std::string& label, int64_t line, const char* what) {
  return parse_int(field, 0, limit - 1, label, line, what);
}

double parse_number(std::string_view field, const std::string& label, int64_t line, const char* what) {
  double v = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
  if (ec == std::errc::result_out_of_range) fail(label, ": line ", line, ": ", what, " ", quote_for_message(field), " is out of range");
  if (ec != std::errc() || end != field.data() + field.size() || field.empty())
    fail(label, ": line ", line, ": ", what, " must be a number, got ", quote_for_message(field));
  return v;
}

std::string format_number(double value) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, end);
}

std::string csv_row(std::initializer_list<int64_t> keys, double value) {
  std::string out;
  for (int64_t k : keys) out += std::to_string(k) + ",";
  return out + format_number(value) + "\n";
}

}  // namespace hymoe::placement::detail
