// Row reuse analysis: top-level single-variable reductions over the innermost axis's extent, their
// costly body expressions, and the store expressions equal to one of them with the reduction's
// variable renamed to the innermost parallel variable.
#include "ir/row_reuse.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace kiln::kir {

namespace {

using kir::Alu;
using kir::Expr;
using kir::ExprKind;

// A division, a root or a transcendental function (kiln/ops.def's cost).
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

  // Top-level reductions that qualify, and their costly body expressions that read r. Walks
  // here are pre-order on explicit stacks: an expression's depth is the input's to choose.
  void collect_reductions(const Expr* root, std::unordered_set<const Expr*>& seen) {
    std::vector<const Expr*> todo{root};
    while (!todo.empty()) {
      const Expr* e = todo.back();
      todo.pop_back();
      if (!seen.insert(e).second) continue;
      if (e->kind != ExprKind::Reduce) {
        todo.insert(todo.end(), e->args.rbegin(), e->args.rend());
        continue;
      }
      if (e->rvars.size() != 1 || e->rextents[0] != n_ || reads(e, p_)) continue;
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
  }

  // The largest store expressions, outside reductions, that equal a candidate.
  void match(const Expr* root, std::unordered_set<const Expr*>& seen) {
    std::vector<const Expr*> todo{root};
    while (!todo.empty()) {
      const Expr* e = todo.back();
      todo.pop_back();
      if (e->kind == ExprKind::Reduce || !seen.insert(e).second) continue;
      bool matched = false;
      if (e->kind == ExprKind::Alu && costly_.count(e) && reads(e, p_))
        for (const auto& [r, f] : candidates_)
          if (same(f, e, r->rvars[0])) {
            found_.push_back(RowReuse{r, f, e});
            matched = true;
            break;
          }
      if (!matched) todo.insert(todo.end(), e->args.rbegin(), e->args.rend());
    }
  }

  // Whether f and e compare equal without looking at their operands: nullopt when the operands
  // decide.
  std::optional<bool> same_here(const Expr* f, const Expr* e, int32_t r) const {
    if (f == e) return true;
    if (f->kind != e->kind || f->dtype != e->dtype || f->args.size() != e->args.size())
      return false;
    if (auto it = same_.find(std::make_pair(f, e)); it != same_.end()) return it->second;
    switch (f->kind) {
      case ExprKind::Var:
        return f->var == r && e->var == p_;
      case ExprKind::Load:
        if (f->buf != e->buf) return false;
        return std::nullopt;
      case ExprKind::Alu:
        if (f->alu != e->alu) return false;
        return std::nullopt;
      case ExprKind::Const:   // interned: equal constants are one expression
      case ExprKind::Size:
      case ExprKind::Reduce:  // only the very same reduction
      case ExprKind::Scan:
        return false;
    }
    return false;
  }

  // f (in R's body) equals e with R's variable r renamed to p: operand pairs compared depth
  // first on an explicit stack, stopping at the first difference.
  bool same(const Expr* f0, const Expr* e0, int32_t r) {
    if (std::optional<bool> here = same_here(f0, e0, r)) return *here;
    struct Pair {
      const Expr* f;
      const Expr* e;
      size_t next = 0;
    };
    std::vector<Pair> stack{{f0, e0}};
    bool last = true;  // the answer for the pair that finished last
    while (!stack.empty()) {
      Pair& p = stack.back();
      if ((p.next > 0 && !last) || p.next == p.f->args.size()) {
        last = p.next > 0 ? last : true;
        same_.emplace(std::make_pair(p.f, p.e), last);
        stack.pop_back();
        continue;
      }
      const size_t i = p.next++;
      const Expr* cf = p.f->args[i];
      const Expr* ce = p.e->args[i];
      if (std::optional<bool> here = same_here(cf, ce, r)) {
        last = *here;
        continue;
      }
      stack.push_back({cf, ce});  // invalidates p
    }
    return last;
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
