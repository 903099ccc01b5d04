// GPU kernel source: chooses a launch strategy and writes the kernel body for it with the shared
// expression emitter; the dialect wraps it into a CUDA C or GLSL translation unit.
#include "codegen/gpu/gpu_source.h"

#include <fmt/format.h>

#include <algorithm>

#include "codegen/gpu/c_expr_emitter.h"
#include "codegen/gpu/dialect.h"
#include "codegen/gpu/index_width.h"
#include "codegen/gpu/lane_emitter.h"
#include "codegen/gpu/launch_strategy.h"
#include "codegen/gpu/strategy_writers.h"

namespace kiln::codegen::gpu {

namespace {

// One thread per point of the flattened domain (or per `lanes` consecutive points, lane_emitter.h),
// grid-stride: `block` threads per group (0: the heuristic), each handling `items` units per step,
// `block` apart (so loads stay coalesced).
//
// A dynamic kernel of one axis with lanes (its extent known at run time only, its bound a
// multiple of the lanes) runs ceil(extent / lanes) units: a unit whose lanes all lie below the
// extent moves them as vectors, and the last unit, where the extent is no multiple of the lanes,
// takes its points one at a time.
Expected<LaunchShape> write_elementwise(CExprEmitter& em, const kir::Kernel& k, const FreeVars& fv,
                                        int block, int items, int lanes) {
  DialectText& d = em.dialect();
  const int64_t units = product(k.domain, 0, k.domain.size()) / lanes;
  const int g = block != 0 ? block : heuristic_elementwise_block(units);
  const int per = std::max(items, 1);
  const int64_t step = int64_t{g} * per;
  LaunchShape launch{std::clamp<int64_t>(ceil_div(units, step), 1, kMaxGroups), g};
  // A thread starts below one grid step (launch.groups * step) and moves a whole step at a time.
  // (A dynamic kernel's trips are the most at any extent up to its bound: those at the bound.)
  const int64_t trips = ceil_div(units, launch.groups * step);
  const std::string L = d.i64_type();
  const bool ragged = d.dynamic_outer() && k.domain.size() == 1 && lanes != 1;
  // A dynamic kernel's units per point of its outer axis (lanes divide the inner axes' product),
  // or, with a ragged tail, one unit per `lanes` points.
  const int64_t per_outer = !d.dynamic_outer() ? 0 : ragged ? 1 : units / k.domain[0];
  const std::string units_text = ragged ? fmt::format("(({} + {}) / {})", d.outer_extent(),
                                                      d.i64_lit(lanes - 1), d.i64_lit(lanes))
                                        : d.tasks(units, per_outer);
  if (d.dynamic_outer()) {
    launch.dynamic_tasks = per_outer;
    launch.tasks_per_group = step;
    if (ragged) launch.outer_block = lanes;
  }
  const std::string unit = lanes == 1 ? "point" : "unit";
  Scope* body = nullptr;
  std::vector<Scope*> opened;
  if (per == 1) {
    body = em.open_loop(
        em.root(),
        fmt::format("for ({0} {6} = {1} * {2} + {3}; {6} < {4}; {6} += {5} * {2})", L, d.group_id(),
                    d.i64_lit(g), d.local_id(), units_text, d.num_groups(), unit),
        trips);
    opened.push_back(body);
  } else {
    Scope* base =
        em.open_loop(em.root(),
                     fmt::format("for ({0} base = {1} * {2}; base < {3}; base += {4} * {2})", L,
                                 d.group_id(), d.i64_lit(step), units_text, d.num_groups()),
                     trips);
    Scope* item =
        em.open_loop(base,
                     fmt::format("{}for (int item = 0; item < {}; ++item)",
                                 d.cuda() ? "#pragma unroll\n" + em.indent(base) : "", per),
                     per);
    em.append(item, fmt::format("{} {} = base + {} * {} + {};", L, unit, d.cast(L, "item"), d.i64_lit(g),
                                d.local_id()));
    body = em.open_if(item, fmt::format("if ({} < {})", unit, units_text));
    opened = {base, item, body};
  }
  if (lanes != 1) em.append(body, fmt::format("{} point = unit * {};", L, d.i64_lit(lanes)));
  if (ragged) {
    const std::string n = d.outer_extent();
    Scope* whole = em.open_if(body, fmt::format("if (point + {} <= {})", d.i64_lit(lanes), n));
    bind_flat(em, whole, k.domain, {0}, "point");
    LaneEmitter lane(em, k, fv);
    if (Expected<void> r = lane.emit_stores(whole); !r) return std::unexpected(r.error());
    em.close(whole);
    Scope* tail =
        em.open_loop(body,
                     fmt::format("for ({0} one = point; point + {1} > {2} && one < {2}; ++one)", L,
                                 d.i64_lit(lanes), n),
                     lanes - 1);
    bind_flat(em, tail, k.domain, {0}, "one");
    if (Expected<void> r = emit_stores(em, tail, k); !r) return std::unexpected(r.error());
    em.close(tail);
  } else {
    bind_flat(em, body, k.domain, iota_vars(k.domain.size()), "point");
    if (lanes == 1) {
      if (Expected<void> r = emit_stores(em, body, k); !r) return std::unexpected(r.error());
    } else {
      LaneEmitter lane(em, k, fv);
      if (Expected<void> r = lane.emit_stores(body); !r) return std::unexpected(r.error());
    }
  }
  for (auto it = opened.rbegin(); it != opened.rend(); ++it) em.close(*it);
  return launch;
}

// `a` ranks strictly before `c` in the top-k order (kernel_ir.h, selection scans): larger first
// when `largest`, NaN above every number; equal values (and two NaNs) neither way.
std::string ranks_before_text(DialectText& d, bool largest, DType t, const std::string& a,
                              const std::string& c) {
  const std::string ordered = fmt::format("({} {} {})", a, largest ? ">" : "<", c);
  if (!ir::is_float(t)) return ordered;
  return largest ? fmt::format("({} || ({} && !{}))", ordered, d.is_nan(a), d.is_nan(c))
                 : fmt::format("({} || ({} && !{}))", ordered, d.is_nan(c), d.is_nan(a));
}

// One step of a selection scan: a pass over r keeps the best element ranking after the previous
// pick (`pick` its index, -1 before the first; `pick_value` its value); a strictly better one
// replaces it, so equal values keep the lower index. The step's value is the new pick.
Expected<void> write_selection_step(CExprEmitter& em, Scope* step, const kir::Expr* e,
                                    const std::string& pick, const std::string& pick_value) {
  DialectText& d = em.dialect();
  const std::string L = d.i64_type();
  const DType bt = e->args[0]->dtype;
  const bool largest = e->reduce_op == kir::ReduceOp::ArgMax;
  const std::string best = em.fresh("best"), best_value = em.fresh("best_value");
  em.append(step, fmt::format("{} {} = {};", L, best, d.i64_lit(-1)));
  em.append(step, fmt::format("{} {} = {};", d.reg_type(bt), best_value, pick_value));
  const int32_t rv = e->rvars[0];
  const std::string r = fmt::format("v{}", rv);
  Scope* loop = em.open_loop(
      step, fmt::format("for ({0} {1} = 0; {1} < {2}; ++{1})", L, r, d.i64_lit(e->rextents[0])),
      e->rextents[0]);
  em.bind_var(loop, rv, r);
  Expected<std::string> body = em.emit(e->args[0]);
  if (!body) return std::unexpected(body.error());
  const std::string v = em.fresh("candidate");
  em.append(loop, fmt::format("{} {} = {};", d.reg_type(bt), v, *body));
  const std::string after_prev =
      fmt::format("({} < {} || {} || (!{} && {} > {}))", pick, d.i64_lit(0),
                  ranks_before_text(d, largest, bt, pick_value, v),
                  ranks_before_text(d, largest, bt, v, pick_value), r, pick);
  const std::string better = fmt::format("({} < {} || {})", best, d.i64_lit(0),
                                         ranks_before_text(d, largest, bt, v, best_value));
  em.append(loop, fmt::format("if ({} && {}) {{ {} = {}; {} = {}; }}", after_prev, better,
                              best_value, v, best, r));
  em.close(loop);
  em.append(step, fmt::format("{} = {}; {} = {};", pick, best, pick_value, best_value));
  return {};
}

// A thread per row (Strategy::Kind::scan), grid-stride over the rows; each walks the innermost
// axis in order, one running sum per scan (register type: f16 and bf16 sum in float, like the
// sum reduction), and stores every step.
Expected<LaunchShape> write_scan(CExprEmitter& em, const kir::Kernel& k, int group_size) {
  DialectText& d = em.dialect();
  const std::string L = d.i64_type();
  const size_t rank = k.domain.size();
  if (rank < 2)
    return std::unexpected(kiln::Error{
        fmt::format("gpu codegen: kernel {}: a scan needs a domain of rank >= 2", k.name)});
  const int64_t rows = row_count_of_scan(k), len = k.domain.back();
  const LaunchShape launch{std::clamp<int64_t>(ceil_div(rows, group_size), 1, kMaxGroups),
                           group_size};
  const int64_t trips = ceil_div(rows, launch.groups * int64_t{group_size});
  Scope* row = em.open_loop(
      em.root(),
      fmt::format("for ({0} row = {1} * {2} + {3}; row < {4}; row += {5} * {2})", L, d.group_id(),
                  d.i64_lit(group_size), d.local_id(), d.i64_lit(rows), d.num_groups()),
      trips);
  bind_flat(em, row, std::vector<int64_t>(k.domain.begin(), k.domain.end() - 1),
            iota_vars(rank - 1), "row");
  std::vector<const kir::Expr*> scans;
  for (const kir::Expr* e : kir::kernel_exprs(k))
    if (e->kind == kir::ExprKind::Scan) scans.push_back(e);
  std::vector<std::string> accs, prevs;  // prevs: a selection scan's previous pick's value
  for (const kir::Expr* e : scans) {
    if (!e->rvars.empty()) {  // a selection: no pick yet (index -1)
      const DType bt = e->args[0]->dtype;
      Expected<std::string> init = reduce_init_text(d, e->reduce_op, bt);
      if (!init) return std::unexpected(init.error());
      accs.push_back(em.fresh("pick"));
      prevs.push_back(em.fresh("pick_value"));
      em.append(row, fmt::format("{} {} = {};", L, accs.back(), d.i64_lit(-1)));
      em.append(row, fmt::format("{} {} = {};", d.reg_type(bt), prevs.back(), *init));
      continue;
    }
    Expected<std::string> zero = reduce_init_text(d, e->reduce_op, e->dtype);
    if (!zero) return std::unexpected(zero.error());
    accs.push_back(em.fresh("scan"));
    prevs.emplace_back();
    em.append(row, fmt::format("{} {} = {};", d.reg_type(e->dtype), accs.back(), *zero));
  }
  const auto t = static_cast<int32_t>(rank - 1);
  Scope* step = em.open_loop(
      row, fmt::format("for ({0} v{1} = 0; v{1} < {2}; ++v{1})", L, t, d.i64_lit(len)), len);
  em.bind_var(step, t, fmt::format("v{}", t));
  for (size_t i = 0; i < scans.size(); ++i) {
    if (scans[i]->var != t)
      return std::unexpected(kiln::Error{
          fmt::format("gpu codegen: kernel {}: a scan along v{}, not the innermost axis", k.name,
                      scans[i]->var)});
    if (!scans[i]->rvars.empty()) {
      if (Expected<void> r = write_selection_step(em, step, scans[i], accs[i], prevs[i]); !r)
        return std::unexpected(r.error());
      em.bind_expr(step, scans[i], accs[i]);
      continue;
    }
    Expected<std::string> body = em.emit(scans[i]->args[0]);
    if (!body) return std::unexpected(body.error());
    em.append(step, fmt::format(
                        "{} = {};", accs[i],
                        reduce_step_text(d, scans[i]->reduce_op, scans[i]->dtype, accs[i], *body)));
    em.bind_expr(step, scans[i], accs[i]);
  }
  if (Expected<void> r = emit_stores(em, step, k); !r) return std::unexpected(r.error());
  em.close(step);
  em.close(row);
  return launch;
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

// The attention strategy under `p`: tile = query rows per workgroup (a power of two up to
// kMaxAttentionRows whose tiles fit), block_size = threads (at least one per row).
template <typename Bad>
Expected<Strategy> attention_schedule(const kir::Kernel& k, Strategy st, const TuneParams& p,
                                      const Bad& bad) {
  if (p.splits != 0 || p.items_per_thread != 0 || p.vector_loads != 0 ||
      p.reduce == GpuReduce::workgroup)
    return bad("an attention kernel takes tile and block_size only");
  if (p.tile != 0) {
    if (!power_of_two_in(p.tile, 1, kMaxAttentionRows))
      return bad(fmt::format("tile (attention query rows) must be a power of two in [1, {}]",
                             kMaxAttentionRows));
    if (!attention_tiles(p.tile, k.domain.back()))
      return bad(fmt::format("tile={}: the attention tiles do not fit {} bytes of shared memory",
                             p.tile, kAttentionSharedBytes));
    st.attention_rows = p.tile;
    st.group_size = heuristic_attention_threads(p.tile, k.domain.back());
  }
  if (p.block_size != 0) {
    if (!power_of_two_in(p.block_size, 32, 1024))
      return bad("block_size must be a power of two in [32, 1024]");
    if (p.block_size < st.attention_rows)
      return bad("block_size: attention needs a thread per query row of the tile");
    st.group_size = p.block_size;
  }
  return st;
}

// The heuristic strategy with the schedule of `p` applied; an error names a field that does not
// apply to this kernel (the tuning space offers only fields that do).
Expected<Strategy> scheduled_strategy(const kir::Kernel& k, const kir::KernelFacts& facts,
                                      const TuneParams& p, CheckMode check, bool tensor_cores) {
  const FreeVars& fv = facts.free_vars;
  const auto bad = [&](const std::string& why) {
    return std::unexpected(kiln::Error{fmt::format("gpu codegen: kernel {}: {} ({})", k.name, why, p.str())});
  };
  if (p.vector_width != 0 || p.unroll != 0) return bad("vector_width and unroll are cpu schedule fields");
  Strategy st = choose_strategy(k, facts, tensor_cores);
  if (st.kind == Strategy::Kind::scan) {
    if (p.reduce != GpuReduce::heuristic || p.splits != 0 || p.items_per_thread != 0 ||
        p.tile != 0 || p.vector_loads != 0)
      return bad("a scan kernel takes block_size only");
    if (p.block_size != 0) {
      if (!power_of_two_in(p.block_size, 32, 1024))
        return bad("block_size must be a power of two in [32, 1024]");
      st.group_size = p.block_size;
    }
    return st;
  }
  if (p.reduce == GpuReduce::thread) {
    if (!has_reduce(k)) return bad("reduce=thread: the kernel has no reduction");
    st = Strategy{};  // one thread per point, reductions as loops in the thread
  } else if (p.reduce == GpuReduce::workgroup && st.kind != Strategy::Kind::row_reduce) {
    return bad("reduce=workgroup: the kernel has no row reduction a workgroup can share");
  }
  if (st.kind == Strategy::Kind::attention) return attention_schedule(k, st, p, bad);
  if (p.block_size != 0) {
    if (!power_of_two_in(p.block_size, 32, 1024)) return bad("block_size must be a power of two in [32, 1024]");
    if (st.kind == Strategy::Kind::matmul_tiled) return bad("block_size: the tiled matmul uses 16x16 threads");
    st.group_size = p.block_size;
    if (st.kind == Strategy::Kind::row_reduce) st.splits = heuristic_splits(k, st);  // for this block
  }
  if (p.splits != 0) {
    if (st.kind != Strategy::Kind::row_reduce) return bad("splits applies to row reductions shared by a workgroup");
    if (!power_of_two_in(p.splits, 1, kMaxSplits)) return bad(fmt::format("splits must be a power of two in [1, {}]", kMaxSplits));
    if (const std::string why = splits_blocker(k, st); p.splits > 1 && !why.empty()) return bad("splits: " + why);
    st.splits = p.splits;
  }
  if (p.items_per_thread != 0) {
    if (st.kind != Strategy::Kind::elementwise) return bad("items_per_thread applies to elementwise kernels");
    if (!power_of_two_in(p.items_per_thread, 1, 8)) return bad("items_per_thread must be 1, 2, 4 or 8");
  }
  if (p.tile != 0) {
    if (st.kind != Strategy::Kind::matmul_tiled) return bad("tile applies to the tiled matmul");
    if (!power_of_two_in(p.tile, 16, 128)) return bad("tile must be 16, 32, 64 or 128");
  }
  if (k.dynamic_outer && st.kind == Strategy::Kind::row_reduce) {
    // Splits are chosen by the row count (heuristic_splits); a dynamic kernel's varies.
    if (p.splits > 1) return bad("splits: a dynamic kernel's rows are not split");
    st.splits = 1;
  }
  if (st.kind == Strategy::Kind::elementwise) {
    if (p.vector_loads != 0 && p.vector_loads != 1 && p.vector_loads != kLanes)
      return bad(fmt::format("vector_loads must be 1 or {}", kLanes));
    // A dynamic kernel's only axis takes lanes by its bound (k is the kernel at its bound):
    // write_elementwise runs its last, partial unit point by point.
    const std::string blocker = lanes_blocker(k, fv);
    if (p.vector_loads == kLanes && !blocker.empty()) return bad("vector_loads=4: " + blocker);
    // Bounds-checked kernels (check modes) access element by element.
    st.lanes =
        p.vector_loads == 0 ? (blocker.empty() ? heuristic_lanes(k, fv) : 1) : p.vector_loads;
    if (check != CheckMode::none) st.lanes = 1;
  } else if (p.vector_loads != 0) {
    return bad("vector_loads applies to elementwise kernels");
  }
  return st;
}

// A dynamic kernel at its bound: the outer extent the bound, and so the leading extent of every
// parameter that has the outer extent's, so that the choices that read sizes are the bound's.
// (What the text depends on is the kernel's identity: the index width reads the ranges of the
// index expressions over the domain, which no extent up to the bound leaves.)
kir::Kernel at_bound(const kir::Kernel& k) {
  kir::Kernel at = k;
  at.domain[0] = k.dynamic_bound;
  for (kir::Param& p : at.params)
    if (!p.shape.empty() && p.shape[0] == k.domain[0]) p.shape[0] = k.dynamic_bound;
  return at;
}

// Whether the strategy chosen for a dynamic kernel at its bound takes the outer extent at run time.
bool dynamic_strategy(const kir::Kernel& at, const Strategy& st, bool tensor_cores) {
  const size_t rank = at.domain.size();
  switch (st.kind) {
    case Strategy::Kind::elementwise:
      return true;
    case Strategy::Kind::row_reduce:
      // The outer axis among the row variables, and a column tile along a static axis.
      return st.row_vars >= 1 && (st.cols == 1 || rank >= 2);
    case Strategy::Kind::matmul_tiled:
      return !(tensor_cores && mma_supports(st.matmul));
    case Strategy::Kind::scan:
    case Strategy::Kind::attention:
      return false;
  }
  return false;
}

}  // namespace

LaunchShape launch_at(const LaunchShape& launch, int64_t outer) {
  if (launch.dynamic_tasks <= 0) return launch;
  LaunchShape l = launch;
  const int64_t blocks =
      ceil_div(std::max<int64_t>(outer, 0), std::max<int64_t>(launch.outer_block, 1));
  l.groups = std::clamp<int64_t>(
      ceil_div(blocks * launch.dynamic_tasks, std::max<int64_t>(launch.tasks_per_group, 1)), 1,
      kMaxGroups);
  return l;
}

bool serves_any_outer_extent(const kir::Kernel& kernel, const kir::KernelFacts& facts,
                             CheckMode check, bool tensor_cores) {
  // Checked code bounds every access by the buffers' lengths.
  if (check != CheckMode::none || kernel.domain.empty() || !kernel.dynamic_outer) return false;
  if (kernel.dynamic_bound < 1 || kernel.dynamic_bound > kMaxDynamicBound) return false;
  if (kernel.outer_extent() < 2 || kernel.outer_extent() > kernel.dynamic_bound) return false;
  if (facts.attention) return false;
  // An empty inner axis leaves no task to scale.
  if (std::ranges::find(kernel.domain, 0) != kernel.domain.end()) return false;
  const kir::Kernel at = at_bound(kernel);
  return dynamic_strategy(at, choose_strategy(at, facts, tensor_cores), tensor_cores);
}

Expected<GpuSource> emit_source(const kir::Kernel& instance, const TuneParams& params,
                                Dialect dialect, CheckMode check, const kir::KernelFacts* facts,
                                bool tensor_cores) {
  for (int64_t e : instance.domain)
    if (e < 0)
      return std::unexpected(kiln::Error{
          fmt::format("gpu codegen: kernel {}: negative domain extent {}", instance.name, e)});
  std::optional<kir::KernelFacts> computed;
  if (!facts) facts = &computed.emplace(kir::analyze_kernel(instance));
  // A dynamic kernel is written at its bound (the facts, of the same expressions, still apply).
  std::optional<kir::Kernel> bound;
  // The tensor cores are CUDA's.
  tensor_cores = tensor_cores && dialect == Dialect::cuda;
  if (instance.dynamic_outer) {
    if (!serves_any_outer_extent(instance, *facts, check, tensor_cores))
      return std::unexpected(kiln::Error{fmt::format(
          "gpu codegen: kernel {}: a dynamic kernel (outer extent {}, bound {}) that the GPU "
          "cannot serve at every extent; it keeps its size",
          instance.name, instance.outer_extent(), instance.dynamic_bound)});
    bound = at_bound(instance);
  }
  const kir::Kernel& kernel = bound ? *bound : instance;
  const FreeVars& fv = facts->free_vars;
  Expected<Strategy> st = scheduled_strategy(kernel, *facts, params, check, tensor_cores);
  if (!st) return std::unexpected(st.error());
  DialectText d(dialect, index_math_fits_i32(kernel));
  d.set_dynamic_outer(kernel.dynamic_outer);
  CExprEmitter em(kernel, d, check, fv);
  std::string shared;
  Expected<LaunchShape> launch = std::unexpected(kiln::Error{"unreachable"});
  const bool mma =
      st->kind == Strategy::Kind::matmul_tiled && tensor_cores && mma_supports(st->matmul);
  const bool mma_attention = st->kind == Strategy::Kind::attention && tensor_cores &&
                             mma_attention_supports(kernel, st->attention);
  switch (st->kind) {
    case Strategy::Kind::matmul_tiled:
      launch = mma ? write_mma_matmul(em, kernel, st->matmul, params.tile, shared)
                   : write_matmul(em, kernel, st->matmul, params.tile, shared);
      break;
    case Strategy::Kind::attention:
      launch = mma_attention ? write_mma_attention(em, kernel, st->attention, shared)
                             : write_attention(em, kernel, *st, shared);
      break;
    case Strategy::Kind::row_reduce: launch = write_row_reduce(em, kernel, *st, shared); break;
    case Strategy::Kind::scan:
      launch = write_scan(em, kernel, st->group_size);
      break;
    case Strategy::Kind::elementwise:
      launch = write_elementwise(em, kernel, fv, params.block_size, params.items_per_thread, st->lanes);
      break;
  }
  if (!launch) return std::unexpected(launch.error());
  GpuSource out;
  out.entry = dialect == Dialect::cuda ? entry_name(kernel) : "main";
  out.launch = *launch;
  out.strategy = st->cols > 1        ? "column-reduce"
                 : mma              ? "matmul-mma"
                 : mma_attention    ? "attention-mma"
                                    : strategy_name(st->kind);
  out.scratch_bytes = d.scratch_size();
  out.scratch_zero_bytes = d.scratch_zero_bytes();
  out.text = d.translation_unit(kernel, check, out.entry, launch->group_size, shared, em.take_root_text());
  out.loop_iterations = em.loop_iterations();
  KILN_CHECK(d.take_helper_loop_iterations() == 0)
      << kernel.name << ": a helper call outside the text";
  return out;
}

Expected<void> check_loop_iterations(const GpuSource& source, const std::string& kernel,
                                     int64_t limit, const std::string& device) {
  if (source.loop_iterations <= limit) return {};
  const std::string over = fmt::format(
      "kernel {}: its {} schedule ({} workgroups of {}) runs up to {} loop iterations per "
      "invocation, over the {} that {} runs before it ends an invocation's loops early, which "
      "would give wrong results",
      kernel, source.strategy, source.launch.groups, source.launch.group_size,
      source.loop_iterations, limit, device);
  if (source.other_schedules_tried < 0)
    return std::unexpected(kiln::Error{over + "; this schedule is refused"});
  return std::unexpected(kiln::Error{fmt::format(
      "{}; {}, so this kernel does not run on {}: run it on another device (cpu), or split the "
      "work into shorter pieces",
      over,
      source.other_schedules_tried == 0
          ? "its tuning space has no other schedule"
          : fmt::format("none of the {} other schedules of its tuning space stays within that "
                        "budget",
                        source.other_schedules_tried),
      device)});
}

}  // namespace kiln::codegen::gpu
