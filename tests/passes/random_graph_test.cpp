// Seeded random graphs of views, elementwise ops and reductions: optimize + fuser (the first fuser
// and the beam fuser) + lowering, run by the test interpreter, must match the f64 reference
// interpreter of the unoptimized graph.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "interp/reference.h"
#include "passes/cost_model.h"
#include "passes/passes.h"
#include "tests/passes/test_support.h"

namespace kiln::passes {
namespace {

using ir::DType;
using ir::Node;
using ir::Op;
using testing::must;

constexpr int64_t kMaxNumel = 512;

class RandomGraph {
 public:
  RandomGraph(ir::Builder& b, std::mt19937& rng) : b_(b), rng_(rng) {}

  // Applies one random op to `x`; returns x unchanged when the chosen op does not apply.
  const Node* step(const Node* x) {
    auto rank = static_cast<int64_t>(x->shape.size());
    ir::NodeResult r = x;
    switch (pick(0, 12)) {
      case 0:
        r = b_.unary(choose({Op::Tanh, Op::Sin, Op::Neg, Op::Abs}), x);
        break;
      case 1:
        r = b_.binary(choose({Op::Add, Op::Mul, Op::Max, Op::Sub}), x, flip_some(x));
        break;
      case 2:
        r = b_.binary(Op::Mul, x, *b_.scalar(pick(1, 3), DType::f64));
        break;
      case 3:  // two permutes in a row, which fold_views composes
        r = b_.permute(*b_.permute(x, permutation(rank)), permutation(rank));
        break;
      case 4:
        r = b_.reshape(*b_.reshape(x, factor(x->numel())), factor(x->numel()));
        break;
      case 5:
        r = rank ? b_.slice(x, axis(rank), std::nullopt, std::nullopt, pick(0, 1) ? 2 : -1) : x;
        break;
      case 6:
        r = b_.pad(x, ints(rank, 0, 2), ints(rank, 0, 1), pick(-2, 2));
        break;
      case 7:
        r = rank ? b_.roll(x, {pick(-3, 3)}, {axis(rank)}) : x;
        break;
      case 8: {
        ir::Shape s = x->shape;
        s.insert(s.begin(), 2);
        r = b_.expand(x, s);
        break;
      }
      case 9:
        r = rank ? b_.concat({x, flip_some(x)}, axis(rank)) : x;
        break;
      case 10:
        r = rank ? b_.unfold(x, axis(rank), 1 + pick(0, 1), 1 + pick(0, 1)) : x;
        break;
      case 11:
        r = rank ? b_.reduce(choose({Op::Sum, Op::ReduceMax}), x, std::vector<int64_t>{axis(rank)},
                             pick(0, 1))
                 : x;
        break;
      default:
        r = rank ? b_.binary(Op::Add, x,
                             *b_.reduce(Op::Sum, x, std::vector<int64_t>{axis(rank)}, true))
                 : x;
        break;
    }
    if (!r || (*r)->numel() > kMaxNumel || (*r)->numel() == 0) return x;
    return *r;
  }

 private:
  int64_t pick(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  Op choose(std::initializer_list<Op> ops) {
    return *(ops.begin() + pick(0, static_cast<int64_t>(ops.size()) - 1));
  }
  int64_t axis(int64_t rank) { return pick(0, rank - 1); }
  std::vector<int64_t> ints(int64_t n, int64_t lo, int64_t hi) {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(pick(lo, hi));
    return v;
  }
  std::vector<int64_t> permutation(int64_t rank) {
    std::vector<int64_t> p;
    for (int64_t i = 0; i < rank; ++i) p.push_back(i);
    std::shuffle(p.begin(), p.end(), rng_);
    return p;
  }
  // A random shape with `numel` elements (rank 1 to 3).
  ir::Shape factor(int64_t numel) {
    ir::Shape s;
    int64_t rest = numel;
    for (int64_t parts = pick(0, 2); parts > 0; --parts) {
      std::vector<int64_t> divisors;
      for (int64_t d = 1; d <= rest; ++d)
        if (rest % d == 0) divisors.push_back(d);
      int64_t d = divisors[static_cast<size_t>(pick(0, static_cast<int64_t>(divisors.size()) - 1))];
      s.push_back(d);
      rest /= d;
    }
    s.push_back(rest);
    return s;
  }
  const Node* flip_some(const Node* x) {
    if (x->shape.empty()) return x;
    return *b_.flip(x, {axis(static_cast<int64_t>(x->shape.size()))});
  }

  ir::Builder& b_;
  std::mt19937& rng_;
};

TEST(RandomGraphs, FusedKernelsMatchTheReference) {
  std::mt19937 rng(20261121);
  CostModel model(DeviceRates::reference_cpu());
  int compared = 0;
  for (int trial = 0; trial < 150; ++trial) {
    ir::Graph g;
    ir::Builder b(g);
    RandomGraph gen(b, rng);
    ir::Shape shape{1 + static_cast<int64_t>(rng() % 4), 1 + static_cast<int64_t>(rng() % 5)};
    const Node* x = g.input(DType::f64, shape, "x");
    const Node* y = x;
    for (int s = 0; s < 6; ++s) y = gen.step(y);
    const Node* out = must(b.binary(Op::Add, y, must(b.scalar(0.5, DType::f64))));

    ir::HostTensor xt = ir::HostTensor::zeros(DType::f64, shape);
    testing::Buffer xv;
    for (int64_t i = 0; i < xt.numel(); ++i) {
      double v = std::uniform_real_distribution<double>(-2, 2)(rng);
      xt.set(i, v);
      xv.push_back(v);
    }
    auto want = interp::evaluate_reference({out}, {{x, xt}});
    ASSERT_TRUE(want) << want.error().message;
    Outputs optimized = optimize(g, {out});
    for (const auto& fuser : {make_first_fuser(), make_beam_fuser(model),
                              make_beam_fuser(model, {.max_blocks = 1, .beam_width = 1})}) {
      std::vector<testing::Buffer> got =
          testing::run_fusion_plan(fuser->fuse(optimized), optimized, {{x, xv}});
      ASSERT_EQ(got.size(), 1u);
      ASSERT_EQ(static_cast<int64_t>(got[0].size()), (*want)[0].numel())
          << fuser->name() << " trial " << trial;
      for (int64_t i = 0; i < (*want)[0].numel(); ++i)
        ASSERT_NEAR(got[0][static_cast<size_t>(i)], (*want)[0].get(i), 1e-9)
            << fuser->name() << " trial " << trial << " element " << i;
    }
    // On these graphs the beam never does worse than the alternatives, by its own cost model.
    auto seconds = [&](const FusionPlan& plan) {
      double total = 0;
      for (const FusedGroup& grp : plan.groups) total += model.estimate(grp).seconds;
      return total;
    };
    double beam = make_beam_fuser(model)->fuse(optimized).total_seconds;
    EXPECT_LE(beam, seconds(make_first_fuser()->fuse(optimized)) * (1 + 1e-9)) << trial;
    EXPECT_LE(beam, make_beam_fuser(model, {1, 1})->fuse(optimized).total_seconds * (1 + 1e-9))
        << trial;
    ++compared;
  }
  EXPECT_EQ(compared, 150);
}

}  // namespace
}  // namespace kiln::passes
