// The roofline bound: bytes and flops of a kernel against bandwidth and peak rate.
#include "autotune/roofline.h"

#include <algorithm>
#include <set>
#include <utility>

namespace kiln::autotune {

namespace {

// Counts the ops under `e`, each (op, enclosing reduction) pair once. A reduction at the top
// level is counted once per point of the parallel variables it reads, not per point of the
// domain: backends hoist it out of the loops it does not depend on (softmax's row max is
// computed once per row), and the bound must not count work no backend does.
class FlopCounter {
 public:
  explicit FlopCounter(const std::vector<int64_t>& domain) : domain_(domain) {}

  double count(const kir::Expr* e, const kir::Expr* reduce, double points) {
    if (!seen_.insert({e, reduce}).second) return 0;
    switch (e->kind) {
      case kir::ExprKind::Const:
      case kir::ExprKind::Var:
      case kir::ExprKind::Load:  // the index is address arithmetic
        return 0;
      case kir::ExprKind::Alu:
      case kir::ExprKind::Scan: {    // one addition per point, along the scanned row
        if (!e->rextents.empty()) {  // a selection: a pass over its row per point
          const double inner = points * static_cast<double>(e->rextents[0]);
          return inner + count(e->args[0], e, inner);
        }
        double n = points;
        for (const kir::Expr* a : e->args) n += count(a, reduce, points);
        return n;
      }
      case kir::ExprKind::Reduce: {
        double inner = reduce ? points : hoisted_points(e);
        for (int64_t x : e->rextents) inner *= static_cast<double>(x);
        return inner + count(e->args[0], e, inner);
      }
    }
    return 0;
  }

 private:
  // Points of the parallel domain at which `e` differs: the product of the extents of the
  // parallel variables it reads.
  double hoisted_points(const kir::Expr* e) {
    std::set<int32_t> vars;
    std::set<const kir::Expr*> visited;
    collect_vars(e, vars, visited);
    double n = 1;
    for (int32_t v : vars)
      if (v >= 0 && v < static_cast<int32_t>(domain_.size())) n *= static_cast<double>(domain_[v]);
    return n;
  }
  static void collect_vars(const kir::Expr* e, std::set<int32_t>& vars,
                           std::set<const kir::Expr*>& visited) {
    if (!visited.insert(e).second) return;
    if (e->kind == kir::ExprKind::Var) vars.insert(e->var);
    for (const kir::Expr* a : e->args) collect_vars(a, vars, visited);
  }

  const std::vector<int64_t>& domain_;
  std::set<std::pair<const kir::Expr*, const kir::Expr*>> seen_;
};

}  // namespace

KernelWork kernel_work(const kir::Kernel& kernel) {
  KernelWork w;
  for (const kir::Param& p : kernel.params)
    w.bytes += static_cast<double>(ir::shape_numel(p.shape)) * ir::dtype_size(p.dtype);
  double points = 1;
  for (int64_t x : kernel.domain) points *= static_cast<double>(x);
  FlopCounter counter(kernel.domain);
  for (const kir::Store& st : kernel.stores) w.flops += counter.count(st.value, nullptr, points);
  return w;
}

double roofline_ms(const kir::Kernel& kernel, double bandwidth_bytes_per_s, double flops_per_s) {
  const KernelWork w = kernel_work(kernel);
  double s = 0;
  if (bandwidth_bytes_per_s > 0) s = std::max(s, w.bytes / bandwidth_bytes_per_s);
  if (flops_per_s > 0) s = std::max(s, w.flops / flops_per_s);
  return s * 1e3;
}

}  // namespace kiln::autotune
