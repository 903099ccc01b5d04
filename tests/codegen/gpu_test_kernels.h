// Hand-built kernels for GPU source tests: every ALU op on every dtype it allows, every cast,
// every reduction in row, whole-input and per-thread shapes, nested reductions, and matmuls with
// prologues and epilogues.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "codegen/check_mode.h"
#include "ir/kernel_ir.h"

namespace kiln::codegen::gpu {

using ir::DType;
using kir::Alu;
using kir::ReduceOp;

inline constexpr int64_t kN = 64;

inline bool is_bool(DType t) { return t == DType::boolean; }

inline std::vector<Alu> unary_ops(DType t) {
  if (is_bool(t)) return {Alu::Not};
  if (!ir::is_float(t)) return {Alu::Neg, Alu::Abs, Alu::Relu, Alu::Sign};
  return {Alu::Neg,  Alu::Abs,  Alu::Exp,     Alu::Log,  Alu::Sqrt, Alu::Rsqrt,
          Alu::Recip, Alu::Sin, Alu::Cos,     Alu::Tanh, Alu::Erf,  Alu::Sigmoid,
          Alu::Gelu, Alu::Relu, Alu::Floor,   Alu::Ceil, Alu::Sign};
}

inline std::vector<Alu> binary_ops(DType t) {
  if (is_bool(t)) return {Alu::Max, Alu::Min, Alu::And, Alu::Or};
  if (!ir::is_float(t))
    return {Alu::Add, Alu::Sub, Alu::Mul, Alu::Div, Alu::IDiv, Alu::Mod, Alu::Max, Alu::Min, Alu::And, Alu::Or};
  return {Alu::Add, Alu::Sub, Alu::Mul, Alu::Div, Alu::Pow, Alu::Max, Alu::Min};
}

// out_k[v0] = op_k(x[v0], y[v0]) for every op t allows, plus compares, where, clip and casts, split
// into kernels of at most `max_outputs` outputs (devices limit storage buffers per shader).
inline std::vector<kir::Kernel> alu_kernels(DType t, size_t max_outputs) {
  auto arena = std::make_shared<kir::ExprArena>();
  kir::ExprArena& a = *arena;
  const kir::Expr* i = a.var(0);
  const kir::Expr* x = a.load(0, t, i);
  const kir::Expr* y = a.load(1, t, i);
  std::vector<kir::Kernel> ks;
  auto out = [&](DType dt, const kir::Expr* v) {
    if (ks.empty() || ks.back().stores.size() == max_outputs) {
      kir::Kernel k;
      k.name = fmt::format("alu_{}_{}", ir::dtype_name(t), ks.size());
      k.arena = arena;
      k.domain = {kN};
      k.params = {{t, {kN}, false, "x"}, {t, {kN}, false, "y"}, {DType::boolean, {kN}, false, "c"}};
      ks.push_back(std::move(k));
    }
    kir::Kernel& k = ks.back();
    k.params.push_back({dt, {kN}, true, "o"});
    k.stores.push_back({static_cast<int32_t>(k.params.size() - 1), i, v});
  };
  for (Alu op : unary_ops(t)) out(t, a.alu(op, t, {x}));
  for (Alu op : binary_ops(t)) {
    if (op != Alu::IDiv && op != Alu::Mod) {
      out(t, a.alu(op, t, {x, y}));
      continue;
    }
    // index arithmetic: operands >= 0, divisor > 0
    const kir::Expr* nx = a.alu(Alu::And, t, {x, a.constant(t, 0x7f)});
    const kir::Expr* ny = a.alu(Alu::Add, t, {a.alu(Alu::And, t, {y, a.constant(t, 0x3f)}), a.constant(t, 1)});
    out(t, a.alu(op, t, {nx, ny}));
  }
  for (Alu op : {Alu::Eq, Alu::Ne, Alu::Lt, Alu::Le, Alu::Gt, Alu::Ge})
    out(DType::boolean, a.alu(op, DType::boolean, {x, y}));
  out(t, a.alu(Alu::Where, t, {a.load(2, DType::boolean, i), x, y}));
  out(t, a.alu(Alu::Where, t, {x, y, x}));  // a non-bool condition counts as != 0
  if (!is_bool(t)) {  // clip: ordered bounds, lo > hi (gives hi), constant bounds
    out(t, a.alu(Alu::Clip, t, {x, y, a.alu(Alu::Max, t, {x, y})}));
    out(t, a.alu(Alu::Clip, t, {y, x, y}));
    out(t, a.alu(Alu::Clip, t, {x, a.constant(t, 1), a.constant(t, 5)}));
  }
  for (DType to : ir::kAllDTypes) out(to, a.alu(Alu::Cast, to, {x}));
  out(t, a.alu(is_bool(t) ? Alu::Or : Alu::Add, t, {x, a.constant(t, is_bool(t) ? 1 : -3)}));
  return ks;
}

inline bool op_allowed(ReduceOp op, DType t) {
  return !is_bool(t) || (op != ReduceOp::Sum && op != ReduceOp::Prod);
}
inline bool is_arg(ReduceOp op) { return op == ReduceOp::ArgMax || op == ReduceOp::ArgMin; }

// Per dtype: out_r[row] = R over v<extent of x[row * extent + v] for every reduction R. Rank 0
// (rows = 0) reduces the whole input to scalars.
inline kir::Kernel reduce_kernel(DType t, int64_t rows, int64_t extent) {
  kir::Kernel k;
  k.name = fmt::format("reduce_{}_{}x{}", ir::dtype_name(t), rows, extent);
  k.arena = std::make_shared<kir::ExprArena>();
  kir::ExprArena& a = *k.arena;
  const int64_t n = std::max<int64_t>(rows, 1);
  if (rows > 0) k.domain = {rows};
  k.params = {{t, {n * extent}, false, "x"}};
  const int32_t rv = rows > 0 ? 1 : 0;
  const kir::Expr* row = rows > 0 ? a.var(0) : a.index(0);
  const kir::Expr* idx = a.alu(Alu::Add, DType::i64, {a.alu(Alu::Mul, DType::i64, {row, a.index(extent)}), a.var(rv)});
  const kir::Expr* x = a.load(0, t, idx);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min, ReduceOp::ArgMax, ReduceOp::ArgMin}) {
    if (!op_allowed(op, t)) continue;
    const DType rt = is_arg(op) ? DType::i32 : t;
    k.params.push_back({rt, {n}, true, "o"});
    k.stores.push_back({static_cast<int32_t>(k.params.size() - 1), row, a.reduce(op, rt, x, {rv}, {extent})});
  }
  return k;
}

