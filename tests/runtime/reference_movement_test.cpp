// Reference semantics of the movement ops, matmul and the sources.
#include <climits>
#include <cstring>

#include "tests/runtime/reference_test_util.h"

namespace kiln::testing {
namespace {

std::vector<double> iota(int n, double start = 0) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(start + i);
  return v;
}

TEST(ReferenceMovement, ReshapeKeepsElementOrder) {
  RefGraph r;
  const Node* x = r.input(tensor(DType::i32, {2, 3}, iota(6)));
  expect_values(r.eval(r.make(Op::Reshape, DType::i32, {3, 1, 2}, {x},
                              {{AttrKey::shape, std::vector<int64_t>{3, 1, 2}}})),
                iota(6));
}

TEST(ReferenceMovement, PermuteMatchesLoops) {
  RefGraph r;
  const std::vector<double> v = iota(24);
  const Node* x = r.input(tensor(DType::f32, {2, 3, 4}, v));
  // out.shape[i] = in.shape[dims[i]]: dims [2, 0, 1] gives [4, 2, 3]; out[i][j][k] = in[j][k][i].
  std::vector<double> want;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k) want.push_back(v[(j * 3 + k) * 4 + i]);
  expect_values(r.eval(r.make(Op::Permute, DType::f32, {4, 2, 3}, {x},
                              {{AttrKey::dims, std::vector<int64_t>{2, 0, 1}}})),
                want);
}

TEST(ReferenceMovement, ExpandBroadcastsSizeOneAndNewAxes) {
  RefGraph r;
  const Node* x = r.input(tensor(DType::f64, {3, 1}, {7, 8, 9}));
  std::vector<double> want;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 2; ++c) want.push_back(7 + b);
  expect_values(r.eval(r.make(Op::Expand, DType::f64, {2, 3, 2}, {x},
                              {{AttrKey::shape, std::vector<int64_t>{2, 3, 2}}})),
                want);
}

Attrs slice_attrs(int64_t axis, int64_t start, int64_t end, int64_t step) {
  return {
      {AttrKey::axis, axis}, {AttrKey::start, start}, {AttrKey::end, end}, {AttrKey::step, step}};
}

TEST(ReferenceMovement, SliceReadsStartPlusKTimesStep) {
  RefGraph r;
  const Node* x = r.input(tensor(DType::f64, {10}, iota(10)));
  expect_values(r.eval(r.make(Op::Slice, DType::f64, {3}, {x}, slice_attrs(0, 1, 8, 3))),
                {1, 4, 7});
  expect_values(r.eval(r.make(Op::Slice, DType::f64, {5}, {x}, slice_attrs(0, 9, -11, -2))),
                {9, 7, 5, 3, 1});
  expect_values(r.eval(r.make(Op::Slice, DType::f64, {0}, {x}, slice_attrs(0, 0, 0, 1))), {});
  const Node* m = r.input(tensor(DType::f64, {2, 4}, iota(8)), "m");
  expect_values(r.eval(r.make(Op::Slice, DType::f64, {2, 2}, {m}, slice_attrs(1, 3, 0, -2))),
                {3, 1, 7, 5});
}

TEST(ReferenceMovement, PadFillsBordersWithTheValue) {
  RefGraph r;
  const Node* x = r.input(tensor(DType::f32, {2, 2}, {1, 2, 3, 4}));
  const Attrs attrs{{AttrKey::before, std::vector<int64_t>{1, 0}},
                    {AttrKey::after, std::vector<int64_t>{0, 2}},
                    {AttrKey::value, 9.0}};
  expect_values(r.eval(r.make(Op::Pad, DType::f32, {3, 4}, {x}, attrs)), {9, 9, 9, 9,  //
                                                                          1, 2, 9, 9,  //
                                                                          3, 4, 9, 9});
  const Node* i = r.input(tensor(DType::i32, {1}, {5}), "i");
  const Attrs int_pad{{AttrKey::before, std::vector<int64_t>{1}},
                      {AttrKey::after, std::vector<int64_t>{1}},
                      {AttrKey::value, -2.7}};
  expect_values(r.eval(r.make(Op::Pad, DType::i32, {3}, {i}, int_pad)), {-2, 5, -2});
}

