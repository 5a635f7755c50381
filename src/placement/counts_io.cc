// Count-table files: JSON, CSV and safetensors readers (fuzzed: fuzz/stats_fuzz.cc) and writers. A reader trusts
// nothing: shapes are checked before allocation, every value must be a finite non-negative number.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "hymoe/error.h"
#include "hymoe/file_io.h"
#include "hymoe/placement/stats.h"
#include "hymoe/safetensors.h"
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

Tensor CountTable::to_scores() const {
  std::vector<float> v(counts.begin(), counts.end());
  return Tensor(Shape{num_layers, num_experts}, std::move(v));
}

void CountTable::add(const CountTable& other, const std::string& label) {
  if (other.num_layers != num_layers || other.num_experts != num_experts)
    fail(label, ": count table is (", other.num_layers, ", ", other.num_experts, "), expected (", num_layers, ", ",
         num_experts, ") like the tables before it");
  for (size_t i = 0; i < counts.size(); ++i) counts[i] += other.counts[i];
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

// Shape of a nested JSON list, checked rectangular; values appended in row-major order.
void walk_json(const nlohmann::json& v, size_t depth, Shape& shape, std::vector<double>& out, const std::string& label,
               std::string& path) {
  if (v.is_array()) {
    if (depth == shape.size()) {
      if (!out.empty()) fail(label, ": ", path, " is a list where a number was expected (ragged nesting)");
      shape.push_back(static_cast<int64_t>(v.size()));
      if (shape.size() > 8) fail(label, ": lists nested deeper than 8 levels");
    } else if (depth > shape.size() || shape[depth] != static_cast<int64_t>(v.size())) {
      fail(label, ": ", path, " has ", v.size(), " entries, expected ",
           depth < shape.size() ? shape[depth] : 0, " (rows must all have the same length)");
    }
    for (size_t i = 0; i < v.size(); ++i) {
      const size_t mark = path.size();
      path += '[';
      path += std::to_string(i);
      path += ']';
      walk_json(v[i], depth + 1, shape, out, label, path);
      path.resize(mark);
    }
    return;
  }
  if (depth != shape.size()) fail(label, ": ", path, " is a number where a list was expected (ragged nesting)");
  if (!v.is_number()) fail(label, ": ", path, " must be a number, got ", v.dump());
  const double x = v.get<double>();
  check_value(x, label, path);
  if (static_cast<int64_t>(out.size()) >= kMaxStatsCells) fail(label, ": more than ", kMaxStatsCells, " values");
  out.push_back(x);
}

}  // namespace

CountTable require_table(const StatsArray& array, const std::string& label) {
  if (array.shape.size() != 2)
    fail(label, ": activation_freq must be a 2D tensor of shape (num_layers, num_experts), got shape ",
         shape_to_string(array.shape));
  check_table_size(array.shape[0], array.shape[1], label);
  CountTable t(array.shape[0], array.shape[1]);
  t.counts = array.values;
  return t;
}

StatsArray parse_counts_json(std::string_view text, const std::string& label) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    fail(label, ": not valid JSON: ", e.what());
  }
  std::string path = "activation_freq";
  const nlohmann::json* table = &j;
  if (j.is_object()) {
    if (!j.contains("activation_freq"))
      fail(label, ": a JSON count file must be a nested list or an object with an \"activation_freq\" field");
    table = &j["activation_freq"];
  }
  if (!table->is_array()) fail(label, ": activation_freq must be a list of lists of counts, got ", table->type_name());
  StatsArray a;
  walk_json(*table, 0, a.shape, a.values, label, path);
  return a;
}

