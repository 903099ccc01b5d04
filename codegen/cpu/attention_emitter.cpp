// The flash-style attention loop nest in LLVM IR (see attention_emitter.h for the algorithm).
#include "codegen/cpu/attention_emitter.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include "codegen/cpu/dtype_lowering.h"
#include "codegen/cpu/emit_support.h"
#include "codegen/cpu/expr_emitter.h"
#include "codegen/cpu/vector_math.h"

namespace kiln::codegen::cpu {

namespace {

using kir::Expr;
using llvm::BasicBlock;
using llvm::Value;

constexpr int64_t kBK = kAttentionKeyTile;
// The running sum's lanes: fixed, so that its summation order is the same on every ISA.
constexpr int64_t kSumLanes = 16;
constexpr int64_t kAlign = 64;

int64_t round_up(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}

int64_t pow2_ceil(int64_t x) {
  return x <= 1 ? 1 : static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(x)));
}

// A register tile of `rows` rows (a power of two, at most max_rows) by `vecs` vectors for a
// micro-kernel that, per step, loads the vectors of a row `total` vectors long in passes of `vecs`
// and broadcasts one value per row and pass: the most multiply-adds per load (rows x total
// against total + rows x passes) within `budget` accumulators, then the most vectors. With AVX2
// (8 lanes, 12 accumulators) a 64-wide row takes 4 x 3 (32 multiply-adds per 20 loads) instead
// of 1 x 8 (8 per 9); AVX-512 (16 lanes, 24) keeps 4 x 4.
std::pair<int64_t, int64_t> register_tile(int64_t total, int64_t max_rows, int64_t budget) {
  std::pair<int64_t, int64_t> best{1, std::min(total, budget)};
  auto score = [&](std::pair<int64_t, int64_t> t) {
    const int64_t passes = (total + t.second - 1) / t.second;
    return static_cast<double>(t.first * total) / static_cast<double>(total + t.first * passes);
  };
  for (int64_t rows = 1; rows <= std::min<int64_t>(max_rows, 8); rows *= 2)
    for (int64_t vecs = 1; vecs <= total && rows * vecs <= budget; ++vecs) {
      const std::pair<int64_t, int64_t> t{rows, vecs};
      const double s = score(t), b = score(best);
      if (s > b + 1e-9 || (s > b - 1e-9 && vecs > best.second)) best = t;
    }
  return best;
}

// The loop nest's sizes for one kernel and schedule.
struct Geometry {
  int64_t rank = 0, lq = 0, dv = 0, lk = 0, d = 0, batch_points = 1;
  int64_t lanes = 8;   // the micro-kernels' vector lanes
  int64_t bq = 32;     // query rows per block (a power of two)
  int64_t blocks = 0;  // blocks per batch point
  int64_t mr = 1;      // rows of the scores' register tile
  int64_t nv = 1;      // vectors (of a key tile's columns) of the scores' register tile
  int64_t tiles = 0;   // key tiles (at this instance's key count: see AttentionEmitter::tiles_)
  int64_t dvp = 0;     // V's row padded to the lanes
  int64_t e_vecs = 1;  // vectors of one p·V pass over e
  int64_t r2 = 1;      // rows of one p·V pass
  int64_t units() const { return dv == 0 ? 0 : batch_points * blocks; }
};

Geometry geometry(const kir::Kernel& k, const kir::AttentionPattern& p, const EmitOptions& opt) {
  Geometry g;
  g.rank = static_cast<int64_t>(k.domain.size());
  g.lq = k.domain[static_cast<size_t>(g.rank - 2)];
  g.dv = k.domain.back();
  g.lk = p.keys;
  g.d = p.head_dim;
  for (int64_t a = 0; a + 2 < g.rank; ++a) g.batch_points *= k.domain[static_cast<size_t>(a)];
  const bool wide = opt.features.find("+avx512f") != std::string::npos;
  g.lanes = wide ? 16 : 8;
  if (opt.params.vector_width == 8 || opt.params.vector_width == 16)
    g.lanes = opt.params.vector_width;
  // Accumulators the register file holds beside the operands (as in the matmul emitter).
  const int64_t budget = g.lanes == 16 ? 24 : 12;
  const int tile = opt.params.tile;
  g.bq = tile >= 16 && tile <= 128 && std::has_single_bit(static_cast<unsigned>(tile)) ? tile : 32;
  // A short query axis (decode: one row) takes a block no taller than it. Query rows that are a
  // run-time size (a prompt of any length) keep the whole block: the code serves every count.
  if (k.domain_slot(static_cast<size_t>(g.rank - 2)) < 0) g.bq = std::min(g.bq, pow2_ceil(g.lq));
  g.blocks = (g.lq + g.bq - 1) / g.bq;
  std::tie(g.mr, g.nv) = register_tile(kBK / g.lanes, g.bq, budget);
  g.tiles = (g.lk + kBK - 1) / kBK;
  g.dvp = round_up(std::max<int64_t>(g.dv, 1), g.lanes);
  std::tie(g.r2, g.e_vecs) = register_tile(g.dvp / g.lanes, g.bq, budget);
  return g;
}

class AttentionEmitter {
 public:
  AttentionEmitter(const kir::Kernel& k, const kir::AttentionPattern& p, const EmitOptions& opt,
                   llvm::Module& m)
      : k_(k), p_(p), opt_(opt), g_(geometry(k, p, opt)), m_(m), ctx_(m.getContext()), b_(ctx_) {}

  Expected<llvm::Function*> run();

