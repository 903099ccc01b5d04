// Fuzz: seeded random graphs (elementwise chains, broadcasts, views, reductions, matmul) fused
// and compiled on cpu give the reference's results.
#include <gtest/gtest.h>

#include <random>

#include "harness.h"

namespace kiln::testing {
namespace {

using ir::DType;
using ir::Op;

// Grows a random graph over values of shape [R,C], [R,1] and [1,C].
class RandomGraph {
 public:
  RandomGraph(Case& c, uint64_t seed) : c_(c), rng_(seed) {
    R_ = 2 + pick(7);
    C_ = 2 + pick(9);
    for (int i = 0; i < 3; ++i) values_.push_back(c_.input(DType::f32, {R_, C_}));
    values_.push_back(c_.input(DType::f32, {1, C_}));
  }

  std::vector<const ir::Node*> build(int steps) {
    for (int s = 0; s < steps; ++s) {
      auto v = step();
      ASSERT_OK(v);
      values_.push_back(*v);
    }
    std::vector<const ir::Node*> outs{values_.back(), values_[values_.size() / 2 + 1]};
    return outs;
  }

 private:
  static void ASSERT_OK(const ir::NodeResult& r) {
    KILN_CHECK(r.has_value()) << "random graph construction failed: " << r.error().message;
  }
  int64_t pick(int64_t n) { return static_cast<int64_t>(rng_() % static_cast<uint64_t>(n)); }
  const ir::Node* any() { return values_[pick(static_cast<int64_t>(values_.size()))]; }
  const ir::Node* full_shape() {
    for (;;) {
      const ir::Node* v = any();
      if (v->shape == ir::Shape{R_, C_}) return v;
    }
  }

  ir::NodeResult step() {
    ir::Builder& b = c_.b;
    switch (pick(9)) {
      case 0: {
        constexpr Op kSafe[] = {Op::Neg, Op::Abs, Op::Tanh, Op::Sigmoid, Op::Relu, Op::Gelu,
                                Op::Sin, Op::Cos, Op::Erf};
        return b.unary(kSafe[pick(9)], any());
      }
      case 1:
      case 2: {
        constexpr Op kBin[] = {Op::Add, Op::Sub, Op::Mul, Op::Max, Op::Min};
        return b.binary(kBin[pick(5)], any(), any());
      }
      case 3: {  // reduce a row or a column, keepdim so it broadcasts back
        Op op = pick(2) ? Op::Sum : Op::ReduceMax;
        return b.reduce(op, full_shape(), std::vector<int64_t>{pick(2)}, true);
      }
      case 4: {  // where(a > b, a, b)
        const ir::Node* x = any();
        const ir::Node* y = any();
        auto cond = b.binary(Op::Gt, x, y);
        return b.where(*cond, x, y);
      }
      case 5:
        return b.roll(full_shape(), {pick(R_), -pick(C_)}, {0, 1});
      case 6:
        return b.flip(full_shape(), {pick(2)});
      case 7: {  // pad then slice back: a shifted view with a border
        auto p = b.pad(full_shape(), {1, 0}, {0, 2}, 0.5);
        auto s = b.slice(*p, 0, 0, R_, 1);
        return b.slice(*s, 1, 2, C_ + 2, 1);
      }
      default: {  // [R,C] @ [C,C] keeps the shape
        auto w = b.reshape(full_shape(), {R_ * C_});
        auto sq = b.slice(*w, 0, 0, C_ * std::min(R_, C_), 1);
        auto m = b.reshape(*sq, {std::min(R_, C_), C_});
        auto t = b.permute(*m, {1, 0});
        auto prod = b.matmul(full_shape(), *t);  // [R,C] @ [C,min(R,C)]
        auto back = b.pad(*prod, {0, 0}, {0, C_ - std::min(R_, C_)}, 0.0);
        return b.unary(Op::Tanh, *back);
      }
    }
  }

  Case& c_;
  std::mt19937_64 rng_;
  int64_t R_, C_;
  std::vector<const ir::Node*> values_;
};

TEST(RandomGraphFuzz, FusedCompiledEqualsReference) {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    Case c;
    RandomGraph g(c, seed);
    auto outs = g.build(6 + static_cast<int>(seed % 10));
    expect_matches_reference(c, outs, "random graph seed " + std::to_string(seed));
  }
}

}  // namespace
}  // namespace kiln::testing
