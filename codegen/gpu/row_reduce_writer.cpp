// The row-reduce strategy: a workgroup per row (the points sharing the first row_vars parallel
// variables) computes the row's reductions cooperatively (each thread folds a strided share, a
// tree in shared memory combines the partials), then writes the row's points.
//
// With splits S > 1 (long rows, few of them), S workgroups share each row: workgroup `part` folds
// the elements part*G + lid + k*G*S. Thread 0 writes the group's partial results to the scratch
// buffer, fences, and counts the row's finished parts with an atomic; the group that finishes
// last reads the S partials back (bypassing incoherent caches), combines them the same way and
// writes the row's points, then resets the row's counter for the next launch.
//
// Without splits, a row input that several passes read (softmax reads x for its max, its sum and
// its output) is staged: the group copies the row's values into shared memory once and every pass
// reads them there, so the row crosses the memory bus once (a re-read from L2 misses when the rows
// in flight outgrow it). Loads x[base + v] qualify, base reading only row variables and v a
// reduction's variable or the innermost one, while the staged rows fit kStageBytes.
//
// Register rows: where every pass walks the same E = domain.back() points (each reduction one
// variable of extent E) and a thread's share of the staged rows fits kMaxRowSlots values, each
// thread keeps its share in registers instead: slot j of thread lid holds point j * G + lid, or
// with vector rows (unchecked kernels, 4-byte rows starting on 16-byte boundaries, E a multiple
// of 4G) point (j / 4) * 4G + 4 lid + j % 4, copied 16 bytes at a time. Every pass then walks the
// thread's own slots, unrolled (no shared copy, no barrier after it, registers that nvcc keeps
// as such), and with vector rows the points pass moves four points at a time (LaneEmitter: the
// row's other inputs and the outputs as 16-byte vectors).
//
// With cols C > 1 (a workgroup per point, reductions reading along the innermost axis), a
// workgroup takes C consecutive points of that axis: thread lid works on column lid % C and folds
// the slice lid / C, lid / C + G / C, ... of its reductions, so that a warp's loads are
// consecutive; the tree combines the slices of each column. Columns past the end compute the
// last column again (every thread must reach the barriers) and store nothing.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <tuple>
#include <unordered_set>

#include "codegen/gpu/lane_emitter.h"
#include "codegen/gpu/strategy_writers.h"
#include "codegen/sum_blocks.h"

namespace kiln::codegen::gpu {

namespace {

bool is_arg_reduce(const kir::Expr* r) {
  return r->reduce_op == kir::ReduceOp::ArgMax || r->reduce_op == kir::ReduceOp::ArgMin;
}

// Arg reductions: (acc, acc_i) takes (v, i) when v is better, or as good with a lower index.
std::string arg_merge_text(DialectText& d, const kir::Expr* r, const std::string& acc,
                           const std::string& acc_i, const std::string& v, const std::string& i) {
  const DType bt = r->args[0]->dtype;
  return fmt::format("if ({} || (!{} && {} < {})) {{ {} = {}; {} = {}; }}",
                     arg_take_text(d, r->reduce_op, bt, v, acc), arg_take_text(d, r->reduce_op, bt, acc, v),
                     i, acc_i, acc, v, acc_i, i);
}

// The tree combination of partial results in shared memory over the group's g / cols slices;
// thread c (c < cols) ends with column c's total.
void write_tree(CExprEmitter& em, Scope* row, const kir::Expr* r, int g, int cols,
                const std::string& sh, const std::string& shi) {
  DialectText& d = em.dialect();
  const DType bt = r->args[0]->dtype;
  std::string combine;
  const std::string other = cols == 1 ? "tid + s" : fmt::format("tid + s * {}u", cols);
  const std::string a = fmt::format("{}[tid]", sh), b = fmt::format("{}[{}]", sh, other);
  if (is_arg_reduce(r)) {
    combine =
        arg_merge_text(d, r, a, fmt::format("{}[tid]", shi), b, fmt::format("{}[{}]", shi, other));
  } else {
    combine = fmt::format("{} = {};", a, reduce_step_text(d, r->reduce_op, bt, a, b));
  }
  em.append(row, d.barrier());
  const int half = g / cols / 2;  // s = half, half / 2, ..., 1
  em.append_loop(row,
                 fmt::format("for (uint s = {}u; s > 0u; s >>= 1u) {{ if ({} < s) {{ {} }} {} }}",
                             half, cols == 1 ? "tid" : "kiln_slice", combine, d.barrier()),
                 std::bit_width(static_cast<unsigned>(half)));
}

// Shared memory for staged rows: within CUDA's 48 KiB of static shared memory, and Vulkan's
// guaranteed minimum of 16 KiB (the trees' arrays take the rest).
constexpr int64_t kStageBytesCuda = 32 * 1024;
constexpr int64_t kStageBytesGlsl = 12 * 1024;
// Values a thread keeps of its register rows, all of them together, and of the terms it keeps
// for the points pass.
constexpr int64_t kMaxRowSlots = 32;

// Whether `a`, read along variable `va`, is the expression `b` read along `vb` (operands alike,
// the two variables exchanged): a reduction's term that the points pass computes again.
bool same_along(const kir::Expr* a, const kir::Expr* b, int32_t va, int32_t vb,
                const FreeVars& fv) {
  if (a == b) return !fv.uses(a, va);
  if (a->kind != b->kind || a->dtype != b->dtype || a->args.size() != b->args.size()) return false;
  switch (a->kind) {
    case kir::ExprKind::Var:
      return a->var == va && b->var == vb;
    case kir::ExprKind::Const:
    case kir::ExprKind::Size:
      return false;  // interned: equal constants are one expression
    case kir::ExprKind::Reduce:
    case kir::ExprKind::Scan:
      return false;
    case kir::ExprKind::Load:
      if (a->buf != b->buf) return false;
      break;
    case kir::ExprKind::Alu:
      if (a->alu != b->alu) return false;
      break;
  }
  for (size_t i = 0; i < a->args.size(); ++i)
    if (!same_along(a->args[i], b->args[i], va, vb, fv)) return false;
  return true;
}

// A reduction's value and (arg reductions) index, in registers of the row scope.
struct Partial {
  std::string value, index;
};

class RowReduceWriter {
 public:
  RowReduceWriter(CExprEmitter& em, const kir::Kernel& k, const Strategy& st, std::string& shared)
      : em_(em),
        d_(em.dialect()),
        k_(k),
        st_(st),
        g_(st.group_size),
        cols_(st.cols),
        shared_(shared) {}