// Per dtype, column reductions: out_r[o, c] = R over v<rows of x[o, v, c] for every reduction R
// (the reductions read along the innermost output axis: Strategy::cols).
inline kir::Kernel column_kernel(DType t, int64_t outer, int64_t rows, int64_t cols) {
  kir::Kernel k;
  k.name = fmt::format("columns_{}_{}x{}x{}", ir::dtype_name(t), outer, rows, cols);
  k.arena = std::make_shared<kir::ExprArena>();
  kir::ExprArena& a = *k.arena;
  const DType L = DType::i64;
  k.domain = {outer, cols};
  k.params = {{t, {outer, rows, cols}, false, "x"}};
  const kir::Expr* plane = a.alu(Alu::Mul, L, {a.alu(Alu::Add, L, {a.alu(Alu::Mul, L, {a.var(0), a.index(rows)}), a.var(2)}), a.index(cols)});
  const kir::Expr* x = a.load(0, t, a.alu(Alu::Add, L, {plane, a.var(1)}));
  const kir::Expr* self = a.alu(Alu::Add, L, {a.alu(Alu::Mul, L, {a.var(0), a.index(cols)}), a.var(1)});
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min, ReduceOp::ArgMax, ReduceOp::ArgMin}) {
    if (!op_allowed(op, t)) continue;
    const DType rt = is_arg(op) ? DType::i32 : t;
    k.params.push_back({rt, {outer, cols}, true, "o"});
    k.stores.push_back({static_cast<int32_t>(k.params.size() - 1), self, a.reduce(op, rt, x, {2}, {rows})});
  }
  return k;
}

