// Builder rules for movement ops and matmul: output shapes, canonical attributes, error messages.
#include <fmt/format.h>

#include "tests/ir/ir_test_support.h"

namespace kiln::ir {
namespace {

using testing::err;
using testing::ok;

class BuilderMovement : public ::testing::Test {
 protected:
  Graph g;
  Builder b{g};
  const Node* in(DType t, Shape s) { return g.input(t, std::move(s)); }
  const Node* x = g.input(DType::f32, {2, 3, 4}, "x");
};

TEST_F(BuilderMovement, ReshapeResolvesMinusOne) {
  const Node* r = ok(b.reshape(x, {-1, 4}));
  EXPECT_EQ(r->shape, (Shape{6, 4}));
  EXPECT_EQ(r->attrs.ints(AttrKey::shape), (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(r, ok(b.reshape(x, {6, 4})));
  EXPECT_EQ(ok(b.reshape(in(DType::f32, {}), {1, 1}))->shape, (Shape{1, 1}));
}

TEST_F(BuilderMovement, ReshapeErrors) {
  EXPECT_EQ(err(b.reshape(x, {5, -1})),
            "reshape: cannot reshape [2,3,4] (24 elements) into [5,-1]");
  EXPECT_EQ(err(b.reshape(x, {2, 12, 2})),
            "reshape: cannot reshape [2,3,4] (24 elements) into [2,12,2]");
  EXPECT_EQ(err(b.reshape(x, {-1, -1})), "reshape: more than one -1 in shape [-1,-1]");
  EXPECT_EQ(err(b.reshape(x, {-2, -12})), "reshape: invalid dimension -2 in shape [-2,-12]");
  EXPECT_EQ(err(b.reshape(in(DType::f32, {0, 3}), {0, -1})),
            "reshape: cannot reshape [0,3] (0 elements) into [0,-1]");
}

TEST_F(BuilderMovement, PermuteNormalizesDims) {
  const Node* p = ok(b.permute(x, {-1, 0, 1}));
  EXPECT_EQ(p->shape, (Shape{4, 2, 3}));
  EXPECT_EQ(p->attrs.ints(AttrKey::dims), (std::vector<int64_t>{2, 0, 1}));
  EXPECT_EQ(p, ok(b.permute(x, {2, 0, 1})));
  EXPECT_EQ(err(b.permute(x, {0, 0, 1})),
            "permute: dims [0,0,1] are not a permutation of the axes of [2,3,4]");
  EXPECT_EQ(err(b.permute(x, {1, 0})),
            "permute: dims [1,0] are not a permutation of the axes of [2,3,4]");
}

TEST_F(BuilderMovement, ExpandFollowsBroadcastTo) {
  const Node* e = ok(b.expand(in(DType::f32, {3, 1}), {2, 3, 5}));
  EXPECT_EQ(e->shape, (Shape{2, 3, 5}));
  EXPECT_EQ(e->attrs.ints(AttrKey::shape), (std::vector<int64_t>{2, 3, 5}));
  EXPECT_EQ(err(b.expand(in(DType::f32, {3, 4}), {4, 4})), "expand: cannot expand [3,4] to [4,4]");
  EXPECT_EQ(err(b.expand(x, {3, 4})), "expand: cannot expand [2,3,4] to [3,4]");
}

// Expected element lists computed with Python: list(range(n))[start:end:step].
struct SliceCase {
  int64_t n;
  std::optional<int64_t> start, end;
  int64_t step;
  std::vector<int64_t> elements;
};
const SliceCase kSliceCases[] = {
    {10, std::nullopt, std::nullopt, 1, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
    {10, std::nullopt, std::nullopt, -1, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0}},
    {10, 2, 8, 3, {2, 5}},
    {10, -3, std::nullopt, 1, {7, 8, 9}},
    {10, std::nullopt, -3, -2, {9}},
    {10, 8, 2, -3, {8, 5}},
    {10, -100, 100, 4, {0, 4, 8}},
    {10, 100, -100, -4, {9, 5, 1}},
    {10, 5, 5, 1, {}},
    {10, 5, 2, 1, {}},
    {10, 2, 5, -1, {}},
    {0, std::nullopt, std::nullopt, -1, {}},
    {7, 3, 4, 5, {3}},
    {7, std::nullopt, std::nullopt, 7, {0}},
    {7, 6, std::nullopt, -6, {6, 0}},
    {7, std::nullopt, 0, -1, {6, 5, 4, 3, 2, 1}},
    {7, -1, -8, -2, {6, 4, 2, 0}},
    {1, std::nullopt, std::nullopt, -1, {0}},
    // Steps and bounds at int64's ends (no overflow in the length).
    {10, std::nullopt, std::nullopt, INT64_MAX, {0}},
    {10, std::nullopt, std::nullopt, -INT64_MAX, {9}},
    {10, std::nullopt, std::nullopt, INT64_MIN, {9}},
    {10, 0, INT64_MAX, INT64_MAX, {0}},
    {10, INT64_MIN, INT64_MAX, 3, {0, 3, 6, 9}},
    {10, INT64_MAX, INT64_MIN, -4, {9, 5, 1}},
};

TEST_F(BuilderMovement, SliceMatchesPythonAndIsCanonical) {
  for (const SliceCase& c : kSliceCases) {
    const Node* v = in(DType::f32, {2, c.n});
    const Node* s = ok(b.slice(v, -1, c.start, c.end, c.step));
    ASSERT_NE(s, nullptr);
    std::string what =
        fmt::format("n={} {}:{}:{}", c.n, c.start.value_or(-999), c.end.value_or(-999), c.step);
    ASSERT_EQ(s->shape, (Shape{2, static_cast<int64_t>(c.elements.size())})) << what;
    int64_t start = s->attrs.i(AttrKey::start), step = s->attrs.i(AttrKey::step);
    EXPECT_EQ(s->attrs.i(AttrKey::axis), 1);
    for (size_t k = 0; k < c.elements.size(); ++k)
      EXPECT_EQ(start + static_cast<int64_t>(k) * step, c.elements[k]) << what;
    if (!c.elements.empty()) {
      EXPECT_TRUE(start >= 0 && start < c.n) << what;
    }
    // Re-slicing with the canonical attributes under Python semantics gives the same node.
    EXPECT_EQ(s, ok(b.slice(v, 1, start, s->attrs.i(AttrKey::end), step))) << what;
  }
}

TEST_F(BuilderMovement, EqualSelectionsInternTogether) {
  const Node* v = in(DType::f32, {7});
  EXPECT_EQ(ok(b.slice(v, 0, 3, 4, 1)), ok(b.slice(v, 0, 3, 5, 9)));
  EXPECT_EQ(ok(b.slice(v, 0, 5, 2, 1)), ok(b.slice(v, 0, 2, 5, -1)));
  EXPECT_EQ(ok(b.slice(v, 0, std::nullopt, std::nullopt, -1)), ok(b.slice(v, 0, 6, -100, -1)));
  EXPECT_EQ(err(b.slice(v, 0, 0, 1, 0)), "slice: step must not be 0");
  EXPECT_EQ(err(b.slice(v, 1, 0, 1, 1)), "slice: axis 1 is out of range for shape [7]");
}

TEST_F(BuilderMovement, Pad) {
  const Node* p = ok(b.pad(in(DType::i32, {2, 3}), {1, 0}, {2, 3}, -1));
  EXPECT_EQ(p->shape, (Shape{5, 6}));
  EXPECT_EQ(p->attrs.f(AttrKey::value), -1.0);
  EXPECT_EQ(err(b.pad(x, {1}, {1}, 0)),
            "pad: before [1] and after [1] need one entry per axis of [2,3,4]");
  EXPECT_EQ(err(b.pad(in(DType::f32, {2}), {-1}, {0}, 0)),
            "pad: padding must be non-negative, got before [-1] and after [0]");
  EXPECT_EQ(err(b.pad(in(DType::i32, {2}), {1}, {0}, 0.5)),
            "pad: value 0.5 is not representable in i32 (expected an integer)");
}

TEST_F(BuilderMovement, Concat) {
  const Node* c = ok(b.concat({x, in(DType::f32, {2, 5, 4}), x}, -2));
  EXPECT_EQ(c->shape, (Shape{2, 11, 4}));
  EXPECT_EQ(c->attrs.i(AttrKey::axis), 1);
  EXPECT_EQ(c->inputs.size(), 3u);
  EXPECT_EQ(err(b.concat({x, in(DType::f32, {2, 5, 5})}, 1)),
            "concat: shapes [2,3,4] and [2,5,5] differ outside axis 1");
  EXPECT_EQ(err(b.concat({x, in(DType::f64, {2, 3, 4})}, 0)),
            "concat: dtypes f32 and f64 do not match");
  EXPECT_EQ(err(b.concat({}, 0)), "concat: needs at least one operand");
}

TEST_F(BuilderMovement, FlipAxesSortedUnique) {
  const Node* f = ok(b.flip(x, {-1, 0}));
  EXPECT_EQ(f->attrs.ints(AttrKey::axes), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(f->shape, x->shape);
  EXPECT_EQ(ok(b.flip(x, {})), x);
  EXPECT_EQ(err(b.flip(x, {0, -3})), "flip: axis 0 appears twice in axes [0,-3]");
}

TEST_F(BuilderMovement, RollShiftsNormalized) {
  const Node* r = ok(b.roll(x, {-1, 7, 1}, {-1, 1, 1}));
  // axis 1 (n=3): 7 + 1 = 8 = 2 mod 3; axis 2 (n=4): -1 = 3 mod 4; sorted by axis.
  EXPECT_EQ(r->attrs.ints(AttrKey::axes), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(r->attrs.ints(AttrKey::shifts), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(ok(b.roll(x, {3, 4}, {1, 2})), x);  // whole turns
  EXPECT_EQ(err(b.roll(x, {1}, {0, 1})), "roll: shifts [1] and axes [0,1] differ in length");
}

TEST_F(BuilderMovement, Unfold) {
  const Node* u = ok(b.unfold(in(DType::f32, {3, 10}), -1, 4, 3));
  EXPECT_EQ(u->shape, (Shape{3, 3, 4}));
  EXPECT_EQ(u->attrs.i(AttrKey::dim), 1);
  EXPECT_EQ(err(b.unfold(x, 2, 5, 1)), "unfold: size 5 does not fit axis 2 of shape [2,3,4]");
  EXPECT_EQ(err(b.unfold(x, 2, 2, 0)), "unfold: step must be at least 1, got 0");
}

TEST_F(BuilderMovement, Trilu) {
  const Node* t = ok(b.trilu(x, -2, false));
  EXPECT_EQ(t->shape, x->shape);
  EXPECT_EQ(t->dtype, DType::f32);
  EXPECT_EQ(t->attrs.i(AttrKey::k), -2);
  EXPECT_FALSE(t->attrs.b(AttrKey::upper));
  EXPECT_EQ(ok(b.trilu(in(DType::boolean, {0, 3}), 0, true))->shape, (Shape{0, 3}));
  EXPECT_EQ(err(b.trilu(in(DType::f32, {4}), 0, true)), "trilu: needs a tensor of rank 2 or more, got [4]");
}

TEST_F(BuilderMovement, GatherShapes) {
  const Node* g1 = ok(b.gather(x, in(DType::i64, {5, 6}), 1));
  EXPECT_EQ(g1->op, Op::Gather);
  EXPECT_EQ(g1->shape, (Shape{2, 5, 6, 4}));
  EXPECT_EQ(g1->dtype, DType::f32);
  EXPECT_EQ(ok(b.gather(x, in(DType::i32, {}), -1))->shape, (Shape{2, 3}));  // rank 0 drops it
  EXPECT_EQ(ok(b.gather(x, in(DType::i32, {0}), 0))->shape, (Shape{0, 3, 4}));
  const Node* g2 = ok(b.gather(x, in(DType::i32, {7}), -3));
  EXPECT_EQ(g2->attrs.i(AttrKey::axis), 0);
  EXPECT_EQ(g2->shape, (Shape{7, 3, 4}));
  // An empty axis can feed only an empty result.
  EXPECT_EQ(ok(b.gather(in(DType::f32, {3, 0}), in(DType::i64, {0}), 1))->shape, (Shape{3, 0}));
}

TEST_F(BuilderMovement, GatherErrors) {
  EXPECT_EQ(err(b.gather(x, in(DType::f32, {2}), 0)),
            "gather: indices must be i32 or i64, got f32[2]");
  EXPECT_EQ(err(b.gather(x, in(DType::u8, {}), 0)), "gather: indices must be i32 or i64, got u8[]");
  EXPECT_EQ(err(b.gather(x, in(DType::i64, {2}), 3)),
            "gather: axis 3 is out of range for shape [2,3,4]");
  EXPECT_EQ(err(b.gather(in(DType::f32, {}), in(DType::i64, {2}), 0)),
            "gather: axis 0 is out of range for shape []");
  EXPECT_EQ(err(b.gather(in(DType::f32, {3, 0}), in(DType::i64, {2}), 1)),
            "gather: axis 1 of [3,0] is empty, so the indices of shape [3,2] have nothing to read");
}

TEST_F(BuilderMovement, GatherElementsShapes) {
  const Node* g = ok(b.gather_elements(x, in(DType::i64, {2, 3, 9}), -1));
  EXPECT_EQ(g->op, Op::GatherElements);
  EXPECT_EQ(g->shape, (Shape{2, 3, 9}));  // the gathered axis may be longer
  EXPECT_EQ(g->attrs.i(AttrKey::axis), 2);
  EXPECT_EQ(ok(b.gather_elements(x, in(DType::i32, {1, 2, 4}), 0))->shape, (Shape{1, 2, 4}));
}

TEST_F(BuilderMovement, GatherElementsErrors) {
  EXPECT_EQ(err(b.gather_elements(x, in(DType::boolean, {2, 3, 4}), 0)),
            "gather_elements: indices must be i32 or i64, got bool[2,3,4]");
  EXPECT_EQ(err(b.gather_elements(x, in(DType::i64, {2, 3}), 0)),
            "gather_elements: indices [2,3] and data [2,3,4] differ in rank");
  EXPECT_EQ(err(b.gather_elements(x, in(DType::i64, {2, 3, 4}), -4)),
            "gather_elements: axis -4 is out of range for shape [2,3,4]");
  EXPECT_EQ(err(b.gather_elements(x, in(DType::i64, {2, 4, 4}), 0)),
            "gather_elements: indices [2,4,4] are longer than data [2,3,4] on axis 1 (only axis 0 "
            "may differ)");
}

TEST_F(BuilderMovement, ScatterElementsShapes) {
  const Node* s =
      ok(b.scatter_elements(x, in(DType::i64, {2, 3, 9}), in(DType::f32, {2, 3, 9}), -1, "add"));
  EXPECT_EQ(s->op, Op::ScatterElements);
  EXPECT_EQ(s->shape, (Shape{2, 3, 4}));  // data's shape; the scattered axis may be longer
  EXPECT_EQ(s->dtype, DType::f32);
  EXPECT_EQ(s->attrs.i(AttrKey::axis), 2);
  EXPECT_EQ(s->attrs.s(AttrKey::reduction), "add");
  EXPECT_EQ(
      ok(b.scatter_elements(x, in(DType::i32, {1, 2, 0}), in(DType::f32, {1, 2, 0}), 0, "none"))
          ->shape,
      (Shape{2, 3, 4}));
  const Node* m = in(DType::boolean, {2, 3});
  EXPECT_EQ(ok(b.scatter_elements(m, in(DType::i32, {1, 3}), in(DType::boolean, {1, 3}), 0, "none"))
                ->dtype,
            DType::boolean);
}

TEST_F(BuilderMovement, ScatterElementsErrors) {
  const Node* u = in(DType::f32, {2, 3, 4});
  EXPECT_EQ(err(b.scatter_elements(x, in(DType::f32, {2, 3, 4}), u, 0, "none")),
            "scatter_elements: indices must be i32 or i64, got f32[2,3,4]");
  EXPECT_EQ(err(b.scatter_elements(x, in(DType::i64, {2, 3}), in(DType::f32, {2, 3}), 0, "none")),
            "scatter_elements: indices [2,3] and data [2,3,4] differ in rank");
  EXPECT_EQ(
      err(b.scatter_elements(x, in(DType::i64, {2, 3, 4}), in(DType::f32, {2, 3, 3}), 0, "none")),
      "scatter_elements: updates [2,3,3] and indices [2,3,4] differ in shape");
  EXPECT_EQ(
      err(b.scatter_elements(x, in(DType::i64, {2, 3, 4}), in(DType::f64, {2, 3, 4}), 0, "none")),
      "scatter_elements: updates f64[2,3,4] and data f32[2,3,4] differ in dtype");
  EXPECT_EQ(err(b.scatter_elements(x, in(DType::i64, {2, 3, 4}), u, 3, "none")),
            "scatter_elements: axis 3 is out of range for shape [2,3,4]");
  EXPECT_EQ(
      err(b.scatter_elements(x, in(DType::i64, {2, 4, 4}), in(DType::f32, {2, 4, 4}), 0, "none")),
      "scatter_elements: indices [2,4,4] are longer than data [2,3,4] on axis 1 (only axis "
      "0 may differ)");
  EXPECT_EQ(err(b.scatter_elements(x, in(DType::i64, {2, 3, 4}), u, 0, "sum")),
            "scatter_elements: reduction must be none, add, mul, max or min, got 'sum'");
  const Node* m = in(DType::boolean, {2});
  EXPECT_EQ(err(b.scatter_elements(m, in(DType::i64, {2}), in(DType::boolean, {2}), 0, "max")),
            "scatter_elements: reduction max needs a numeric dtype, got bool");
  EXPECT_EQ(err(b.scatter_elements(in(DType::f32, {}), in(DType::i64, {}), in(DType::f32, {}), 0,
                                   "none")),
            "scatter_elements: needs data of rank >= 1, got the scalar f32[]");
}

TEST_F(BuilderMovement, MatmulShapes) {
  struct Case {
    Shape a, b, out;
  } cases[] = {{{2, 3}, {3, 4}, {2, 4}},
               {{5, 2, 3}, {3, 4}, {5, 2, 4}},
               {{5, 1, 2, 3}, {6, 3, 4}, {5, 6, 2, 4}},
               {{3}, {3, 4}, {4}},
               {{2, 3}, {3}, {2}},
               {{3}, {3}, {}},
               {{7, 2, 3}, {3}, {7, 2}}};
  for (const Case& c : cases) {
    const Node* m = ok(b.matmul(in(DType::f32, c.a), in(DType::f32, c.b)));
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->shape, c.out) << shape_str(c.a) << " @ " << shape_str(c.b);
  }
}

TEST_F(BuilderMovement, MatmulPromotesVectorsWithReshape) {
  const Node* v = in(DType::f32, {3});
  const Node* m = in(DType::f32, {3, 4});
  const Node* r = ok(b.matmul(v, m));
  ASSERT_EQ(r->op, Op::Reshape);
  const Node* core = r->inputs[0];
  ASSERT_EQ(core->op, Op::Matmul);
  EXPECT_EQ(core->shape, (Shape{1, 4}));
  EXPECT_EQ(core->inputs[0]->op, Op::Reshape);
  EXPECT_EQ(core->inputs[0]->shape, (Shape{1, 3}));
  EXPECT_EQ(core->inputs[1], m);
  const Node* direct = ok(b.matmul(m, in(DType::f32, {4, 2})));
  EXPECT_EQ(direct->op, Op::Matmul);
}

TEST_F(BuilderMovement, MatmulErrors) {
  EXPECT_EQ(err(b.matmul(in(DType::f32, {2, 3}), in(DType::f32, {4, 5}))),
            "matmul: inner dimensions of [2,3] and [4,5] differ (3 vs 4)");
  EXPECT_EQ(err(b.matmul(in(DType::f32, {2, 2, 3}), in(DType::f32, {3, 3, 4}))),
            "matmul: batch dimensions of [2,2,3] and [3,3,4] do not broadcast");
  EXPECT_EQ(err(b.matmul(in(DType::f32, {}), in(DType::f32, {3}))),
            "matmul: operands must be at least 1-D, got [] and [3]");
  EXPECT_EQ(err(b.matmul(in(DType::f32, {2, 3}), in(DType::i32, {3, 4}))),
            "matmul: dtypes f32 and i32 do not match");
}

}  // namespace
}  // namespace kiln::ir
