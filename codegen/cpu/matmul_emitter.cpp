// The matmul loop nest in LLVM IR: chunk/batch loops, B-panel packing, the MR x NR register-tile
// micro-kernel with llvm.fmuladd on <8 x float>, and the per-element epilogue with remainders.
#include "codegen/cpu/matmul_emitter.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include "codegen/cpu/dtype_lowering.h"
#include "codegen/cpu/emit_support.h"
#include "codegen/cpu/expr_emitter.h"

namespace kiln::codegen::cpu {

namespace {

using kir::Expr;
using llvm::BasicBlock;
using llvm::Value;

// The register tile: MR rows x (vecs * lanes) columns of accumulators. AVX2 (16 registers):
// 6 x 16 floats = 12 <8 x float> accumulators, plus two B vectors and one broadcast. AVX-512 (32
// registers): 6 x 64 floats = 24 <16 x float>, plus four B vectors and one broadcast (measured
// faster than 12 x 32, 14 x 32 and 8 x 48 on a Xeon with AVX-512). Narrow outputs (N smaller
// than the tile) trade columns for rows, keeping the number of accumulators.
struct Tile {
  int64_t mr, lanes, vecs;
  int64_t nr() const { return lanes * vecs; }
};

// TuneParams::vector_width 4, 8 or 16 picks the lanes; anything else is the host's choice.
Tile tile_for(const EmitOptions& opt, int64_t n) {
  const int w = opt.params.vector_width;
  int64_t lanes = opt.features.find("+avx512f") != std::string::npos ? 16 : 8;
  if (w == 4 || w == 8 || w == 16) lanes = w;
  const int64_t accumulators = lanes == 16 ? 24 : 12;
  const int64_t vecs = std::clamp<int64_t>((n + lanes - 1) / lanes, 1, lanes == 16 ? 4 : 2);
  return Tile{accumulators / vecs, lanes, vecs};
}

constexpr int64_t kAlign = 64;
// The matrix-vector path's accumulators per span, all rows together: 32 KiB, within L1.
constexpr int64_t kGemvSpanFloats = 8192;
// Rows of b (consecutive k) each pass of the matrix-vector path reads together: 8 for one or two
// rows of a (more prefetch streams at once: a 4096 x 4096 W read 10% faster than with 4), 4 for
// more, whose M x rows values of a would not stay in registers.
int64_t gemv_k_rows(int64_t m) { return m <= 2 ? 8 : 4; }
// Packed B columns per block. Where a's rows are read in place (contiguous_in_k), nothing is
// packed per row block, and the block stays in L2 while every row block sweeps it: 512 KiB. A
// 1024^3 matmul on a 2-core Xeon with AVX-512 (2 MiB of L2 a core, a slow L3): 6.3 to 6.8 ms
// against 15.5 to 16.6 with 4 MiB blocks read back from L3 and a's rows packed. Where a's rows
// are packed, they are packed once per block they meet, so larger blocks pack them fewer times:
// 1 MiB (the same Xeon: 9.9 ms, against 8.6 to 9.6 with 512 KiB and 15.5 to 16.6 with 4 MiB; on
// a Zen 4, 4 MiB blocks were 10 to 20% faster than 512 KiB ones).
constexpr int64_t kBlockBytes = 512 * 1024;
constexpr int64_t kPackedABlockBytes = 1024 * 1024;

// Whether the row operand is one f32 load contiguous in k (its index is k plus terms free of k: a
// row-major a, or a view that keeps k innermost). The micro-kernel then broadcasts a's values
// from where they are (MR rows, each read in order, stay in L1 while the block's panels pass),
// and nothing is packed per row block. Anything else (a cast, a prologue's arithmetic, a
// transposed view) is packed once per row block and block.
// Whether `operand` is one f32 load whose index steps by one with k: k plus terms without k.
bool load_contiguous_in_k(const kir::Kernel& k, const MatmulPattern& p, const Expr* operand) {
  if (operand->kind != kir::ExprKind::Load || operand->dtype != ir::DType::f32) return false;
  const Expr* index = operand->args[0];
  auto is_k = [&](const Expr* e) { return e->kind == kir::ExprKind::Var && e->var == p.k_var; };
  if (is_k(index)) return true;
  if (index->kind != kir::ExprKind::Alu || index->alu != kir::Alu::Add || index->args.size() != 2)
    return false;
  const kir::FreeVars fv(k);
  for (size_t s = 0; s < 2; ++s)
    if (is_k(index->args[s]) && !fv.uses(index->args[1 - s], p.k_var)) return true;
  return false;
}

bool contiguous_in_k(const kir::Kernel& k, const MatmulPattern& p) {
  return load_contiguous_in_k(k, p, p.a);
}

// Whether b's columns lie along k (b(k, j) and b(k + 1, j) adjacent): a transposed view of a
// row-major matrix, as ONNX's Gemm with transB and torch's Linear (x Wᵀ) read their weight.
// Packed a row of NR columns at a time, each k read NR strided elements: 7x the time of the
// plain layout at M = 2, 4096 x 4096.
bool columns_along_k(const kir::Kernel& k, const MatmulPattern& p) {
  return k.domain.back() > 1 && load_contiguous_in_k(k, p, p.b);
}

int64_t round_up(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}

// Columns per packed B block (create_scratch): as many NR-wide panels as fit the block's bytes.
int64_t block_columns(const kir::Kernel& k, const MatmulPattern& p, const Tile& t) {
  const int64_t block = contiguous_in_k(k, p) ? kBlockBytes : kPackedABlockBytes;
  const int64_t k_extent = std::max<int64_t>(p.k_extent, 1);
  const int64_t panels = std::max<int64_t>(1, block / (k_extent * t.nr() * 4));
  return std::min(panels * t.nr(), round_up(k.domain.back(), t.nr()));
}

// The tiled path of a kernel with one batch point (a plain 2-D product) splits its work into
// units: column block b (block_columns wide) x row group g (rows_per_group rows, a multiple of
// MR), unit b * row_groups + g. A thread's chunk of consecutive units packs each column block
// it meets once and runs its row groups against it, so that B is packed about once in all (a
// block's row groups are split between threads only where there are more threads than blocks),
// not once per thread as when each thread takes a stripe of rows. 1024^3 on 2 Xeon cores: B's
// packs were 10% of the run (M = 1024 at 337 GFLOP/s, M = 4096 at 375).
struct TiledSplit {
  int64_t blocks = 0, row_groups = 0, rows_per_group = 0, block_columns = 0;
  int64_t units() const { return blocks * row_groups; }
};
// At least this many units, so that up to kMinTiledUnits / 4 threads each get several.
constexpr int64_t kMinTiledUnits = 64;

std::optional<TiledSplit> tiled_split(const kir::Kernel& k, const MatmulPattern& p,
                                      const EmitOptions& opt) {
  const size_t rank = k.domain.size();
  // A dynamic kernel's rows are its caller's [begin, end).
  if (rank < 2 || k.dynamic_outer) return std::nullopt;
  for (size_t axis = 0; axis + 2 < rank; ++axis)
    if (k.domain[axis] != 1) return std::nullopt;
  const int64_t m = k.domain[rank - 2], n = k.domain.back();
  if (m < 1 || n < 1) return std::nullopt;
  const Tile t = tile_for(opt, n);
  TiledSplit s;
  s.block_columns = block_columns(k, p, t);
  s.blocks = (n + s.block_columns - 1) / s.block_columns;
  const int64_t wanted = (kMinTiledUnits + s.blocks - 1) / s.blocks;
  s.rows_per_group = round_up((m + wanted - 1) / wanted, t.mr);
  s.row_groups = (m + s.rows_per_group - 1) / s.rows_per_group;
  return s;
}

class MatmulEmitter {
 public:
  MatmulEmitter(const kir::Kernel& k, const MatmulPattern& p, const EmitOptions& opt,
                llvm::Module& m)
      : k_(k),
        p_(p),
        opt_(opt),
        t_(tile_for(opt, k.domain.back())),
        kMR(t_.mr),
        kLanes(t_.lanes),
        kVecs(t_.vecs),
        kNR(t_.nr()),
        kK(std::max<int64_t>(p.k_extent, 1)),
        direct_a_(contiguous_in_k(k, p)),
        columns_along_k_(columns_along_k(k, p)),
        m_(m),
        ctx_(m.getContext()),
        b_(ctx_) {}