 private:
  Value* i64(int64_t v) { return b_.getInt64(v); }
  Value* f32(double v) { return llvm::ConstantFP::get(b_.getFloatTy(), v); }
  Value* at(Value* base, Value* index) {
    return b_.CreateInBoundsGEP(b_.getFloatTy(), base, index);
  }
  Value* at(Value* base, int64_t index) { return at(base, i64(index)); }
  Value* smin(Value* a, Value* b) { return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, a, b); }
  Value* smax(Value* a, Value* b) { return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, a, b); }
  Expected<void> loop(Value* start, Value* end, int64_t step, const std::string& name,
                      const LoopBody& body, llvm::MDNode* hints = nullptr) {
    return emit_loop(b_, fn_, *ex_, start, end, step, name, body, hints);
  }
  Expected<Value*> emit(const Expr* e) { return ex_->emit(e); }

  void create_function();
  void create_scratch();
  Expected<void> unit(Value* u);
  Expected<void> pack_kv();
  // Tile t of K ([d][key in tile]) and its keys' rows of V.
  Expected<void> pack_k_tile(Value* t);
  // body(keys) for the keys of the tile at j0: kBK, a constant, where the tile is full; else
  // the count left (the last tile of a key count that is not a multiple of kBK).
  Expected<void> full_or_partial(Value* j0, const char* name,
                                 const std::function<Expected<void>(Value*)>& body);
  Expected<void> pack_v_tile(Value* t);
  Expected<void> pack_q(Value* i0);
  Expected<void> key_tile(Value* t, Value* i0);
  void scores(Value* t);
  Expected<void> logits(Value* j0, Value* i0);
  Expected<void> logits_pass(Value* j0, Value* i0, const Expr* x, bool guard);
  Value* fast_max(Value* a, Value* b);
  // live_[t] = whether the key mask (AttentionPattern::key_mask) holds for any key of tile t, for
  // the bound batch point.
  Expected<void> mark_live_tiles();
  // Runs `body` for tile t where it has a live key (every tile without a key mask).
  Expected<void> if_live(Value* t, const char* name, const std::function<Expected<void>()>& body);
  Expected<void> softmax();
  void accumulate(Value* j0);
  Expected<void> finish(Value* i0, Value* rows);
  Expected<void> store_all();

  const kir::Kernel& k_;
  const kir::AttentionPattern& p_;
  const EmitOptions& opt_;
  const Geometry g_;
  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  llvm::Function* fn_ = nullptr;
  std::vector<Value*> buffers_;
  std::unique_ptr<ExprEmitter> ex_;
  llvm::VectorType* vec_ = nullptr;  // <lanes x float>
  llvm::VectorType* sum_ = nullptr;  // <kSumLanes x float>
  Value* scratch_ = nullptr;
  Value* kpack_ = nullptr;  // [tile][d][kBK]
  Value* vpack_ = nullptr;  // [key][dvp], tiles * kBK rows
  Value* qpack_ = nullptr;  // [d][bq]
  Value* stile_ = nullptr;  // [bq][kBK]: scores, then logits, then probabilities
  Value* acc_ = nullptr;    // [bq][dvp]
  llvm::AllocaInst* max_ = nullptr;     // [bq] running max
  llvm::AllocaInst* tmax_ = nullptr;    // [bq] the tile's max, then the offset of its p
  llvm::AllocaInst* alpha_ = nullptr;   // [bq] the tile's rescale of l and acc
  llvm::AllocaInst* lsum_ = nullptr;    // [bq][kSumLanes] running sum
  llvm::AllocaInst* packed_ = nullptr;  // the batch point K and V are packed for, or -1
  const Expr* mask_ = nullptr;          // AttentionPattern::key_mask
  llvm::AllocaInst* live_ = nullptr;    // [tiles] i8, with a key mask
  // The key count and its tiles: constants, or read at run time where the key count is a size
  // slot (AttentionPattern::keys_slot: one kernel for a cache read to any length).
  Value* lk_ = nullptr;
  Value* tiles_ = nullptr;
  // The query rows and their blocks: constants, or read at run time where the rows are a size
  // slot (one kernel for a prompt of any length; attention_unit_rows).
  Value* lq_ = nullptr;
  Value* blocks_ = nullptr;
};

Expected<void> AttentionEmitter::mark_live_tiles() {
  return loop(i64(0), tiles_, 1, "lvt", [&](Value* t) -> Expected<void> {
    Value* j0 = b_.CreateMul(t, i64(kBK));
    Value* flag = b_.CreateInBoundsGEP(b_.getInt8Ty(), live_, t);
    b_.CreateStore(b_.getInt8(0), flag);
    return loop(i64(0), smin(i64(kBK), b_.CreateSub(lk_, j0)), 1, "lvj",
                [&](Value* jj) -> Expected<void> {
                  ex_->bind_var(p_.j_var, b_.CreateAdd(j0, jj));
                  Expected<Value*> c = emit(mask_);
                  if (!c) return std::unexpected(c.error());
                  Value* on = *c;
                  if (mask_->dtype != ir::DType::boolean)
                    on = emit_cast(b_, on, mask_->dtype, ir::DType::boolean);
                  Value* at_t = b_.CreateInBoundsGEP(b_.getInt8Ty(), live_, t);
                  b_.CreateStore(b_.CreateOr(b_.CreateLoad(b_.getInt8Ty(), at_t),
                                             b_.CreateZExt(on, b_.getInt8Ty())),
                                 at_t);
                  return {};
                });
  });
}

