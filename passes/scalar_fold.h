// Compile-time evaluation of one elementwise op on literal operands (for fold_literals).
#pragma once

#include <optional>
#include <vector>

#include "ir/graph.h"

namespace kiln::passes {

// Evaluates `op` with the semantics of ir/builder.h: operands have dtype `operand_dtype` (for
// Where, of the value operands), the result has dtype `result_dtype`. Returns nullopt when the
// value cannot be folded exactly (f16/bf16 rounding, casts of non-finite or out-of-range values).
std::optional<double> fold_elementwise(ir::Op op, ir::DType result_dtype, ir::DType operand_dtype,
                                       const std::vector<double>& args);

}  // namespace kiln::passes
