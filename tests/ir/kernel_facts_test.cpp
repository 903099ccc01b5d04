// The `analyze` step's record (ir/kernel_facts.h): IR in, facts out, for a softmax (row reuse),
// a matmul (its pattern) and a wrap-around stencil (loop cuts); the text KILN_DUMP shows; and the
// verifier catching a record that is stale or belongs to another kernel.
#include <gtest/gtest.h>

#include "ir/kernel_facts.h"
#include "tests/support/kernel_builder.h"

namespace kiln::kir {
namespace {

using ir::DType;

Param param(std::vector<int64_t> shape, bool output, std::string label) {
  return Param{DType::f32, std::move(shape), output, std::move(label)};
}

// y[r, c] = exp(x[r,c] - max_r) / sum_r exp(x[r,v] - max_r) over a [rows, cols] matrix.
Kernel softmax(int64_t rows, int64_t cols) {
  auto a = std::make_shared<ExprArena>();
  auto at = [&](int32_t var) {
    return a->alu(Alu::Add, DType::i64, {a->alu(Alu::Mul, DType::i64, {a->var(0), a->index(cols)}), a->var(var)});
  };
  auto x = [&](int32_t var) { return a->load(0, DType::f32, at(var)); };
  const Expr* mx = a->reduce(ReduceOp::Max, DType::f32, x(2), {2}, {cols});
  auto e = [&](int32_t var) { return a->alu(Alu::Exp, DType::f32, {a->alu(Alu::Sub, DType::f32, {x(var), mx})}); };
  const Expr* sum = a->reduce(ReduceOp::Sum, DType::f32, e(3), {3}, {cols});
  return testing::make_kernel("k0", {param({rows, cols}, false, "x"), param({rows, cols}, true, "y")},
                              {rows, cols}, a, {{1, at(1), a->alu(Alu::Div, DType::f32, {e(1), sum})}});
}

// y[i, j] = sum_k a[i, k] * b[k, j] + 1.
Kernel matmul(int64_t m, int64_t k, int64_t n) {
  auto a = std::make_shared<ExprArena>();
  auto idx = [&](const Expr* row, int64_t stride, const Expr* col) {
    return a->alu(Alu::Add, DType::i64, {a->alu(Alu::Mul, DType::i64, {row, a->index(stride)}), col});
  };
  const Expr* prod = a->alu(Alu::Mul, DType::f32, {a->load(0, DType::f32, idx(a->var(0), k, a->var(2))),
                                                    a->load(1, DType::f32, idx(a->var(2), n, a->var(1)))});
  const Expr* r = a->reduce(ReduceOp::Sum, DType::f32, prod, {2}, {k});
  return testing::make_kernel(
      "k0", {param({m, k}, false, "a"), param({k, n}, false, "b"), param({m, n}, true, "y")}, {m, n}, a,
      {{2, idx(a->var(0), n, a->var(1)), a->alu(Alu::Add, DType::f32, {r, a->constant(DType::f32, 1)})}});
}

// y[p] = x[(p + 1) mod n]: a roll, whose innermost loop is cut where the index wraps.
Kernel roll(int64_t n) {
  auto a = std::make_shared<ExprArena>();
  const Expr* wrapped = a->alu(Alu::Mod, DType::i64, {a->alu(Alu::Add, DType::i64, {a->var(0), a->index(1)}), a->index(n)});
  return testing::make_kernel("k0", {param({n}, false, "x"), param({n}, true, "y")}, {n}, a,
                              {{1, a->var(0), a->load(0, DType::f32, wrapped)}});
}

TEST(KernelFacts, SoftmaxReusesItsExponentialsAndIsNoMatmul) {
  const Kernel k = softmax(4, 300);
  const KernelFacts f = analyze_kernel(k);
  EXPECT_FALSE(f.matmul.has_value());
  ASSERT_EQ(f.row_reuse.size(), 1u);
  EXPECT_EQ(f.loop_split.bounds, (std::vector<int64_t>{0, 300}));
  EXPECT_TRUE(verify_facts(k, f).has_value());
  const std::string text = facts_text(k, f);
  EXPECT_EQ(text.substr(0, text.find('\n')), "matmul: no");
  EXPECT_NE(text.find("row reuse: $"), std::string::npos) << text;
  EXPECT_NE(text.find("\nloop cuts: no\n"), std::string::npos) << text;
}

TEST(KernelFacts, MatmulPatternNamesItsReductionAndAxes) {
  const Kernel k = matmul(16, 32, 24);
  const KernelFacts f = analyze_kernel(k);
  ASSERT_TRUE(f.matmul.has_value());
  EXPECT_EQ(f.matmul->k_extent, 32);
  EXPECT_EQ(f.matmul->i_var, 0);
  EXPECT_EQ(f.matmul->j_var, 1);
  EXPECT_TRUE(f.row_reuse.empty());
  const std::string text = facts_text(k, f);
  // Named as the kernel IR dump names it.
  EXPECT_EQ(text.substr(0, text.find('\n')), "matmul: $9 = reduce over v2<32>, rows v0, columns v1");
  EXPECT_NE(print_kernel(k).find("  $9 = reduce.sum f32 (v2<32>)"), std::string::npos) << print_kernel(k);
}

TEST(KernelFacts, RollIsCutWhereItsIndexWraps) {
  const Kernel k = roll(100);
  const KernelFacts f = analyze_kernel(k);
  EXPECT_EQ(f.loop_split.bounds, (std::vector<int64_t>{0, 99, 100}));
  EXPECT_EQ(f.loop_split.wraps.size(), 1u);
  EXPECT_NE(facts_text(k, f).find("loop cuts: innermost axis in 2 pieces [0,99) [99,100), 1 wrapping index\n"),
            std::string::npos)
      << facts_text(k, f);
}

TEST(KernelFacts, TheVerifierRejectsStaleAndForeignRecords) {
  const Kernel soft = softmax(4, 300);
  KernelFacts stale = analyze_kernel(soft);
  stale.row_reuse.clear();
  auto missing = verify_facts(soft, stale);
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().message, "kernel k0: its row reuse is not the kernel's");
  const Kernel other = softmax(4, 300);  // equal text, another arena
  auto foreign = verify_facts(other, analyze_kernel(soft));
  ASSERT_FALSE(foreign.has_value());
  EXPECT_EQ(foreign.error().message, "kernel k0: its row reuse names an expression of another kernel");
  const Kernel r = roll(100);
  auto cut = verify_facts(r, analyze_kernel(r));
  EXPECT_TRUE(cut.has_value());
  KernelFacts own = analyze_kernel(r);
  own.loop_split.bounds = {0, 100};
  auto bad = verify_facts(r, own);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message, "kernel k0: its loop cuts are not the kernel's");
}

}  // namespace
}  // namespace kiln::kir