  Expected<llvm::Function*> run();

 private:
  Expected<void> gemv();
  Expected<void> gemv_dot();
  using Body = std::function<Expected<void>(Value*)>;
  void create_function();
  void create_scratch();
  Value* malloc_or_trap(int64_t bytes, const char* name);
  Expected<void> loop(Value* start, Value* end, int64_t step, const std::string& name,
                      const Body& body, llvm::MDNode* hints = nullptr);
  Expected<void> batch_loops(size_t axis, Value* begin, Value* end);
  Expected<void> rows(Value* i_lo, Value* i_hi);
  Expected<void> units(const TiledSplit& split, Value* begin, Value* end);
  Expected<void> block(Value* jc, Value* i_lo, Value* i_hi);
  Expected<void> pack_b(Value* jc, Value* j_end);
  std::vector<Value*> clamped_rows(Value* i0, Value* i_hi);
  Expected<void> pack_a();
  void micro_kernel(Value* panel);
  Expected<void> epilogue(Value* i0, Value* i_hi, Value* j0);
  Expected<void> store_all();
  Value* i64(int64_t v) { return b_.getInt64(v); }
  Value* float_at(Value* base, Value* index) {
    return b_.CreateInBoundsGEP(b_.getFloatTy(), base, index);
  }

  const kir::Kernel& k_;
  const MatmulPattern& p_;
  const EmitOptions& opt_;
  const Tile t_;
  const int64_t kMR, kLanes, kVecs, kNR;  // t_'s, named like the constants they are
  const int64_t kK;                       // the reduction extent, at least 1 (scratch sizes)
  const bool direct_a_;                   // a's rows read in place, not packed (contiguous_in_k)
  const bool columns_along_k_;            // b packed column by column (columns_along_k)
  std::vector<Value*> a_rows_;            // the row block's rows, clamped to the last (clamped_rows)
  int64_t nc_ = 0;                        // columns per packed B block, a multiple of kNR
  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  llvm::Function* fn_ = nullptr;
  std::vector<Value*> buffers_;
  std::unique_ptr<ExprEmitter> ex_;
  llvm::VectorType* vec_ = nullptr;
  Value* scratch_ = nullptr;            // malloc'd
  Value* b_pack_ = nullptr;             // nc_ / kNR panels, each kK rows of kNR floats
  Value* a_pack_ = nullptr;             // kK rows of kMR floats: the row block's a values
  std::vector<llvm::AllocaInst*> acc_;  // kMR * kVecs accumulators, promoted to registers
  llvm::AllocaInst* tile_ = nullptr;    // kMR * kNR floats: the accumulators for the epilogue
};

void MatmulEmitter::create_function() {
  fn_ = create_kernel_function(m_, opt_);
  // Without it the x86 backend splits 512-bit vectors on CPUs that prefer 256-bit ones.
  fn_->addFnAttr("min-legal-vector-width", std::to_string(kLanes * 32));
  b_.SetInsertPoint(BasicBlock::Create(ctx_, "entry", fn_));
  buffers_ = load_buffer_pointers(b_, fn_, k_.params.size());
  ex_ = std::make_unique<ExprEmitter>(b_, k_, buffers_);
  vec_ = llvm::FixedVectorType::get(b_.getFloatTy(), kLanes);
}

// The packs are per call, so threads running disjoint chunks never share them.
void MatmulEmitter::create_scratch() {
  for (int64_t i = 0; i < kMR * kVecs; ++i) acc_.push_back(b_.CreateAlloca(vec_));
  tile_ = b_.CreateAlloca(llvm::ArrayType::get(b_.getFloatTy(), kMR * kNR));
  tile_->setAlignment(llvm::Align(kLanes * 4));
  nc_ = block_columns(k_, p_, t_);
  const int64_t b_bytes = round_up(kK * nc_ * 4, kAlign);
  const int64_t bytes = b_bytes + (direct_a_ ? 0 : round_up(kK * kMR * 4, kAlign)) + kAlign;
  scratch_ = malloc_or_trap(bytes, "scratch");
  Value* addr = b_.CreatePtrToInt(scratch_, b_.getInt64Ty());
  Value* pad = b_.CreateAnd(b_.CreateSub(i64(0), addr), i64(kAlign - 1));
  b_pack_ = b_.CreateInBoundsGEP(b_.getInt8Ty(), scratch_, pad, "b.pack");
  a_pack_ = b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), b_pack_, b_bytes, "a.pack");
}

