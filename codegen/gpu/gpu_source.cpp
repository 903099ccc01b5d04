// GPU kernel source: chooses a launch strategy and writes the kernel body for it with the shared
// expression emitter; the dialect wraps it into a CUDA C or GLSL translation unit.
#include "codegen/gpu/gpu_source.h"

#include <fmt/format.h>

#include <algorithm>

#include "codegen/gpu/c_expr_emitter.h"
#include "codegen/gpu/dialect.h"
#include "codegen/gpu/index_width.h"
#include "codegen/gpu/launch_strategy.h"
#include "codegen/gpu/strategy_writers.h"

namespace kiln::codegen::gpu {

namespace {

// One thread per point of the flattened domain, grid-stride: `block` threads per group (0: the
// heuristic), each handling `items` points per step, `block` apart (so loads stay coalesced).
Expected<LaunchShape> write_elementwise(CExprEmitter& em, const kir::Kernel& k, int block, int items) {
  DialectText& d = em.dialect();
  const int64_t total = product(k.domain, 0, k.domain.size());
  const int g = block != 0 ? block : heuristic_elementwise_block(total);
  const int per = std::max(items, 1);
  const int64_t step = int64_t{g} * per;
  const LaunchShape launch{std::clamp<int64_t>(ceil_div(total, step), 1, kMaxGroups), g};
  const std::string L = d.i64_type();
  if (per == 1) {
    Scope* point = em.open(em.root(), fmt::format(
        "for ({0} point = {1} * {2} + {3}; point < {4}; point += {5} * {2})", L, d.group_id(),
        d.i64_lit(g), d.local_id(), d.i64_lit(total), d.num_groups()));
    bind_flat(em, point, k.domain, iota_vars(k.domain.size()), "point");
    if (Expected<void> r = emit_stores(em, point, k); !r) return std::unexpected(r.error());
    em.close(point);
    return launch;
  }
  Scope* base = em.open(em.root(), fmt::format(
      "for ({0} base = {1} * {2}; base < {3}; base += {4} * {2})", L, d.group_id(),
      d.i64_lit(step), d.i64_lit(total), d.num_groups()));
  Scope* item = em.open(base, fmt::format("{}for (int item = 0; item < {}; ++item)",
                                          d.cuda() ? "#pragma unroll\n" + em.indent(base) : "", per));
  em.append(item, fmt::format("{} point = base + {} * {} + {};", L, d.cast(L, "item"), d.i64_lit(g),
                              d.local_id()));
  Scope* point = em.open(item, fmt::format("if (point < {})", d.i64_lit(total)));
  bind_flat(em, point, k.domain, iota_vars(k.domain.size()), "point");
  if (Expected<void> r = emit_stores(em, point, k); !r) return std::unexpected(r.error());
  em.close(point);
  em.close(item);
  em.close(base);
  return launch;
}

// The tree combination of partial results in shared memory; thread 0 ends with the total.
void write_tree(CExprEmitter& em, Scope* row, const kir::Expr* r, int g, const std::string& sh,
                const std::string& shi) {
  DialectText& d = em.dialect();
  const DType bt = r->args[0]->dtype;
  const bool is_arg = r->reduce_op == kir::ReduceOp::ArgMax || r->reduce_op == kir::ReduceOp::ArgMin;
  std::string combine;
  const std::string a = fmt::format("{}[tid]", sh), b = fmt::format("{}[tid + s]", sh);
  if (is_arg) {
    const std::string ia = fmt::format("{}[tid]", shi), ib = fmt::format("{}[tid + s]", shi);
    combine = fmt::format("if ({} || (!{} && {} < {})) {{ {} = {}; {} = {}; }}",
                          arg_take_text(d, r->reduce_op, bt, b, a), arg_take_text(d, r->reduce_op, bt, a, b),
                          ib, ia, a, b, ia, ib);
  } else {
    combine = fmt::format("{} = {};", a, reduce_step_text(d, r->reduce_op, bt, a, b));
  }
  em.append(row, d.barrier());
  em.append(row, fmt::format("for (uint s = {}u; s > 0u; s >>= 1u) {{ if (tid < s) {{ {} }} {} }}",
                             g / 2, combine, d.barrier()));
}

// One reduction computed by the whole workgroup: each thread folds a strided share of the
// iteration space, then a tree in shared memory combines the partials. Returns the variable (of
// the row scope) that holds the result in every thread.
Expected<std::string> write_cooperative_reduce(CExprEmitter& em, Scope* row, const kir::Expr* r,
                                               int g, std::string& shared,
                                               std::vector<std::string>& declared) {
  DialectText& d = em.dialect();
  const DType bt = r->args[0]->dtype;
  const bool is_arg = r->reduce_op == kir::ReduceOp::ArgMax || r->reduce_op == kir::ReduceOp::ArgMin;
  Expected<std::string> init = reduce_init_text(d, r->reduce_op, bt);
  if (!init) return std::unexpected(init.error());
  const std::string sh = fmt::format("kiln_sh_{}", ir::dtype_name(bt)), shi = "kiln_shi";
  for (const auto& [name, type] : {std::pair{sh, d.reg_type(bt)}, std::pair{shi, std::string("int")}}) {
    if ((name == shi && !is_arg) || std::ranges::count(declared, name)) continue;
    declared.push_back(name);
    shared += d.shared_decl(type, name, g);
  }
  const std::string acc = em.fresh("acc"), idx = em.fresh("idx"), f = em.fresh("f");
  em.append(row, fmt::format("{} {} = {};", d.reg_type(bt), acc, *init));
  if (is_arg) em.append(row, fmt::format("int {} = 0;", idx));
  Scope* coop = em.open(row, fmt::format("for ({0} {1} = lid; {1} < {2}; {1} += {3})", d.i64_type(), f,
                                         d.i64_lit(product(r->rextents, 0, r->rextents.size())), d.i64_lit(g)));
  bind_flat(em, coop, r->rextents, r->rvars, f);
  Expected<std::string> v = em.emit(r->args[0]);
  if (!v) return v;
  if (is_arg)
    em.append(coop, fmt::format("if ({}) {{ {} = {}; {} = int({}); }}",
                                arg_take_text(d, r->reduce_op, bt, *v, acc), acc, *v, idx, f));
  else
    em.append(coop, fmt::format("{} = {};", acc, reduce_step_text(d, r->reduce_op, bt, acc, *v)));
  em.close(coop);
  em.append(row, fmt::format("{}[tid] = {};", sh, acc));
  if (is_arg) em.append(row, fmt::format("{}[tid] = {};", shi, idx));
  write_tree(em, row, r, g, sh, shi);
  const std::string res = em.fresh("red");
  if (is_arg) em.append(row, fmt::format("int {} = {}[0];", res, shi));
  else em.append(row, fmt::format("{} {} = {};", d.reg_type(r->dtype), res, cast_text(d, sh + "[0]", bt, r->dtype)));
  em.append(row, d.barrier());  // before the next reduction overwrites the shared arrays
  return res;
}

// A workgroup per row (the points sharing the first st.row_vars parallel variables): the row's
// reductions are computed cooperatively, then each thread writes its share of the row (or
// thread 0 writes the point, when every parallel variable is a row variable).
Expected<LaunchShape> write_row_reduce(CExprEmitter& em, const kir::Kernel& k, const Strategy& st,
                                       std::string& shared) {
  DialectText& d = em.dialect();
  const size_t rank = k.domain.size();
  const auto rv = static_cast<size_t>(st.row_vars);
  const int64_t rows = product(k.domain, 0, rv);
  const int g = st.group_size;
  const std::string L = d.i64_type();
  em.append(em.root(), fmt::format("{} lid = {};", L, d.local_id()));
  em.append(em.root(), "uint tid = uint(lid);");
  Scope* row = em.open(em.root(), fmt::format("for ({0} row = {1}; row < {2}; row += {3})", L,
                                              d.group_id(), d.i64_lit(rows), d.num_groups()));
  if (rv > 0) bind_flat(em, row, k.domain, iota_vars(rv), "row");
  std::vector<std::string> declared;
  for (const kir::Expr* r : st.row_reduces) {  // operands first: inner reductions are bound first
    Expected<std::string> res = write_cooperative_reduce(em, row, r, g, shared, declared);
    if (!res) return std::unexpected(res.error());
    em.bind_expr(row, r, *res);
  }
  Scope* cols = rv == rank ? em.open(row, fmt::format("if (lid == {})", d.i64_lit(0)))
                          : em.open(row, fmt::format("for ({0} v{1} = lid; v{1} < {2}; v{1} += {3})", L,
                                                     rank - 1, d.i64_lit(k.domain.back()), d.i64_lit(g)));
  if (rv < rank) em.bind_var(cols, static_cast<int32_t>(rank - 1), fmt::format("v{}", rank - 1));
  if (Expected<void> r = emit_stores(em, cols, k); !r) return std::unexpected(r.error());
  em.close(cols);
  em.close(row);
  return LaunchShape{std::clamp<int64_t>(rows, 1, kMaxGroups), g};
}

std::string entry_name(const kir::Kernel& k) {
  std::string s = "kiln_";
  for (char c : k.name) s += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return s == "kiln_" ? "kiln_kernel" : s;
}

}  // namespace

namespace {

bool has_reduce(const kir::Kernel& k) {
  for (const kir::Expr* e : kir::kernel_exprs(k))
    if (e->kind == kir::ExprKind::Reduce) return true;
  return false;
}

bool power_of_two_in(int v, int lo, int hi) { return v >= lo && v <= hi && (v & (v - 1)) == 0; }

// The heuristic strategy with the schedule of `p` applied; an error names a field that does not
// apply to this kernel (the tuning space offers only fields that do).
Expected<Strategy> scheduled_strategy(const kir::Kernel& k, const FreeVars& fv, const TuneParams& p) {
  const auto bad = [&](const std::string& why) {
    return std::unexpected(kiln::Error{fmt::format("gpu codegen: kernel {}: {} ({})", k.name, why, p.str())});
  };
  if (p.vector_width != 0 || p.unroll != 0) return bad("vector_width and unroll are cpu schedule fields");
  Strategy st = choose_strategy(k, fv);
  if (p.reduce == GpuReduce::thread) {
    if (!has_reduce(k)) return bad("reduce=thread: the kernel has no reduction");
    st = Strategy{};  // one thread per point, reductions as loops in the thread
  } else if (p.reduce == GpuReduce::workgroup && st.kind != Strategy::Kind::row_reduce) {
    return bad("reduce=workgroup: the kernel has no row reduction a workgroup can share");
  }
  if (p.block_size != 0) {
    if (!power_of_two_in(p.block_size, 32, 1024)) return bad("block_size must be a power of two in [32, 1024]");
    if (st.kind == Strategy::Kind::matmul_tiled) return bad("block_size: the tiled matmul uses 16x16 threads");
    st.group_size = p.block_size;
  }
  if (p.items_per_thread != 0) {
    if (st.kind != Strategy::Kind::elementwise) return bad("items_per_thread applies to elementwise kernels");
    if (!power_of_two_in(p.items_per_thread, 1, 8)) return bad("items_per_thread must be 1, 2, 4 or 8");
  }
  if (p.tile != 0) {
    if (st.kind != Strategy::Kind::matmul_tiled) return bad("tile applies to the tiled matmul");
    if (!power_of_two_in(p.tile, 16, 128)) return bad("tile must be 16, 32, 64 or 128");
  }
  return st;
}

}  // namespace

Expected<GpuSource> emit_source(const kir::Kernel& kernel, const TuneParams& params,
                                Dialect dialect, CheckMode check) {
  for (int64_t e : kernel.domain)
    if (e < 0) return std::unexpected(kiln::Error{fmt::format("gpu codegen: kernel {}: negative domain extent {}", kernel.name, e)});
  const FreeVars fv(kernel);
  Expected<Strategy> st = scheduled_strategy(kernel, fv, params);
  if (!st) return std::unexpected(st.error());
  DialectText d(dialect, index_math_fits_i32(kernel));
  CExprEmitter em(kernel, d, check, fv);
  std::string shared;
  Expected<LaunchShape> launch = std::unexpected(kiln::Error{"unreachable"});
  switch (st->kind) {
    case Strategy::Kind::matmul_tiled:
      launch = write_matmul(em, kernel, st->matmul, params.tile, shared);
      break;
    case Strategy::Kind::row_reduce: launch = write_row_reduce(em, kernel, *st, shared); break;
    default:
      launch = write_elementwise(em, kernel, params.block_size, params.items_per_thread);
      break;
  }
  if (!launch) return std::unexpected(launch.error());
  GpuSource out;
  out.entry = dialect == Dialect::cuda ? entry_name(kernel) : "main";
  out.launch = *launch;
  out.strategy = strategy_name(st->kind);
  out.text = d.translation_unit(kernel, check, out.entry, launch->group_size, shared, em.take_root_text());
  return out;
}

}  // namespace kiln::codegen::gpu
