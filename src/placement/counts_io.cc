// Count-table files: JSON, CSV and safetensors readers (fuzzed: fuzz/stats_fuzz.cc) and writers. A reader trusts
// nothing: shapes are checked before allocation, every value must be a finite non-negative number.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <limits>
#include <optional>

#include <sys/mman.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "hymoe/error.h"
#include "hymoe/file_io.h"
#include "hymoe/placement/stats.h"
#include "hymoe/safetensors.h"
#include "io/json_io.h"
#include "placement/text_util.h"

namespace hymoe::placement {

CountTable::CountTable(int64_t layers, int64_t experts)
    : num_layers(layers), num_experts(experts), counts(static_cast<size_t>(layers * experts), 0.0) {}

double CountTable::layer_total(int64_t layer) const {
  double t = 0;
  for (int64_t e = 0; e < num_experts; ++e) t += at(layer, e);
  return t;
}

double CountTable::total() const {
  double t = 0;
  for (double c : counts) t += c;
  return t;
}

namespace {

// Every count finite and non-negative is the readers' promise; here only the sum is checked, in double, where a
// sum of counts below kMaxCountTotal cannot overflow.
void check_total(const CountTable& t, const std::string& label) {
  const double total = t.total();
  if (!(total <= kMaxCountTotal))
    fail(label, ": counts sum to ", total, ", more than the limit of ", kMaxCountTotal,
         " (the planner sums scores in float32); scale the counts down");
}

}  // namespace

Tensor CountTable::to_scores(const std::string& label) const {
  check_total(*this, label);
  std::vector<float> v(counts.begin(), counts.end());
  return Tensor(Shape{num_layers, num_experts}, std::move(v));
}

void CountTable::add(const CountTable& other, const std::string& label) {
  if (other.num_layers != num_layers || other.num_experts != num_experts)
    fail(label, ": count table is (", other.num_layers, ", ", other.num_experts, "), expected (", num_layers, ", ",
         num_experts, ") like the tables before it");
  check_total(other, label);
  for (size_t i = 0; i < counts.size(); ++i) counts[i] += other.counts[i];
  check_total(*this, label + " (added to the tables before it)");
}

namespace {

void check_value(double v, const std::string& label, const std::string& where) {
  if (!std::isfinite(v)) fail(label, ": ", where, " must be a finite number, got ", v);
  if (v < 0) fail(label, ": ", where, " must be a non-negative count, got ", v);
}

void check_table_size(int64_t layers, int64_t experts, const std::string& label) {
  if (layers < 1 || experts < 1) fail(label, ": count table must have at least one layer and one expert, got (",
                                      layers, ", ", experts, ")");
  if (layers > kMaxStatsLayers) fail(label, ": ", layers, " layers exceed the limit of ", kMaxStatsLayers);
  if (experts > kMaxStatsExperts) fail(label, ": ", experts, " experts per layer exceed the limit of ", kMaxStatsExperts);
  if (layers * experts > kMaxStatsCells)
    fail(label, ": ", layers, " x ", experts, " entries exceed the limit of ", kMaxStatsCells);
}

constexpr size_t kMaxTableRank = 8;

// nlohmann's messages quote the token they stopped at, which can be megabytes of input: keep a short, printable
// prefix.
std::string short_message(std::string_view what) {
  constexpr size_t kMax = 200;
  std::string out(what.substr(0, kMax));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  return what.size() > kMax ? out + "..." : out;
}

// A streaming (SAX) reader of a JSON count file: checks the nesting depth, duplicate keys, the table's rank and
// rectangular shape and every value as the parser produces them, and never builds a document. Run twice: the first
// pass (`out` null) finds the shape, the second writes the values into storage sized exactly for it.
class CountsSax : public nlohmann::json_sax<nlohmann::json> {
 public:
  CountsSax(const std::string& label, double* out) : label_(label), out_(out), guard_(label) {}

  Shape shape() const { return Shape(shape_.begin(), shape_.end()); }
  size_t values() const { return values_; }

  // Called after the parse: a file without the table, or one whose table never opened, is an error.
  void finish() const {
    if (!seen_table_)
      fail(label_, ": a JSON count file must be a nested list or an object with an \"activation_freq\" field");
  }