Value* MatmulEmitter::malloc_or_trap(int64_t bytes, const char* name) {
  return emit_malloc_or_trap(b_, fn_, bytes, name);
}

Expected<void> MatmulEmitter::loop(Value* start, Value* end, int64_t step, const std::string& name,
                                   const Body& body, llvm::MDNode* hints) {
  return emit_loop(b_, fn_, *ex_, start, end, step, name, body, hints);
}

// Batch axes 0 .. rank-3 (the outermost one over [begin, end)), then the rows of every batch
// point. A rank-2 kernel splits its rows directly.
Expected<void> MatmulEmitter::batch_loops(size_t axis, Value* begin, Value* end) {
  const size_t rank = k_.domain.size();
  if (axis + 2 == rank) {
    if (rank == 2) return rows(begin, end);
    return rows(i64(0), i64(k_.domain[rank - 2]));
  }
  Value* lo = axis == 0 ? begin : i64(0);
  Value* hi = axis == 0 ? end : i64(k_.domain[axis]);
  return loop(lo, hi, 1, fmt::format("b{}", axis), [&](Value* iv) {
    ex_->bind_var(static_cast<int32_t>(axis), iv);
    return batch_loops(axis + 1, begin, end);
  });
}

// Per block of nc_ columns: block() over the rows [i_lo, i_hi).
Expected<void> MatmulEmitter::rows(Value* i_lo, Value* i_hi) {
  const int64_t n = k_.domain.back();
  // No rows, no packing.
  Value* n_or_0 = b_.CreateSelect(b_.CreateICmpSLT(i_lo, i_hi), i64(n), i64(0));
  return loop(i64(0), n_or_0, nc_, "jc", [&](Value* jc) { return block(jc, i_lo, i_hi); });
}

