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

}  // namespace kiln::runtime