Expected<void> AttentionEmitter::if_live(Value* t, const char* name,
                                         const std::function<Expected<void>()>& body) {
  if (!mask_) return body();
  Value* live = b_.CreateICmpNE(
      b_.CreateLoad(b_.getInt8Ty(), b_.CreateInBoundsGEP(b_.getInt8Ty(), live_, t)), b_.getInt8(0));
  BasicBlock* run = BasicBlock::Create(ctx_, fmt::format("{}.live", name), fn_);
  BasicBlock* done = BasicBlock::Create(ctx_, fmt::format("{}.done", name), fn_);
  b_.CreateCondBr(live, run, done);
  b_.SetInsertPoint(run);
  ex_->forget();
  if (Expected<void> ok = body(); !ok) return ok;
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
  ex_->forget();
  return {};
}

void AttentionEmitter::create_function() {
  fn_ = create_kernel_function(m_, opt_);
  fn_->addFnAttr("min-legal-vector-width", std::to_string(std::max(g_.lanes, kSumLanes) * 32));
  b_.SetInsertPoint(BasicBlock::Create(ctx_, "entry", fn_));
  buffers_ = load_buffer_pointers(b_, fn_, k_.params.size());
  ex_ = std::make_unique<ExprEmitter>(b_, k_, buffers_);
  std::vector<Value*> sizes = load_size_values(b_, fn_, k_);
  lk_ = p_.keys_slot >= 0 ? sizes.at(static_cast<size_t>(p_.keys_slot)) : i64(g_.lk);
  tiles_ = b_.CreateUDiv(b_.CreateAdd(lk_, i64(kBK - 1)), i64(kBK), "tiles");
  const int32_t rows_slot = k_.domain_slot(static_cast<size_t>(g_.rank - 2));
  lq_ = rows_slot >= 0 ? sizes.at(static_cast<size_t>(rows_slot)) : i64(g_.lq);
  blocks_ = b_.CreateUDiv(b_.CreateAdd(lq_, i64(g_.bq - 1)), i64(g_.bq), "blocks");
  ex_->bind_sizes(std::move(sizes));
  vec_ = llvm::FixedVectorType::get(b_.getFloatTy(), static_cast<unsigned>(g_.lanes));
  sum_ = llvm::FixedVectorType::get(b_.getFloatTy(), static_cast<unsigned>(kSumLanes));
}

// One allocation per call (threads running disjoint chunks never share it); K's and V's padding
// is zeroed once and never written, so padded keys add exact zeros.
void AttentionEmitter::create_scratch() {
  max_ = b_.CreateAlloca(llvm::ArrayType::get(b_.getFloatTy(), static_cast<uint64_t>(g_.bq)));
  tmax_ = b_.CreateAlloca(llvm::ArrayType::get(b_.getFloatTy(), static_cast<uint64_t>(g_.bq)));
  alpha_ = b_.CreateAlloca(llvm::ArrayType::get(b_.getFloatTy(), static_cast<uint64_t>(g_.bq)));
  lsum_ = b_.CreateAlloca(
      llvm::ArrayType::get(b_.getFloatTy(), static_cast<uint64_t>(g_.bq * kSumLanes)));
  lsum_->setAlignment(llvm::Align(kSumLanes * 4));
  packed_ = b_.CreateAlloca(b_.getInt64Ty());
  b_.CreateStore(i64(-1), packed_);
  mask_ = p_.key_mask;
  if (mask_) live_ = b_.CreateAlloca(b_.getInt8Ty(), tiles_);
  // K's and V's packs hold whole tiles (kBK is a multiple of kAlign / 4: their bytes are
  // aligned); the rest is fixed.
  static_assert(kBK * 4 % kAlign == 0);
  Value* k_bytes = b_.CreateMul(tiles_, i64(g_.d * kBK * 4), "k.bytes");
  Value* v_bytes = b_.CreateMul(tiles_, i64(kBK * g_.dvp * 4), "v.bytes");
  const int64_t q_bytes = round_up(g_.d * g_.bq * 4, kAlign);
  const int64_t s_bytes = round_up(g_.bq * kBK * 4, kAlign);
  const int64_t a_bytes = round_up(g_.bq * g_.dvp * 4, kAlign);
  Value* kv_bytes = b_.CreateAdd(k_bytes, v_bytes);
  scratch_ = emit_malloc_or_trap(
      b_, fn_, b_.CreateAdd(kv_bytes, i64(q_bytes + s_bytes + a_bytes + kAlign)), "scratch");
  Value* addr = b_.CreatePtrToInt(scratch_, b_.getInt64Ty());
  Value* pad = b_.CreateAnd(b_.CreateSub(i64(0), addr), i64(kAlign - 1));
  kpack_ = b_.CreateInBoundsGEP(b_.getInt8Ty(), scratch_, pad, "k.pack");
  vpack_ = b_.CreateInBoundsGEP(b_.getInt8Ty(), kpack_, k_bytes, "v.pack");
  qpack_ = b_.CreateInBoundsGEP(b_.getInt8Ty(), vpack_, v_bytes, "q.pack");
  stile_ = b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), qpack_, q_bytes, "s.tile");
  acc_ = b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), stile_, s_bytes, "acc");
  // Keys past the last and V's columns past dv are zeros that the packs never write: only where
  // there are any (the whole 128 KiB of a decode step's head was cleared at every call).
  Value* padded = b_.CreateOr(b_.CreateICmpNE(b_.CreateSRem(lk_, i64(kBK)), i64(0)),
                              b_.getInt1(g_.dvp != g_.dv));
  b_.CreateMemSet(kpack_, b_.getInt8(0), b_.CreateSelect(padded, kv_bytes, i64(0)),
                  llvm::MaybeAlign(kAlign));
}