// The units [begin, end) of `split`: per column block they meet, block() over the rows of the
// block's units among them.
Expected<void> MatmulEmitter::units(const TiledSplit& split, Value* begin, Value* end) {
  const int64_t groups = split.row_groups, m = k_.domain[k_.domain.size() - 2];
  for (size_t axis = 0; axis + 2 < k_.domain.size(); ++axis)  // the one batch point
    ex_->bind_var(static_cast<int32_t>(axis), i64(0));
  Value* first = b_.CreateSDiv(begin, i64(groups));
  Value* last = b_.CreateSDiv(b_.CreateAdd(end, i64(groups - 1)), i64(groups));
  return loop(first, last, 1, "blk", [&](Value* blk) -> Expected<void> {
    Value* base = b_.CreateMul(blk, i64(groups));
    Value* u_lo = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, begin, base);
    Value* u_hi = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, end, b_.CreateAdd(base, i64(groups)));
    auto row = [&](Value* u) {
      return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin,
                                      b_.CreateMul(b_.CreateSub(u, base), i64(split.rows_per_group)),
                                      i64(m));
    };
    Value* i_lo = row(u_lo);
    Value* i_hi = row(u_hi);
    Value* jc = b_.CreateMul(blk, i64(nc_));
    // One pass, none where the block has no rows here (no packing).
    Value* jc_end = b_.CreateSelect(b_.CreateICmpSLT(i_lo, i_hi), b_.CreateAdd(jc, i64(1)), jc);
    return loop(jc, jc_end, 1, "jc", [&](Value*) { return block(jc, i_lo, i_hi); });
  });
}

// Pack B's columns [jc, jc + nc_) once, then per row block of [i_lo, i_hi) pack A once (the
// packed rows stay in L1 while they meet every panel of the block; rows read in place need no
// packing) and run the micro-kernel and epilogue for every panel.
Expected<void> MatmulEmitter::block(Value* jc, Value* i_lo, Value* i_hi) {
  Value* j_end = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateAdd(jc, i64(nc_)),
                                          i64(k_.domain.back()));
  if (Expected<void> ok = pack_b(jc, j_end); !ok) return ok;
  return loop(i_lo, i_hi, kMR, "i0", [&](Value* i0) -> Expected<void> {
    a_rows_ = clamped_rows(i0, i_hi);
    if (!direct_a_)
      if (Expected<void> ok = pack_a(); !ok) return ok;
    return loop(jc, j_end, kNR, "j0", [&](Value* j0) -> Expected<void> {
      micro_kernel(float_at(b_pack_, b_.CreateMul(b_.CreateSub(j0, jc), i64(kK))));
      return epilogue(i0, i_hi, j0);
    });
  });
}

// Panel p of the block holds b(k, j0 + jj) at [p][k][jj] for j0 = jc + p * NR, 0 past the last
// column (b is evaluated at a clamped column, so its loads stay in range). A whole panel (every
// column below n) needs neither: its row of NR values is a plain loop that LLVM vectorizes (a
// row-major b's row is one contiguous copy), 1.5 ns an element packed one by one before.
Expected<void> MatmulEmitter::pack_b(Value* jc, Value* j_end) {
  const int64_t n = k_.domain.back();
  return loop(jc, j_end, kNR, "pb", [&](Value* j0) -> Expected<void> {
    Value* panel = float_at(b_pack_, b_.CreateMul(b_.CreateSub(j0, jc), i64(kK)));
    auto pack = [&](bool whole) {
      const auto element = [&](Value* k, Value* jj) -> Expected<void> {
        Value* j = b_.CreateAdd(j0, jj);
        ex_->bind_var(p_.k_var, k);
        ex_->bind_var(p_.j_var,
                      whole ? j : b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, j, i64(n - 1)));
        Expected<Value*> v = ex_->emit(p_.b);
        if (!v) return std::unexpected(v.error());
        Value* x = whole ? *v
                         : b_.CreateSelect(b_.CreateICmpSLT(j, i64(n)), *v,
                                           llvm::ConstantFP::get(b_.getFloatTy(), 0.0));
        b_.CreateStore(x, float_at(panel, b_.CreateAdd(b_.CreateMul(k, i64(kNR)), jj)));
        return {};
      };
      // Columns along k: each column's run of k is read in order (one stream per column).
      if (columns_along_k_)
        return loop(i64(0), i64(kNR), 1, whole ? "pbj" : "pbjt", [&](Value* jj) {
          return loop(i64(0), i64(p_.k_extent), 1, whole ? "pbk" : "pbkt",
                      [&](Value* k) { return element(k, jj); });
        });
      return loop(i64(0), i64(p_.k_extent), 1, whole ? "pbk" : "pbkt", [&](Value* k) {
        return loop(
            i64(0), i64(kNR), 1, whole ? "pbj" : "pbjt", [&](Value* jj) { return element(k, jj); },
            whole ? vectorize_hints(ctx_, static_cast<int>(kLanes), 0) : nullptr);
      });
    };
    llvm::BasicBlock* whole = BasicBlock::Create(ctx_, "pb.whole", fn_);
    llvm::BasicBlock* tail = BasicBlock::Create(ctx_, "pb.tail", fn_);
    llvm::BasicBlock* done = BasicBlock::Create(ctx_, "pb.done", fn_);
    b_.CreateCondBr(b_.CreateICmpSLE(b_.CreateAdd(j0, i64(kNR)), i64(n)), whole, tail);
    b_.SetInsertPoint(whole);
    if (Expected<void> ok = pack(true); !ok) return ok;
    b_.CreateBr(done);
    b_.SetInsertPoint(tail);
    if (Expected<void> ok = pack(false); !ok) return ok;
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
    ex_->forget();
    return {};
  });
}

