// The kernel IR: one kernel = buffer parameters, a parallel iteration domain, and stores of a DAG
// of hash-consed scalar expressions (constants, loop variables, loads, ALU ops, reductions,
// scans).
//
// Contract:
// - Parallel loop variables have ids 0..domain.size()-1 and range over [0, domain[k]); an empty
//   domain is a single point. Each Reduce owns further loop variables (ids >= domain.size(),
//   unique within the kernel), ranging over its extents, outer to inner.
// - Index expressions are i64 and give a linear (C-order) element index into a parameter buffer.
//   Loads and stores never see an out-of-range index: lowering guards (pad, concat) with selects.
// - Alu ops have the graph IR's semantics (ir/builder.h) on the expression's dtype, plus IDiv and
//   Mod for index arithmetic on non-negative operands with a positive divisor. For Cast the
//   expression's dtype is the target.
// - Reduce folds its body over its loop nest: Sum (from 0), Prod (1), Max (-inf / lowest),
//   Min (+inf / highest) in the body's dtype (f16 and bf16 accumulate in f32 and round once at
//   the end, on every backend); ArgMax/ArgMin (exactly one variable) give the i32
//   index of the first extreme value; the first NaN wins for both (numpy).
// - Scan (kernel-IR form of cumsum) is a running fold along one parallel variable `var`, which is
//   always the innermost domain axis of a domain of rank >= 2: at a point p it is the fold (Sum,
//   from 0, in the body's dtype; f16 and bf16 in f32, each output rounded once) of its body at
//   every point p' that equals p but for p'[var] <= p[var], in ascending order of p'[var]. So every
//   backend computes it as one accumulator carried along the innermost loop, which runs in order
//   and is never split between threads (the outer axes stay parallel): O(n) work per row, and one
//   summation order on every target and vector width. Reverse and exclusive scans are index remaps
//   that lowering writes (like views): the body reads the operand at n-1-v (and one element back,
//   guarded to 0), the store writes n-1-v. A kernel with a scan holds no reduction and no scan
//   inside a scan's body (ir/verify.cpp). Chosen over a reduction with a variable extent (which
//   backends would have to recognize to avoid O(n^2) work) and over a separate kernel kind (which
//   would duplicate params, stores, printing and verification): a scan is one more interned
//   expression, printed `scan.sum f32 (v1) $3`, whose loop is the kernel's own innermost loop.
// - A selection scan (kernel-IR form of topk_indices) is a Scan with reduce_op ArgMax (largest) or
//   ArgMin (smallest), dtype i64, and one loop variable of its own (rvars {r}, rextents {n}) that
//   its body reads: at step j of `var` it is the r of the j-th element of the order of body(r)
//   over [0, n) (ArgMax: larger first; ArgMin: smaller first; NaN above every number; equal
//   values by ascending r). Backends carry the previous pick (value, r) along the innermost loop
//   and find the next one in one pass over r: O(n) per step, no per-row buffer, comparisons
//   only, so one result on every target and vector width. Printed `scan.argmax i64 (v1; v2<8) $3`.
// - Run-time sizes (kernels with inner dynamic axes, ir/kernel_sizes.h): a kernel may take some
//   of its sizes at run time as slots 0..sizes.size()-1. A Size expression (i64, printed
//   `size.N`) is slot N's value; a float Size (f32 or f64, printed `size.N:f32`) is a float
//   constant taken at run time (a mean's 1/n), its slot's value the bits of a double
//   (std::bit_cast), rounded to the dtype as a constant of that value is; a domain extent, a
//   reduction's extent or a parameter's extent may be a slot too (domain_slots, rslots,
//   Param::shape_slots; -1 or empty: fixed). Such a kernel keeps the values of one instance
//   everywhere (domain, rextents, shapes, and `sizes`, each slot's value), as a dynamic kernel
//   keeps its outer extent, and its identity prints the slots instead. The code a backend makes of
//   it reads every slot at run time, so one compiled kernel serves every instance whose sizes
//   kir::match_sizes finds.
// - Stores run once per point of the parallel domain, in order.
// - Schedule (vector width, unroll, threads) is not here: see codegen/tune_params.h.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/dtype.h"
#include "ir/graph.h"
#include "kiln/shape.h"

