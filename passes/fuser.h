// The fuser interface: partition the live graph into groups, each of which becomes one kernel.
// The first fuser (make_first_fuser) is a rule-based greedy partitioner; the beam search of
// DESIGN.md §5 replaces it behind this same interface.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "passes/passes.h"

namespace kiln::passes {

struct FusedGroup {
  // Computed inside the kernel, topological order (by id); includes the outputs. A node inlined
  // into several groups is recomputed by each.
  std::vector<const ir::Node*> nodes;
  std::vector<const ir::Node*> outputs;  // written to buffers by this kernel
  // Read from buffers: graph inputs or earlier groups' outputs, each once, in first-use order
  // (the order a left-to-right depth-first walk from the outputs reaches them).
  std::vector<const ir::Node*> inputs;
};

struct FusionPlan {
  std::vector<FusedGroup> groups;  // in an order where every group's inputs are ready
};

class Fuser {
 public:
  virtual ~Fuser() = default;
  virtual std::string_view name() const = 0;
  // Every output that is not an Input node is written by exactly one group. Input nodes are
  // never computed; Full/Arange sources and movement ops are recomputed inside the consumer.
  virtual FusionPlan fuse(const Outputs& outputs) const = 0;
};

// Elementwise chains (with broadcasts and views on reads) fuse into one kernel; elementwise
// producers fuse into the reduction or matmul that consumes them. Materialized (one group each,
// ordered by node id): graph outputs that are not Input nodes (an output listed twice is one
// group), reductions (argmax/argmin included), matmuls, and matmul operands that are not a pure
// chain of movement ops over an Input or materialized node. Everything else is inlined into every
// group that reads it.
std::unique_ptr<Fuser> make_first_fuser();

}  // namespace kiln::passes
