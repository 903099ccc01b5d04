// Simplified construction of i64 index arithmetic: affine normal form plus range-based div/mod
// rules.
#include "passes/index_simplify.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "kiln/error.h"

namespace kiln::passes {

namespace {

using kir::Alu;
using kir::Expr;
using kir::ExprKind;

// floor division and remainder for a positive divisor (index arithmetic is floor-based).
int64_t floor_div(int64_t a, int64_t c) {
  return a / c - ((a % c != 0) && ((a < 0) != (c < 0)));
}
int64_t floor_mod(int64_t a, int64_t c) {
  return a - floor_div(a, c) * c;
}

bool is_const(const Expr* e) {
  return e->kind == ExprKind::Const;
}
bool is_alu(const Expr* e, Alu op) {
  return e->kind == ExprKind::Alu && e->alu == op;
}

// An index expression as sum(coef * base) + constant, where no base is an Add/Sub/Mul-by-constant
// or a constant. Keeping terms in first-appearance order makes the output deterministic.
// Index arithmetic wraps modulo 2^64, as the kernels' i64 arithmetic does: an index near
// int64's ends (an arange from INT64_MIN by INT64_MAX) is rearranged without overflowing.
int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
int64_t wrap_neg(int64_t a) {
  return static_cast<int64_t>(uint64_t{0} - static_cast<uint64_t>(a));
}

struct Affine {
  std::vector<std::pair<const Expr*, int64_t>> terms;
  int64_t constant = 0;

  void add_term(const Expr* base, int64_t coef) {
    for (auto& [b, c] : terms)
      if (b == base) {
        c = wrap_add(c, coef);
        return;
      }
    terms.push_back({base, coef});
  }
  void add(const Affine& o, int64_t scale) {
    for (const auto& [b, c] : o.terms) add_term(b, wrap_mul(c, scale));
    constant = wrap_add(constant, wrap_mul(o.constant, scale));
  }
};

Affine decompose(const Expr* e) {
  Affine out;
  if (is_const(e)) {
    out.constant = e->ival;
  } else if (is_alu(e, Alu::Add) || is_alu(e, Alu::Sub)) {
    out = decompose(e->args[0]);
    out.add(decompose(e->args[1]), is_alu(e, Alu::Add) ? 1 : -1);
  } else if (is_alu(e, Alu::Mul) && is_const(e->args[1])) {
    out.add(decompose(e->args[0]), e->args[1]->ival);
  } else if (is_alu(e, Alu::Mul) && is_const(e->args[0])) {
    out.add(decompose(e->args[1]), e->args[0]->ival);
  } else {
    out.add_term(e, 1);
  }
  return out;
}

// Saturating arithmetic keeps "unknown" ranges from overflowing as they propagate.
int64_t sat_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return a > 0 ? INT64_MAX : INT64_MIN;
  return r;
}
int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
  return r;
}

IndexRange range_of_mod(IndexRange r, int64_t c) {
  if (r.lo >= 0 && r.hi - r.lo < c && floor_mod(r.lo, c) <= floor_mod(r.hi, c))
    return {floor_mod(r.lo, c), floor_mod(r.hi, c)};
  return {0, c - 1};
}

IndexRange range_of_mul(IndexRange r, int64_t c) {
  int64_t a = sat_mul(r.lo, c), b = sat_mul(r.hi, c);
  return {std::min(a, b), std::max(a, b)};
}

}  // namespace

int32_t IndexBuilder::new_var(int64_t extent) {
  extents_.push_back(extent);
  return static_cast<int32_t>(extents_.size() - 1);
}

// A variable of extent 1 can only be 0; folding it keeps size-1 axes out of index expressions.
const kir::Expr* IndexBuilder::var(int32_t id) {
  KILN_CHECK(id >= 0 && static_cast<size_t>(id) < extents_.size())
      << "unknown loop variable v" << id;
  if (extents_[static_cast<size_t>(id)] == 1) return constant(0);
  return arena_.var(id);
}

const kir::Expr* IndexBuilder::constant(int64_t v) {
  return arena_.index(v);
}