  bool null() override { return scalar("null"); }
  bool boolean(bool) override { return scalar("a boolean"); }
  bool string(string_t&) override { return scalar("a string"); }
  bool binary(binary_t&) override { return scalar("binary data"); }
  bool number_integer(number_integer_t v) override { return number(static_cast<double>(v)); }
  bool number_unsigned(number_unsigned_t v) override { return number(static_cast<double>(v)); }
  bool number_float(number_float_t v, const string_t&) override { return number(v); }

  bool start_object(std::size_t) override {
    if (in_table()) fail(label_, ": ", path(), " must be a number, got an object");
    if (table_next_) fail(label_, ": activation_freq must be a list of lists of counts, got an object");
    if (depth_ == 0) root_is_object_ = true;
    open();
    return true;
  }
  bool key(string_t& k) override {
    guard_.key(k);
    table_next_ = depth_ == 1 && k == "activation_freq";
    return true;
  }
  bool end_object() override {
    close();
    after_value();
    return true;
  }

  bool start_array(std::size_t) override {
    if (table_next_ || (depth_ == 0 && !root_is_object_)) {  // the table's outermost list
      table_next_ = false;
      seen_table_ = true;
      table_depth_ = depth_;
      open();
      counts_.assign(1, 0);
      return true;
    }
    if (!in_table()) {
      open();
      return true;
    }
    const size_t level = depth_ - table_depth_;  // this list's level in the table
    if (rank_ && level >= *rank_) fail(label_, ": ", path(), " is a list where a number was expected (ragged nesting)");
    if (level >= kMaxTableRank) fail(label_, ": activation_freq: lists nested deeper than ", kMaxTableRank, " levels");
    open();
    counts_.push_back(0);
    return true;
  }
  bool end_array() override {
    if (in_table()) {
      const size_t level = depth_ - 1 - table_depth_;
      const int64_t n = counts_.back();
      if (shape_.size() <= level) shape_.resize(level + 1, -1);
      if (shape_[level] < 0) shape_[level] = n;
      else if (shape_[level] != n)
        fail(label_, ": ", path_to(level), " has ", n, " entries, expected ", shape_[level],
             " (rows must all have the same length)");
      counts_.pop_back();
    }
    close();
    after_value();
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    fail(label_, ": not valid JSON: ", short_message(e.what()));
  }

 private:
  bool in_table() const { return table_depth_ != kNone && depth_ > table_depth_; }

  // Depth and duplicate keys are checked by the project's one JSON guard, as parse_json checks them.
  void open() {
    guard_.open();
    ++depth_;
  }
  void close() {
    guard_.close();
    --depth_;
  }

  // A value ended: count it as an element of the list around it, if that list is the table's.
  void after_value() {
    if (in_table()) ++counts_.back();
    if (table_depth_ != kNone && depth_ == table_depth_) table_depth_ = kDone;
  }

  bool scalar(const char* what) {
    if (in_table()) fail(label_, ": ", path(), " must be a number, got ", what);
    if (table_next_ || depth_ == 0) fail(label_, ": activation_freq must be a list of lists of counts, got ", what);
    after_value();
    return true;
  }

  bool number(double v) {
    if (!in_table()) return scalar("a number");
    const size_t level = depth_ - table_depth_;
    if (!rank_) {
      if (shape_.size() > level) fail(label_, ": ", path(), " is a number where a list was expected (ragged nesting)");
      rank_ = level;
    }
    if (level != *rank_) fail(label_, ": ", path(), " is a number where a list was expected (ragged nesting)");
    if (!std::isfinite(v)) fail(label_, ": ", path(), " must be a finite number, got ", v);
    if (v < 0) fail(label_, ": ", path(), " must be a non-negative count, got ", v);
    if (values_ >= static_cast<size_t>(kMaxStatsCells)) fail(label_, ": more than ", kMaxStatsCells, " values");
    if (out_) out_[values_] = v;
    ++values_;
    after_value();
    return true;
  }

  // "activation_freq[2][5]": where the parser is, for messages only.
  std::string path() const { return path_to(counts_.size()); }
  std::string path_to(size_t levels) const {
    std::string p = "activation_freq";
    for (size_t i = 0; i < levels && i < counts_.size(); ++i) {  // appended piecewise: GCC 12 -Wrestrict noise
      p += '[';
      p += std::to_string(counts_[i]);
      p += ']';
    }
    return p;
  }

