// Test-only kernel IR interpreter: straightforward recursive evaluation, checked at every access.
#include "tests/passes/kernel_eval.h"

#include <fmt/format.h>
#include <bit>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "ir/scalar_semantics.h"

namespace kiln::testing {

namespace {

using ir::DType;
using kir::Alu;
using kir::Expr;
using kir::ExprKind;

double round_to(double v, DType t) {
  switch (t) {
    case DType::f32:
      return static_cast<float>(v);
    case DType::f64:
    case DType::f16:
    case DType::bf16:
      return v;
    case DType::i32:
      return static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(v)));
    case DType::i8:
      return static_cast<int8_t>(static_cast<uint8_t>(static_cast<int64_t>(v)));
    case DType::u8:
      return static_cast<uint8_t>(static_cast<int64_t>(v));
    case DType::boolean:
      return v != 0;
    case DType::i64:
      return static_cast<double>(static_cast<int64_t>(v));
  }
  return v;
}

class Evaluator {
 public:
  Evaluator(std::vector<Buffer>& bufs, const std::vector<int64_t>& sizes)
      : bufs_(bufs), sizes_(sizes) {}

  double eval(const Expr* e) {
    switch (e->kind) {
      case ExprKind::Const:
        return ir::is_float(e->dtype) ? e->fval : static_cast<double>(e->ival);
      case ExprKind::Var:
        return static_cast<double>(vars_.at(static_cast<size_t>(e->var)));
      case ExprKind::Load:
        return load(e);
      case ExprKind::Alu:
        return alu(e);
      case ExprKind::Reduce:
        return reduce(e);
      case ExprKind::Scan:
        return scan(e);
      case ExprKind::Size: {  // this instance's value (an instance's extents are its own)
        const int64_t v = sizes_.at(static_cast<size_t>(e->ival));
        // A float slot holds a double's bits, read as a constant of that value.
        return e->dtype == ir::DType::i64 ? static_cast<double>(v) : std::bit_cast<double>(v);
      }
    }
    return NAN;
  }

  void set_var(int32_t v, int64_t value) {
    if (vars_.size() <= static_cast<size_t>(v)) vars_.resize(static_cast<size_t>(v) + 1);
    vars_[static_cast<size_t>(v)] = value;
  }
  std::string error;

 private:
  double load(const Expr* e) {
    auto i = static_cast<int64_t>(eval(e->args[0]));
    const Buffer& b = bufs_.at(static_cast<size_t>(e->buf));
    if (i < 0 || i >= static_cast<int64_t>(b.size())) {
      fail(fmt::format("load %{}[{}] out of range (size {})", e->buf, i, b.size()));
      return 0;
    }
    return b[static_cast<size_t>(i)];
  }

  double alu(const Expr* e) {
    std::vector<double> a;
    for (const Expr* x : e->args) a.push_back(eval(x));
    if ((e->alu == Alu::IDiv || e->alu == Alu::Mod) && (a[0] < 0 || a[1] <= 0))
      fail(fmt::format("{}({}, {}) outside its contract", kir::alu_name(e->alu), a[0], a[1]));
    double r;
    if (e->alu == Alu::IDiv)
      r = std::floor(a[0] / a[1]);
    else if (e->alu == Alu::Mod)
      r = a[0] - std::floor(a[0] / a[1]) * a[1];
    else if (e->alu == Alu::Cast && !ir::is_float(e->dtype) && e->dtype != DType::boolean)
      r = std::trunc(a[0]);
    else  // the graph op's scalar semantics (ir/scalar_semantics.h)
      r = ir::eval_elementwise(*kir::op_of(e->alu), e->args[0]->dtype, a);
    return round_to(r, e->dtype);
  }

  double reduce(const Expr* e) {
    double acc = init(e->reduce_op);
    int64_t best = -1;
    double best_v = 0;
    int64_t count = 1;
    for (int64_t x : e->rextents) count *= x;
    for (int64_t flat = 0; flat < count; ++flat) {
      int64_t rest = flat;
      for (size_t i = e->rvars.size(); i-- > 0;) {
        set_var(e->rvars[i], rest % e->rextents[i]);
        rest /= e->rextents[i];
      }
      double v = eval(e->args[0]);
      switch (e->reduce_op) {
        case kir::ReduceOp::Sum:
          acc = round_to(acc + v, e->dtype);
          break;
        case kir::ReduceOp::Prod:
          acc = round_to(acc * v, e->dtype);
          break;
        case kir::ReduceOp::Max:
          acc = std::isnan(v) || std::isnan(acc) ? NAN : std::max(acc, v);
          break;
        case kir::ReduceOp::Min:
          acc = std::isnan(v) || std::isnan(acc) ? NAN : std::min(acc, v);
          break;
        case kir::ReduceOp::ArgMax:
        case kir::ReduceOp::ArgMin:
          if (best < 0 || better(e->reduce_op, v, best_v)) best = flat, best_v = v;
          break;
      }
    }
    if (e->reduce_op == kir::ReduceOp::ArgMax || e->reduce_op == kir::ReduceOp::ArgMin)
      return static_cast<double>(best);
    return acc;
  }