// K as [tile][d][key in tile] and V as [key][e], for the bound batch point. K's rows are written
// in order (a tile's keys at one d, vectorized, its loads strided): written a key at a time, each
// key's d values went kBK floats apart, one scalar store each, and a decode step's attention (one
// query row, 8 heads of 512 keys by 32) spent most of its 100 us packing.
Expected<void> AttentionEmitter::pack_kv() {
  if (mask_)
    if (Expected<void> ok = mark_live_tiles(); !ok) return ok;
  Expected<void> ok = loop(i64(0), tiles_, 1, "pkt", [&](Value* t) {
    return if_live(t, "pkt", [&] { return pack_k_tile(t); });
  });
  if (!ok) return ok;
  return loop(i64(0), tiles_, 1, "pvt",
              [&](Value* t) { return if_live(t, "pvt", [&] { return pack_v_tile(t); }); });
}

Expected<void> AttentionEmitter::pack_k_tile(Value* t) {
  Value* j0 = b_.CreateMul(t, i64(kBK));
  Value* tile = b_.CreateMul(t, i64(g_.d * kBK));
  // A full tile (every tile but the last) copies kBK keys a row, a count the vectorizer sees:
  // with the count read at run time, a decode step's attention ran 15% longer.
  return full_or_partial(j0, "pk", [&](Value* keys) {
    return loop(i64(0), i64(g_.d), 1, "pkd", [&](Value* d) -> Expected<void> {
      Value* row = b_.CreateAdd(tile, b_.CreateMul(d, i64(kBK)));
      return loop(
          i64(0), keys, 1, "pkj",
          [&](Value* jj) -> Expected<void> {
            ex_->bind_var(p_.j_var, b_.CreateAdd(j0, jj));
            ex_->bind_var(p_.d_var, d);
            Expected<Value*> v = emit(p_.key);
            if (!v) return std::unexpected(v.error());
            b_.CreateStore(*v, at(kpack_, b_.CreateAdd(row, jj)));
            return {};
          },
          vectorize_hints(ctx_, static_cast<int>(g_.lanes), 0));
    });
  });
}

Expected<void> AttentionEmitter::full_or_partial(
    Value* j0, const char* name, const std::function<Expected<void>(Value*)>& body) {
  Value* keys = smin(i64(kBK), b_.CreateSub(lk_, j0));
  BasicBlock* full = BasicBlock::Create(ctx_, fmt::format("{}.full", name), fn_);
  BasicBlock* partial = BasicBlock::Create(ctx_, fmt::format("{}.partial", name), fn_);
  BasicBlock* done = BasicBlock::Create(ctx_, fmt::format("{}.done", name), fn_);
  b_.CreateCondBr(b_.CreateICmpEQ(keys, i64(kBK)), full, partial);
  for (auto [block, count] : {std::pair{full, i64(kBK)}, std::pair{partial, keys}}) {
    b_.SetInsertPoint(block);
    ex_->forget();
    if (Expected<void> ok = body(count); !ok) return ok;
    b_.CreateBr(done);
  }
  b_.SetInsertPoint(done);
  ex_->forget();
  return {};
}

// V's rows are copied whole, a row of dv at a time: the loop over the keys stays a scalar loop
// (vectorized across the keys, as LLVM did where their count was a constant, each row became
// dv gathers and scatters, and a decode step's attention ran 2.4 times as long).
Expected<void> AttentionEmitter::pack_v_tile(Value* t) {
  Value* j0 = b_.CreateMul(t, i64(kBK));
  return full_or_partial(j0, "pv", [&](Value* keys) {
    return loop(
        j0, b_.CreateAdd(j0, keys), 1, "pv",
        [&](Value* j) {
          Value* row = b_.CreateMul(j, i64(g_.dvp));
          return loop(
              i64(0), i64(g_.dv), 1, "pve",
              [&](Value* e) -> Expected<void> {
                ex_->bind_var(p_.j_var, j);
                ex_->bind_var(p_.e_var, e);
                Expected<Value*> v = emit(p_.value);
                if (!v) return std::unexpected(v.error());
                b_.CreateStore(*v, at(vpack_, b_.CreateAdd(row, e)));
                return {};
              },
              vectorize_hints(ctx_, static_cast<int>(g_.lanes), 0));
        },
        no_vectorize_hint(ctx_));
  });
}

// qpack[d][r] = q(min(i0 + r, lq - 1), d): rows past the axis repeat the last one (their loads
// stay in range; their results are never stored).
Expected<void> AttentionEmitter::pack_q(Value* i0) {
  return loop(i64(0), i64(g_.bq), 1, "pq", [&](Value* r) -> Expected<void> {
    Value* i = smin(b_.CreateAdd(i0, r), b_.CreateSub(lq_, i64(1)));
    return loop(i64(0), i64(g_.d), 1, "pqd", [&](Value* d) -> Expected<void> {
      ex_->bind_var(p_.i_var, i);
      ex_->bind_var(p_.d_var, d);
      Expected<Value*> v = emit(p_.query);
      if (!v) return std::unexpected(v.error());
      b_.CreateStore(*v, at(qpack_, b_.CreateAdd(b_.CreateMul(d, i64(g_.bq)), r)));
      return {};
    });
  });
}

