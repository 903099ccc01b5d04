// Finds `(p + c) mod n` / `(p + c) div n` over the innermost variable p and the points where
// they wrap, and the steps (min / max / clip / comparisons of a rising index of p with constants)
// and the points where they change arm.
#include "ir/loop_split.h"

#include <algorithm>
#include <optional>

#include "ir/post_order.h"

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

// Whether `e` is an index that never falls as p rises and reads nothing but p and constants: p,
// a constant, sums, a difference with a constant, a product with a constant >= 0, and min, max
// and clip of such.
bool rising(const Expr* e, int32_t p) {
  if (is_index_const(e)) return true;
  if (e->kind == ExprKind::Var) return e->var == p;
  if (e->kind != ExprKind::Alu || e->dtype != ir::DType::i64) return false;
  const auto all_rising = [&] {
    return std::ranges::all_of(e->args, [&](const Expr* a) { return rising(a, p); });
  };
  if (e->alu == kir::Alu::Add || e->alu == kir::Alu::Min || e->alu == kir::Alu::Max ||
      e->alu == kir::Alu::Clip)
    return all_rising();
  if (e->alu == kir::Alu::Sub) return rising(e->args[0], p) && is_index_const(e->args[1]);
  if (e->alu == kir::Alu::Mul)
    for (int i = 0; i < 2; ++i)
      if (is_index_const(e->args[i]) && e->args[i]->ival >= 0 && rising(e->args[1 - i], p))
        return true;
  return false;
}

// The value at p of a rising index (wrapping as the emitted i64 arithmetic does).
int64_t value_at(const Expr* e, int64_t p) {
  if (e->kind == ExprKind::Const) return e->ival;
  if (e->kind == ExprKind::Var) return p;
  const auto arg = [&](size_t i) { return value_at(e->args[i], p); };
  const auto wrap = [](uint64_t v) { return static_cast<int64_t>(v); };
  if (e->alu == kir::Alu::Add)
    return wrap(static_cast<uint64_t>(arg(0)) + static_cast<uint64_t>(arg(1)));
  if (e->alu == kir::Alu::Sub)
    return wrap(static_cast<uint64_t>(arg(0)) - static_cast<uint64_t>(arg(1)));
  if (e->alu == kir::Alu::Mul)
    return wrap(static_cast<uint64_t>(arg(0)) * static_cast<uint64_t>(arg(1)));
  if (e->alu == kir::Alu::Min) return std::min(arg(0), arg(1));
  if (e->alu == kir::Alu::Max) return std::max(arg(0), arg(1));
  return std::min(std::max(arg(0), arg(1)), arg(2));  // Clip
}

// A step made of steps: a where on a step's truth, and, or, not of steps' truths. It changes only
// where they do (the cuts are theirs).
bool is_derived_step(const Expr* e, const std::unordered_set<const Expr*>& steps) {
  if (e->kind != ExprKind::Alu) return false;
  if (e->alu == kir::Alu::Where) return steps.count(e->args[0]) > 0;
  if (e->alu == kir::Alu::And || e->alu == kir::Alu::Or || e->alu == kir::Alu::Not)
    return std::ranges::all_of(e->args, [&](const Expr* a) { return steps.count(a) > 0; });
  return false;
}

// Whether `e` is a step of its own: one rising index of p against constants, in a min, a max, a
// clip (its bounds constant, lo <= hi) or an ordering comparison. Its arm (truth) changes in order
// as p rises, never back: found by halving.
bool is_step(const Expr* e, int32_t p) {
  if (e->kind != ExprKind::Alu) return false;
  const bool ordering = e->alu == kir::Alu::Lt || e->alu == kir::Alu::Le ||
                        e->alu == kir::Alu::Gt || e->alu == kir::Alu::Ge;
  const bool arms = e->alu == kir::Alu::Min || e->alu == kir::Alu::Max;
  if (!ordering && !arms && e->alu != kir::Alu::Clip) return false;
  if (e->args.empty() || e->args[0]->dtype != ir::DType::i64) return false;
  // One argument reads p (the rising one; Clip's is its first), the others are constants.
  int rising_args = 0;
  for (size_t i = 0; i < e->args.size(); ++i) {
    const Expr* a = e->args[i];
    if (is_index_const(a)) continue;
    if ((e->alu == kir::Alu::Clip && i != 0) || !rising(a, p)) return false;
    ++rising_args;
  }
  if (e->alu == kir::Alu::Clip && e->args[1]->ival > e->args[2]->ival) return false;
  return rising_args == 1;
}

// Where step_at changes over [a, b] (step_at(a) != step_at(b); it changes in order, never back),
// found by halving.
void changes(const Expr* e, int64_t a, int64_t b, std::vector<int64_t>& out) {
  if (b - a == 1) {
    out.push_back(b);
    return;
  }
  const int64_t m = a + (b - a) / 2;
  const int at = step_at(e, m);
  if (step_at(e, a) != at) changes(e, a, m, out);
  if (at != step_at(e, b)) changes(e, m, b, out);
}

