// Kernel IR interning and the canonical text printer.
#include "ir/kernel_ir.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unordered_map>

#include "kiln/error.h"

namespace kiln::kir {

namespace {
constexpr std::string_view kAluNames[] = {
#define KILN_ELEMENTWISE(Enum, name, ...) name,
#include "kiln/ops.def"
    "idiv", "mod"};
constexpr int kAluArity[] = {
#define KILN_ELEMENTWISE(Enum, name, arity, ...) arity,
#include "kiln/ops.def"
    2, 2};
constexpr bool kAluIsComparison[] = {
#define KILN_ELEMENTWISE(Enum, name, arity, dtypes, ...) \
  ir::OpDtypes::dtypes == ir::OpDtypes::Compare,
#include "kiln/ops.def"
    false, false};
constexpr int kAluCost[] = {
#define KILN_ELEMENTWISE(Enum, name, arity, dtypes, cost, ...) cost,
#include "kiln/ops.def"
    1, 1};

inline uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ULL;
  return h ^ (h >> 29);
}
}  // namespace

std::string_view alu_name(Alu a) { return kAluNames[static_cast<int>(a)]; }
int alu_arity(Alu a) { return kAluArity[static_cast<int>(a)]; }
int alu_cost(Alu a) { return kAluCost[static_cast<int>(a)]; }
bool is_comparison(Alu a) { return kAluIsComparison[static_cast<int>(a)]; }

namespace {
constexpr int8_t kAluOfOp[] = {
#define KILN_OP(...) -1,
#define KILN_ELEMENTWISE(Enum, ...) static_cast<int8_t>(Alu::Enum),
#include "kiln/ops.def"
};
}  // namespace

std::optional<ir::Op> op_of(Alu a) {
  static constexpr ir::Op kOps[] = {
#define KILN_ELEMENTWISE(Enum, ...) ir::Op::Enum,
#include "kiln/ops.def"
  };
  const auto i = static_cast<size_t>(a);
  if (i >= std::size(kOps)) return std::nullopt;
  return kOps[i];
}

std::optional<Alu> alu_of(ir::Op op) {
  const int8_t a = kAluOfOp[static_cast<int>(op)];
  if (a < 0) return std::nullopt;
  return static_cast<Alu>(a);
}

ReduceOp reduce_op_of(ir::Reduction r) {
  switch (r) {
    case ir::Reduction::Sum: return ReduceOp::Sum;
    case ir::Reduction::Prod: return ReduceOp::Prod;
    case ir::Reduction::ReduceMax: return ReduceOp::Max;
    case ir::Reduction::ReduceMin: return ReduceOp::Min;
    case ir::Reduction::ArgMax: return ReduceOp::ArgMax;
    case ir::Reduction::ArgMin: return ReduceOp::ArgMin;
  }
  KILN_CHECK(false) << "bad reduction " << static_cast<int>(r);
  return ReduceOp::Sum;
}

std::string_view reduce_op_name(ReduceOp r) {
  switch (r) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Prod: return "prod";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::ArgMax: return "argmax";
    case ReduceOp::ArgMin: return "argmin";
  }
  return "?";
}

bool ExprArena::Eq::operator()(const Expr* a, const Expr* b) const {
  return a->hash == b->hash && a->kind == b->kind && a->dtype == b->dtype && a->alu == b->alu &&
         a->reduce_op == b->reduce_op && a->var == b->var && a->buf == b->buf &&
         std::bit_cast<uint64_t>(a->fval) == std::bit_cast<uint64_t>(b->fval) &&
         a->ival == b->ival && a->args == b->args && a->rvars == b->rvars &&
         a->rextents == b->rextents && a->rslots == b->rslots && a->order == b->order;
}