namespace {
// (x idiv c)*c*k + (x mod c)*k -> x*k: the pair a reshape round trip leaves behind.
void fold_divmod_pairs(Affine& a) {
  for (size_t i = 0; i < a.terms.size(); ++i) {
    auto [m, k] = a.terms[i];
    if (k == 0 || !is_alu(m, Alu::Mod) || !is_const(m->args[1])) continue;
    const Expr* x = m->args[0];
    int64_t c = m->args[1]->ival;
    for (size_t j = 0; j < a.terms.size(); ++j) {
      auto [d, kd] = a.terms[j];
      if (!is_alu(d, Alu::IDiv) || d->args[0] != x || d->args[1] != m->args[1] ||
          kd != wrap_mul(k, c))
        continue;
      a.terms[i].second = 0;
      a.terms[j].second = 0;
      a.add(decompose(x), k);
      break;
    }
  }
}

// Rebuilds an affine form; negative coefficients become subtractions, the constant goes last.
const Expr* rebuild(kir::ExprArena& arena, Affine a) {
  fold_divmod_pairs(a);
  const Expr* acc = nullptr;
  for (const auto& [base, coef] : a.terms) {
    if (coef == 0) continue;
    int64_t mag = coef < 0 ? wrap_neg(coef) : coef;  // INT64_MIN stays itself, as it wraps
    const Expr* term =
        mag == 1 ? base : arena.alu(Alu::Mul, ir::DType::i64, {base, arena.index(mag)});
    if (!acc) {
      acc = coef < 0 ? arena.alu(Alu::Mul, ir::DType::i64, {base, arena.index(coef)}) : term;
    } else {
      acc = arena.alu(coef < 0 ? Alu::Sub : Alu::Add, ir::DType::i64, {acc, term});
    }
  }
  if (!acc) return arena.index(a.constant);
  if (a.constant > 0) return arena.alu(Alu::Add, ir::DType::i64, {acc, arena.index(a.constant)});
  if (a.constant < 0)
    return arena.alu(Alu::Sub, ir::DType::i64, {acc, arena.index(wrap_neg(a.constant))});
  return acc;
}
}  // namespace

const kir::Expr* IndexBuilder::add(const kir::Expr* a, const kir::Expr* b) {
  Affine s = decompose(a);
  s.add(decompose(b), 1);
  return rebuild(arena_, s);
}

const kir::Expr* IndexBuilder::sub(const kir::Expr* a, const kir::Expr* b) {
  Affine s = decompose(a);
  s.add(decompose(b), -1);
  return rebuild(arena_, s);
}

const kir::Expr* IndexBuilder::mul(const kir::Expr* a, int64_t c) {
  Affine s;
  s.add(decompose(a), c);
  return rebuild(arena_, s);
}

namespace {
// The largest g dividing c, the constant and every coefficient of `a`.
int64_t common_factor(const Affine& a, int64_t c) {
  int64_t g = std::gcd(c, a.constant);
  for (const auto& [base, coef] : a.terms) g = std::gcd(g, coef);
  return g;
}

// `a` divided by g, which divides every coefficient and the constant.
const Expr* divide_exact(kir::ExprArena& arena, const Affine& a, int64_t g) {
  Affine q;
  for (const auto& [base, coef] : a.terms) q.add_term(base, coef / g);
  q.constant = a.constant / g;
  return rebuild(arena, q);
}

// Splits `a` (affine) against divisor c: multiples of c go to `quot` (divided), the rest (with
// the constant reduced into [0, c)) stays in `rest`.
void split_by_divisor(const Affine& a, int64_t c, Affine& quot, Affine& rest) {
  for (const auto& [base, coef] : a.terms) {
    if (coef % c == 0)
      quot.add_term(base, coef / c);
    else
      rest.add_term(base, coef);
  }
  quot.constant = floor_div(a.constant, c);
  rest.constant = floor_mod(a.constant, c);
}
}  // namespace

