// evaluate_reference as a whole: input binding errors, several outputs, f64 between ops.
#include "tests/runtime/reference_test_util.h"

namespace kiln::testing {
namespace {

TEST(ReferenceGraph, MissingInputIsAnErrorNamingIt) {
  ir::Graph g;
  const Node* x = g.input(DType::f32, {2, 3}, "x");
  const Node* y = g.make(Op::Neg, DType::f32, {2, 3}, {x}, {});
  auto r = interp::evaluate_reference({y}, {});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message, "reference: input 'x' (slot 0) is not bound (expected f32[2,3])");
  const Node* anon = g.input(DType::i8, {}, "");
  auto r2 = interp::evaluate_reference({anon}, {});
  ASSERT_FALSE(r2.has_value());
  EXPECT_EQ(r2.error().message, "reference: input slot 1 is not bound (expected i8[])");
}

TEST(ReferenceGraph, InputDtypeOrShapeMismatchIsAnError) {
  ir::Graph g;
  const Node* x = g.input(DType::f32, {2, 3}, "x");
  auto wrong_dtype = interp::evaluate_reference({x}, {{x, HostTensor::zeros(DType::f64, {2, 3})}});
  ASSERT_FALSE(wrong_dtype.has_value());
  EXPECT_EQ(wrong_dtype.error().message,
            "reference: input 'x' (slot 0): expected f32[2,3], given f64[2,3]");
  auto wrong_shape = interp::evaluate_reference({x}, {{x, HostTensor::zeros(DType::f32, {3, 2})}});
  ASSERT_FALSE(wrong_shape.has_value());
  EXPECT_EQ(wrong_shape.error().message,
            "reference: input 'x' (slot 0): expected f32[2,3], given f32[3,2]");
  HostTensor short_bytes = HostTensor::zeros(DType::f32, {2, 3});
  short_bytes.bytes.resize(20);
  auto truncated = interp::evaluate_reference({x}, {{x, short_bytes}});
  ASSERT_FALSE(truncated.has_value());
  EXPECT_EQ(truncated.error().message,
            "reference: input 'x' (slot 0): f32[2,3] needs 24 bytes, given 20");
}

TEST(ReferenceGraph, SeveralOutputsSharedNodesAndInputsAsOutputs) {
  RefGraph r;
  const Node* x = r.input(tensor(DType::f64, {3}, {1, 2, 3}));
  const Node* sq = r.make(Op::Mul, DType::f64, {3}, {x, x});
  const Node* plus = r.make(Op::Add, DType::f64, {3}, {sq, x});
  const Node* total = r.make(Op::Sum, DType::f64, {}, {plus},
                             {{AttrKey::axes, std::vector<int64_t>{0}}, {AttrKey::keepdim, false}});
  auto out = interp::evaluate_reference({total, sq, x, sq}, r.bound);
  ASSERT_TRUE(out.has_value()) << out.error().message;
  ASSERT_EQ(out->size(), 4u);
  expect_values(values_of((*out)[0]), {2 + 6 + 12});
  expect_values(values_of((*out)[1]), {1, 4, 9});
  expect_values(values_of((*out)[2]), {1, 2, 3});
  expect_values(values_of((*out)[3]), {1, 4, 9});
  EXPECT_EQ((*out)[0].shape, Shape{});
}

TEST(ReferenceGraph, FloatsStayDoubleBetweenOps) {
  RefGraph r;
  const Node* x = r.input(tensor(DType::f32, {1}, {1}));
  const Node* tiny = r.make(Op::Full, DType::f32, {1}, {},
                            {{AttrKey::shape, std::vector<int64_t>{1}},
                             {AttrKey::value, 1e-10},
                             {AttrKey::dtype, DType::f32}});
  // In f32, (1 + 1e-10) - 1 is 0; the f64 oracle keeps the difference until the final store.
  const Node* sum = r.make(Op::Add, DType::f32, {1}, {x, tiny});
  const Node* diff = r.make(Op::Sub, DType::f32, {1}, {sum, x});
  const std::vector<double> got = r.eval(diff);
  EXPECT_EQ(got[0], static_cast<double>(static_cast<float>((1.0 + 1e-10) - 1.0)));
  EXPECT_NE(got[0], 0.0);
}

TEST(ReferenceGraph, IntegerResultsWrapAfterEachOp) {
  RefGraph r;
  // (127 + 1) - 1 in i8: the add wraps to -128 first, so the result is 127 only by wrapping back.
  const Node* x = r.input(tensor(DType::i8, {1}, {127}));
  const Node* one = r.input(tensor(DType::i8, {}, {1}), "one");
  const Node* up = r.make(Op::Add, DType::i8, {1}, {x, one});
  const Node* half =
      r.make(Op::Div, DType::i8, {1}, {up, r.input(tensor(DType::i8, {}, {2}), "two")});
  expect_values(r.eval(up), {-128});
  expect_values(r.eval(half), {-64});
}

}  // namespace
}  // namespace kiln::testing
