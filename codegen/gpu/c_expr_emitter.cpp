// Kernel-IR expressions -> C-like statements in a tree of scopes (see c_expr_emitter.h).
#include "codegen/gpu/c_expr_emitter.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln::codegen::gpu {

using kir::Expr;
using kir::ExprKind;

struct CExprEmitter::Scope {
  Scope* parent = nullptr;
  int depth = 0;
  std::string header;
  std::string text;
  std::unordered_map<const Expr*, std::string> memo;
  bool closed = false;
};

CExprEmitter::CExprEmitter(const kir::Kernel& k, DialectText& d, CheckMode check,
                           const FreeVars& fv)
    : k_(k), d_(d), check_(check), fv_(fv) {
  scopes_.push_back(std::make_unique<Scope>());
  root_ = scopes_.back().get();
  root_->depth = 1;
}

CExprEmitter::~CExprEmitter() = default;

CExprEmitter::Scope* CExprEmitter::open(Scope* parent, std::string header) {
  auto s = std::make_unique<Scope>();
  s->parent = parent;
  s->depth = parent->depth + 1;
  s->header = std::move(header);
  scopes_.push_back(std::move(s));
  return scopes_.back().get();
}

void CExprEmitter::close(Scope* s) {
  s->parent->text += fmt::format("{}{} {{\n{}{}}}\n", indent(s->parent), s->header, s->text,
                                 indent(s->parent));
  s->closed = true;
  s->memo.clear();
  std::erase_if(vars_, [&](const auto& kv) { return kv.second.first == s; });
  if (std::erase_if(bound_, [&](const auto& kv) { return kv.second.first == s; }) > 0)
    floor_.clear();
}

std::string CExprEmitter::take_root_text() { return std::move(root_->text); }

void CExprEmitter::bind_var(Scope* s, int32_t var, std::string text) {
  vars_[var] = {s, std::move(text)};
}

void CExprEmitter::bind_expr(Scope* s, const Expr* e, std::string text) {
  bound_[e] = {s, std::move(text)};
  floor_.clear();
}

CExprEmitter::Scope* CExprEmitter::bound_floor(const Expr* e) {
  if (bound_.empty()) return nullptr;
  if (auto it = bound_.find(e); it != bound_.end()) return it->second.first;
  if (auto it = floor_.find(e); it != floor_.end()) return it->second;
  Scope* best = nullptr;
  for (const Expr* a : e->args)  // through reductions too: their loops read the bound value
    if (Scope* s = bound_floor(a); s && (!best || s->depth > best->depth)) best = s;
  floor_[e] = best;
  return best;
}

void CExprEmitter::append(Scope* s, const std::string& line) {
  s->text += indent(s) + line + "\n";
}

std::string CExprEmitter::indent(Scope* s) const { return std::string(2 * s->depth, ' '); }

std::string CExprEmitter::fresh(const std::string& stem) {
  return fmt::format("{}{}", stem, next_id_++);
}

kiln::Error CExprEmitter::error(const std::string& what) const {
  return kiln::Error{fmt::format("gpu codegen: kernel {}: {}", k_.name, what)};
}

std::string CExprEmitter::define(Scope* s, DType t, const std::string& value) {
  const std::string name = fresh("t");
  append(s, fmt::format("{} {} = {};", d_.reg_type(t), name, value));
  return name;
}

Expected<CExprEmitter::Scope*> CExprEmitter::scope_for(const Expr* e) {
  Scope* best = root_;
  for (int32_t v : fv_.of(e)) {
    auto it = vars_.find(v);
    if (it == vars_.end())
      return std::unexpected(error(fmt::format("loop variable v{} is used outside its loop", v)));
    if (it->second.first->depth > best->depth) best = it->second.first;
  }
  // An expression with few free variables (a row's mean, a scalar result) that reads a bound
  // value must still come after it, in its scope: the scopes on one path nest, so the deeper wins.
  if (Scope* s = bound_floor(e); s && s->depth > best->depth) best = s;
  return best;
}