// softmax over the leading axis of x[rows, cols]: a column max feeding a column sum whose body
// reads it, both reading along the innermost axis.
inline kir::Kernel column_softmax_kernel(int64_t rows, int64_t cols) {
  kir::Kernel k;
  k.name = fmt::format("column_softmax_{}x{}", rows, cols);
  k.arena = std::make_shared<kir::ExprArena>();
  kir::ExprArena& a = *k.arena;
  const DType f = DType::f32, L = DType::i64;
  k.domain = {rows, cols};
  k.params = {{f, {rows, cols}, false, "x"}, {f, {rows, cols}, true, "y"}};
  auto at = [&](const kir::Expr* r) {
    return a.load(0, f, a.alu(Alu::Add, L, {a.alu(Alu::Mul, L, {r, a.index(cols)}), a.var(1)}));
  };
  const kir::Expr* mx = a.reduce(ReduceOp::Max, f, at(a.var(2)), {2}, {rows});
  const kir::Expr* sum = a.reduce(ReduceOp::Sum, f, a.alu(Alu::Exp, f, {a.alu(Alu::Sub, f, {at(a.var(3)), mx})}), {3}, {rows});
  const kir::Expr* self = a.alu(Alu::Add, L, {a.alu(Alu::Mul, L, {a.var(0), a.index(cols)}), a.var(1)});
  k.stores.push_back({1, self, a.alu(Alu::Div, f, {a.alu(Alu::Exp, f, {a.alu(Alu::Sub, f, {at(a.var(0)), mx})}), sum})});
  return k;
}

// softmax-like: a row max feeding a row sum whose body reads the max, and a reduction over two
// variables nested in a per-column one.
inline kir::Kernel nested_kernel(int64_t rows, int64_t cols) {
  kir::Kernel k;
  k.name = "nested";
  k.arena = std::make_shared<kir::ExprArena>();
  kir::ExprArena& a = *k.arena;
  const DType f = DType::f32;
  k.domain = {rows, cols};
  k.params = {{f, {rows, cols}, false, "x"}, {f, {rows, cols}, true, "y"}, {DType::f16, {rows, cols}, true, "z"}};
  auto at = [&](const kir::Expr* r, const kir::Expr* c) {
    return a.load(0, f, a.alu(Alu::Add, DType::i64, {a.alu(Alu::Mul, DType::i64, {r, a.index(cols)}), c}));
  };
  const kir::Expr* mx = a.reduce(ReduceOp::Max, f, at(a.var(0), a.var(2)), {2}, {cols});
  const kir::Expr* e = a.alu(Alu::Exp, f, {a.alu(Alu::Sub, f, {at(a.var(0), a.var(3)), mx})});
  const kir::Expr* sum = a.reduce(ReduceOp::Sum, f, e, {3}, {cols});
  const kir::Expr* out = a.alu(Alu::Div, f, {a.alu(Alu::Exp, f, {a.alu(Alu::Sub, f, {at(a.var(0), a.var(1)), mx})}), sum});
  const kir::Expr* self = a.alu(Alu::Add, DType::i64, {a.alu(Alu::Mul, DType::i64, {a.var(0), a.index(cols)}), a.var(1)});
  k.stores.push_back({1, self, out});
  // per column: sum over (v4, v5) of x[v4, v5] * x[v4, v1] (both rvars, one column var)
  const kir::Expr* inner = a.reduce(ReduceOp::Sum, f, a.alu(Alu::Mul, f, {at(a.var(4), a.var(5)), at(a.var(4), a.var(1))}), {4, 5}, {rows, cols});
  k.stores.push_back({2, self, a.alu(Alu::Cast, DType::f16, {inner})});
  return k;
}

