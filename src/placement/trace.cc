// Routing traces: the CSV reader (fuzzed) and writer, count extraction, and the activation recorder.
#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "hymoe/error.h"
#include "hymoe/file_io.h"
#include "hymoe/placement/trace.h"
#include "placement/text_util.h"

namespace hymoe::placement {

CountTable RoutingTrace::counts(int64_t begin, int64_t end) const {
  CountTable t(num_layers, num_experts);
  begin = std::clamp<int64_t>(begin, 0, num_tokens);
  end = std::clamp<int64_t>(end, begin, num_tokens);
  for (int64_t tok = begin; tok < end; ++tok)
    for (int64_t l = 0; l < num_layers; ++l)
      for (int64_t k = 0; k < top_k; ++k) {
        const int32_t e = expert(tok, l, k);
        if (e >= 0 && e < num_experts) t.at(l, e) += 1;
      }
  return t;
}

namespace {

// "e3", "w1": built by appending, which also keeps GCC 12's -Wrestrict false positive on `"e" + to_string` away.
std::string column(char prefix, int64_t k) {
  std::string name(1, prefix);
  name += std::to_string(k);
  return name;
}

struct Columns {
  int64_t token = -1, step = -1, layer = -1;
  std::vector<int64_t> ids, weights;
};

Columns find_columns(const std::vector<std::string_view>& header, const std::string& label) {
  Columns c;
  std::map<std::string_view, int64_t> at;
  for (size_t i = 0; i < header.size(); ++i)
    if (!at.emplace(header[i], static_cast<int64_t>(i)).second)
      fail(label, ": line 1: column `", header[i], "` appears twice");
  auto find = [&](std::string_view a, std::string_view b) {
    if (at.count(a)) return at[a];
    return at.count(b) ? at[b] : int64_t{-1};
  };
  c.token = find("token", "row");
  c.step = find("step", "forward_pass");
  c.layer = find("layer", "layer");
  if (c.token < 0 || c.layer < 0) fail(label, ": header must name a `token` (or `row`) and a `layer` column");
  for (int k = 1; at.count(column('e', k)); ++k) c.ids.push_back(at[column('e', k)]);
  if (c.ids.empty()) fail(label, ": header must name expert columns e1, e2, ...");
  for (int k = 1; at.count(column('w', k)); ++k) c.weights.push_back(at[column('w', k)]);
  if (!c.weights.empty() && c.weights.size() != c.ids.size())
    fail(label, ": header has ", c.ids.size(), " expert columns but ", c.weights.size(), " weight columns");
  return c;
}

}  // namespace

namespace {

// One data row, parsed and checked against the header and the limits.
struct TraceRow {
  int64_t token = 0, step = -1, layer = 0;
};

template <typename Reader>
void parse_row(Reader& csv, const std::vector<std::string_view>& row, const Columns& col, size_t header_fields,
               int64_t expert_limit, const std::string& label, TraceRow& r, int32_t* ids, float* weights) {
  if (row.size() != header_fields)
    fail(label, ": line ", csv.line(), ": expected ", header_fields, " fields, got ", row.size());
  r.token = detail::parse_int(row[static_cast<size_t>(col.token)], 0, INT64_MAX, label, csv.line(), "token");
  r.layer = detail::parse_index(row[static_cast<size_t>(col.layer)], kMaxStatsLayers, label, csv.line(), "layer");
  r.step = col.step >= 0 ? detail::parse_int(row[static_cast<size_t>(col.step)], -1, INT64_MAX, label, csv.line(), "step")
                         : -1;
  for (size_t k = 0; k < col.ids.size(); ++k)
    ids[k] = static_cast<int32_t>(detail::parse_int(row[static_cast<size_t>(col.ids[k])], -1, expert_limit - 1, label,
                                                    csv.line(), "expert id"));
  for (size_t k = 0; k < col.weights.size(); ++k) {
    const double v = detail::parse_number(row[static_cast<size_t>(col.weights[k])], label, csv.line(), "weight");
    if (!std::isfinite(v) || std::fabs(v) > 3e38) fail(label, ": line ", csv.line(), ": weight must be finite");
    weights[k] = static_cast<float>(v);
  }
}

// File token ids -> 0-based order of first appearance. Dense ids (the usual 0..T-1, or a window of a larger run)
// take 4 bytes per id in the range; scattered ids fall back to a hash map.
class TokenIndex {
 public:
  TokenIndex(int64_t min_id, int64_t max_id, int64_t rows) : min_(min_id) {
    // max - min may overflow int64 for ids near both ends: compare in unsigned.
    const uint64_t span = static_cast<uint64_t>(max_id) - static_cast<uint64_t>(min_id) + 1;
    if (span <= static_cast<uint64_t>(rows)) dense_.assign(static_cast<size_t>(span), -1);
  }
  // The token's index, assigning the next one on first sight (then `fresh` is true).
  int32_t find_or_add(int64_t id, bool& fresh) {
    int32_t& slot = dense_.empty() ? sparse_.try_emplace(id, -1).first->second : dense_[dense_slot(id)];
    fresh = slot < 0;
    if (fresh) slot = size_++;
    return slot;
  }
  int32_t find(int64_t id) const {
    if (!dense_.empty()) {
      const uint64_t at = static_cast<uint64_t>(id) - static_cast<uint64_t>(min_);
      return at < dense_.size() ? dense_[static_cast<size_t>(at)] : -1;
    }
    const auto it = sparse_.find(id);
    return it == sparse_.end() ? -1 : it->second;
  }
  int64_t size() const { return size_; }