const Expr* ExprArena::intern(Expr e) {
  uint64_t h = mix(static_cast<uint64_t>(e.kind), static_cast<uint64_t>(e.dtype));
  h = mix(h, static_cast<uint64_t>(e.alu));
  h = mix(h, static_cast<uint64_t>(e.reduce_op));
  h = mix(h, static_cast<uint64_t>(static_cast<int64_t>(e.var)));
  h = mix(h, static_cast<uint64_t>(static_cast<int64_t>(e.buf)));
  h = mix(h, std::bit_cast<uint64_t>(e.fval));
  h = mix(h, static_cast<uint64_t>(e.ival));
  for (const Expr* a : e.args) h = mix(h, a->hash);
  for (int32_t v : e.rvars) h = mix(h, static_cast<uint64_t>(v));
  for (int64_t x : e.rextents) h = mix(h, static_cast<uint64_t>(x));
  for (int32_t x : e.rslots) h = mix(h, static_cast<uint64_t>(static_cast<int64_t>(x)) + 7);
  h = mix(h, static_cast<uint64_t>(e.order));
  e.hash = h;
  std::lock_guard lock(mu_);
  if (auto it = interned_.find(&e); it != interned_.end()) return *it;
  e.id = static_cast<uint32_t>(exprs_.size());
  exprs_.push_back(std::move(e));
  const Expr* p = &exprs_.back();
  interned_.insert(p);
  return p;
}

const Expr* ExprArena::constant(DType dtype, double value) {
  Expr e{.kind = ExprKind::Const, .dtype = dtype};
  // Floats keep their bits (-0.0 is a distinct constant); ints and bool are stored exactly.
  if (ir::is_float(dtype)) e.fval = value;
  else if (dtype == DType::boolean) e.ival = value != 0;
  else e.ival = static_cast<int64_t>(value);
  return intern(std::move(e));
}

const Expr* ExprArena::integer(DType dtype, int64_t value) {
  KILN_CHECK(ir::is_int(dtype)) << "integer constant of " << ir::dtype_name(dtype);
  return intern(Expr{.kind = ExprKind::Const, .dtype = dtype, .ival = value});
}

const Expr* ExprArena::var(int32_t id) {
  return intern(Expr{.kind = ExprKind::Var, .dtype = DType::i64, .var = id});
}

const Expr* ExprArena::load(int32_t buf, DType dtype, const Expr* index) {
  KILN_CHECK(index->dtype == DType::i64) << "load index must be i64";
  return intern(Expr{.kind = ExprKind::Load, .dtype = dtype, .buf = buf, .args = {index}});
}

const Expr* ExprArena::alu(Alu op, DType dtype, std::vector<const Expr*> args) {
  KILN_CHECK(static_cast<int>(args.size()) == alu_arity(op))
      << alu_name(op) << " takes " << alu_arity(op) << " operands, got " << args.size();
  return intern(Expr{.kind = ExprKind::Alu, .dtype = dtype, .alu = op, .args = std::move(args)});
}

const Expr* ExprArena::reduce(ReduceOp op, DType dtype, const Expr* body,
                              std::vector<int32_t> rvars, std::vector<int64_t> rextents,
                              std::vector<int32_t> rslots, ReduceOrder order) {
  KILN_CHECK(rvars.size() == rextents.size() && !rvars.empty()) << "reduce loop variables";
  KILN_CHECK(rslots.empty() || rslots.size() == rextents.size()) << "reduce extent slots";
  if (std::ranges::all_of(rslots, [](int32_t s) { return s < 0; })) rslots.clear();
  KILN_CHECK((op != ReduceOp::ArgMax && op != ReduceOp::ArgMin) || rvars.size() == 1)
      << "argmax/argmin reduce exactly one variable";
  return intern(Expr{.kind = ExprKind::Reduce,
                     .dtype = dtype,
                     .reduce_op = op,
                     .args = {body},
                     .rvars = std::move(rvars),
                     .rextents = std::move(rextents),
                     .rslots = std::move(rslots),
                     .order = order});
}