  static constexpr size_t kNone = SIZE_MAX, kDone = SIZE_MAX - 1;
  const std::string& label_;
  double* out_;
  size_t depth_ = 0, table_depth_ = kNone, values_ = 0;
  bool root_is_object_ = false, table_next_ = false, seen_table_ = false;
  std::optional<size_t> rank_;
  std::vector<int64_t> shape_;       // per table level, -1 until the first list of that level closes
  std::vector<int64_t> counts_;      // per open table list: entries so far
  JsonStructureGuard guard_;
};

// Two passes over the same input (`parse(sax)` runs one): shape and checks first, then the values.
template <typename Parse>
StatsArray parse_counts_json_with(Parse parse, const std::string& label) {
  CountsSax first(label, nullptr);
  parse(first);
  first.finish();
  StatsArray a;
  a.shape = first.shape();
  a.values.assign(first.values(), 0.0);
  CountsSax second(label, a.values.data());
  parse(second);
  if (second.values() != a.values.size() || second.shape() != a.shape)
    fail(label, ": the file changed while it was being read");
  return a;
}

}  // namespace

namespace {

// The table takes the array's storage: a count file's values exist once in memory.
CountTable table_from(StatsArray&& array, const std::string& label) {
  if (array.shape.size() != 2)
    fail(label, ": activation_freq must be a 2D tensor of shape (num_layers, num_experts), got shape ",
         shape_to_string(array.shape));
  check_table_size(array.shape[0], array.shape[1], label);
  CountTable t;
  t.num_layers = array.shape[0];
  t.num_experts = array.shape[1];
  HYMOE_CHECK(array.values.size() == static_cast<size_t>(t.num_layers * t.num_experts), label);
  t.counts = std::move(array.values);
  check_total(t, label);
  return t;
}

}  // namespace

CountTable require_table(const StatsArray& array, const std::string& label) { return table_from(StatsArray(array), label); }

CountTable require_table(StatsArray&& array, const std::string& label) { return table_from(std::move(array), label); }

StatsArray parse_counts_json(std::string_view text, const std::string& label) {
  return parse_counts_json_with([&](CountsSax& sax) { nlohmann::json::sax_parse(text.begin(), text.end(), &sax); },
                                label);
}

namespace {

// A regular file streamed through the SAX reader from its descriptor, once per pass: the document is never held
// whole. A duplicate shares the descriptor's offset, so each pass seeks back to the start.
StatsArray read_counts_json(const InputFile& in) {
  return parse_counts_json_with(
      [&](CountsSax& sax) {
        const int fd = dup(in.fd());
        if (fd >= 0 && lseek(fd, 0, SEEK_SET) != 0) {
          close(fd);
          fail(in.path(), ": cannot read from the start: ", std::strerror(errno));
        }
        std::FILE* file = fd < 0 ? nullptr : fdopen(fd, "rb");
        if (file == nullptr) {
          if (fd >= 0) close(fd);
          fail(in.path(), ": cannot read: ", std::strerror(errno));
        }
        const std::unique_ptr<std::FILE, int (*)(std::FILE*)> owner(file, &std::fclose);
        nlohmann::json::sax_parse(file, &sax);
        if (std::ferror(file)) fail(in.path(), ": read error");
      },
      in.path());
}

}  // namespace

namespace {

// Two passes over the rows (`open` returns a fresh reader each time): the first checks every row and finds the
// table's size, the second fills a table of exactly that size, so memory is the table (8 bytes a cell), whatever
// the file's size. An unfilled cell is NaN until the end, which is how a pair listed twice is found.
template <typename Open>
CountTable parse_counts_csv_with(Open open, const std::string& label) {
  std::vector<std::string_view> header, row;
  auto start = [&](auto& csv) {
    if (!csv.next(header)) fail(label, ": empty file; expected the header `layer,expert,count`");
    auto is = [&](size_t i, std::string_view a, std::string_view b) {
      return i < header.size() && (header[i] == a || header[i] == b);
    };
    if (header.size() != 3 || !is(0, "layer", "layer_id") || !is(1, "expert", "expert_id") || !is(2, "count", "count"))
      fail(label, ": line ", csv.line(), ": header must be `layer,expert,count`");
  };
  struct Cell {
    int64_t layer, expert;
    double count;
  };
  auto parse = [&](auto& csv) {
    if (row.size() != 3) fail(label, ": line ", csv.line(), ": expected 3 fields, got ", row.size());
    const Cell c{detail::parse_index(row[0], kMaxStatsLayers, label, csv.line(), "layer"),
                 detail::parse_index(row[1], kMaxStatsExperts, label, csv.line(), "expert"),
                 detail::parse_number(row[2], label, csv.line(), "count")};
    check_value(c.count, label, "line " + std::to_string(csv.line()) + ": count");
    return c;
  };
  int64_t layers = 0, experts = 0;
  {
    auto csv = open();
    start(csv);
    while (csv.next(row)) {
      const Cell c = parse(csv);
      layers = std::max(layers, c.layer + 1);
      experts = std::max(experts, c.expert + 1);
      check_table_size(layers, experts, label);
    }
  }
  if (layers == 0) fail(label, ": no count rows after the header");
  CountTable t(layers, experts);
  std::fill(t.counts.begin(), t.counts.end(), std::numeric_limits<double>::quiet_NaN());
  auto csv = open();
  start(csv);
  while (csv.next(row)) {
    const Cell c = parse(csv);
    if (c.layer >= layers || c.expert >= experts) fail(label, ": the file changed while it was being read");
    double& cell = t.at(c.layer, c.expert);
    if (!std::isnan(cell)) fail(label, ": line ", csv.line(), ": (layer ", c.layer, ", expert ", c.expert, ") listed twice");
    cell = c.count;
  }
  for (double& c : t.counts)
    if (std::isnan(c)) c = 0;  // missing pairs count 0
  check_total(t, label);
  return t;
}

}  // namespace

CountTable parse_counts_csv(std::string_view text, const std::string& label) {
  return parse_counts_csv_with([&] { return detail::CsvReader(text, label); }, label);
}

namespace {

// The count table of a validated safetensors file, converted element by element from the stored bytes (no float32
// copy of the tensor). `release` is called with each range of bytes already summed, so a memory-mapped file can
// hand its pages back and a (steps, L, E) recorder dump costs one block of the file at a time, not the file.
template <typename Release>
StatsArray counts_from_safetensors(const SafetensorsFile& file, const std::string& label, Release release) {
  const bool freq = file.contains("activation_freq");
  if (!freq && !file.contains("logical_count"))
    fail(label, ": holds neither `activation_freq` (L, E) nor `logical_count` (steps, L, E)");
  const std::string name = freq ? "activation_freq" : "logical_count";
  const TensorInfo& info = file.info(name);
  const std::span<const std::byte> raw = file.bytes(name);
  const auto elem = static_cast<size_t>(dtype_size(info.dtype));
  StatsArray a;
  if (!freq && info.shape.size() == 3) {  // SGLang's recorder: sum the steps
    check_table_size(info.shape[1], info.shape[2], label);
    a.shape = {info.shape[1], info.shape[2]};
  } else {
    if (shape_numel(info.shape) > kMaxStatsCells) fail(label, ": ", name, " has more than ", kMaxStatsCells, " values");
    a.shape = info.shape;
  }
  const auto cells = static_cast<size_t>(shape_numel(a.shape));
  const size_t total = raw.size() / elem;
  a.values.assign(cells, 0.0);
  constexpr size_t kBlock = size_t{1} << 22;  // bytes summed between releases
  size_t released = 0;
  for (size_t i = 0, cell = 0; i < total; ++i) {
    const double v = element_to_float(info.dtype, raw.data() + i * elem);
    if (!std::isfinite(v) || v < 0)
      check_value(v, label, name + " entry " + std::to_string(i));  // names the element as stored
    a.values[cell] += v;
    if (++cell == cells) cell = 0;
    if ((i + 1) * elem - released >= kBlock) {
      release(raw.subspan(released, (i + 1) * elem - released));
      released = (i + 1) * elem;
    }
  }
  for (size_t i = 0; i < a.values.size(); ++i)
    if (!std::isfinite(a.values[i])) fail(label, ": ", name, " sums to a non-finite count at entry ", i);
  return a;
}

}  // namespace

StatsArray parse_counts_safetensors(std::vector<std::byte> bytes, const std::string& label) {
  const SafetensorsFile file = SafetensorsFile::from_bytes(std::move(bytes), label);
  return counts_from_safetensors(file, label, [](std::span<const std::byte>) {});
}

namespace {

StatsArray read_counts_safetensors(const InputFile& in) {
  const SafetensorsFile file = SafetensorsFile::open(in);
  const std::string& path = in.path();
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  return counts_from_safetensors(file, path, [page](std::span<const std::byte> done) {
    // Whole pages inside the summed range only; MADV_DONTNEED on a read-only private file mapping drops the page
    // (a later read would fetch it again from the file).
    const auto begin = (reinterpret_cast<uintptr_t>(done.data()) + page - 1) / page * page;
    const auto end = (reinterpret_cast<uintptr_t>(done.data()) + done.size()) / page * page;
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
  });
}

}  // namespace

StatsArray parse_counts_contents(std::string contents, const std::string& label) {
  switch (detail::stats_format(label, contents)) {
    case detail::StatsFormat::kJson: return parse_counts_json(contents, label);
    case detail::StatsFormat::kCsv: {
      CountTable t = parse_counts_csv(contents, label);
      return StatsArray{{t.num_layers, t.num_experts}, std::move(t.counts)};
    }
    case detail::StatsFormat::kSafetensors: {
      const auto* begin = reinterpret_cast<const std::byte*>(contents.data());
      std::vector<std::byte> bytes(begin, begin + contents.size());
      contents = std::string();
      return parse_counts_safetensors(std::move(bytes), label);
    }
  }
  return {};
}

StatsArray read_counts_array(const InputFile& in) {
  // A stream is read once, whole (within the text limit), and parsed from memory; a regular file is read in
  // blocks, streamed or mapped, from the one descriptor.
  if (in.is_stream()) return parse_counts_contents(in.read_all(kMaxTextFileBytes), in.path());
  switch (detail::stats_format(in.path())) {
    case detail::StatsFormat::kJson: return read_counts_json(in);
    case detail::StatsFormat::kCsv: {
      CountTable t = parse_counts_csv_with([&] { return detail::FileCsvReader(in); }, in.path());
      return StatsArray{{t.num_layers, t.num_experts}, std::move(t.counts)};
    }
    case detail::StatsFormat::kSafetensors: return read_counts_safetensors(in);
  }
  return {};
}

StatsArray read_counts_array(const std::string& path) { return read_counts_array(InputFile(path)); }

CountTable read_counts(const std::string& path) { return table_from(read_counts_array(path), path); }

CountTable read_counts(const InputFile& in) { return table_from(read_counts_array(in), in.path()); }

std::string counts_to_json(const CountTable& table) {
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t l = 0; l < table.num_layers; ++l) {
    nlohmann::json row = nlohmann::json::array();
    for (int64_t e = 0; e < table.num_experts; ++e) {
      const double c = table.at(l, e);
      if (c == std::floor(c) && c < 9e15) row.push_back(static_cast<int64_t>(c));
      else row.push_back(c);
    }
    rows.push_back(std::move(row));
  }
  return nlohmann::json{{"activation_freq", rows}}.dump() + "\n";
}

