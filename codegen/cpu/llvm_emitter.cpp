// Kernel IR -> LLVM IR for one kernel: loop scopes, expression placement and memoization, loads,
// stores and reduction loop nests.
#include "codegen/cpu/llvm_emitter.h"

#include <fmt/format.h>
#include <algorithm>
#include <bit>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>

#include "codegen/cpu/alu_lowering.h"
#include "codegen/cpu/attention_emitter.h"
#include "codegen/cpu/bounds_checks.h"
#include "codegen/cpu/dtype_lowering.h"
#include "codegen/cpu/matmul_emitter.h"
#include "codegen/cpu/reduce_lowering.h"
#include "codegen/cpu/streaming_stores.h"
#include "codegen/sum_blocks.h"
#include "ir/kernel_analysis.h"
#include "ir/loop_split.h"
#include "ir/post_order.h"
#include "ir/row_reuse.h"

namespace kiln::codegen::cpu {

namespace {

using kir::Expr;
using kir::ExprKind;
using kir::LoopSplit;
using kir::RowReuse;
using llvm::BasicBlock;
using llvm::Value;

// Whether `pred` holds for the body of `reduce` or any expression under it.
bool any_in_body(const Expr* reduce, const std::function<bool(const Expr*)>& pred) {
  std::vector<const Expr*> todo{reduce->args[0]};
  std::unordered_set<const Expr*> seen;
  while (!todo.empty()) {
    const Expr* e = todo.back();
    todo.pop_back();
    if (!seen.insert(e).second) continue;
    if (pred(e)) return true;
    for (const Expr* a : e->args) todo.push_back(a);
  }
  return false;
}

// A loop body (or the function entry, depth 0). Code of this scope is inserted before the
// terminator of `cursor`, which leads on to whatever runs next (an inner loop, the latch). An
// expression lives in the deepest scope among its free variables' scopes, so a value that does not
// depend on an inner loop variable is computed once outside that loop, and a reduction that does
// not depend on the inner parallel axes runs once per outer point, not once per element.
struct Scope {
  Scope* parent = nullptr;
  int depth = 0;
  BasicBlock* cursor = nullptr;
  int loop = -1;        // index into KernelEmitter::loops_, -1 for the entry scope
  Value* iv = nullptr;  // the loop's induction variable (i64)
  std::unordered_map<const Expr*, Value*> memo;
};

struct Loop {
  llvm::BranchInst* latch = nullptr;
  BasicBlock* exit = nullptr;
  bool has_inner_loop = false;
  int64_t max_trips = -1;  // the most iterations it can run, when known
  bool scalar = false;      // kept off the vectorizer (a peeled head)
  bool reduction = false;   // a reduction's loop (its interleave changes its sum's order)
  // A reduction's loop along which every load of its body moves by one element or not at all:
  // one LLVM would vectorize across its iterations (reduces_in_lanes).
  bool in_lanes = false;
  bool over_blocks = false;  // the loop over a reduction's blocks (kept rolled)
};

// Innermost loops that run fewer iterations than this are not vectorized: no vector body could
// be filled, and each vector body and epilogue LLVM adds repeats the whole loop body in the
// object code (thousands of instructions for a large fused kernel over a short axis).
constexpr int64_t kMinVectorTrips = 8;

// A point whose value is a chain of at least kDeepChain dependent operations is bound by their
// latency, not by their count: LLVM interleaves no loop with so large a body, so one chain per
// vector runs at a time. Such kernels' point loops run kDeepChainInterleave vectors at once
// unless the schedule says otherwise (small_ops, 768 dependent operations per point: 9.1 us ->
// 5.4 on one Zen 4 core with 4; on a 2-core Xeon, 4.3-5.7 us with 4 -> 3.2-3.3 with 8 (AVX-512),
// 7.0-7.2 -> 5.1-5.3 (AVX2); 16 spilled: 16 us). A point loop's interleave changes no result.
constexpr int kDeepChain = 64;
constexpr int kDeepChainInterleave = 8;

// Whether the emitter keeps reuse `r`'s row. With run-time sizes, where the row's length is the
// innermost axis's slot: extents equal in the instance analyzed may differ in another.
bool keeps_row(const kir::Kernel& k, const RowReuse& r) {
  if (!k.has_sizes()) return true;
  const int32_t inner = k.domain_slot(k.domain.empty() ? 0 : k.domain.size() - 1);
  return inner >= 0 && !r.reduce->rslots.empty() && r.reduce->rslots[0] == inner;
}

// The longest row of run-time length kept (room for this many values; kMaxRowReuseBytes).
int64_t max_row_values(const Expr* body_value) {
  return kir::kMaxRowReuseBytes / std::max(4, ir::dtype_size(body_value->dtype));
}

// Whether a stored value is a chain of at least kDeepChain dependent operations.
bool has_deep_chain(const kir::Kernel& k) {
  std::unordered_map<const Expr*, int> depth;
  for (const Expr* e : kir::kernel_exprs(k)) {
    int d = 0;
    for (const Expr* a : e->args) d = std::max(d, depth.at(a));
    depth[e] = d + (e->kind == ExprKind::Alu ? 1 : 0);
  }
  return std::ranges::any_of(k.stores, [&](const kir::Store& st) {
    return depth.at(st.value) >= kDeepChain;
  });
}

// chunk_alignment's lanes and interleave where the schedule leaves them to LLVM: AVX-512's f32
// lanes, and the interleave LLVM gives a short loop body. A multiple of what AVX2 and wider
// types take.
constexpr int64_t kChunkLanes = 16;
constexpr int64_t kChunkInterleave = 4;

// Every reduction loop is vectorized to these lanes and accumulators and stays a loop
// (add_loop_metadata), so that a float sum adds in one order on every x86-64 CPU and at every
// tuning: left to LLVM, AVX2 (8 lanes) and AVX-512 (16) summed a row of 1000 f32 in different
// orders (up to 2.3e-5 apart), and so did two tunings of one kernel (vector_width, unroll). The
// lanes are AVX-512's; AVX2 runs each as two registers. A loop unrolled whole would be one set of
// loads to LLVM, which keeps them in registers from one pass over a row to the next: a 1024-wide
// f32 row is 64 AVX-512 vectors, so half of them were spilled and reloaded (layernorm on 2 Xeon
// threads, 8192 x 1024: 1.37-1.41 ms unrolled, 1.25-1.29 rolled, as a hand-written AVX-512
// loop).
constexpr int kReductionLanes = 16;
constexpr int kReductionInterleave = 4;

// A cache line: where a streaming output's vector stores start (streaming_stores.h).
constexpr int64_t kLineBytes = 64;
// Iterations of a row-filling reduction per block that prefetches the next row (a 512-byte f32
// block: 8 lines). Prefetching at all took 2 cores streaming softmax's 4096 x 4096 rows from 7.2
// ms to 5.6 in a C model (in blocks of 256). Each block starts with its prefetches, a burst
// of 8 lines per buffer: a core tracks only 10-12 misses at once, so a longer burst holds the loads
// behind it until lines arrive. Softmax 4096 x 4096 on 2 Cascade Lake cores (36 MiB L3), its object
// code timed alone: 8.32-8.48 ms in blocks of 256 (16 + 16 lines a burst), 7.75-7.83 in blocks of
// 128, 7.76-7.86 in blocks of 64 (whose sums cost more: 0.70 ns an element on one core held in L2,
// against 0.63 and 0.66).
constexpr int64_t kPrefetchBlock = 128;
// The longest row of a reduction's terms computed ahead of the loop that folds them in lanes
// (emit_reduce's `staged`), on the stack: a float sum's block of kPrefetchBlock terms always fits;
// a max, min or product over a longer row (more than 1024 f64 terms) folds as its loads step.
constexpr int64_t kMaxStagedBytes = 8 * 1024;
// Rows shorter than this are not prefetched (a row of 2 KiB or less is read ahead by the hardware
// well enough).
constexpr int64_t kMinPrefetchRow = 512;
// The prefetch's locality hint: 2 (prefetcht1, into L2), not 3 (prefetcht0, into L1), where the
// next row's 16 lines displaced the current row, its kept copy and the output row. On a Zen 4
// (AVX-512, 32 MiB L3), one core, softmax over 2048 rows held in L3: rows of 1024 0.87-0.91 ms ->
// 0.79-0.82, rows of 999 1.09-1.13 -> 1.01-1.02; 2 cores streaming 4096 x 4096 from memory:
// 3.68-4.25 ms -> 3.46-3.73.
constexpr int kPrefetchLocality = 2;

class KernelEmitter {
 public:
  KernelEmitter(const kir::Kernel& k, const EmitOptions& opt, llvm::Module& m)
      : k_(k), opt_(opt), m_(m), ctx_(m.getContext()), b_(ctx_), free_vars_(k) {}

  Expected<llvm::Function*> run();

