// A layered drawing of a DumpGraph for the HTML dump: layer = longest path from the inputs.
#pragma once

#include <vector>

#include "tools/dump_graph.h"

namespace kiln::tools {

struct Layout {
  static constexpr double kBoxWidth = 180, kBoxHeight = 40, kGapX = 24, kGapY = 56, kMargin = 16;
  std::vector<int> layer;  // per node
  std::vector<double> x, y;  // top-left corner of each node's box
  double width = 0, height = 0;
};

// Rows are layers top to bottom; within a row, boxes are ordered by kernel, then by creation
// order, so the kernels read as bands and the drawing is deterministic.
Layout layered_layout(const DumpGraph& graph);

}  // namespace kiln::tools