namespace kiln::kir {

using ir::DType;

enum class Alu : uint8_t {
#define KILN_ELEMENTWISE(Enum, ...) Enum,
#include "kiln/ops.def"
  IDiv,  // index floor division, operands >= 0, divisor > 0
  Mod,   // index remainder, operands >= 0, divisor > 0
};
std::string_view alu_name(Alu a);
int alu_arity(Alu a);
// Scalar operations per evaluation: the op's cost in kiln/ops.def (IDiv and Mod: 1, as index
// arithmetic by a constant); 4 or more is costly.
int alu_cost(Alu a);
// eq ne lt le gt ge: a bool result of two operands of one dtype (ir::is_comparison).
bool is_comparison(Alu a);

enum class ExprKind : uint8_t { Const, Var, Load, Alu, Reduce, Scan, Size };
enum class ReduceOp : uint8_t { Sum, Prod, Max, Min, ArgMax, ArgMin };
std::string_view reduce_op_name(ReduceOp r);
// The order in which the cpu folds a reduction's innermost loop (docs/graph-format.md), fixed
// where the graph's reduction is lowered so that it does not depend on how a plan reads the terms:
// - loads: as the body's loads step along the loop (in lanes where each moves by one element or
//   not at all, else in order): a matmul's dot product, a reduction kiln builds itself;
// - lanes: the reduced value's innermost axis is the operand's innermost (a row): in lanes,
//   however the body reads its terms (through a permute's strides, or with a loop of its own for
//   an inlined reduction), as the same sum over the operand written to a buffer adds them;
// - in_order: across rows (a column): in order, as over the operand's buffer.
// Printed after the body when not `loads`: `reduce.sum f32 (v1<64>) $3 lanes`.
enum class ReduceOrder : uint8_t { loads, lanes, in_order };
// A graph op's kernel counterpart: the Alu of an elementwise op (nullopt for other kinds), the
// ReduceOp of a reduction.
std::optional<Alu> alu_of(ir::Op op);
std::optional<ir::Op> op_of(Alu a);  // nullopt for IDiv and Mod (index arithmetic only)
ReduceOp reduce_op_of(ir::Reduction r);

struct Expr {
  ExprKind kind;
  DType dtype;
  Alu alu = Alu::Add;              // kind == Alu
  ReduceOp reduce_op = ReduceOp::Sum;  // kind == Reduce
  int32_t var = -1;                    // kind == Var: loop variable id; Scan: the variable scanned
  int32_t buf = -1;                // kind == Load: parameter index
  double fval = 0;                 // kind == Const, floating dtype
  int64_t ival = 0;                // kind == Const, integer or bool dtype; Size: the slot
  std::vector<const Expr*> args = {};  // Alu: operands; Load: {index}; Reduce, Scan: {body}
  std::vector<int32_t> rvars = {};     // Reduce, selection Scan: its loop variables, outer to inner
  std::vector<int64_t> rextents = {};  // Reduce: their extents
  // Reduce: per extent, the run-time size slot it is (-1: fixed); empty: every extent fixed.
  std::vector<int32_t> rslots = {};
  ReduceOrder order = ReduceOrder::loads;  // Reduce
  uint64_t hash = 0;
  uint32_t id = 0;                 // creation order: operands always have smaller ids
};

// Interns expressions; owned by the kernels that use them (shared_ptr). Thread-safe.
class ExprArena {
 public:
  const Expr* constant(DType dtype, double value);  // ints/bool: value converted exactly
  // An integer constant of an integer dtype, exact at every int64 (a double holds 53 bits).
  const Expr* integer(DType dtype, int64_t value);
  const Expr* index(int64_t value) { return integer(DType::i64, value); }
  const Expr* var(int32_t id);  // i64 loop variable
  const Expr* load(int32_t buf, DType dtype, const Expr* index);
  const Expr* alu(Alu op, DType dtype, std::vector<const Expr*> args);
  const Expr* reduce(ReduceOp op, DType dtype, const Expr* body, std::vector<int32_t> rvars,
                     std::vector<int64_t> rextents, std::vector<int32_t> rslots = {},
                     ReduceOrder order = ReduceOrder::loads);
  // Run-time size slot `slot`: i64, or a float slot (f32, f64) whose value is a double's bits.
  const Expr* size(int32_t slot, DType dtype = DType::i64);
  // op: Sum (the only scan so far); `var` a parallel loop variable (the innermost).
  const Expr* scan(ReduceOp op, DType dtype, const Expr* body, int32_t var);
  // A selection scan (op ArgMax or ArgMin, i64): step j of `var` gives the r in [0, n) of the
  // j-th best body(r); `rvar` is its own loop variable.
  const Expr* select_scan(ReduceOp op, const Expr* body, int32_t var, int32_t rvar, int64_t n);

