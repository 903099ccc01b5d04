// Interval analysis of a kernel's integer expressions, to prove 32-bit index math safe.
#include "codegen/gpu/index_width.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <unordered_map>

#include "ir/post_order.h"

namespace kiln::codegen::gpu {

namespace {

using kir::Alu;
using kir::Expr;
using kir::ExprKind;
using Int = __int128;

// Margin below 2^31: a grid-stride step added to an in-range index must not overflow either.
constexpr Int kLimit = Int{1} << 30;

struct Range {
  Int lo, hi;
};
using Maybe = std::optional<Range>;

Range dtype_range(ir::DType t) {
  switch (t) {
    case ir::DType::boolean: return {0, 1};
    case ir::DType::u8: return {0, 255};
    case ir::DType::i8: return {-128, 127};
    case ir::DType::i32: return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    case ir::DType::i64: break;
    case ir::DType::f32:  // not asked: the analysis gives up on float expressions
    case ir::DType::f64:
    case ir::DType::f16:
    case ir::DType::bf16: break;
  }
  return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
}

Int max_abs(Range r) { return std::max(r.lo < 0 ? -r.lo : r.lo, r.hi < 0 ? -r.hi : r.hi); }

Range hull(std::initializer_list<Int> v) { return {std::min(v), std::max(v)}; }

Maybe alu_range(const Expr* e, const std::vector<Range>& a) {
  switch (e->alu) {
    case Alu::Add: return Range{a[0].lo + a[1].lo, a[0].hi + a[1].hi};
    case Alu::Sub: return Range{a[0].lo - a[1].hi, a[0].hi - a[1].lo};
    case Alu::Mul: return hull({a[0].lo * a[1].lo, a[0].lo * a[1].hi, a[0].hi * a[1].lo, a[0].hi * a[1].hi});
    case Alu::IDiv:
      if (a[0].lo >= 0 && a[1].lo >= 1) return Range{a[0].lo / a[1].hi, a[0].hi / a[1].lo};
      return Range{-max_abs(a[0]), max_abs(a[0])};
    case Alu::Div: return Range{-max_abs(a[0]), max_abs(a[0])};
    case Alu::Mod: {
      const Int m = std::min(max_abs(a[0]), max_abs(a[1]));
      if (a[0].lo >= 0) return Range{0, m};
      return Range{-m, m};
    }
    case Alu::Max: return Range{std::max(a[0].lo, a[1].lo), std::max(a[0].hi, a[1].hi)};
    case Alu::Min: return Range{std::min(a[0].lo, a[1].lo), std::min(a[0].hi, a[1].hi)};
    case Alu::Clip:  // min(max(x, lo), hi) rises with each operand
      return Range{std::min(std::max(a[0].lo, a[1].lo), a[2].lo),
                   std::min(std::max(a[0].hi, a[1].hi), a[2].hi)};
    case Alu::Neg: return Range{-a[0].hi, -a[0].lo};
    case Alu::Abs: return Range{0, max_abs(a[0])};
    case Alu::Relu: return Range{std::max<Int>(a[0].lo, 0), std::max<Int>(a[0].hi, 0)};
    case Alu::Sign: return Range{-1, 1};
    case Alu::Where: return Range{std::min(a[1].lo, a[2].lo), std::max(a[1].hi, a[2].hi)};
    case Alu::Cast: return a[0];
    case Alu::And: case Alu::Or:  // bitwise: not needed for indices
      break;
    case Alu::Eq: case Alu::Ne: case Alu::Lt: case Alu::Le: case Alu::Gt: case Alu::Ge:
    case Alu::Not:  // bool results: Analysis::compute answers {0, 1} first
      break;
    case Alu::Exp: case Alu::Log: case Alu::Sqrt: case Alu::Rsqrt: case Alu::Recip: case Alu::Sin:
    case Alu::Cos: case Alu::Tanh: case Alu::Sigmoid: case Alu::Gelu: case Alu::Erf:
    case Alu::Floor: case Alu::Ceil: case Alu::Pow:  // float only: not on integer expressions
      break;
  }
  return std::nullopt;
}

Int count(const std::vector<int64_t>& dims) {
  Int n = 1;
  for (int64_t d : dims) n *= std::max<int64_t>(d, 0);
  return n;
}

class Analysis {
 public:
  explicit Analysis(const kir::Kernel& k) {
    for (size_t i = 0; i < k.domain.size(); ++i) extent_[static_cast<int32_t>(i)] = k.domain[i];
    for (const Expr* e : kir::kernel_exprs(k))
      for (size_t i = 0; i < e->rvars.size() && i < e->rextents.size(); ++i)
        extent_[e->rvars[i]] = e->rextents[i];
  }