// stile[r][jj] = sum over d (in order) of qpack[d][r] * kpack[t][d][jj], mr rows by nv vectors
// at a time in registers.
void AttentionEmitter::scores(Value* t) {
  const int64_t total = kBK / g_.lanes;
  Value* kt = at(kpack_, b_.CreateMul(t, i64(g_.d * kBK)));
  for (int64_t v0 = 0; v0 < total; v0 += g_.nv) {
    const int64_t vecs = std::min(g_.nv, total - v0);
    Expected<void> ok = loop(i64(0), i64(g_.bq), g_.mr, "sr", [&](Value* r0) -> Expected<void> {
      std::vector<llvm::AllocaInst*> acc;
      {
        llvm::IRBuilderBase::InsertPointGuard guard(b_);
        b_.SetInsertPoint(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
        for (int64_t i = 0; i < g_.mr * vecs; ++i) acc.push_back(b_.CreateAlloca(vec_));
      }
      for (llvm::AllocaInst* a : acc) b_.CreateStore(llvm::ConstantFP::get(vec_, 0.0), a);
      Expected<void> inner = loop(i64(0), i64(g_.d), 1, "sd", [&](Value* d) -> Expected<void> {
        std::vector<Value*> kv;
        for (int64_t v = 0; v < vecs; ++v)
          kv.push_back(b_.CreateAlignedLoad(
              vec_, at(kt, b_.CreateAdd(b_.CreateMul(d, i64(kBK)), i64((v0 + v) * g_.lanes))),
              llvm::Align(g_.lanes * 4)));
        for (int64_t r = 0; r < g_.mr; ++r) {
          Value* q = b_.CreateLoad(
              b_.getFloatTy(),
              at(qpack_, b_.CreateAdd(b_.CreateMul(d, i64(g_.bq)), b_.CreateAdd(r0, i64(r)))));
          Value* splat = b_.CreateVectorSplat(static_cast<unsigned>(g_.lanes), q);
          for (int64_t v = 0; v < vecs; ++v) {
            llvm::AllocaInst* a = acc[static_cast<size_t>(r * vecs + v)];
            b_.CreateStore(b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vec_},
                                              {splat, kv[static_cast<size_t>(v)], b_.CreateLoad(vec_, a)}),
                           a);
          }
        }
        return {};
      });
      if (!inner) return inner;
      for (int64_t r = 0; r < g_.mr; ++r)
        for (int64_t v = 0; v < vecs; ++v) {
          Value* row = b_.CreateMul(b_.CreateAdd(r0, i64(r)), i64(kBK));
          b_.CreateAlignedStore(b_.CreateLoad(vec_, acc[static_cast<size_t>(r * vecs + v)]),
                                at(stile_, b_.CreateAdd(row, i64((v0 + v) * g_.lanes))),
                                llvm::Align(g_.lanes * 4));
        }
      return {};
    });
    KILN_CHECK(ok.has_value()) << "the scores' micro-kernel emits no kernel expression";
  }
}

// stile[r][jj] = logits(i, j0 + jj) with the scores bound to stile[r][jj]; -inf past the keys.
// Under a causal mask, a tile whose keys every row of the block sees (and all within the keys)
// takes the mask's visible branch alone: the same values without a compare and select per score.
Expected<void> AttentionEmitter::logits(Value* j0, Value* i0) {
  if (!p_.causal_offset) return logits_pass(j0, i0, p_.logits, true);
  const Expr* visible = p_.logits->args[1];
  Value* last = b_.CreateAdd(j0, i64(kBK - 1));
  Value* interior = b_.CreateAnd(b_.CreateICmpSLE(last, b_.CreateAdd(i0, i64(*p_.causal_offset))),
                                 b_.CreateICmpSLT(last, lk_));
  BasicBlock* inside = BasicBlock::Create(ctx_, "lg.interior", fn_);
  BasicBlock* edge = BasicBlock::Create(ctx_, "lg.edge", fn_);
  BasicBlock* done = BasicBlock::Create(ctx_, "lg.done", fn_);
  b_.CreateCondBr(interior, inside, edge);
  b_.SetInsertPoint(inside);
  if (Expected<void> ok = logits_pass(j0, i0, visible, false); !ok) return ok;
  b_.CreateBr(done);
  b_.SetInsertPoint(edge);
  ex_->forget();
  if (Expected<void> ok = logits_pass(j0, i0, p_.logits, true); !ok) return ok;
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
  ex_->forget();
  return {};
}

Expected<void> AttentionEmitter::logits_pass(Value* j0, Value* i0, const Expr* x, bool guard) {
  return loop(i64(0), i64(g_.bq), 1, "lr", [&](Value* r) -> Expected<void> {
    Value* i = smin(b_.CreateAdd(i0, r), b_.CreateSub(lq_, i64(1)));
    Value* row = b_.CreateMul(r, i64(kBK));
    return loop(
        i64(0), i64(kBK), 1, "lj",
        [&](Value* jj) -> Expected<void> {
          Value* j = b_.CreateAdd(j0, jj);
          Value* slot = at(stile_, b_.CreateAdd(row, jj));
          ex_->bind_var(p_.i_var, i);
          ex_->bind_var(p_.j_var, guard ? smin(j, b_.CreateSub(lk_, i64(1))) : j);
          ex_->bind_expr(p_.scores, b_.CreateLoad(b_.getFloatTy(), slot));
          Expected<Value*> v = emit(x);
          if (!v) return std::unexpected(v.error());
          Value* inf = f32(-std::numeric_limits<double>::infinity());
          b_.CreateStore(guard ? b_.CreateSelect(b_.CreateICmpSLT(j, lk_), *v, inf) : *v, slot);
          return {};
        },
        vectorize_hints(ctx_, static_cast<int>(g_.lanes), 0));
  });
}