  // The contract's definition, directly: the body summed over every step up to this one.
  double scan(const Expr* e) {
    const int64_t here = vars_.at(static_cast<size_t>(e->var));
    if (!e->rvars.empty()) return selection(e, here);
    double acc = 0;
    for (int64_t step = 0; step <= here; ++step) {
      set_var(e->var, step);
      acc = round_to(acc + eval(e->args[0]), e->dtype);
    }
    set_var(e->var, here);
    return acc;
  }

  // A selection scan, by its contract: body(r) over [0, n) stably sorted (larger first for
  // ArgMax, smaller first for ArgMin, NaN above every number); step `here` is the here-th r.
  double selection(const Expr* e, int64_t here) {
    std::vector<std::pair<double, int64_t>> row;
    for (int64_t r = 0; r < e->rextents[0]; ++r) {
      set_var(e->rvars[0], r);
      row.emplace_back(eval(e->args[0]), r);
    }
    const bool largest = e->reduce_op == kir::ReduceOp::ArgMax;
    std::stable_sort(row.begin(), row.end(), [&](const auto& a, const auto& b) {
      if (std::isnan(a.first) || std::isnan(b.first))
        return largest ? !std::isnan(b.first) : !std::isnan(a.first);
      return largest ? a.first > b.first : a.first < b.first;
    });
    if (here < 0 || here >= static_cast<int64_t>(row.size())) {
      fail(fmt::format("selection step {} of {} elements", here, row.size()));
      return 0;
    }
    return static_cast<double>(row[static_cast<size_t>(here)].second);
  }

  static bool better(kir::ReduceOp op, double v, double best) {
    if (std::isnan(best)) return false;
    if (std::isnan(v)) return op == kir::ReduceOp::ArgMax;
    return op == kir::ReduceOp::ArgMax ? v > best : v < best;
  }

  static double init(kir::ReduceOp op) {
    switch (op) {
      case kir::ReduceOp::Prod:
        return 1;
      case kir::ReduceOp::Max:
        return -std::numeric_limits<double>::infinity();
      case kir::ReduceOp::Min:
        return std::numeric_limits<double>::infinity();
      case kir::ReduceOp::Sum:
      case kir::ReduceOp::ArgMax:  // unused: arg reductions track the best index
      case kir::ReduceOp::ArgMin:
        return 0;
    }
    return 0;
  }

  void fail(std::string msg) {
    if (error.empty()) error = std::move(msg);
  }

  std::vector<Buffer>& bufs_;
  const std::vector<int64_t>& sizes_;
  std::vector<int64_t> vars_;
};

}  // namespace

std::string run_kernel(const kir::Kernel& k, std::vector<Buffer>& buffers) {
  buffers.resize(k.params.size());
  for (size_t i = 0; i < k.params.size(); ++i) {
    auto n = static_cast<size_t>(ir::shape_numel(k.params[i].shape));
    if (k.params[i].output)
      buffers[i].assign(n, NAN);
    else if (buffers[i].size() != n)
      return fmt::format("param %{} has {} elements, expected {}", i, buffers[i].size(), n);
  }
  Evaluator ev(buffers, k.sizes);
  int64_t points = ir::shape_numel(k.domain);
  for (int64_t p = 0; p < points; ++p) {
    int64_t rest = p;
    for (size_t d = k.domain.size(); d-- > 0;) {
      ev.set_var(static_cast<int32_t>(d), rest % k.domain[d]);
      rest /= k.domain[d];
    }
    for (const kir::Store& s : k.stores) {
      auto i = static_cast<int64_t>(ev.eval(s.index));
      double v = ev.eval(s.value);
      Buffer& out = buffers.at(static_cast<size_t>(s.buf));
      if (i < 0 || i >= static_cast<int64_t>(out.size()))
        return fmt::format("store %{}[{}] out of range (size {})", s.buf, i, out.size());
      out[static_cast<size_t>(i)] = v;
    }
    if (!ev.error.empty()) return ev.error;
  }
  return "";
}

}  // namespace kiln::testing