Expected<std::string> CExprEmitter::emit(const Expr* e) {
  // A bound expression (a cooperative reduction's result) wins wherever it was bound.
  if (auto it = bound_.find(e); it != bound_.end()) return it->second.second;
  Expected<Scope*> s = scope_for(e);
  if (!s) return std::unexpected(s.error());
  if (auto it = (*s)->memo.find(e); it != (*s)->memo.end()) return it->second;
  Expected<std::string> v = emit_uncached(e, *s);
  if (v) (*s)->memo[e] = *v;
  return v;
}

Expected<std::string> CExprEmitter::emit_uncached(const Expr* e, Scope* s) {
  switch (e->kind) {
    case ExprKind::Const:
      return ir::is_float(e->dtype) ? d_.float_lit(e->dtype, e->fval) : d_.int_lit(e->dtype, e->ival);
    case ExprKind::Var:
      return vars_.at(e->var).second;
    case ExprKind::Load:
      return emit_load(e, s);
    case ExprKind::Reduce:
      return emit_reduce(e, s);
    case ExprKind::Alu: {
      if (static_cast<int>(e->args.size()) != kir::alu_arity(e->alu))
        return std::unexpected(error(fmt::format("alu op '{}' has {} operands", kir::alu_name(e->alu), e->args.size())));
      std::vector<std::string> args;
      for (const Expr* a : e->args) {
        Expected<std::string> v = emit(a);
        if (!v) return v;
        args.push_back(*v);
      }
      Expected<std::string> r = alu_text(d_, *e, args);
      if (!r) return std::unexpected(error(r.error().message));
      return define(s, e->dtype, *r);
    }
  }
  return std::unexpected(error("unknown expression kind"));
}

Expected<std::string> CExprEmitter::emit_load(const Expr* e, Scope* s) {
  if (e->buf < 0 || e->buf >= static_cast<int32_t>(k_.params.size()) ||
      k_.params[e->buf].dtype != e->dtype)
    return std::unexpected(error(fmt::format("load of param %{} with dtype {} does not match its parameter", e->buf, ir::dtype_name(e->dtype))));
  Expected<std::string> index = emit(e->args[0]);
  if (!index) return index;
  const int64_t n = ir::shape_numel(k_.params[e->buf].shape);
  const std::string buf = d_.buffer_ref(e->buf);
  auto elem = [&](const std::string& i) {
    return d_.from_memory(e->dtype, fmt::format("{}[{}]", buf, d_.cuda() ? i : "uint(" + i + ")"));
  };
  if (check_ == CheckMode::none) return define(s, e->dtype, elem(*index));
  if (n == 0) {
    if (check_ == CheckMode::validate)
      append(s, fmt::format("kiln_report({}{}, {}, {});", d_.cuda() ? "kiln_chk, " : "",
                            d_.i64_lit(kCheckLoad), d_.i64_lit(e->buf), *index));
    return define(s, e->dtype, d_.zero(e->dtype));
  }
  const std::string i = *index, nl = d_.i64_lit(n), z = d_.i64_lit(0);
  if (check_ == CheckMode::enforce)
    return define(s, e->dtype, elem(fmt::format("({0} < {1} ? {1} : ({0} >= {2} ? {2} - {3} : {0}))", i, z, nl, d_.i64_lit(1))));
  const std::string oob = fresh("oob");
  append(s, fmt::format("bool {} = {} < {} || {} >= {};", oob, i, z, i, nl));
  append(s, fmt::format("if ({}) kiln_report({}{}, {}, {});", oob, d_.cuda() ? "kiln_chk, " : "",
                        d_.i64_lit(kCheckLoad), d_.i64_lit(e->buf), i));
  return define(s, e->dtype, fmt::format("{} ? {} : {}", oob, d_.zero(e->dtype), elem(fmt::format("({} ? {} : {})", oob, z, i))));
}