CountTable parse_counts_csv(std::string_view text, const std::string& label) {
  detail::CsvReader csv(text, label);
  std::vector<std::string_view> header;
  if (!csv.next(header)) fail(label, ": empty file; expected the header `layer,expert,count`");
  auto is = [&](size_t i, std::string_view a, std::string_view b) {
    return i < header.size() && (header[i] == a || header[i] == b);
  };
  if (header.size() != 3 || !is(0, "layer", "layer_id") || !is(1, "expert", "expert_id") || !is(2, "count", "count"))
    fail(label, ": line ", csv.line(), ": header must be `layer,expert,count`");
  std::map<std::pair<int64_t, int64_t>, double> cells;
  int64_t layers = 0, experts = 0;
  std::vector<std::string_view> row;
  while (csv.next(row)) {
    if (row.size() != 3) fail(label, ": line ", csv.line(), ": expected 3 fields, got ", row.size());
    const int64_t l = detail::parse_index(row[0], kMaxStatsLayers, label, csv.line(), "layer");
    const int64_t e = detail::parse_index(row[1], kMaxStatsExperts, label, csv.line(), "expert");
    const double c = detail::parse_number(row[2], label, csv.line(), "count");
    check_value(c, label, "line " + std::to_string(csv.line()) + ": count");
    if (!cells.emplace(std::pair{l, e}, c).second)
      fail(label, ": line ", csv.line(), ": (layer ", l, ", expert ", e, ") listed twice");
    layers = std::max(layers, l + 1);
    experts = std::max(experts, e + 1);
    check_table_size(layers, experts, label);
  }
  if (cells.empty()) fail(label, ": no count rows after the header");
  CountTable t(layers, experts);
  for (const auto& [key, c] : cells) t.at(key.first, key.second) = c;
  return t;
}

StatsArray parse_counts_safetensors(std::vector<std::byte> bytes, const std::string& label) {
  const SafetensorsFile file = SafetensorsFile::from_bytes(std::move(bytes), label);
  const bool freq = file.contains("activation_freq");
  if (!freq && !file.contains("logical_count"))
    fail(label, ": holds neither `activation_freq` (L, E) nor `logical_count` (steps, L, E)");
  const std::string name = freq ? "activation_freq" : "logical_count";
  const TensorInfo& info = file.info(name);
  const Tensor t = file.read_f32(name);
  StatsArray a;
  if (!freq && info.shape.size() == 3) {  // SGLang's recorder: sum the steps
    const int64_t steps = info.shape[0], cells = info.shape[1] * info.shape[2];
    check_table_size(info.shape[1], info.shape[2], label);
    a.shape = {info.shape[1], info.shape[2]};
    a.values.assign(static_cast<size_t>(cells), 0.0);
    for (int64_t s = 0; s < steps; ++s)
      for (int64_t i = 0; i < cells; ++i) a.values[static_cast<size_t>(i)] += t[s * cells + i];
  } else {
    a.shape = info.shape;
    if (t.numel() > kMaxStatsCells) fail(label, ": ", name, " has more than ", kMaxStatsCells, " values");
    a.values.assign(t.values().begin(), t.values().end());
  }
  for (size_t i = 0; i < a.values.size(); ++i) check_value(a.values[i], label, name + " entry " + std::to_string(i));
  return a;
}

namespace {

enum class Format { kJson, kCsv, kSafetensors };

Format format_of(const std::string& path) {
  auto ends = [&](std::string_view ext) { return path.size() >= ext.size() && path.ends_with(ext); };
  if (ends(".json")) return Format::kJson;
  if (ends(".csv")) return Format::kCsv;
  if (ends(".safetensors")) return Format::kSafetensors;
  fail(path, ": unknown statistics format; the name must end in .json, .csv or .safetensors");
}

}  // namespace

StatsArray read_counts_array(const std::string& path) {
  switch (format_of(path)) {
    case Format::kJson: return parse_counts_json(read_text_file(path), path);
    case Format::kCsv: {
      const CountTable t = parse_counts_csv(read_text_file(path), path);
      return StatsArray{{t.num_layers, t.num_experts}, t.counts};
    }
    case Format::kSafetensors: {
      const std::string text = read_text_file(path);
      std::vector<std::byte> bytes(text.size());
      std::memcpy(bytes.data(), text.data(), text.size());
      return parse_counts_safetensors(std::move(bytes), path);
    }
  }
  return {};
}

CountTable read_counts(const std::string& path) { return require_table(read_counts_array(path), path); }

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
  const Format format = format_of(path);
  if (format == Format::kSafetensors) return counts_to_safetensors(table);
  const std::string text = format == Format::kJson ? counts_to_json(table) : counts_to_csv(table);
  const auto bytes = std::as_bytes(std::span(text));
  return {bytes.begin(), bytes.end()};
}

void write_counts(const std::string& path, const CountTable& table) {
  write_file_atomically(path, counts_file_bytes(path, table));
}

}  // namespace hymoe::placement
