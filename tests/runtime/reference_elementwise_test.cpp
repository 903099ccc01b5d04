// Reference semantics of every elementwise op: math, broadcasting, integer wrap, NaN rules.
#include <cmath>
#include <cstring>
#include <functional>
#include <numbers>

#include "tests/runtime/reference_test_util.h"

namespace kiln::testing {
namespace {

struct UnaryCase {
  Op op;
  std::vector<double> x;
  std::function<double(double)> f;  // written independently of the interpreter
};

TEST(ReferenceElementwise, FloatUnaryOps) {
  const std::vector<double> any = {-2.5, -0.5, 0.0, 0.25, 1.5, 3.0};
  const std::vector<double> positive = {0.25, 1.0, 2.5, 4.0};
  const double c = std::sqrt(2.0 / std::numbers::pi);
  const std::vector<UnaryCase> cases = {
      {Op::Neg, any, [](double x) { return -x; }},
      {Op::Abs, any, [](double x) { return x < 0 ? -x : x; }},
      {Op::Exp, any, [](double x) { return std::exp(x); }},
      {Op::Log, positive, [](double x) { return std::log(x); }},
      {Op::Sqrt, positive, [](double x) { return std::sqrt(x); }},
      {Op::Rsqrt, positive, [](double x) { return 1 / std::sqrt(x); }},
      {Op::Recip, positive, [](double x) { return 1 / x; }},
      {Op::Sin, any, [](double x) { return std::sin(x); }},
      {Op::Cos, any, [](double x) { return std::cos(x); }},
      {Op::Tanh, any, [](double x) { return std::tanh(x); }},
      {Op::Sigmoid, any, [](double x) { return 1 / (1 + std::exp(-x)); }},
      {Op::Relu, any, [](double x) { return x > 0 ? x : 0; }},
      {Op::Gelu, any,
       [c](double x) { return 0.5 * x * (1 + std::tanh(c * (x + 0.044715 * x * x * x))); }},
      {Op::Erf, any, [](double x) { return std::erf(x); }},
      {Op::Floor, any, [](double x) { return std::floor(x); }},
      {Op::Ceil, any, [](double x) { return std::ceil(x); }},
      {Op::Sign, any, [](double x) { return x > 0   ? 1.0
                                            : x < 0 ? -1.0
                                                    : 0.0; }},
  };
  for (const UnaryCase& uc : cases) {
    RefGraph r;
    const Shape shape = {static_cast<int64_t>(uc.x.size())};
    const Node* x = r.input(tensor(DType::f64, shape, uc.x));
    std::vector<double> want;
    for (double v : uc.x) want.push_back(uc.f(v));
    SCOPED_TRACE(ir::op_enum_name(uc.op));
    expect_values(r.eval(r.make(uc.op, DType::f64, shape, {x})), want);
  }
}

TEST(ReferenceElementwise, HandCheckedUnaryValues) {
  RefGraph r;
  const Node* x = r.input(tensor(DType::f64, {3}, {-2.5, 0.0, 1.0}));
  expect_values(r.eval(r.make(Op::Floor, DType::f64, {3}, {x})), {-3, 0, 1});
  expect_values(r.eval(r.make(Op::Ceil, DType::f64, {3}, {x})), {-2, 0, 1});
  expect_values(r.eval(r.make(Op::Sigmoid, DType::f64, {3}, {x})),
                {1 / (1 + std::exp(2.5)), 0.5, 1 / (1 + std::exp(-1.0))});
  const std::vector<double> gelu = r.eval(r.make(Op::Gelu, DType::f64, {3}, {x}));
  EXPECT_NEAR(gelu[2], 0.8411919906082768, 1e-15);
  // gelu's limits at the infinities, as the cpu and vulkan targets give them (-inf was NaN here).
  const Node* inf = r.input(tensor(DType::f64, {2}, {-INFINITY, INFINITY}), "inf");
  const std::vector<double> at_inf = r.eval(r.make(Op::Gelu, DType::f64, {2}, {inf}));
  EXPECT_TRUE(at_inf[0] == 0 && std::signbit(at_inf[0])) << at_inf[0];
  EXPECT_EQ(at_inf[1], INFINITY);
  const std::vector<double> erf = r.eval(r.make(Op::Erf, DType::f64, {3}, {x}));
  EXPECT_NEAR(erf[2], 0.8427007929497149, 1e-15);
}

TEST(ReferenceElementwise, NanThroughUnaryOps) {
  RefGraph r;
  const Node* x = r.input(tensor(DType::f64, {2}, {NAN, -1.0}));
  expect_values(r.eval(r.make(Op::Relu, DType::f64, {2}, {x})), {NAN, 0});
  expect_values(r.eval(r.make(Op::Sign, DType::f64, {2}, {x})), {NAN, -1});
  expect_values(r.eval(r.make(Op::Sqrt, DType::f64, {2}, {x})), {NAN, NAN});
}

TEST(ReferenceElementwise, FloatResultsAreStoredInTheNodeDtype) {
  RefGraph r;
  const Node* x = r.input(tensor(DType::f32, {2}, {1.0, 0.5}));
  const std::vector<double> got = r.eval(r.make(Op::Exp, DType::f32, {2}, {x}));
  EXPECT_EQ(got[0], static_cast<double>(static_cast<float>(std::exp(1.0))));
  EXPECT_EQ(got[1], static_cast<double>(static_cast<float>(std::exp(0.5))));
  const Node* h = r.input(tensor(DType::f16, {1}, {3.0}), "h");
  EXPECT_EQ(r.eval(r.make(Op::Recip, DType::f16, {1}, {h}))[0], 0.333251953125);
}

TEST(ReferenceElementwise, IntegerUnaryOpsWrap) {
  RefGraph r;
  const Node* a = r.input(tensor(DType::i32, {4}, {-2147483648.0, -5, 0, 7}), "a");
  expect_values(r.eval(r.make(Op::Neg, DType::i32, {4}, {a})), {-2147483648.0, 5, 0, -7});
  expect_values(r.eval(r.make(Op::Abs, DType::i32, {4}, {a})), {-2147483648.0, 5, 0, 7});
  expect_values(r.eval(r.make(Op::Sign, DType::i32, {4}, {a})), {-1, -1, 0, 1});
  expect_values(r.eval(r.make(Op::Relu, DType::i32, {4}, {a})), {0, 0, 0, 7});
  const Node* b = r.input(tensor(DType::i8, {2}, {-128, 3}), "b");
  expect_values(r.eval(r.make(Op::Abs, DType::i8, {2}, {b})), {-128, 3});
  const Node* u = r.input(tensor(DType::u8, {2}, {5, 0}), "u");
  expect_values(r.eval(r.make(Op::Neg, DType::u8, {2}, {u})), {251, 0});
}

TEST(ReferenceElementwise, NotAndOrOnBool) {
  RefGraph r;
  const Node* p = r.input(tensor(DType::boolean, {4}, {0, 0, 1, 1}), "p");
  const Node* q = r.input(tensor(DType::boolean, {4}, {0, 1, 0, 1}), "q");
  expect_values(r.eval(r.make(Op::Not, DType::boolean, {4}, {p})), {1, 1, 0, 0});
  expect_values(r.eval(r.make(Op::And, DType::boolean, {4}, {p, q})), {0, 0, 0, 1});
  expect_values(r.eval(r.make(Op::Or, DType::boolean, {4}, {p, q})), {0, 1, 1, 1});
}

TEST(ReferenceElementwise, FloatBinaryOpsBroadcast) {
  RefGraph r;
  const std::vector<double> av = {1, 2, 3, 4, 5, 6};
  const std::vector<double> bv = {2, 0.5, -1};  // shape [3], broadcast over rows
  const Node* a = r.input(tensor(DType::f64, {2, 3}, av), "a");
  const Node* b = r.input(tensor(DType::f64, {3}, bv), "b");
  const std::vector<std::pair<Op, std::function<double(double, double)>>> ops = {
      {Op::Add, [](double x, double y) { return x + y; }},
      {Op::Sub, [](double x, double y) { return x - y; }},
      {Op::Mul, [](double x, double y) { return x * y; }},
      {Op::Div, [](double x, double y) { return x / y; }},
      {Op::Pow, [](double x, double y) { return std::pow(x, y); }},
      {Op::Max, [](double x, double y) { return x > y ? x : y; }},
      {Op::Min, [](double x, double y) { return x < y ? x : y; }},
  };
  for (const auto& [op, f] : ops) {
    std::vector<double> want;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) want.push_back(f(av[i * 3 + j], bv[j]));
    SCOPED_TRACE(ir::op_enum_name(op));
    expect_values(r.eval(r.make(op, DType::f64, {2, 3}, {a, b})), want);
  }
}

TEST(ReferenceElementwise, BroadcastsSizeOneAxesOnBothSides) {
  RefGraph r;
  const Node* col = r.input(tensor(DType::f64, {2, 1}, {10, 20}), "col");
  const Node* row = r.input(tensor(DType::f64, {1, 3}, {1, 2, 3}), "row");
  expect_values(r.eval(r.make(Op::Add, DType::f64, {2, 3}, {col, row})), {11, 12, 13, 21, 22, 23});
  const Node* s = r.input(tensor(DType::f64, {}, {0.5}), "s");
  expect_values(r.eval(r.make(Op::Mul, DType::f64, {2, 1}, {col, s})), {5, 10});
}

TEST(ReferenceElementwise, FloatDivisionAndNanRules) {
  RefGraph r;
  const Node* a = r.input(tensor(DType::f64, {4}, {1, -1, 0, NAN}), "a");
  const Node* z = r.input(tensor(DType::f64, {4}, {0, 0, 0, 1}), "z");
  expect_values(r.eval(r.make(Op::Div, DType::f64, {4}, {a, z})), {INFINITY, -INFINITY, NAN, NAN});
  // max/min propagate NaN from either side (numpy maximum/minimum).
  const Node* b = r.input(tensor(DType::f64, {4}, {NAN, 2, 3, 4}), "b");
  expect_values(r.eval(r.make(Op::Max, DType::f64, {4}, {a, b})), {NAN, 2, 3, NAN});
  expect_values(r.eval(r.make(Op::Min, DType::f64, {4}, {a, b})), {NAN, -1, 0, NAN});
}

TEST(ReferenceElementwise, ComparisonsGiveBoolAndNanComparesUnequal) {
  RefGraph r;
  const Node* a = r.input(tensor(DType::f32, {3}, {1, 2, NAN}), "a");
  const Node* b = r.input(tensor(DType::f32, {3}, {2, 2, NAN}), "b");
  auto cmp = [&](Op op) { return r.eval(r.make(op, DType::boolean, {3}, {a, b})); };
  expect_values(cmp(Op::Eq), {0, 1, 0});
  expect_values(cmp(Op::Ne), {1, 0, 1});
  expect_values(cmp(Op::Lt), {1, 0, 0});
  expect_values(cmp(Op::Le), {1, 1, 0});
  expect_values(cmp(Op::Gt), {0, 0, 0});
  expect_values(cmp(Op::Ge), {0, 1, 0});
  const Node* i = r.input(tensor(DType::i32, {2}, {-3, 5}), "i");
  const Node* j = r.input(tensor(DType::i32, {}, {0}), "j");
  expect_values(r.eval(r.make(Op::Gt, DType::boolean, {2}, {i, j})), {0, 1});
}

TEST(ReferenceElementwise, IntegerArithmeticWraps) {
  RefGraph r;
  const Node* a = r.input(tensor(DType::i32, {2}, {2147483647, -2147483648.0}), "a");
  const Node* one = r.input(tensor(DType::i32, {}, {1}), "one");
  expect_values(r.eval(r.make(Op::Add, DType::i32, {2}, {a, one})), {-2147483648.0, -2147483647});
  expect_values(r.eval(r.make(Op::Sub, DType::i32, {2}, {a, one})), {2147483646, 2147483647});
  // (2^31 - 1)^2 = 2^62 - 2^32 + 1: only exact integer arithmetic keeps the low bits (1).
  const Node* m = r.input(tensor(DType::i32, {2}, {2147483647, 65536}), "m");
  expect_values(r.eval(r.make(Op::Mul, DType::i32, {2}, {m, m})), {1, 0});
  const Node* s = r.input(tensor(DType::i8, {2}, {100, -100}), "s");
  expect_values(r.eval(r.make(Op::Add, DType::i8, {2}, {s, s})), {-56, 56});
  const Node* u = r.input(tensor(DType::u8, {2}, {3, 250}), "u");
  const Node* five = r.input(tensor(DType::u8, {}, {10}), "ten");
  expect_values(r.eval(r.make(Op::Sub, DType::u8, {2}, {u, five})), {249, 240});
  expect_values(r.eval(r.make(Op::Add, DType::u8, {2}, {u, five})), {13, 4});
  expect_values(r.eval(r.make(Op::Max, DType::u8, {2}, {u, five})), {10, 250});
  expect_values(r.eval(r.make(Op::Min, DType::u8, {2}, {u, five})), {3, 10});
}

TEST(ReferenceElementwise, IntegerDivisionFloorsAndDivisionByZeroIsZero) {
  RefGraph r;
  const Node* a = r.input(tensor(DType::i32, {7}, {7, -7, 7, -7, 5, -2147483648.0, 6}), "a");
  const Node* b = r.input(tensor(DType::i32, {7}, {2, 2, -2, -2, 0, -1, 3}), "b");
  expect_values(r.eval(r.make(Op::Div, DType::i32, {7}, {a, b})),
                {3, -4, -4, 3, 0, -2147483648.0, 2});
  const Node* big = r.input(tensor(DType::i64, {2}, {-9223372036854775808.0, -9}), "big");
  const Node* d = r.input(tensor(DType::i64, {2}, {-1, 4}), "d");
  expect_values(r.eval(r.make(Op::Div, DType::i64, {2}, {big, d})), {-9223372036854775808.0, -3});
  const Node* u = r.input(tensor(DType::u8, {3}, {200, 7, 9}), "u");
  const Node* v = r.input(tensor(DType::u8, {3}, {3, 0, 9}), "v");
  expect_values(r.eval(r.make(Op::Div, DType::u8, {3}, {u, v})), {66, 0, 1});
}

TEST(ReferenceElementwise, WhereBroadcastsAllThreeOperands) {
  RefGraph r;
  const Node* c = r.input(tensor(DType::boolean, {3}, {1, 0, 1}), "c");
  const Node* a = r.input(tensor(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6}), "a");
  const Node* b = r.input(tensor(DType::f32, {}, {-1}), "b");
  expect_values(r.eval(r.make(Op::Where, DType::f32, {2, 3}, {c, a, b})), {1, -1, 3, 4, -1, 6});
}