// out[b, i, j] = relu(sum_k f32(x[b, i, k]) * w[k, j] + bias[j]), x in i8 (a cast prologue), and
// a second output that does not use the reduction.
inline kir::Kernel matmul_kernel(int64_t batch, int64_t m, int64_t n, int64_t kk) {
  kir::Kernel k;
  k.name = fmt::format("matmul_{}x{}x{}x{}", batch, m, n, kk);
  k.arena = std::make_shared<kir::ExprArena>();
  kir::ExprArena& a = *k.arena;
  const DType f = DType::f32;
  k.domain = {batch, m, n};
  k.params = {{DType::i8, {batch, m, kk}, false, "x"}, {f, {kk, n}, false, "w"}, {f, {n}, false, "bias"},
              {f, {batch, m, n}, true, "y"}, {DType::i32, {batch, m, n}, true, "z"}};
  auto lin = [&](std::vector<const kir::Expr*> idx, std::vector<int64_t> dims) {
    const kir::Expr* r = idx[0];
    for (size_t i = 1; i < idx.size(); ++i)
      r = a.alu(Alu::Add, DType::i64, {a.alu(Alu::Mul, DType::i64, {r, a.index(dims[i])}), idx[i]});
    return r;
  };
  const kir::Expr* xv = a.alu(Alu::Cast, f, {a.load(0, DType::i8, lin({a.var(0), a.var(1), a.var(3)}, {batch, m, kk}))});
  const kir::Expr* wv = a.load(1, f, lin({a.var(3), a.var(2)}, {kk, n}));
  const kir::Expr* r = a.reduce(ReduceOp::Sum, f, a.alu(Alu::Mul, f, {xv, wv}), {3}, {kk});
  const kir::Expr* out = a.alu(Alu::Relu, f, {a.alu(Alu::Add, f, {r, a.load(2, f, a.var(2))})});
  const kir::Expr* at = lin({a.var(0), a.var(1), a.var(2)}, {batch, m, n});
  k.stores = {{3, at, out}, {4, at, a.alu(Alu::Add, DType::i64, {a.var(1), a.var(2)})}};
  k.stores[1].value = a.alu(Alu::Cast, DType::i32, {k.stores[1].value});
  return k;
}

// Kernels for four lanes per thread (vector_loads=4, codegen/gpu/lane_emitter.h): loads and
// stores that move as vectors next to ones that cannot (off by one, transposed, per row), i32
// vectors, and reductions inside the thread whose loads are vectors (a gemv) with an argmax.
inline kir::Kernel lanes_mixed_kernel() {
  constexpr int64_t R = 6, C = 20;
  kir::Kernel k;
  k.name = "lanes_mixed";
  k.arena = std::make_shared<kir::ExprArena>();
  kir::ExprArena& a = *k.arena;
  const DType f = DType::f32, i = DType::i32, L = DType::i64;
  k.domain = {R, C};
  k.params = {{f, {R * C + 4}, false, "x"}, {f, {C, R}, false, "xt"}, {f, {C}, false, "bias"},
              {f, {R}, false, "s"},         {i, {R, C}, false, "n"},  {f, {R, C}, true, "y"},
              {i, {R, C}, true, "m"},       {f, {C, R}, true, "yt"}, {f, {R}, true, "r"}};
  const kir::Expr* v0 = a.var(0);
  const kir::Expr* v1 = a.var(1);
  const kir::Expr* self = a.alu(Alu::Add, L, {a.alu(Alu::Mul, L, {v0, a.index(C)}), v1});
  const kir::Expr* next = a.alu(Alu::Add, L, {self, a.index(1)});                              // unaligned
  const kir::Expr* trans = a.alu(Alu::Add, L, {a.alu(Alu::Mul, L, {v1, a.index(R)}), v0});  // stride R
  const kir::Expr* x = a.load(0, f, self);
  const kir::Expr* x1 = a.load(0, f, next);
  const kir::Expr* xt = a.load(1, f, trans);
  const kir::Expr* b = a.load(2, f, v1);
  const kir::Expr* sc = a.load(3, f, v0);
  const kir::Expr* n = a.load(4, i, self);
  const kir::Expr* y = a.alu(Alu::Add, f, {a.alu(Alu::Mul, f, {a.alu(Alu::Sub, f, {x, x1}), sc}), a.alu(Alu::Add, f, {xt, b})});
  k.stores.push_back({5, self, y});
  k.stores.push_back({6, self, a.alu(Alu::Add, i, {n, a.alu(Alu::Cast, i, {a.alu(Alu::Floor, f, {x})})})});
  k.stores.push_back({7, trans, a.alu(Alu::Mul, f, {x, b})});
  k.stores.push_back({8, v0, a.alu(Alu::Mul, f, {sc, a.constant(f, 2)})});
  return k;
}