// The larger of a and b where neither is NaN (x86's max: b where either is). A NaN logit makes
// its row NaN however the maxima pick: its p = exp(NaN - m) is NaN, and so are l and acc from then
// on (every later step multiplies or adds them), as in the reference, whose max is NaN.
Value* AttentionEmitter::fast_max(Value* a, Value* b) {
  return b_.CreateSelect(b_.CreateFCmpOGT(a, b), a, b);
}

// In three passes, so that rows do not wait on one another:
//   1. per row, the tile's max (tmax);
//   2. over the rows (vectorized): m_new = max(m, tmax), alpha = exp(m - m_new) (1 while every
//      logit so far is -inf), and the offset p is taken at: m_new, or 0 while m_new = -inf, so that
//      masked keys before the first visible one give p = exp(-inf) = 0;
//   3. per row, p = exp(x - offset) in place and l = l * alpha + p (16 fixed lanes).
// Both exps take arguments <= 0 only (a max is subtracted): emit_exp_nonpositive_f32, whose chain
// of dependent steps is shorter than emit_exp_f32's.
// acc *= alpha is done as accumulate() loads acc. A row with no visible key ends 0 / 0 = NaN like
// the reference's exp(-inf - -inf).
Expected<void> AttentionEmitter::softmax() {
  Expected<void> ok = loop(i64(0), i64(g_.bq), 1, "smx", [&](Value* r) -> Expected<void> {
    Value* row = at(stile_, b_.CreateMul(r, i64(kBK)));
    Value* mx = nullptr;
    for (int64_t c = 0; c < kBK / kSumLanes; ++c) {
      Value* x = b_.CreateAlignedLoad(sum_, at(row, c * kSumLanes), llvm::Align(kSumLanes * 4));
      mx = mx ? fast_max(mx, x) : x;
    }
    for (int64_t w = kSumLanes / 2; w >= 1; w /= 2) {
      std::vector<int> lo, hi;
      for (int64_t i = 0; i < w; ++i) {
        lo.push_back(static_cast<int>(i));
        hi.push_back(static_cast<int>(i + w));
      }
      mx = fast_max(b_.CreateShuffleVector(mx, lo), b_.CreateShuffleVector(mx, hi));
    }
    b_.CreateStore(b_.CreateExtractElement(mx, uint64_t{0}), at(tmax_, r));
    return {};
  });
  if (!ok) return ok;
  const double ninf = -std::numeric_limits<double>::infinity();
  ok = loop(
      i64(0), i64(g_.bq), 1, "sma",
      [&](Value* r) -> Expected<void> {
        Value* m_at = at(max_, r);
        Value* t_at = at(tmax_, r);
        Value* m_old = b_.CreateLoad(b_.getFloatTy(), m_at);
        Value* m_new = fast_max(m_old, b_.CreateLoad(b_.getFloatTy(), t_at));
        Value* dead = b_.CreateFCmpOEQ(m_new, f32(ninf));
        Value* alpha = b_.CreateSelect(dead, f32(1.0),
                                       emit_exp_nonpositive_f32(b_, b_.CreateFSub(m_old, m_new)));
        b_.CreateStore(m_new, m_at);
        b_.CreateStore(b_.CreateSelect(dead, f32(0.0), m_new), t_at);
        b_.CreateStore(alpha, at(alpha_, r));
        return {};
      },
      vectorize_hints(ctx_, static_cast<int>(std::min<int64_t>(kSumLanes, g_.bq)), 0));
  if (!ok) return ok;
  return loop(i64(0), i64(g_.bq), 1, "sm", [&](Value* r) -> Expected<void> {
    Value* offset = b_.CreateLoad(b_.getFloatTy(), at(tmax_, r));
    Value* row = at(stile_, b_.CreateMul(r, i64(kBK)));
    Expected<void> exp_ok = loop(
        i64(0), i64(kBK), 1, "se",
        [&](Value* jj) -> Expected<void> {
          Value* slot = at(row, jj);
          Value* x = b_.CreateLoad(b_.getFloatTy(), slot);
          b_.CreateStore(emit_exp_nonpositive_f32(b_, b_.CreateFSub(x, offset)), slot);
          return {};
        },
        vectorize_hints(ctx_, static_cast<int>(g_.lanes), 0));
    if (!exp_ok) return exp_ok;
    // The loop's exit block: reload the row base (values of the body do not reach here).
    row = at(stile_, b_.CreateMul(r, i64(kBK)));
    Value* s = nullptr;
    for (int64_t c = 0; c < kBK / kSumLanes; ++c) {
      Value* p = b_.CreateAlignedLoad(sum_, at(row, c * kSumLanes), llvm::Align(kSumLanes * 4));
      s = s ? b_.CreateFAdd(s, p) : p;
    }
    Value* l_at = at(lsum_, b_.CreateMul(r, i64(kSumLanes)));
    Value* l = b_.CreateAlignedLoad(sum_, l_at, llvm::Align(kSumLanes * 4));
    Value* alpha_v = b_.CreateVectorSplat(kSumLanes, b_.CreateLoad(b_.getFloatTy(), at(alpha_, r)));
    b_.CreateAlignedStore(b_.CreateFAdd(b_.CreateFMul(l, alpha_v), s), l_at,
                          llvm::Align(kSumLanes * 4));
    return {};
  });
}