Expected<void> CExprEmitter::emit_store(Scope* s, const kir::Store& st) {
  if (st.buf < 0 || st.buf >= static_cast<int32_t>(k_.params.size()) ||
      k_.params[st.buf].dtype != st.value->dtype)
    return std::unexpected(error(fmt::format("store to param %{} does not match its parameter", st.buf)));
  Expected<std::string> index = emit(st.index);
  if (!index) return std::unexpected(index.error());
  Expected<std::string> value = emit(st.value);
  if (!value) return std::unexpected(value.error());
  const DType t = k_.params[st.buf].dtype;
  const int64_t n = ir::shape_numel(k_.params[st.buf].shape);
  const std::string buf = d_.buffer_ref(st.buf), i = *index;
  auto put = [&](const std::string& at) {
    return fmt::format("{}[{}] = {};", buf, d_.cuda() ? at : "uint(" + at + ")", d_.to_memory(t, *value));
  };
  if (check_ == CheckMode::none) {
    append(s, put(i));
  } else if (check_ == CheckMode::enforce) {
    if (n > 0)
      append(s, put(fmt::format("({0} < {1} ? {1} : ({0} >= {2} ? {2} - {3} : {0}))", i,
                                d_.i64_lit(0), d_.i64_lit(n), d_.i64_lit(1))));
  } else {
    const std::string report = fmt::format("kiln_report({}{}, {}, {});", d_.cuda() ? "kiln_chk, " : "",
                                           d_.i64_lit(kCheckStore), d_.i64_lit(st.buf), i);
    if (n == 0) append(s, report);
    else append(s, fmt::format("if ({0} < {1} || {0} >= {2}) {3} else {4}", i, d_.i64_lit(0), d_.i64_lit(n), report, put(i)));
  }
  return {};
}

// The accumulator is declared in the reduction's scope; one loop per variable, outer to inner.
Expected<std::string> CExprEmitter::emit_reduce(const Expr* e, Scope* s) {
  if (e->args.size() != 1 || e->rvars.size() != e->rextents.size())
    return std::unexpected(error("malformed reduce"));
  const DType bt = e->args[0]->dtype;
  const bool is_arg = e->reduce_op == kir::ReduceOp::ArgMax || e->reduce_op == kir::ReduceOp::ArgMin;
  if (is_arg && e->rvars.size() != 1) return std::unexpected(error("arg reduction over several variables"));
  Expected<std::string> init = reduce_init_text(d_, e->reduce_op, bt);
  if (!init) return std::unexpected(error(init.error().message));
  const std::string acc = fresh("acc"), idx = fresh("idx");
  append(s, fmt::format("{} {} = {};", d_.reg_type(bt), acc, *init));
  if (is_arg) append(s, fmt::format("int {} = 0;", idx));
  Scope* inner = s;
  std::vector<Scope*> opened;
  for (size_t r = 0; r < e->rvars.size(); ++r) {
    const std::string v = fmt::format("v{}", e->rvars[r]);
    inner = open(inner, fmt::format("for ({0} {1} = {2}; {1} < {3}; ++{1})", d_.i64_type(), v,
                                    d_.i64_lit(0), d_.i64_lit(e->rextents[r])));
    bind_var(inner, e->rvars[r], v);
    opened.push_back(inner);
  }
  Expected<std::string> v = emit(e->args[0]);
  if (!v) return v;
  if (is_arg) {
    append(inner, fmt::format("if ({}) {{ {} = {}; {} = int(v{}); }}",
                              arg_take_text(d_, e->reduce_op, bt, *v, acc), acc, *v, idx, e->rvars[0]));
  } else {
    append(inner, fmt::format("{} = {};", acc, reduce_step_text(d_, e->reduce_op, bt, acc, *v)));
  }
  for (auto it = opened.rbegin(); it != opened.rend(); ++it) close(*it);
  if (is_arg) return idx;
  return define(s, e->dtype, cast_text(d_, acc, bt, e->dtype));
}

}  // namespace kiln::codegen::gpu
