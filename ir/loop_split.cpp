// Finds `(p + c) mod n` / `(p + c) div n` over the innermost variable p and the points where
// they wrap.
#include "ir/loop_split.h"

#include <algorithm>
#include <optional>

namespace kiln::kir {

namespace {

using kir::Expr;
using kir::ExprKind;

bool is_var(const Expr* e, int32_t v) {
  return e->kind == ExprKind::Var && e->var == v;
}

bool is_index_const(const Expr* e) {
  return e->kind == ExprKind::Const && e->dtype == ir::DType::i64;
}

// c when `e` is p or p + c (either order) with a constant c >= 0.
std::optional<int64_t> offset_of_p(const Expr* e, int32_t p) {
  if (is_var(e, p)) return 0;
  if (e->kind != ExprKind::Alu || e->alu != kir::Alu::Add || e->args.size() != 2) return {};
  const Expr* a = e->args[0];
  const Expr* b = e->args[1];
  if (is_var(b, p)) std::swap(a, b);
  if (!is_var(a, p) || !is_index_const(b) || b->ival < 0) return {};
  return b->ival;
}

}  // namespace

LoopSplit split_innermost(const kir::Kernel& k) {
  LoopSplit whole;
  const int64_t extent = k.domain.empty() ? 1 : k.domain.back();
  whole.bounds = {0, extent};
  if (k.domain.empty() || extent <= 1) return whole;
  const int32_t p = static_cast<int32_t>(k.domain.size()) - 1;
  LoopSplit split;
  std::vector<int64_t> cuts = {0, extent};
  for (const Expr* e : kir::kernel_exprs(k)) {
    if (e->kind != ExprKind::Alu || (e->alu != kir::Alu::Mod && e->alu != kir::Alu::IDiv)) continue;
    const std::optional<int64_t> c = offset_of_p(e->args[0], p);
    if (!c || !is_index_const(e->args[1]) || e->args[1]->ival <= 0) continue;
    const int64_t n = e->args[1]->ival;
    // p in (0, extent) with (p + c) % n == 0.
    for (int64_t at = n - *c % n; at < extent; at += n) {
      cuts.push_back(at);
      if (cuts.size() > kMaxLoopPieces + 1) return whole;
    }
    split.wraps.emplace(e, Wrap{*c, n});
  }
  std::ranges::sort(cuts);
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  if (cuts.size() - 1 > kMaxLoopPieces) return whole;
  split.bounds = std::move(cuts);
  return split;
}

}  // namespace kiln::kir