inline kir::Kernel lanes_gemv_kernel() {
  constexpr int64_t B = 3, N = 16, K = 24;
  kir::Kernel k;
  k.name = "lanes_gemv";
  k.arena = std::make_shared<kir::ExprArena>();
  kir::ExprArena& a = *k.arena;
  const DType f = DType::f32, L = DType::i64;
  k.domain = {B, N};
  k.params = {{f, {B, K}, false, "x"}, {f, {K, N}, false, "w"}, {f, {B, N}, true, "y"}, {DType::i32, {B, N}, true, "arg"}};
  const kir::Expr* v0 = a.var(0);
  const kir::Expr* v1 = a.var(1);
  const kir::Expr* v2 = a.var(2);
  const kir::Expr* w = a.load(1, f, a.alu(Alu::Add, L, {a.alu(Alu::Mul, L, {v2, a.index(N)}), v1}));
  const kir::Expr* x = a.load(0, f, a.alu(Alu::Add, L, {a.alu(Alu::Mul, L, {v0, a.index(K)}), v2}));
  const kir::Expr* self = a.alu(Alu::Add, L, {a.alu(Alu::Mul, L, {v0, a.index(N)}), v1});
  k.stores.push_back({2, self, a.reduce(ReduceOp::Sum, f, a.alu(Alu::Mul, f, {x, w}), {2}, {K})});
  k.stores.push_back({3, self, a.reduce(ReduceOp::ArgMax, DType::i32, a.alu(Alu::Add, f, {x, w}), {2}, {K})});
  return k;
}

// y[r, c] = x[r, c] - mean over c of x[r, c], and the row's sum of squares: two independent
// row reductions whose result is broadcast over the row (splits apply).
inline kir::Kernel centered_kernel(int64_t rows, int64_t cols) {
  kir::Kernel k;
  k.name = fmt::format("centered_{}x{}", rows, cols);
  k.arena = std::make_shared<kir::ExprArena>();
  kir::ExprArena& a = *k.arena;
  const DType f = DType::f32, L = DType::i64;
  k.domain = {rows, cols};
  k.params = {{f, {rows, cols}, false, "x"}, {f, {rows, cols}, true, "y"}, {f, {rows}, true, "ss"}};
  auto at = [&](const kir::Expr* c) {
    return a.load(0, f, a.alu(Alu::Add, L, {a.alu(Alu::Mul, L, {a.var(0), a.index(cols)}), c}));
  };
  const kir::Expr* mean = a.alu(Alu::Div, f, {a.reduce(ReduceOp::Sum, f, at(a.var(2)), {2}, {cols}), a.constant(f, static_cast<double>(cols))});
  const kir::Expr* sq = a.reduce(ReduceOp::Sum, f, a.alu(Alu::Mul, f, {at(a.var(3)), at(a.var(3))}), {3}, {cols});
  const kir::Expr* self = a.alu(Alu::Add, L, {a.alu(Alu::Mul, L, {a.var(0), a.index(cols)}), a.var(1)});
  k.stores.push_back({1, self, a.alu(Alu::Sub, f, {at(a.var(1)), mean})});
  k.stores.push_back({2, a.var(0), sq});
  return k;
}

