// The plan as a picture: a heat map of the scores (layers down, experts across, each layer scaled to its own
// hottest expert) with GPU-resident experts outlined. Self-contained SVG, no scripts, no external resources.
#pragma once

#include <string>

#include "hymoe/placement/planner.h"

namespace hymoe::placement {

std::string heatmap_svg(const Placement& plan);

}  // namespace hymoe::placement