// Floats truncate (and saturate to i32: FloatToIntCastSaturatesAsTheTargets), then the narrow
// types wrap; integers wrap.
TEST(ReferenceElementwise, CastToIntegersTruncatesAndWraps) {
  RefGraph r;
  const Node* x = r.input(tensor(DType::f64, {5}, {-1.7, 2.9, 3e9, NAN, -INFINITY}));
  const Attrs to_i32{{AttrKey::to, DType::i32}};
  expect_values(r.eval(r.make(Op::Cast, DType::i32, {5}, {x}, to_i32)),
                {-1, 2, 2147483647.0, 0, -2147483648.0});
  const Node* y = r.input(tensor(DType::f64, {3}, {-1, 256, 300.5}), "y");
  expect_values(r.eval(r.make(Op::Cast, DType::u8, {3}, {y}, {{AttrKey::to, DType::u8}})),
                {255, 0, 44});
  expect_values(r.eval(r.make(Op::Cast, DType::i8, {3}, {y}, {{AttrKey::to, DType::i8}})),
                {-1, 0, 44});
  const Node* z = r.input(tensor(DType::i32, {2}, {-1, 300}), "z");
  expect_values(r.eval(r.make(Op::Cast, DType::u8, {2}, {z}, {{AttrKey::to, DType::u8}})),
                {255, 44});
}

