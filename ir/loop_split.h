// Wrap-around indices in the innermost parallel loop: `(p + c) mod n` and `(p + c) div n`, as
// roll and wrap-around stencils (life) produce them. Split at the points where they wrap, each
// piece of the loop sees them as affine (`p + c - q*n` and `q`), so its loads are contiguous and
// the piece vectorizes.
//
// Steps too: a min, max or clip of an index that rises with p against constants, a comparison of
// one with a constant, and/or/not of such comparisons and a where on one, as a pad or a concat
// along the innermost axis produce them (x[min(p, 599)] where p < 600, z[max(p - 600, 0)] where
// not). Each takes one arm (one truth) over a piece; the loop is cut where it changes arm, and
// each piece reads its own operand contiguously where it would gather both through clamped
// indices and select.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <unordered_set>
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
  // The steps: Min, Max, Clip, a comparison, And, Or, Not or a Where, each constant in its
  // choice over every piece (step_at at the piece's start gives it).
  std::unordered_set<const kir::Expr*> steps;
};

// More pieces than this and the loop is left whole.
constexpr size_t kMaxLoopPieces = 8;

// The pieces of the innermost domain axis; a single piece [0, extent) (and no wraps or steps) when
// the kernel has no such expression, would need more than kMaxLoopPieces pieces, or its innermost
// extent is a run-time size.
LoopSplit split_innermost(const kir::Kernel& kernel);

// The steps of reduction `r`'s variable in its body (a Reduce over one variable of a fixed
// extent: a sum over a padded or concatenated row), and the cuts they make along it; no wraps. A
// single piece and no steps where it has none or they would make more than kMaxLoopPieces pieces.
LoopSplit split_reduction(const kir::Expr* r);

// A reduction whose variable has steps, and them (KernelFacts::reduce_splits).
struct ReduceSplit {
  const kir::Expr* reduce = nullptr;
  LoopSplit split;
};

// The quotient (p + c) div n, constant over the piece that starts at `lo`.
inline int64_t wrap_quotient(const Wrap& w, int64_t lo) {
  return (lo + w.c) / w.n;
}

// The operand a step takes at p: for Min, Max and Clip the index of its argument whose value it
// is (the rising one where they tie), for a comparison, And, Or and Not 1 when it holds and 0 when
// not, for a Where 1 or 2 (its then or else argument). `e` is in LoopSplit::steps; p is the
// innermost variable's value (a piece's start).
int step_at(const kir::Expr* e, int64_t p);
// Whether step_at gives `e`'s truth (a comparison, And, Or, Not), not the argument it takes.
inline bool step_is_truth(const kir::Expr* e) {
  return kir::is_comparison(e->alu) || e->alu == kir::Alu::And || e->alu == kir::Alu::Or ||
         e->alu == kir::Alu::Not;
}

}  // namespace kiln::kir