 private:
  Expected<void> check_kernel() const;
  void create_function();
  // max_trips: the most iterations, when start and end are not both constants.
  Scope* open_loop(Scope* parent, Value* start, Value* end, const std::string& name,
                   int64_t max_trips = -1);
  Expected<Scope*> scope_for(const Expr* e);
  void insert_at(Scope* s) { b_.SetInsertPoint(s->cursor->getTerminator()); }
  // The value of `e`. Its operands are emitted first, in post-order on an explicit stack, so the
  // recursion in emit_one is one level deep whatever the expression's depth.
  Expected<Value*> emit(const Expr* e);
  Expected<Value*> emit_one(const Expr* e);
  // The operands emit_one(e) emits (not a reduction's body: that runs inside its loops).
  void operands(const Expr* e, std::vector<const Expr*>& out) const;
  bool emitted(const Expr* e);
  Expected<Value*> emit_uncached(const Expr* e, Scope* s);
  Expected<Value*> emit_load(const Expr* e, Scope* s);
  Expected<Value*> emit_reduce(const Expr* e, Scope* s);
  std::vector<int32_t> next_row_inputs(const Expr* reduce) const;
  std::vector<int32_t> row_outputs() const;
  void prefetch_row(const std::vector<int32_t>& bufs, Value* column, int64_t ahead, bool write);
  Expected<Value*> emit_scan(const Expr* e, Scope* s);
  Expected<Value*> emit_select_scan(const Expr* e, Scope* s);
  // Before the innermost loop of each row: every scan's accumulator starts at 0.
  void init_scans(Scope* row);
  Expected<void> emit_store(const kir::Store& st, Scope* s);
  // The operand of a `where` stored at the index it loads an input at (1 or 2), if any: where the
  // output is written over that input, the points that select it need no store.
  std::optional<size_t> kept_operand(const kir::Store& st) const;
  // Streaming stores (streaming_stores.h): the store whose address the innermost loop's vector
  // body is aligned for, or null.
  const kir::Store* aligned_store() const;
  // The innermost loop's first point at or after `lo` (before `hi`) where `st` stores to a
  // 64-byte-aligned address, emitted in `s` (the scope around the loop).
  Expected<Value*> aligned_start(const kir::Store& st, Scope* s, Value* lo, Value* hi);
  // Checked kernels only: the loaded value or nothing (store) for an out-of-range index.
  Value* emit_checked_load(const Expr* e, Value* index, Scope* s);
  void emit_checked_store(const kir::Store& st, Value* index, Value* value, Scope* s);
  BasicBlock* branch_if(Scope* s, Value* cond, const char* name);
  void report(Scope* s, Value* oob, kiln::codegen::CheckAccessKind kind, int32_t buf, Value* index);
  int64_t length(int32_t buf) const { return ir::shape_numel(k_.params[buf].shape); }
  void add_loop_metadata();
  bool deep_chain() const;
  bool reduces_in_lanes(const Expr* reduce, int32_t var) const;
  bool body_loops_along(const Expr* reduce, int32_t var) const;
  bool is_short(const Loop& loop) const;
  bool reduces_in_fixed_lanes(const Loop& loop) const;
  llvm::AllocaInst* entry_alloca(llvm::Type* ty);
  // Run-time sizes (ir/kernel_sizes.h): slot `slot`'s value, read in the entry block; an extent
  // as a value (its slot's, or the constant) and the most iterations known of it (-1: none).
  Value* size_value(int32_t slot) const { return sizes_.at(static_cast<size_t>(slot)); }
  Value* extent(int64_t value, const std::vector<int32_t>& slots, size_t i) {
    return i < slots.size() && slots[i] >= 0 ? size_value(slots[i]) : b_.getInt64(value);
  }
  // The blocks of `block` iterations in `end` (non-negative): the whole ones, or with a partial
  // last one.
  Value* blocks_of(Value* end, int64_t block, bool partial) {
    if (partial) end = b_.CreateAdd(end, b_.getInt64(block - 1));
    return b_.CreateUDiv(end, b_.getInt64(block));
  }
  int64_t known_trips(int64_t value, const std::vector<int32_t>& slots, size_t i) const {
    return i < slots.size() && slots[i] >= 0 ? -1 : value;
  }
  kiln::Error error(const std::string& what) const {
    return kiln::Error{fmt::format("cpu backend: kernel '{}': {}", k_.name, what)};
  }

