#include "svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace hymoe::tool {
namespace {

constexpr double kWidth = 760, kPanelHeight = 230, kLeft = 70, kRight = 170, kTop = 40, kGap = 50;

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

}  // namespace

std::string render_svg_plot(const std::string& title, const std::string& x_label, const std::vector<PlotPanel>& panels) {
  const double height = kTop + static_cast<double>(panels.size()) * (kPanelHeight + kGap) + 10;
  const double plot_w = kWidth - kLeft - kRight;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">{3}</text>\n",
      kWidth, height, kWidth / 2, escape(title));
  double x_min = std::numeric_limits<double>::infinity(), x_max = -x_min;
  for (const auto& p : panels)
    for (const auto& s : p.series)
      for (double v : s.x) x_min = std::min(x_min, v), x_max = std::max(x_max, v);
  if (!(x_max > x_min)) x_max = x_min + 1;
  for (size_t pi = 0; pi < panels.size(); ++pi) {
    const PlotPanel& p = panels[pi];
    const double top = kTop + static_cast<double>(pi) * (kPanelHeight + kGap);
    auto fy = [&](double v) { return p.log_y ? std::log10(std::max(v, 1e-30)) : v; };
    double y_min = std::numeric_limits<double>::infinity(), y_max = -y_min;
    for (const auto& s : p.series)
      for (double v : s.y)
        if (std::isfinite(fy(v))) y_min = std::min(y_min, fy(v)), y_max = std::max(y_max, fy(v));
    if (!std::isfinite(y_min)) y_min = 0, y_max = 1;
    if (!p.log_y) y_min = std::min(y_min, 0.0);
    if (!(y_max > y_min)) y_max = y_min + 1;
    const double pad = (y_max - y_min) * 0.05;
    y_min -= p.log_y ? pad : 0.0;
    y_max += pad;
    auto px = [&](double v) { return kLeft + (v - x_min) / (x_max - x_min) * plot_w; };
    auto py = [&](double v) { return top + kPanelHeight - (fy(v) - y_min) / (y_max - y_min) * kPanelHeight; };
    svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"13\">{}</text>\n", kLeft, top - 8, escape(p.title));
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n", kLeft, top,
                       plot_w, kPanelHeight);
    for (int i = 0; i <= 4; ++i) {  // y ticks
      const double v = y_min + (y_max - y_min) * i / 4.0;
      const double y = top + kPanelHeight - kPanelHeight * i / 4.0;
      const std::string label = p.log_y ? fmt::format("{:.2g}", std::pow(10.0, v)) : fmt::format("{:.3g}", v);
      svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#eee\"/>\n", kLeft + 1,
                         kLeft + plot_w - 1, y);
      svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", kLeft - 5, y + 4, label);
    }
    for (int i = 0; i <= 4; ++i) {  // x ticks
      const double v = x_min + (x_max - x_min) * i / 4.0;
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{:.0f}</text>\n", px(v),
                         top + kPanelHeight + 15, v);
    }
    for (size_t si = 0; si < p.series.size(); ++si) {
      const PlotSeries& s = p.series[si];
      std::string points;
      for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
        if (std::isfinite(fy(s.y[i]))) points += fmt::format("{:.1f},{:.1f} ", px(s.x[i]), py(s.y[i]));
      svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"{} points=\"{}\"/>\n", s.color,
                         s.dashed ? " stroke-dasharray=\"5,4\"" : "", points);
      const double ly = top + 14 + 18 * static_cast<double>(si);
      svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"{3}\" stroke-width=\"2\"{4}/>\n",
                         kLeft + plot_w + 10, kLeft + plot_w + 30, ly - 4, s.color,
                         s.dashed ? " stroke-dasharray=\"5,4\"" : "");
      svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", kLeft + plot_w + 35, ly, escape(s.label));
    }
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n</svg>\n", kLeft + plot_w / 2,
                     height - 12, escape(x_label));
  return svg;
}

}  // namespace hymoe::tool
