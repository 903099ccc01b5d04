// `kiln dump --format dot`: the fused graph as a Graphviz digraph, one cluster per kernel.
#pragma once

#include <string>

#include "tools/dump_graph.h"

namespace kiln::tools {

// With `why`, arrows that cross kernels carry the reason the two ops did not fuse.
std::string render_dot(const DumpGraph& graph, bool why);

// A light fill colour for kernel `k` ("#rrggbb"), shared by the drawn formats.
std::string kernel_colour(int k);

}  // namespace kiln::tools