// The row block's MR rows from i0; rows past i_hi repeat the last row (loads stay in range); the
// epilogue does not store them.
std::vector<Value*> MatmulEmitter::clamped_rows(Value* i0, Value* i_hi) {
  std::vector<Value*> rows;
  Value* last = b_.CreateSub(i_hi, i64(1));
  for (int64_t r = 0; r < kMR; ++r)
    rows.push_back(b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateAdd(i0, i64(r)), last));
  return rows;
}

// a_pack[k][r] = a(row r of the block, k), the rows of a_rows_.
Expected<void> MatmulEmitter::pack_a() {
  const std::vector<Value*>& row = a_rows_;
  return loop(i64(0), i64(p_.k_extent), 1, "pak", [&](Value* k) -> Expected<void> {
    for (int64_t r = 0; r < kMR; ++r) {
      ex_->forget();  // a's values belong to one row
      ex_->bind_var(p_.k_var, k);
      ex_->bind_var(p_.i_var, row[r]);
      Expected<Value*> a = ex_->emit(p_.a);
      if (!a) return std::unexpected(a.error());
      b_.CreateStore(*a, float_at(a_pack_, b_.CreateAdd(b_.CreateMul(k, i64(kMR)), i64(r))));
    }
    return {};
  });
}

// acc[r][v] += a_pack[k][r] * panel[k][v * lanes ...] over all k, in registers.
void MatmulEmitter::micro_kernel(Value* panel) {
  for (llvm::AllocaInst* acc : acc_) b_.CreateStore(llvm::ConstantFP::get(vec_, 0.0), acc);
  Expected<void> ok = loop(i64(0), i64(p_.k_extent), 1, "k", [&](Value* k) -> Expected<void> {
    std::vector<Value*> bv;
    for (int64_t v = 0; v < kVecs; ++v) {
      Value* at = b_.CreateAdd(b_.CreateMul(k, i64(kNR)), i64(v * kLanes));
      bv.push_back(b_.CreateAlignedLoad(vec_, float_at(panel, at), llvm::Align(kLanes * 4)));
    }
    for (int64_t r = 0; r < kMR; ++r) {
      Value* a = nullptr;
      if (direct_a_) {  // a(row r, k) where it is: one load (contiguous_in_k)
        ex_->forget();
        ex_->bind_var(p_.k_var, k);
        ex_->bind_var(p_.i_var, a_rows_[static_cast<size_t>(r)]);
        Expected<Value*> v = ex_->emit(p_.a);
        if (!v) return std::unexpected(v.error());
        a = *v;
      } else {
        a = b_.CreateLoad(b_.getFloatTy(), float_at(a_pack_, b_.CreateAdd(b_.CreateMul(k, i64(kMR)), i64(r))));
      }
      Value* splat = b_.CreateVectorSplat(kLanes, a);
      for (int64_t v = 0; v < kVecs; ++v) {
        llvm::AllocaInst* acc = acc_[r * kVecs + v];
        Value* sum = b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vec_},
                                        {splat, bv[v], b_.CreateLoad(vec_, acc)});
        b_.CreateStore(sum, acc);
      }
    }
    return {};
  });
  KILN_CHECK(ok.has_value()) << "the micro-kernel emits no kernel expression";
}