 private:
  size_t dense_slot(int64_t id) const { return static_cast<size_t>(static_cast<uint64_t>(id) - static_cast<uint64_t>(min_)); }
  int64_t min_;
  std::vector<int32_t> dense_;
  std::unordered_map<int64_t, int32_t> sparse_;
  int32_t size_ = 0;
};

// Puts the tokens in the order of (step, file token id): a runtime sees them so, and a file's row order must not
// change the answer.
void sort_tokens(RoutingTrace& t, const std::vector<int64_t>& file_tokens) {
  std::vector<int64_t> order(static_cast<size_t>(t.num_tokens));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  auto before = [&](int64_t a, int64_t b) {
    const auto ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
    return t.steps[ua] != t.steps[ub] ? t.steps[ua] < t.steps[ub] : file_tokens[ua] < file_tokens[ub];
  };
  if (std::is_sorted(order.begin(), order.end(), before)) return;
  std::sort(order.begin(), order.end(), before);
  const auto cell = static_cast<size_t>(t.num_layers * t.top_k);
  auto permute = [&](auto& v) {
    auto out = v;
    for (size_t i = 0; i < order.size(); ++i)
      std::copy_n(v.begin() + static_cast<int64_t>(static_cast<size_t>(order[i]) * cell), cell,
                  out.begin() + static_cast<int64_t>(i * cell));
    v = std::move(out);
  };
  permute(t.experts);
  if (!t.weights.empty()) permute(t.weights);
  std::vector<int64_t> steps(order.size());
  for (size_t i = 0; i < order.size(); ++i) steps[i] = t.steps[static_cast<size_t>(order[i])];
  t.steps = std::move(steps);
}

// Three passes over the rows, so that memory is the trace itself (4 bytes per entry, 4 more with weights) plus a
// small per-token index, whatever the file's size: 1) check every row and size everything, 2) number the tokens,
// 3) fill. `open` returns a fresh reader over the same rows each time.
template <typename Open>
RoutingTrace parse_trace(Open open, const std::string& label, std::optional<int64_t> num_experts) {
  if (num_experts && (*num_experts < 1 || *num_experts > kMaxStatsExperts))
    fail(label, ": the number of experts must be in [1, ", kMaxStatsExperts, "], got ", *num_experts);
  const int64_t expert_limit = num_experts.value_or(kMaxStatsExperts);
  std::vector<std::string_view> header, row;
  auto start = [&](auto& csv) {
    if (!csv.next(header)) fail(label, ": empty file; expected a header such as `token,step,layer,e1,e2`");
    return find_columns(header, label);
  };

  auto csv1 = open();
  const Columns col = start(csv1);
  const auto K = static_cast<int64_t>(col.ids.size());
  const size_t header_fields = header.size();
  std::vector<int32_t> ids(static_cast<size_t>(K));
  std::vector<float> weights(col.weights.size());
  std::map<int64_t, int64_t> layers;  // model layer -> trace layer (at most kMaxStatsLayers entries)
  int64_t rows = 0, min_token = INT64_MAX, max_token = 0, max_id = -1;
  TraceRow r;
  while (csv1.next(row)) {
    parse_row(csv1, row, col, header_fields, expert_limit, label, r, ids.data(), weights.data());
    for (int32_t id : ids) max_id = std::max<int64_t>(max_id, id);
    min_token = std::min(min_token, r.token);
    max_token = std::max(max_token, r.token);
    layers.emplace(r.layer, 0);
    if (++rows * K > kMaxTraceEntries) fail(label, ": more than ", kMaxTraceEntries, " routing entries");
  }
  if (rows == 0) fail(label, ": no routing rows after the header");

  RoutingTrace t;
  t.num_layers = static_cast<int64_t>(layers.size());
  t.top_k = K;
  t.num_experts = num_experts.value_or(max_id + 1);
  if (t.num_experts < 1) fail(label, ": no expert id in the trace (all are -1); give the number of experts");
  for (auto& [model_layer, index] : layers) {
    index = static_cast<int64_t>(t.layer_ids.size());
    t.layer_ids.push_back(model_layer);
  }

  TokenIndex tokens(min_token, max_token, rows);
  std::vector<int64_t> file_tokens;  // file token id of each token, in order of first appearance
  {
    auto csv2 = open();
    start(csv2);
    while (csv2.next(row)) {
      parse_row(csv2, row, col, header_fields, expert_limit, label, r, ids.data(), weights.data());
      bool fresh = false;
      const int32_t index = tokens.find_or_add(r.token, fresh);
      if (fresh) t.steps.push_back(r.step), file_tokens.push_back(r.token);
      else if (t.steps[static_cast<size_t>(index)] != r.step)
        fail(label, ": line ", csv2.line(), ": token ", r.token, " has step ", r.step, " here but step ",
             t.steps[static_cast<size_t>(index)], " on an earlier row");
    }
  }
  t.num_tokens = tokens.size();
  if (t.num_tokens * t.num_layers * K > kMaxTraceEntries)
    fail(label, ": ", t.num_tokens, " tokens x ", t.num_layers, " layers x ", K, " exceed the limit of ",
         kMaxTraceEntries, " entries");

  t.experts.assign(static_cast<size_t>(t.num_tokens * t.num_layers * K), -1);
  if (!col.weights.empty()) t.weights.assign(t.experts.size(), 0.0f);
  std::vector<uint8_t> seen(static_cast<size_t>(t.num_tokens * t.num_layers), 0);
  auto csv3 = open();
  start(csv3);
  while (csv3.next(row)) {
    parse_row(csv3, row, col, header_fields, expert_limit, label, r, ids.data(), weights.data());
    const int32_t token = tokens.find(r.token);
    const auto layer = layers.find(r.layer);
    if (token < 0 || layer == layers.end()) fail(label, ": the file changed while it was being read");
    const auto cell = static_cast<size_t>(token * t.num_layers + layer->second);
    if (seen[cell]) fail(label, ": line ", csv3.line(), ": token ", r.token, " appears twice at layer ", r.layer);
    seen[cell] = 1;
    std::copy(ids.begin(), ids.end(), t.experts.begin() + static_cast<int64_t>(cell) * K);
    if (!weights.empty()) std::copy(weights.begin(), weights.end(), t.weights.begin() + static_cast<int64_t>(cell) * K);
  }
  sort_tokens(t, file_tokens);
  return t;
}

}  // namespace

RoutingTrace parse_trace_csv(std::string_view text, const std::string& label, std::optional<int64_t> num_experts) {
  return parse_trace([&] { return detail::CsvReader(text, label); }, label, num_experts);
}

namespace {

// A trace CSV is a CSV (by name, or for a stream without one by its first bytes) whose header has no `count`
// column (a count CSV's is `layer,expert,count`).
bool is_trace(const std::string& path, std::string_view head) {
  if (detail::stats_format(path, head) != detail::StatsFormat::kCsv) return false;
  detail::CsvReader csv(head.substr(0, std::min<size_t>(head.size(), detail::FileCsvReader::kMaxLineBytes)), path);
  std::vector<std::string_view> header;
  if (!csv.next(header)) return false;
  return std::find(header.begin(), header.end(), std::string_view("count")) == header.end();
}

RoutingTrace read_trace(const InputFile& in, std::optional<int64_t> num_experts) {
  return parse_trace([&] { return detail::FileCsvReader(in); }, in.path(), num_experts);
}

std::string head_of(const InputFile& in) {
  std::string head(4096, '\0');
  head.resize(in.read_at(0, head.data(), head.size()));
  return head;
}

StatsArray as_array(CountTable t) { return StatsArray{{t.num_layers, t.num_experts}, std::move(t.counts)}; }

}  // namespace

RoutingTrace read_trace_csv(const std::string& path, std::optional<int64_t> num_experts) {
  const InputFile in(path);
  // A stream cannot be read three times: it is read once, whole, within the text limit, and parsed from memory.
  if (in.is_stream()) return parse_trace_csv(in.read_all(kMaxTextFileBytes), path, num_experts);
  return read_trace(in, num_experts);
}

StatsArray read_counts_array_or_trace(const std::string& path, std::optional<int64_t> num_experts) {
  const InputFile in(path);
  if (in.is_stream()) {
    std::string text = in.read_all(kMaxTextFileBytes);
    if (is_trace(path, text)) return as_array(parse_trace_csv(text, path, num_experts).counts());
    return parse_counts_contents(std::move(text), path);
  }
  if (path.ends_with(".csv") && is_trace(path, head_of(in))) return as_array(read_trace(in, num_experts).counts());
  return read_counts_array(in);
}

CountTable read_counts_or_trace(const std::string& path, std::optional<int64_t> num_experts) {
  return require_table(read_counts_array_or_trace(path, num_experts), path);
}

std::string trace_to_csv(const RoutingTrace& t) {
  std::string out = "token,step,layer";
  auto field = [&out](const std::string& text) {
    out += ',';
    out += text;
  };
  for (int64_t k = 1; k <= t.top_k; ++k) field(column('e', k));
  if (!t.weights.empty())
    for (int64_t k = 1; k <= t.top_k; ++k) field(column('w', k));
  out += '\n';
  for (int64_t tok = 0; tok < t.num_tokens; ++tok)
    for (int64_t l = 0; l < t.num_layers; ++l) {
      out += std::to_string(tok);
      field(std::to_string(t.steps.empty() ? -1 : t.steps[static_cast<size_t>(tok)]));
      field(std::to_string(t.layer_ids[static_cast<size_t>(l)]));
      for (int64_t k = 0; k < t.top_k; ++k) field(std::to_string(t.expert(tok, l, k)));
      if (!t.weights.empty())
        for (int64_t k = 0; k < t.top_k; ++k)
          field(detail::format_number(t.weights[static_cast<size_t>((tok * t.num_layers + l) * t.top_k + k)]));
      out += '\n';
    }
  return out;
}

ActivationRecorder::ActivationRecorder(int64_t num_layers, int64_t num_experts) {
  if (num_layers < 1 || num_experts < 1 || num_layers > kMaxStatsLayers || num_experts > kMaxStatsExperts)
    fail("ActivationRecorder: num_layers=", num_layers, " and num_experts=", num_experts, " must be in [1, ",
         kMaxStatsLayers, "] and [1, ", kMaxStatsExperts, "]");
  counts_ = CountTable(num_layers, num_experts);
  trace_ids_.resize(static_cast<size_t>(num_layers));
  trace_scores_.resize(static_cast<size_t>(num_layers));
}

void ActivationRecorder::record_enabled(int64_t layer, std::span<const int32_t> ids, int64_t top_k,
                                        std::span<const float> scores) {
  if (layer < 0 || layer >= counts_.num_layers)
    fail("ActivationRecorder: layer ", layer, " is outside [0, ", counts_.num_layers, ")");
  if (top_k < 1 || ids.size() % static_cast<size_t>(top_k) != 0)
    fail("ActivationRecorder: ", ids.size(), " ids are not a whole number of rows of top_k=", top_k);
  if (!scores.empty() && scores.size() != ids.size())
    fail("ActivationRecorder: ", scores.size(), " scores for ", ids.size(), " ids");
  for (int32_t e : ids) {
    if (e >= 0 && e < counts_.num_experts) counts_.at(layer, e) += 1;
    else ++invalid_ids_;
  }
  if (!trace_enabled_) return;
  if (top_k_ == 0) top_k_ = top_k, has_scores_ = !scores.empty();
  if (top_k != top_k_) fail("ActivationRecorder: top_k changed from ", top_k_, " to ", top_k, " while tracing");
  auto& dst = trace_ids_[static_cast<size_t>(layer)];
  for (int32_t e : ids) dst.push_back(e >= 0 && e < counts_.num_experts ? e : -1);
  if (has_scores_) {
    auto& ws = trace_scores_[static_cast<size_t>(layer)];
    if (scores.empty()) ws.insert(ws.end(), ids.size(), 0.0f);
    else ws.insert(ws.end(), scores.begin(), scores.end());
  }
}

RoutingTrace ActivationRecorder::trace() const {
  RoutingTrace t;
  t.num_layers = counts_.num_layers;
  t.num_experts = counts_.num_experts;
  t.top_k = std::max<int64_t>(top_k_, 1);
  for (int64_t l = 0; l < t.num_layers; ++l) {
    t.layer_ids.push_back(l);
    t.num_tokens = std::max(t.num_tokens, static_cast<int64_t>(trace_ids_[static_cast<size_t>(l)].size()) / t.top_k);
  }
  t.steps.assign(static_cast<size_t>(t.num_tokens), -1);
  t.experts.assign(static_cast<size_t>(t.num_tokens * t.num_layers * t.top_k), -1);
  if (has_scores_) t.weights.assign(t.experts.size(), 0.0f);
  for (int64_t l = 0; l < t.num_layers; ++l) {
    const auto& ids = trace_ids_[static_cast<size_t>(l)];
    const auto& ws = trace_scores_[static_cast<size_t>(l)];
    for (size_t i = 0; i < ids.size(); ++i) {
      const int64_t tok = static_cast<int64_t>(i) / t.top_k, k = static_cast<int64_t>(i) % t.top_k;
      const auto at = static_cast<size_t>((tok * t.num_layers + l) * t.top_k + k);
      t.experts[at] = ids[i];
      if (has_scores_) t.weights[at] = ws[i];
    }
  }
  return t;
}

void ActivationRecorder::reset() {
  std::fill(counts_.counts.begin(), counts_.counts.end(), 0.0);
  invalid_ids_ = 0;
  top_k_ = 0;
  has_scores_ = false;
  for (auto& v : trace_ids_) v.clear();
  for (auto& v : trace_scores_) v.clear();
}

}  // namespace hymoe::placement
