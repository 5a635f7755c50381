// `hymoe stats`: how skewed the routing in statistics files is, per layer and overall, and whether frequency
// placement can be expected to help. Optionally converts the (summed) table to another format.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "hymoe/error.h"
#include "hymoe/output_files.h"
#include "hymoe/placement.h"
#include "placement_flags.h"

namespace hymoe::tool {
namespace {

using namespace hymoe::placement;

struct StatsFlags {
  std::vector<std::string> files;
  std::optional<int64_t> trace_experts;
  std::string write;
  bool curve = false, json = false;
};

// Coverage at every tenth of the experts (10%..100%), averaged over layers that saw tokens.
std::vector<double> coverage_curve(const CountTable& table, const StatsSummary& s) {
  std::vector<double> coverage;
  for (int p = 10; p <= 100; p += 10) {
    double mean = 0;
    int layers = 0;
    for (int64_t l = 0; l < table.num_layers; ++l) {
      if (s.layers[static_cast<size_t>(l)].total <= 0) continue;
      mean += top_share(std::span<const double>(table.counts.data() + l * table.num_experts,
                                                static_cast<size_t>(table.num_experts)),
                        p / 100.0);
      ++layers;
    }
    coverage.push_back(layers ? mean / layers : 0);
  }
  return coverage;
}

nlohmann::json summary_json(const std::string& label, const CountTable& table) {
  const StatsSummary s = summarize(table);
  nlohmann::json j = {{"file", label}, {"layers", table.num_layers}, {"experts", table.num_experts},
                      {"routed", table.total()}, {"per_layer", nlohmann::json::array()},
                      {"mean_top10_share", s.mean_top10}, {"mean_top25_share", s.mean_top25},
                      {"mean_top50_share", s.mean_top50}, {"mean_gini", s.mean_gini},
                      {"mean_balancedness", s.mean_balancedness}, {"mean_count_per_expert", s.mean_count_per_expert},
                      {"in_sample_cpu_saving_at_25_percent", s.in_sample_cpu_saving}, {"verdict", s.verdict}};
  for (const LayerSummary& y : s.layers)
    j["per_layer"].push_back({{"routed", y.total}, {"top10_share", y.top10_share}, {"top25_share", y.top25_share},
                              {"top50_share", y.top50_share}, {"gini", y.gini}, {"balancedness", y.balancedness}});
  j["coverage_at_10_percent_steps"] = coverage_curve(table, s);
  return j;
}

void print_summary(const std::string& label, const CountTable& table, bool curve) {
  const StatsSummary s = summarize(table);
  fmt::print("{}: {} layers x {} experts, {} routed token-experts\n", label, table.num_layers, table.num_experts,
             table.total());
  fmt::print("  {:>5} {:>12} {:>8} {:>8} {:>8} {:>6} {:>8}\n", "layer", "routed", "top10%", "top25%", "top50%", "gini",
             "mean/max");
  for (size_t l = 0; l < s.layers.size(); ++l) {
    const LayerSummary& y = s.layers[l];
    fmt::print("  {:>5} {:>12} {:>8} {:>8} {:>8} {:>6.3f} {:>8.3f}\n", l, y.total, percent(y.top10_share),
               percent(y.top25_share), percent(y.top50_share), y.gini, y.balancedness);
  }
  fmt::print("  {:>5} {:>12} {:>8} {:>8} {:>8} {:>6.3f} {:>8.3f}\n", "mean", "", percent(s.mean_top10),
             percent(s.mean_top25), percent(s.mean_top50), s.mean_gini, s.mean_balancedness);
  if (curve) {
    fmt::print("  coverage (share of routed tokens taken by the hottest x% of each layer's experts, mean):\n");
    const std::vector<double> coverage = coverage_curve(table, s);
    for (size_t i = 0; i < coverage.size(); ++i) fmt::print("    {:>3}% -> {}\n", 10 * (i + 1), percent(coverage[i]));
  }
  fmt::print("  verdict: {}\n", s.verdict);
}

int run_stats(const StatsFlags& f) {
  OutputFiles files;
  for (const auto& path : f.files) files.add_input("input file", path);
  files.add_output("--write", f.write);
  files.check();
  // Every file is read and the sum checked before anything is printed: an error is the only output.
  std::vector<CountTable> tables;
  CountTable sum;  // only when there are several files: one file's table is not copied
  nlohmann::json j = {{"command", "stats"}, {"files", nlohmann::json::array()}};
  for (const auto& path : f.files) {
    tables.push_back(read_counts_or_trace(path, f.trace_experts));
    if (f.files.size() == 1) break;
    if (sum.counts.empty()) sum = tables.back();
    else sum.add(tables.back(), path);
  }
  for (size_t i = 0; i < tables.size(); ++i) {
    if (f.json) j["files"].push_back(summary_json(f.files[i], tables[i]));
    else print_summary(f.files[i], tables[i], f.curve);
  }
  if (f.files.size() > 1) {
    if (f.json) j["summed"] = summary_json("all files summed", sum);
    else print_summary("all files summed", sum, f.curve);
  }
  if (!f.write.empty()) {
    files.stage("--write", counts_file_bytes(f.write, f.files.size() == 1 ? tables[0] : sum));
    files.commit();
    if (f.json) j["wrote"] = f.write;
    else fmt::print("wrote {}\n", f.write);
  }
  if (f.json) fmt::print("{}\n", j.dump(2));
  return 0;
}

}  // namespace

Action add_stats_command(CLI::App& app) {
  auto f = std::make_shared<StatsFlags>();
  auto* cmd = app.add_subcommand("stats", "How skewed expert routing is in statistics files or traces");
  cmd->add_option("files", f->files, "count files (.json, .csv, .safetensors) or trace CSVs")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--num-experts", f->trace_experts, "experts per layer, for trace CSVs (default: largest id + 1)");
  cmd->add_flag("--curve", f->curve, "print the coverage curve");
  cmd->add_flag("--json", f->json, "print one JSON object with every figure (coverage curve included), at full precision");
  cmd->add_option("--write", f->write, "write the (summed) count table as .json, .csv or .safetensors");
  return [f] { return run_stats(*f); };
}

}  // namespace hymoe::tool
