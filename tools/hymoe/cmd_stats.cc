// `hymoe stats`: how skewed the routing in statistics files is, per layer and overall, and whether frequency
// placement can be expected to help. Optionally converts the (summed) table to another format.
#include <fmt/format.h>

#include "commands.h"
#include "hymoe/error.h"
#include "hymoe/placement.h"
#include "placement_flags.h"

namespace hymoe::tool {
namespace {

using namespace hymoe::placement;

struct StatsFlags {
  std::vector<std::string> files;
  std::optional<int64_t> trace_experts;
  std::string write;
  bool curve = false;
};

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
    // Coverage at every tenth of the experts, averaged over layers that saw tokens.
    fmt::print("  coverage (share of routed tokens taken by the hottest x% of each layer's experts, mean):\n");
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
      fmt::print("    {:>3}% -> {}\n", p, percent(layers ? mean / layers : 0));
    }
  }
  fmt::print("  verdict: {}\n", s.verdict);
}

int run_stats(const StatsFlags& f) {
  // Every file is read and the sum checked before anything is printed: an error is the only output.
  std::vector<CountTable> tables;
  CountTable sum;  // only when there are several files: one file's table is not copied
  for (const auto& path : f.files) {
    tables.push_back(read_counts_or_trace(path, f.trace_experts));
    if (f.files.size() == 1) break;
    if (sum.counts.empty()) sum = tables.back();
    else sum.add(tables.back(), path);
  }
  for (size_t i = 0; i < tables.size(); ++i) print_summary(f.files[i], tables[i], f.curve);
  if (f.files.size() > 1) print_summary("all files summed", sum, f.curve);
  if (!f.write.empty()) {
    write_counts(f.write, f.files.size() == 1 ? tables[0] : sum);
    fmt::print("wrote {}\n", f.write);
  }
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
  cmd->add_option("--write", f->write, "write the (summed) count table as .json, .csv or .safetensors");
  return [f] { return run_stats(*f); };
}

}  // namespace hymoe::tool
