// Activation statistics: per-(layer, expert) routed-token count tables, their file formats, and the summary
// `hymoe stats` prints. Plain data only (no dependency on the MoE layer).
//
// Count-table files (every reader checks shape, values and sizes and names the file and the field at fault):
//   JSON         {"activation_freq": [[c, ...] x L]} (other keys ignored) or a bare nested list
//   CSV          header `layer,expert,count` (SGLang's older `layer_id,expert_id,count` too), one row per pair,
//                missing pairs count 0, a pair listed twice is an error
//   safetensors  `activation_freq` (L, E), or `logical_count` (steps, L, E) summed over steps (the layout SGLang's
//                expert-distribution recorder saves; (L, E) is accepted too); any dtype, read through float32
// The format is chosen by the file extension (.json, .csv, .safetensors).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hymoe/file_io.h"
#include "hymoe/tensor.h"

namespace hymoe::placement {

// Sizes a statistics file may declare; larger ones are rejected before anything is allocated for them.
inline constexpr int64_t kMaxStatsLayers = 4096;
inline constexpr int64_t kMaxStatsExperts = 65536;
inline constexpr int64_t kMaxStatsCells = int64_t{1} << 24;
// The largest sum of a table's counts: the planner ranks and sums scores in float32 (as the reference does), so a
// table must sum to a finite float32 with room to spare. Readers and CountTable::add refuse larger tables, naming
// the file.
inline constexpr double kMaxCountTotal = 1e38;

struct CountTable {
  int64_t num_layers = 0, num_experts = 0;
  std::vector<double> counts;  // (L, E) row-major, finite and non-negative

  CountTable() = default;
  CountTable(int64_t layers, int64_t experts);
  double at(int64_t layer, int64_t expert) const { return counts[static_cast<size_t>(layer * num_experts + expert)]; }
  double& at(int64_t layer, int64_t expert) { return counts[static_cast<size_t>(layer * num_experts + expert)]; }
  double layer_total(int64_t layer) const;
  double total() const;
  // float32 (L, E): the planner's score table. Refuses a table whose total exceeds kMaxCountTotal (`label` names it).
  Tensor to_scores(const std::string& label = "count table") const;
  // Elementwise sum; shapes must match and the total stay within kMaxCountTotal (`label` names the operand).
  void add(const CountTable& other, const std::string& label);
};

// A parsed statistics array of any rank, before it is required to be (L, E): the planner reports a wrong rank
// with the reference's message.
struct StatsArray {
  Shape shape;
  std::vector<double> values;
};
// (L, E) from an array, or the reference's "must be a 2D tensor" error prefixed with `label`.
CountTable require_table(const StatsArray& array, const std::string& label);
CountTable require_table(StatsArray&& array, const std::string& label);

StatsArray parse_counts_json(std::string_view text, const std::string& label);
CountTable parse_counts_csv(std::string_view text, const std::string& label);
StatsArray parse_counts_safetensors(std::vector<std::byte> bytes, const std::string& label);

// A count file's whole contents, read already (a stream), in the format of the extension of `label` or, when
// the name has none of .json, .csv, .safetensors (/dev/fd/63), the format its first bytes show.
StatsArray parse_counts_contents(std::string contents, const std::string& label);

// Reads any supported file as an array (rank unchecked) or as a table, opening it once: a regular file in blocks
// (JSON streamed, CSV in two passes over the descriptor, safetensors mapped), a stream (a pipe, a FIFO, a
// device) read whole within kMaxTextFileBytes and parsed as parse_counts_contents.
StatsArray read_counts_array(const std::string& path);
StatsArray read_counts_array(const InputFile& file);
CountTable read_counts(const std::string& path);
CountTable read_counts(const InputFile& file);

std::string counts_to_json(const CountTable& table);
std::string counts_to_csv(const CountTable& table);
std::vector<std::byte> counts_to_safetensors(const CountTable& table);  // `activation_freq`, F64
// The file's contents in the format of the extension of `path`.
std::vector<std::byte> counts_file_bytes(const std::string& path, const CountTable& table);
// Writes in the format of the extension, atomically (a failure leaves no file).
void write_counts(const std::string& path, const CountTable& table);

// What `hymoe stats` prints for one layer and for the whole table.
struct LayerSummary {
  double total = 0;
  double top10_share = 0, top25_share = 0, top50_share = 0;  // share taken by the hottest 10/25/50% of experts
  double gini = 0;          // 0 = uniform, (E-1)/E = one expert takes everything
  double balancedness = 0;  // mean/max expert count; 1 = uniform
};
struct StatsSummary {
  std::vector<LayerSummary> layers;
  double mean_top10 = 0, mean_top25 = 0, mean_top50 = 0, mean_gini = 0, mean_balancedness = 0;
  double mean_count_per_expert = 0;
  double in_sample_cpu_saving = 0;  // (mean_top25 - 0.25) / 0.75: a 25% frequency plan on this very data
  std::string verdict;  // one line
};
StatsSummary summarize(const CountTable& table);
// Share taken by the hottest `fraction` of experts; a fractional expert counts pro rata.
double top_share(std::span<const double> counts, double fraction);

}  // namespace hymoe::placement