TEST(ReferenceElementwise, CastToBoolTestsAgainstZero) {
  RefGraph r;
  const Node* x = r.input(tensor(DType::f64, {4}, {0, -0.0, 0.5, NAN}));
  expect_values(r.eval(r.make(Op::Cast, DType::boolean, {4}, {x}, {{AttrKey::to, DType::boolean}})),
                {0, 0, 1, 1});
  const Node* b = r.input(tensor(DType::boolean, {2}, {1, 0}), "b");
  expect_values(r.eval(r.make(Op::Cast, DType::f32, {2}, {b}, {{AttrKey::to, DType::f32}})),
                {1, 0});
}

TEST(ReferenceElementwise, CastToFloatRoundsToThatDtype) {
  RefGraph r;
  const Node* x = r.input(tensor(DType::f64, {2}, {0.1, 65520}));
  const Node* h = r.make(Op::Cast, DType::f16, {2}, {x}, {{AttrKey::to, DType::f16}});
  const Node* back = r.make(Op::Cast, DType::f64, {2}, {h}, {{AttrKey::to, DType::f64}});
  expect_values(r.eval(back), {0.0999755859375, INFINITY});
  const Node* bf = r.make(Op::Cast, DType::bf16, {2}, {x}, {{AttrKey::to, DType::bf16}});
  const Node* bf_back = r.make(Op::Cast, DType::f64, {2}, {bf}, {{AttrKey::to, DType::f64}});
  expect_values(r.eval(bf_back), {0.10009765625, 65536});
  const Node* i = r.input(tensor(DType::i32, {1}, {16777217}), "i");
  const Node* f = r.make(Op::Cast, DType::f32, {1}, {i}, {{AttrKey::to, DType::f32}});
  const Node* f_back = r.make(Op::Cast, DType::i32, {1}, {f}, {{AttrKey::to, DType::i32}});
  expect_values(r.eval(f_back), {16777216});
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

// i64 values past 2^53 (no doubles hold them) stay exact through the reference: inputs, fulls,
// arange, movement, integer arithmetic (wrapping), comparisons, where, clip and casts. ONNX
// folding evaluates shape arithmetic here, INT64_MAX (a slice's "to the end") among it.
TEST(ReferenceElementwise, Int64PastTwoTo53IsExact) {
  const int64_t big = (int64_t{1} << 53) + 1;
  RefGraph r;
  HostTensor t = HostTensor::zeros(DType::i64, {4});
  const int64_t xs[4] = {big, big - 1, INT64_MAX, INT64_MIN};
  std::memcpy(t.bytes.data(), xs, sizeof xs);
  const Node* x = r.input(t, "x");
  const Node* one = r.make(
      Op::Full, DType::i64, {}, {},
      Attrs{{AttrKey::shape, Shape{}}, {AttrKey::value, int64_t{1}}, {AttrKey::dtype, DType::i64}});
  const auto exact = [&](const Node* n) {
    auto v = interp::evaluate_reference({n}, r.bound);
    EXPECT_TRUE(v.has_value()) << (v ? "" : v.error().message);
    std::vector<int64_t> out(4);
    if (v) std::memcpy(out.data(), (*v)[0].bytes.data(), sizeof(int64_t) * 4);
    return out;
  };
  const auto I = [](std::initializer_list<int64_t> v) { return std::vector<int64_t>(v); };
  const Node* sum = r.make(Op::Add, DType::i64, {4}, {x, one});
  EXPECT_EQ(exact(sum), I({big + 1, big, INT64_MIN, INT64_MIN + 1}));  // wraps as the kernels
  EXPECT_EQ(exact(r.make(Op::Neg, DType::i64, {4}, {x})),
            I({-big, 1 - big, -INT64_MAX, INT64_MIN}));
  EXPECT_EQ(exact(r.make(Op::Max, DType::i64, {4}, {x, one})), I({big, big - 1, INT64_MAX, 1}));
  const Node* flipped =
      r.make(Op::Flip, DType::i64, {4}, {x}, Attrs{{AttrKey::axes, std::vector<int64_t>{0}}});
  EXPECT_EQ(exact(flipped), I({INT64_MIN, INT64_MAX, big - 1, big}));
  const Node* gt = r.make(Op::Gt, DType::boolean, {4}, {x, flipped});
  EXPECT_EQ(r.eval(gt), (std::vector<double>{1, 0, 1, 0}));
  const Node* eq = r.make(Op::Eq, DType::boolean, {4}, {x, sum});  // differ by 1 past 2^53
  EXPECT_EQ(r.eval(eq), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(exact(r.make(Op::Where, DType::i64, {4}, {gt, x, flipped})),
            I({big, INT64_MAX, INT64_MAX, big}));
  // int64 -> i32 wraps the exact value; back to i64 it stays what i32 held.
  const Node* narrow = r.make(Op::Cast, DType::i32, {4}, {x}, Attrs{{AttrKey::to, DType::i32}});
  EXPECT_EQ(r.eval(narrow), (std::vector<double>{1, 0, -1, 0}));
}

// A float cast to an integer saturates as every target does (docs/graph-format.md): to i64's
// range for i64, to i32's for i32, i8 and u8, which then wrap; NaN is 0. (The reference wrapped
// modulo 2^64, so ONNX folding and the devices disagreed: 1e10 as i32 was 1410065408 here and
// 2147483647 on the cpu.)
TEST(ReferenceElementwise, FloatToIntCastSaturatesAsTheTargets) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> x = {std::nan(""), inf, -inf, 1e10, -1e10, 300, -2.7};
  const std::vector<std::pair<DType, std::vector<double>>> cases = {
      {DType::i32, {0, 2147483647.0, -2147483648.0, 2147483647.0, -2147483648.0, 300, -2}},
      {DType::i8, {0, -1, 0, -1, 0, 44, -2}},
      {DType::u8, {0, 255, 0, 255, 0, 44, 254}},
      {DType::boolean, {1, 1, 1, 1, 1, 1, 1}}};
  for (const auto& [to, want] : cases) {
    RefGraph r;
    const Node* in = r.input(tensor(DType::f32, {7}, x));
    SCOPED_TRACE(ir::dtype_name(to));
    EXPECT_EQ(r.eval(r.make(Op::Cast, to, {7}, {in}, Attrs{{AttrKey::to, to}})), want);
  }
  RefGraph r;
  const Node* in = r.input(tensor(DType::f32, {7}, x));
  auto v = interp::evaluate_reference(
      {r.make(Op::Cast, DType::i64, {7}, {in}, Attrs{{AttrKey::to, DType::i64}})}, r.bound);
  ASSERT_TRUE(v) << v.error().message;
  std::vector<int64_t> got(7);
  std::memcpy(got.data(), (*v)[0].bytes.data(), sizeof(int64_t) * 7);
  EXPECT_EQ(got,
            (std::vector<int64_t>{0, INT64_MAX, INT64_MIN, 10000000000, -10000000000, 300, -2}));
}

}  // namespace
}  // namespace kiln::testing