TEST(ReferenceMovement, TriluKeepsOneTriangle) {
  RefGraph r;
  const Node* x = r.input(tensor(DType::f32, {3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
  const Attrs upper{{AttrKey::k, int64_t{1}}, {AttrKey::upper, true}};
  expect_values(r.eval(r.make(Op::Trilu, DType::f32, {3, 4}, {x}, upper)), {0, 2, 3, 4,  //
                                                                            0, 0, 7, 8,  //
                                                                            0, 0, 0, 12});
  const Attrs lower{{AttrKey::k, int64_t{-1}}, {AttrKey::upper, false}};
  expect_values(r.eval(r.make(Op::Trilu, DType::f32, {3, 4}, {x}, lower)), {0, 0, 0, 0,  //
                                                                            5, 0, 0, 0,  //
                                                                            9, 10, 0, 0});
}

TEST(ReferenceMovement, ConcatAlongAnAxis) {
  RefGraph r;
  const Node* a = r.input(tensor(DType::i64, {2, 1}, {1, 2}), "a");
  const Node* b = r.input(tensor(DType::i64, {2, 2}, {3, 4, 5, 6}), "b");
  const Node* e = r.input(tensor(DType::i64, {2, 0}, {}), "e");
  expect_values(
      r.eval(r.make(Op::Concat, DType::i64, {2, 3}, {a, e, b}, {{AttrKey::axis, int64_t{1}}})),
      {1, 3, 4, 2, 5, 6});
  expect_values(
      r.eval(r.make(Op::Concat, DType::i64, {4, 2}, {b, b}, {{AttrKey::axis, int64_t{0}}})),
      {3, 4, 5, 6, 3, 4, 5, 6});
}

TEST(ReferenceMovement, FlipReversesTheAxes) {
  RefGraph r;
  const Node* x = r.input(tensor(DType::f64, {2, 3}, iota(6)));
  expect_values(
      r.eval(r.make(Op::Flip, DType::f64, {2, 3}, {x}, {{AttrKey::axes, std::vector<int64_t>{1}}})),
      {2, 1, 0, 5, 4, 3});
  expect_values(r.eval(r.make(Op::Flip, DType::f64, {2, 3}, {x},
                              {{AttrKey::axes, std::vector<int64_t>{0, 1}}})),
                {5, 4, 3, 2, 1, 0});
}

TEST(ReferenceMovement, RollShiftsElementsForward) {
  RefGraph r;
  const Node* x = r.input(tensor(DType::f64, {2, 3}, iota(6)));
  // out[i] = in[(i - shift) mod n].
  expect_values(r.eval(r.make(Op::Roll, DType::f64, {2, 3}, {x},
                              {{AttrKey::shifts, std::vector<int64_t>{1}},
                               {AttrKey::axes, std::vector<int64_t>{1}}})),
                {2, 0, 1, 5, 3, 4});
  expect_values(r.eval(r.make(Op::Roll, DType::f64, {2, 3}, {x},
                              {{AttrKey::shifts, std::vector<int64_t>{1, 2}},
                               {AttrKey::axes, std::vector<int64_t>{0, 1}}})),
                {4, 5, 3, 1, 2, 0});
}

TEST(ReferenceMovement, UnfoldMakesSlidingWindows) {
  RefGraph r;
  const Node* x = r.input(tensor(DType::f64, {7}, iota(7)));
  const Attrs attrs{
      {AttrKey::dim, int64_t{0}}, {AttrKey::size, int64_t{3}}, {AttrKey::step, int64_t{2}}};
  expect_values(r.eval(r.make(Op::Unfold, DType::f64, {3, 3}, {x}, attrs)),
                {0, 1, 2, 2, 3, 4, 4, 5, 6});
  // 2-D, unfolding dim 0 of [4, 2] with size 2 step 1: out [3, 2, 2]; out[w][j][k] = in[w+k][j].
  const std::vector<double> v = iota(8);
  const Node* m = r.input(tensor(DType::f64, {4, 2}, v), "m");
  std::vector<double> want;
  for (int w = 0; w < 3; ++w)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 2; ++k) want.push_back(v[(w + k) * 2 + j]);
  expect_values(
      r.eval(r.make(
          Op::Unfold, DType::f64, {3, 2, 2}, {m},
          {{AttrKey::dim, int64_t{0}}, {AttrKey::size, int64_t{2}}, {AttrKey::step, int64_t{1}}})),
      want);
}

TEST(ReferenceMatmul, TwoByThreeTimesThreeByTwo) {
  RefGraph r;
  const Node* a = r.input(tensor(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6}), "a");
  const Node* b = r.input(tensor(DType::f32, {3, 2}, {7, 8, 9, 10, 11, 12}), "b");
  expect_values(r.eval(r.make(Op::Matmul, DType::f32, {2, 2}, {a, b})), {58, 64, 139, 154});
}

TEST(ReferenceMatmul, BroadcastBatchDimsMatchLoops) {
  RefGraph r;
  std::vector<double> av, bv;
  for (int i = 0; i < 12; ++i) av.push_back(i * 0.5 - 2);   // [2, 1, 2, 3]
  for (int i = 0; i < 18; ++i) bv.push_back(3 - i * 0.25);  // [3, 3, 2]
  const Node* a = r.input(tensor(DType::f64, {2, 1, 2, 3}, av), "a");
  const Node* b = r.input(tensor(DType::f64, {3, 3, 2}, bv), "b");
  std::vector<double> want;
  for (int p = 0; p < 2; ++p)
    for (int q = 0; q < 3; ++q)
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) {
          double acc = 0;
          for (int k = 0; k < 3; ++k) acc += av[(p * 2 + i) * 3 + k] * bv[(q * 3 + k) * 2 + j];
          want.push_back(acc);
        }
  expect_values(r.eval(r.make(Op::Matmul, DType::f64, {2, 3, 2, 2}, {a, b})), want);
}

