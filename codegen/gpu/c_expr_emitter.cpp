// Kernel-IR expressions -> C-like statements in a tree of scopes (see c_expr_emitter.h).
#include "codegen/gpu/c_expr_emitter.h"

#include <fmt/format.h>

#include <algorithm>

#include "codegen/sum_blocks.h"
#include "ir/post_order.h"

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
  int64_t runs = 1;  // how often its body runs per invocation, at most
};

CExprEmitter::CExprEmitter(const kir::Kernel& k, DialectText& d, CheckMode check,
                           const FreeVars& fv)
    : k_(k), d_(d), check_(check), fv_(fv) {
  scopes_.push_back(std::make_unique<Scope>());
  root_ = scopes_.back().get();
  root_->depth = 1;
}

CExprEmitter::~CExprEmitter() = default;

int64_t saturating_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kManyLoopIterations / b ? kManyLoopIterations : std::min(a * b, kManyLoopIterations);
}

int64_t saturating_add(int64_t a, int64_t b) {
  return std::min(a + b, kManyLoopIterations);
}

namespace {

// Whether a line of source text holds a loop statement.
bool has_loop(const std::string& text) {
  return text.find("for (") != std::string::npos || text.find("while (") != std::string::npos;
}

}  // namespace

CExprEmitter::Scope* CExprEmitter::open_scope(Scope* parent, std::string header, int64_t runs) {
  auto s = std::make_unique<Scope>();
  s->parent = parent;
  s->depth = parent->depth + 1;
  s->header = std::move(header);
  s->runs = runs;
  scopes_.push_back(std::move(s));
  return scopes_.back().get();
}

void CExprEmitter::count(int64_t passes, int64_t text_runs) {
  loop_iterations_ = saturating_add(
      loop_iterations_,
      saturating_add(passes, saturating_mul(text_runs, d_.take_helper_loop_iterations())));
}

// The body runs `trips` times per run of the parent; the condition is tested once more.
CExprEmitter::Scope* CExprEmitter::open_loop(Scope* parent, std::string header, int64_t trips) {
  KILN_CHECK(trips >= 0 && header.find("for (") != std::string::npos)
      << header << " (" << trips << " trips)";
  const int64_t passes = saturating_mul(parent->runs, saturating_add(trips, 1));
  count(passes, passes);
  return open_scope(parent, std::move(header), saturating_mul(parent->runs, trips));
}

// Each block's loop ends with one failed test; its iterations add up to the range per walk.
CExprEmitter::Scope* CExprEmitter::open_block_loop(Scope* blocks, std::string header, int64_t trips,
                                                   int64_t range) {
  KILN_CHECK(trips >= 0 && range >= 0 && blocks->parent &&
             header.find("for (") != std::string::npos)
      << header << " (" << trips << " trips, range " << range << ")";
  const int64_t runs =
      std::min(saturating_mul(blocks->runs, trips), saturating_mul(blocks->parent->runs, range));
  const int64_t passes = saturating_add(blocks->runs, runs);
  count(passes, passes);
  return open_scope(blocks, std::move(header), runs);
}

CExprEmitter::Scope* CExprEmitter::open_if(Scope* parent, std::string header) {
  KILN_CHECK(header.starts_with("if (") && !has_loop(header)) << header;
  count(0, parent->runs);
  return open_scope(parent, std::move(header), parent->runs);
}

CExprEmitter::Scope* CExprEmitter::open_block(Scope* parent) {
  return open_scope(parent, "", parent->runs);
}

void CExprEmitter::close(Scope* s) {
  s->parent->text +=
      fmt::format("{}{}{{\n{}{}}}\n", indent(s->parent), s->header.empty() ? "" : s->header + " ",
                  s->text, indent(s->parent));
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
  // Operands first on an explicit stack (ir/post_order.h), through reductions too: their loops
  // read the bound value.
  auto floor_of = [&](const Expr* x) -> Scope* {
    if (auto it = bound_.find(x); it != bound_.end()) return it->second.first;
    return floor_.at(x);
  };
  auto operands = [&](const Expr* x, std::vector<const Expr*>& out) {
    out.clear();
    if (!bound_.count(x)) out.assign(x->args.begin(), x->args.end());
  };
  auto done = [&](const Expr* x) { return bound_.count(x) > 0 || floor_.count(x) > 0; };
  ir::post_order(e, operands, done, [&](const Expr* x) {
    if (done(x)) return true;
    Scope* best = nullptr;
    for (const Expr* a : x->args)
      if (Scope* s = floor_of(a); s && (!best || s->depth > best->depth)) best = s;
    floor_[x] = best;
    return true;
  });
  return floor_.at(e);
}

void CExprEmitter::append(Scope* s, const std::string& line) {
  KILN_CHECK(!has_loop(line)) << "a loop appended without its trips (append_loop): " << line;
  count(0, s->runs);
  s->text += indent(s) + line + "\n";
}