const Expr* ExprArena::size(int32_t slot, DType dtype) {
  KILN_CHECK(slot >= 0 && size_dtype_ok(dtype))
      << "size slot " << slot << " of " << ir::dtype_name(dtype);
  return intern(Expr{.kind = ExprKind::Size, .dtype = dtype, .ival = slot});
}

bool size_dtype_ok(DType t) {
  return t == DType::i64 || t == DType::f32 || t == DType::f64;
}

std::vector<DType> size_dtypes(const Kernel& k) {
  std::vector<DType> out(k.sizes.size(), DType::i64);
  for (const Expr* e : kernel_exprs(k))
    if (e->kind == ExprKind::Size && e->dtype != DType::i64 && e->ival >= 0 &&
        static_cast<size_t>(e->ival) < out.size())
      out[static_cast<size_t>(e->ival)] = e->dtype;
  return out;
}

std::vector<std::string> size_values_text(const Kernel& k) {
  const std::vector<DType> dtypes = size_dtypes(k);
  std::vector<std::string> out;
  for (size_t s = 0; s < k.sizes.size(); ++s)
    out.push_back(dtypes[s] == DType::i64 ? fmt::format("{}", k.sizes[s])
                                          : fmt::format("{}", std::bit_cast<double>(k.sizes[s])));
  return out;
}

const Expr* ExprArena::scan(ReduceOp op, DType dtype, const Expr* body, int32_t var) {
  KILN_CHECK(op == ReduceOp::Sum) << "scan." << reduce_op_name(op) << ": only sum scans exist";
  KILN_CHECK(var >= 0) << "scan variable v" << var;
  return intern(
      Expr{.kind = ExprKind::Scan, .dtype = dtype, .reduce_op = op, .var = var, .args = {body}});
}

const Expr* ExprArena::select_scan(ReduceOp op, const Expr* body, int32_t var, int32_t rvar,
                                   int64_t n) {
  KILN_CHECK(op == ReduceOp::ArgMax || op == ReduceOp::ArgMin)
      << "scan." << reduce_op_name(op) << ": a selection scan is argmax or argmin";
  KILN_CHECK(var >= 0 && rvar > var && n >= 0) << "selection scan v" << var << "; v" << rvar;
  return intern(Expr{.kind = ExprKind::Scan,
                     .dtype = DType::i64,
                     .reduce_op = op,
                     .var = var,
                     .args = {body},
                     .rvars = {rvar},
                     .rextents = {n}});
}

FreeVars::FreeVars(const Kernel& k) {
  for (const Expr* e : kernel_exprs(k)) {  // operands first
    std::vector<int32_t> vars;
    // A scan's value depends on its position along the scanned variable.
    if (e->kind == ExprKind::Var || e->kind == ExprKind::Scan) vars.push_back(e->var);
    for (const Expr* a : e->args) {
      const auto& av = vars_.at(a);
      vars.insert(vars.end(), av.begin(), av.end());
    }
    if (e->kind == ExprKind::Reduce || e->kind == ExprKind::Scan)  // a selection scan's own r
      std::erase_if(vars, [&](int32_t v) { return std::ranges::count(e->rvars, v) > 0; });
    std::ranges::sort(vars);
    vars.erase(std::unique(vars.begin(), vars.end()), vars.end());
    vars_[e] = std::move(vars);
  }
}

bool FreeVars::uses(const Expr* e, int32_t var) const {
  return std::ranges::binary_search(of(e), var);
}

