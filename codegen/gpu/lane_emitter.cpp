// Four lanes per thread for elementwise GPU kernels (see lane_emitter.h).
#include "codegen/gpu/lane_emitter.h"

#include <fmt/format.h>

#include <cstdlib>
#include <numeric>

#include "ir/post_order.h"

namespace kiln::codegen::gpu {

using kir::Alu;
using kir::Expr;
using kir::ExprKind;

namespace {

int32_t innermost(const kir::Kernel& k) { return static_cast<int32_t>(k.domain.size()) - 1; }

bool loads_param(const kir::Kernel& k, int32_t buf) {
  for (const Expr* e : kir::kernel_exprs(k))
    if (e->kind == ExprKind::Load && e->buf == buf) return true;
  return false;
}

bool unit_stride_aligned(const FreeVars& fv, int32_t var, const Expr* index) {
  const std::optional<int64_t> c = var_coefficient(index, var, fv);
  return c && *c == 1 && known_divisor(index, var, kLanes) % kLanes == 0;
}

}  // namespace

int64_t known_divisor(const Expr* e, int32_t var, int64_t var_multiple) {
  constexpr int64_t kCap = int64_t{1} << 40;  // large enough for any alignment question
  switch (e->kind) {
    case ExprKind::Const: return ir::is_int(e->dtype) ? std::min(std::abs(e->ival), kCap) : 1;
    case ExprKind::Size:
      return 1;
    case ExprKind::Var: return e->var == var ? var_multiple : 1;
    case ExprKind::Alu:
      if (!ir::is_int(e->dtype)) return 1;
      if (e->alu == Alu::Add || e->alu == Alu::Sub)
        return std::gcd(known_divisor(e->args[0], var, var_multiple), known_divisor(e->args[1], var, var_multiple));
      if (e->alu == Alu::Mul) {
        const int64_t a = known_divisor(e->args[0], var, var_multiple);
        const int64_t b = known_divisor(e->args[1], var, var_multiple);
        if (a == 0 || b == 0) return 0;
        return std::min(a * std::min(b, kCap), kCap);
      }
      return 1;
    case ExprKind::Load:  // nothing known
    case ExprKind::Reduce:
    case ExprKind::Scan:
      break;
  }
  return 1;
}

bool vector_load_ok(const kir::Kernel& k, const FreeVars& fv, int32_t buf, const Expr* index) {
  if (k.domain.empty() || buf < 0 || buf >= static_cast<int32_t>(k.params.size())) return false;
  const kir::Param& p = k.params[buf];
  return !p.output && DialectText::has_vec4(p.dtype) && unit_stride_aligned(fv, innermost(k), index);
}

bool vector_store_ok(const kir::Kernel& k, const FreeVars& fv, const kir::Store& st) {
  if (k.domain.empty() || st.buf < 0 || st.buf >= static_cast<int32_t>(k.params.size())) return false;
  return DialectText::has_vec4(k.params[st.buf].dtype) && !loads_param(k, st.buf) &&
         unit_stride_aligned(fv, innermost(k), st.index);
}

std::string lanes_blocker(const kir::Kernel& k, const FreeVars& fv) {
  if (k.domain.empty()) return "the kernel has no domain axis";
  if (k.domain.back() % kLanes != 0 || k.domain.back() == 0)
    return fmt::format("the innermost extent {} is not a multiple of {}", k.domain.back(), kLanes);
  for (const kir::Store& st : k.stores)
    if (vector_store_ok(k, fv, st)) return "";
  for (const Expr* e : kir::kernel_exprs(k))
    if (e->kind == ExprKind::Load && fv.uses(e, innermost(k)) && vector_load_ok(k, fv, e->buf, e->args[0]))
      return "";
  return "no f32/i32 load or store is contiguous and 16-byte aligned along the innermost axis";
}

int heuristic_lanes(const kir::Kernel& k, const FreeVars& fv) {
  int64_t points = 1;
  for (int64_t e : k.domain) points *= e;
  return points >= kMinPointsForLanes && lanes_blocker(k, fv).empty() ? kLanes : 1;
}

LaneEmitter::LaneEmitter(CExprEmitter& em, const kir::Kernel& k, const FreeVars& fv)
    : em_(em), k_(k), fv_(fv), var_(innermost(k)) {}

kiln::Error LaneEmitter::error(const std::string& what) const {
  return kiln::Error{fmt::format("gpu codegen: kernel {}: {}", k_.name, what)};
}

std::string LaneEmitter::define(Scope* s, DType t, const std::string& value) {
  const std::string name = em_.fresh("t");
  em_.append(s, fmt::format("{} {} = {};", em_.dialect().reg_type(t), name, value));
  return name;
}

// Operands first, on an explicit stack (ir/post_order.h): lanes_one recurses one level deep.
Expected<LaneEmitter::Lanes> LaneEmitter::lanes(const Expr* root) {
  auto operands = [&](const Expr* e, std::vector<const Expr*>& out) {
    out.clear();
    if (!varying(e)) return;  // emitted once, by the expression emitter
    const bool vector_load = e->kind == ExprKind::Load &&
                             vector_load_ok(k_, fv_, e->buf, e->args[0]);
    if ((e->kind == ExprKind::Load && !vector_load) || e->kind == ExprKind::Alu)
      out.assign(e->args.begin(), e->args.end());
  };
  auto done = [&](const Expr* e) {
    if (!varying(e)) return false;
    Expected<Scope*> s = em_.scope_for(e);
    return s && memo_.count({*s, e}) > 0;
  };
  return ir::post_order(root, operands, done, [&](const Expr* e) { return lanes_one(e); });
}

Expected<LaneEmitter::Lanes> LaneEmitter::lanes_one(const Expr* e) {
  if (!varying(e)) {
    Expected<std::string> v = em_.emit(e);
    if (!v) return std::unexpected(v.error());
    return Lanes{*v, *v, *v, *v};
  }
  Expected<Scope*> s = em_.scope_for(e);
  if (!s) return std::unexpected(s.error());
  if (auto it = memo_.find({*s, e}); it != memo_.end()) return it->second;
  Expected<Lanes> v = lanes_uncached(e, *s);
  if (v) memo_[{*s, e}] = *v;
  return v;
}

Expected<LaneEmitter::Lanes> LaneEmitter::lanes_uncached(const Expr* e, Scope* s) {
  switch (e->kind) {
    case ExprKind::Var: {
      Expected<std::string> first = em_.emit(e);  // the first lane's value, as bound
      if (!first) return std::unexpected(first.error());
      Lanes out{*first};
      for (int l = 1; l < kLanes; ++l)
        out[l] = define(s, DType::i64, fmt::format("{} + {}", *first, em_.dialect().i64_lit(l)));
      return out;
    }
    case ExprKind::Load: return load_lanes(e, s);
    case ExprKind::Reduce: return reduce_lanes(e, s);
    case ExprKind::Scan:  // scan kernels run a thread per row (gpu_source.cpp), never lanes
      return std::unexpected(error("a scan in a kernel written lane by lane"));
    case ExprKind::Size:  // GPU kernels keep their inner sizes (ir/kernel_sizes.h: cpu only)
      return std::unexpected(error("a run-time size in a GPU kernel"));
    case ExprKind::Alu: {
      if (static_cast<int>(e->args.size()) != kir::alu_arity(e->alu))
        return std::unexpected(error(fmt::format("alu op '{}' has {} operands", kir::alu_name(e->alu), e->args.size())));
      std::vector<Lanes> args;
      for (const Expr* a : e->args) {
        Expected<Lanes> v = lanes(a);
        if (!v) return v;
        args.push_back(*v);
      }
      Lanes out;
      for (int l = 0; l < kLanes; ++l) {
        std::vector<std::string> lane_args;
        for (const Lanes& a : args) lane_args.push_back(a[l]);
        Expected<std::string> r = alu_text(em_.dialect(), *e, lane_args);
        if (!r) return std::unexpected(error(r.error().message));
        out[l] = define(s, e->dtype, *r);
      }
      return out;
    }
    case ExprKind::Const: break;  // never varying: lanes() emits it once
  }
  return std::unexpected(error("unknown expression kind"));
}

Expected<LaneEmitter::Lanes> LaneEmitter::load_lanes(const Expr* e, Scope* s) {
  if (e->buf < 0 || e->buf >= static_cast<int32_t>(k_.params.size()) || k_.params[e->buf].dtype != e->dtype)
    return std::unexpected(error(fmt::format("load of param %{} with dtype {} does not match its parameter", e->buf, ir::dtype_name(e->dtype))));
  DialectText& d = em_.dialect();
  if (vector_load_ok(k_, fv_, e->buf, e->args[0])) {
    Expected<std::string> first = em_.emit(e->args[0]);  // an index has no reduction: lane 0 as bound
    if (!first) return std::unexpected(first.error());
    const std::string at = fmt::format("{} / {}", *first, d.i64_lit(kLanes));
    const std::string v = em_.fresh("ld");
    em_.append(s, fmt::format("{} {} = {}[{}];", d.vec4_type(e->dtype), v, d.vec4_ref(k_, e->buf),
                              d.cuda() ? at : "uint(" + at + ")"));
    return Lanes{v + ".x", v + ".y", v + ".z", v + ".w"};
  }
  Expected<Lanes> index = lanes(e->args[0]);
  if (!index) return index;
  Lanes out;
  for (int l = 0; l < kLanes; ++l) {
    const std::string& i = (*index)[l];
    out[l] = define(s, e->dtype, d.from_memory(e->dtype, fmt::format("{}[{}]", d.buffer_ref(e->buf), d.cuda() ? i : "uint(" + i + ")")));
  }
  return out;
}

// Four accumulators in one loop nest; the body's lanes are emitted inside it.
Expected<LaneEmitter::Lanes> LaneEmitter::reduce_lanes(const Expr* e, Scope* s) {
  if (e->args.size() != 1 || e->rvars.size() != e->rextents.size()) return std::unexpected(error("malformed reduce"));
  DialectText& d = em_.dialect();
  const DType bt = e->args[0]->dtype;
  const bool is_arg = e->reduce_op == kir::ReduceOp::ArgMax || e->reduce_op == kir::ReduceOp::ArgMin;
  if (is_arg && e->rvars.size() != 1) return std::unexpected(error("arg reduction over several variables"));
  Expected<std::string> init = reduce_init_text(d, e->reduce_op, bt);
  if (!init) return std::unexpected(error(init.error().message));
  Lanes acc, idx;
  for (int l = 0; l < kLanes; ++l) {
    acc[l] = em_.fresh("acc");
    em_.append(s, fmt::format("{} {} = {};", d.reg_type(bt), acc[l], *init));
    if (is_arg) {
      idx[l] = em_.fresh("idx");
      em_.append(s, fmt::format("int {} = 0;", idx[l]));
    }
  }
  const std::vector<std::string> accs(acc.begin(), acc.end());
  const CExprEmitter::ReduceLoops loops = em_.open_reduce_loops(e, s, accs, *init);
  Scope* inner = loops.inner;
  Expected<Lanes> body = lanes(e->args[0]);
  if (!body) return body;
  for (int l = 0; l < kLanes; ++l) {
    const std::string& v = (*body)[l];
    const std::string& to = loops.steps[static_cast<size_t>(l)];
    if (is_arg)
      em_.append(inner, fmt::format("if ({}) {{ {} = {}; {} = int(v{}); }}",
                                    arg_take_text(d, e->reduce_op, bt, v, acc[l]), acc[l], v, idx[l], e->rvars[0]));
    else
      em_.append(inner, fmt::format("{} = {};", to, reduce_step_text(d, e->reduce_op, bt, to, v)));
  }
  em_.close_reduce_loops(loops, e, accs, [&](Scope* closed) {
    std::erase_if(memo_, [&](const auto& kv) { return kv.first.first == closed; });
  });
  if (is_arg) return idx;
  Lanes out;
  for (int l = 0; l < kLanes; ++l) out[l] = define(s, e->dtype, cast_text(d, acc[l], bt, e->dtype));
  return out;
}

Expected<void> LaneEmitter::emit_stores(Scope* s) {
  DialectText& d = em_.dialect();
  for (const kir::Store& st : k_.stores) {
    if (st.buf < 0 || st.buf >= static_cast<int32_t>(k_.params.size()) || k_.params[st.buf].dtype != st.value->dtype)
      return std::unexpected(error(fmt::format("store to param %{} does not match its parameter", st.buf)));
    const DType t = k_.params[st.buf].dtype;
    Expected<Lanes> value = lanes(st.value);
    if (!value) return std::unexpected(value.error());
    if (vector_store_ok(k_, fv_, st)) {
      Expected<std::string> first = em_.emit(st.index);
      if (!first) return std::unexpected(first.error());
      const std::string at = fmt::format("{} / {}", *first, d.i64_lit(kLanes));
      const Lanes& v = *value;
      em_.append(s, fmt::format("{}[{}] = {};", d.vec4_ref(k_, st.buf), d.cuda() ? at : "uint(" + at + ")",
                                d.vec4_make(t, v[0], v[1], v[2], v[3])));
      continue;
    }
    Expected<Lanes> index = lanes(st.index);
    if (!index) return std::unexpected(index.error());
    // Lane by lane, in point order (a store whose index ignores the lane keeps the last lane's value).
    const int first_lane = varying(st.index) || varying(st.value) ? 0 : kLanes - 1;
    for (int l = first_lane; l < kLanes; ++l) {
      const std::string& i = (*index)[l];
      em_.append(s, fmt::format("{}[{}] = {};", d.buffer_ref(st.buf), d.cuda() ? i : "uint(" + i + ")",
                                d.to_memory(t, (*value)[l])));
    }
  }
  return {};
}

}  // namespace kiln::codegen::gpu
