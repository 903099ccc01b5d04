// Builder rules for elementwise ops, sources and reductions: shapes, dtypes, canonical attributes
// and the exact error messages.
#include <cmath>

#include "tests/ir/ir_test_support.h"

namespace kiln::ir {
namespace {

using testing::err;
using testing::ok;

class BuilderRules : public ::testing::Test {
 protected:
  Graph g;
  Builder b{g};
  const Node* in(DType t, Shape s) { return g.input(t, std::move(s)); }
};

TEST_F(BuilderRules, BinaryOpsBroadcastLikeNumpy) {
  struct Case {
    Shape a, b, out;
  } cases[] = {{{3, 1}, {1, 4}, {3, 4}},
               {{5}, {2, 5}, {2, 5}},
               {{}, {2, 3}, {2, 3}},
               {{2, 1, 4}, {3, 1}, {2, 3, 4}},
               {{0, 1}, {1, 5}, {0, 5}}};
  for (const Case& c : cases) {
    const Node* n = ok(b.binary(Op::Add, in(DType::f32, c.a), in(DType::f32, c.b)));
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(n->shape, c.out) << shape_str(c.a) << " + " << shape_str(c.b);
    EXPECT_EQ(n->dtype, DType::f32);
    EXPECT_EQ(n->op, Op::Add);
  }
}

TEST_F(BuilderRules, BroadcastFailureNamesOpAndShapes) {
  EXPECT_EQ(err(b.binary(Op::Add, in(DType::f32, {3, 4}), in(DType::f32, {5}))),
            "add: shapes [3,4] and [5] do not broadcast");
  EXPECT_EQ(err(b.binary(Op::Lt, in(DType::i32, {2}), in(DType::i32, {3}))),
            "lt: shapes [2] and [3] do not broadcast");
}

TEST_F(BuilderRules, ElementCountsMustFitInt64) {
  const int64_t big = int64_t{1} << 32;
  EXPECT_EQ(err(b.binary(Op::Add, in(DType::f32, {big, 1}), in(DType::f32, {1, big}))),
            "add: shape [4294967296,4294967296] has too many elements (kiln indexes at most 2^59)");
  EXPECT_EQ(err(b.full({big, big}, 0, DType::f32)),
            "full: shape [4294967296,4294967296] has too many elements (kiln indexes at most 2^59)");
  // An empty shape is refused as well when its other extents pass the limit, in whichever order
  // (the strides of its axes would), and taken at the limit.
  const int64_t t40 = int64_t{1} << 40;
  const std::string empty_why =
      " is empty, but its other extents multiply to more than 2^59, past "
      "what kiln indexes";
  EXPECT_EQ(err(b.full({t40, t40, 0}, 0, DType::f32)),
            "full: shape [1099511627776,1099511627776,0]" + empty_why);
  EXPECT_EQ(err(b.full({0, t40, t40}, 0, DType::f32)),
            "full: shape [0,1099511627776,1099511627776]" + empty_why);
  EXPECT_EQ(ok(b.full({0, int64_t{1} << 59}, 0, DType::f32))->numel(), 0);
  const Node* empty = in(DType::f32, {0, 4});
  EXPECT_EQ(err(b.reshape(empty, {0, t40, t40})),
            "reshape: shape [0,1099511627776,1099511627776]" + empty_why);
  EXPECT_EQ(err(b.reshape(empty, {t40, -1, t40})),
            "reshape: shape [1099511627776,-1,1099511627776] has too many elements (kiln indexes "
            "at most 2^59)");
  EXPECT_EQ(ok(b.reshape(empty, {4, 0, 2}))->shape, (Shape{4, 0, 2}));
}

TEST_F(BuilderRules, OperandDtypesMustMatch) {
  EXPECT_EQ(err(b.binary(Op::Mul, in(DType::f32, {2}), in(DType::i32, {2}))),
            "mul: dtypes f32 and i32 do not match");
}

TEST_F(BuilderRules, ResultDtypes) {
  const Node* x = in(DType::f16, {4});
  EXPECT_EQ(ok(b.binary(Op::Eq, x, x))->dtype, DType::boolean);
  EXPECT_EQ(ok(b.binary(Op::Ge, x, x))->dtype, DType::boolean);
  EXPECT_EQ(ok(b.binary(Op::Pow, x, x))->dtype, DType::f16);
  const Node* p = in(DType::boolean, {4});
  EXPECT_EQ(ok(b.binary(Op::And, p, p))->dtype, DType::boolean);
  EXPECT_EQ(ok(b.unary(Op::Not, p))->dtype, DType::boolean);
  EXPECT_EQ(ok(b.binary(Op::Eq, p, p))->dtype, DType::boolean);
  const Node* i = in(DType::u8, {4});
  EXPECT_EQ(ok(b.unary(Op::Neg, i))->dtype, DType::u8);
  EXPECT_EQ(ok(b.binary(Op::Div, i, i))->dtype, DType::u8);
}

TEST_F(BuilderRules, DtypeClassErrors) {
  EXPECT_EQ(err(b.unary(Op::Exp, in(DType::i32, {2}))), "exp: needs a floating dtype, got i32");
  EXPECT_EQ(err(b.binary(Op::Pow, in(DType::i64, {2}), in(DType::i64, {2}))),
            "pow: needs a floating dtype, got i64");
  EXPECT_EQ(err(b.unary(Op::Floor, in(DType::u8, {2}))), "floor: needs a floating dtype, got u8");
  EXPECT_EQ(err(b.unary(Op::Not, in(DType::f32, {2}))), "not: needs bool operands, got f32");
  EXPECT_EQ(err(b.binary(Op::Or, in(DType::i8, {2}), in(DType::i8, {2}))),
            "or: needs bool operands, got i8");
  EXPECT_EQ(err(b.unary(Op::Neg, in(DType::boolean, {2}))), "neg: needs a numeric dtype, got bool");
  EXPECT_EQ(err(b.binary(Op::Max, in(DType::boolean, {2}), in(DType::boolean, {2}))),
            "max: needs a numeric dtype, got bool");
}

// Every unary and binary elementwise row of kiln/ops.def, in every dtype: the builder accepts
// exactly the dtypes its Dtypes column allows, and a Compare row gives bool.
TEST_F(BuilderRules, EachOpTakesTheDtypesOfItsTableRow) {
  const Op ops[] = {
#define KILN_ELEMENTWISE(Enum, ...) Op::Enum,
#include "kiln/ops.def"
  };
  int checked = 0;
  for (Op op : ops) {
    const int arity = op_arity(op);
    if (op == Op::Cast || arity == 3) continue;  // own builder calls (cast, where)
    for (DType t : kAllDTypes) {
      bool allowed = true;
      switch (op_dtypes(op)) {
        case OpDtypes::Float: allowed = is_float(t); break;
        case OpDtypes::Bool: allowed = t == DType::boolean; break;
        case OpDtypes::Numeric: allowed = t != DType::boolean; break;
        case OpDtypes::Any:
        case OpDtypes::Compare:
        case OpDtypes::Select:
        case OpDtypes::None: break;
      }
      const Node* x = in(t, {2});
      NodeResult r = arity == 1 ? b.unary(op, x) : b.binary(op, x, x);
      ASSERT_EQ(r.has_value(), allowed) << op_name(op) << " on " << dtype_name(t);
      if (r) {
        EXPECT_EQ((*r)->dtype, is_comparison(op) ? DType::boolean : t) << op_name(op);
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 33 * static_cast<int>(std::size(kAllDTypes)));
}

TEST_F(BuilderRules, WhereChecksConditionDtypesAndShapes) {
  const Node* c = in(DType::boolean, {3, 1});
  const Node* a = in(DType::f32, {4});
  const Node* n = ok(b.where(c, a, in(DType::f32, {})));
  EXPECT_EQ(n->shape, (Shape{3, 4}));
  EXPECT_EQ(n->dtype, DType::f32);
  EXPECT_EQ(err(b.where(a, a, a)), "where: condition must be bool, got f32");
  EXPECT_EQ(err(b.where(c, a, in(DType::f64, {4}))), "where: dtypes f32 and f64 do not match");
  EXPECT_EQ(err(b.where(c, a, in(DType::f32, {5}))),
            "where: shapes [3,1], [4] and [5] do not broadcast");
}

TEST_F(BuilderRules, CastCarriesTargetDtype) {
  const Node* n = ok(b.cast(in(DType::f32, {2}), DType::bf16));
  EXPECT_EQ(n->dtype, DType::bf16);
  EXPECT_EQ(n->attrs.dt(AttrKey::to), DType::bf16);
}

TEST_F(BuilderRules, FullAndScalarAreCanonicalAndInterned) {
  const Node* s = ok(b.scalar(2.5, DType::f32));
  EXPECT_EQ(s, ok(b.full({}, 2.5, DType::f32)));
  EXPECT_EQ(s->op, Op::Full);
  EXPECT_TRUE(s->shape.empty());
  EXPECT_EQ(s->attrs.items().size(), 3u);
  EXPECT_EQ(s->attrs.ints(AttrKey::shape), std::vector<int64_t>{});
  EXPECT_EQ(s->attrs.f(AttrKey::value), 2.5);
  EXPECT_EQ(s->attrs.dt(AttrKey::dtype), DType::f32);
  // Integer zero has one spelling.
  EXPECT_EQ(ok(b.scalar(-0.0, DType::i32)), ok(b.scalar(0.0, DType::i32)));
  EXPECT_EQ(ok(b.full({2, 0}, 1, DType::u8))->shape, (Shape{2, 0}));
}

TEST_F(BuilderRules, FullRejectsUnrepresentableValues) {
  EXPECT_EQ(err(b.full({2}, 1.5, DType::i32)),
            "full: value 1.5 is not representable in i32 (expected an integer)");
  EXPECT_EQ(err(b.full({2}, 256, DType::u8)), "full: value 256 is out of range for u8");
  EXPECT_EQ(err(b.full({2}, -1, DType::u8)), "full: value -1 is out of range for u8");
  EXPECT_EQ(err(b.full({}, 2, DType::boolean)),
            "full: value 2 is not representable as bool (expected 0 or 1)");
  EXPECT_EQ(err(b.full({}, INFINITY, DType::i64)),
            "full: value inf is not representable in i64 (expected an integer)");
  EXPECT_EQ(err(b.full({2, -1}, 0, DType::f32)), "full: negative dimension in shape [2,-1]");
  EXPECT_TRUE(b.full({}, -128, DType::i8).has_value());
  EXPECT_TRUE(b.full({}, -INFINITY, DType::f16).has_value());
}

TEST_F(BuilderRules, ArangeFollowsPythonRange) {
  struct Case {
    int64_t start, end, step, len;
  } cases[] = {{0, 10, 3, 4}, {5, 0, -2, 3}, {0, 0, 1, 0}, {3, 1, 1, 0}, {-4, 4, 4, 2}};
  for (const Case& c : cases) {
    const Node* n = ok(b.arange(c.start, c.end, c.step, DType::i32));
    EXPECT_EQ(n->shape, (Shape{c.len})) << c.start << ":" << c.end << ":" << c.step;
    EXPECT_EQ(n->attrs.i(AttrKey::start), c.start);
    EXPECT_EQ(n->attrs.i(AttrKey::step), c.step);
  }
  EXPECT_EQ(ok(b.arange(0, 4, 1, DType::f32))->dtype, DType::f32);
  EXPECT_EQ(err(b.arange(0, 4, 0, DType::i32)), "arange: step must not be 0");
  EXPECT_EQ(err(b.arange(0, 300, 1, DType::i8)), "arange: values from 0 to 299 do not fit in i8");
  EXPECT_EQ(err(b.arange(0, 3, 1, DType::boolean)), "arange: needs a numeric dtype, got bool");
}

TEST_F(BuilderRules, ReduceNormalizesAxes) {
  const Node* x = in(DType::f32, {2, 3, 4});
  const Node* a = ok(b.reduce(Op::Sum, x, std::vector<int64_t>{-1, 0}, false));
  EXPECT_EQ(a->attrs.ints(AttrKey::axes), (std::vector<int64_t>{0, 2}));
  EXPECT_FALSE(a->attrs.b(AttrKey::keepdim));
  EXPECT_EQ(a->shape, (Shape{3}));
  EXPECT_EQ(a, ok(b.reduce(Op::Sum, x, std::vector<int64_t>{2, -3}, false)));
  const Node* k = ok(b.reduce(Op::ReduceMax, x, std::vector<int64_t>{1}, true));
  EXPECT_EQ(k->shape, (Shape{2, 1, 4}));
  const Node* all = ok(b.reduce(Op::Prod, x, std::nullopt, false));
  EXPECT_EQ(all->attrs.ints(AttrKey::axes), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_TRUE(all->shape.empty());
  EXPECT_EQ(ok(b.reduce(Op::Sum, x, std::nullopt, true))->shape, (Shape{1, 1, 1}));
}

TEST_F(BuilderRules, ReducingNoAxisIsTheIdentity) {
  const Node* x = in(DType::f32, {2, 3});
  EXPECT_EQ(ok(b.reduce(Op::Sum, x, std::vector<int64_t>{}, false)), x);
  const Node* s = in(DType::i32, {});
  EXPECT_EQ(ok(b.reduce(Op::ReduceMin, s, std::nullopt, false)), s);
}

TEST_F(BuilderRules, ReduceErrors) {
  const Node* x = in(DType::f32, {2, 3});
  EXPECT_EQ(err(b.reduce(Op::Sum, x, std::vector<int64_t>{2}, false)),
            "sum: axis 2 is out of range for shape [2,3]");
  EXPECT_EQ(err(b.reduce(Op::Sum, x, std::vector<int64_t>{1, -1}, false)),
            "sum: axis 1 appears twice in axes [1,-1]");
  EXPECT_EQ(err(b.reduce(Op::Prod, in(DType::boolean, {2}), std::nullopt, false)),
            "prod: needs a numeric dtype, got bool");
  EXPECT_EQ(err(b.reduce(Op::ReduceMax, in(DType::f32, {0, 3}), std::vector<int64_t>{0}, false)),
            "max: cannot reduce the empty axis 0 of shape [0,3]");
  EXPECT_TRUE(b.reduce(Op::Sum, in(DType::f32, {0, 3}), std::vector<int64_t>{0}, false));
}

TEST_F(BuilderRules, MeanIsSumTimesReciprocalCount) {
  const Node* x = in(DType::f32, {4, 5});
  const Node* m = ok(b.mean(x, std::vector<int64_t>{1}, true));
  ASSERT_EQ(m->op, Op::Mul);
  const Node* s = m->inputs[0];
  EXPECT_EQ(s->op, Op::Sum);
  EXPECT_EQ(s->inputs[0], x);
  EXPECT_EQ(s->shape, (Shape{4, 1}));
  EXPECT_EQ(m->inputs[1], ok(b.scalar(0.2, DType::f32)));
  const Node* all = ok(b.mean(x, std::nullopt, false));
  EXPECT_EQ(all->inputs[1]->attrs.f(AttrKey::value), 1.0 / 20);
  EXPECT_EQ(err(b.mean(in(DType::i32, {2}), std::nullopt, false)),
            "mean: needs a floating dtype, got i32");
}

TEST_F(BuilderRules, ArgReduceGivesI32) {
  const Node* x = in(DType::f64, {2, 3});
  const Node* a = ok(b.arg_reduce(Op::ArgMax, x, -1, false));
  EXPECT_EQ(a->dtype, DType::i32);
  EXPECT_EQ(a->shape, (Shape{2}));
  EXPECT_EQ(a->attrs.i(AttrKey::axis), 1);
  EXPECT_EQ(ok(b.arg_reduce(Op::ArgMin, x, 0, true))->shape, (Shape{1, 3}));
  EXPECT_EQ(err(b.arg_reduce(Op::ArgMax, x, 2, false)),
            "argmax: axis 2 is out of range for shape [2,3]");
  EXPECT_EQ(err(b.arg_reduce(Op::ArgMin, in(DType::f32, {0}), 0, false)),
            "argmin: cannot reduce the empty axis 0 of shape [0]");
}

}  // namespace
}  // namespace kiln::ir