std::vector<const Expr*> kernel_exprs(const Kernel& k) {
  std::vector<const Expr*> order;
  std::unordered_map<const Expr*, bool> seen;
  // Iterative post-order DFS from each store (index first, then value).
  auto visit = [&](const Expr* root) {
    std::vector<std::pair<const Expr*, size_t>> stack{{root, 0}};
    while (!stack.empty()) {
      auto& [e, next] = stack.back();
      if (next == 0 && seen.count(e)) {
        stack.pop_back();
        continue;
      }
      if (next < e->args.size()) {
        const Expr* child = e->args[next++];
        if (!seen.count(child)) stack.push_back({child, 0});
        continue;
      }
      if (!seen.count(e)) {
        seen[e] = true;
        order.push_back(e);
      }
      stack.pop_back();
    }
  };
  for (const Store& s : k.stores) {
    visit(s.index);
    visit(s.value);
  }
  return order;
}

std::vector<bool> written_only(const Kernel& k) {
  std::vector<bool> stored(k.params.size(), false), loaded(k.params.size(), false);
  for (const Store& st : k.stores)
    if (st.buf >= 0 && static_cast<size_t>(st.buf) < stored.size()) stored[st.buf] = true;
  for (const Expr* e : kernel_exprs(k))
    if (e->kind == ExprKind::Load && e->buf >= 0 && static_cast<size_t>(e->buf) < loaded.size())
      loaded[e->buf] = true;
  for (size_t i = 0; i < stored.size(); ++i) stored[i] = stored[i] && !loaded[i];
  return stored;
}

namespace {
std::string const_text(const Expr* e) {
  if (ir::is_float(e->dtype)) {
    if (std::isinf(e->fval)) return fmt::format("{}inf:{}", e->fval < 0 ? "-" : "", ir::dtype_name(e->dtype));
    if (std::isnan(e->fval)) return fmt::format("nan:{}", ir::dtype_name(e->dtype));
    return fmt::format("{}:{}", e->fval, ir::dtype_name(e->dtype));
  }
  if (e->dtype == DType::i64) return fmt::format("{}", e->ival);
  return fmt::format("{}:{}", e->ival, ir::dtype_name(e->dtype));
}

// size.N (i64) or size.N:f32 (a float slot).
std::string size_text(const Expr* e) {
  if (e->dtype == DType::i64) return fmt::format("size.{}", e->ival);
  return fmt::format("size.{}:{}", e->ival, ir::dtype_name(e->dtype));
}
}  // namespace

namespace {
// A shape as print_kernel shows it: a dynamic kernel's leading extent is `?` (not its identity).
std::string extents_text(const ir::Shape& s, bool dynamic, int64_t bound = 0) {
  if (!dynamic || s.empty()) return ir::shape_str(s);
  std::string out = bound > 0 ? fmt::format("[?<={}", bound) : "[?";
  for (size_t d = 1; d < s.size(); ++d) out += fmt::format(",{}", s[d]);
  return out + "]";
}

// One extent as the identity prints it: a run-time size's slot, or its value.
std::string extent_text(int64_t value, const std::vector<int32_t>& slots, size_t i) {
  if (i < slots.size() && slots[i] >= 0) return fmt::format("size.{}", slots[i]);
  return fmt::format("{}", value);
}

std::string slotted_text(const ir::Shape& s, const std::vector<int32_t>& slots) {
  std::string out = "[";
  for (size_t d = 0; d < s.size(); ++d) out += (d ? "," : "") + extent_text(s[d], slots, d);
  return out + "]";
}

// A dynamic kernel of one axis reads and writes a buffer of as many elements as its domain at the
// domain's index, whatever the buffer's shape: `[?]`, so that an elementwise kernel over [8, s]
// is one kernel for every s, not only for every leading extent.
std::string param_text(const Kernel& k, const Param& p) {
  if (!p.shape_slots.empty()) return slotted_text(p.shape, p.shape_slots);
  if (k.dynamic_outer && k.domain.size() == 1 && ir::shape_numel(p.shape) == k.domain[0]) return "[?]";
  return extents_text(p.shape, k.dynamic_outer);
}
}  // namespace

