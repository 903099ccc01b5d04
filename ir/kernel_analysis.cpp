// Matmul recognition: one Sum-of-products reduction over one variable, operands split by which
// of the two innermost parallel variables they read, epilogues over parallel variables only.
#include "ir/kernel_analysis.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <unordered_map>

#include "ir/post_order.h"

namespace kiln::kir {

namespace {

// Buffers and dtypes as the generic code paths require them, so that a malformed kernel goes
// there and gets its error message.
bool well_formed(const Kernel& k) {
  auto bad_buf = [&](int32_t buf) {
    return buf < 0 || buf >= static_cast<int32_t>(k.params.size());
  };
  for (const Store& st : k.stores)
    if (bad_buf(st.buf) || st.value->dtype != k.params[st.buf].dtype) return false;
  for (const Expr* e : kernel_exprs(k))
    if (e->kind == ExprKind::Load && (bad_buf(e->buf) || e->dtype != k.params[e->buf].dtype))
      return false;
  return std::ranges::all_of(k.domain, [](int64_t d) { return d >= 0; });
}

// A Sum over one variable of a product, all in f32 (or, with `half`, all in f16 or all in bf16).
bool is_sum_of_products(const Expr* r, bool half) {
  const DType t = r->dtype;
  const bool dtype_ok = t == DType::f32 || (half && (t == DType::f16 || t == DType::bf16));
  if (r->reduce_op != ReduceOp::Sum || !dtype_ok || r->rvars.size() != 1) return false;
  const Expr* body = r->args[0];
  if (body->kind != ExprKind::Alu || body->alu != Alu::Mul) return false;
  return body->dtype == t && body->args.size() == 2 && body->args[0]->dtype == t &&
         body->args[1]->dtype == t;
}

// `e` reads only variables in [0, limit) other than `excluded`, or `extra`; and no reduction.
bool reads_only(const FreeVars& fv, const Expr* e, int32_t limit, int32_t excluded, int32_t extra) {
  if (has_reduce(e)) return false;
  return std::ranges::all_of(
      fv.of(e), [&](int32_t v) { return v == extra || (v >= 0 && v < limit && v != excluded); });
}

}  // namespace

namespace {

// var_coefficient's recursion; with `views`, also through min, max, clip and where (as their arm
// of largest step) and a roll's remainder (view_step).
std::optional<int64_t> step_along(const Expr* e, int32_t var, const FreeVars& fv, bool views) {
  if (!fv.uses(e, var)) return 0;
  if (e->kind == ExprKind::Var) return 1;
  if (e->kind != ExprKind::Alu || !ir::is_int(e->dtype)) return std::nullopt;
  if (e->alu == Alu::Add || e->alu == Alu::Sub) {
    const auto a = step_along(e->args[0], var, fv, views);
    const auto b = step_along(e->args[1], var, fv, views);
    if (!a || !b) return std::nullopt;
    return e->alu == Alu::Add ? *a + *b : *a - *b;
  }
  if (e->alu == Alu::Mul) {
    for (int i = 0; i < 2; ++i) {
      const Expr* c = e->args[i];
      if (c->kind != ExprKind::Const) continue;
      const auto other = step_along(e->args[1 - i], var, fv, views);
      if (other) return *other * c->ival;
    }
    return std::nullopt;
  }
  if (!views) return std::nullopt;
  const auto largest_arm = [&](size_t first) -> std::optional<int64_t> {
    int64_t step = 0;
    for (size_t i = first; i < e->args.size(); ++i) {
      const std::optional<int64_t> c = step_along(e->args[i], var, fv, views);
      if (!c) return std::nullopt;
      if (std::abs(*c) > std::abs(step)) step = *c;
    }
    return step;
  };
  if (e->alu == Alu::Min || e->alu == Alu::Max || e->alu == Alu::Clip) return largest_arm(0);
  if (e->alu == Alu::Where) return largest_arm(1);  // args[0] is the condition
  // A roll's wrap-around, (k + s) mod n: steps as k does (but where it wraps).
  if (e->alu == Alu::Mod && !fv.uses(e->args[1], var))
    return step_along(e->args[0], var, fv, views);
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> var_coefficient(const Expr* e, int32_t var, const FreeVars& fv) {
  return step_along(e, var, fv, /*views=*/false);
}

std::optional<int64_t> view_step(const Expr* e, int32_t var, const FreeVars& fv) {
  return step_along(e, var, fv, /*views=*/true);
}

void collect_reduces(const Expr* root, std::unordered_set<const Expr*>& seen,
                     std::vector<const Expr*>& out) {
  ir::pre_order(root, seen, [&](const Expr* e) {
    if (e->kind != ExprKind::Reduce) return true;
    out.push_back(e);
    return false;  // not into the reduction's body
  });
}

bool has_reduce(const Expr* e) {
  std::unordered_set<const Expr*> seen;
  std::vector<const Expr*> found;
  collect_reduces(e, seen, found);
  return !found.empty();
}

std::optional<MatmulPattern> recognize_matmul(const Kernel& k, const FreeVars& fv, bool half) {
  if (k.domain.size() < 2 || k.stores.empty() || !well_formed(k)) return std::nullopt;
  // One column (a matrix times a vector, a dot product) is a row of dot products, which the
  // reduction paths sum in blocks over several accumulators; a matmul loop nest would run one
  // accumulator down all of K (f32 rounding that builds up: 2e-5 relative over 2048 equal terms).
  if (k.domain.back() == 1) return std::nullopt;
  std::vector<const Expr*> reduces;
  std::unordered_set<const Expr*> seen;
  for (const Store& st : k.stores) {
    collect_reduces(st.value, seen, reduces);
    collect_reduces(st.index, seen, reduces);
  }
  if (reduces.size() != 1 || !is_sum_of_products(reduces[0], half)) return std::nullopt;
  const Expr* r = reduces[0];
  const auto rank = static_cast<int32_t>(k.domain.size());
  MatmulPattern p{.reduce = r,
                  .k_var = r->rvars[0],
                  .k_extent = r->rextents[0],
                  .i_var = rank - 2,
                  .j_var = rank - 1};
  // Reduce variables are numbered after the parallel ones; anything else is malformed.
  if (p.k_var < rank || p.k_extent < 0) return std::nullopt;
  for (const Store& st : k.stores) {
    if (has_reduce(st.index)) return std::nullopt;
    for (const Expr* e : {st.index, st.value})
      if (!std::ranges::all_of(fv.of(e), [&](int32_t v) { return v >= 0 && v < rank; }))
        return std::nullopt;
  }
  const Expr* x = r->args[0]->args[0];
  const Expr* y = r->args[0]->args[1];
  // Mul commutes: whichever operand reads no column variable is the row operand.
  for (int swap = 0; swap < 2; ++swap, std::swap(x, y)) {
    if (reads_only(fv, x, rank, p.j_var, p.k_var) && reads_only(fv, y, rank, p.i_var, p.k_var)) {
      p.a = x;
      p.b = y;
      return p;
    }
  }
  return std::nullopt;
}

namespace {

// `a` (at key variable ja) and `b` (at jb) are one expression up to renaming ja to jb and each
// reduction's own variables pairwise. `ren` maps a's variables to b's; `same` memoizes pairs.
class Renamed {
 public:
  Renamed(int32_t ja, int32_t jb) { ren_[ja] = jb; }
  bool equal(const Expr* a, const Expr* b) {
    if (a == b && !reads_renamed(a)) return true;
    if (a->kind != b->kind || a->dtype != b->dtype || a->args.size() != b->args.size())
      return false;
    if (!same_.insert({a, b}).second) return true;
    switch (a->kind) {
      case ExprKind::Const:
      case ExprKind::Size:
        return a->fval == b->fval && a->ival == b->ival;
      case ExprKind::Var: {
        auto it = ren_.find(a->var);
        return (it == ren_.end() ? a->var : it->second) == b->var;
      }
      case ExprKind::Load:
        if (a->buf != b->buf) return false;
        break;
      case ExprKind::Alu:
        if (a->alu != b->alu) return false;
        break;
      case ExprKind::Reduce:
        if (a->reduce_op != b->reduce_op || a->rextents != b->rextents || a->rslots != b->rslots ||
            a->rvars.size() != b->rvars.size())
          return false;
        for (size_t i = 0; i < a->rvars.size(); ++i) ren_[a->rvars[i]] = b->rvars[i];
        break;
      case ExprKind::Scan:
        return false;
    }
    for (size_t i = 0; i < a->args.size(); ++i)
      if (!equal(a->args[i], b->args[i])) return false;
    return true;
  }

 private:
  // Whether `e` reads a variable that is renamed (so that a == b does not imply equality).
  bool reads_renamed(const Expr* e) {
    auto it = reads_.find(e);
    if (it != reads_.end()) return it->second;
    bool r = false;
    if (e->kind == ExprKind::Var) r = ren_.contains(e->var) && ren_.at(e->var) != e->var;
    if (e->kind == ExprKind::Reduce) r = true;
    for (const Expr* x : e->args) r = r || reads_renamed(x);
    reads_.emplace(e, r);
    return r;
  }

  std::unordered_map<int32_t, int32_t> ren_;
  std::set<std::pair<const Expr*, const Expr*>> same_;
  std::unordered_map<const Expr*, bool> reads_;
};

const Expr* one_reduce(const Expr* e, ReduceOp op) {
  if (e->kind != ExprKind::Reduce || e->reduce_op != op || e->rvars.size() != 1 ||
      e->dtype != DType::f32)
    return nullptr;
  return e;
}

// A loop variable plus a constant, read through integer casts: (var, offset).
std::optional<std::pair<int32_t, int64_t>> var_plus_const(const Expr* e) {
  if (e->kind == ExprKind::Var) return std::pair{e->var, int64_t{0}};
  // Only wide signed integers: a narrower cast could wrap.
  if (e->kind != ExprKind::Alu || (e->dtype != DType::i32 && e->dtype != DType::i64))
    return std::nullopt;
  if (e->alu == Alu::Cast) return var_plus_const(e->args[0]);
  if (e->alu != Alu::Add && e->alu != Alu::Sub) return std::nullopt;
  const Expr *x = e->args[0], *c = e->args[1];
  if (e->alu == Alu::Add && x->kind == ExprKind::Const) std::swap(x, c);
  if (c->kind != ExprKind::Const) return std::nullopt;
  auto t = var_plus_const(x);
  if (!t) return std::nullopt;
  t->second += e->alu == Alu::Add ? c->ival : -c->ival;
  return t;
}

// m where X = where(m, ·, -inf): the condition under which a logit is visible; else null.
const Expr* visible_where(const Expr* x) {
  if (x->kind != ExprKind::Alu || x->alu != Alu::Where) return nullptr;
  const Expr* other = x->args[2];
  if (other->kind != ExprKind::Const || !std::isinf(other->fval) || other->fval > 0) return nullptr;
  return x->args[0];
}

// X = where(m, ·, -inf) with m reading neither the scores, nor i, nor a reduction or scan.
const Expr* key_mask(const Expr* x, const Expr* scores, int32_t i_var, const FreeVars& fv) {
  const Expr* m = visible_where(x);
  if (!m || fv.uses(m, i_var) || has_reduce(m)) return nullptr;
  bool reads_scores = false;
  std::unordered_set<const Expr*> seen;
  ir::pre_order(m, seen, [&](const Expr* e) {
    if (e == scores || e->kind == ExprKind::Scan) reads_scores = true;
    return !reads_scores;
  });
  return reads_scores ? nullptr : m;
}

// X = where(cond, ·, -inf) with cond comparing i + a against j + b: the largest visible key is
// i + offset.
std::optional<int64_t> causal_offset(const Expr* x, int32_t i_var, int32_t j_var) {
  const Expr* cond = visible_where(x);
  if (!cond || cond->kind != ExprKind::Alu || !is_comparison(cond->alu)) return std::nullopt;
  auto l = var_plus_const(cond->args[0]);
  auto r = var_plus_const(cond->args[1]);
  if (!l || !r) return std::nullopt;
  Alu op = cond->alu;
  // Normalize to (i side) op (j side).
  if (l->first == j_var && r->first == i_var) {
    std::swap(l, r);
    op = op == Alu::Ge ? Alu::Le : op == Alu::Le ? Alu::Ge : op == Alu::Gt ? Alu::Lt
       : op == Alu::Lt ? Alu::Gt : op;
  }
  if (l->first != i_var || r->first != j_var) return std::nullopt;
  // i + a >= j + b  <=>  j <= i + (a - b);  i + a > j + b  <=>  j <= i + (a - b - 1).
  if (op == Alu::Ge) return l->second - r->second;
  if (op == Alu::Gt) return l->second - r->second - 1;
  return std::nullopt;
}

}  // namespace

std::optional<AttentionPattern> recognize_attention(const Kernel& k, const FreeVars& fv) {
  if (k.domain.size() < 2 || k.stores.empty() || !well_formed(k)) return std::nullopt;
  std::vector<const Expr*> reduces;
  std::unordered_set<const Expr*> seen;
  for (const Store& st : k.stores) {
    collect_reduces(st.value, seen, reduces);
    if (has_reduce(st.index)) return std::nullopt;
  }
  if (reduces.size() != 1) return std::nullopt;
  const auto rank = static_cast<int32_t>(k.domain.size());
  for (const Store& st : k.stores)
    for (const Expr* e : {st.index, st.value})
      if (!std::ranges::all_of(fv.of(e), [&](int32_t v) { return v >= 0 && v < rank; }))
        return std::nullopt;
  AttentionPattern p;
  p.reduce = one_reduce(reduces[0], ReduceOp::Sum);
  if (!p.reduce) return std::nullopt;
  p.i_var = rank - 2;
  p.e_var = rank - 1;
  p.j_var = p.reduce->rvars[0];
  p.keys = p.reduce->rextents[0];
  // The key count may be a run-time size (one kernel for a cache read to any length); the same
  // slot in the max and the sum.
  const auto slot_of = [](const Expr* r) { return r->rslots.empty() ? -1 : r->rslots[0]; };
  p.keys_slot = slot_of(p.reduce);
  const Expr* body = p.reduce->args[0];
  if (p.j_var < rank || body->kind != ExprKind::Alu || body->alu != Alu::Mul ||
      body->dtype != DType::f32)
    return std::nullopt;
  // The probabilities are the operand with the Div.
  const Expr *probs = body->args[0], *value = body->args[1];
  if (probs->kind != ExprKind::Alu || probs->alu != Alu::Div) std::swap(probs, value);
  if (probs->kind != ExprKind::Alu || probs->alu != Alu::Div) return std::nullopt;
  if (!reads_only(fv, value, rank, p.i_var, p.j_var)) return std::nullopt;
  p.probs = probs;
  p.value = value;
  const Expr *num = probs->args[0], *sum = one_reduce(probs->args[1], ReduceOp::Sum);
  if (!sum || num->kind != ExprKind::Alu || num->alu != Alu::Exp) return std::nullopt;
  const Expr* diff = num->args[0];
  if (diff->kind != ExprKind::Alu || diff->alu != Alu::Sub) return std::nullopt;
  const Expr *x = diff->args[0], *max = one_reduce(diff->args[1], ReduceOp::Max);
  if (!max || max->rextents[0] != p.keys || sum->rextents[0] != p.keys ||
      slot_of(max) != p.keys_slot || slot_of(sum) != p.keys_slot)
    return std::nullopt;
  // S's body: exp(X'' - M) with the same M.
  const Expr* sbody = sum->args[0];
  if (sbody->kind != ExprKind::Alu || sbody->alu != Alu::Exp) return std::nullopt;
  const Expr* sdiff = sbody->args[0];
  if (sdiff->kind != ExprKind::Alu || sdiff->alu != Alu::Sub || sdiff->args[1] != max)
    return std::nullopt;
  if (!Renamed(p.j_var, max->rvars[0]).equal(x, max->args[0]) ||
      !Renamed(p.j_var, sum->rvars[0]).equal(x, sdiff->args[0]))
    return std::nullopt;
  p.logits = x;
  // X holds exactly one reduction, the scores.
  std::vector<const Expr*> inner;
  std::unordered_set<const Expr*> inner_seen;
  collect_reduces(x, inner_seen, inner);
  if (inner.size() != 1) return std::nullopt;
  p.scores = one_reduce(inner[0], ReduceOp::Sum);
  if (!p.scores || !is_sum_of_products(p.scores, false)) return std::nullopt;
  p.d_var = p.scores->rvars[0];
  p.head_dim = p.scores->rextents[0];
  if (slot_of(p.scores) >= 0) return std::nullopt;  // the head's width is fixed
  if (p.d_var < rank || p.head_dim < 0 || p.keys < 0) return std::nullopt;
  const Expr *qa = p.scores->args[0]->args[0], *kb = p.scores->args[0]->args[1];
  // Q reads i and d (not j, not e); K reads j and d (not i, not e).
  auto only = [&](const Expr* e, int32_t a, int32_t b) {
    if (has_reduce(e)) return false;
    return std::ranges::all_of(fv.of(e), [&](int32_t v) {
      return v == a || v == b || (v >= 0 && v < rank - 2);
    });
  };
  if (!(only(qa, p.i_var, p.d_var) && only(kb, p.j_var, p.d_var))) std::swap(qa, kb);
  if (!(only(qa, p.i_var, p.d_var) && only(kb, p.j_var, p.d_var))) return std::nullopt;
  p.query = qa;
  p.key = kb;
  // The logits read batch variables, i and j, plus the scores' own d inside them.
  if (!std::ranges::all_of(fv.of(x), [&](int32_t v) {
        return v == p.i_var || v == p.j_var || (v >= 0 && v < rank - 2);
      }))
    return std::nullopt;
  if (!only(value, p.j_var, p.e_var)) return std::nullopt;
  p.causal_offset = causal_offset(x, p.i_var, p.j_var);
  p.key_mask = p.causal_offset ? nullptr : key_mask(x, p.scores, p.i_var, fv);
  return p;
}

}  // namespace kiln::kir