// Every store of the kernel, per valid element of the tile, in the kernel's store order.
Expected<void> MatmulEmitter::epilogue(Value* i0, Value* i_hi, Value* j0) {
  for (int64_t r = 0; r < kMR; ++r)
    for (int64_t v = 0; v < kVecs; ++v) {
      Value* at = b_.CreateConstInBoundsGEP1_64(b_.getFloatTy(), tile_, r * kNR + v * kLanes);
      b_.CreateAlignedStore(b_.CreateLoad(vec_, acc_[r * kVecs + v]), at, llvm::Align(kLanes * 4));
    }
  Value* rows_left = b_.CreateSub(i_hi, i0);
  Value* cols_left = b_.CreateSub(i64(k_.domain.back()), j0);
  auto stores = [&](Value* n_rows, Value* n_cols) {
    return loop(i64(0), n_rows, 1, "er", [&](Value* r) {
      return loop(i64(0), n_cols, 1, "ej", [&](Value* jj) -> Expected<void> {
        ex_->bind_var(p_.i_var, b_.CreateAdd(i0, r));
        ex_->bind_var(p_.j_var, b_.CreateAdd(j0, jj));
        Value* at = b_.CreateAdd(b_.CreateMul(r, i64(kNR)), jj);
        ex_->bind_expr(p_.reduce, b_.CreateLoad(b_.getFloatTy(),
                                                b_.CreateInBoundsGEP(b_.getFloatTy(), tile_, at)));
        return store_all();
      });
    });
  };
  // A whole tile's stores run over constant bounds, which LLVM turns into vector code; over
  // run-time bounds a plain product's rows became a call to memcpy each (and a vzeroupper), 6
  // calls a tile.
  BasicBlock* whole = BasicBlock::Create(ctx_, "ep.whole", fn_);
  BasicBlock* part = BasicBlock::Create(ctx_, "ep.part", fn_);
  BasicBlock* done = BasicBlock::Create(ctx_, "ep.done", fn_);
  b_.CreateCondBr(b_.CreateAnd(b_.CreateICmpSGE(rows_left, i64(kMR)),
                               b_.CreateICmpSGE(cols_left, i64(kNR))),
                  whole, part);
  b_.SetInsertPoint(whole);
  if (Expected<void> ok = stores(i64(kMR), i64(kNR)); !ok) return ok;
  b_.CreateBr(done);
  b_.SetInsertPoint(part);
  if (Expected<void> ok = stores(b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, rows_left, i64(kMR)),
                                 b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, cols_left, i64(kNR)));
      !ok)
    return ok;
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
  ex_->forget();
  return {};
}

// The kernel's stores, in order, at the bound point (its reduction bound to its value).
Expected<void> MatmulEmitter::store_all() {
  return emit_stores(b_, k_, *ex_, buffers_);
}

// The matrix-vector path. Per span of at most `span` columns of this call's blocks: zero M rows of
// accumulators, then for every k evaluate the M values a(r, k) once and stream b's row k over the
// span (one contiguous read, vectorized by LLVM, M fused multiply-adds per element), then run the
// epilogue over the span's points. The accumulators (M x span floats) stay in L1.
Expected<void> MatmulEmitter::gemv() {
  if (columns_along_k_) return gemv_dot();
  const size_t rank = k_.domain.size();
  const int64_t m = k_.domain[rank - 2], n = k_.domain.back();
  const int64_t span = kGemvSpanFloats / m / kGemvBlockColumns * kGemvBlockColumns;
  llvm::FunctionCallee free_fn = m_.getOrInsertFunction("free", b_.getVoidTy(), b_.getPtrTy());
  scratch_ = malloc_or_trap(m * span * 4, "acc");
  for (size_t axis = 0; axis + 2 < rank; ++axis) ex_->bind_var(static_cast<int32_t>(axis), i64(0));
  auto clamp_n = [&](Value* j) {
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, j, i64(n));
  };
  Value* j_lo = clamp_n(b_.CreateMul(fn_->getArg(1), i64(kGemvBlockColumns)));
  Value* j_hi = clamp_n(b_.CreateMul(fn_->getArg(2), i64(kGemvBlockColumns)));
  auto acc_at = [&](int64_t r, Value* j, Value* js) {
    return float_at(scratch_, b_.CreateAdd(i64(r * span), b_.CreateSub(j, js)));
  };
  Expected<void> done = loop(j_lo, j_hi, span, "js", [&](Value* js) -> Expected<void> {
    Value* js_end =
        b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateAdd(js, i64(span)), j_hi);
    b_.CreateMemSet(scratch_, b_.getInt8(0), i64(m * span * 4), llvm::MaybeAlign(4));
    // `rows` consecutive k at a time: each accumulator is loaded and stored once per group, and
    // b's rows k .. k+rows-1 stream at once (several prefetch streams: one row at a time, a core
    // read 2.6 ms of a 64 MiB W, four at a time 1.5). The sums still take k in order.
    auto ks_from = [&](Value* k0, Value* k_end, int64_t rows, const char* name) {
      return loop(k0, k_end, rows, name, [&](Value* k) -> Expected<void> {
        std::vector<std::vector<Value*>> a(rows);  // a[q][r] = a(r, k + q)
        for (int64_t q = 0; q < rows; ++q)
          for (int64_t r = 0; r < m; ++r) {
            ex_->forget();  // a's values belong to one row and one k
            ex_->bind_var(p_.k_var, b_.CreateAdd(k, i64(q)));
            ex_->bind_var(p_.i_var, i64(r));
            Expected<Value*> v = ex_->emit(p_.a);
            if (!v) return std::unexpected(v.error());
            a[q].push_back(*v);
          }
        return loop(
            js, js_end, 1, name,
            [&](Value* j) -> Expected<void> {
              std::vector<Value*> bv;
              for (int64_t q = 0; q < rows; ++q) {
                ex_->forget();
                ex_->bind_var(p_.k_var, b_.CreateAdd(k, i64(q)));
                ex_->bind_var(p_.j_var, j);
                Expected<Value*> v = ex_->emit(p_.b);
                if (!v) return std::unexpected(v.error());
                bv.push_back(*v);
              }
              for (int64_t r = 0; r < m; ++r) {
                Value* at = acc_at(r, j, js);
                Value* acc = b_.CreateLoad(b_.getFloatTy(), at);
                for (int64_t q = 0; q < rows; ++q)
                  acc = b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {b_.getFloatTy()},
                                           {a[q][r], bv[q], acc});
                b_.CreateStore(acc, at);
              }
              return {};
            },
            vectorize_hints(ctx_, opt_.params.vector_width, 0));
      });
    };
    const int64_t rows = gemv_k_rows(m);
    const int64_t grouped = p_.k_extent / rows * rows;
    Expected<void> ks = ks_from(i64(0), i64(grouped), rows, "gkr");
    if (ks) ks = ks_from(i64(grouped), i64(p_.k_extent), 1, "gk");
    if (!ks) return ks;
    for (int64_t r = 0; r < m; ++r) {
      Expected<void> stored = loop(js, js_end, 1, "gej", [&](Value* j) -> Expected<void> {
        ex_->bind_var(p_.i_var, i64(r));
        ex_->bind_var(p_.j_var, j);
        ex_->bind_expr(p_.reduce, b_.CreateLoad(b_.getFloatTy(), acc_at(r, j, js)));
        return store_all();
      });
      if (!stored) return stored;
    }
    return {};
  });
  if (!done) return done;
  b_.CreateCall(free_fn, {scratch_});
  return {};
}