void CExprEmitter::append_loop(Scope* s, const std::string& line, int64_t trips) {
  KILN_CHECK(trips >= 0 && has_loop(line)) << line << " (" << trips << " trips)";
  const int64_t passes = saturating_mul(s->runs, saturating_add(trips, 1));
  count(passes, passes);
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

// Operands first, on an explicit stack (ir/post_order.h): emit_one recurses one level deep.
Expected<std::string> CExprEmitter::emit(const Expr* root) {
  auto operands = [&](const Expr* e, std::vector<const Expr*>& out) {
    out.clear();
    if (bound_.count(e)) return;
    if (e->kind == ExprKind::Load || e->kind == ExprKind::Alu) out.assign(e->args.begin(), e->args.end());
  };
  auto done = [&](const Expr* e) {
    if (bound_.count(e)) return true;
    Expected<Scope*> s = scope_for(e);
    return s && (*s)->memo.count(e) > 0;
  };
  return ir::post_order(root, operands, done, [&](const Expr* e) { return emit_one(e); });
}

Expected<std::string> CExprEmitter::emit_one(const Expr* e) {
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
    case ExprKind::Scan:  // the scan strategy binds each scan to its running sum
      return std::unexpected(error("a scan outside a scan kernel's row loop"));
    case ExprKind::Size:  // GPU kernels keep their inner sizes (ir/kernel_sizes.h: cpu only)
      return std::unexpected(error("a run-time size in a GPU kernel"));
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

CExprEmitter::ReduceLoops CExprEmitter::open_reduce_loops(const Expr* e, Scope* s,
                                                          const std::vector<std::string>& accs,
                                                          const std::string& init) {
  const DType bt = e->args[0]->dtype;
  const SumBlocks blocks =
      e->reduce_op == kir::ReduceOp::Sum && ir::is_float(bt) ? sum_blocks(e->rextents) : SumBlocks{};
  ReduceLoops l;
  l.steps = accs;
  Scope* inner = s;
  for (size_t r = 0; r < e->rvars.size(); ++r) {
    const std::string v = fmt::format("v{}", e->rvars[r]);
    std::string start = d_.i64_lit(0), cond = fmt::format("{} < {}", v, d_.i64_lit(e->rextents[r]));
    if (static_cast<int>(r) == blocks.level) {
      const std::string bk = fresh("block");
      const int64_t n_blocks = (e->rextents[r] + blocks.block - 1) / blocks.block;
      l.block = open_loop(inner,
                          fmt::format("for ({0} {1} = {2}; {1} < {3}; ++{1})", d_.i64_type(), bk,
                                      d_.i64_lit(0), d_.i64_lit(n_blocks)),
                          n_blocks);
      l.opened.push_back(l.block);
      for (std::string& step : l.steps) {
        step = fresh("part");
        append(l.block, fmt::format("{} {} = {};", d_.reg_type(bt), step, init));
      }
      start = fmt::format("{} * {}", bk, d_.i64_lit(blocks.block));
      cond += fmt::format(" && {} < {} + {}", v, start, d_.i64_lit(blocks.block));
      inner = l.block;
    }
    std::string header =
        fmt::format("for ({0} {1} = {2}; {3}; ++{1})", d_.i64_type(), v, start, cond);
    const int64_t extent = e->rextents[r];
    inner = inner == l.block
                ? open_block_loop(inner, std::move(header), std::min(extent, blocks.block), extent)
                : open_loop(inner, std::move(header), extent);
    if (l.block && inner->parent == l.block) l.first_in_block = inner;
    bind_var(inner, e->rvars[r], v);
    l.opened.push_back(inner);
  }
  l.inner = inner;
  return l;
}

void CExprEmitter::close_reduce_loops(const ReduceLoops& l, const Expr* e,
                                      const std::vector<std::string>& accs,
                                      const std::function<void(Scope*)>& closed) {
  const DType bt = e->args[0]->dtype;
  for (auto it = l.opened.rbegin(); it != l.opened.rend(); ++it) {
    if (*it == l.block)
      for (size_t a = 0; a < accs.size(); ++a)
        append(l.block, fmt::format("{} = {};", accs[a],
                                    reduce_step_text(d_, kir::ReduceOp::Sum, bt, accs[a], l.steps[a])));
    close(*it);
    if (closed) closed(*it);
  }
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
  const ReduceLoops loops = open_reduce_loops(e, s, {acc}, *init);
  Expected<std::string> v = emit(e->args[0]);
  if (!v) return v;
  if (is_arg) {
    append(loops.inner, fmt::format("if ({}) {{ {} = {}; {} = int(v{}); }}",
                                    arg_take_text(d_, e->reduce_op, bt, *v, acc), acc, *v, idx, e->rvars[0]));
  } else {
    const std::string& to = loops.steps[0];
    append(loops.inner, fmt::format("{} = {};", to, reduce_step_text(d_, e->reduce_op, bt, to, *v)));
  }
  close_reduce_loops(loops, e, {acc});
  if (is_arg) return idx;
  return define(s, e->dtype, cast_text(d_, acc, bt, e->dtype));
}

}  // namespace kiln::codegen::gpu
