// Row reuse analysis: top-level single-variable reductions over the innermost axis's extent, their
// costly body expressions, and the store expressions equal to one of them with the reduction's
// variable renamed to the innermost parallel variable.
#include "ir/row_reuse.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace kiln::kir {

namespace {

using kir::Alu;
using kir::Expr;
using kir::ExprKind;

// A division, a root or a transcendental function (ir/ops.def's cost).
bool costly_op(Alu a) {
  return kir::alu_cost(a) >= 4;
}

class Analysis {
 public:
  explicit Analysis(const kir::Kernel& k) : k_(k), vars_(k) {
    for (const Expr* e : kir::kernel_exprs(k)) {  // operands first
      bool costly = e->kind == ExprKind::Alu && costly_op(e->alu);
      if (e->kind != ExprKind::Reduce)
        for (const Expr* a : e->args) costly = costly || costly_.count(a);
      if (costly) costly_.insert(e);
    }
  }

  std::vector<RowReuse> run() {
    if (k_.domain.empty()) return {};
    p_ = static_cast<int32_t>(k_.domain.size()) - 1;
    n_ = k_.domain.back();
    std::unordered_set<const Expr*> seen;
    for (const kir::Store& st : k_.stores) collect_reductions(st.value, seen);
    if (candidates_.empty()) return {};
    seen.clear();
    for (const kir::Store& st : k_.stores) match(st.value, seen);
    return found_;
  }

 private:
  bool reads(const Expr* e, int32_t var) const { return vars_.uses(e, var); }

  // Top-level reductions that qualify, and their costly body expressions that read r.
  void collect_reductions(const Expr* e, std::unordered_set<const Expr*>& seen) {
    if (!seen.insert(e).second) return;
    if (e->kind != ExprKind::Reduce) {
      for (const Expr* a : e->args) collect_reductions(a, seen);
      return;
    }
    if (e->rvars.size() != 1 || e->rextents[0] != n_ || reads(e, p_)) return;
    std::unordered_set<const Expr*> body_seen;
    std::vector<const Expr*> stack = {e->args[0]};
    while (!stack.empty()) {
      const Expr* b = stack.back();
      stack.pop_back();
      if (b->kind == ExprKind::Reduce || !body_seen.insert(b).second) continue;
      const int64_t bytes = n_ * std::max(4, ir::dtype_size(b->dtype));
      if (b->kind == ExprKind::Alu && costly_.count(b) && reads(b, e->rvars[0]) &&
          bytes <= kMaxRowReuseBytes)
        candidates_.push_back({e, b});
      for (const Expr* a : b->args) stack.push_back(a);
    }
  }

  // The largest store expressions, outside reductions, that equal a candidate.
  void match(const Expr* e, std::unordered_set<const Expr*>& seen) {
    if (e->kind == ExprKind::Reduce || !seen.insert(e).second) return;
    if (e->kind == ExprKind::Alu && costly_.count(e) && reads(e, p_))
      for (const auto& [r, f] : candidates_)
        if (same(f, e, r->rvars[0])) {
          found_.push_back(RowReuse{r, f, e});
          return;
        }
    for (const Expr* a : e->args) match(a, seen);
  }

  // f (in R's body) equals e with R's variable r renamed to p.
  bool same(const Expr* f, const Expr* e, int32_t r) {
    if (f == e) return true;
    if (f->kind != e->kind || f->dtype != e->dtype || f->args.size() != e->args.size())
      return false;
    auto key = std::make_pair(f, e);
    if (auto it = same_.find(key); it != same_.end()) return it->second;
    bool eq = false;
    switch (f->kind) {
      case ExprKind::Var:
        eq = f->var == r && e->var == p_;
        break;
      case ExprKind::Load:
        eq = f->buf == e->buf && same(f->args[0], e->args[0], r);
        break;
      case ExprKind::Alu:
        eq = f->alu == e->alu;
        for (size_t i = 0; eq && i < f->args.size(); ++i) eq = same(f->args[i], e->args[i], r);
        break;
      case ExprKind::Const:   // interned: equal constants are one expression
      case ExprKind::Reduce:  // only the very same reduction
        eq = false;
        break;
    }
    same_.emplace(key, eq);
    return eq;
  }

  const kir::Kernel& k_;
  int32_t p_ = -1;
  int64_t n_ = 0;
  kir::FreeVars vars_;
  std::unordered_set<const Expr*> costly_;
  std::vector<std::pair<const Expr*, const Expr*>> candidates_;  // (R, F)
  std::map<std::pair<const Expr*, const Expr*>, bool> same_;
  std::vector<RowReuse> found_;
};

}  // namespace

std::vector<RowReuse> find_row_reuse(const kir::Kernel& kernel) {
  return Analysis(kernel).run();
}

}  // namespace kiln::kir
