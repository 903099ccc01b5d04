// The graph and kernel IR verifiers (ir/verify.h).
#include "ir/verify.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/builder.h"
#include "ir/kg_ops.h"

namespace kiln::ir {

namespace {

std::string node_name(const Node* n) {
  return fmt::format("%t{} = {}", n->id, op_enum_name(n->op));
}

std::string type_text(DType d, const Shape& s) {
  return fmt::format("{}{}", dtype_name(d), shape_str(s));
}

// What the builder makes, in `scratch`, of the node's operands (fresh inputs of their types) and
// attributes.
Expected<void> check_against_builder(Graph& scratch, const Node* n) {
  Builder b(scratch);
  std::vector<Operand> args;
  for (const Node* in : n->inputs) args.emplace_back(scratch.input(in->dtype, in->shape));
  auto built = b.call(kg_op_of(n).name, args, n->attrs);
  if (!built)
    return make_error(
        fmt::format("{}: the builder rejects it: {}", node_name(n), built.error().message));
  const Node* r = *built;
  if (r->dtype != n->dtype || r->shape != n->shape)
    return make_error(fmt::format("{} is {}, but its operands and attributes give {}", node_name(n),
                                  type_text(n->dtype, n->shape), type_text(r->dtype, r->shape)));
  return {};
}

}  // namespace

Expected<void> verify_graph(const std::vector<const Node*>& outputs) {
  for (const Node* o : outputs)
    if (!o) return make_error("an output of the graph is null");
  Graph scratch;  // one for the whole check: its inputs are fresh, so no node meets another's
  for (const Node* n : topo_order(outputs)) {
    const int arity = op_arity(n->op);
    if (arity >= 0 ? n->inputs.size() != static_cast<size_t>(arity) : n->inputs.empty())
      return make_error(fmt::format("{} has {} operands; the op takes {}", node_name(n),
                                    n->inputs.size(),
                                    arity >= 0 ? fmt::format("{}", arity) : "one or more"));
    for (const Node* in : n->inputs) {
      if (!in) return make_error(fmt::format("{} has a null operand", node_name(n)));
      if (in->id >= n->id)
        return make_error(
            fmt::format("{} reads %t{}, which was made after it", node_name(n), in->id));
    }
    for (int64_t d : n->shape)
      if (d < 0)
        return make_error(
            fmt::format("{} has a negative extent: {}", node_name(n), shape_str(n->shape)));
    switch (op_kind(n->op)) {
      case OpKind::Input:
        if (!n->attrs.has(AttrKey::slot))
          return make_error(fmt::format("{} has no slot", node_name(n)));
        break;
      case OpKind::Source:
        if (n->op == Op::Full && !n->attrs.has(AttrKey::value))
          return make_error(fmt::format("{} has no value", node_name(n)));
        break;
      case OpKind::Elementwise:
      case OpKind::Reduce:
      case OpKind::Movement:
      case OpKind::Matmul:
      case OpKind::Scan:
        if (auto ok = check_against_builder(scratch, n); !ok) return ok;
        break;
    }
  }
  return {};
}

}  // namespace kiln::ir

namespace kiln::kir {

namespace {

class KernelVerifier {
 public:
  explicit KernelVerifier(const Kernel& k) : k_(k), rank_(static_cast<int32_t>(k.domain.size())) {}