TEST(ReferenceMatmul, IntegerProductsWrapAndBoolIsAnyAnd) {
  RefGraph r;
  const Node* a = r.input(tensor(DType::i32, {1, 2}, {65536, 65536}), "a");
  const Node* b = r.input(tensor(DType::i32, {2, 1}, {32768, 32768}), "b");
  expect_values(r.eval(r.make(Op::Matmul, DType::i32, {1, 1}, {a, b})), {0});  // 2^32 wraps to 0
  const Node* p = r.input(tensor(DType::boolean, {2, 2}, {1, 0, 0, 0}), "p");
  const Node* q = r.input(tensor(DType::boolean, {2, 2}, {1, 1, 1, 0}), "q");
  expect_values(r.eval(r.make(Op::Matmul, DType::boolean, {2, 2}, {p, q})), {1, 1, 0, 0});
}

TEST(ReferenceSources, FullAndArange) {
  RefGraph r;
  expect_values(r.eval(r.make(Op::Full, DType::f32, {2, 2}, {},
                              {{AttrKey::shape, std::vector<int64_t>{2, 2}},
                               {AttrKey::value, 1.5},
                               {AttrKey::dtype, DType::f32}})),
                {1.5, 1.5, 1.5, 1.5});
  expect_values(r.eval(r.make(Op::Full, DType::i32, {}, {},
                              {{AttrKey::shape, std::vector<int64_t>{}},
                               {AttrKey::value, -2.9},
                               {AttrKey::dtype, DType::i32}})),
                {-2});
  expect_values(r.eval(r.make(Op::Arange, DType::i32, {3}, {},
                              {{AttrKey::start, int64_t{2}},
                               {AttrKey::end, int64_t{11}},
                               {AttrKey::step, int64_t{3}},
                               {AttrKey::dtype, DType::i32}})),
                {2, 5, 8});
  expect_values(r.eval(r.make(Op::Arange, DType::f32, {3}, {},
                              {{AttrKey::start, int64_t{5}},
                               {AttrKey::end, int64_t{0}},
                               {AttrKey::step, int64_t{-2}},
                               {AttrKey::dtype, DType::f32}})),
                {5, 3, 1});
  expect_values(r.eval(r.make(Op::Arange, DType::u8, {2}, {},
                              {{AttrKey::start, int64_t{255}},
                               {AttrKey::end, int64_t{257}},
                               {AttrKey::step, int64_t{1}},
                               {AttrKey::dtype, DType::u8}})),
                {255, 0});
}

