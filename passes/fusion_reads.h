// Internal to the fuser and its cost model: what a node reads through inlined views, and how
// often each value it reads is evaluated once the code generator hoists loop-invariant work.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ir/graph.h"

namespace kiln::passes {

// One value read by a node, found by walking down through inlined movement ops.
struct ValueRead {
  const ir::Node* base;    // the value read (a node the walk stops at)
  const ir::Node* reader;  // the node that has `base` as a direct input (the graph edge's consumer)
  // The top of the chain of single-input movement ops through which `base` is read: `base`
  // itself for a direct read. Two reads with different views evaluate `base` at different points.
  const ir::Node* view;
  // Evaluations of `base` per evaluation of every element of the reading node once, counted the
  // way the CPU code generator runs it: an expression sits in the loop of the deepest loop
  // variable it depends on, so a value is evaluated (product of the loop extents down to that
  // loop) times; divided by base's element count. 1 for a same-shape or row-broadcast read, R
  // for a [1,C] value read inside an [R,C] loop nest.
  double extra;
};

// The reads of `n`: every operand is walked down through the nodes for which `stop` is false
// (they must be movement or source ops, which lowering inlines); a node where `stop` is true is
// one read. Reads come in left-to-right depth-first order; a (base, view) pair reached twice
// through the same loop dependencies is listed once.
std::vector<ValueRead> collect_reads(const ir::Node* n,
                                     const std::function<bool(const ir::Node*)>& stop);

// Scalar operations to compute every element of `n` once (reduction and matmul bodies
// included; movement ops are index arithmetic and count 0).
double node_flops(const ir::Node* n);

// Global-memory bytes of `n` as a buffer.
double node_bytes(const ir::Node* n);

}  // namespace kiln::passes
