// The roofline bound: bytes and flops of a kernel against bandwidth and peak rate.
#include "autotune/roofline.h"

#include "ir/kernel_analysis.h"

#include <algorithm>
#include <optional>
#include <vector>
#include <map>
#include <set>
#include <utility>

namespace kiln::autotune {

namespace {

// Counts the ops under `e`, each (op, enclosing reduction) pair once. A reduction is counted once
// per point of the variables it reads (parallel ones and those of enclosing reductions), not per
// point of the loops around it: backends hoist it out of the loops it does not depend on
// (softmax's row max is computed once per row, not once per element of the row sum that reads
// it), and the count must not include work no backend does.
class FlopCounter {
 public:
  // `sizes`: the kernel's run-time sizes (kir::Kernel::sizes); a reduction extent that is a slot
  // counts at this instance's value, not at the value the kernel's text keeps.
  FlopCounter(const std::vector<int64_t>& domain, const std::vector<int64_t>& sizes)
      : sizes_(sizes) {
    for (size_t v = 0; v < domain.size(); ++v) extent_[static_cast<int32_t>(v)] = domain[v];
  }

  double count(const kir::Expr* e, const kir::Expr* reduce, double points) {
    if (!seen_.insert({e, reduce}).second) return 0;
    switch (e->kind) {
      case kir::ExprKind::Const:
      case kir::ExprKind::Var:
      case kir::ExprKind::Size:
      case kir::ExprKind::Load:  // the index is address arithmetic
        return 0;
      case kir::ExprKind::Alu:
      case kir::ExprKind::Scan: {    // one addition per point, along the scanned row
        if (!e->rextents.empty()) {  // a selection: a pass over its row per point
          const double inner = points * static_cast<double>(rextent(e, 0));
          return inner + count(e->args[0], e, inner);
        }
        double n = points;
        for (const kir::Expr* a : e->args) n += count(a, reduce, points);
        return n;
      }
      case kir::ExprKind::Reduce: {
        for (size_t r = 0; r < e->rvars.size() && r < e->rextents.size(); ++r)
          extent_[e->rvars[r]] = rextent(e, r);
        double inner = hoisted_points(e);
        for (size_t r = 0; r < e->rextents.size(); ++r) inner *= static_cast<double>(rextent(e, r));
        return inner + count(e->args[0], e, inner);
      }
    }
    return 0;
  }

 private:
  int64_t rextent(const kir::Expr* e, size_t r) const {
    const int32_t slot = r < e->rslots.size() ? e->rslots[r] : -1;
    return slot >= 0 && static_cast<size_t>(slot) < sizes_.size() ? sizes_[slot] : e->rextents[r];
  }
  // Points at which reduction `e` differs: the product of the extents of the variables it reads
  // (parallel, and of enclosing reductions), its own loop variables left out.
  double hoisted_points(const kir::Expr* e) {
    const std::set<int32_t>& vars = free_vars(e);
    double n = 1;
    for (int32_t v : vars)
      if (auto it = extent_.find(v); it != extent_.end()) n *= static_cast<double>(it->second);
    return n;
  }
  // The loop variables `e` reads that no reduction inside it binds (a Reduce's own rvars are
  // bound: they are not free in the Reduce).
  const std::set<int32_t>& free_vars(const kir::Expr* e) {
    if (auto it = free_.find(e); it != free_.end()) return it->second;
    std::set<int32_t> vars;
    if (e->kind == kir::ExprKind::Var) vars.insert(e->var);
    for (const kir::Expr* a : e->args) {
      const std::set<int32_t>& inner = free_vars(a);
      vars.insert(inner.begin(), inner.end());
    }
    if (e->kind == kir::ExprKind::Reduce)
      for (int32_t own : e->rvars) vars.erase(own);
    return free_[e] = std::move(vars);
  }

  const std::vector<int64_t>& sizes_;
  std::map<int32_t, int64_t> extent_;  // loop variable -> extent, as far as the walk has seen
  std::map<const kir::Expr*, std::set<int32_t>> free_;
  std::set<std::pair<const kir::Expr*, const kir::Expr*>> seen_;
};

}  // namespace

double kernel_bytes(const kir::Kernel& kernel) {
  double bytes = 0;
  for (const kir::Param& p : kernel.params)
    bytes += static_cast<double>(ir::shape_numel(p.shape)) * ir::dtype_size(p.dtype);
  return bytes;
}

namespace {

// An attention kernel (kir::recognize_attention) runs flash-style: per visible score (a causal
// mask's hidden keys are not computed) the q·k and p·v multiply-adds, the logits' own ops, and the
// softmax's max, subtraction, exponential and sum, each once. The generic count would price the
// softmax once per output column and the scores once per reduction reading them.
double attention_flops(const kir::Kernel& kernel, const kir::AttentionPattern& p) {
  const size_t rank = kernel.domain.size();
  double batch = 1;
  for (size_t a = 0; a + 2 < rank; ++a) batch *= static_cast<double>(kernel.domain[a]);
  const int64_t lq = kernel.domain[rank - 2], dv = kernel.domain[rank - 1];
  const int64_t keys = p.keys_slot >= 0 && static_cast<size_t>(p.keys_slot) < kernel.sizes.size()
                           ? kernel.sizes[p.keys_slot]
                           : p.keys;
  double visible = 0;
  for (int64_t i = 0; i < lq; ++i)
    visible += static_cast<double>(
        p.causal_offset ? std::clamp<int64_t>(i + *p.causal_offset + 1, 0, keys) : keys);
  // The logits' ALU ops besides the scores (a scale, a mask's comparison and select, a bias).
  double logit_ops = 0;
  std::set<const kir::Expr*> seen;
  std::vector<const kir::Expr*> stack{p.logits};
  while (!stack.empty()) {
    const kir::Expr* e = stack.back();
    stack.pop_back();
    if (e == p.scores || !seen.insert(e).second) continue;
    if (e->kind == kir::ExprKind::Alu) ++logit_ops;
    if (e->kind != kir::ExprKind::Load) stack.insert(stack.end(), e->args.begin(), e->args.end());
  }
  const double per_score = 2.0 * static_cast<double>(p.head_dim + dv) + logit_ops + 4;
  return batch * visible * per_score;
}

}  // namespace

KernelWork kernel_work(const kir::Kernel& kernel) {
  KernelWork w;
  w.bytes = kernel_bytes(kernel);
  if (std::optional<kir::AttentionPattern> att = kir::recognize_attention(kernel, kir::FreeVars(kernel))) {
    w.flops = attention_flops(kernel, *att);
    return w;
  }
  double points = 1;
  for (int64_t x : kernel.domain) points *= static_cast<double>(x);
  FlopCounter counter(kernel.domain, kernel.sizes);
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
