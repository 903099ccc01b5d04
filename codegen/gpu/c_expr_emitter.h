// Kernel-IR expressions -> statements of C-like source text (CUDA C or GLSL), shared by every
// GPU launch strategy. Expressions are emitted into a tree of scopes (loop or if bodies): each
// goes to the deepest scope that binds one of its free variables, so loop-invariant code lands
// before the loop; a scope's text joins its parent's when it closes.
//
// Every loop is opened with its trip count, known when the source is written (shapes and the
// launch shape are static), so the emitter knows how many loop iterations one invocation runs at
// most (loop_iterations): some drivers cut loops short past a budget per invocation (GpuSource).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/check_mode.h"
#include "codegen/gpu/dialect.h"
#include "ir/kernel_ir.h"
#include "kiln/error.h"

namespace kiln::codegen::gpu {

using kir::FreeVars;

// Where loop counts stop: far above any driver's budget, and safe to add and multiply below
// INT64_MAX.
inline constexpr int64_t kManyLoopIterations = int64_t{1} << 60;
// a * b and a + b (both >= 0), saturated at kManyLoopIterations.
int64_t saturating_mul(int64_t a, int64_t b);
int64_t saturating_add(int64_t a, int64_t b);

class CExprEmitter {
 public:
  struct Scope;
  CExprEmitter(const kir::Kernel& k, DialectText& d, CheckMode check, const FreeVars& fv);
  ~CExprEmitter();

  // The outermost scope: expressions with no free variable go here.
  Scope* root() { return root_; }
  // Child scopes, wrapped as `header { ... }` when closed. A loop (`header` a `for`) names the
  // most iterations any invocation runs each time it reaches the loop: a grid-stride loop over n
  // points from a start in [0, stride) runs ceil(n / stride).
  Scope* open_loop(Scope* parent, std::string header, int64_t trips);
  // A loop over one block of a range that its parent loop walks in blocks (codegen/sum_blocks.h):
  // at most `trips` iterations per block, `range` over all the blocks of one walk together.
  Scope* open_block_loop(Scope* blocks, std::string header, int64_t trips, int64_t range);
  Scope* open_if(Scope* parent, std::string header);  // `header`: `if (...)`
  // A bare block `{ ... }`, run as often as its parent: one iteration of a loop written out
  // unrolled, its declarations local to it.
  Scope* open_block(Scope* parent);
  void close(Scope* s);
  std::string take_root_text();

  void bind_var(Scope* s, int32_t var, std::string text);
  // `e` evaluates to `text` (a variable of scope `s`), e.g. a reduction computed cooperatively,
  // until `s` closes; whatever reads `e` is emitted in `s` or deeper.
  void bind_expr(Scope* s, const kir::Expr* e, std::string text);
  // A line of `s` (never a loop: append_loop says how often a loop runs).
  void append(Scope* s, const std::string& line);
  // A line holding one whole loop (no loop inside it) of `trips` iterations.
  void append_loop(Scope* s, const std::string& line, int64_t trips);
  std::string fresh(const std::string& stem);

  // The loops of reduction `e`, outer to inner, opened in `s` with its variables bound. A long
  // float sum runs in blocks (codegen/sum_blocks.h): in the loop over blocks each accumulator of
  // `accs` gets a fresh block accumulator; `steps` names what the body folds into (the block
  // accumulators, or `accs` themselves), and close_reduce_loops adds each block's sums to `accs`.
  struct ReduceLoops {
    std::vector<Scope*> opened;  // outer to inner, the loop over blocks included
    Scope* inner = nullptr;
    Scope* block = nullptr;
    Scope* first_in_block = nullptr;
    std::vector<std::string> steps;
  };
  ReduceLoops open_reduce_loops(const kir::Expr* e, Scope* s, const std::vector<std::string>& accs,
                                const std::string& init);
  // Closes the loops inner to outer, calling `closed` on each after it closes.
  void close_reduce_loops(const ReduceLoops& l, const kir::Expr* e,
                          const std::vector<std::string>& accs,
                          const std::function<void(Scope*)>& closed = {});

  Expected<std::string> emit(const kir::Expr* e);
  Expected<void> emit_store(Scope* s, const kir::Store& st);
  // The scope `e` belongs to.
  Expected<Scope*> scope_for(const kir::Expr* e);
  std::string indent(Scope* s) const;

  DialectText& dialect() { return d_; }
  const FreeVars& free_vars() const { return fv_; }
  CheckMode check() const { return check_; }

  // The most loop iterations one invocation runs, every loop written so far together (the
  // prelude helpers' loops once per call), counted as Mesa's llvmpipe counts them: each time a
  // loop is reached, its iterations plus the pass that finds its condition false. Saturates at
  // kManyLoopIterations.
  int64_t loop_iterations() const { return loop_iterations_; }

 private:
  Scope* open_scope(Scope* parent, std::string header, int64_t runs);
  // Adds `passes` loop passes, and those of the helper calls written since the last count
  // (DialectText::take_helper_loop_iterations) `text_runs` times: both per invocation.
  void count(int64_t passes, int64_t text_runs);
  Expected<std::string> emit_one(const kir::Expr* e);
  Expected<std::string> emit_uncached(const kir::Expr* e, Scope* s);
  Expected<std::string> emit_load(const kir::Expr* e, Scope* s);
  Expected<std::string> emit_reduce(const kir::Expr* e, Scope* s);
  std::string define(Scope* s, DType t, const std::string& value);
  // The deepest scope binding an expression `e` reads (bound_), or nullptr.
  Scope* bound_floor(const kir::Expr* e);
  kiln::Error error(const std::string& what) const;

  const kir::Kernel& k_;
  DialectText& d_;
  CheckMode check_;
  const FreeVars& fv_;
  std::vector<std::unique_ptr<Scope>> scopes_;
  Scope* root_;
  std::unordered_map<int32_t, std::pair<Scope*, std::string>> vars_;
  std::unordered_map<const kir::Expr*, std::pair<Scope*, std::string>> bound_;
  // bound_floor's answers for the current bound_ (cleared whenever bound_ changes).
  std::unordered_map<const kir::Expr*, Scope*> floor_;
  int next_id_ = 0;
  int64_t loop_iterations_ = 0;
};

// ALU op and reduction step text on register values (codegen/gpu/alu_text.cpp).
Expected<std::string> alu_text(DialectText& d, const kir::Expr& e,
                               const std::vector<std::string>& args);
std::string cast_text(DialectText& d, const std::string& v, DType from, DType to);
Expected<std::string> reduce_init_text(DialectText& d, kir::ReduceOp op, DType body);
// The accumulator after folding in `v` (Sum Prod Max Min; not the arg reductions).
std::string reduce_step_text(DialectText& d, kir::ReduceOp op, DType body, const std::string& acc,
                             const std::string& v);
// Whether value `v` replaces accumulator `acc` in an arg reduction (strictly better, or the
// first NaN).
std::string arg_take_text(DialectText& d, kir::ReduceOp op, DType body, const std::string& v,
                          const std::string& acc);

}  // namespace kiln::codegen::gpu
