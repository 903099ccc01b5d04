// Collapsing innermost domain axes that only their flat index reads (see collapse_domain.h).
#include "passes/collapse_domain.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "ir/kernel_analysis.h"
#include "kiln/error.h"
#include "passes/index_simplify.h"

namespace kiln::passes {

namespace {

using kir::Alu;
using kir::Expr;
using kir::ExprKind;

enum class Dep : uint8_t { independent, linear, flat, other };

// How an expression depends on the axes a..rank-1: `coef` (one per axis of A) when linear.
struct Form {
  Dep dep = Dep::independent;
  std::vector<int64_t> coef;
};

class Classifier {
 public:
  Classifier(const kir::Kernel& k, size_t a) : k_(k), a_(a) {
    const size_t n = k.domain.size() - a;
    stride_.assign(n, 1);
    for (size_t i = n - 1; i-- > 0;) stride_[i] = stride_[i + 1] * k.domain[a + i + 1];
  }

  // Every store reads A only through its flat index.
  bool collapsible(const std::vector<const Expr*>& exprs) {
    for (const Expr* e : exprs) forms_[e] = classify(e);
    for (const kir::Store& st : k_.stores)
      if (used(forms_.at(st.index)) == Dep::other || used(forms_.at(st.value)) == Dep::other)
        return false;
    return true;
  }

 private:
  int64_t extent(size_t i) const { return k_.domain[a_ + i]; }
  bool in_a(int32_t var) const {
    return var >= static_cast<int32_t>(a_) && var < static_cast<int32_t>(k_.domain.size());
  }
  // A linear form's coefficients are c * stride (axes of extent 1 aside).
  bool proportional(const std::vector<int64_t>& coef) const {
    const int64_t c = coef.back();
    for (size_t i = 0; i < coef.size(); ++i)
      if (extent(i) != 1 && coef[i] != c * stride_[i]) return false;
    return true;
  }
  // What using `f` as an operand of anything but a sum or a constant multiple gives.
  Dep used(const Form& f) const {
    if (f.dep == Dep::linear) return proportional(f.coef) ? Dep::flat : Dep::other;
    return f.dep;
  }
  Form opaque(const Expr* e) const {
    Form out;
    for (const Expr* arg : e->args) {
      const Dep d = used(forms_.at(arg));
      if (d == Dep::other) return Form{Dep::other, {}};
      if (d == Dep::flat) out.dep = Dep::flat;
    }
    return out;
  }
  Form linear(const Form& f) const {
    if (f.dep == Dep::linear) return f;
    return Form{Dep::linear, std::vector<int64_t>(k_.domain.size() - a_, 0)};
  }
  Form classify(const Expr* e) const {
    switch (e->kind) {
      case ExprKind::Const:
      case ExprKind::Size:
        return {};
      case ExprKind::Var: {
        if (!in_a(e->var)) return {};
        Form f = linear({});
        f.coef[static_cast<size_t>(e->var) - a_] = 1;
        return f;
      }
      case ExprKind::Alu: {
        if (e->dtype != ir::DType::i64) break;
        if (e->alu == Alu::Add || e->alu == Alu::Sub) {
          const Form& x = forms_.at(e->args[0]);
          const Form& y = forms_.at(e->args[1]);
          const bool lin_x = x.dep == Dep::linear || x.dep == Dep::independent;
          const bool lin_y = y.dep == Dep::linear || y.dep == Dep::independent;
          if (!lin_x || !lin_y) break;
          if (x.dep == Dep::independent && y.dep == Dep::independent) return {};
          Form out = linear(x);
          const Form other = linear(y);
          const int64_t sign = e->alu == Alu::Add ? 1 : -1;
          for (size_t i = 0; i < out.coef.size(); ++i) out.coef[i] += sign * other.coef[i];
          return out;
        }
        if (e->alu == Alu::Mul) {
          for (int c = 0; c < 2; ++c) {
            const Expr* k = e->args[static_cast<size_t>(c)];
            const Form& x = forms_.at(e->args[static_cast<size_t>(1 - c)]);
            if (k->kind != ExprKind::Const || x.dep != Dep::linear) continue;
            Form out = x;
            for (int64_t& v : out.coef) v *= k->ival;
            return out;
          }
        }
        break;
      }
      case ExprKind::Load:
      case ExprKind::Reduce:
      case ExprKind::Scan:
        break;
    }
    return opaque(e);
  }

