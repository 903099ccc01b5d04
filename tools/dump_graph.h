// The fused graph as boxes and arrows, for the drawn dumps (`kiln dump --format dot|html`).
#pragma once

#include <string>
#include <vector>

#include "runtime/dump_text.h"

namespace kiln::tools {

struct DumpNode {
  std::string id;     // unique, [A-Za-z0-9_] only: "in3", "k0_n12"
  std::string name;   // "%y"
  std::string op;     // "add", "input"
  std::string type;   // "f32[4,8]"
  int kernel = -1;    // the group computing it; -1 for graph inputs
  bool output = false;  // written to a buffer by its kernel
};

struct DumpEdge {
  int from = 0, to = 0;  // indices into DumpGraph::nodes
  std::string reason;    // for edges that cross kernels: why they did not fuse (empty otherwise)
  bool crosses = false;  // from another kernel's buffer (or a graph input)
};

struct DumpKernel {
  std::string name;  // "k0"
  passes::GroupCost cost;
};

// A node inlined into several kernels appears once in each (it is recomputed by each).
struct DumpGraph {
  std::vector<DumpNode> nodes;
  std::vector<DumpEdge> edges;
  std::vector<DumpKernel> kernels;
  double total_seconds = 0;
};

// `namer` names the optimized graph (runtime::optimized_namer).
DumpGraph build_dump_graph(const runtime::Plan& plan, const runtime::ValueNamer& namer,
                           const passes::CostModel& model);

}  // namespace kiln::tools
