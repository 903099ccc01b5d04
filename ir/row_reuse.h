// Row reuse: values that a row reduction computes for every element of the row and that the
// stores compute again, element by element, right after it. Softmax is the case in point:
// exp(x[r] - max) is summed over the row, then exp(x[p] - max) / sum is stored for every p. The
// cpu emitter keeps the reduction's values in a row buffer and reads them back instead of
// evaluating the expression twice.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/kernel_ir.h"

namespace kiln::kir {

struct RowReuse {
  const kir::Expr* reduce = nullptr;       // R: one variable r over the innermost axis's extent
  const kir::Expr* body_value = nullptr;   // F, inside R's body, reading r
  const kir::Expr* point_value = nullptr;  // E, outside every reduction: F with r renamed to p
};

// Rows longer than this many bytes of values are not kept (the row lives on the stack).
constexpr int64_t kMaxRowReuseBytes = 64 * 1024;

// The pairs (R, F, E) of `kernel`: p is the innermost domain variable, R does not read p, E reads
// p, and F contains a costly operation (a transcendental function or a division); each E is the
// largest such match on its path from a store. Empty when nothing qualifies.
std::vector<RowReuse> find_row_reuse(const kir::Kernel& kernel);

}  // namespace kiln::kir
