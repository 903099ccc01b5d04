// Kernels with planted out-of-range accesses, shared by the check-mode suites of every target
// (cpu_check_mode_test.cpp, gpu_vulkan_check_mode_test.cpp): the same kernels must give the same
// results and the same error on each.
#pragma once

#include <memory>

#include "ir/kernel_ir.h"
#include "tests/support/kernel_builder.h"

namespace kiln::testing {

inline const kir::Expr* shifted_index(kir::ExprArena& a, int64_t by) {
  return a.alu(kir::Alu::Add, ir::DType::i64, {a.var(0), a.index(by)});
}

// y[i] = x[i + shift] over [0, 8), both 8 f32 elements: |shift| loads are out of range.
inline kir::Kernel shifted_load(int64_t shift) {
  auto a = std::make_shared<kir::ExprArena>();
  return make_kernel("k0", {{ir::DType::f32, {8}, false, "x"}, {ir::DType::f32, {8}, true, "y"}},
                     {8}, a,
                     {{1, a->var(0), a->load(0, ir::DType::f32, shifted_index(*a, shift))}});
}

// out[i + shift] = x[i] over [0, 8), both 8 f32 elements: |shift| stores are out of range.
inline kir::Kernel shifted_store(int64_t shift) {
  auto a = std::make_shared<kir::ExprArena>();
  return make_kernel("k3", {{ir::DType::f32, {8}, false, ""}, {ir::DType::f32, {8}, true, "out"}},
                     {8}, a,
                     {{1, shifted_index(*a, shift), a->load(0, ir::DType::f32, a->var(0))}});
}

// y[i] = sum over j < 64 of x[i*64 + j + 1] over 4 rows, x of 256 f32 elements: one load (row 3,
// j = 63, index 256) is out of range, inside a reduction.
inline kir::Kernel shifted_row_sum() {
  auto a = std::make_shared<kir::ExprArena>();
  const kir::Expr* row = a->alu(kir::Alu::Mul, ir::DType::i64, {a->var(0), a->index(64)});
  const kir::Expr* idx =
      a->alu(kir::Alu::Add, ir::DType::i64,
             {row, a->alu(kir::Alu::Add, ir::DType::i64, {a->var(1), a->index(1)})});
  const kir::Expr* sum =
      a->reduce(kir::ReduceOp::Sum, ir::DType::f32, a->load(0, ir::DType::f32, idx), {1}, {64});
  return make_kernel("rows",
                     {{ir::DType::f32, {256}, false, "x"}, {ir::DType::f32, {4}, true, "y"}}, {4},
                     a, {{1, a->var(0), sum}});
}

}  // namespace kiln::testing