  const kir::Kernel& k_;
  const EmitOptions& opt_;
  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  const kir::FreeVars free_vars_;
  llvm::Function* fn_ = nullptr;
  std::vector<Value*> buffers_;
  Value* check_slot_ = nullptr;  // CheckMode::validate: the error slot after the parameters
  std::vector<Value*> sizes_;    // run-time sizes: slot -> its value this launch (as its dtype)
  std::unordered_map<int32_t, Scope*> var_scope_;
  std::unordered_map<int32_t, Value*> var_value_;
  std::vector<std::unique_ptr<Scope>> scopes_;
  std::vector<Loop> loops_;
  // Row reuse (row_reuse.h): R's loop stores F's values in a row (allocated when R is emitted);
  // E is then read from the row at the innermost parallel variable.
  std::unordered_map<const Expr*, std::vector<const Expr*>> row_fills_;  // R -> its Fs
  std::unordered_map<const Expr*, const RowReuse*> row_reads_;           // E -> its reuse
  std::unordered_map<const Expr*, llvm::AllocaInst*> rows_;              // F -> its row
  // Scan -> its running accumulator (register type, promoted to a phi by mem2reg), carried along
  // the innermost loop (all of its pieces, in order).
  std::unordered_map<const Expr*, llvm::AllocaInst*> scan_accs_;
  // Selection scan -> the previous pick's value (scan_accs_ holds its index, -1 before the first).
  std::unordered_map<const Expr*, llvm::AllocaInst*> scan_prev_values_;
  std::vector<const Expr*> scans_;  // in kernel_exprs order
  // Wrap-around indices and steps (the facts' loop cuts): the innermost loop runs as pieces;
  // piece_lo_ is where the piece being emitted starts.
  int64_t piece_lo_ = 0;
  // The reductions being emitted a run of blocks at a time inside one piece of their variable
  // (the facts' reduction cuts), each with where its piece starts.
  std::vector<std::pair<const kir::LoopSplit*, int64_t>> reduce_pieces_;
  // The argument a step takes here (its truth, for a comparison), or nullopt where `e` is no step
  // of a loop emitted in pieces.
  std::optional<int> step_arm(const Expr* e) const;
};

std::optional<int> KernelEmitter::step_arm(const Expr* e) const {
  if (opt_.facts->loop_split.steps.count(e)) return kir::step_at(e, piece_lo_);
  for (const auto& [split, lo] : reduce_pieces_)
    if (split->steps.count(e)) return kir::step_at(e, lo);
  return std::nullopt;
}

Expected<void> KernelEmitter::check_kernel() const {
  auto bad_buf = [&](int32_t buf) {
    return buf < 0 || buf >= static_cast<int32_t>(k_.params.size());
  };
  for (const kir::Store& st : k_.stores) {
    if (bad_buf(st.buf))
      return std::unexpected(
          error(fmt::format("store to parameter %{} of {}", st.buf, k_.params.size())));
    if (st.value->dtype != k_.params[st.buf].dtype)
      return std::unexpected(error(fmt::format(
          "store of a {} value into %{}, a {} buffer (expected equal dtypes)",
          ir::dtype_name(st.value->dtype), st.buf, ir::dtype_name(k_.params[st.buf].dtype))));
  }
  for (const Expr* e : kir::kernel_exprs(k_)) {
    if (e->kind != ExprKind::Load) continue;
    if (bad_buf(e->buf))
      return std::unexpected(
          error(fmt::format("load from parameter %{} of {}", e->buf, k_.params.size())));
    if (e->dtype != k_.params[e->buf].dtype)
      return std::unexpected(error(
          fmt::format("load of {} from %{}, a {} buffer (expected equal dtypes)",
                      ir::dtype_name(e->dtype), e->buf, ir::dtype_name(k_.params[e->buf].dtype))));
  }
  for (int64_t d : k_.domain)
    if (d < 0) return std::unexpected(error(fmt::format("negative domain extent {}", d)));
  return {};
}

void KernelEmitter::create_function() {
  llvm::Type* ptr = b_.getPtrTy();
  fn_ = create_kernel_function(m_, opt_);
  BasicBlock* entry = BasicBlock::Create(ctx_, "entry", fn_);
  b_.SetInsertPoint(entry);
  b_.CreateRetVoid();
  auto root = std::make_unique<Scope>();
  root->cursor = entry;
  scopes_.push_back(std::move(root));
  insert_at(scopes_[0].get());
  buffers_ = load_buffer_pointers(b_, fn_, k_.params.size());
  if (opt_.check == CheckMode::validate)
    check_slot_ = b_.CreateLoad(
        ptr, b_.CreateConstInBoundsGEP1_64(ptr, fn_->getArg(0), k_.params.size()), "check_slot");
  // Run-time sizes: an array of i64, one per slot, after the parameters (never with the check
  // slot: serves_any_sizes takes unchecked code only).
  sizes_ = load_size_values(b_, fn_, k_);
}

// Builds `for (i = start; i < end; ++i)` before the terminator of parent's cursor. The parent
// keeps inserting before the loop (its values must dominate the body); the caller moves the
// parent's cursor to the loop's exit when code after the loop needs the loop's results.
Scope* KernelEmitter::open_loop(Scope* parent, Value* start, Value* end, const std::string& name,
                                int64_t max_trips) {
  const auto* first = llvm::dyn_cast<llvm::ConstantInt>(start);
  const auto* bound = llvm::dyn_cast<llvm::ConstantInt>(end);
  if (max_trips < 0 && first && bound)
    max_trips = std::max<int64_t>(0, bound->getSExtValue() - first->getSExtValue());
  BasicBlock* pre = parent->cursor;
  BasicBlock* exit = pre->splitBasicBlock(pre->getTerminator(), name + ".exit");
  pre->getTerminator()->eraseFromParent();
  BasicBlock* header = BasicBlock::Create(ctx_, name + ".header", fn_, exit);
  BasicBlock* body = BasicBlock::Create(ctx_, name + ".body", fn_, exit);
  BasicBlock* latch = BasicBlock::Create(ctx_, name + ".latch", fn_, exit);
  b_.SetInsertPoint(pre);
  b_.CreateBr(header);
  b_.SetInsertPoint(header);
  llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2, name);
  i->addIncoming(start, pre);
  b_.CreateCondBr(b_.CreateICmpSLT(i, end), body, exit);
  b_.SetInsertPoint(body);
  b_.CreateBr(latch);
  b_.SetInsertPoint(latch);
  Value* next = b_.CreateAdd(i, b_.getInt64(1), name + ".next", /*HasNUW=*/false, /*HasNSW=*/true);
  llvm::BranchInst* back = b_.CreateBr(header);
  i->addIncoming(next, latch);
  if (parent->loop >= 0) loops_[parent->loop].has_inner_loop = true;
  loops_.push_back(Loop{back, exit, false, max_trips});
  auto child = std::make_unique<Scope>();
  child->parent = parent;
  child->depth = parent->depth + 1;
  child->cursor = body;
  child->loop = static_cast<int>(loops_.size()) - 1;
  child->iv = i;
  scopes_.push_back(std::move(child));
  return scopes_.back().get();
}

Expected<Scope*> KernelEmitter::scope_for(const Expr* e) {
  Scope* best = scopes_[0].get();
  for (int32_t v : opt_.facts->free_vars.of(e)) {
    auto it = var_scope_.find(v);
    if (it == var_scope_.end())
      return std::unexpected(error(fmt::format("loop variable v{} is used outside its loop", v)));
    if (it->second->depth > best->depth) best = it->second;
  }
  return best;
}

void KernelEmitter::operands(const Expr* e, std::vector<const Expr*>& out) const {
  out.clear();
  if (auto reuse = row_reads_.find(e); reuse != row_reads_.end()) {
    out.push_back(reuse->second->reduce);
    return;
  }
  switch (e->kind) {
    case ExprKind::Const:
    case ExprKind::Var:
    case ExprKind::Size:
    case ExprKind::Reduce:
      return;
    case ExprKind::Scan:  // its body runs once per step, in the scan's own (innermost) scope
      if (e->rvars.empty()) out.push_back(e->args[0]);  // a selection's runs inside its own loop
      return;
    case ExprKind::Load:
      out.push_back(e->args[0]);
      return;
    case ExprKind::Alu:
      if (auto w = opt_.facts->loop_split.wraps.find(e); w != opt_.facts->loop_split.wraps.end()) {
        if (e->alu != kir::Alu::IDiv) out.push_back(e->args[0]);
        return;
      }
      if (const std::optional<int> arm = step_arm(e)) {  // the arm taken; a truth is constant
        if (!kir::step_is_truth(e)) out.push_back(e->args[*arm]);
        return;
      }
      out.assign(e->args.begin(), e->args.end());
      return;
  }
}

bool KernelEmitter::emitted(const Expr* e) {
  Expected<Scope*> s = scope_for(e);
  return s && (*s)->memo.count(e) > 0;
}

Expected<Value*> KernelEmitter::emit(const Expr* root) {
  return ir::post_order(
      root, [&](const Expr* e, std::vector<const Expr*>& out) { operands(e, out); },
      [&](const Expr* e) { return emitted(e); }, [&](const Expr* e) { return emit_one(e); });
}

Expected<Value*> KernelEmitter::emit_one(const Expr* e) {
  Expected<Scope*> s = scope_for(e);
  if (!s) return std::unexpected(s.error());
  if (auto it = (*s)->memo.find(e); it != (*s)->memo.end()) return it->second;
  if (auto reuse = row_reads_.find(e); reuse != row_reads_.end()) {
    // R runs first (in its own, outer scope), filling the row that E is read from.
    if (Expected<Value*> r = emit(reuse->second->reduce); !r) return r;
    llvm::AllocaInst* row = rows_.at(reuse->second->body_value);
    insert_at(*s);
    Value* at = b_.CreateInBoundsGEP(
        row->getAllocatedType(), row,
        {b_.getInt64(0), var_value_.at(static_cast<int32_t>(k_.domain.size()) - 1)});
    Value* v = b_.CreateLoad(row->getAllocatedType()->getArrayElementType(), at);
    (*s)->memo[e] = v;
    return v;
  }
  Expected<Value*> v = emit_uncached(e, *s);
  if (v) (*s)->memo[e] = *v;
  return v;
}

Expected<Value*> KernelEmitter::emit_uncached(const Expr* e, Scope* s) {
  switch (e->kind) {
    case ExprKind::Const:
      return register_constant(ctx_, e->dtype, e->fval, e->ival);
    case ExprKind::Var:
      return var_value_.at(e->var);
    case ExprKind::Size:  // i64, or a float slot as its dtype (the prologue converts it)
      return size_value(static_cast<int32_t>(e->ival));
    case ExprKind::Load:
      return emit_load(e, s);
    case ExprKind::Reduce:
      return emit_reduce(e, s);
    case ExprKind::Scan:
      return emit_scan(e, s);
    case ExprKind::Alu: {
      if (auto w = opt_.facts->loop_split.wraps.find(e); w != opt_.facts->loop_split.wraps.end()) {
        const int64_t q = kir::wrap_quotient(w->second, piece_lo_);
        if (e->alu == kir::Alu::IDiv) return b_.getInt64(q);
        Expected<Value*> a = emit(e->args[0]);
        if (!a) return a;
        insert_at(s);
        return b_.CreateSub(*a, b_.getInt64(q * w->second.n), "", /*HasNUW=*/false,
                            /*HasNSW=*/true);
      }
      if (const std::optional<int> arm = step_arm(e)) {
        if (kir::step_is_truth(e)) return register_constant(ctx_, e->dtype, *arm, *arm);
        return emit(e->args[*arm]);
      }
      std::vector<Value*> args;
      for (const Expr* a : e->args) {
        Expected<Value*> v = emit(a);
        if (!v) return v;
        args.push_back(*v);
      }
      insert_at(s);  // after the operands: emitting them may have moved this scope's cursor
      Expected<Value*> r = emit_alu(b_, *e, args);
      if (!r) return std::unexpected(error(r.error().message));
      return r;
    }
  }
  return std::unexpected(error("unknown expression kind"));
}

Expected<Value*> KernelEmitter::emit_load(const Expr* e, Scope* s) {
  Expected<Value*> index = emit(e->args[0]);
  if (!index) return index;
  insert_at(s);
  if (opt_.check != CheckMode::none) return emit_checked_load(e, *index, s);
  llvm::Type* mt = memory_type(ctx_, e->dtype);
  Value* p = b_.CreateInBoundsGEP(mt, buffers_[e->buf], *index);
  return from_memory(b_, b_.CreateLoad(mt, p), e->dtype);
}

// Splits s's cursor at its insertion point into `if (cond) { <returned block> }` followed by the
// rest; the caller fills the returned block (insertion point set before its branch), s continues
// after the join. Values of s emitted before still dominate everything after.
BasicBlock* KernelEmitter::branch_if(Scope* s, Value* cond, const char* name) {
  insert_at(s);
  BasicBlock* cur = s->cursor;
  BasicBlock* join = cur->splitBasicBlock(cur->getTerminator(), fmt::format("{}.join", name));
  cur->getTerminator()->eraseFromParent();
  BasicBlock* then = BasicBlock::Create(ctx_, name, fn_, join);
  b_.SetInsertPoint(cur);
  b_.CreateCondBr(cond, then, join);
  b_.SetInsertPoint(then);
  b_.SetInsertPoint(b_.CreateBr(join));
  s->cursor = join;
  return then;
}

void KernelEmitter::report(Scope* s, Value* oob, kiln::codegen::CheckAccessKind kind, int32_t buf,
                           Value* index) {
  branch_if(s, oob, "check.fail");
  b_.CreateCall(check_report_function(m_),
                {check_slot_, b_.getInt64(kind), b_.getInt64(buf), index});
  insert_at(s);
}

Value* KernelEmitter::emit_checked_load(const Expr* e, Value* index, Scope* s) {
  const int64_t n = length(e->buf);
  Value* zero = register_constant(ctx_, e->dtype, 0, 0);
  if (opt_.check == CheckMode::enforce && n == 0) return zero;  // nothing to clamp into
  llvm::Type* mt = memory_type(ctx_, e->dtype);
  if (opt_.check == CheckMode::enforce) {
    Value* p = b_.CreateInBoundsGEP(mt, buffers_[e->buf], clamp_index(b_, index, n));
    return from_memory(b_, b_.CreateLoad(mt, p), e->dtype);
  }
  Value* oob = n == 0 ? b_.getTrue() : index_out_of_range(b_, index, n);
  report(s, oob, kCheckLoad, e->buf, index);
  if (n == 0) return zero;
  Value* safe = b_.CreateSelect(oob, b_.getInt64(0), index);
  Value* v = from_memory(b_, b_.CreateLoad(mt, b_.CreateInBoundsGEP(mt, buffers_[e->buf], safe)),
                         e->dtype);
  return b_.CreateSelect(oob, zero, v);
}

void KernelEmitter::emit_checked_store(const kir::Store& st, Value* index, Value* value,
                                       Scope* s) {
  const int64_t n = length(st.buf);
  const ir::DType t = k_.params[st.buf].dtype;
  llvm::Type* mt = memory_type(ctx_, t);
  if (opt_.check == CheckMode::enforce) {
    if (n == 0) return;  // no element to clamp into: the store is dropped
    Value* p = b_.CreateInBoundsGEP(mt, buffers_[st.buf], clamp_index(b_, index, n));
    b_.CreateStore(to_memory(b_, value, t), p);
    return;
  }
  Value* oob = n == 0 ? b_.getTrue() : index_out_of_range(b_, index, n);
  report(s, oob, kCheckStore, st.buf, index);
  if (n == 0) return;
  branch_if(s, b_.CreateNot(oob), "check.store");
  b_.CreateStore(to_memory(b_, value, t), b_.CreateInBoundsGEP(mt, buffers_[st.buf], index));
  insert_at(s);
}

llvm::AllocaInst* KernelEmitter::entry_alloca(llvm::Type* ty) {
  llvm::IRBuilder<> eb(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
  return eb.CreateAlloca(ty);
}

// Blocks [first, last) of a reduction's loop in blocks of `block` iterations: inside one piece
// of `cuts` (piece_lo its start) or across a cut (piece_lo -1); `whole` when each block runs all
// `block` iterations (not the partial last one).
struct BlockRun {
  int64_t first = 0, last = 0;
  int64_t piece_lo = -1;
  bool whole = true;
};

std::vector<BlockRun> block_runs(const kir::LoopSplit& cuts, int64_t extent, int64_t block) {
  std::vector<BlockRun> runs;
  for (int64_t b = 0; b * block < extent; ++b) {
    const int64_t lo = b * block, hi = std::min(lo + block, extent);
    int64_t piece_lo = -1;
    for (size_t i = 0; i + 1 < cuts.bounds.size(); ++i)
      if (cuts.bounds[i] <= lo && hi <= cuts.bounds[i + 1]) piece_lo = cuts.bounds[i];
    const bool whole = hi - lo == block;
    if (!runs.empty() && runs.back().piece_lo == piece_lo && runs.back().whole == whole)
      runs.back().last = b + 1;
    else
      runs.push_back({b, b + 1, piece_lo, whole});
  }
  return runs;
}

// The accumulator lives in allocas (promoted to phis by mem2reg); the loop nest is built at the
// reduction's own scope, one loop per reduce variable, outer to inner.
Expected<Value*> KernelEmitter::emit_reduce(const Expr* e, Scope* s) {
  const ir::DType bt = e->args[0]->dtype;
  const bool is_arg =
      e->reduce_op == kir::ReduceOp::ArgMax || e->reduce_op == kir::ReduceOp::ArgMin;
  Expected<llvm::Constant*> init = reduce_init(ctx_, e->reduce_op, bt);
  if (!init) return std::unexpected(error(init.error().message));
  llvm::Type* body_ty = register_type(ctx_, bt);
  llvm::AllocaInst* acc = entry_alloca(body_ty);
  llvm::AllocaInst* idx = is_arg ? entry_alloca(b_.getInt32Ty()) : nullptr;
  // A long float sum folds blocks (codegen/sum_blocks.h): `acc` sums one block, `total` (f64) the
  // blocks' sums.
  const bool float_sum = e->reduce_op == kir::ReduceOp::Sum && ir::is_float(bt);
  SumBlocks blocks = float_sum ? sum_blocks(e->rextents) : SumBlocks{};
  // A run-time extent (the outermost, serves_any_sizes): blocks along it of as many terms as
  // sum_blocks gives at a size that needs them. At a size that needs none, the code's one block
  // gives the one accumulator's sum exactly (widened to f64 and back).
  const bool run_time = !e->rslots.empty();
  if (float_sum && run_time) blocks = SumBlocks{0, sum_blocks_along_first(e->rextents)};
  // The innermost loop's order (kir::ReduceOrder): in lanes where the graph's reduction folds a
  // row, whether or not the body reads its terms in lanes. Where it does not (its loads step
  // otherwise, through a permute's strides; or it runs a loop of its own along the loop, an
  // inlined reduction's), the body's values are computed into a row first (`staged`, a block's
  // worth) and the loop folds the row: a sliding max summed over 64 terms was summed in order, 1
  // ulp from the same sum over the maxima written to a buffer (RandomGraphFuzz seed 20261792).
  const size_t last = e->rvars.size() - 1;
  const int32_t last_var = e->rvars[last];
  const bool loads_in_lanes = reduces_in_lanes(e, last_var);
  const bool body_lanes = loads_in_lanes && !body_loops_along(e, last_var);
  const bool stage = e->order == kir::ReduceOrder::lanes && !body_lanes;
  const bool last_in_lanes = e->order == kir::ReduceOrder::lanes      ? body_lanes || stage
                             : e->order == kir::ReduceOrder::in_order ? false
                                                                      : loads_in_lanes;
  // A sum along one axis in lanes of more than kPrefetchBlock terms (or of a run-time number)
  // folds in blocks of kPrefetchBlock, whether or not it fills a reused row: a row kernel sums in
  // those blocks to prefetch between them, and the sum's value must not depend on it (a softmax
  // over rows of 2048 fused into one kernel and the same ops one kernel each were 1 ulp apart in
  // 790 of 2048 rows). The loop over blocks stays rolled (add_loop_metadata); the folds cost no
  // measurable time where the data is in L2 (sums of 256 rows of 1024 f32, medians of 3000 runs
  // on one AVX-512 EPYC core: 13-14 us before, 12-13 after; rows of 300: 22-27 us, 27).
  const bool lane_blocks = float_sum && e->rvars.size() == 1 &&
                           (run_time || e->rextents[0] > kPrefetchBlock) && last_in_lanes;
  if (lane_blocks) blocks = SumBlocks{0, kPrefetchBlock};
  // A reduction that fills a reused row (row_reuse.h) runs in blocks that prefetch the next
  // row's inputs: the row's later passes compute from the kept row and read no memory, so
  // without it the next row's read waits until they end (prefetch_row).
  const std::vector<int32_t> prefetched = row_fills_.count(e) && (!float_sum || lane_blocks)
                                              ? next_row_inputs(e)
                                              : std::vector<int32_t>{};
  if (!prefetched.empty()) blocks = SumBlocks{0, kPrefetchBlock};
  const std::vector<int32_t> written = prefetched.empty() ? std::vector<int32_t>{} : row_outputs();
  int64_t staged = 0;  // the staged row's length (0: none)
  if (stage) {
    const int64_t length = blocks.level == static_cast<int>(last)
                               ? blocks.block
                               : known_trips(e->rextents[last], e->rslots, last);
    if (length >= kMinVectorTrips && length * 8 <= kMaxStagedBytes) staged = length;
  }
  llvm::AllocaInst* staged_row = nullptr;
  llvm::AllocaInst* total =
      blocks.level >= 0 && float_sum ? entry_alloca(b_.getDoubleTy()) : nullptr;
  insert_at(s);
  if (total)
    b_.CreateStore(llvm::ConstantFP::get(b_.getDoubleTy(), 0.0), total);
  else
    b_.CreateStore(*init, acc);
  if (idx) b_.CreateStore(b_.getInt32(0), idx);
  // The values of a reused row (row_reuse.h) at `loop`'s variable (the reduction's, its loop's or
  // the staged row's fill loop's), stored into their rows.
  auto fill_rows = [&](Scope* loop) -> Expected<void> {
    auto fills = row_fills_.find(e);
    if (fills == row_fills_.end()) return {};
    for (const Expr* f : fills->second) {
      Expected<Value*> fv = emit(f);
      if (!fv) return std::unexpected(fv.error());
      llvm::AllocaInst*& row = rows_[f];
      // A run-time row length: room for the longest row kept (serves_sizes_instance: an
      // instance whose row is longer keeps its own code, which keeps no row). Both nests of
      // a split reduction fill the same row.
      const auto length =
          static_cast<uint64_t>(e->rslots.empty() ? e->rextents[0] : max_row_values(f));
      if (!row) row = entry_alloca(llvm::ArrayType::get((*fv)->getType(), length));
      insert_at(loop);
      b_.CreateStore(
          *fv, b_.CreateInBoundsGEP(row->getAllocatedType(), row, {b_.getInt64(0), loop->iv}));
    }
    return {};
  };
  // The loop nest under `s` over blocks [first_block, last_block) when blocks.level >= 0; a
  // block of `whole` runs blocks.block iterations (the constant trip count lets LLVM vectorize
  // it with no run-time checks or epilogue), else it ends at the extent. Returns its outermost
  // loop.
  auto emit_nest = [&](Value* first_block, Value* last_block, bool whole) -> Expected<Scope*> {
    std::vector<Scope*> opened;
    Value* staged_value = nullptr;  // the staged row's value at the reduction's variable
    Scope* inner = s;
    Scope* block_scope = nullptr;  // the loop over blocks
    Scope* first_in_block = nullptr;
    for (size_t r = 0; r < e->rvars.size(); ++r) {
      if (known_trips(e->rextents[r], e->rslots, r) == 1 && !row_fills_.count(e)) {
        // An axis of one element opens no loop: its variable is 0 where the reduction is, so a
        // sum over it reads as the one step it is, and a loop around it stays the innermost one
        // (summed in lanes as that loop would be over a buffer holding this axis's value).
        // sum_blocks never blocks such an axis (the block level's extent exceeds one).
        var_scope_[e->rvars[r]] = inner;
        var_value_[e->rvars[r]] = b_.getInt64(0);
        continue;
      }
      Value* start = b_.getInt64(0);
      Value* end = extent(e->rextents[r], e->rslots, r);
      if (static_cast<int>(r) == blocks.level) {
        block_scope =
            open_loop(inner, first_block ? first_block : b_.getInt64(0),
                      last_block ? last_block : blocks_of(end, blocks.block, /*partial=*/true),
                      fmt::format("r{}.block", e->rvars[r]));
        loops_[block_scope->loop].over_blocks = true;
        opened.push_back(block_scope);
        insert_at(block_scope);
        if (total) b_.CreateStore(*init, acc);
        start = b_.CreateNSWMul(block_scope->iv, b_.getInt64(blocks.block));
        if (!prefetched.empty()) prefetch_row(prefetched, start, /*ahead=*/1, /*write=*/false);
        if (!written.empty()) prefetch_row(written, start, /*ahead=*/0, /*write=*/true);
        Value* block_end = b_.CreateNSWAdd(start, b_.getInt64(blocks.block));
        end = whole ? block_end : b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, block_end, end);
        inner = block_scope;
      }
      const bool stages = staged > 0 && r == last;
      if (stages) {  // the body's values of [start, end) into the row, in a loop of their own
        Scope* fill = open_loop(inner, start, end, fmt::format("r{}.fill", e->rvars[r]));
        var_scope_[e->rvars[r]] = fill;
        var_value_[e->rvars[r]] = fill->iv;
        Expected<Value*> fv = emit(e->args[0]);
        if (!fv) return std::unexpected(fv.error());
        if (!staged_row)
          staged_row =
              entry_alloca(llvm::ArrayType::get((*fv)->getType(), static_cast<uint64_t>(staged)));
        insert_at(fill);
        b_.CreateStore(*fv, b_.CreateInBoundsGEP(staged_row->getAllocatedType(), staged_row,
                                                 {b_.getInt64(0), b_.CreateSub(fill->iv, start)}));
        if (Expected<void> ok = fill_rows(fill); !ok) return std::unexpected(ok.error());
        fill->memo.clear();
        inner->cursor = loops_[fill->loop].exit;  // the reduction's loop runs after it
      }
      inner = open_loop(inner, start, end, fmt::format("r{}", e->rvars[r]));
      loops_[inner->loop].reduction = true;
      loops_[inner->loop].in_lanes = stages      ? true
                                     : r == last ? (stage ? loads_in_lanes : last_in_lanes)
                                                 : reduces_in_lanes(e, e->rvars[r]);
      if (block_scope && inner->parent == block_scope) first_in_block = inner;
      var_scope_[e->rvars[r]] = inner;
      var_value_[e->rvars[r]] = inner->iv;
      opened.push_back(inner);
      if (stages) {
        insert_at(inner);
        staged_value =
            b_.CreateLoad(staged_row->getAllocatedType()->getArrayElementType(),
                          b_.CreateInBoundsGEP(staged_row->getAllocatedType(), staged_row,
                                               {b_.getInt64(0), b_.CreateSub(inner->iv, start)}));
      }
    }
    Expected<Value*> v = staged_value ? Expected<Value*>(staged_value) : emit(e->args[0]);
    if (!v) return std::unexpected(v.error());
    if (!staged_value)
      if (Expected<void> ok = fill_rows(inner); !ok) return std::unexpected(ok.error());
    insert_at(inner);
    ReduceState state{b_.CreateLoad(acc->getAllocatedType(), acc),
                      idx ? b_.CreateLoad(b_.getInt32Ty(), idx) : nullptr};
    Value* i = is_arg ? var_value_.at(e->rvars[0]) : nullptr;
    Expected<ReduceState> next =
        reduce_step(b_, e->reduce_op, bt, state, *v, i,
                    inner != s && reduces_in_fixed_lanes(loops_[inner->loop]));
    if (!next) return std::unexpected(error(next.error().message));
    b_.CreateStore(next->acc, acc);
    if (idx) b_.CreateStore(next->index, idx);
    for (int32_t rv : e->rvars) {
      var_scope_.erase(rv);
      var_value_.erase(rv);
    }
    if (total) {  // after the block's loops: total += the block's sum
      block_scope->cursor = loops_[first_in_block->loop].exit;
      insert_at(block_scope);
      Value* part = b_.CreateFPExt(b_.CreateLoad(body_ty, acc), b_.getDoubleTy());
      b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(b_.getDoubleTy(), total), part), total);
    }
    for (Scope* o : opened) o->memo.clear();
    return opened.empty() ? nullptr : opened.front();  // null: every axis had one element
  };
  // A run-time row in prefetch blocks: its whole blocks, then the partial one (if any), the same
  // code twice. Run-time ends in every block cost general softmax rows 7-11% against code
  // compiled for their length at n = 1024 (one core, a Zen 4), 24-26% at 1280.
  const bool split = !prefetched.empty() && run_time && blocks.level == 0;
  Value* whole_blocks = nullptr;
  if (split) {
    whole_blocks = blocks_of(extent(e->rextents[0], e->rslots, 0), blocks.block, /*partial=*/false);
    Expected<Scope*> nest = emit_nest(nullptr, whole_blocks, /*whole=*/true);
    if (!nest) return std::unexpected(nest.error());
    s->cursor = loops_[(*nest)->loop].exit;
    insert_at(s);
  }
  // A sum in lanes over a row with steps (a pad's, a concat's: the facts' reduction cuts): each
  // run of blocks inside one piece is emitted with that piece's arms, so its loads are
  // contiguous; a block across a cut reads as before. Every block still sums its own terms in
  // its own lanes, so the sum is the same.
  const kir::LoopSplit* cuts = nullptr;
  if (lane_blocks && !run_time && blocks.level == 0)
    for (const kir::ReduceSplit& r : opt_.facts->reduce_splits)
      if (r.reduce == e) cuts = &r.split;
  if (cuts) {
    for (const BlockRun& run : block_runs(*cuts, e->rextents[0], blocks.block)) {
      if (run.piece_lo >= 0) reduce_pieces_.emplace_back(cuts, run.piece_lo);
      Expected<Scope*> nest = emit_nest(b_.getInt64(run.first), b_.getInt64(run.last), run.whole);
      if (run.piece_lo >= 0) reduce_pieces_.pop_back();
      if (!nest) return std::unexpected(nest.error());
      if (*nest) s->cursor = loops_[(*nest)->loop].exit;
      insert_at(s);
    }
  } else {
    Expected<Scope*> nest = emit_nest(whole_blocks, nullptr, /*whole=*/false);
    if (!nest) return std::unexpected(nest.error());
    if (*nest) s->cursor = loops_[(*nest)->loop].exit;
    insert_at(s);
  }
  if (is_arg) return b_.CreateLoad(b_.getInt32Ty(), idx);
  Value* result =
      total ? b_.CreateFPTrunc(b_.CreateLoad(b_.getDoubleTy(), total), body_ty)
            : static_cast<Value*>(b_.CreateLoad(body_ty, acc));
  return emit_cast(b_, result, bt, e->dtype);
}

