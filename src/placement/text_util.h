// Internal: the small CSV dialect of the placement files (comma-separated, one header line, `#` comment lines and
// blank lines skipped, CRLF accepted, no quoting) and number parsing with errors naming file, line and field.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hymoe {
class InputFile;
}

namespace hymoe::placement::detail {

class CsvReader {
 public:
  CsvReader(std::string_view text, std::string label) : text_(text), label_(std::move(label)) {}
  // The next non-blank, non-comment line split at commas (fields trimmed of spaces); false at the end.
  bool next(std::vector<std::string_view>& fields);
  int64_t line() const { return line_; }  // 1-based number of the line last returned

 private:
  std::string_view text_;
  std::string label_;
  size_t pos_ = 0;
  int64_t line_ = 0;
};

// Splits one line (without its newline) at commas into trimmed fields; false for a blank or `#` comment line.
bool split_csv_line(std::string_view line, std::vector<std::string_view>& fields);

// The same dialect read from a regular file in blocks, so a reader that makes several passes over a large file
// holds one block at a time, not the file; each reader reads the one open descriptor from its start. Fields point
// into the block and stay valid until the next call.
class FileCsvReader {
 public:
  static constexpr size_t kBlockBytes = size_t{1} << 20;
  static constexpr size_t kMaxLineBytes = size_t{1} << 20;  // a longer line is an error naming the file and line

  explicit FileCsvReader(const InputFile& file);  // a regular file (HYMOE_CHECK)
  bool next(std::vector<std::string_view>& fields);
  int64_t line() const { return line_; }

 private:
  const InputFile& file_;
  uint64_t offset_ = 0;
  std::string block_;
  size_t pos_ = 0;
  bool eof_ = false;
  int64_t line_ = 0;
};

enum class StatsFormat { kJson, kCsv, kSafetensors };
// The format of a count or trace file: the one its name's extension says (.json, .csv, .safetensors). A name
// without one of those, when `head` (its first bytes) is given, gets the format they show: a stream's name
// (/dev/fd/63, /dev/stdin) says nothing. Without `head`, an error naming the file.
StatsFormat stats_format(const std::string& path, std::optional<std::string_view> head = std::nullopt);

// A decimal integer in [0, limit), or an error naming the file, line and field.
int64_t parse_index(std::string_view field, int64_t limit, const std::string& label, int64_t line, const char* what);
// A decimal integer in [lo, hi].
int64_t parse_int(std::string_view field, int64_t lo, int64_t hi, const std::string& label, int64_t line,
                  const char* what);
// A decimal floating-point number (finite or not: callers check).
double parse_number(std::string_view field, const std::string& label, int64_t line, const char* what);
// "a,b,...,value\n" with integers as integers and the value in shortest round-trip form.
std::string csv_row(std::initializer_list<int64_t> keys, double value);
// Shortest round-trip decimal form of a double ("3", "0.25", "1e-07").
std::string format_number(double value);

}  // namespace hymoe::placement::detail