// f16 / bf16 (`h`) conversions from `from`: through registers only (an f32, i32, f64 and a round
// trip back to `from`, from h arithmetic), and with `store_half` stored as h too.
inline kir::Kernel half_cast_kernel(DType h, DType from, bool store_half) {
  kir::Kernel k;
  k.name = fmt::format("half_{}_from_{}{}", ir::dtype_name(h), ir::dtype_name(from),
                       store_half ? "_stored" : "");
  k.arena = std::make_shared<kir::ExprArena>();
  kir::ExprArena& a = *k.arena;
  k.domain = {4 * kN};
  k.params = {{from, {4 * kN}, false, "x"}};
  const kir::Expr* i = a.var(0);
  const kir::Expr* xh = a.alu(Alu::Cast, h, {a.load(0, from, i)});
  auto out = [&](DType t, const kir::Expr* v) {
    k.params.push_back({t, {4 * kN}, true, "o"});
    k.stores.push_back({static_cast<int32_t>(k.params.size() - 1), i, v});
  };
  out(DType::f32, a.alu(Alu::Cast, DType::f32, {xh}));
  out(DType::i32, a.alu(Alu::Cast, DType::i32, {xh}));
  out(DType::f64, a.alu(Alu::Cast, DType::f64, {a.alu(Alu::Mul, h, {xh, a.constant(h, 3)})}));
  out(from, a.alu(Alu::Cast, from, {xh}));
  if (store_half) out(h, xh);
  return k;
}

// Reductions of f32 rows cast to `h` in registers, written as f32 and i32: no 16-bit buffer.
inline kir::Kernel half_reduce_kernel(DType h, int64_t rows, int64_t extent) {
  kir::Kernel k;
  k.name = fmt::format("half_{}_reduce_{}x{}", ir::dtype_name(h), rows, extent);
  k.arena = std::make_shared<kir::ExprArena>();
  kir::ExprArena& a = *k.arena;
  k.domain = {rows};
  k.params = {{DType::f32, {rows * extent}, false, "x"}};
  const kir::Expr* row = a.var(0);
  const kir::Expr* idx =
      a.alu(Alu::Add, DType::i64, {a.alu(Alu::Mul, DType::i64, {row, a.index(extent)}), a.var(1)});
  const kir::Expr* xh = a.alu(Alu::Cast, h, {a.load(0, DType::f32, idx)});
  for (ReduceOp op :
       {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::ArgMax, ReduceOp::ArgMin}) {
    const DType rt = is_arg(op) ? DType::i32 : h;
    const kir::Expr* r = a.reduce(op, rt, xh, {1}, {extent});
    const DType ot = is_arg(op) ? DType::i32 : DType::f32;
    k.params.push_back({ot, {rows}, true, "o"});
    k.stores.push_back({static_cast<int32_t>(k.params.size() - 1), row,
                        is_arg(op) ? r : a.alu(Alu::Cast, ot, {r})});
  }
  return k;
}

// Every half_*_kernel of `h` (f16 or bf16).
inline std::vector<kir::Kernel> half_kernels(DType h) {
  std::vector<kir::Kernel> ks;
  for (DType from : ir::kAllDTypes)
    for (bool stored : {false, true}) ks.push_back(half_cast_kernel(h, from, stored));
  ks.push_back(half_reduce_kernel(h, 3, 3000));
  return ks;
}

// The checked modes change loads and stores only: one ALU kernel per dtype covers them.
inline std::vector<CheckMode> modes_for(const kir::Kernel& k) {
  if (k.name.starts_with("alu_") && !k.name.ends_with("_0")) return {CheckMode::none};
  return {CheckMode::none, CheckMode::enforce, CheckMode::validate};
}

// The kernels of one dtype: its ALU ops and casts, and its reductions as a row-reduce, a
// whole-input reduce, short per-thread loops and column reductions.
inline std::vector<kir::Kernel> dtype_kernels(DType t, size_t max_outputs) {
  std::vector<kir::Kernel> ks = alu_kernels(t, max_outputs);
  ks.push_back(reduce_kernel(t, 4, 100));
  ks.push_back(reduce_kernel(t, 0, 1000));
  ks.push_back(reduce_kernel(t, 300, 7));
  ks.push_back(column_kernel(t, 3, 100, 37));
  return ks;
}

// Nested reductions and matmuls (with a cast prologue, a bias + relu epilogue, ragged tiles).
inline std::vector<kir::Kernel> shape_kernels() {
  return {nested_kernel(8, 64), column_softmax_kernel(90, 40), matmul_kernel(1, 40, 24, 33), matmul_kernel(3, 17, 50, 16),
          matmul_kernel(2, 70, 130, 40)};  // 64 x 64 tiles, 4 x 4 outputs per thread
}

}  // namespace kiln::codegen::gpu