  // The value range of an integer expression; nullopt when unbounded or not integer. Operands
  // first, on an explicit stack (ir/post_order.h), so range_one recurses one level deep.
  Maybe range(const Expr* root) {
    auto operands = [](const Expr* e, std::vector<const Expr*>& out) {
      out.clear();
      if (!ir::is_float(e->dtype)) out.assign(e->args.begin(), e->args.end());
    };
    ir::post_order(
        root, operands, [&](const Expr* e) { return memo_.count(e) > 0; },
        [&](const Expr* e) {
          range_one(e);
          return true;
        });
    return memo_.at(root);
  }

 private:
  Maybe range_one(const Expr* e) {
    if (auto it = memo_.find(e); it != memo_.end()) return it->second;
    Maybe r = compute(e);
    // Every expression of a narrow kernel must stay in range, whatever its dtype's width.
    if (r && e->dtype == ir::DType::i64 && (r->lo < -kLimit || r->hi > kLimit)) r = std::nullopt;
    if (r && e->dtype != ir::DType::i64) {  // narrower ints wrap: their range is the dtype's
      const Range d = dtype_range(e->dtype);
      if (r->lo < d.lo || r->hi > d.hi) r = d;
    }
    memo_[e] = r;
    return r;
  }

  Maybe compute(const Expr* e) {
    if (ir::is_float(e->dtype)) return std::nullopt;
    switch (e->kind) {
      case ExprKind::Const: return Range{e->ival, e->ival};
      case ExprKind::Size:
        return std::nullopt;
      case ExprKind::Var: {
        auto it = extent_.find(e->var);
        if (it == extent_.end()) return std::nullopt;
        return Range{0, std::max<Int>(it->second - 1, 0)};
      }
      case ExprKind::Load:
        if (e->dtype == ir::DType::i64) return std::nullopt;
        return dtype_range(e->dtype);
      case ExprKind::Reduce: return reduce_range(e);
      case ExprKind::Scan:
        return std::nullopt;  // a running sum: no range from its body's
      case ExprKind::Alu: break;
    }
    if (e->alu == Alu::Cast && ir::is_float(e->args[0]->dtype))
      return e->dtype == ir::DType::i64 ? Maybe{} : Maybe{dtype_range(e->dtype)};
    if (kir::is_comparison(e->alu)) return Range{0, 1};
    if (e->alu == Alu::Not) return Range{0, 1};
    std::vector<Range> a;
    for (size_t i = 0; i < e->args.size(); ++i) {
      if (e->alu == Alu::Where && i == 0) {
        a.push_back({0, 1});
        continue;
      }
      Maybe r = range(e->args[i]);
      if (!r) return std::nullopt;
      a.push_back(*r);
    }
    return alu_range(e, a);
  }

  Maybe reduce_range(const Expr* e) {
    const Int n = count(e->rextents);
    if (e->reduce_op == kir::ReduceOp::ArgMax || e->reduce_op == kir::ReduceOp::ArgMin)
      return Range{0, std::max<Int>(n - 1, 0)};
    Maybe body = range(e->args[0]);
    if (!body) return std::nullopt;
    if (e->dtype != ir::DType::i64) return dtype_range(e->dtype);
    if (e->reduce_op != kir::ReduceOp::Sum) return std::nullopt;  // its init is INT64_MIN/MAX/1
    return Range{n * std::min<Int>(body->lo, 0), n * std::max<Int>(body->hi, 0)};
  }

  std::unordered_map<int32_t, int64_t> extent_;
  std::unordered_map<const Expr*, Maybe> memo_;
};

}  // namespace

bool index_math_fits_i32(const kir::Kernel& k) {
  for (const kir::Param& p : k.params)
    if (count(p.shape) >= kLimit) return false;
  if (count(k.domain) >= kLimit) return false;
  Analysis an(k);
  for (const Expr* e : kir::kernel_exprs(k)) {
    if (e->kind == ExprKind::Reduce && count(e->rextents) >= kLimit) return false;
    if (e->dtype == ir::DType::i64 && !an.range(e)) return false;
  }
  return true;
}

}  // namespace kiln::codegen::gpu