// The matrix-vector path where b's columns lie along k (columns_along_k: x Wᵀ). Per column j of
// this call's blocks, b's column is read once, in place, into a dot product with each of the M
// rows of a. Its order is the IR's, not the CPU's: 16 lanes, lane l summing the k = l (mod 16)
// below the last multiple of 16 in order, the lanes folded 0 to 15 in order, then the rest of k in
// order. LLVM splits the 16 lanes into the vectors a CPU has, with the same result on each.
Expected<void> MatmulEmitter::gemv_dot() {
  constexpr int64_t kDot = 16;
  const size_t rank = k_.domain.size();
  const int64_t m = k_.domain[rank - 2], n = k_.domain.back();
  llvm::Type* f32 = b_.getFloatTy();
  auto* dot = llvm::FixedVectorType::get(f32, kDot);
  std::vector<llvm::AllocaInst*> acc, sum;
  for (int64_t r = 0; r < m; ++r) {
    acc.push_back(b_.CreateAlloca(dot));
    sum.push_back(b_.CreateAlloca(f32));
  }
  for (size_t axis = 0; axis + 2 < rank; ++axis) ex_->bind_var(static_cast<int32_t>(axis), i64(0));
  auto clamp_n = [&](Value* j) {
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, j, i64(n));
  };
  Value* j_lo = clamp_n(b_.CreateMul(fn_->getArg(1), i64(kGemvBlockColumns)));
  Value* j_hi = clamp_n(b_.CreateMul(fn_->getArg(2), i64(kGemvBlockColumns)));
  // kDot values of a load expression at k .. k + kDot - 1 (the other variables bound): one
  // vector load where it is contiguous in k, else element by element.
  auto run_of = [&](const Expr* operand, bool contiguous, Value* k) -> Expected<Value*> {
    if (contiguous) {
      ex_->forget();
      ex_->bind_var(p_.k_var, k);
      Expected<Value*> at = ex_->emit(operand->args[0]);
      if (!at) return std::unexpected(at.error());
      return b_.CreateAlignedLoad(dot, float_at(buffers_[static_cast<size_t>(operand->buf)], *at),
                                  llvm::Align(4));
    }
    Value* v = llvm::PoisonValue::get(dot);
    for (int64_t l = 0; l < kDot; ++l) {
      ex_->forget();  // memoized values belong to one k
      ex_->bind_var(p_.k_var, b_.CreateAdd(k, i64(l)));
      Expected<Value*> x = ex_->emit(operand);
      if (!x) return std::unexpected(x.error());
      v = b_.CreateInsertElement(v, *x, l);
    }
    return v;
  };
  // *slot += a * b, in the slot's type (kDot lanes, or one float).
  auto accumulate = [&](llvm::Type* t, llvm::AllocaInst* slot, Value* a, Value* b) {
    b_.CreateStore(
        b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {t}, {a, b, b_.CreateLoad(t, slot)}), slot);
  };
  const int64_t k_runs = p_.k_extent / kDot * kDot;
  return loop(j_lo, j_hi, 1, "dj", [&](Value* j) -> Expected<void> {
    for (int64_t r = 0; r < m; ++r) b_.CreateStore(llvm::ConstantFP::get(dot, 0.0), acc[r]);
    Expected<void> runs = loop(i64(0), i64(k_runs), kDot, "dk", [&](Value* k) -> Expected<void> {
      ex_->forget();
      ex_->bind_var(p_.j_var, j);
      Expected<Value*> bv = run_of(p_.b, true, k);
      if (!bv) return std::unexpected(bv.error());
      for (int64_t r = 0; r < m; ++r) {
        ex_->forget();  // a's values belong to one row
        ex_->bind_var(p_.i_var, i64(r));
        Expected<Value*> av = run_of(p_.a, direct_a_, k);
        if (!av) return std::unexpected(av.error());
        accumulate(dot, acc[r], *av, *bv);
      }
      return {};
    });
    if (!runs) return runs;
    for (int64_t r = 0; r < m; ++r)
      b_.CreateStore(
          b_.CreateFAddReduce(llvm::ConstantFP::get(f32, 0.0), b_.CreateLoad(dot, acc[r])), sum[r]);
    Expected<void> rest =
        loop(i64(k_runs), i64(p_.k_extent), 1, "dkr", [&](Value* k) -> Expected<void> {
          for (int64_t r = 0; r < m; ++r) {
            ex_->forget();
            ex_->bind_var(p_.k_var, k);
            ex_->bind_var(p_.j_var, j);
            ex_->bind_var(p_.i_var, i64(r));
            Expected<Value*> a = ex_->emit(p_.a);
            if (!a) return std::unexpected(a.error());
            Expected<Value*> bk = ex_->emit(p_.b);
            if (!bk) return std::unexpected(bk.error());
            accumulate(f32, sum[r], *a, *bk);
          }
          return {};
        });
    if (!rest) return rest;
    for (int64_t r = 0; r < m; ++r) {
      ex_->forget();
      ex_->bind_var(p_.i_var, i64(r));
      ex_->bind_var(p_.j_var, j);
      ex_->bind_expr(p_.reduce, b_.CreateLoad(f32, sum[r]));
      if (Expected<void> stored = store_all(); !stored) return stored;
    }
    return {};
  });
}

