// The `reference` device: an op-by-op interpreter of the graph IR in double precision, the
// oracle for tests and numerical checks. Slow on purpose: clarity over speed.
#pragma once

#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "kiln/host_tensor.h"
#include "kiln/error.h"

namespace kiln::interp {

// Evaluates `outputs`. Every Input node reachable from them must be bound in `inputs` (with its
// dtype and shape; otherwise an error names the input). Floating values are computed in f64 and
// rounded to the node's dtype only when stored in the returned tensors; integer and bool values
// follow their dtype's semantics (wrap-around, floor division, 0 for division by zero).
Expected<std::vector<ir::HostTensor>> evaluate_reference(
    const std::vector<const ir::Node*>& outputs,
    const std::unordered_map<const ir::Node*, ir::HostTensor>& inputs);

}  // namespace kiln::interp
