// Skew statistics of a count table and the one-line verdict `hymoe stats` prints.
#include <algorithm>
#include <cmath>
#include <functional>

#include "hymoe/placement/stats.h"
#include "placement/text_util.h"

namespace hymoe::placement {

double top_share(std::span<const double> counts, double fraction) {
  std::vector<double> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  double total = 0;
  for (double c : sorted) total += c;
  if (total <= 0 || sorted.empty()) return 0;
  const double experts = fraction * static_cast<double>(sorted.size());
  const auto whole = static_cast<size_t>(std::floor(experts));
  double taken = 0;
  for (size_t i = 0; i < whole && i < sorted.size(); ++i) taken += sorted[i];
  if (whole < sorted.size()) taken += (experts - static_cast<double>(whole)) * sorted[whole];
  return taken / total;
}

namespace {

LayerSummary summarize_layer(std::span<const double> counts) {
  LayerSummary s;
  std::vector<double> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  for (double c : sorted) s.total += c;
  const double n = static_cast<double>(sorted.size());
  s.top10_share = top_share(counts, 0.10);
  s.top25_share = top_share(counts, 0.25);
  s.top50_share = top_share(counts, 0.50);
  if (s.total > 0) {
    // Gini from the sorted values: G = sum_i (2i - n - 1) x_(i) / (n * sum x), x ascending, i = 1..n.
    double acc = 0;
    for (size_t i = 0; i < sorted.size(); ++i)
      acc += (2.0 * static_cast<double>(i + 1) - n - 1.0) * sorted[sorted.size() - 1 - i];
    s.gini = acc / (n * s.total);
    s.balancedness = (s.total / n) / sorted.front();
  }
  return s;
}

}  // namespace

StatsSummary summarize(const CountTable& table) {
  StatsSummary out;
  int64_t active = 0;
  for (int64_t l = 0; l < table.num_layers; ++l) {
    const std::span<const double> row(table.counts.data() + l * table.num_experts,
                                      static_cast<size_t>(table.num_experts));
    out.layers.push_back(summarize_layer(row));
    const LayerSummary& s = out.layers.back();
    if (s.total <= 0) continue;  // a layer nobody routed to (a dense layer's row) says nothing about skew
    ++active;
    out.mean_top10 += s.top10_share;
    out.mean_top25 += s.top25_share;
    out.mean_top50 += s.top50_share;
    out.mean_gini += s.gini;
    out.mean_balancedness += s.balancedness;
  }
  if (active == 0) {
    out.verdict = "no routed tokens in the table: nothing to plan from";
    return out;
  }
  const double a = static_cast<double>(active);
  out.mean_top10 /= a, out.mean_top25 /= a, out.mean_top50 /= a, out.mean_gini /= a, out.mean_balancedness /= a;
  out.mean_count_per_expert = table.total() / (a * static_cast<double>(table.num_experts));

  // What a frequency plan holding a quarter of the experts saves on this very data (in-sample): the CPU keeps
  // 1 - top25 of the routed work instead of the 75% any plan keeps under uniform routing. Not a bound on held-out
  // data, where a plan usually realizes less (docs/placement.md).
  const double cpu_saving = (out.mean_top25 - 0.25) / 0.75;
  out.in_sample_cpu_saving = cpu_saving;
  const std::string facts = " (with 25% of the experts on the GPU, the hottest take " +
                            detail::format_number(std::round(out.mean_top25 * 1000) / 10) +
                            "% of routed tokens vs 25% under uniform routing: on this data, in-sample, CPU work "
                            "falls by " +
                            detail::format_number(std::round(cpu_saving * 1000) / 10) +
                            "%; a plan scored on other data usually saves less)";
  std::string verdict;
  if (cpu_saving < 0.10)
    verdict = "routing is near-uniform: expected gain from frequency placement is small" + facts;
  else if (cpu_saving < 0.25)
    verdict = "routing is moderately skewed: frequency placement helps" + facts;
  else
    verdict = "routing is strongly skewed: frequency placement pays off" + facts;
  if (out.mean_count_per_expert < 20)
    verdict += "; only " + detail::format_number(std::round(out.mean_count_per_expert * 10) / 10) +
               " routed tokens per expert on average: small samples overstate skew";
  out.verdict = verdict + "; check it on held-out data with `hymoe plan --evaluate`";
  return out;
}

}  // namespace hymoe::placement
