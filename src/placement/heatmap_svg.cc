// heatmap_svg: cells coloured on a white-to-dark-red ramp by score / (layer's max score); GPU experts get a
// black outline drawn above all cells so neighbours never hide it.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "hymoe/placement/heatmap.h"

namespace hymoe::placement {
namespace {

std::string colour(double t) {  // t in [0, 1]: white -> orange -> dark red
  t = std::clamp(t, 0.0, 1.0);
  const double r = t < 0.5 ? 255 : 255 - (t - 0.5) * 2 * (255 - 140);
  const double g = t < 0.5 ? 255 - t * 2 * (255 - 140) : 140 - (t - 0.5) * 2 * 140;
  const double b = t < 0.5 ? 255 - t * 2 * 255 : 0;
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", static_cast<int>(r), static_cast<int>(g), static_cast<int>(b));
  return buf;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

}  // namespace

std::string heatmap_svg(const Placement& plan) {
  const int64_t L = plan.num_layers, E = plan.num_experts;
  const double cell = std::clamp(1200.0 / static_cast<double>(E), 3.0, 24.0);
  const double left = 56, top = 48;
  const double width = left + cell * static_cast<double>(E) + 16, height = top + cell * static_cast<double>(L) + 28;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) + "\" height=\"" + num(height) +
                    "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  const auto& r = plan.report;
  svg += "<text x=\"" + num(left) + "\" y=\"16\" font-size=\"13\">" + r.strategy + ": " +
         std::to_string(r.actual_num_gpu_experts) + " of " + std::to_string(L * E) +
         " experts on the GPU, expected hit rate " + num(100 * r.expected_hit_rate) + "%</text>\n";
  svg += "<text x=\"" + num(left) + "\" y=\"32\" fill=\"#555\">rows: layers, columns: experts; colour: score / "
         "layer's hottest; outlined: GPU-resident</text>\n";
  for (int64_t l = 0; l < L; ++l) {
    float layer_max = 0;
    for (int64_t e = 0; e < E; ++e) layer_max = std::max(layer_max, plan.scores[l * E + e]);
    const double y = top + cell * static_cast<double>(l);
    if (L <= 64 || l % 8 == 0)
      svg += "<text x=\"" + num(left - 6) + "\" y=\"" + num(y + cell * 0.8) + "\" text-anchor=\"end\">" +
             std::to_string(l) + "</text>\n";
    for (int64_t e = 0; e < E; ++e) {
      const double v = layer_max > 0 ? std::max(0.0f, plan.scores[l * E + e]) / layer_max : 0.0;
      svg += "<rect x=\"" + num(left + cell * static_cast<double>(e)) + "\" y=\"" + num(y) + "\" width=\"" +
             num(cell) + "\" height=\"" + num(cell) + "\" fill=\"" + colour(v) + "\"><title>layer " +
             std::to_string(l) + ", expert " + std::to_string(e) + ": " + num(plan.scores[l * E + e]) +
             (plan.on_gpu(l, e) ? " (GPU)" : " (CPU)") + "</title></rect>\n";
    }
  }
  const double stroke = std::max(1.0, cell / 8);
  for (int64_t l = 0; l < L; ++l)
    for (int64_t e = 0; e < E; ++e)
      if (plan.on_gpu(l, e))
        svg += "<rect x=\"" + num(left + cell * static_cast<double>(e) + stroke / 2) + "\" y=\"" +
               num(top + cell * static_cast<double>(l) + stroke / 2) + "\" width=\"" + num(cell - stroke) +
               "\" height=\"" + num(cell - stroke) + "\" fill=\"none\" stroke=\"black\" stroke-width=\"" +
               num(stroke) + "\"/>\n";
  svg += "</svg>\n";
  return svg;
}

}  // namespace hymoe::placement