std::string print_kernel(const Kernel& k, bool with_labels) {
  std::string out = with_labels ? fmt::format("kernel {}\n", k.name) : "kernel\n";
  for (size_t i = 0; i < k.params.size(); ++i) {
    const Param& p = k.params[i];
    out += fmt::format("  param %{} {} {}{}", i, p.output ? "out" : "in", ir::dtype_name(p.dtype),
                       param_text(k, p));
    if (with_labels && !p.label.empty()) out += fmt::format("  # {}", p.label);
    out += "\n";
  }
  out += fmt::format("  domain {}", k.domain_slots.empty()
                                        ? extents_text(k.domain, k.dynamic_outer, k.dynamic_bound)
                                        : slotted_text(k.domain, k.domain_slots));
  // A kernel with run-time sizes: their number is part of the identity, their values are not.
  if (k.has_sizes()) {
    out += fmt::format("  sizes {}", k.sizes.size());
    if (with_labels) out += fmt::format("  # = {}", fmt::join(size_values_text(k), ","));
  }
  // With labels (dumps), a dynamic kernel also shows this instance's extent.
  if (k.dynamic_outer && with_labels && !k.domain.empty()) out += fmt::format("  # ? = {}", k.domain[0]);
  out += "\n";
  std::unordered_map<const Expr*, std::string> names;
  auto ref = [&](const Expr* e) -> std::string {
    if (e->kind == ExprKind::Const) return const_text(e);
    if (e->kind == ExprKind::Var) return fmt::format("v{}", e->var);
    if (e->kind == ExprKind::Size) return size_text(e);
    return names.at(e);
  };
  int next = 0;
  for (const Expr* e : kernel_exprs(k)) {
    if (e->kind == ExprKind::Const || e->kind == ExprKind::Var || e->kind == ExprKind::Size)
      continue;
    std::string name = fmt::format("${}", next++);
    std::string rhs;
    switch (e->kind) {
      case ExprKind::Load:
        rhs = fmt::format("load {} %{}[{}]", ir::dtype_name(e->dtype), e->buf, ref(e->args[0]));
        break;
      case ExprKind::Alu: {
        std::vector<std::string> ops;
        for (const Expr* a : e->args) ops.push_back(ref(a));
        rhs = fmt::format("{} {} {}", alu_name(e->alu), ir::dtype_name(e->dtype),
                          fmt::join(ops, ", "));
        break;
      }
      case ExprKind::Reduce: {
        std::vector<std::string> loops;
        for (size_t i = 0; i < e->rvars.size(); ++i)
          loops.push_back(
              fmt::format("v{}<{}>", e->rvars[i], extent_text(e->rextents[i], e->rslots, i)));
        rhs = fmt::format("reduce.{} {} ({}) {}{}", reduce_op_name(e->reduce_op),
                          ir::dtype_name(e->dtype), fmt::join(loops, ", "), ref(e->args[0]),
                          e->order == ReduceOrder::lanes      ? " lanes"
                          : e->order == ReduceOrder::in_order ? " in order"
                                                              : "");
        break;
      }
      case ExprKind::Scan:
        rhs = e->rvars.empty()
                  ? fmt::format("scan.{} {} (v{}) {}", reduce_op_name(e->reduce_op),
                                ir::dtype_name(e->dtype), e->var, ref(e->args[0]))
                  : fmt::format("scan.{} {} (v{}; v{}<{}) {}", reduce_op_name(e->reduce_op),
                                ir::dtype_name(e->dtype), e->var, e->rvars[0], e->rextents[0],
                                ref(e->args[0]));
        break;
      case ExprKind::Const:
      case ExprKind::Var:  // printed in place (ref), skipped above
      case ExprKind::Size:
        break;
    }
    out += fmt::format("  {} = {}\n", name, rhs);
    names[e] = std::move(name);
  }
  for (const Store& s : k.stores)
    out += fmt::format("  store %{}[{}] {}\n", s.buf, ref(s.index), ref(s.value));
  return out;
}

}  // namespace kiln::kir
