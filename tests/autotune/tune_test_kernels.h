// Small kernels built by hand for the autotuner's tests: an elementwise loop, a row reduction,
// a matmul the cpu backend recognizes, and an integer kernel.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/kernel_ir.h"
#include "tests/support/kernel_builder.h"

namespace kiln::autotune::testing {

using ir::DType;
using kir::Alu;
using kir::Expr;
using kiln::testing::make_kernel;

inline kir::Param param(DType t, ir::Shape s, bool output, std::string label) {
  return {t, std::move(s), output, std::move(label)};
}

// row * cols + col
inline const Expr* flat(kir::ExprArena& a, const Expr* row, int64_t cols, const Expr* col) {
  return a.alu(Alu::Add, DType::i64, {a.alu(Alu::Mul, DType::i64, {row, a.index(cols)}), col});
}

// out[i, j] = x[i, j] * y[i, j] + exp(x[i, j]) over [rows, cols] in `t`.
inline kir::Kernel elementwise_kernel(int64_t rows, int64_t cols, DType t = DType::f32) {
  auto a = std::make_shared<kir::ExprArena>();
  const Expr* idx = flat(*a, a->var(0), cols, a->var(1));
  const Expr* x = a->load(0, t, idx);
  const Expr* y = a->load(1, t, idx);
  const Expr* v = a->alu(Alu::Add, t, {a->alu(Alu::Mul, t, {x, y}), a->alu(Alu::Exp, t, {x})});
  return make_kernel("ew",
                  {param(t, {rows, cols}, false, "x"), param(t, {rows, cols}, false, "y"),
                   param(t, {rows, cols}, true, "out")},
                  {rows, cols}, a, {{2, idx, v}});
}

// out[r] = sum_c x[r, c] * x[r, c].
inline kir::Kernel row_reduce_kernel(int64_t rows, int64_t cols) {
  auto a = std::make_shared<kir::ExprArena>();
  const Expr* x = a->load(0, DType::f32, flat(*a, a->var(0), cols, a->var(1)));
  const Expr* r =
      a->reduce(kir::ReduceOp::Sum, DType::f32, a->alu(Alu::Mul, DType::f32, {x, x}), {1}, {cols});
  return make_kernel(
      "rows", {param(DType::f32, {rows, cols}, false, "x"), param(DType::f32, {rows}, true, "out")},
      {rows}, a, {{1, a->var(0), r}});
}

// out[i, j] = sum_k a[i, k] * b[k, j] + 1 over [m, n], k < kk: the matmul recognizer's shape.
inline kir::Kernel matmul_kernel(int64_t m, int64_t n, int64_t kk) {
  auto a = std::make_shared<kir::ExprArena>();
  const Expr *i = a->var(0), *j = a->var(1), *k = a->var(2);
  const Expr* lhs = a->load(0, DType::f32, flat(*a, i, kk, k));
  const Expr* rhs = a->load(1, DType::f32, flat(*a, k, n, j));
  const Expr* r = a->reduce(kir::ReduceOp::Sum, DType::f32,
                            a->alu(Alu::Mul, DType::f32, {lhs, rhs}), {2}, {kk});
  const Expr* v = a->alu(Alu::Add, DType::f32, {r, a->constant(DType::f32, 1)});
  return make_kernel("mm",
                  {param(DType::f32, {m, kk}, false, "a"), param(DType::f32, {kk, n}, false, "b"),
                   param(DType::f32, {m, n}, true, "out")},
                  {m, n}, a, {{2, flat(*a, i, n, j), v}});
}

// out[i] = x[i] * 3 - y[i] in i32, and a bool output x[i] < y[i].
inline kir::Kernel int_kernel(int64_t n) {
  auto a = std::make_shared<kir::ExprArena>();
  const Expr* x = a->load(0, DType::i32, a->var(0));
  const Expr* y = a->load(1, DType::i32, a->var(0));
  const Expr* v = a->alu(Alu::Sub, DType::i32,
                         {a->alu(Alu::Mul, DType::i32, {x, a->constant(DType::i32, 3)}), y});
  const Expr* lt = a->alu(Alu::Lt, DType::boolean, {x, y});
  return make_kernel("ints",
                  {param(DType::i32, {n}, false, "x"), param(DType::i32, {n}, false, "y"),
                   param(DType::i32, {n}, true, "out"), param(DType::boolean, {n}, true, "lt")},
                  {n}, a, {{2, a->var(0), v}, {3, a->var(0), lt}});
}

}  // namespace kiln::autotune::testing