// acc[r][e] += sum over the tile's keys (in order) of p[r][jj] * V[j0 + jj][e]: r2 rows by e_vecs
// vectors at a time in registers.
void AttentionEmitter::accumulate(Value* j0) {
  const int64_t total = g_.dvp / g_.lanes;
  for (int64_t e0 = 0; e0 < total; e0 += g_.e_vecs) {
    const int64_t ev = std::min(g_.e_vecs, total - e0);
    Expected<void> ok = loop(i64(0), i64(g_.bq), g_.r2, "pr", [&](Value* r0) -> Expected<void> {
      std::vector<Value*> where;
      std::vector<Value*> acc;
      for (int64_t r = 0; r < g_.r2; ++r)
        for (int64_t v = 0; v < ev; ++v) {
          Value* a = at(acc_, b_.CreateAdd(b_.CreateMul(b_.CreateAdd(r0, i64(r)), i64(g_.dvp)),
                                           i64((e0 + v) * g_.lanes)));
          where.push_back(a);
        }
      std::vector<llvm::AllocaInst*> regs;
      {
        llvm::IRBuilderBase::InsertPointGuard guard(b_);
        b_.SetInsertPoint(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
        for (size_t i = 0; i < where.size(); ++i) regs.push_back(b_.CreateAlloca(vec_));
      }
      // acc *= alpha (softmax()) as the rows are loaded.
      for (int64_t r = 0; r < g_.r2; ++r) {
        Value* alpha = b_.CreateVectorSplat(
            static_cast<unsigned>(g_.lanes),
            b_.CreateLoad(b_.getFloatTy(), at(alpha_, b_.CreateAdd(r0, i64(r)))));
        for (int64_t v = 0; v < ev; ++v) {
          const size_t i = static_cast<size_t>(r * ev + v);
          b_.CreateStore(
              b_.CreateFMul(b_.CreateAlignedLoad(vec_, where[i], llvm::Align(g_.lanes * 4)), alpha),
              regs[i]);
        }
      }
      Expected<void> inner = loop(i64(0), i64(kBK), 1, "pj", [&](Value* jj) -> Expected<void> {
        Value* vrow = at(vpack_, b_.CreateMul(b_.CreateAdd(j0, jj), i64(g_.dvp)));
        std::vector<Value*> vv;
        for (int64_t v = 0; v < ev; ++v)
          vv.push_back(b_.CreateAlignedLoad(vec_, at(vrow, (e0 + v) * g_.lanes),
                                            llvm::Align(g_.lanes * 4)));
        for (int64_t r = 0; r < g_.r2; ++r) {
          Value* p = b_.CreateLoad(
              b_.getFloatTy(),
              at(stile_, b_.CreateAdd(b_.CreateMul(b_.CreateAdd(r0, i64(r)), i64(kBK)), jj)));
          Value* splat = b_.CreateVectorSplat(static_cast<unsigned>(g_.lanes), p);
          for (int64_t v = 0; v < ev; ++v) {
            llvm::AllocaInst* a = regs[static_cast<size_t>(r * ev + v)];
            b_.CreateStore(b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vec_},
                                              {splat, vv[static_cast<size_t>(v)], b_.CreateLoad(vec_, a)}),
                           a);
          }
        }
        return {};
      });
      if (!inner) return inner;
      for (int64_t r = 0; r < g_.r2; ++r)
        for (int64_t v = 0; v < ev; ++v) {
          Value* a = at(acc_, b_.CreateAdd(b_.CreateMul(b_.CreateAdd(r0, i64(r)), i64(g_.dvp)),
                                           i64((e0 + v) * g_.lanes)));
          b_.CreateAlignedStore(b_.CreateLoad(vec_, regs[static_cast<size_t>(r * ev + v)]), a,
                                llvm::Align(g_.lanes * 4));
        }
      return {};
    });
    KILN_CHECK(ok.has_value()) << "the p·V micro-kernel emits no kernel expression";
  }
}

// A tile whose keys the key mask hides from every row adds nothing (its p are exp(-inf) = 0, its
// max leaves the running max as it is) and is skipped, K and V unpacked, as a causal mask's are.
Expected<void> AttentionEmitter::key_tile(Value* t, Value* i0) {
  return if_live(t, "kt", [&]() -> Expected<void> {
    Value* j0 = b_.CreateMul(t, i64(kBK));
    scores(t);
    if (Expected<void> ok = logits(j0, i0); !ok) return ok;
    if (Expected<void> ok = softmax(); !ok) return ok;
    accumulate(j0);
    return {};
  });
}

