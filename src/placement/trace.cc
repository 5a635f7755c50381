// Routing traces: the CSV reader (fuzzed) and writer, count extraction, and the activation recorder.
#include <algorithm>
#include <cmath>
#include <fstream>
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

RoutingTrace parse_trace_csv(std::string_view text, const std::string& label, std::optional<int64_t> num_experts) {
  if (num_experts && (*num_experts < 1 || *num_experts > kMaxStatsExperts))
    fail("num_experts must be in [1, ", kMaxStatsExperts, "], got ", *num_experts);
  detail::CsvReader csv(text, label);
  std::vector<std::string_view> header, row;
  if (!csv.next(header)) fail(label, ": empty file; expected a header such as `token,step,layer,e1,e2`");
  const Columns col = find_columns(header, label);
  const auto K = static_cast<int64_t>(col.ids.size());
  const int64_t expert_limit = num_experts.value_or(kMaxStatsExperts);

  struct Row {
    int64_t token, layer, file_token;
    std::vector<int32_t> ids;
    std::vector<float> weights;
  };
  std::vector<Row> rows;
  std::unordered_map<int64_t, int64_t> token_index;  // file token id -> 0-based order of first appearance
  std::vector<int64_t> steps, file_tokens;
  std::map<int64_t, int64_t> layers;                 // model layer -> trace layer (filled after reading)
  int64_t max_id = -1;
  while (csv.next(row)) {
    if (row.size() != header.size())
      fail(label, ": line ", csv.line(), ": expected ", header.size(), " fields, got ", row.size());
    Row r;
    const int64_t token = detail::parse_int(row[static_cast<size_t>(col.token)], 0, INT64_MAX, label, csv.line(), "token");
    r.layer = detail::parse_index(row[static_cast<size_t>(col.layer)], kMaxStatsLayers, label, csv.line(), "layer");
    const int64_t step = col.step >= 0 ? detail::parse_int(row[static_cast<size_t>(col.step)], -1, INT64_MAX, label,
                                                           csv.line(), "step")
                                       : -1;
    const auto [it, fresh] = token_index.emplace(token, static_cast<int64_t>(steps.size()));
    if (fresh) steps.push_back(step), file_tokens.push_back(token);
    else if (steps[static_cast<size_t>(it->second)] != step)
      fail(label, ": line ", csv.line(), ": token ", token, " has step ", step, " here but step ",
           steps[static_cast<size_t>(it->second)], " on an earlier row");
    r.token = it->second;
    r.file_token = token;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t id = detail::parse_int(row[static_cast<size_t>(col.ids[static_cast<size_t>(k)])], -1,
                                           expert_limit - 1, label, csv.line(), "expert id");
      r.ids.push_back(static_cast<int32_t>(id));
      max_id = std::max(max_id, id);
    }
    for (int64_t w : col.weights) {
      const double v = detail::parse_number(row[static_cast<size_t>(w)], label, csv.line(), "weight");
      if (!std::isfinite(v)) fail(label, ": line ", csv.line(), ": weight must be finite");
      r.weights.push_back(static_cast<float>(v));
    }
    layers.emplace(r.layer, 0);
    if (static_cast<int64_t>(rows.size()) * K >= kMaxTraceEntries)
      fail(label, ": more than ", kMaxTraceEntries, " routing entries");
    rows.push_back(std::move(r));
  }
  if (rows.empty()) fail(label, ": no routing rows after the header");

  RoutingTrace t;
  t.num_tokens = static_cast<int64_t>(steps.size());
  t.num_layers = static_cast<int64_t>(layers.size());
  t.top_k = K;
  t.num_experts = num_experts.value_or(max_id + 1);
  if (t.num_experts < 1) fail(label, ": no expert id in the trace (all are -1); give the number of experts");
  if (t.num_tokens * t.num_layers * K > kMaxTraceEntries)
    fail(label, ": ", t.num_tokens, " tokens x ", t.num_layers, " layers x ", K, " exceed the limit of ",
         kMaxTraceEntries, " entries");
  for (auto& [model_layer, index] : layers) {
    index = static_cast<int64_t>(t.layer_ids.size());
    t.layer_ids.push_back(model_layer);
  }
  // Tokens in the order of (step, token): a runtime sees them so, and a file's row order must not change the answer.
  std::vector<int64_t> order(steps.size()), rank(steps.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const auto ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
    return steps[ua] != steps[ub] ? steps[ua] < steps[ub] : file_tokens[ua] < file_tokens[ub];
  });
  t.steps.resize(steps.size());
  for (size_t i = 0; i < order.size(); ++i) {
    rank[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
    t.steps[i] = steps[static_cast<size_t>(order[i])];
  }
  for (Row& r : rows) r.token = rank[static_cast<size_t>(r.token)];
  t.experts.assign(static_cast<size_t>(t.num_tokens * t.num_layers * K), -1);
  if (!col.weights.empty()) t.weights.assign(t.experts.size(), 0.0f);
  std::vector<uint8_t> seen(static_cast<size_t>(t.num_tokens * t.num_layers), 0);
  for (const Row& r : rows) {
    const int64_t l = layers[r.layer];
    const auto cell = static_cast<size_t>(r.token * t.num_layers + l);
    if (seen[cell]) fail(label, ": token ", r.file_token, " appears twice at layer ", r.layer);
    seen[cell] = 1;
    std::copy(r.ids.begin(), r.ids.end(), t.experts.begin() + static_cast<int64_t>(cell) * K);
    if (!r.weights.empty()) std::copy(r.weights.begin(), r.weights.end(), t.weights.begin() + static_cast<int64_t>(cell) * K);
  }
  return t;
}

RoutingTrace read_trace_csv(const std::string& path, std::optional<int64_t> num_experts) {
  return parse_trace_csv(read_text_file(path), path, num_experts);
}

bool is_trace_file(const std::string& path) {
  if (!path.ends_with(".csv")) return false;
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open");
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  detail::CsvReader csv(head, path);
  std::vector<std::string_view> header;
  if (!csv.next(header)) return false;
  return std::find(header.begin(), header.end(), std::string_view("count")) == header.end();
}

CountTable read_counts_or_trace(const std::string& path, std::optional<int64_t> num_experts) {
  return is_trace_file(path) ? read_trace_csv(path, num_experts).counts() : read_counts(path);
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