std::string counts_to_csv(const CountTable& table) {
  std::string out = "layer,expert,count\n";
  for (int64_t l = 0; l < table.num_layers; ++l)
    for (int64_t e = 0; e < table.num_experts; ++e) out += detail::csv_row({l, e}, table.at(l, e));
  return out;
}

std::vector<std::byte> counts_to_safetensors(const CountTable& table) {
  std::vector<std::byte> bytes(table.counts.size() * sizeof(double));
  std::memcpy(bytes.data(), table.counts.data(), bytes.size());
  SafetensorsWriter w;
  w.add_raw("activation_freq", DType::kF64, Shape{table.num_layers, table.num_experts}, std::move(bytes));
  w.set_metadata("format", "hymoe.counts.v1");
  return w.serialize();
}

std::vector<std::byte> counts_file_bytes(const std::string& path, const CountTable& table) {
  const detail::StatsFormat format = detail::stats_format(path);
  if (format == detail::StatsFormat::kSafetensors) return counts_to_safetensors(table);
  const std::string text = format == detail::StatsFormat::kJson ? counts_to_json(table) : counts_to_csv(table);
  const auto bytes = std::as_bytes(std::span(text));
  return {bytes.begin(), bytes.end()};
}

void write_counts(const std::string& path, const CountTable& table) {
  write_file_atomically(path, counts_file_bytes(path, table));
}

}  // namespace hymoe::placement