// x = [[0,1,2],[10,11,12]] (f32 [2,3]); numpy take: out.shape = x.shape[:axis] + idx.shape +
// x.shape[axis+1:].
TEST(ReferenceMovement, GatherEveryAxisAndIndexDtype) {
  for (DType it : {DType::i32, DType::i64}) {
    RefGraph r;
    const Node* x = r.input(tensor(DType::f32, {2, 3}, {0, 1, 2, 10, 11, 12}));
    const Node* rows = r.input(tensor(it, {3}, {1, 0, -1}), "rows");  // -1 is the last row
    expect_values(
        r.eval(r.make(Op::Gather, DType::f32, {3, 3}, {x, rows}, {{AttrKey::axis, int64_t{0}}})),
        {10, 11, 12, 0, 1, 2, 10, 11, 12});
    const Node* cols = r.input(tensor(it, {2, 2}, {2, -3, 0, -1}), "cols");
    expect_values(
        r.eval(r.make(Op::Gather, DType::f32, {2, 2, 2}, {x, cols}, {{AttrKey::axis, int64_t{1}}})),
        {2, 0, 0, 2, 12, 10, 10, 12});
  }
}

TEST(ReferenceMovement, GatherScalarAndEmptyIndices) {
  RefGraph r;
  const Node* x = r.input(tensor(DType::i64, {2, 3}, {0, 1, 2, 10, 11, 12}));
  const Node* one = r.input(tensor(DType::i32, {}, {1}), "one");
  // A rank-0 index drops the axis: x[:, 1].
  expect_values(
      r.eval(r.make(Op::Gather, DType::i64, {2}, {x, one}, {{AttrKey::axis, int64_t{1}}})),
      {1, 11});
  expect_values(
      r.eval(r.make(Op::Gather, DType::i64, {3}, {x, one}, {{AttrKey::axis, int64_t{0}}})),
      {10, 11, 12});
  const Node* none = r.input(tensor(DType::i64, {0}, {}), "none");
  expect_values(
      r.eval(r.make(Op::Gather, DType::i64, {2, 0}, {x, none}, {{AttrKey::axis, int64_t{1}}})), {});
}

// Indices are normalized once (i < 0 reads i + n) and then clamped into [0, n) (ir/builder.h).
TEST(ReferenceMovement, GatherClampsOutOfRangeIndices) {
  RefGraph r;
  const Node* x = r.input(tensor(DType::boolean, {4}, {1, 0, 0, 1}));
  const Node* bits = r.input(tensor(DType::i64, {6}, {-9, 1, -3, 2, 4, 1000}), "bits");
  // -9 + 4 = -5 -> 0, 1, -3 + 4 = 1, 2, 4 -> 3, 1000 -> 3
  expect_values(
      r.eval(r.make(Op::Gather, DType::boolean, {6}, {x, bits}, {{AttrKey::axis, int64_t{0}}})),
      {1, 0, 0, 0, 1, 1});
  const Node* idx = r.input(tensor(DType::i64, {6}, {-9, -5, -4, 3, 4, 1000}), "idx");
  const Node* y = r.input(tensor(DType::f64, {4}, {5, 6, 7, 8}), "y");
  expect_values(
      r.eval(r.make(Op::Gather, DType::f64, {6}, {y, idx}, {{AttrKey::axis, int64_t{0}}})),
      {5, 5, 5, 8, 8, 8});  // -9 -> -5 -> 0, -5 -> -1 -> 0, -4 -> 0, 3, 4 -> 3, 1000 -> 3
}

// Indices at the ends of int64 clamp like the compiled kernels' (INT64_MAX reads the last element;
// the interpreter holds it as 2^63, which no int64_t holds).
TEST(ReferenceMovement, GatherClampsIndicesAtTheEndsOfInt64) {
  RefGraph r;
  const Node* y = r.input(tensor(DType::f64, {4}, {5, 6, 7, 8}), "y");
  ir::HostTensor ends = ir::HostTensor::zeros(DType::i64, {4});
  const int64_t v[4] = {INT64_MAX, INT64_MIN, INT64_MAX - 1, INT64_MIN + 1};
  std::memcpy(ends.bytes.data(), v, sizeof v);
  const Node* idx = r.input(ends, "idx");
  expect_values(r.eval(r.make(Op::Gather, DType::f64, {4}, {y, idx}, {{AttrKey::axis, int64_t{0}}})),
                {8, 5, 8, 5});
}

