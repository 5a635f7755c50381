// The placement files' CSV dialect and number parsing (fuzzed through the count and trace readers).
#include "placement/text_util.h"

#include <charconv>
#include <cmath>
#include <sstream>

#include "hymoe/error.h"
#include "hymoe/file_io.h"

namespace hymoe::placement::detail {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

bool split_csv_line(std::string_view line, std::vector<std::string_view>& fields) {
  line = trim(line);
  if (line.empty() || line.front() == '#') return false;
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

bool CsvReader::next(std::vector<std::string_view>& fields) {
  while (pos_ < text_.size()) {
    const size_t end = std::min(text_.find('\n', pos_), text_.size());
    const std::string_view line = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    ++line_;
    if (split_csv_line(line, fields)) return true;
  }
  return false;
}

FileCsvReader::FileCsvReader(const InputFile& file) : file_(file) { HYMOE_CHECK(!file.is_stream(), file.path()); }

bool FileCsvReader::next(std::vector<std::string_view>& fields) {
  while (true) {
    const size_t end = block_.find('\n', pos_);
    if (end == std::string::npos && !eof_) {  // refill: keep the partial line, append the next block
      block_.erase(0, pos_);
      pos_ = 0;
      if (block_.size() > kMaxLineBytes)
        fail(file_.path(), ": line ", line_ + 1, " is longer than ", kMaxLineBytes, " bytes");
      const size_t had = block_.size();
      block_.resize(had + kBlockBytes);
      const size_t got = file_.read_at(offset_, block_.data() + had, kBlockBytes);
      block_.resize(had + got);
      offset_ += got;
      if (got == 0) eof_ = true;
      continue;
    }
    if (pos_ >= block_.size()) return false;
    const size_t stop = end == std::string::npos ? block_.size() : end;
    const std::string_view line(block_.data() + pos_, stop - pos_);
    pos_ = stop + 1;
    ++line_;
    if (split_csv_line(line, fields)) return true;
  }
}

StatsFormat stats_format(const std::string& path, std::optional<std::string_view> head) {
  if (path.ends_with(".json")) return StatsFormat::kJson;
  if (path.ends_with(".csv")) return StatsFormat::kCsv;
  if (path.ends_with(".safetensors")) return StatsFormat::kSafetensors;
  if (!head) fail(path, ": unknown statistics format; the name must end in .json, .csv or .safetensors");
  const std::string_view h = *head;
  // safetensors: an 8-byte little-endian header length (high bytes 0 for any header under 100 MiB), then '{'.
  if (h.size() >= 9 && h[8] == '{' && h[5] == '\0' && h[6] == '\0' && h[7] == '\0') return StatsFormat::kSafetensors;
  const size_t first = h.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && (h[first] == '{' || h[first] == '[')) return StatsFormat::kJson;
  return StatsFormat::kCsv;
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