  const kir::Kernel& k_;
  const size_t a_;
  std::vector<int64_t> stride_;
  std::unordered_map<const Expr*, Form> forms_;
};

// The kernel over [domain[0..a), numel(domain[a..])]: A's first variable is the flat index, the
// rest of A is 0, reduction variables move down by rank - 1 - a.
kir::Kernel rebuild(const kir::Kernel& k, size_t a, const std::vector<const Expr*>& exprs) {
  const auto rank = static_cast<int32_t>(k.domain.size());
  const int32_t shift = rank - 1 - static_cast<int32_t>(a);
  kir::Kernel out = k;
  out.domain.assign(k.domain.begin(), k.domain.begin() + static_cast<std::ptrdiff_t>(a));
  int64_t flat = 1;
  for (size_t d = a; d < k.domain.size(); ++d) flat *= k.domain[d];
  out.domain.push_back(flat);
  std::vector<int64_t> extents = out.domain;
  for (const Expr* e : exprs)
    for (size_t i = 0; i < e->rvars.size(); ++i) {
      const auto v = static_cast<size_t>(e->rvars[i] - shift);
      if (extents.size() <= v) extents.resize(v + 1, 1);
      extents[v] = e->rextents[i];
    }
  kir::ExprArena& arena = *k.arena;
  IndexBuilder ib(arena, extents);
  std::unordered_map<const Expr*, const Expr*> to;
  auto moved = [&](int32_t var) { return var >= rank ? var - shift : var; };
  for (const Expr* e : exprs) {
    std::vector<const Expr*> args;
    for (const Expr* arg : e->args) args.push_back(to.at(arg));
    const Expr* r = nullptr;
    switch (e->kind) {
      case ExprKind::Const:
      case ExprKind::Size:
        r = e;
        break;
      case ExprKind::Var:
        if (e->var == rank - 1) r = ib.var(static_cast<int32_t>(a));
        else if (e->var >= static_cast<int32_t>(a) && e->var < rank) r = ib.constant(0);
        else r = ib.var(moved(e->var));
        break;
      case ExprKind::Load:
        r = arena.load(e->buf, e->dtype, args[0]);
        break;
      case ExprKind::Reduce: {
        std::vector<int32_t> rvars;
        for (int32_t v : e->rvars) rvars.push_back(moved(v));
        r = arena.reduce(e->reduce_op, e->dtype, args[0], std::move(rvars), e->rextents, {},
                         e->order);
        break;
      }
      case ExprKind::Alu:
        if (e->dtype == ir::DType::i64 && e->alu == Alu::Add) r = ib.add(args[0], args[1]);
        else if (e->dtype == ir::DType::i64 && e->alu == Alu::Sub) r = ib.sub(args[0], args[1]);
        else if (e->dtype == ir::DType::i64 && e->alu == Alu::Mul && args[1]->kind == ExprKind::Const)
          r = ib.mul(args[0], args[1]->ival);
        else if (e->dtype == ir::DType::i64 && e->alu == Alu::Mul && args[0]->kind == ExprKind::Const)
          r = ib.mul(args[1], args[0]->ival);
        else r = arena.alu(e->alu, e->dtype, std::move(args));
        break;
      case ExprKind::Scan:
        KILN_CHECK(false) << "collapse_domain: a scan kernel keeps its domain";
    }
    to[e] = r;
  }
  for (kir::Store& st : out.stores) {
    st.index = to.at(st.index);
    st.value = to.at(st.value);
  }
  return out;
}

}  // namespace

kir::Kernel collapse_domain(const kir::Kernel& k) {
  if (k.domain.size() < 2) return k;
  const std::vector<const Expr*> exprs = kir::kernel_exprs(k);
  if (std::ranges::any_of(exprs, [](const Expr* e) { return e->kind == ExprKind::Scan; })) return k;
  const kir::FreeVars fv(k);
  if (kir::recognize_matmul(k, fv) || kir::recognize_attention(k, fv)) return k;
  for (size_t a = 0; a + 1 < k.domain.size(); ++a)
    if (Classifier(k, a).collapsible(exprs)) return rebuild(k, a, exprs);
  return k;
}

}  // namespace kiln::passes