  Expected<LaunchShape> write();

 private:
  struct Stage;
  // Declares (once) the shared arrays that reduction `r`'s tree uses; returns their names.
  std::pair<std::string, std::string> shared_arrays(const kir::Expr* r);
  // `r` evaluates to its combined result from here on (arg reductions: the index), cast to r's dtype.
  void bind_result(Scope* s, const kir::Expr* r, const Partial& total);
  // Declares `r`'s accumulator (and index) in `s`, holding the reduction's initial value.
  Expected<Partial> accumulator(Scope* s, const kir::Expr* r);
  // The group's fold of `r` over its share of the row, combined over the group: every thread
  // ends with the result.
  Expected<Partial> fold(Scope* row, const kir::Expr* r, const std::string& part);
  // Combines `folded` (one value per thread) over the group with the tree.
  Partial combine(Scope* row, const kir::Expr* r, const Partial& folded);
  Expected<void> write_points(Scope* row);
  Expected<void> write_row(Scope* row);
  Expected<LaunchShape> write_columns();
  // Chooses the staged rows (stages_) and declares their shared arrays.
  void plan_stages();
  // Copies the staged rows of the current row into shared memory.
  Expected<void> write_stages(Scope* row);
  // Binds, in `s`, the staged loads that read along `var` to their shared copies.
  void bind_stages(Scope* s, int32_t var);
  // Register rows: whether they apply to the rows `found` (read by `pass_count` passes, each
  // pass's extent in `extents`); if so, takes them as stages_ and sets slots_ and vector_rows_.
  bool plan_register_rows(std::vector<Stage>& found, const std::vector<int>& pass_count,
                          const std::vector<int64_t>& extents);
  // The point that slot `j` (a loop variable or a number) of this thread holds.
  std::string slot_point(const std::string& j, bool vector) const;
  // Binds, in `s`, the staged loads that read along `var` to their slot `j`.
  void bind_slots(Scope* s, int32_t var, const std::string& j);
  // Slot loop bodies: a register row's element `j`, and the loop over a thread's slots (or, per
  // four, over its vectors) calling `body(scope, index)`.
  template <typename Body>
  Expected<void> for_slots(Scope* s, bool per_vector, Body body) {
    return write_constant_loop(
        em_, s,
        {per_vector ? "kq" : "kj", static_cast<int>(per_vector ? slots_ / kLanes : slots_), true},
        body);
  }
  Expected<Partial> fold_slots(Scope* row, const kir::Expr* r);
  Expected<void> write_slot_points(Scope* row);
  // `n` workgroup tasks (rows, parts of rows, column tiles): at most kMaxGroups groups, each
  // taking the tasks group id, + groups, ... in the loop `var`, opened in the root scope.
  // In a dynamic kernel (serves_any_outer_extent: unsplit, the outer axis among the row
  // variables), n is the count at the bound, the outer extent times n / domain[0] at run time.
  LaunchShape group_launch(int64_t n) const {
    LaunchShape l{std::clamp<int64_t>(n, 1, kMaxGroups), g_};
    if (d_.dynamic_outer()) l.dynamic_tasks = n / k_.domain[0];
    return l;
  }
  Scope* open_group_loop(const std::string& var, int64_t n) {
    return em_.open_loop(
        em_.root(),
        fmt::format("for ({0} {1} = {2}; {1} < {3}; {1} += {4})", d_.i64_type(), var, d_.group_id(),
                    d_.tasks(n, group_launch(n).dynamic_tasks), d_.num_groups()),
        ceil_div(n, group_launch(n).groups));
  }
  // A staged row's index (GLSL indexes shared arrays with 32-bit integers).
  std::string stage_index(const std::string& i) const { return d_.cuda() ? i : "int(" + i + ")"; }

  // A row staged in shared memory: `name`[i] = load of parameter `buf` at base + i, i < extent.
  struct Stage {
    int32_t buf;
    const kir::Expr* base;
    int64_t extent;
    DType dtype;
    std::string name;
    const kir::Expr* sample = nullptr;  // one of its loads, and the variable it reads along
    int32_t sample_var = -1;
    std::vector<std::pair<int32_t, const kir::Expr*>> loads;  // (variable, load) of every pass
  };
  std::vector<Stage> stages_;
  int64_t slots_ = 0;         // values a thread keeps of each register row; 0: none
  bool vector_rows_ = false;  // slots hold points four at a time (see the top of the file)
  // Register rows: terms of a reduction that the points pass computes again (softmax's
  // exp(x - max)), kept per slot: the points pass's expression and its array.
  std::vector<std::pair<const kir::Expr*, std::string>> terms_;
  int64_t term_slots_ = 0;
  // The expression of the points pass that is `term` (read along `var`) read along the innermost
  // variable, or nullptr.
  const kir::Expr* twin_in_points(const kir::Expr* term, int32_t var) const;
  Expected<void> write_split_tail(Scope* row, const std::vector<Partial>& partials);