// numpy take_along_axis / torch.gather: out[i][j] = x[idx[i][j]][j] (axis 0), x[i][idx[i][j]]
// (axis 1); idx may be shorter than x on the other axes and longer on the gathered one.
TEST(ReferenceMovement, GatherElementsBothAxes) {
  for (DType it : {DType::i32, DType::i64}) {
    RefGraph r;
    const Node* x = r.input(tensor(DType::f32, {3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}));
    const Node* i0 = r.input(tensor(it, {2, 3}, {1, 2, 0, -1, 0, 7}), "i0");
    expect_values(r.eval(r.make(Op::GatherElements, DType::f32, {2, 3}, {x, i0},
                                {{AttrKey::axis, int64_t{0}}})),
                  {4, 8, 3, 7, 2, 9});  // 7 clamps to row 2
    const Node* i1 = r.input(tensor(it, {2, 4}, {0, 0, 2, -2, 1, -4, 2, 0}), "i1");
    expect_values(r.eval(r.make(Op::GatherElements, DType::f32, {2, 4}, {x, i1},
                                {{AttrKey::axis, int64_t{1}}})),
                  {1, 1, 3, 2, 5, 4, 6, 4});  // -4 + 3 = -1 clamps to column 0
  }
}

// ONNX's ScatterElements example (axis 0), then along axis 1 with a duplicate index (the last
// update wins for none), a wrapped negative index and two indices out of range (dropped).
TEST(ReferenceMovement, ScatterElementsEveryReduction) {
  for (DType it : {DType::i32, DType::i64}) {
    RefGraph r;
    const Node* z = r.input(tensor(DType::f64, {3, 3}, {0, 0, 0, 0, 0, 0, 0, 0, 0}));
    const Node* i0 = r.input(tensor(it, {2, 3}, {1, 0, 2, 0, 2, 1}), "i0");
    const Node* u0 = r.input(tensor(DType::f64, {2, 3}, {1.0, 1.1, 1.2, 2.0, 2.1, 2.2}), "u0");
    expect_values(
        r.eval(r.make(Op::ScatterElements, DType::f64, {3, 3}, {z, i0, u0},
                      {{AttrKey::axis, int64_t{0}}, {AttrKey::reduction, std::string("none")}})),
        {2.0, 1.1, 0.0, 1.0, 0.0, 2.2, 0.0, 2.1, 1.2});
    const Node* x = r.input(tensor(DType::f32, {1, 5}, {1, 2, 3, 4, 5}), "x");
    const Node* i1 = r.input(tensor(it, {1, 6}, {0, -1, 0, 7, -6, 2}), "i1");
    const Node* u1 = r.input(tensor(DType::f32, {1, 6}, {10, 20, 30, 40, 50, 60}), "u1");
    const std::pair<const char*, std::vector<double>> expected[] = {{"none", {30, 2, 60, 4, 20}},
                                                                    {"add", {41, 2, 63, 4, 25}},
                                                                    {"mul", {300, 2, 180, 4, 100}},
                                                                    {"max", {30, 2, 60, 4, 20}},
                                                                    {"min", {1, 2, 3, 4, 5}}};
    for (const auto& [red, want] : expected)
      expect_values(
          r.eval(r.make(Op::ScatterElements, DType::f32, {1, 5}, {x, i1, u1},
                        {{AttrKey::axis, int64_t{1}}, {AttrKey::reduction, std::string(red)}})),
          want);
  }
  RefGraph r;  // integer sums wrap
  const Node* x = r.input(tensor(DType::i8, {1}, {100}));
  const Node* i = r.input(tensor(DType::i32, {2}, {0, 0}), "i");
  const Node* u = r.input(tensor(DType::i8, {2}, {100, 100}), "u");
  expect_values(
      r.eval(r.make(Op::ScatterElements, DType::i8, {1}, {x, i, u},
                    {{AttrKey::axis, int64_t{0}}, {AttrKey::reduction, std::string("add")}})),
      {44});
}

}  // namespace
}  // namespace kiln::testing
