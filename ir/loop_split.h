// Wrap-around indices in the innermost parallel loop: `(p + c) mod n` and `(p + c) div n`, as
// roll and wrap-around stencils (life) produce them. Split at the points where they wrap, each
// piece of the loop sees them as affine (`p + c - q*n` and `q`), so its loads are contiguous and
// the piece vectorizes.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "ir/kernel_ir.h"

namespace kiln::kir {

struct Wrap {
  int64_t c = 0;  // offset added to p
  int64_t n = 1;  // divisor
};

struct LoopSplit {
  std::vector<int64_t> bounds;                       // 0 = b0 < ... < bk = extent
  std::unordered_map<const kir::Expr*, Wrap> wraps;  // the Mod / IDiv expressions of p
};

// More pieces than this and the loop is left whole.
constexpr size_t kMaxLoopPieces = 8;

// The pieces of the innermost domain axis; a single piece [0, extent) (and no wraps) when the
// kernel has no such expression or would need more than kMaxLoopPieces pieces.
LoopSplit split_innermost(const kir::Kernel& kernel);

// The quotient (p + c) div n, constant over the piece that starts at `lo`.
inline int64_t wrap_quotient(const Wrap& w, int64_t lo) {
  return (lo + w.c) / w.n;
}

}  // namespace kiln::kir
