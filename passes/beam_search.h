// Internal to the beam fuser: the search over assignments of placed nodes to groups
// (DESIGN.md §5), returning the cheapest complete assignment.
#pragma once

#include <climits>
#include <cstdint>
#include <utility>
#include <vector>

#include "passes/cost_model.h"
#include "passes/fusion_graph.h"

namespace kiln::passes {

// A group that can still receive nodes.
struct OpenGroup {
  int32_t id;
  std::vector<int32_t> copies;  // sorted: nodes homed elsewhere that this group recomputes
  std::vector<int32_t> inputs;  // sorted: nodes it reads from buffers
  std::vector<int32_t> desc;    // sorted: groups that read it, directly or transitively
  bool has_matmul = false;      // computes a matmul (home node)
  bool has_matmul_nest = false;  // computes a matmul in its loop nest (home node, no attention)
  bool has_reduce = false;      // computes a reduction or matmul (home node or copy)
  bool has_scan = false;        // computes a scan (home node): the group takes nothing more
  int32_t size = 0;             // nodes it computes: homes and copies
};

// The most nodes one group computes. Compile time of a kernel grows faster than linearly with its
// size (instruction scheduling and register allocation over one loop body), and the planner's
// work per placement with the target group's size, so a longer run of fusable nodes is cut into
// kernels of this size: compile time stays linear in the graph's size.
inline constexpr int32_t kMaxGroupNodes = 512;

// A partial (after the last node: complete) assignment. Costs are kept as running totals of the
// cost model's terms: every change a placement makes is local to the groups it touches.
struct SearchState {
  std::vector<int32_t> group_of;      // per node: the group computing it (its home), or -1
  std::vector<uint8_t> materialized;  // per node: written to a buffer by its home group
  std::vector<double> factor;         // per node: evaluation factor in its home group
  std::vector<int32_t> shape_of;      // per group: a node with its output shape, or -1
  std::vector<int32_t> closed_at;     // per group: the step at which it was closed, or INT_MAX
  std::vector<int32_t> buffers;       // per group: buffers it reads and writes so far
  std::vector<std::pair<int32_t, int32_t>> copies;  // (group, node): recomputed copies
  std::vector<OpenGroup> open;                      // oldest first
  double cost = 0;                                  // estimated seconds of everything placed so far
  uint64_t signature = 0;  // hash of the partition, to drop duplicate states

  int32_t group_count() const { return static_cast<int32_t>(shape_of.size()); }
};

struct SearchOptions {
  int max_blocks = 5;
  int beam_width = 4;
  size_t max_buffers = kMaxKernelBuffers;  // BeamOptions::max_kernel_buffers
};

// The surviving complete assignments, cheapest (by the running estimate) first.
std::vector<SearchState> beam_search(const FusionGraph& graph, const CostModel& cost,
                                     SearchOptions options);

}  // namespace kiln::passes
