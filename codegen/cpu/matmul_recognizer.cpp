// Matmul recognition: one Sum-of-products reduction over one variable, operands split by which
// of the two innermost parallel variables they read, epilogues over parallel variables only.
#include "codegen/cpu/matmul_recognizer.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kiln::codegen::cpu {

namespace {

using kir::Expr;
using kir::ExprKind;

// Free loop variables of every reachable expression (a reduction's own variables are bound
// inside it), and whether a reduction sits anywhere below.
struct Facts {
  std::vector<int32_t> vars;  // sorted, unique
  bool has_reduce = false;
};

class Analysis {
 public:
  const Facts& of(const Expr* e) {
    if (auto it = facts_.find(e); it != facts_.end()) return it->second;
    Facts f;
    if (e->kind == ExprKind::Var) f.vars.push_back(e->var);
    f.has_reduce = e->kind == ExprKind::Reduce;
    for (const Expr* a : e->args) {
      const Facts& af = of(a);
      f.vars.insert(f.vars.end(), af.vars.begin(), af.vars.end());
      f.has_reduce = f.has_reduce || af.has_reduce;
    }
    if (e->kind == ExprKind::Reduce)
      std::erase_if(f.vars, [&](int32_t v) { return std::ranges::count(e->rvars, v) > 0; });
    std::ranges::sort(f.vars);
    f.vars.erase(std::unique(f.vars.begin(), f.vars.end()), f.vars.end());
    return facts_.emplace(e, std::move(f)).first->second;
  }
  bool uses(const Expr* e, int32_t var) { return std::ranges::binary_search(of(e).vars, var); }

 private:
  std::unordered_map<const Expr*, Facts> facts_;
};

// The reductions reachable from `e`, not looking inside them (each shared subexpression once).
void collect_reduces(const Expr* e, std::unordered_set<const Expr*>& seen,
                     std::vector<const Expr*>& out) {
  if (!seen.insert(e).second) return;
  if (e->kind == ExprKind::Reduce) {
    out.push_back(e);
    return;
  }
  for (const Expr* a : e->args) collect_reduces(a, seen, out);
}

// Buffers and dtypes as the generic emitter requires them, so that a malformed kernel goes
// there and gets its error message.
bool well_formed(const kir::Kernel& k) {
  auto bad_buf = [&](int32_t buf) {
    return buf < 0 || buf >= static_cast<int32_t>(k.params.size());
  };
  for (const kir::Store& st : k.stores)
    if (bad_buf(st.buf) || st.value->dtype != k.params[st.buf].dtype) return false;
  for (const Expr* e : kir::kernel_exprs(k))
    if (e->kind == ExprKind::Load && (bad_buf(e->buf) || e->dtype != k.params[e->buf].dtype))
      return false;
  return std::ranges::all_of(k.domain, [](int64_t d) { return d >= 0; });
}

bool is_f32_sum_of_products(const Expr* r) {
  if (r->reduce_op != kir::ReduceOp::Sum || r->dtype != ir::DType::f32) return false;
  if (r->rvars.size() != 1) return false;
  const Expr* body = r->args[0];
  if (body->kind != ExprKind::Alu || body->alu != kir::Alu::Mul) return false;
  return body->dtype == ir::DType::f32 && body->args.size() == 2 &&
         body->args[0]->dtype == ir::DType::f32 && body->args[1]->dtype == ir::DType::f32;
}

// `e` reads only variables in [0, limit) other than `excluded`, or `extra`; and no reduction.
bool reads_only(Analysis& an, const Expr* e, int32_t limit, int32_t excluded, int32_t extra) {
  if (an.of(e).has_reduce) return false;
  return std::ranges::all_of(an.of(e).vars, [&](int32_t v) {
    return v == extra || (v >= 0 && v < limit && v != excluded);
  });
}

}  // namespace

std::optional<MatmulPattern> recognize_matmul(const kir::Kernel& k) {
  if (k.domain.size() < 2 || k.stores.empty() || !well_formed(k)) return std::nullopt;
  std::vector<const Expr*> reduces;
  std::unordered_set<const Expr*> seen;
  for (const kir::Store& st : k.stores) {
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
  Analysis an;
  // Reduce variables are numbered after the parallel ones; anything else is malformed. The packed
  // operands take K * 256 bytes and more per call: past kMaxMatmulK the generic loop nest is safer.
  if (p.k_var < rank || p.k_extent < 0 || p.k_extent > kMaxMatmulK) return std::nullopt;
  for (const kir::Store& st : k.stores) {
    if (an.of(st.index).has_reduce) return std::nullopt;
    for (const Expr* e : {st.index, st.value})
      if (!std::ranges::all_of(an.of(e).vars, [&](int32_t v) { return v >= 0 && v < rank; }))
        return std::nullopt;
  }
  const Expr* x = r->args[0]->args[0];
  const Expr* y = r->args[0]->args[1];
  // Mul commutes: whichever operand reads no column variable is the row operand.
  for (int swap = 0; swap < 2; ++swap, std::swap(x, y)) {
    if (reads_only(an, x, rank, p.j_var, p.k_var) && reads_only(an, y, rank, p.i_var, p.k_var)) {
      p.a = x;
      p.b = y;
      return p;
    }
  }
  return std::nullopt;
}

}  // namespace kiln::codegen::cpu
