// A minimal SVG line-plot writer for the training curves (no dependency): stacked panels sharing the x axis,
// each with its own y range (linear or log10), one polyline per series.
#pragma once

#include <string>
#include <vector>

namespace hymoe::tool {

struct PlotSeries {
  std::string label;
  std::string color;     // any SVG colour
  bool dashed = false;
  std::vector<double> x, y;
};

struct PlotPanel {
  std::string title;
  bool log_y = false;
  std::vector<PlotSeries> series;
};

// The whole SVG document: `title` on top, panels stacked, x labelled `x_label`.
std::string render_svg_plot(const std::string& title, const std::string& x_label, const std::vector<PlotPanel>& panels);

}  // namespace hymoe::tool
