// Simplification of i64 index expressions with range analysis: constant folding, x*1, x+0,
// (a*c + b) idiv c -> a and (a*c + b) mod c -> b when 0 <= b < c, x mod n -> x when 0 <= x < n.
// Sums are kept in an affine normal form (like terms merged, constant last). An operand of idiv
// or mod that may be negative is shifted by a multiple of the divisor first, so the IDiv/Mod
// expressions built here always satisfy the kernel IR contract (non-negative operands).
// Loop variables of extent 1 are the constant 0. range() also understands Max/Min (of any
// integer dtype) and integers widened to i64.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/kernel_ir.h"

namespace kiln::passes {

struct IndexRange {
  int64_t lo, hi;  // inclusive
};

// Builds simplified index arithmetic. `var_extents[v]` is the extent of loop variable v.
class IndexBuilder {
 public:
  IndexBuilder(kir::ExprArena& arena, std::vector<int64_t> var_extents)
      : arena_(arena), extents_(std::move(var_extents)) {}
  kir::ExprArena& arena() { return arena_; }
  int32_t new_var(int64_t extent);  // a fresh reduce variable
  const kir::Expr* var(int32_t id);
  const kir::Expr* constant(int64_t v);
  const kir::Expr* add(const kir::Expr* a, const kir::Expr* b);
  const kir::Expr* sub(const kir::Expr* a, const kir::Expr* b);
  const kir::Expr* mul(const kir::Expr* a, int64_t c);
  const kir::Expr* idiv(const kir::Expr* a, int64_t c);
  const kir::Expr* mod(const kir::Expr* a, int64_t c);
  IndexRange range(const kir::Expr* e) const;

 private:
  kir::ExprArena& arena_;
  std::vector<int64_t> extents_;
};

}  // namespace kiln::passes