// Sorts and dedups the cuts (0, the extent and the points found); whether they make at most
// kMaxLoopPieces pieces.
bool within_limit(std::vector<int64_t>& cuts) {
  std::ranges::sort(cuts);
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  return cuts.size() - 1 <= kMaxLoopPieces;
}

enum class Taken { no, step, too_many };

// Adds `e` to split.steps when it is a step of `var` over [0, extent), its cuts to `cuts`;
// too_many when the cuts then make more than kMaxLoopPieces pieces.
Taken take_step(const Expr* e, int32_t var, int64_t extent, LoopSplit& split,
                std::vector<int64_t>& cuts) {
  if (is_derived_step(e, split.steps)) {
    split.steps.insert(e);
    return Taken::step;
  }
  if (!is_step(e, var)) return Taken::no;
  if (step_at(e, 0) != step_at(e, extent - 1)) changes(e, 0, extent - 1, cuts);
  if (!within_limit(cuts)) return Taken::too_many;
  split.steps.insert(e);
  return Taken::step;
}

}  // namespace

int step_at(const Expr* e, int64_t p) {
  if (e->alu == kir::Alu::Where) return step_at(e->args[0], p) == 1 ? 1 : 2;
  if (e->alu == kir::Alu::Not) return 1 - step_at(e->args[0], p);
  if (e->alu == kir::Alu::And) return std::min(step_at(e->args[0], p), step_at(e->args[1], p));
  if (e->alu == kir::Alu::Or) return std::max(step_at(e->args[0], p), step_at(e->args[1], p));
  const bool first_rises = !is_index_const(e->args[0]);
  const int64_t x = value_at(e->args[0], p), y = value_at(e->args[1], p);
  if (e->alu == kir::Alu::Lt) return x < y ? 1 : 0;
  if (e->alu == kir::Alu::Le) return x <= y ? 1 : 0;
  if (e->alu == kir::Alu::Gt) return x > y ? 1 : 0;
  if (e->alu == kir::Alu::Ge) return x >= y ? 1 : 0;
  if (e->alu == kir::Alu::Clip) {
    const int64_t hi = value_at(e->args[2], p);
    return x < y ? 1 : x > hi ? 2 : 0;
  }
  // Min or Max: the rising argument where the two tie.
  const int rise = first_rises ? 0 : 1;
  if (x == y) return rise;
  if (e->alu == kir::Alu::Min) return x < y ? 0 : 1;
  return x > y ? 0 : 1;
}

LoopSplit split_innermost(const kir::Kernel& k) {
  LoopSplit whole;
  const int64_t extent = k.domain.empty() ? 1 : k.domain.back();
  whole.bounds = {0, extent};
  if (k.domain.empty() || extent <= 1) return whole;
  const int32_t p = static_cast<int32_t>(k.domain.size()) - 1;
  // A run-time extent: cut points are the compiled extent's.
  if (k.domain_slot(static_cast<size_t>(p)) >= 0) return whole;
  LoopSplit split;
  std::vector<int64_t> cuts = {0, extent};
  for (const Expr* e : kir::kernel_exprs(k)) {  // operands first: a where after its comparison
    const Taken t = take_step(e, p, extent, split, cuts);
    if (t == Taken::too_many) return whole;
    if (t == Taken::step) continue;
    if (e->kind != ExprKind::Alu || (e->alu != kir::Alu::Mod && e->alu != kir::Alu::IDiv)) continue;
    const std::optional<int64_t> c = offset_of_p(e->args[0], p);
    if (!c || !is_index_const(e->args[1]) || e->args[1]->ival <= 0) continue;
    const int64_t n = e->args[1]->ival;
    // p in (0, extent) with (p + c) % n == 0.
    for (int64_t at = n - *c % n; at < extent; at += n) {
      cuts.push_back(at);
      if (cuts.size() > 2 * (kMaxLoopPieces + 1) && !within_limit(cuts)) return whole;
    }
    if (!within_limit(cuts)) return whole;
    split.wraps.emplace(e, Wrap{*c, n});
  }
  split.bounds = std::move(cuts);
  return split;
}

LoopSplit split_reduction(const Expr* r) {
  LoopSplit whole;
  if (r->kind != ExprKind::Reduce || r->rvars.size() != 1 || r->rextents.size() != 1 ||
      std::ranges::any_of(r->rslots, [](int32_t slot) { return slot >= 0; }))
    return whole;
  const int64_t extent = r->rextents[0];
  whole.bounds = {0, extent};
  if (extent <= 1) return whole;
  std::vector<const Expr*> body;  // operands first
  std::unordered_set<const Expr*> seen;
  ir::post_order(
      r->args[0],
      [](const Expr* x, std::vector<const Expr*>& out) {
        out.assign(x->args.begin(), x->args.end());
      },
      [&](const Expr* x) { return seen.count(x) > 0; },
      [&](const Expr* x) {
        if (seen.insert(x).second) body.push_back(x);
        return true;
      });
  LoopSplit split;
  std::vector<int64_t> cuts = {0, extent};
  for (const Expr* e : body)
    if (take_step(e, r->rvars[0], extent, split, cuts) == Taken::too_many) return whole;
  split.bounds = std::move(cuts);
  return split;
}

}  // namespace kiln::kir
