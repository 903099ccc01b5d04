// IndexBuilder: the div/mod rules one by one, and random evaluation against unsimplified trees.
#include "passes/index_simplify.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace kiln::passes {
namespace {

using kir::Alu;
using kir::Expr;
using kir::ExprKind;

// Floor-semantics evaluation; `contract_ok` turns false when IDiv/Mod sees a negative operand.
int64_t eval(const Expr* e, const std::vector<int64_t>& vars, bool& contract_ok) {
  if (e->kind == ExprKind::Const) return e->ival;
  if (e->kind == ExprKind::Var) return vars.at(static_cast<size_t>(e->var));
  int64_t a = eval(e->args[0], vars, contract_ok), b = eval(e->args[1], vars, contract_ok);
  auto fdiv = [](int64_t x, int64_t y) {
    return static_cast<int64_t>(std::floor(static_cast<double>(x) / static_cast<double>(y)));
  };
  // The ops index arithmetic is made of.
  const Alu op = e->alu;
  if (op == Alu::Add) return a + b;
  if (op == Alu::Sub) return a - b;
  if (op == Alu::Mul) return a * b;
  if (op == Alu::Max) return std::max(a, b);
  if (op == Alu::Min) return std::min(a, b);
  if (op == Alu::IDiv || op == Alu::Mod) {
    contract_ok &= a >= 0 && b > 0;
    return op == Alu::IDiv ? fdiv(a, b) : a - fdiv(a, b) * b;
  }
  ADD_FAILURE() << "unexpected op " << kir::alu_name(op);
  return 0;
}

struct Fixture {
  kir::ExprArena arena;
  IndexBuilder ib{arena, {4, 3, 5, 1}};  // v0 in [0,4), v1 in [0,3), v2 in [0,5), v3 == 0
};

TEST(IndexSimplify, ConstantsAndIdentities) {
  Fixture f;
  IndexBuilder& ib = f.ib;
  EXPECT_EQ(ib.add(ib.constant(3), ib.constant(4)), ib.constant(7));
  EXPECT_EQ(ib.mul(ib.var(0), 1), ib.var(0));
  EXPECT_EQ(ib.add(ib.var(0), ib.constant(0)), ib.var(0));
  EXPECT_EQ(ib.mul(ib.var(0), 0), ib.constant(0));
  EXPECT_EQ(ib.sub(ib.add(ib.var(0), ib.var(1)), ib.var(0)), ib.var(1));
  EXPECT_EQ(ib.var(3), ib.constant(0));  // extent 1
  EXPECT_EQ(ib.idiv(ib.constant(17), 5), ib.constant(3));
  EXPECT_EQ(ib.mod(ib.constant(17), 5), ib.constant(2));
}

TEST(IndexSimplify, DivModOfAffineSplit) {
  Fixture f;
  IndexBuilder& ib = f.ib;
  const Expr* flat = ib.add(ib.mul(ib.var(0), 3), ib.var(1));  // v0*3 + v1, v1 < 3
  EXPECT_EQ(ib.idiv(flat, 3), ib.var(0));
  EXPECT_EQ(ib.mod(flat, 3), ib.var(1));
  EXPECT_EQ(ib.mod(ib.var(1), 3), ib.var(1));  // x mod n -> x when x < n
  EXPECT_EQ(ib.idiv(ib.var(1), 3), ib.constant(0));
  // (x idiv 2) idiv 3 -> x idiv 6, (x*2) idiv 4 -> x idiv 2, (x*2) mod 4 -> (x mod 2)*2
  const Expr* big = ib.add(ib.mul(ib.var(0), 15), ib.add(ib.mul(ib.var(1), 5), ib.var(2)));
  EXPECT_EQ(ib.idiv(ib.idiv(big, 2), 3), ib.idiv(big, 6));
  const Expr* x2 = ib.mul(big, 2);
  EXPECT_EQ(ib.idiv(x2, 4), ib.idiv(big, 2));
  EXPECT_EQ(ib.mod(x2, 4), ib.mul(ib.mod(big, 2), 2));
  EXPECT_EQ(ib.range(ib.mod(big, 7)).hi, 6);
}

TEST(IndexSimplify, RangeAnalysis) {
  Fixture f;
  IndexBuilder& ib = f.ib;
  IndexRange r = ib.range(ib.sub(ib.mul(ib.var(0), 3), ib.var(2)));
  EXPECT_EQ(r.lo, -4);
  EXPECT_EQ(r.hi, 9);
  r = ib.range(ib.idiv(ib.add(ib.var(0), ib.constant(1)), 2));
  EXPECT_EQ(r.lo, 0);
  EXPECT_EQ(r.hi, 2);
  int32_t v = ib.new_var(7);
  EXPECT_EQ(ib.range(ib.var(v)).hi, 6);
}

// Random trees over add/sub/mul/idiv/mod, built twice: raw through the arena and simplified
// through IndexBuilder. At random points both must agree, the simplified tree must keep IDiv/Mod
// operands non-negative, and range() must contain every value.
class RandomTree {
 public:
  RandomTree(kir::ExprArena& arena, IndexBuilder& ib, std::mt19937& rng)
      : arena_(arena), ib_(ib), rng_(rng) {}
  std::pair<const Expr*, const Expr*> make(int depth) {
    int choice = depth == 0 ? pick(0, 1) : pick(0, 6);
    if (choice == 0) {
      int32_t v = pick(0, 3);
      return {arena_.var(v), ib_.var(v)};
    }
    if (choice == 1) {
      int64_t c = pick(0, 9);
      return {arena_.index(c), ib_.constant(c)};
    }
    auto [ra, sa] = make(depth - 1);
    if (choice == 2 || choice == 3) {
      auto [rb, sb] = make(depth - 1);
      bool add = choice == 2;
      return {arena_.alu(add ? Alu::Add : Alu::Sub, ir::DType::i64, {ra, rb}),
              add ? ib_.add(sa, sb) : ib_.sub(sa, sb)};
    }
    int64_t c = pick(1, 7);
    if (choice == 4)
      return {arena_.alu(Alu::Mul, ir::DType::i64, {ra, arena_.index(c)}), ib_.mul(sa, c)};
    if (choice == 5)
      return {arena_.alu(Alu::IDiv, ir::DType::i64, {ra, arena_.index(c)}), ib_.idiv(sa, c)};
    return {arena_.alu(Alu::Mod, ir::DType::i64, {ra, arena_.index(c)}), ib_.mod(sa, c)};
  }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  kir::ExprArena& arena_;
  IndexBuilder& ib_;
  std::mt19937& rng_;
};

TEST(IndexSimplify, RandomEvaluationAgrees) {
  std::mt19937 rng(1234);
  Fixture f;
  RandomTree gen(f.arena, f.ib, rng);
  const std::vector<int64_t> extents{4, 3, 5, 1};
  int checked_points = 0;
  for (int tree = 0; tree < 2000; ++tree) {
    auto [raw, simple] = gen.make(1 + tree % 5);
    IndexRange r = f.ib.range(simple);
    for (int p = 0; p < 8; ++p) {
      std::vector<int64_t> vars;
      for (int64_t e : extents)
        vars.push_back(std::uniform_int_distribution<int64_t>(0, e - 1)(rng));
      bool raw_ok = true, simple_ok = true;
      int64_t want = eval(raw, vars, raw_ok);
      int64_t got = eval(simple, vars, simple_ok);
      ASSERT_EQ(got, want) << "tree " << tree;
      ASSERT_TRUE(simple_ok) << "simplified tree " << tree << " breaks the IDiv/Mod contract";
      ASSERT_LE(r.lo, got) << "tree " << tree;
      ASSERT_GE(r.hi, got) << "tree " << tree;
      ++checked_points;
    }
  }
  EXPECT_EQ(checked_points, 16000);
}

}  // namespace
}  // namespace kiln::passes