  Expected<void> run() {
    for (size_t d = 0; d < k_.domain.size(); ++d)
      if (k_.domain[d] < 0)
        return fail(fmt::format("domain axis {} has extent {}", d, k_.domain[d]));
    if (!k_.arena && !k_.stores.empty()) return fail("it has stores but no expression arena");
    if (auto ok = check_slots(k_.domain, k_.domain_slots, "the domain"); !ok) return ok;
    for (size_t p = 0; p < k_.params.size(); ++p)
      if (auto ok = check_slots(k_.params[p].shape, k_.params[p].shape_slots,
                                fmt::format("parameter {}", p));
          !ok)
        return ok;
    if (k_.has_sizes() && k_.dynamic_outer)
      return fail("it is dynamic and has run-time sizes (its outer extent is one of them)");
    std::vector<bool> stored(k_.params.size(), false);
    for (size_t s = 0; s < k_.stores.size(); ++s) {
      const Store& st = k_.stores[s];
      if (!st.index || !st.value) return fail(fmt::format("store {} has a null expression", s));
      if (!valid_param(st.buf))
        return fail(fmt::format("store {} writes parameter {} of {}", s, st.buf, k_.params.size()));
      const Param& p = k_.params[st.buf];
      if (!p.output) return fail(fmt::format("store {} writes parameter {}, an input", s, st.buf));
      if (st.value->dtype != p.dtype)
        return fail(fmt::format("store {} writes {} into parameter {} of {}", s,
                                dtype_name(st.value->dtype), st.buf, dtype_name(p.dtype)));
      if (st.index->dtype != DType::i64)
        return fail(fmt::format("store {} has a {} index", s, dtype_name(st.index->dtype)));
      stored[st.buf] = true;
    }
    for (size_t p = 0; p < k_.params.size(); ++p)
      if (k_.params[p].output && !stored[p])
        return fail(fmt::format("output parameter {} is never stored", p));
    const std::vector<const Expr*> exprs = kernel_exprs(k_);
    has_scan_ = std::ranges::any_of(exprs, [](const Expr* e) { return e->kind == ExprKind::Scan; });
    for (const Expr* e : exprs)
      if (auto ok = check(e); !ok) return ok;
    for (const auto& [slot, dtype] : slot_dtypes_)
      if (dtype != DType::i64 && extent_slots_.count(slot))
        return fail(fmt::format("size.{} is {} and an extent", slot, dtype_name(dtype)));
    const FreeVars fv(k_);
    for (size_t s = 0; s < k_.stores.size(); ++s)
      for (const Expr* e : {k_.stores[s].index, k_.stores[s].value})
        for (int32_t v : fv.of(e))
          if (v < 0 || v >= rank_)
            return fail(
                fmt::format("store {} reads loop variable v{}, which no loop binds there", s, v));
    return {};
  }

 private:
  // Run-time size slots (ir/kernel_sizes.h): in range, and each extent this instance's value.
  Expected<void> check_slots(const std::vector<int64_t>& extents, const std::vector<int32_t>& slots,
                             const std::string& where) {
    if (slots.empty()) return {};
    if (slots.size() != extents.size())
      return fail(
          fmt::format("{} has {} extents and {} size slots", where, extents.size(), slots.size()));
    for (size_t i = 0; i < slots.size(); ++i) {
      if (slots[i] < 0) continue;
      extent_slots_.insert(slots[i]);
      if (static_cast<size_t>(slots[i]) >= k_.sizes.size())
        return fail(
            fmt::format("{}'s axis {} is size.{} of {}", where, i, slots[i], k_.sizes.size()));
      if (k_.sizes[static_cast<size_t>(slots[i])] != extents[i])
        return fail(fmt::format("{}'s axis {} is {} but size.{} is {}", where, i, extents[i],
                                slots[i], k_.sizes[static_cast<size_t>(slots[i])]));
    }
    return {};
  }

  bool valid_param(int32_t buf) const {
    return buf >= 0 && buf < static_cast<int32_t>(k_.params.size());
  }

  std::unexpected<Error> fail(const std::string& what) const {
    return make_error(fmt::format("kernel {}: {}", k_.name.empty() ? "(unnamed)" : k_.name, what));
  }
  std::unexpected<Error> fail_expr(const Expr* e, const std::string& what) const {
    return fail(fmt::format("expression #{} ({}): {}", e->id, expr_text(e), what));
  }
  static std::string expr_text(const Expr* e) {
    switch (e->kind) {
      case ExprKind::Const:
        return fmt::format("const {}", dtype_name(e->dtype));
      case ExprKind::Var:
        return fmt::format("v{}", e->var);
      case ExprKind::Load:
        return fmt::format("load buf{}", e->buf);
      case ExprKind::Alu:
        return fmt::format("{} {}", alu_name(e->alu), dtype_name(e->dtype));
      case ExprKind::Reduce:
        return fmt::format("reduce {} {}", reduce_op_name(e->reduce_op), dtype_name(e->dtype));
      case ExprKind::Scan:
        return fmt::format("scan {} {}", reduce_op_name(e->reduce_op), dtype_name(e->dtype));
      case ExprKind::Size:
        return fmt::format("size.{}", e->ival);
    }
    return "?";
  }

