// Row reuse (ir/row_reuse.h): which store expressions are read back from a row that a
// reduction filled, which are not, and kernels using it against a double-precision loop.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ir/row_reuse.h"
#include "tests/codegen/cpu_test_support.h"

namespace kiln::codegen::testing {
namespace {

using kir::Alu;
using kir::Expr;
using kir::ReduceOp;

// A [rows, cols] row-wise kernel builder: x[r, col_var] loads, reductions over their own
// variable, one store of `value` at [r, v1].
struct RowKernel {
  int64_t rows, cols;
  DType t = DType::f32;
  std::shared_ptr<kir::ExprArena> a = std::make_shared<kir::ExprArena>();

  const Expr* index(int32_t col_var) const {
    return a->alu(Alu::Add, DType::i64,
                  {a->alu(Alu::Mul, DType::i64, {a->var(0), a->index(cols)}), a->var(col_var)});
  }
  const Expr* x(int32_t col_var) const { return a->load(0, t, index(col_var)); }
  const Expr* un(Alu op, const Expr* v) const { return a->alu(op, t, {v}); }
  const Expr* bin(Alu op, const Expr* l, const Expr* r) const { return a->alu(op, t, {l, r}); }
  const Expr* reduce(ReduceOp op, const Expr* body, int32_t var, int64_t extent) const {
    return a->reduce(op, t, body, {var}, {extent});
  }
  kir::Kernel kernel(const Expr* value) const {
    return make_kernel("rows", {in_param(t, {rows, cols}), out_param(t, {rows, cols})},
                       {rows, cols}, a, {{1, index(1), value}});
  }
};

TEST(CpuRowReuse, SoftmaxReadsItsExponentialsBack) {
  RowKernel k{4, 300};
  const Expr* mx = k.reduce(ReduceOp::Max, k.x(2), 2, k.cols);
  auto shifted_exp = [&](int32_t v) { return k.un(Alu::Exp, k.bin(Alu::Sub, k.x(v), mx)); };
  const Expr* sum = k.reduce(ReduceOp::Sum, shifted_exp(3), 3, k.cols);
  const std::vector<kir::RowReuse> found =
      kir::find_row_reuse(k.kernel(k.bin(Alu::Div, shifted_exp(1), sum)));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].reduce, sum);
  EXPECT_EQ(found[0].body_value, shifted_exp(3));
  EXPECT_EQ(found[0].point_value, shifted_exp(1));
  // The emitted kernel keeps the row of exponentials (on the stack).
  auto art = backend().compile(k.kernel(k.bin(Alu::Div, shifted_exp(1), sum)), {});
  ASSERT_TRUE(art.has_value()) << art.error().message;
  EXPECT_NE((*art)->llvm_ir.find("alloca [300 x float]"), std::string::npos) << (*art)->llvm_ir;
}

TEST(CpuRowReuse, OnlyTheSameCostlyValueOverTheSameRow) {
  RowKernel k{3, 19};
  const Expr* e3 = k.un(Alu::Exp, k.x(3));
  // Another extent, a flipped column, a reduction reading the point's column, nothing costly.
  const Expr* shorter = k.a->reduce(ReduceOp::Sum, DType::f32, e3, {3}, {18});
  const Expr* flipped =
      k.un(Alu::Exp,
           k.a->load(0, DType::f32,
                     k.a->alu(Alu::Add, DType::i64,
                              {k.a->alu(Alu::Mul, DType::i64, {k.a->var(0), k.a->index(19)}),
                               k.a->alu(Alu::Sub, DType::i64, {k.a->index(18), k.a->var(1)})})));
  const Expr* reads_p = k.reduce(ReduceOp::Sum, k.bin(Alu::Mul, e3, k.x(1)), 3, 19);
  const Expr* cheap = k.reduce(ReduceOp::Sum, k.bin(Alu::Mul, k.x(3), k.x(3)), 3, 19);
  const Expr* e1 = k.un(Alu::Exp, k.x(1));
  EXPECT_TRUE(kir::find_row_reuse(k.kernel(k.bin(Alu::Mul, e1, shorter))).empty());
  EXPECT_TRUE(
      kir::find_row_reuse(k.kernel(k.bin(Alu::Mul, flipped, k.reduce(ReduceOp::Sum, e3, 3, 19))))
          .empty());
  EXPECT_TRUE(kir::find_row_reuse(k.kernel(k.bin(Alu::Mul, e1, reads_p))).empty());
  EXPECT_TRUE(kir::find_row_reuse(k.kernel(k.bin(Alu::Mul, k.bin(Alu::Mul, k.x(1), k.x(1)), cheap)))
                  .empty());
  EXPECT_EQ(
      kir::find_row_reuse(k.kernel(k.bin(Alu::Mul, e1, k.reduce(ReduceOp::Sum, e3, 3, 19)))).size(),
      1u);
  // A row longer than kMaxRowReuseBytes is not kept.
  RowKernel wide{1, kir::kMaxRowReuseBytes / 4 + 1};
  const Expr* we = wide.reduce(ReduceOp::Sum, wide.un(Alu::Exp, wide.x(3)), 3, wide.cols);
  EXPECT_TRUE(kir::find_row_reuse(wide.kernel(wide.bin(Alu::Div, wide.un(Alu::Exp, wide.x(1)), we)))
                  .empty());
}