// (q*c + r) idiv c -> q + r idiv c, and r idiv c -> 0 when 0 <= r < c. A rest that may be
// negative is shifted by a multiple of c first, so IDiv never sees a negative operand.
const kir::Expr* IndexBuilder::idiv(const kir::Expr* a, int64_t c) {
  KILN_CHECK(c > 0) << "idiv by " << c;
  if (c == 1) return a;
  Affine quot, rest;
  split_by_divisor(decompose(a), c, quot, rest);
  const Expr* r = rebuild(arena_, rest);
  IndexRange rr = range(r);
  if (rr.lo < 0) {
    int64_t shift = floor_div(-rr.lo + c - 1, c);
    r = add(r, constant(shift * c));
    quot.constant -= shift;
    rr = range(r);
  }
  const Expr* q = rebuild(arena_, quot);
  if (rr.hi < c) return q;
  const Expr* d = nullptr;
  if (int64_t g = common_factor(decompose(r), c); g > 1) {
    // (x*g) idiv (m*g) -> x idiv m
    d = idiv(divide_exact(arena_, decompose(r), g), c / g);
  } else if (is_alu(r, Alu::IDiv) && is_const(r->args[1])) {
    // (x idiv a) idiv c -> x idiv (a*c)
    d = idiv(r->args[0], r->args[1]->ival * c);
  } else {
    d = arena_.alu(Alu::IDiv, ir::DType::i64, {r, constant(c)});
  }
  return add(q, d);
}

// (q*c + r) mod c -> r mod c, and r mod c -> r when 0 <= r < c.
const kir::Expr* IndexBuilder::mod(const kir::Expr* a, int64_t c) {
  KILN_CHECK(c > 0) << "mod by " << c;
  if (c == 1) return constant(0);
  Affine quot, rest;
  split_by_divisor(decompose(a), c, quot, rest);
  const Expr* r = rebuild(arena_, rest);
  IndexRange rr = range(r);
  if (rr.lo < 0) {
    r = add(r, constant(floor_div(-rr.lo + c - 1, c) * c));
    rr = range(r);
  }
  if (rr.hi < c) return r;
  if (int64_t g = common_factor(decompose(r), c); g > 1) {
    // (x*g) mod (m*g) -> (x mod m)*g
    return mul(mod(divide_exact(arena_, decompose(r), g), c / g), g);
  }
  if (is_alu(r, Alu::Mod) && is_const(r->args[1]) && r->args[1]->ival % c == 0) {
    // (x mod (m*c)) mod c -> x mod c
    return mod(r->args[0], c);
  }
  return arena_.alu(Alu::Mod, ir::DType::i64, {r, constant(c)});
}

IndexRange IndexBuilder::range(const kir::Expr* e) const {
  constexpr IndexRange kUnknown{INT64_MIN / 2, INT64_MAX / 2};
  switch (e->kind) {
    case ExprKind::Const:
      return {e->ival, e->ival};
    case ExprKind::Var: {
      auto v = static_cast<size_t>(e->var);
      if (v >= extents_.size()) return kUnknown;
      return {0, extents_[v] - 1};
    }
    case ExprKind::Alu:
      break;
    case ExprKind::Load:  // data, not index arithmetic
    case ExprKind::Reduce:
    case ExprKind::Scan:
    case ExprKind::Size:  // a run-time size: any value
      return kUnknown;
  }
  const Alu op = e->alu;
  // An integer widened to i64 keeps its value; max and min of integers never wrap (a gather's
  // clamped index is computed in its i32 index dtype, then widened).
  if (op == Alu::Cast && e->dtype == ir::DType::i64 && ir::is_int(e->args[0]->dtype))
    return range(e->args[0]);
  if (!ir::is_int(e->dtype) || e->args.size() != 2) return kUnknown;
  IndexRange a = range(e->args[0]), b = range(e->args[1]);
  if (op == Alu::Max) return {std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
  if (op == Alu::Min) return {std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
  if (e->dtype != ir::DType::i64) return kUnknown;  // narrower arithmetic may wrap
  // The ops index expressions are made of; any other op's range is unknown.
  if (op == Alu::Add) return {sat_add(a.lo, b.lo), sat_add(a.hi, b.hi)};
  if (op == Alu::Sub) return {sat_add(a.lo, -b.hi), sat_add(a.hi, -b.lo)};
  if (op == Alu::Mul) {
    if (b.lo == b.hi) return range_of_mul(a, b.lo);
    if (a.lo == a.hi) return range_of_mul(b, a.lo);
    return kUnknown;
  }
  if (op == Alu::IDiv || op == Alu::Mod) {
    if (b.lo != b.hi || b.lo <= 0) return kUnknown;
    if (op == Alu::IDiv) return {floor_div(a.lo, b.lo), floor_div(a.hi, b.lo)};
    return range_of_mod(a, b.lo);
  }
  return kUnknown;
}

}  // namespace kiln::passes