// The input buffers whose next row a row-filling reduction should prefetch: those shaped like the
// domain (C-ordered, so the point after the current row's last is the next row's first), when
// the reduction runs along the innermost axis once per row of kMinPrefetchRow or more, in unchecked
// code (a checked kernel touches nothing it is not sure of).
std::vector<int32_t> KernelEmitter::next_row_inputs(const Expr* reduce) const {
  const size_t rank = k_.domain.size();
  if (opt_.check != CheckMode::none || rank < 2 || reduce->rvars.size() != 1) return {};
  // A run-time row length: the row is the innermost axis (one slot), and it is prefetched at
  // every length, as code for a length at which rows are kept and prefetched would be.
  const int32_t slot = reduce->rslots.empty() ? -1 : reduce->rslots[0];
  if (slot != k_.domain_slot(rank - 1)) return {};
  if (slot < 0 &&
      (reduce->rextents[0] != k_.domain.back() || reduce->rextents[0] < kMinPrefetchRow))
    return {};
  for (size_t d = 0; d + 1 < rank; ++d)
    if (!var_value_.count(static_cast<int32_t>(d))) return {};
  std::vector<int32_t> bufs;
  for (size_t i = 0; i < k_.params.size(); ++i)
    if (!k_.params[i].output && k_.params[i].shape == k_.domain &&
        k_.params[i].shape_slots == k_.domain_slots)
      bufs.push_back(static_cast<int32_t>(i));
  return bufs;
}