 private:
  const Expr* intern(Expr e);
  struct Hash {
    size_t operator()(const Expr* e) const { return e->hash; }
  };
  struct Eq {
    bool operator()(const Expr* a, const Expr* b) const;
  };
  std::mutex mu_;
  std::deque<Expr> exprs_;
  std::unordered_set<const Expr*, Hash, Eq> interned_;
};

struct Param {
  DType dtype;
  ir::Shape shape;
  bool output = false;  // written by this kernel
  std::string label;    // the graph value it holds, for dumps only (not part of the identity)
  std::vector<int32_t> shape_slots =
      {};  // per axis, its run-time size slot (-1: fixed); empty: none
};

struct Store {
  int32_t buf;
  const Expr* index;
  const Expr* value;
};

struct Kernel {
  std::string name;  // for dumps and symbols only (not part of the identity)
  std::vector<Param> params;
  std::vector<int64_t> domain;
  std::vector<Store> stores;
  std::shared_ptr<ExprArena> arena;
  // A dynamic kernel (DESIGN.md §2 "Shapes", docs/dynamic-shapes.md): its code serves every extent
  // of the outer axis, which it takes at run time, so one compiled kernel serves every size of
  // that axis. Its identity (print_kernel) leaves out domain[0] and the leading extent of every
  // parameter, which index expressions never read (C order: the outermost axis has no stride).
  // The planner sets it where the policy asks for it and the target can serve it
  // (Target::serves_any_outer_extent); the values above stay those of this instance.
  bool dynamic_outer = false;
  // A dynamic kernel of a size bucket (kiln.toml shapes.buckets): the largest outer extent it
  // serves, a power of two (its code may assume no more); 0: any extent.
  int64_t dynamic_bound = 0;

  // Run-time sizes (ir/kernel_sizes.h): this instance's value of each slot, and per domain axis
  // the slot it is (-1: fixed; empty: every axis fixed). Empty `sizes`: a kernel of fixed sizes.
  std::vector<int64_t> sizes;
  std::vector<int32_t> domain_slots;

  int64_t outer_extent() const { return domain.empty() ? 1 : domain[0]; }
  bool has_sizes() const { return !sizes.empty(); }
  int32_t domain_slot(size_t d) const { return d < domain_slots.size() ? domain_slots[d] : -1; }
};

// Per slot of k.sizes, its dtype: a float dtype where a Size expression of that dtype reads it,
// else i64 (an extent, an index).
std::vector<DType> size_dtypes(const Kernel& k);

// Each slot's value in this instance as text, as its dtype: {"8", "0.125"}.
std::vector<std::string> size_values_text(const Kernel& k);

// Whether a run-time size slot may be of dtype t (i64, f32, f64).
bool size_dtype_ok(DType t);

// The canonical text form. Without labels (and name), the text is the kernel's identity: equal
// kernels print byte-identical text, which the cache key hashes.
std::string print_kernel(const Kernel& k, bool with_labels = true);

// Expressions reachable from the stores, operands first, each once (deterministic).
std::vector<const Expr*> kernel_exprs(const Kernel& k);

// One flag per parameter: the kernel stores to it and never loads it (an output whose old
// contents it never reads; the candidates for streaming stores).
std::vector<bool> written_only(const Kernel& k);

// The free loop variables of every expression reachable from the stores (sorted, unique; a
// reduction's own variables are bound inside it): the one analysis every backend and the
// verifier ask "which loop variables does this expression read".
class FreeVars {
 public:
  FreeVars() = default;
  explicit FreeVars(const Kernel& k);
  const std::vector<int32_t>& of(const Expr* e) const { return vars_.at(e); }
  bool uses(const Expr* e, int32_t var) const;

 private:
  std::unordered_map<const Expr*, std::vector<int32_t>> vars_;
};

}  // namespace kiln::kir