  Expected<void> check(const Expr* e) {
    for (const Expr* a : e->args)
      if (!a) return fail_expr(e, "a null operand");
    switch (e->kind) {
      case ExprKind::Const:
        return expect_args(e, 0);
      case ExprKind::Var:
        if (e->dtype != DType::i64) return fail_expr(e, "a loop variable is i64");
        return expect_args(e, 0);
      case ExprKind::Load:
        if (auto ok = expect_args(e, 1); !ok) return ok;
        if (!valid_param(e->buf))
          return fail_expr(e, fmt::format("there are {} parameters", k_.params.size()));
        if (e->dtype != k_.params[e->buf].dtype)
          return fail_expr(e,
                           fmt::format("the parameter is {}", dtype_name(k_.params[e->buf].dtype)));
        if (e->args[0]->dtype != DType::i64) return fail_expr(e, "its index is not i64");
        return {};
      case ExprKind::Alu:
        return check_alu(e);
      case ExprKind::Reduce:
        if (has_scan_) return fail_expr(e, "a kernel with a scan holds no reduction");
        return check_reduce(e);
      case ExprKind::Scan:
        return check_scan(e);
      case ExprKind::Size:
        if (!size_dtype_ok(e->dtype)) return fail_expr(e, "a run-time size is i64, f32 or f64");
        if (e->ival < 0 || static_cast<size_t>(e->ival) >= k_.sizes.size())
          return fail_expr(e, fmt::format("the kernel has {} run-time sizes", k_.sizes.size()));
        if (auto [it, fresh] = slot_dtypes_.emplace(static_cast<int32_t>(e->ival), e->dtype);
            !fresh && it->second != e->dtype)
          return fail_expr(
              e, fmt::format("size.{} is read as {} elsewhere", e->ival, dtype_name(it->second)));
        return expect_args(e, 0);
    }
    return fail_expr(e, "an unknown kind");
  }

  Expected<void> expect_args(const Expr* e, size_t n) const {
    if (e->args.size() != n)
      return fail_expr(e, fmt::format("{} operands, not {}", e->args.size(), n));
    return {};
  }

  Expected<void> check_alu(const Expr* e) const {
    if (auto ok = expect_args(e, static_cast<size_t>(alu_arity(e->alu))); !ok) return ok;
    auto same = [&](size_t from, DType want) -> Expected<void> {
      for (size_t i = from; i < e->args.size(); ++i)
        if (e->args[i]->dtype != want)
          return fail_expr(e, fmt::format("operand {} is {}, not {}", i,
                                          dtype_name(e->args[i]->dtype), dtype_name(want)));
      return {};
    };
    std::optional<ir::Op> op = op_of(e->alu);
    if (!op) {  // IDiv, Mod: index arithmetic
      if (e->dtype != DType::i64) return fail_expr(e, "index arithmetic is i64");
      return same(0, DType::i64);
    }
    switch (ir::op_dtypes(*op)) {
      case ir::OpDtypes::Compare:
        if (e->dtype != DType::boolean) return fail_expr(e, "a comparison gives bool");
        return same(1, e->args[0]->dtype);
      case ir::OpDtypes::Select:
        if (e->args[0]->dtype != DType::boolean) return fail_expr(e, "its condition is not bool");
        return same(1, e->dtype);
      case ir::OpDtypes::Any:
        if (*op == ir::Op::Cast) return {};
        return same(0, e->dtype);
      case ir::OpDtypes::Bool:
        if (e->dtype != DType::boolean) return fail_expr(e, "a logical op is bool");
        return same(0, DType::boolean);
      case ir::OpDtypes::Float:
        if (!is_float(e->dtype)) return fail_expr(e, "the op takes floating dtypes only");
        return same(0, e->dtype);
      case ir::OpDtypes::Numeric:
        if (e->dtype == DType::boolean) return fail_expr(e, "the op does not take bool");
        return same(0, e->dtype);
      case ir::OpDtypes::None:
        return fail_expr(e, "the op is not an ALU op");
    }
    return {};
  }