// The stores of every point of the block's real rows, the attention bound to acc / l (0 over no
// keys: a sum over nothing).
Expected<void> AttentionEmitter::finish(Value* i0, Value* rows) {
  return loop(i64(0), rows, 1, "fr", [&](Value* r) -> Expected<void> {
    Value* l_at = at(lsum_, b_.CreateMul(r, i64(kSumLanes)));
    Value* lv = b_.CreateAlignedLoad(sum_, l_at, llvm::Align(kSumLanes * 4));
    // A fixed tree: halves added lane by lane down to one.
    for (int64_t w = kSumLanes / 2; w >= 1; w /= 2) {
      std::vector<int> lo, hi;
      for (int64_t i = 0; i < w; ++i) {
        lo.push_back(static_cast<int>(i));
        hi.push_back(static_cast<int>(i + w));
      }
      lv = b_.CreateFAdd(b_.CreateShuffleVector(lv, lo), b_.CreateShuffleVector(lv, hi));
    }
    Value* l = b_.CreateExtractElement(lv, uint64_t{0});
    Value* i = b_.CreateAdd(i0, r);
    Value* acc_row = at(acc_, b_.CreateMul(r, i64(g_.dvp)));
    return loop(i64(0), i64(g_.dv), 1, "fe", [&](Value* e) -> Expected<void> {
      ex_->bind_var(p_.i_var, i);
      ex_->bind_var(p_.e_var, e);
      Value* value =
          b_.CreateSelect(b_.CreateICmpEQ(lk_, i64(0)), f32(0.0),
                          b_.CreateFDiv(b_.CreateLoad(b_.getFloatTy(), at(acc_row, e)), l));
      ex_->bind_expr(p_.reduce, value);
      return store_all();
    });
  });
}

Expected<void> AttentionEmitter::store_all() {
  return emit_stores(b_, k_, *ex_, buffers_);
}

// Work unit u = (batch point, block of query rows), the block fastest.
Expected<void> AttentionEmitter::unit(Value* u) {
  Value* bp = b_.CreateUDiv(u, blocks_);
  Value* qb = b_.CreateURem(u, blocks_);
  // The batch variables, innermost fastest.
  Value* rest = bp;
  for (int64_t a = g_.rank - 3; a >= 0; --a) {
    const int64_t ext = k_.domain[static_cast<size_t>(a)];
    ex_->bind_var(static_cast<int32_t>(a), b_.CreateURem(rest, i64(ext)));
    rest = b_.CreateUDiv(rest, i64(ext));
  }
  // K and V once per batch point met by this call.
  BasicBlock* pack = BasicBlock::Create(ctx_, "pack", fn_);
  BasicBlock* packed = BasicBlock::Create(ctx_, "packed", fn_);
  b_.CreateCondBr(b_.CreateICmpNE(bp, b_.CreateLoad(b_.getInt64Ty(), packed_)), pack, packed);
  b_.SetInsertPoint(pack);
  if (Expected<void> ok = pack_kv(); !ok) return ok;
  b_.CreateStore(bp, packed_);
  b_.CreateBr(packed);
  b_.SetInsertPoint(packed);
  ex_->forget();

  Value* i0 = b_.CreateMul(qb, i64(g_.bq));
  Value* rows = smin(i64(g_.bq), b_.CreateSub(lq_, i0));
  if (Expected<void> ok = pack_q(i0); !ok) return ok;
  const double ninf = -std::numeric_limits<double>::infinity();
  for (int64_t r = 0; r < g_.bq; ++r) b_.CreateStore(f32(ninf), at(max_, r));
  b_.CreateMemSet(lsum_, b_.getInt8(0), i64(g_.bq * kSumLanes * 4), llvm::MaybeAlign(4));
  b_.CreateMemSet(acc_, b_.getInt8(0), i64(g_.bq * g_.dvp * 4), llvm::MaybeAlign(kAlign));
  Value* tiles = tiles_;
  if (p_.causal_offset) {
    // Keys past the block's last row + offset are masked for every row of the block.
    Value* visible = b_.CreateAdd(b_.CreateAdd(i0, rows), i64(*p_.causal_offset));
    visible = smax(smin(visible, lk_), i64(0));
    tiles = b_.CreateUDiv(b_.CreateAdd(visible, i64(kBK - 1)), i64(kBK));
  }
  if (Expected<void> ok =
          loop(i64(0), tiles, 1, "kt", [&](Value* t) { return key_tile(t, i0); });
      !ok)
    return ok;
  return finish(i0, rows);
}

Expected<llvm::Function*> AttentionEmitter::run() {
  create_function();
  if (g_.units() > 0) {
    create_scratch();
    Expected<void> ok = loop(fn_->getArg(1), fn_->getArg(2), 1, "u",
                             [&](Value* u) { return unit(u); });
    if (!ok) return std::unexpected(ok.error());
    emit_free(b_, scratch_);
  }
  b_.CreateRetVoid();
  // The scratch (a fresh allocation) is one more scope: the packs' loads from the buffers and
  // stores into it need no overlap checks, and a row of V is copied with vector loads and stores
  // (it was 32 scalar copies a key).
  std::vector<Value*> scoped = buffers_;
  if (scratch_) scoped.push_back(scratch_);
  add_buffer_alias_scopes(*fn_, scoped);
  return fn_;
}

}  // namespace

Expected<llvm::Function*> emit_attention_kernel(const kir::Kernel& kernel,
                                                const kir::AttentionPattern& p,
                                                const EmitOptions& options, llvm::Module& module) {
  return AttentionEmitter(kernel, p, options, module).run();
}

int64_t attention_units(const kir::Kernel& kernel, const EmitOptions& options) {
  KILN_CHECK(options.facts && options.facts->attention)
      << "attention_units needs the kernel's attention pattern (" << kernel.name << ")";
  return geometry(kernel, *options.facts->attention, options).units();
}

int64_t attention_unit_rows(const kir::Kernel& kernel, const EmitOptions& options) {
  KILN_CHECK(options.facts && options.facts->attention)
      << "attention_unit_rows needs the kernel's attention pattern (" << kernel.name << ")";
  if (kernel.domain.size() < 2 || kernel.domain_slot(kernel.domain.size() - 2) < 0) return 0;
  return geometry(kernel, *options.facts->attention, options).bq;
}

}  // namespace kiln::codegen::cpu