// The outputs a row kernel writes with ordinary stores along its rows (shaped like the domain, not
// streamed: streaming_stores.h). The row-filling reduction fetches the current row's lines of
// them for writing while it computes (prefetch_row), so the output pass that follows stores into
// lines the core owns, where it had waited for each line's read (read-for-ownership) with nothing
// to compute meanwhile. Softmax over 4096 x 4096 on 2 Cascade Lake cores (36 MiB L3), kiln_bench:
// 9.8-10.0 ms streamed, 9.8-9.9 with ordinary stores, 8.2-8.3 with ordinary stores fetched ahead
// (which the autotuner then picks: autotune/tune_space.h).
std::vector<int32_t> KernelEmitter::row_outputs() const {
  const std::vector<bool> streaming = streaming_buffers(k_, opt_.llc_bytes, opt_.params.stores);
  std::vector<int32_t> bufs;
  for (size_t i = 0; i < k_.params.size(); ++i)
    if (k_.params[i].output && !streaming[i] && k_.params[i].shape == k_.domain &&
        k_.params[i].shape_slots == k_.domain_slots)
      bufs.push_back(static_cast<int32_t>(i));
  return bufs;
}

// Prefetches the lines of kPrefetchBlock elements from `column` of a row in each of `bufs`: of the
// row `ahead` rows after the current one, for reading (`write` false) or writing (prefetchw), into
// L2 (kPrefetchLocality). The row after a chunk's last is prefetched too: a prefetch never faults,
// and the address is computed without an inbounds claim.
void KernelEmitter::prefetch_row(const std::vector<int32_t>& bufs, Value* column, int64_t ahead,
                                 bool write) {
  const size_t rank = k_.domain.size();
  Value* row = b_.getInt64(0);
  for (size_t d = 0; d + 1 < rank; ++d)
    row = b_.CreateAdd(b_.CreateMul(row, extent(k_.domain[d], k_.domain_slots, d)),
                       var_value_.at(static_cast<int32_t>(d)));
  if (ahead != 0) row = b_.CreateAdd(row, b_.getInt64(ahead));
  Value* at =
      b_.CreateAdd(b_.CreateMul(row, extent(k_.domain.back(), k_.domain_slots, rank - 1)), column);
  llvm::Function* prefetch =
      llvm::Intrinsic::getDeclaration(&m_, llvm::Intrinsic::prefetch, {b_.getPtrTy()});
  for (int32_t buf : bufs) {
    const int64_t size = ir::dtype_size(k_.params[static_cast<size_t>(buf)].dtype);
    Value* base = b_.CreateGEP(b_.getInt8Ty(), buffers_[static_cast<size_t>(buf)],
                               b_.CreateMul(at, b_.getInt64(size)));
    for (int64_t line = 0; line < kPrefetchBlock * size; line += kLineBytes)
      b_.CreateCall(prefetch,
                    {b_.CreateGEP(b_.getInt8Ty(), base, b_.getInt64(line)),
                     b_.getInt32(write ? 1 : 0), b_.getInt32(kPrefetchLocality), b_.getInt32(1)});
  }
}

void KernelEmitter::init_scans(Scope* row) {
  for (const Expr* e : scans_) {
    llvm::AllocaInst*& acc = scan_accs_[e];
    if (!acc) acc = entry_alloca(register_type(ctx_, e->dtype));
    insert_at(row);
    if (e->rvars.empty()) {
      b_.CreateStore(register_constant(ctx_, e->dtype, 0, 0), acc);
      continue;
    }
    // A selection scan: no pick yet (index -1); the value is not read before the first pick.
    llvm::Type* vt = register_type(ctx_, e->args[0]->dtype);
    llvm::AllocaInst*& prev = scan_prev_values_[e];
    if (!prev) prev = entry_alloca(vt);
    b_.CreateStore(b_.getInt64(-1), acc);
    b_.CreateStore(llvm::Constant::getNullValue(vt), prev);
  }
}

// One step of a selection scan: a pass over r in [0, n) keeps the best element that ranks after
// the previous pick (value pv at index pi): v ranks after pv, or ties with it at r > pi. Ranking
// strictly better replaces the best, so equal values keep the lower index. Comparisons only.
Expected<Value*> KernelEmitter::emit_select_scan(const Expr* e, Scope* s) {
  const ir::DType bt = e->args[0]->dtype;
  const bool largest = e->reduce_op == kir::ReduceOp::ArgMax;
  llvm::AllocaInst* prev_i = scan_accs_.at(e);
  llvm::AllocaInst* prev_v = scan_prev_values_.at(e);
  llvm::Type* vt = prev_v->getAllocatedType();
  llvm::AllocaInst* best_i = entry_alloca(b_.getInt64Ty());
  llvm::AllocaInst* best_v = entry_alloca(vt);
  insert_at(s);
  b_.CreateStore(b_.getInt64(-1), best_i);
  b_.CreateStore(llvm::Constant::getNullValue(vt), best_v);
  Value* pi = b_.CreateLoad(b_.getInt64Ty(), prev_i);
  Value* pv = b_.CreateLoad(vt, prev_v);
  const int32_t rv = e->rvars[0];
  Scope* loop =
      open_loop(s, b_.getInt64(0), extent(e->rextents[0], e->rslots, 0), fmt::format("r{}", rv));
  var_scope_[rv] = loop;
  var_value_[rv] = loop->iv;
  Expected<Value*> v = emit(e->args[0]);
  if (!v) return v;
  insert_at(loop);
  Value* r = loop->iv;
  Value* after_prev =
      b_.CreateOr(b_.CreateICmpSLT(pi, b_.getInt64(0)),
                  b_.CreateOr(ranks_before(b_, largest, bt, pv, *v),
                              b_.CreateAnd(b_.CreateNot(ranks_before(b_, largest, bt, *v, pv)),
                                           b_.CreateICmpSGT(r, pi))));
  Value* bi = b_.CreateLoad(b_.getInt64Ty(), best_i);
  Value* bv = b_.CreateLoad(vt, best_v);
  Value* better =
      b_.CreateOr(b_.CreateICmpSLT(bi, b_.getInt64(0)), ranks_before(b_, largest, bt, *v, bv));
  Value* take = b_.CreateAnd(after_prev, better);
  b_.CreateStore(b_.CreateSelect(take, *v, bv), best_v);
  b_.CreateStore(b_.CreateSelect(take, r, bi), best_i);
  var_scope_.erase(rv);
  var_value_.erase(rv);
  s->cursor = loops_[loop->loop].exit;
  loop->memo.clear();
  insert_at(s);
  Value* picked = b_.CreateLoad(b_.getInt64Ty(), best_i);
  b_.CreateStore(picked, prev_i);
  b_.CreateStore(b_.CreateLoad(vt, best_v), prev_v);
  return picked;
}

