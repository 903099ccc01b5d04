// Matmul recognition: one Sum-of-products reduction over one variable, operands split by which
// of the two innermost parallel variables they read, epilogues over parallel variables only.
#include "ir/kernel_analysis.h"

#include <algorithm>

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

bool is_f32_sum_of_products(const Expr* r) {
  if (r->reduce_op != ReduceOp::Sum || r->dtype != DType::f32 || r->rvars.size() != 1) return false;
  const Expr* body = r->args[0];
  if (body->kind != ExprKind::Alu || body->alu != Alu::Mul) return false;
  return body->dtype == DType::f32 && body->args.size() == 2 &&
         body->args[0]->dtype == DType::f32 && body->args[1]->dtype == DType::f32;
}

// `e` reads only variables in [0, limit) other than `excluded`, or `extra`; and no reduction.
bool reads_only(const FreeVars& fv, const Expr* e, int32_t limit, int32_t excluded, int32_t extra) {
  if (has_reduce(e)) return false;
  return std::ranges::all_of(
      fv.of(e), [&](int32_t v) { return v == extra || (v >= 0 && v < limit && v != excluded); });
}

}  // namespace

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

std::optional<MatmulPattern> recognize_matmul(const Kernel& k, const FreeVars& fv) {
  if (k.domain.size() < 2 || k.stores.empty() || !well_formed(k)) return std::nullopt;
  std::vector<const Expr*> reduces;
  std::unordered_set<const Expr*> seen;
  for (const Store& st : k.stores) {
    collect_reduces(st.value, seen, reduces);
    collect_reduces(st.index, seen, reduces);
  }
  if (reduces.size() != 1 || !is_f32_sum_of_products(reduces[0])) return std::nullopt;
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

}  // namespace kiln::kir