  CExprEmitter& em_;
  DialectText& d_;
  const kir::Kernel& k_;
  const Strategy& st_;
  const int g_;
  const int cols_;  // Strategy::cols: g_ / cols_ threads fold each column
  std::string& shared_;
  std::vector<std::string> declared_;
};

std::pair<std::string, std::string> RowReduceWriter::shared_arrays(const kir::Expr* r) {
  const DType bt = r->args[0]->dtype;
  const std::string sh = fmt::format("kiln_sh_{}", ir::dtype_name(bt)), shi = "kiln_shi";
  for (const auto& [name, type] : {std::pair{sh, d_.reg_type(bt)}, std::pair{shi, std::string("int")}}) {
    if ((name == shi && !is_arg_reduce(r)) || std::ranges::count(declared_, name)) continue;
    declared_.push_back(name);
    shared_ += d_.shared_decl(type, name, g_);
  }
  return {sh, shi};
}

Partial RowReduceWriter::combine(Scope* row, const kir::Expr* r, const Partial& folded) {
  const auto [sh, shi] = shared_arrays(r);
  const DType bt = r->args[0]->dtype;
  // CUDA, a group per row: the warps combine their lanes with shuffles (5 steps, no barrier),
  // then every thread folds the warps' results from shared memory in warp order.
  if (d_.cuda() && cols_ == 1 && !is_arg_reduce(r) && bt != DType::boolean && g_ % 32 == 0) {
    const std::string v = em_.fresh("wv");
    em_.append(row, fmt::format("{} {} = {};", d_.reg_type(bt), v, folded.value));
    // The shuffle into a variable first: every lane must reach it (a step's text may name its
    // operand twice, in a conditional: an integer max is `a > b ? a : b`).
    em_.append_loop(row,
                    fmt::format("for (int o = 16; o > 0; o >>= 1) {{ {0} s = __shfl_xor_sync("
                                "0xffffffffu, {1}, o); {1} = {2}; }}",
                                d_.reg_type(bt), v, reduce_step_text(d_, r->reduce_op, bt, v, "s")),
                    5);
    em_.append(row, fmt::format("if ((tid & 31u) == 0u) {}[tid >> 5] = {};", sh, v));
    em_.append(row, d_.barrier());
    Partial out{em_.fresh("red"), ""};
    em_.append(row, fmt::format("{} {} = {}[0];", d_.reg_type(bt), out.value, sh));
    if (g_ > 32)
      em_.append_loop(
          row,
          fmt::format("for (int w = 1; w < {}; ++w) {} = {};", g_ / 32, out.value,
                      reduce_step_text(d_, r->reduce_op, bt, out.value, fmt::format("{}[w]", sh))),
          g_ / 32 - 1);
    em_.append(row, d_.barrier());  // before the next reduction overwrites the shared arrays
    return out;
  }
  em_.append(row, fmt::format("{}[tid] = {};", sh, folded.value));
  if (is_arg_reduce(r)) em_.append(row, fmt::format("{}[tid] = {};", shi, folded.index));
  write_tree(em_, row, r, g_, cols_, sh, shi);
  Partial out{em_.fresh("red"), ""};
  const std::string total = cols_ == 1 ? "0" : "kiln_column";
  em_.append(row, fmt::format("{} {} = {}[{}];", d_.reg_type(bt), out.value, sh, total));
  if (is_arg_reduce(r)) {
    out.index = em_.fresh("ridx");
    em_.append(row, fmt::format("int {} = {}[{}];", out.index, shi, total));
  }
  em_.append(row, d_.barrier());  // before the next reduction overwrites the shared arrays
  return out;
}

void RowReduceWriter::plan_stages() {
  const auto rank = static_cast<int32_t>(k_.domain.size());
  if (st_.splits != 1 || cols_ != 1 || st_.row_vars != rank - 1) return;
  const FreeVars& fv = em_.free_vars();
  // The passes over the row: each row reduction (its one variable) and the stores (the innermost).
  std::vector<std::tuple<int32_t, int64_t, std::vector<const kir::Expr*>>> passes;
  for (const kir::Expr* r : st_.row_reduces) {
    if (r->rvars.size() != 1) continue;
    std::unordered_set<const kir::Expr*> seen;
    std::vector<const kir::Expr*> loads;
    collect_loads(r->args[0], seen, loads);
    passes.emplace_back(r->rvars[0], r->rextents[0], std::move(loads));
  }
  {
    std::unordered_set<const kir::Expr*> seen(st_.row_reduces.begin(), st_.row_reduces.end());
    std::vector<const kir::Expr*> loads;
    for (const kir::Store& st : k_.stores) {
      collect_loads(st.value, seen, loads);
      collect_loads(st.index, seen, loads);
    }
    passes.emplace_back(rank - 1, k_.domain.back(), std::move(loads));
  }
  std::vector<Stage> found;
  std::vector<int> pass_count;
  for (size_t p = 0; p < passes.size(); ++p) {
    const auto& [var, extent, loads] = passes[p];
    for (const kir::Expr* load : loads) {
      const kir::Expr* index = load->args[0];
      if (index->kind != kir::ExprKind::Alu || index->alu != kir::Alu::Add) continue;
      const kir::Expr* base = nullptr;
      for (int i = 0; i < 2; ++i)
        if (index->args[i]->kind == kir::ExprKind::Var && index->args[i]->var == var)
          base = index->args[1 - i];
      if (base == nullptr ||
          !std::ranges::all_of(fv.of(base), [&](int32_t v) { return v < st_.row_vars; }))
        continue;
      auto it = std::ranges::find_if(found, [&](const Stage& st) {
        return st.buf == load->buf && st.base == base && st.extent == extent &&
               st.dtype == load->dtype;
      });
      if (it == found.end()) {
        found.push_back({load->buf, base, extent, load->dtype, "", load, var, {}});
        pass_count.push_back(0);
        it = found.end() - 1;
      }
      const auto i = static_cast<size_t>(it - found.begin());
      if (std::ranges::none_of(it->loads, [&](const auto& l) { return l.first == var; }))
        ++pass_count[i];
      it->loads.emplace_back(var, load);
    }
  }
  std::vector<int64_t> extents;
  for (const auto& pass : passes) extents.push_back(std::get<1>(pass));
  if (plan_register_rows(found, pass_count, extents)) return;
  int64_t bytes = 0;
  const int64_t limit = d_.cuda() ? kStageBytesCuda : kStageBytesGlsl;
  for (size_t i = 0; i < found.size(); ++i) {
    const int64_t row_bytes = found[i].extent * std::max(4, ir::dtype_size(found[i].dtype));
    if (pass_count[i] < 2 || bytes + row_bytes > limit) continue;
    bytes += row_bytes;
    found[i].name = fmt::format("kiln_stage{}", stages_.size());
    // 16-byte aligned: CUDA copies rows into it as vectors (write_stages).
    shared_ += d_.shared_decl((d_.cuda() ? "__align__(16) " : "") + d_.reg_type(found[i].dtype),
                              found[i].name, found[i].extent);
    stages_.push_back(std::move(found[i]));
  }
}

bool RowReduceWriter::plan_register_rows(std::vector<Stage>& found,
                                         const std::vector<int>& pass_count,
                                         const std::vector<int64_t>& extents) {
  const int64_t width = k_.domain.back();
  if (width % g_ != 0 || !std::ranges::all_of(extents, [&](int64_t e) { return e == width; }) ||
      !std::ranges::all_of(st_.row_reduces,
                           [](const kir::Expr* r) { return r->rvars.size() == 1; }))
    return false;
  std::vector<size_t> rows;
  for (size_t i = 0; i < found.size(); ++i)
    if (pass_count[i] >= 2) rows.push_back(i);
  if (rows.empty() || static_cast<int64_t>(rows.size()) * (width / g_) > kMaxRowSlots) return false;
  slots_ = width / g_;
  vector_rows_ =
      em_.check() == CheckMode::none && width % (int64_t{kLanes} * g_) == 0 &&
      std::ranges::all_of(rows, [&](size_t i) {
        return DialectText::has_vec4(found[i].dtype) && !k_.params[found[i].buf].output &&
               known_divisor(found[i].sample->args[0], found[i].sample_var, kLanes) % kLanes == 0;
      });
  for (size_t i : rows) {
    found[i].name = fmt::format("kiln_row{}", stages_.size());
    stages_.push_back(std::move(found[i]));
  }
  return true;
}

std::string RowReduceWriter::slot_point(const std::string& j, bool vector) const {
  const std::string L = d_.i64_type();
  const bool number = !j.empty() && std::isdigit(static_cast<unsigned char>(j[0]));
  if (!vector) {
    const std::string first = number ? d_.i64_lit(std::stoll(j) * g_)
                                     : fmt::format("{} * {}", d_.cast(L, j), d_.i64_lit(g_));
    return fmt::format("{} + lid", first);
  }
  // j counts vectors here: slot 4j is the vector's first point.
  const int64_t span = int64_t{kLanes} * g_;
  const std::string first = number ? d_.i64_lit(std::stoll(j) * span)
                                   : fmt::format("{} * {}", d_.cast(L, j), d_.i64_lit(span));
  return fmt::format("{} + lid * {}", first, d_.i64_lit(kLanes));
}

void RowReduceWriter::bind_slots(Scope* s, int32_t var, const std::string& j) {
  for (const Stage& st : stages_)
    for (const auto& [v, load] : st.loads)
      if (v == var) em_.bind_expr(s, load, fmt::format("{}[{}]", st.name, j));
}

// A slot of a loop over vectors: its index in the register row, `lane` of vector `q`.
std::string lane_slot(const std::string& q, int lane) {
  return fmt::format("{} * {} + {}", q, kLanes, lane);
}

Expected<void> RowReduceWriter::write_stages(Scope* row) {
  if (stages_.empty()) return {};
  if (slots_ > 0) {
    for (const Stage& st : stages_)
      em_.append(row, fmt::format("{} {}[{}];", d_.reg_type(st.dtype), st.name, slots_));
    return for_slots(row, vector_rows_, [&](Scope* s, const std::string& j) -> Expected<void> {
      const std::string at = em_.fresh("e");
      em_.append(s, fmt::format("{} {} = {};", d_.i64_type(), at, slot_point(j, vector_rows_)));
      for (const Stage& st : stages_) {
        em_.bind_var(s, st.sample_var, at);
        if (!vector_rows_) {
          Expected<std::string> v = em_.emit(st.sample);
          if (!v) return std::unexpected(v.error());
          em_.append(s, fmt::format("{}[{}] = {};", st.name, j, *v));
          continue;
        }
        Expected<std::string> index = em_.emit(st.sample->args[0]);
        if (!index) return std::unexpected(index.error());
        const std::string vec = fmt::format("{} / {}", *index, d_.i64_lit(kLanes));
        const std::string v = em_.fresh("rv");
        em_.append(s, fmt::format("{} {} = {}[{}];", d_.vec4_type(st.dtype), v,
                                  d_.vec4_ref(k_, st.buf), d_.cuda() ? vec : "uint(" + vec + ")"));
        for (int l = 0; l < kLanes; ++l)
          em_.append(s, fmt::format("{}[{}] = {}.{};", st.name, lane_slot(j, l), v, "xyzw"[l]));
      }
      return {};
    });
  }
  for (const Stage& st : stages_) {
    const std::string i = em_.fresh("si");
    // CUDA copies 4-byte elements 16 bytes at a time where the row starts on a 16-byte boundary
    // and its length is a multiple of 4 (kept in step: the index advances by one along the row).
    const kir::Expr* index = st.sample->args[0];
    if (d_.cuda() && DialectText::has_vec4(st.dtype) && st.extent % kLanes == 0 &&
        known_divisor(index, st.sample_var, kLanes) % kLanes == 0) {
      Scope* copy = em_.open_loop(
          row,
          fmt::format("for ({0} {1} = lid * {2}; {1} < {3}; {1} += {4})", d_.i64_type(), i,
                      d_.i64_lit(kLanes), d_.i64_lit(st.extent), d_.i64_lit(int64_t{g_} * kLanes)),
          ceil_div(st.extent, int64_t{g_} * kLanes));
      em_.bind_var(copy, st.sample_var, i);
      Expected<std::string> at = em_.emit(index);
      if (!at) return std::unexpected(at.error());
      const std::string vt = d_.vec4_type(st.dtype);
      em_.append(copy, fmt::format("*({0}*)&{1}[{2}] = *(const {0}*)({3} + {4});", vt, st.name, i,
                                   d_.buffer_ref(st.buf), *at));
      em_.close(copy);
      continue;
    }
    Scope* copy =
        em_.open_loop(row,
                      fmt::format("for ({0} {1} = lid; {1} < {2}; {1} += {3})", d_.i64_type(), i,
                                  d_.i64_lit(st.extent), d_.i64_lit(g_)),
                      ceil_div(st.extent, g_));
    em_.bind_var(copy, st.sample_var, i);
    Expected<std::string> v = em_.emit(st.sample);
    if (!v) return std::unexpected(v.error());
    em_.append(copy, fmt::format("{}[{}] = {};", st.name, stage_index(i), *v));
    em_.close(copy);
  }
  em_.append(row, d_.barrier());
  return {};
}

void RowReduceWriter::bind_stages(Scope* s, int32_t var) {
  for (const Stage& st : stages_)
    for (const auto& [v, load] : st.loads)
      if (v == var)
        em_.bind_expr(s, load,
                      fmt::format("{}[{}]", st.name, stage_index(fmt::format("v{}", var))));
}

void RowReduceWriter::bind_result(Scope* s, const kir::Expr* r, const Partial& total) {
  if (is_arg_reduce(r)) return em_.bind_expr(s, r, total.index);
  const std::string res = em_.fresh("res");
  em_.append(s, fmt::format("{} {} = {};", d_.reg_type(r->dtype), res, cast_text(d_, total.value, r->args[0]->dtype, r->dtype)));
  em_.bind_expr(s, r, res);
}

Expected<Partial> RowReduceWriter::accumulator(Scope* s, const kir::Expr* r) {
  Expected<std::string> init = reduce_init_text(d_, r->reduce_op, r->args[0]->dtype);
  if (!init) return std::unexpected(init.error());
  Partial acc{em_.fresh("acc"), em_.fresh("idx")};
  em_.append(s, fmt::format("{} {} = {};", d_.reg_type(r->args[0]->dtype), acc.value, *init));
  if (is_arg_reduce(r)) em_.append(s, fmt::format("int {} = 0;", acc.index));
  return acc;
}

const kir::Expr* RowReduceWriter::twin_in_points(const kir::Expr* term, int32_t var) const {
  const FreeVars& fv = em_.free_vars();
  const auto inner = static_cast<int32_t>(k_.domain.size() - 1);
  std::unordered_set<const kir::Expr*> seen;
  std::vector<const kir::Expr*> todo;
  for (const kir::Store& st : k_.stores) todo.insert(todo.end(), {st.value, st.index});
  while (!todo.empty()) {
    const kir::Expr* e = todo.back();
    todo.pop_back();
    if (!seen.insert(e).second || !fv.uses(e, inner) || e->kind == kir::ExprKind::Reduce ||
        e->kind == kir::ExprKind::Scan)
      continue;
    if (same_along(term, e, var, inner, fv)) return e;
    todo.insert(todo.end(), e->args.begin(), e->args.end());
  }
  return nullptr;
}

// A reduction over the thread's slots of the row (register rows), combined over the group.
Expected<Partial> RowReduceWriter::fold_slots(Scope* row, const kir::Expr* r) {
  const DType bt = r->args[0]->dtype;
  Expected<Partial> started = accumulator(row, r);
  if (!started) return started;
  const Partial acc = *started;
  const int32_t var = r->rvars[0];
  // A term worth keeping: computed (not a load), of a 4-byte type or narrower, that the points
  // pass computes again.
  std::string term;
  if (!is_arg_reduce(r) && r->args[0]->kind == kir::ExprKind::Alu && ir::dtype_size(bt) <= 4 &&
      term_slots_ + slots_ <= kMaxRowSlots)
    if (const kir::Expr* twin = twin_in_points(r->args[0], var)) {
      term = fmt::format("kiln_term{}", terms_.size());
      terms_.emplace_back(twin, term);
      term_slots_ += slots_;
      em_.append(row, fmt::format("{} {}[{}];", d_.reg_type(bt), term, slots_));
    }
  Expected<void> folded =
      for_slots(row, false, [&](Scope* s, const std::string& j) -> Expected<void> {
        const std::string point = em_.fresh("f");
        const std::string at =
            vector_rows_
                ? fmt::format("({} / {}) * {} + lid * {} + {} % {}", d_.cast(d_.i64_type(), j),
                              d_.i64_lit(kLanes), d_.i64_lit(int64_t{kLanes} * g_),
                              d_.i64_lit(kLanes), d_.cast(d_.i64_type(), j), d_.i64_lit(kLanes))
                : slot_point(j, false);
        em_.append(s, fmt::format("{} {} = {};", d_.i64_type(), point, at));
        em_.bind_var(s, var, point);
        bind_slots(s, var, j);
        Expected<std::string> v = em_.emit(r->args[0]);
        if (!v) return std::unexpected(v.error());
        if (!term.empty()) em_.append(s, fmt::format("{}[{}] = {};", term, j, *v));
        if (is_arg_reduce(r))
          em_.append(s, fmt::format("if ({}) {{ {} = {}; {} = int({}); }}",
                                    arg_take_text(d_, r->reduce_op, bt, *v, acc.value), acc.value,
                                    *v, acc.index, point));
        else
          em_.append(s, fmt::format("{} = {};", acc.value,
                                    reduce_step_text(d_, r->reduce_op, bt, acc.value, *v)));
        return {};
      });
  if (!folded) return std::unexpected(folded.error());
  return combine(row, r, acc);
}

// The row's points, each thread its slots (register rows): four at a time with vector rows.
Expected<void> RowReduceWriter::write_slot_points(Scope* row) {
  const auto var = static_cast<int32_t>(k_.domain.size() - 1);
  return for_slots(row, vector_rows_, [&](Scope* s, const std::string& j) -> Expected<void> {
    const std::string point = fmt::format("v{}", var);
    em_.append(s, fmt::format("{} {} = {};", d_.i64_type(), point, slot_point(j, vector_rows_)));
    em_.bind_var(s, var, point);
    if (!vector_rows_) {
      bind_slots(s, var, j);
      for (const auto& [twin, name] : terms_)
        em_.bind_expr(s, twin, fmt::format("{}[{}]", name, j));
      return emit_stores(em_, s, k_);
    }
    LaneEmitter lanes(em_, k_, em_.free_vars());
    const auto bind = [&](const kir::Expr* e, const std::string& name) {
      LaneEmitter::Lanes l;
      for (int i = 0; i < kLanes; ++i) l[i] = fmt::format("{}[{}]", name, lane_slot(j, i));
      lanes.bind_lanes(s, e, std::move(l));
    };
    for (const Stage& st : stages_)
      for (const auto& [v, load] : st.loads)
        if (v == var) bind(load, st.name);
    for (const auto& [twin, name] : terms_) bind(twin, name);
    return lanes.emit_stores(s);
  });
}

Expected<Partial> RowReduceWriter::fold(Scope* row, const kir::Expr* r, const std::string& part) {
  if (slots_ > 0 && part.empty()) return fold_slots(row, r);
  const DType bt = r->args[0]->dtype;
  Expected<Partial> started = accumulator(row, r);
  if (!started) return started;
  const Partial acc = *started;
  const std::string f = em_.fresh("f");
  const int64_t n = product(r->rextents, 0, r->rextents.size());
  const std::string first = cols_ == 1 ? "lid" : d_.cast(d_.i64_type(), "kiln_slice");
  const std::string start =
      part.empty() ? first : fmt::format("{} * {} + lid", part, d_.i64_lit(g_));
  const int64_t stride = int64_t{g_ / cols_} * st_.splits;
  // A thread's share of a long float sum folds in blocks of kSumBlock terms (codegen/sum_blocks.h).
  // Blocks engage only when a share outgrows one (n > stride * kSumBlock), so with 32-bit
  // indices (n < 2^30) the block bound below stays under 2^31.
  const bool blocked = r->reduce_op == kir::ReduceOp::Sum && ir::is_float(bt) &&
                       n / stride > kSumBlock;
  // Every start is below the stride (a thread's place in its group and its part of the row).
  const int64_t share = ceil_div(n, stride);
  Scope* block = nullptr;
  std::string into = acc.value, from = start, bound = fmt::format("{} < {}", f, d_.i64_lit(n));
  if (blocked) {
    const std::string fb = em_.fresh("fb"), span = d_.i64_lit(stride * kSumBlock);
    block = em_.open_loop(row,
                          fmt::format("for ({0} {1} = {2}; {1} < {3}; {1} += {4})", d_.i64_type(),
                                      fb, start, d_.i64_lit(n), span),
                          ceil_div(n, stride * kSumBlock));
    into = em_.fresh("part");
    Expected<std::string> init = reduce_init_text(d_, r->reduce_op, bt);
    if (!init) return std::unexpected(init.error());
    em_.append(block, fmt::format("{} {} = {};", d_.reg_type(bt), into, *init));
    from = fb;
    bound += fmt::format(" && {} < {} + {}", f, fb, span);
  }
  std::string header = fmt::format("for ({0} {1} = {2}; {3}; {1} += {4})", d_.i64_type(), f, from,
                                   bound, d_.i64_lit(stride));
  Scope* coop =
      block ? em_.open_block_loop(block, std::move(header), std::min(share, kSumBlock), share)
            : em_.open_loop(row, std::move(header), share);
  bind_flat(em_, coop, r->rextents, r->rvars, f);
  if (r->rvars.size() == 1) bind_stages(coop, r->rvars[0]);
  Expected<std::string> v = em_.emit(r->args[0]);
  if (!v) return std::unexpected(v.error());
  if (is_arg_reduce(r))
    em_.append(coop, fmt::format("if ({}) {{ {} = {}; {} = int({}); }}",
                                 arg_take_text(d_, r->reduce_op, bt, *v, acc.value), acc.value, *v, acc.index, f));
  else
    em_.append(coop, fmt::format("{} = {};", into, reduce_step_text(d_, r->reduce_op, bt, into, *v)));
  em_.close(coop);
  if (block) {
    em_.append(block, fmt::format("{} = {};", acc.value,
                                  reduce_step_text(d_, r->reduce_op, bt, acc.value, into)));
    em_.close(block);
  }
  return combine(row, r, acc);
}

// Each thread writes its share of the row (or thread 0 the point, when every parallel variable
// is a row variable).
Expected<void> RowReduceWriter::write_points(Scope* row) {
  const size_t rank = k_.domain.size();
  const bool per_point = static_cast<size_t>(st_.row_vars) == rank;
  if (slots_ > 0) return write_slot_points(row);
  const std::string first =
      cols_ == 1 ? fmt::format("lid == {}", d_.i64_lit(0))
                 : fmt::format("kiln_slice == 0u && kiln_col < {}", d_.i64_lit(k_.domain.back()));
  Scope* cols = per_point
                    ? em_.open_if(row, fmt::format("if ({})", first))
                    : em_.open_loop(row,
                                    fmt::format("for ({0} v{1} = lid; v{1} < {2}; v{1} += {3})",
                                                d_.i64_type(), rank - 1,
                                                d_.i64_lit(k_.domain.back()), d_.i64_lit(g_)),
                                    ceil_div(k_.domain.back(), g_));
  if (!per_point) {
    em_.bind_var(cols, static_cast<int32_t>(rank - 1), fmt::format("v{}", rank - 1));
    bind_stages(cols, static_cast<int32_t>(rank - 1));
  }
  if (Expected<void> r = emit_stores(em_, cols, k_); !r) return r;
  em_.close(cols);
  return {};
}

// Publishes the group's partials; the row's last group combines all of them and writes the row.
Expected<void> RowReduceWriter::write_split_tail(Scope* row, const std::vector<Partial>& partials) {
  const std::string slot = em_.fresh("slot");
  em_.append(row, fmt::format("{} {} = kiln_row * {} + kiln_part;", d_.i64_type(), slot, d_.i64_lit(st_.splits)));
  const auto at = [&](const std::string& i) { return d_.cuda() ? i : "uint(" + i + ")"; };
  Scope* publish = em_.open_if(row, "if (tid == 0u)");
  for (size_t j = 0; j < st_.row_reduces.size(); ++j) {
    const DType bt = st_.row_reduces[j]->args[0]->dtype;
    em_.append(publish, fmt::format("{}[{}] = {};", d_.scratch_ref(fmt::format("part{}", j)), at(slot),
                                    d_.to_scratch(bt, partials[j].value)));
    if (is_arg_reduce(st_.row_reduces[j]))
      em_.append(publish, fmt::format("{}[{}] = {};", d_.scratch_ref(fmt::format("pidx{}", j)), at(slot), partials[j].index));
  }
  em_.append(publish, d_.buffer_fence());
  em_.append(publish, fmt::format("kiln_last = {} == {}u ? 1u : 0u;", d_.atomic_add_one(d_.scratch_ref("count"), at("kiln_row")),
                                  st_.splits - 1));
  em_.close(publish);
  em_.append(row, d_.barrier());
  Scope* last = em_.open_if(row, "if (kiln_last != 0u)");
  // The row variables again, so that what reads the row's totals is computed in here.
  for (int32_t v = 0; v < st_.row_vars; ++v) em_.bind_var(last, v, fmt::format("v{}", v));
  em_.append(last, d_.buffer_fence());
  for (size_t j = 0; j < st_.row_reduces.size(); ++j) {
    const kir::Expr* r = st_.row_reduces[j];
    const DType bt = r->args[0]->dtype;
    Expected<Partial> started = accumulator(last, r);
    if (!started) return std::unexpected(started.error());
    const Partial acc = *started;
    const std::string i = em_.fresh("p");
    Scope* gather = em_.open_loop(
        last, fmt::format("for (int {0} = int(tid); {0} < {1}; {0} += {2})", i, st_.splits, g_),
        ceil_div(st_.splits, g_));
    const std::string at_i = fmt::format("kiln_row * {} + {}", d_.i64_lit(st_.splits), d_.cast(d_.i64_type(), i));
    const std::string v = em_.fresh("pv");
    em_.append(gather, fmt::format("{} {} = {};", d_.reg_type(bt), v,
                                   d_.from_scratch(bt, d_.scratch_load(fmt::format("part{}", j), at(at_i)))));
    if (is_arg_reduce(r)) {
      const std::string vi = em_.fresh("pi");
      em_.append(gather, fmt::format("int {} = {};", vi, d_.scratch_load(fmt::format("pidx{}", j), at(at_i))));
      // Parts in order, so an equal value keeps the lowest index (the first part's).
      em_.append(gather, arg_merge_text(d_, r, acc.value, acc.index, v, vi));
    } else {
      em_.append(gather, fmt::format("{} = {};", acc.value, reduce_step_text(d_, r->reduce_op, bt, acc.value, v)));
    }
    em_.close(gather);
    const Partial total = combine(last, r, acc);
    bind_result(last, r, total);
  }
  em_.append(last, fmt::format("if (tid == 0u) {}[{}] = 0u;", d_.scratch_ref("count"), at("kiln_row")));
  if (Expected<void> w = write_points(last); !w) return w;
  em_.close(last);
  return {};
}

// The row's reductions, each folded by the whole group, then its points (splits 1).
Expected<void> RowReduceWriter::write_row(Scope* row) {
  for (const kir::Expr* r : st_.row_reduces) {  // operands first: inner reductions are bound first
    Expected<Partial> res = fold(row, r, "");
    if (!res) return std::unexpected(res.error());
    bind_result(row, r, *res);
  }
  return write_points(row);
}

// A workgroup per cols_ consecutive points of the innermost axis (cols_ > 1, splits 1).
Expected<LaunchShape> RowReduceWriter::write_columns() {
  const std::string L = d_.i64_type();
  const size_t rank = k_.domain.size();
  const int64_t width = k_.domain.back(), tiles = ceil_div(width, cols_);
  const int64_t groups = product(k_.domain, 0, rank - 1) * tiles;  // lid and tid: write()
  em_.append(em_.root(), fmt::format("uint kiln_column = tid % {}u;", cols_));
  em_.append(em_.root(), fmt::format("uint kiln_slice = tid / {}u;", cols_));
  Scope* row = open_group_loop("row", groups);
  em_.append(row, fmt::format("{} kiln_col = (row % {}) * {} + {};", L, d_.i64_lit(tiles),
                              d_.i64_lit(cols_), d_.cast(L, "kiln_column")));
  if (rank > 1) {
    em_.append(row, fmt::format("{} kiln_outer = row / {};", L, d_.i64_lit(tiles)));
    bind_flat(em_, row, k_.domain, iota_vars(rank - 1), "kiln_outer");
  }
  const std::string last = fmt::format("v{}", rank - 1);
  em_.append(row, fmt::format("{} {} = kiln_col < {} ? kiln_col : {};", L, last, d_.i64_lit(width),
                              d_.i64_lit(width - 1)));
  em_.bind_var(row, static_cast<int32_t>(rank - 1), last);
  if (Expected<void> w = write_row(row); !w) return std::unexpected(w.error());
  em_.close(row);
  return group_launch(groups);
}

Expected<LaunchShape> RowReduceWriter::write() {
  const auto rv = static_cast<size_t>(st_.row_vars);
  const int64_t rows = row_count(k_, st_);
  const int64_t S = st_.splits;
  const std::string L = d_.i64_type();
  em_.append(em_.root(), fmt::format("{} lid = {};", L, d_.local_id()));
  em_.append(em_.root(), "uint tid = uint(lid);");
  if (cols_ > 1) return write_columns();
  if (S == 1) {
    plan_stages();
    Scope* row = open_group_loop("row", rows);
    if (rv > 0) bind_flat(em_, row, k_.domain, iota_vars(rv), "row");
    if (Expected<void> w = write_stages(row); !w) return std::unexpected(w.error());
    if (Expected<void> w = write_row(row); !w) return std::unexpected(w.error());
    // The next row's staging overwrites what slower threads may still read.
    if (!stages_.empty() && slots_ == 0) em_.append(row, d_.barrier());
    em_.close(row);
    return group_launch(rows);
  }
  shared_ += d_.cuda() ? "  __shared__ uint kiln_last;\n" : "shared uint kiln_last;\n";
  std::vector<ScratchArray> scratch{{"count", "uint", rows, 4}};
  for (size_t j = 0; j < st_.row_reduces.size(); ++j) {
    const DType bt = st_.row_reduces[j]->args[0]->dtype;
    scratch.push_back({fmt::format("part{}", j), d_.scratch_type(bt), rows * S, d_.scratch_bytes(bt)});
    if (is_arg_reduce(st_.row_reduces[j])) scratch.push_back({fmt::format("pidx{}", j), "int", rows * S, 4});
  }
  d_.set_scratch(std::move(scratch));
  Scope* row = open_group_loop("kiln_wg", rows * S);
  em_.append(row, fmt::format("{} kiln_row = kiln_wg / {};", L, d_.i64_lit(S)));
  em_.append(row, fmt::format("{} kiln_part = kiln_wg % {};", L, d_.i64_lit(S)));
  if (rv > 0) bind_flat(em_, row, k_.domain, iota_vars(rv), "kiln_row");
  std::vector<Partial> partials;
  for (const kir::Expr* r : st_.row_reduces) {  // independent of each other (splits_blocker)
    Expected<Partial> res = fold(row, r, "kiln_part");
    if (!res) return std::unexpected(res.error());
    partials.push_back(*res);
  }
  if (Expected<void> w = write_split_tail(row, partials); !w) return std::unexpected(w.error());
  em_.close(row);
  return group_launch(rows * S);
}

}  // namespace

Expected<LaunchShape> write_row_reduce(CExprEmitter& em, const kir::Kernel& k, const Strategy& st,
                                       std::string& shared) {
  return RowReduceWriter(em, k, st, shared).write();
}

}  // namespace kiln::codegen::gpu