// One step of the running sum, in the order of the innermost loop: acc += body; the value is the
// new acc. Float adds carry no fast-math flags (a scan has exactly one summation order, whatever
// the vector width); f16 and bf16 accumulate in float like the sum reduction, rounded on store.
Expected<Value*> KernelEmitter::emit_scan(const Expr* e, Scope* s) {
  auto it = scan_accs_.find(e);
  if (it == scan_accs_.end() || s->loop < 0 || var_scope_.at(e->var) != s)
    return std::unexpected(
        error(fmt::format("a scan along v{} outside the innermost loop", e->var)));
  if (!e->rvars.empty()) return emit_select_scan(e, s);
  Expected<Value*> v = emit(e->args[0]);
  if (!v) return v;
  insert_at(s);
  llvm::AllocaInst* acc = it->second;
  Value* sum = b_.CreateLoad(acc->getAllocatedType(), acc);
  Value* next = ir::is_float(e->dtype) ? b_.CreateFAdd(sum, *v) : b_.CreateAdd(sum, *v);
  b_.CreateStore(next, acc);
  return next;
}

Expected<void> KernelEmitter::emit_store(const kir::Store& st, Scope* s) {
  Expected<Value*> index = emit(st.index);
  if (!index) return std::unexpected(index.error());
  Expected<Value*> value = emit(st.value);
  if (!value) return std::unexpected(value.error());
  insert_at(s);
  if (opt_.check != CheckMode::none) {
    emit_checked_store(st, *index, *value, s);
    return {};
  }
  const ir::DType t = k_.params[st.buf].dtype;
  llvm::Type* mt = memory_type(ctx_, t);
  Value* p = b_.CreateInBoundsGEP(mt, buffers_[st.buf], *index);
  // y[i] = where(c, a, x[i]) (or where(c, x[i], a)): where y is written over x (a donated input,
  // PlanStep::in_place), a point that keeps x's value holds it already and is not stored. A
  // decoder step that writes one row of its cache this way touches that row only (LLVM unswitches
  // the test out of the inner loop where c does not read the inner variable).
  if (const auto kept = kept_operand(st)) {
    const Expr* where = st.value;
    Expected<Value*> c = emit(where->args[0]);
    if (!c) return std::unexpected(c.error());
    insert_at(s);
    Value* cond = *c;
    if (where->args[0]->dtype != ir::DType::boolean)
      cond = emit_cast(b_, cond, where->args[0]->dtype, ir::DType::boolean);
    const int32_t x = where->args[*kept]->buf;
    Value* changes = *kept == 2 ? cond : b_.CreateNot(cond);
    branch_if(s, b_.CreateOr(b_.CreateICmpNE(buffers_[st.buf], buffers_[x]), changes),
              "store.changed");
    b_.CreateStore(to_memory(b_, *value, t), p);
    insert_at(s);
    return {};
  }
  b_.CreateStore(to_memory(b_, *value, t), p);
  return {};
}

std::optional<size_t> KernelEmitter::kept_operand(const kir::Store& st) const {
  const Expr* v = st.value;
  if (v->kind != ExprKind::Alu || v->alu != kir::Alu::Where) return std::nullopt;
  for (size_t i : {size_t{2}, size_t{1}}) {
    const Expr* x = v->args[i];
    if (x->kind == ExprKind::Load && x->args[0] == st.index && x->buf != st.buf &&
        !k_.params[x->buf].output && k_.params[x->buf].dtype == k_.params[st.buf].dtype &&
        x->dtype == k_.params[st.buf].dtype)
      return i;
  }
  return std::nullopt;
}

const kir::Store* KernelEmitter::aligned_store() const {
  // Streaming is chosen by size: a kernel with run-time sizes never streams (serves_any_sizes).
  if (opt_.check != CheckMode::none || !scans_.empty() || k_.has_sizes()) return nullptr;
  const std::vector<bool> streaming = streaming_buffers(k_, opt_.llc_bytes, opt_.params.stores);
  for (const kir::Store& st : k_.stores) {
    if (!streaming[st.buf]) continue;
    // Only an index of loop variables and constants can be evaluated before the loop runs.
    bool pure = true;
    std::vector<const Expr*> todo{st.index};
    std::unordered_set<const Expr*> seen;
    while (pure && !todo.empty()) {
      const Expr* e = todo.back();
      todo.pop_back();
      if (!seen.insert(e).second) continue;
      if (e->kind == ExprKind::Alu) todo.insert(todo.end(), e->args.begin(), e->args.end());
      else pure = e->kind == ExprKind::Const || e->kind == ExprKind::Var;
    }
    if (pure) return &st;
  }
  return nullptr;
}

Expected<Value*> KernelEmitter::aligned_start(const kir::Store& st, Scope* s, Value* lo, Value* hi) {
  // The store's index at the loop's first point: emitted in a scope of its own standing for that
  // point, so that nothing it memoizes is taken for the loop body's values.
  const int32_t last = static_cast<int32_t>(std::max<size_t>(k_.domain.size(), 1)) - 1;
  Scope first;
  first.parent = s;
  first.depth = s->depth + 1;
  first.cursor = s->cursor;
  first.loop = s->loop;
  var_scope_[last] = &first;
  var_value_[last] = lo;
  Expected<Value*> index = emit(st.index);
  var_scope_.erase(last);
  var_value_.erase(last);
  if (!index) return index;
  insert_at(s);
  const ir::DType t = k_.params[st.buf].dtype;
  const int64_t size = ir::dtype_size(t);
  // A plain GEP: only the address's low bits are wanted, whatever the point.
  Value* at = b_.CreatePtrToInt(b_.CreateGEP(memory_type(ctx_, t), buffers_[st.buf], *index),
                                b_.getInt64Ty());
  // Bytes to the next line boundary, in elements (a misaligned element address gives some head:
  // the stores then test their address, see stream_stores).
  Value* gap = b_.CreateAnd(b_.CreateSub(b_.getInt64(0), at), b_.getInt64(kLineBytes - 1));
  Value* head = b_.CreateLShr(gap, b_.getInt64(std::countr_zero(static_cast<uint64_t>(size))));
  return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateAdd(lo, head), hi);
}

// Whether some store's value is a chain of at least kDeepChain dependent operations.
bool KernelEmitter::deep_chain() const { return has_deep_chain(k_); }

// Whether every load in `reduce`'s body reads element `var`, `var` + 1, ... (or the same one at
// each `var`) of the buffer it stands for (view_step): the reduction's loop along `var` is
// vectorized across its iterations, so that a sum adds in the order it would over that buffer
// (fuzz seed 1970: a dot with a padded vector, 1 ulp apart from the dot with the pad written).
bool KernelEmitter::reduces_in_lanes(const Expr* reduce, int32_t var) const {
  return !any_in_body(reduce, [&](const Expr* e) {
    if (e->kind != ExprKind::Load) return false;
    const std::optional<int64_t> c = kir::view_step(e->args[0], var, free_vars_);
    return !c || (*c != 0 && *c != 1 && *c != -1);
  });
}

// Whether the reduction's body runs a loop of its own along `var`: a reduction or scan inside it
// that reads `var` (one that does not is computed outside the reduction's loop).
bool KernelEmitter::body_loops_along(const Expr* reduce, int32_t var) const {
  return any_in_body(reduce, [&](const Expr* e) {
    return (e->kind == ExprKind::Reduce || e->kind == ExprKind::Scan) && free_vars_.uses(e, var);
  });
}

// Whether `loop` stays scalar: a peeled head, a scan's loop (it carries its running sum from one
// step to the next), or one too short to fill a vector.
bool KernelEmitter::is_short(const Loop& loop) const {
  return loop.scalar || !scans_.empty() ||
         (loop.max_trips >= 0 && loop.max_trips < kMinVectorTrips);
}

// Whether a reduction's innermost loop is vectorized to kReductionLanes x kReductionInterleave
// (add_loop_metadata): its sums may then be regrouped into those lanes, and only then.
bool KernelEmitter::reduces_in_fixed_lanes(const Loop& loop) const {
  return loop.reduction && loop.in_lanes && !loop.has_inner_loop && !is_short(loop);
}

// vectorize.width / interleave.count on loops with no loop inside (the only ones the vectorizer
// considers; metadata on outer loops would only produce "not vectorized" remarks).
void KernelEmitter::add_loop_metadata() {
  const TuneParams& p = opt_.params;
  const bool deep = p.unroll == 0 && deep_chain();
  for (const Loop& loop : loops_) {
    // A loop over blocks stays one: unrolled whole, a row's blocks (8 of 128 in a row of 1024)
    // were one straight run of loads, which LLVM kept in registers from one pass over the row to
    // the next (CpuReduce.ALongRowReadTwiceStaysALoop).
    if (loop.has_inner_loop && loop.over_blocks)
      loop.latch->setMetadata(llvm::LLVMContext::MD_loop,
                              vectorize_hints(ctx_, 0, 0, /*keep_rolled=*/true));
    if (loop.has_inner_loop) continue;
    llvm::MDNode* md = nullptr;
    if (is_short(loop)) {
      md = no_vectorize_hint(ctx_);
    } else if (loop.reduction && loop.in_lanes) {
      // A reduction's order is fixed here, whatever the CPU, the tuning and whether its extent is
      // known: kReductionLanes lanes times kReductionInterleave accumulators, folded in the IR's
      // order, the rest in order after them (a forced width leaves LLVM no narrower epilogue to
      // pick). Not unrolled either: a loop unrolled whole before vectorizing becomes a tree LLVM
      // shapes per CPU.
      md = vectorize_hints(ctx_, kReductionLanes, kReductionInterleave, /*keep_rolled=*/true);
    } else if (loop.reduction) {
      // Strided or gathered loads (a column's sum): summed in order, lane by lane of the loop
      // around it once LLVM unrolls this one, never in lanes of its own that a CPU's gathers
      // would shape.
      md = no_vectorize_hint(ctx_);
    } else {
      md = vectorize_hints(ctx_, p.vector_width, deep ? kDeepChainInterleave : p.unroll,
                           /*keep_rolled=*/false);
    }
    if (md) loop.latch->setMetadata(llvm::LLVMContext::MD_loop, md);
  }
}