Expected<llvm::Function*> MatmulEmitter::run() {
  create_function();
  // An empty inner axis means no point runs (and no operand may be read).
  for (size_t d = 1; d < k_.domain.size(); ++d)
    if (k_.domain[d] == 0) {
      b_.CreateRetVoid();
      return fn_;
    }
  if (gemv_column_blocks(k_, p_)) {
    if (Expected<void> ok = gemv(); !ok) return std::unexpected(ok.error());
    b_.CreateRetVoid();
    add_buffer_alias_scopes(*fn_, buffers_);
    return fn_;
  }
  create_scratch();
  if (std::optional<TiledSplit> split = tiled_split(k_, p_, opt_)) {
    if (Expected<void> ok = units(*split, fn_->getArg(1), fn_->getArg(2)); !ok)
      return std::unexpected(ok.error());
  } else if (Expected<void> ok = batch_loops(0, fn_->getArg(1), fn_->getArg(2)); !ok) {
    return std::unexpected(ok.error());
  }
  llvm::FunctionCallee free_fn = m_.getOrInsertFunction("free", b_.getVoidTy(), b_.getPtrTy());
  b_.CreateCall(free_fn, {scratch_});
  b_.CreateRetVoid();
  add_buffer_alias_scopes(*fn_, buffers_);
  return fn_;
}

}  // namespace

std::optional<int64_t> gemv_column_blocks(const kir::Kernel& kernel, const MatmulPattern&) {
  // A dynamic kernel's rows are its caller's [begin, end): the tiled path.
  if (kernel.dynamic_outer) return std::nullopt;
  return gemv_column_blocks_at_size(kernel.domain);
}

std::optional<int64_t> gemv_column_blocks_at_size(const std::vector<int64_t>& domain) {
  const size_t rank = domain.size();
  if (rank < 2) return std::nullopt;
  for (size_t axis = 0; axis + 2 < rank; ++axis)
    if (domain[axis] != 1) return std::nullopt;
  const int64_t m = domain[rank - 2], n = domain.back();
  if (m < 1 || m > kGemvMaxRows || n < 1) return std::nullopt;
  return (n + kGemvBlockColumns - 1) / kGemvBlockColumns;
}

std::optional<int64_t> tiled_units(const kir::Kernel& kernel, const MatmulPattern& p,
                                   const EmitOptions& options) {
  if (gemv_column_blocks(kernel, p)) return std::nullopt;
  std::optional<TiledSplit> split = tiled_split(kernel, p, options);
  if (!split) return std::nullopt;
  return split->units();
}

Expected<llvm::Function*> emit_matmul_kernel(const kir::Kernel& kernel, const MatmulPattern& p,
                                             const EmitOptions& options, llvm::Module& module) {
  return MatmulEmitter(kernel, p, options, module).run();
}

}  // namespace kiln::codegen::cpu
