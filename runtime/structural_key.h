// The structural key of a subgraph: what the plan cache is keyed by. Two subgraphs with equal keys
// have the same ops, dtypes, shapes, attributes and wiring, and the same pattern of distinct inputs,
// so one compiled plan serves both (inputs are bound by position).
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::runtime {

struct StructuralKey {
  std::string key;                         // compact canonical serialization
  std::vector<const ir::Node*> inputs;     // Input nodes in key order (position = plan input index)
};

StructuralKey structural_key(const std::vector<const ir::Node*>& outputs);

// The subgraph's shape family: the structural key without its sizes (`key`), and the sizes it
// left out (`dims`: every node's shape in structural order). Two subgraphs with equal family keys
// differ only in sizes; a symbolic plan (runtime/plan_family.h) built from two of them serves the
// others whose sizes follow the same affine functions of one size. An attribute that repeats its
// node's shape (reshape's and expand's `shape`) is left out with it, and a slice's start and end
// are sizes too (in `dims`, after the node's shape): a slice whose end grows a step (a cache read
// to the tokens so far) is one family, served by its symbolic plan. So are a pad's widths (before,
// then after, one per axis): a sequence padded to a length that grows. A full's float value that
// is a mean's scale 1 / n (ir::mean_scale) is the size n, after all others: a mean over a row that
// grows is one family (a plan of it fits the kernel's float slot to n). Every other attribute
// stays, so a slice's step or a pad's value that changes makes another family.
struct ShapeFamily {
  std::string key;
  std::vector<int64_t> dims;
};

ShapeFamily structural_family(const std::vector<const ir::Node*>& outputs);

}  // namespace kiln::runtime