Expected<llvm::Function*> KernelEmitter::run() {
  if (Expected<void> ok = check_kernel(); !ok) return std::unexpected(ok.error());
  const kir::KernelFacts& facts = *opt_.facts;
  // A kept row is as long as its reduction (keeps_row; elsewhere the point value is computed
  // again).
  for (const RowReuse& r : facts.row_reuse) {
    if (!keeps_row(k_, r)) continue;
    row_fills_[r.reduce].push_back(r.body_value);
    row_reads_[r.point_value] = &r;
  }
  for (const Expr* e : kir::kernel_exprs(k_))
    if (e->kind == ExprKind::Scan) scans_.push_back(e);
  if (!scans_.empty() && (k_.domain.size() < 2 || std::ranges::any_of(scans_, [&](const Expr* e) {
                            return e->var != static_cast<int32_t>(k_.domain.size()) - 1;
                          })))
    return std::unexpected(error("a scan that is not along the innermost axis of rank >= 2"));
  create_function();
  // An empty inner axis means no point runs; hoisted loads must not run either.
  Value* empty = nullptr;
  for (size_t d = 1; d < k_.domain.size(); ++d) {
    if (k_.domain_slot(d) < 0) {
      if (k_.domain[d] == 0) return fn_;
      continue;
    }
    Value* zero = b_.CreateICmpEQ(size_value(k_.domain_slot(d)), b_.getInt64(0));
    empty = empty ? b_.CreateOr(empty, zero) : zero;
  }
  if (empty) {  // a run-time extent of 0: return at once
    BasicBlock* then = branch_if(scopes_[0].get(), empty, "empty");
    then->getTerminator()->eraseFromParent();
    b_.SetInsertPoint(then);
    b_.CreateRetVoid();
  }
  const size_t rank = std::max<size_t>(k_.domain.size(), 1);
  Scope* s = scopes_[0].get();
  for (size_t d = 0; d + 1 < rank; ++d) {
    s = d == 0 ? open_loop(s, fn_->getArg(1), fn_->getArg(2), "p0",
                           k_.dynamic_outer ? (k_.dynamic_bound > 0 ? k_.dynamic_bound : -1)
                                            : known_trips(k_.outer_extent(), k_.domain_slots, 0))
               : open_loop(s, b_.getInt64(0), extent(k_.domain[d], k_.domain_slots, d),
                           fmt::format("p{}", d), known_trips(k_.domain[d], k_.domain_slots, d));
    var_scope_[static_cast<int32_t>(d)] = s;
    var_value_[static_cast<int32_t>(d)] = s->iv;
  }
  // The innermost axis, piece by piece (one piece unless it has wrap-around indices or steps); the
  // outermost axis is the caller's [begin, end).
  const int32_t last = static_cast<int32_t>(rank) - 1;
  init_scans(s);
  for (size_t piece = 0; piece + 1 < opt_.facts->loop_split.bounds.size(); ++piece) {
    Value* lo = b_.getInt64(opt_.facts->loop_split.bounds[piece]);
    // One piece of a run-time extent: the whole axis (serves_any_sizes: no cuts).
    Value* hi = k_.domain_slot(last) >= 0 && last > 0
                    ? size_value(k_.domain_slot(last))
                    : b_.getInt64(opt_.facts->loop_split.bounds[piece + 1]);
    if (last == 0) {
      insert_at(s);
      lo = opt_.facts->loop_split.bounds.size() == 2
               ? fn_->getArg(1)
               : b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, fn_->getArg(1), lo);
      hi = opt_.facts->loop_split.bounds.size() == 2
               ? fn_->getArg(2)
               : b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, fn_->getArg(2), hi);
    }
    piece_lo_ = opt_.facts->loop_split.bounds[piece];
    const std::string name =
        opt_.facts->loop_split.bounds.size() == 2 ? fmt::format("p{}", last) : fmt::format("p{}.{}", last, piece);
    // A dynamic kernel's only axis has no known extent (serves_any_outer_extent: one piece).
    const int64_t trips =
        last == 0 && k_.dynamic_outer ? (k_.dynamic_bound > 0 ? k_.dynamic_bound : -1)
        : k_.domain_slot(last) >= 0
            ? -1
            : opt_.facts->loop_split.bounds[piece + 1] - opt_.facts->loop_split.bounds[piece];
    // A streaming output: a scalar head up to its first aligned element, then the vector loop.
    if (const kir::Store* st = opt_.facts->loop_split.bounds.size() == 2 ? aligned_store() : nullptr) {
      Expected<Value*> mid = aligned_start(*st, s, lo, hi);
      if (!mid) return std::unexpected(mid.error());
      Scope* head = open_loop(s, lo, *mid, name + ".head", kLineBytes);
      loops_[head->loop].scalar = true;
      var_scope_[last] = head;
      var_value_[last] = head->iv;
      for (const kir::Store& each : k_.stores)
        if (Expected<void> ok = emit_store(each, head); !ok) return std::unexpected(ok.error());
      s->cursor = loops_[head->loop].exit;
      lo = *mid;
    }
    Scope* inner = open_loop(s, lo, hi, name, trips);
    var_scope_[last] = inner;
    var_value_[last] = inner->iv;
    for (const kir::Store& st : k_.stores)
      if (Expected<void> ok = emit_store(st, inner); !ok) return std::unexpected(ok.error());
    s->cursor = loops_[inner->loop].exit;
  }
  add_loop_metadata();
  add_buffer_alias_scopes(*fn_, buffers_);
  return fn_;
}

}  // namespace

void add_buffer_alias_scopes(llvm::Function& fn, const std::vector<llvm::Value*>& buffers) {
  // Each access lists every other buffer's scope, and LLVM's scheduler and vectorizer compare
  // those lists pairwise: past a few dozen buffers that costs seconds per kernel. Kernels with
  // that many buffers (wide fused groups) are compiled without the scopes.
  if (buffers.size() < 2 || buffers.size() > kMaxScopedBuffers) return;
  llvm::LLVMContext& ctx = fn.getContext();
  llvm::MDBuilder mdb(ctx);
  llvm::MDNode* domain = mdb.createAnonymousAliasScopeDomain("kiln.buffers");
  std::vector<llvm::Metadata*> scopes;
  std::unordered_map<const Value*, size_t> index_of;
  for (size_t i = 0; i < buffers.size(); ++i) {
    scopes.push_back(mdb.createAnonymousAliasScope(domain, fmt::format("buf{}", i)));
    index_of.emplace(buffers[i], i);
  }
  std::vector<llvm::MDNode*> scope_of, others_of;
  for (size_t i = 0; i < buffers.size(); ++i) {
    std::vector<llvm::Metadata*> others = scopes;
    others.erase(others.begin() + static_cast<std::ptrdiff_t>(i));
    scope_of.push_back(llvm::MDNode::get(ctx, {scopes[i]}));
    others_of.push_back(llvm::MDNode::get(ctx, others));
  }
  for (BasicBlock& bb : fn)
    for (llvm::Instruction& inst : bb) {
      Value* ptr = llvm::getLoadStorePointerOperand(&inst);
      if (!ptr) continue;
      auto it = index_of.find(llvm::getUnderlyingObject(ptr, /*MaxLookup=*/0));
      if (it == index_of.end()) continue;
      inst.setMetadata(llvm::LLVMContext::MD_alias_scope, scope_of[it->second]);
      inst.setMetadata(llvm::LLVMContext::MD_noalias, others_of[it->second]);
    }
}

llvm::MDNode* vectorize_hints(llvm::LLVMContext& ctx, int vector_width, int interleave,
                              bool keep_rolled) {
  if (vector_width <= 0 && interleave <= 0 && !keep_rolled) return nullptr;
  llvm::SmallVector<llvm::Metadata*, 4> ops;
  ops.push_back(nullptr);  // self reference, set below
  auto hint = [&](const char* name, llvm::Metadata* value) {
    ops.push_back(llvm::MDNode::get(ctx, {llvm::MDString::get(ctx, name), value}));
  };
  auto i32 = [&](int v) {
    return llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(llvm::Type::getInt32Ty(ctx), v));
  };
  if (vector_width > 0) {
    hint("llvm.loop.vectorize.enable",
         llvm::ConstantAsMetadata::get(llvm::ConstantInt::getTrue(ctx)));
    hint("llvm.loop.vectorize.width", i32(vector_width));
  }
  if (interleave > 0) hint("llvm.loop.interleave.count", i32(interleave));
  if (keep_rolled)
    ops.push_back(llvm::MDNode::get(ctx, {llvm::MDString::get(ctx, "llvm.loop.unroll.disable")}));
  llvm::MDNode* md = llvm::MDNode::getDistinct(ctx, ops);
  md->replaceOperandWith(0, md);
  return md;
}

llvm::MDNode* no_vectorize_hint(llvm::LLVMContext& ctx) {
  llvm::Metadata* off[] = {llvm::MDString::get(ctx, "llvm.loop.vectorize.enable"),
                           llvm::ConstantAsMetadata::get(llvm::ConstantInt::getFalse(ctx))};
  llvm::MDNode* md = llvm::MDNode::getDistinct(ctx, {nullptr, llvm::MDNode::get(ctx, off)});
  md->replaceOperandWith(0, md);
  return md;
}

std::vector<Value*> load_buffer_pointers(llvm::IRBuilderBase& b, llvm::Function* fn, size_t count) {
  llvm::Type* ptr = b.getPtrTy();
  std::vector<Value*> buffers;
  for (size_t i = 0; i < count; ++i) {
    Value* slot = b.CreateConstInBoundsGEP1_64(ptr, fn->getArg(0), i);
    buffers.push_back(b.CreateLoad(ptr, slot, fmt::format("buf{}", i)));
  }
  return buffers;
}