// Two reused values from two reductions (softmax plus tanh(x) * sum tanh), in f32 and f64, odd
// row lengths, against a double loop (run_kernel also runs uneven chunks of rows). Rows of at
// least 512 (700: five prefetch blocks of 128 and a tail) fill in blocks that prefetch the next
// row, and the current row's output for writing; short ones (37) do not.
TEST(CpuRowReuse, TwoReusedValuesMatchTheLoop) {
  for (auto [t, cols] : {std::pair{DType::f32, int64_t{37}}, std::pair{DType::f64, int64_t{37}},
                         std::pair{DType::f32, int64_t{700}}, std::pair{DType::f64, int64_t{700}}}) {
    SCOPED_TRACE(std::string(ir::dtype_name(t)) + " x " + std::to_string(cols));
    RowKernel k{5, cols, t};
    const Expr* mx = k.reduce(ReduceOp::Max, k.x(2), 2, k.cols);
    auto shifted_exp = [&](int32_t v) { return k.un(Alu::Exp, k.bin(Alu::Sub, k.x(v), mx)); };
    const Expr* sum = k.reduce(ReduceOp::Sum, shifted_exp(3), 3, k.cols);
    const Expr* tsum = k.reduce(ReduceOp::Sum, k.un(Alu::Tanh, k.x(4)), 4, k.cols);
    const Expr* value = k.bin(Alu::Add, k.bin(Alu::Div, shifted_exp(1), sum),
                              k.bin(Alu::Mul, k.un(Alu::Tanh, k.x(1)), tsum));
    kir::Kernel kernel = k.kernel(value);
    ASSERT_EQ(kir::find_row_reuse(kernel).size(), 2u);
    auto art = backend().compile(kernel, {});
    ASSERT_TRUE(art.has_value()) << art.error().message;
    EXPECT_EQ((*art)->llvm_ir.find("@llvm.prefetch") != std::string::npos, cols == 700);
    // ... and fetch the current row's output lines for writing (the output is not streamed).
    EXPECT_EQ((*art)->llvm_ir.find("i32 1, i32 2, i32 1)") != std::string::npos, cols == 700)
        << (*art)->llvm_ir;
    std::vector<double> x;
    for (int64_t j = 0; j < k.rows * k.cols; ++j)
      x.push_back(static_cast<float>(std::sin(j * 0.7) * 3 + (j / k.cols)));
    auto res = run_kernel(kernel, {Buffer(t, x)});
    ASSERT_EQ(res.size(), 2u);
    for (int64_t r = 0; r < k.rows; ++r) {
      double m = -std::numeric_limits<double>::infinity(), s = 0, ts = 0;
      for (int64_t c = 0; c < k.cols; ++c) m = std::max(m, x[r * k.cols + c]);
      for (int64_t c = 0; c < k.cols; ++c) {
        s += std::exp(x[r * k.cols + c] - m);
        ts += std::tanh(x[r * k.cols + c]);
      }
      for (int64_t c = 0; c < k.cols; ++c) {
        const double v = x[r * k.cols + c];
        EXPECT_LE(
            rel_error(res[1].get(r * k.cols + c), std::exp(v - m) / s + std::tanh(v) * ts, 1e-3),
            1e-5)
            << r << "," << c;
      }
    }
  }
}

}  // namespace
}  // namespace kiln::codegen::testing