  Expected<void> check_reduce(const Expr* e) {
    if (auto ok = expect_args(e, 1); !ok) return ok;
    if (e->rvars.empty() || e->rvars.size() != e->rextents.size())
      return fail_expr(
          e, fmt::format("{} variables and {} extents", e->rvars.size(), e->rextents.size()));
    for (size_t i = 0; i < e->rvars.size(); ++i) {
      const int32_t v = e->rvars[i];
      if (v < rank_)
        return fail_expr(e, fmt::format("its variable v{} is a parallel variable's id", v));
      if (e->rextents[i] < 0)
        return fail_expr(e, fmt::format("v{} has extent {}", v, e->rextents[i]));
      auto [it, fresh] = owner_.emplace(v, e);
      if (!fresh && it->second != e)
        return fail_expr(e, fmt::format("v{} is also bound by expression #{}", v, it->second->id));
    }
    if (auto ok = check_slots(e->rextents, e->rslots, fmt::format("expression #{}", e->id)); !ok)
      return ok;
    const bool arg = e->reduce_op == ReduceOp::ArgMax || e->reduce_op == ReduceOp::ArgMin;
    if (arg && (e->dtype != DType::i32 || e->rvars.size() != 1))
      return fail_expr(e, "argmax/argmin give i32 over exactly one variable");
    if (!arg && e->dtype != e->args[0]->dtype)
      return fail_expr(e, fmt::format("its body is {}", dtype_name(e->args[0]->dtype)));
    return {};
  }

  // The innermost parallel variable of a domain of rank >= 2 (never split between threads), a
  // Sum in its body's dtype, and a body with no reduction or scan inside (kernel_ir.h).
  // A selection scan (topk) is an ArgMax or ArgMin giving i64, over one variable of its own.
  Expected<void> check_scan(const Expr* e) {
    if (auto ok = expect_args(e, 1); !ok) return ok;
    const bool select = e->reduce_op == ReduceOp::ArgMax || e->reduce_op == ReduceOp::ArgMin;
    if (!select && e->reduce_op != ReduceOp::Sum)
      return fail_expr(e, "a scan is a sum or a selection (argmax, argmin)");
    if (!select && !e->rvars.empty()) return fail_expr(e, "a sum scan has no variable of its own");
    if (select) {
      if (e->rvars.size() != 1 || e->rextents.size() != 1 || e->rvars[0] < rank_ ||
          e->rextents[0] < 0)
        return fail_expr(e, "a selection scan has one variable of its own, not a parallel one");
      auto [it, fresh] = owner_.emplace(e->rvars[0], e);
      if (!fresh && it->second != e)
        return fail_expr(
            e, fmt::format("v{} is also bound by expression #{}", e->rvars[0], it->second->id));
    }
    if (rank_ < 2 || e->var != rank_ - 1)
      return fail_expr(e, fmt::format("it scans v{}, not the innermost axis of a domain of rank "
                                      ">= 2 (domain {})",
                                      e->var, ir::shape_str(k_.domain)));
    if (select ? e->dtype != DType::i64 || e->args[0]->dtype == DType::boolean
               : e->dtype != e->args[0]->dtype || e->dtype == DType::boolean)
      return fail_expr(e, fmt::format("it is {} and its body is {}", dtype_name(e->dtype),
                                      dtype_name(e->args[0]->dtype)));
    std::vector<const Expr*> stack{e->args[0]};
    std::unordered_set<const Expr*> seen;
    while (!stack.empty()) {
      const Expr* x = stack.back();
      stack.pop_back();
      if (!seen.insert(x).second) continue;
      if (x->kind == ExprKind::Reduce || x->kind == ExprKind::Scan)
        return fail_expr(e, fmt::format("its body holds expression #{} ({})", x->id, expr_text(x)));
      stack.insert(stack.end(), x->args.begin(), x->args.end());
    }
    return {};
  }

  const Kernel& k_;
  int32_t rank_;
  bool has_scan_ = false;
  std::unordered_map<int32_t, DType> slot_dtypes_;  // the dtype each Size expression reads
  std::unordered_set<int32_t> extent_slots_;        // slots that are an extent somewhere
  // reduce variable -> the Reduce (or selection Scan) binding it
  std::unordered_map<int32_t, const Expr*> owner_;
};

}  // namespace

Expected<void> verify_kernel(const Kernel& k) {
  return KernelVerifier(k).run();
}

}  // namespace kiln::kir