std::vector<Value*> load_size_values(llvm::IRBuilderBase& b, llvm::Function* fn,
                                     const kir::Kernel& kernel) {
  std::vector<Value*> sizes;
  if (!kernel.has_sizes()) return sizes;
  llvm::Type* ptr = b.getPtrTy();
  Value* array = b.CreateLoad(
      ptr, b.CreateConstInBoundsGEP1_64(ptr, fn->getArg(0), kernel.params.size()), "sizes");
  const std::vector<ir::DType> dtypes = kir::size_dtypes(kernel);
  for (size_t i = 0; i < kernel.sizes.size(); ++i) {
    Value* v = b.CreateLoad(b.getInt64Ty(), b.CreateConstInBoundsGEP1_64(b.getInt64Ty(), array, i),
                            fmt::format("size.{}", i));
    // A float slot: a double's bits, rounded to the dtype as register_constant rounds; here,
    // where every use is dominated.
    if (dtypes[i] != ir::DType::i64) {
      v = b.CreateBitCast(v, b.getDoubleTy());
      if (dtypes[i] == ir::DType::f32) v = b.CreateFPTrunc(v, b.getFloatTy());
    }
    sizes.push_back(v);
  }
  return sizes;
}

llvm::Function* create_kernel_function(llvm::Module& module, const EmitOptions& options) {
  llvm::LLVMContext& ctx = module.getContext();
  llvm::Type* ptr = llvm::PointerType::get(ctx, 0);
  llvm::Type* i64 = llvm::Type::getInt64Ty(ctx);
  auto* fty = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr, i64, i64}, false);
  auto* fn = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, options.symbol, module);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  if (!options.cpu.empty()) fn->addFnAttr("target-cpu", options.cpu);
  if (!options.features.empty()) fn->addFnAttr("target-features", options.features);
  // No reciprocal or square-root estimates (rcp, rsqrt and a Newton step), which fast-math flags
  // on a division would otherwise let x86 use for x / sqrt(y): they are not correctly rounded,
  // differ between AVX2's 12-bit and AVX-512's 14-bit estimates, and give NaN at y = 0 (0 * inf
  // in the Newton step) where the quotient is infinite. (kiln sets no such flag; this keeps it so.)
  fn->addFnAttr("reciprocal-estimates", "none");
  if (options.features.find("+avx512f") != std::string::npos)
    fn->addFnAttr("prefer-vector-width", "512");
  fn->addParamAttr(0, llvm::Attribute::NoCapture);
  fn->addParamAttr(0, llvm::Attribute::ReadOnly);
  return fn;
}

Expected<llvm::Function*> emit_kernel(const kir::Kernel& kernel, const EmitOptions& options,
                                      llvm::Module& module) {
  KILN_CHECK(options.facts) << "emit_kernel needs the kernel's facts (" << kernel.name << ")";
  if (options.check == CheckMode::none) {
    if (std::optional<MatmulPattern> mm = matmul_of(*options.facts))
      return emit_matmul_kernel(kernel, *mm, options, module);
    if (options.facts->attention)
      return emit_attention_kernel(kernel, *options.facts->attention, options, module);
  }
  return KernelEmitter(kernel, options, module).run();
}

int64_t parallel_extent(const kir::Kernel& kernel, const EmitOptions& options) {
  KILN_CHECK(options.facts) << "parallel_extent needs the kernel's facts (" << kernel.name << ")";
  if (options.check == CheckMode::none) {
    if (std::optional<MatmulPattern> mm = matmul_of(*options.facts)) {
      if (std::optional<int64_t> blocks = gemv_column_blocks(kernel, *mm)) return *blocks;
      if (std::optional<int64_t> units = tiled_units(kernel, *mm, options)) return *units;
    }
    if (options.facts->attention) return attention_units(kernel, options);
  }
  return kernel.outer_extent();
}

int64_t unit_rows(const kir::Kernel& kernel, const EmitOptions& options) {
  KILN_CHECK(options.facts) << "unit_rows needs the kernel's facts (" << kernel.name << ")";
  if (options.check != CheckMode::none || matmul_of(*options.facts) || !options.facts->attention)
    return 0;
  return attention_unit_rows(kernel, options);
}

int chunks_per_thread(const kir::Kernel&, const kir::KernelFacts& facts, CheckMode check) {
  if (check != CheckMode::none) return 0;
  // A matmul's calls each pack b (the matrix-vector path's stripes, the tiled path's every block):
  // one call per thread packs it once per thread. With the pool's 4 chunks a thread, a 1024^3
  // matmul on 2 threads packed all of b 8 times: 7.2 ms, against 5.7 to 6.2 in one stripe each.
  if (matmul_of(facts)) return 1;
  return 0;
}

int64_t chunk_alignment(const kir::Kernel& kernel, const EmitOptions& options) {
  KILN_CHECK(options.facts) << "chunk_alignment needs the kernel's facts (" << kernel.name << ")";
  if (kernel.domain.size() != 1 || kernel.domain[0] < kMinVectorTrips) return 1;
  if (options.check == CheckMode::none && (matmul_of(*options.facts) || options.facts->attention))
    return 1;
  for (const Expr* e : kir::kernel_exprs(kernel))
    if (e->kind == ExprKind::Scan) return 1;  // a scan's loop stays scalar
  const TuneParams& p = options.params;
  const int64_t lanes = p.vector_width > 0 ? p.vector_width : kChunkLanes;
  const int64_t interleave = p.unroll > 0          ? p.unroll
                             : has_deep_chain(kernel) ? kDeepChainInterleave
                                                      : kChunkInterleave;
  return lanes * interleave;
}

bool serves_any_outer_extent(const kir::Kernel& kernel, const kir::KernelFacts& facts,
                             CheckMode check, int64_t llc_bytes) {
  // Checked code bounds every access by the buffers' lengths.
  if (check != CheckMode::none || kernel.domain.empty()) return false;
  // Attention splits its work by query blocks and heads.
  if (facts.attention) return false;
  // The matrix-vector path keeps every row's accumulators: one row (size 1, specialized) stays
  // as it is; a dynamic kernel of more rows takes the tiled path, whose rows are [begin, end).
  // Asked of the kernel at its size: the caller asks with `dynamic_outer` set, which
  // gemv_column_blocks reads as the tiled path (a gemv under shapes.policy = "dynamic" ran the
  // tiled path at one row, 5x slower).
  if (matmul_of(facts) && gemv_column_blocks_at_size(kernel.domain) &&
      (kernel.domain.size() != 2 || kernel.domain[0] < 2))
    return false;
  // A one-axis kernel runs its only axis as the innermost loop: in one piece (no wrap-around
  // indices or steps cut it, no step's arm chosen for its whole extent), and with no row of a
  // reduction reused along it.
  if (kernel.domain.size() == 1 && (facts.loop_split.bounds.size() != 2 ||
                                    !facts.loop_split.steps.empty() || !facts.row_reuse.empty()))
    return false;
  // Streaming stores are chosen by an output's size (and the kernel's footprint next to this
  // CPU's cache): such a kernel keeps its size.
  return !streams_at_its_size(kernel, kir::written_only(kernel), llc_bytes);
}

std::vector<int64_t> size_limits(const kir::Kernel& kernel, const kir::KernelFacts& facts) {
  std::vector<int64_t> limits(kernel.sizes.size(), -1);
  for (const RowReuse& r : facts.row_reuse) {
    if (!kernel.has_sizes() || !keeps_row(kernel, r)) continue;
    int64_t& limit = limits[static_cast<size_t>(r.reduce->rslots[0])];
    const int64_t most = max_row_values(r.body_value);
    limit = limit < 0 ? most : std::min(limit, most);
  }
  return limits;
}

bool serves_sizes_instance(const kir::KernelFacts& general, const kir::Kernel& special,
                           const kir::KernelFacts& special_facts, int64_t llc_bytes) {
  // The rows kept are the same (a row longer than kMaxRowReuseBytes is kept by neither), and
  // nothing chosen by size differs (streaming stores).
  return general.row_reuse.size() == special_facts.row_reuse.size() &&
         !streams_at_its_size(special, kir::written_only(special), llc_bytes);
}

bool serves_any_sizes(const kir::Kernel& kernel, const kir::KernelFacts& facts, CheckMode check,
                      int64_t llc_bytes) {
  if (check != CheckMode::none || !kernel.has_sizes() || kernel.dynamic_outer) return false;
  // A run-time size read only through its sizes' arithmetic (additions, products): a division by
  // one costs a hardware divide a point where a fixed divisor costs a multiply.
  std::unordered_set<const Expr*> sized;             // expressions that read a run-time size
  for (const Expr* e : kir::kernel_exprs(kernel)) {  // operands first
    if (e->kind == ExprKind::Size ||
        std::ranges::any_of(e->args, [&](const Expr* a) { return sized.count(a) > 0; }))
      sized.insert(e);
    if (e->kind == ExprKind::Alu && (e->alu == kir::Alu::IDiv || e->alu == kir::Alu::Mod) &&
        sized.count(e->args[1]))
      return false;
  }
  if (facts.attention) {
    // The attention emitter takes its key count at run time (a cache read to any length), and
    // its query rows (a prompt of any length): the key reductions' extent and the rows' domain
    // extent may be slots; the head's width and the batch are compiled in. Size expressions
    // elsewhere (a cache's strides, a sliding window's start) the expressions read.
    const kir::AttentionPattern& p = *facts.attention;
    const size_t rows = kernel.domain.size() - 2;
    for (size_t d = 0; d < kernel.domain.size(); ++d)
      if (d != rows && kernel.domain_slot(d) >= 0) return false;
    for (const Expr* e : kir::kernel_exprs(kernel))
      if (e->kind == ExprKind::Reduce &&
          std::ranges::any_of(e->rslots, [](int32_t s) { return s >= 0; }) &&
          (e->rvars.size() != 1 || e->rslots[0] != p.keys_slot))
        return false;
    return true;
  }
  if (matmul_of(facts) || facts.loop_split.bounds.size() != 2) return false;
  for (const Expr* e : kir::kernel_exprs(kernel)) {
    if (e->kind != ExprKind::Reduce || e->rslots.empty()) continue;
    if (e->reduce_op != kir::ReduceOp::Sum || !ir::is_float(e->args[0]->dtype)) continue;
    int64_t inner = 1;
    for (size_t r = 1; r < e->rextents.size(); ++r) {
      if (e->rslots.size() > r && e->rslots[r] >= 0) return false;
      inner = std::min(inner * e->rextents[r], kSumBlock + 1);
    }
    if (inner > kSumBlock) return false;
  }
  return !streams_at_its_size(kernel, kir::written_only(kernel), llc_bytes);
}

}  // namespace kiln::codegen::cpu
