// Reference semantics of the reductions: sum, prod, max, min, argmax, argmin.
#include <cstring>

#include "tests/runtime/reference_test_util.h"

namespace kiln::testing {
namespace {

Attrs reduce_attrs(std::vector<int64_t> axes, bool keepdim) {
  return {{AttrKey::axes, std::move(axes)}, {AttrKey::keepdim, keepdim}};
}

TEST(ReferenceReduce, SumOverOneAxis) {
  RefGraph r;
  const Node* x = r.input(tensor(DType::f64, {2, 3}, {1, 2, 3, 4, 5, 6}));
  expect_values(r.eval(r.make(Op::Sum, DType::f64, {2}, {x}, reduce_attrs({1}, false))), {6, 15});
  expect_values(r.eval(r.make(Op::Sum, DType::f64, {1, 3}, {x}, reduce_attrs({0}, true))),
                {5, 7, 9});
  expect_values(r.eval(r.make(Op::Sum, DType::f64, {}, {x}, reduce_attrs({0, 1}, false))), {21});
  // No axes: nothing is reduced.
  expect_values(r.eval(r.make(Op::Sum, DType::f64, {2, 3}, {x}, reduce_attrs({}, false))),
                {1, 2, 3, 4, 5, 6});
}

TEST(ReferenceReduce, SumOverNonAdjacentAxesMatchesLoops) {
  RefGraph r;
  std::vector<double> v;
  for (int i = 0; i < 24; ++i) v.push_back(i * 0.5 - 3);
  const Node* x = r.input(tensor(DType::f64, {2, 3, 4}, v));
  std::vector<double> want(3, 0.0);
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c) want[b] += v[(a * 3 + b) * 4 + c];
  expect_values(r.eval(r.make(Op::Sum, DType::f64, {1, 3, 1}, {x}, reduce_attrs({0, 2}, true))),
                want);
}

TEST(ReferenceReduce, ProdMaxMin) {
  RefGraph r;
  const Node* x = r.input(tensor(DType::f32, {2, 3}, {1, -2, 3, 0.5, 4, -1}));
  const Attrs rows = reduce_attrs({1}, false);
  expect_values(r.eval(r.make(Op::Prod, DType::f32, {2}, {x}, rows)), {-6, -2});
  expect_values(r.eval(r.make(Op::ReduceMax, DType::f32, {2}, {x}, rows)), {3, 4});
  expect_values(r.eval(r.make(Op::ReduceMin, DType::f32, {2}, {x}, rows)), {-2, -1});
}

TEST(ReferenceReduce, MaxAndMinPropagateNan) {
  RefGraph r;
  const Node* x = r.input(tensor(DType::f64, {2, 3}, {1, NAN, 3, NAN, 0, -1}));
  const Attrs rows = reduce_attrs({1}, false);
  expect_values(r.eval(r.make(Op::ReduceMax, DType::f64, {2}, {x}, rows)), {NAN, NAN});
  expect_values(r.eval(r.make(Op::ReduceMin, DType::f64, {2}, {x}, rows)), {NAN, NAN});
  expect_values(r.eval(r.make(Op::Sum, DType::f64, {2}, {x}, rows)), {NAN, NAN});
}

TEST(ReferenceReduce, IntegerSumsAndProductsWrap) {
  RefGraph r;
  const Node* b = r.input(tensor(DType::i8, {3}, {100, 100, 100}), "b");
  expect_values(r.eval(r.make(Op::Sum, DType::i8, {}, {b}, reduce_attrs({0}, false))), {44});
  const Node* i = r.input(tensor(DType::i32, {2, 2}, {2147483647, 2147483647, 65536, 65536}), "i");
  expect_values(r.eval(r.make(Op::Prod, DType::i32, {2}, {i}, reduce_attrs({1}, false))), {1, 0});
  expect_values(r.eval(r.make(Op::Sum, DType::i32, {2}, {i}, reduce_attrs({1}, false))),
                {-2, 131072});
  const Node* u = r.input(tensor(DType::u8, {3}, {7, 250, 3}), "u");
  expect_values(r.eval(r.make(Op::ReduceMax, DType::u8, {}, {u}, reduce_attrs({0}, false))), {250});
  expect_values(r.eval(r.make(Op::ReduceMin, DType::u8, {}, {u}, reduce_attrs({0}, false))), {3});
}

TEST(ReferenceReduce, EmptyAxesUseIdentitiesOrFail) {
  RefGraph r;
  const Node* x = r.input(tensor(DType::f32, {0, 3}, {}));
  const Attrs a0 = reduce_attrs({0}, false);
  expect_values(r.eval(r.make(Op::Sum, DType::f32, {3}, {x}, a0)), {0, 0, 0});
  expect_values(r.eval(r.make(Op::Prod, DType::f32, {3}, {x}, a0)), {1, 1, 1});
  EXPECT_EQ(r.error(r.make(Op::ReduceMax, DType::f32, {3}, {x}, a0)),
            "reference: ReduceMax of f32[0,3] over an empty axis has no identity");
  EXPECT_EQ(r.error(r.make(Op::ArgMin, DType::i32, {3}, {x},
                           {{AttrKey::axis, int64_t{0}}, {AttrKey::keepdim, false}})),
            "reference: ArgMin of f32[0,3] over an empty axis has no identity");
  // Reducing the non-empty axis of an empty tensor is fine: the result is empty too.
  EXPECT_TRUE(
      r.eval(r.make(Op::ReduceMax, DType::f32, {0}, {x}, reduce_attrs({1}, false))).empty());
}

Attrs arg_attrs(int64_t axis, bool keepdim) {
  return {{AttrKey::axis, axis}, {AttrKey::keepdim, keepdim}};
}

TEST(ReferenceReduce, ArgMaxTakesFirstIndexAndNanAsLargest) {
  RefGraph r;
  const Node* x = r.input(tensor(DType::f32, {3, 3}, {1, 3, 3, NAN, 2, NAN, -1, -5, INFINITY}));
  expect_values(r.eval(r.make(Op::ArgMax, DType::i32, {3}, {x}, arg_attrs(1, false))), {1, 0, 2});
  // Along axis 0 with keepdim: column 1 has no NaN, so 3 (row 0) wins.
  expect_values(r.eval(r.make(Op::ArgMax, DType::i32, {1, 3}, {x}, arg_attrs(0, true))), {1, 0, 1});
}

TEST(ReferenceReduce, ArgMinTakesFirstIndexAndFirstNan) {
  RefGraph r;
  const Node* x = r.input(tensor(DType::f64, {4, 3},
                                 {3, 1, 1,        //
                                  NAN, 2, 0,      //
                                  NAN, NAN, NAN,  //
                                  5, NAN, 5}));
  // numpy.argmin: NaN propagates, so the first NaN of a row wins.
  expect_values(r.eval(r.make(Op::ArgMin, DType::i32, {4}, {x}, arg_attrs(1, false))),
                {1, 0, 0, 1});
  const Node* i = r.input(tensor(DType::i32, {2, 2}, {4, -7, 4, -7}), "i");
  expect_values(r.eval(r.make(Op::ArgMin, DType::i32, {2}, {i}, arg_attrs(0, false))), {0, 0});
  expect_values(r.eval(r.make(Op::ArgMax, DType::i32, {2, 1}, {i}, arg_attrs(1, true))), {0, 0});
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

// i64 values past 2^53 reduce exactly: 2^53 and 2^53 + 1 are one double, not one integer.
TEST(ReferenceReduce, Int64PastTwoTo53ReducesExactly) {
  const int64_t big = int64_t{1} << 53;
  RefGraph r;
  HostTensor t = HostTensor::zeros(DType::i64, {2, 2});
  const int64_t xs[4] = {big, big + 1, INT64_MAX, 1};
  std::memcpy(t.bytes.data(), xs, sizeof xs);
  const Node* x = r.input(t, "x");
  const auto exact = [&](const Node* n) {
    auto v = interp::evaluate_reference({n}, r.bound);
    EXPECT_TRUE(v.has_value()) << (v ? "" : v.error().message);
    std::vector<int64_t> out(2);
    if (v) std::memcpy(out.data(), (*v)[0].bytes.data(), sizeof(int64_t) * 2);
    return out;
  };
  EXPECT_EQ(exact(r.make(Op::Sum, DType::i64, {2}, {x}, reduce_attrs({1}, false))),
            (std::vector<int64_t>{2 * big + 1, INT64_MIN}));  // the second wraps, as kernels do
  EXPECT_EQ(exact(r.make(Op::ReduceMin, DType::i64, {2}, {x}, reduce_attrs({0}, false))),
            (std::vector<int64_t>{big, 1}));
  EXPECT_EQ(exact(r.make(Op::Prod, DType::i64, {2}, {x}, reduce_attrs({0}, false))),
            (std::vector<int64_t>{static_cast<int64_t>(static_cast<uint64_t>(big) * INT64_MAX),
                                  big + 1}));
  expect_values(r.eval(r.make(Op::ArgMax, DType::i32, {2}, {x}, arg_attrs(1, false))), {1, 0});
  expect_values(r.eval(r.make(Op::ArgMin, DType::i32, {2}, {x}, arg_attrs(0, false))), {0, 1});
}

}  // namespace
}  // namespace kiln::testing
