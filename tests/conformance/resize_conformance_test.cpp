// Conformance of the resize row on the device under test vs the reference interpreter (which
// applies ir/resize_taps.h's double-precision taps): every mode, coordinate transformation and
// nearest rounding, up- and downsampling, cubic and antialiased filters, exclude_outside, crops
// with an extrapolation value, every dtype nearest takes, and a resize fused between other ops.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <vector>

#include "harness.h"

namespace kiln::testing {
namespace {

using ir::DType;
using ir::Op;
using ir::ResizeAxis;
using ir::ResizeCoord;
using ir::ResizeMode;
using ir::ResizeNearest;

constexpr ResizeCoord kCoords[] = {
    ResizeCoord::HalfPixel,    ResizeCoord::HalfPixelSymmetric, ResizeCoord::PytorchHalfPixel,
    ResizeCoord::AlignCorners, ResizeCoord::Asymmetric,         ResizeCoord::TfHalfPixelForNn,
    ResizeCoord::TfCropAndResize};
constexpr ResizeNearest kNearest[] = {ResizeNearest::RoundPreferFloor,
                                      ResizeNearest::RoundPreferCeil, ResizeNearest::Floor,
                                      ResizeNearest::Ceil, ResizeNearest::Simple};

ResizeAxis axis_of(int64_t in, int64_t out, ResizeMode mode, ResizeCoord coord) {
  ResizeAxis a;
  a.in = in;
  a.out = out;
  a.scale = double(out) / double(in);
  a.mode = mode;
  a.coord = coord;
  if (coord == ResizeCoord::TfCropAndResize) {  // part of the axis, partly outside it
    a.roi_start = 0.2;
    a.roi_end = 1.3;
  }
  return a;
}

std::string describe(const ResizeAxis& a, DType t) {
  return fmt::format("resize {} {} -> {} {} {} {} scale {} exclude {} antialias {}",
                     ir::dtype_name(t), a.in, a.out, ir::resize_mode_name(a.mode),
                     ir::resize_coord_name(a.coord), ir::resize_nearest_name(a.nearest), a.scale,
                     a.exclude_outside, a.antialias);
}

// x of shape [2, in, 3] resized along axis 1.
void check(const ResizeAxis& a, DType t = DType::f32) {
  Case c;
  const ir::Node* x = c.input(t, {2, a.in, 3});
  const double extrapolation = t == DType::u8 || t == DType::boolean ? 1.0 : -7.0;
  auto y = c.b.resize(x, 1, a, extrapolation);
  ASSERT_TRUE(y.has_value()) << describe(a, t) << ": " << y.error().message;
  ASSERT_EQ((*y)->op, Op::Resize);
  expect_matches_reference(c, {*y}, describe(a, t));
}

// Sizes where coordinates land on exact halves (1 -> 2, 2 -> 4, 4 -> 8, 8 -> 4), integers and
// neither (5 -> 7, 7 -> 3, 6 -> 1).
const std::pair<int64_t, int64_t> kSizes[] = {{1, 2}, {2, 4}, {4, 8}, {8, 4}, {5, 7}, {7, 3},
                                              {6, 1}, {3, 3}};

TEST(ResizeConformance, NearestEveryCoordinateAndRounding) {
  for (auto [in, out] : kSizes)
    for (ResizeCoord coord : kCoords)
      for (ResizeNearest nearest : kNearest) {
        ResizeAxis a = axis_of(in, out, ResizeMode::Nearest, coord);
        a.nearest = nearest;
        check(a);
      }
}

TEST(ResizeConformance, LinearAndCubicEveryCoordinate) {
  for (auto [in, out] : kSizes)
    for (ResizeCoord coord : kCoords)
      for (ResizeMode mode : {ResizeMode::Linear, ResizeMode::Cubic})
        for (bool exclude : {false, true}) {
          ResizeAxis a = axis_of(in, out, mode, coord);
          a.exclude_outside = exclude;
          check(a);
        }
}

TEST(ResizeConformance, AntialiasedDownsamplingAndCubicCoefficient) {
  for (auto [in, out] : {std::pair<int64_t, int64_t>{9, 4}, {16, 3}, {7, 5}, {4, 9}})
    for (ResizeMode mode : {ResizeMode::Linear, ResizeMode::Cubic})
      for (bool exclude : {false, true}) {
        ResizeAxis a = axis_of(in, out, mode, ResizeCoord::HalfPixel);
        a.antialias = true;
        a.exclude_outside = exclude;
        a.cubic_a = -0.5;
        check(a);
      }
}

// A scale that is not out / in (ONNX Resize with scales: out = floor(in * scale)).
TEST(ResizeConformance, GivenScales) {
  for (ResizeMode mode : {ResizeMode::Nearest, ResizeMode::Linear, ResizeMode::Cubic}) {
    ResizeAxis a = axis_of(5, 8, mode, ResizeCoord::HalfPixel);
    a.scale = 1.7;
    check(a);
    a = axis_of(5, 2, mode, ResizeCoord::Asymmetric);
    a.scale = 0.45;
    check(a);
  }
}

TEST(ResizeConformance, EveryDtype) {
  for (DType t : ir::kAllDTypes) {
    check(axis_of(5, 9, ResizeMode::Nearest, ResizeCoord::TfCropAndResize), t);
    check(axis_of(6, 4, ResizeMode::Nearest, ResizeCoord::HalfPixel), t);
    if (ir::is_float(t)) check(axis_of(5, 9, ResizeMode::Linear, ResizeCoord::HalfPixel), t);
  }
}

// A 2-d bilinear upsample of a computed tensor, read by an elementwise op and a reduction: both
// resizes lowered inside one kernel with their producer.
TEST(ResizeConformance, TwoAxesFusedWithProducersAndReaders) {
  for (DType t : {DType::f32, DType::f64, DType::f16}) {
    Case c;
    const ir::Node* x = c.input(t, {2, 4, 5});
    auto e = c.b.unary(Op::Exp, x);
    ASSERT_TRUE(e.has_value());
    auto w = c.b.resize(*e, 2, axis_of(5, 9, ResizeMode::Linear, ResizeCoord::PytorchHalfPixel));
    ASSERT_TRUE(w.has_value());
    auto h = c.b.resize(*w, 1, axis_of(4, 7, ResizeMode::Linear, ResizeCoord::AlignCorners));
    ASSERT_TRUE(h.has_value());
    auto y = c.b.binary(Op::Mul, *h, *h);
    ASSERT_TRUE(y.has_value());
    auto s = c.b.reduce(Op::Sum, *y, std::vector<int64_t>{1, 2}, false);
    ASSERT_TRUE(s.has_value());
    expect_matches_reference(c, {*y, *s}, fmt::format("fused resize {}", ir::dtype_name(t)));
  }
}

TEST(ResizeConformance, BadParametersAreErrors) {
  Case c;
  const ir::Node* x = c.input(DType::i32, {2, 4});
  auto linear_int = c.b.resize(x, 1, axis_of(4, 8, ResizeMode::Linear, ResizeCoord::HalfPixel));
  ASSERT_FALSE(linear_int.has_value());
  EXPECT_NE(linear_int.error().message.find("mode linear needs a floating dtype"),
            std::string::npos)
      << linear_int.error().message;
  auto wrong_in = c.b.resize(x, 0, axis_of(4, 8, ResizeMode::Nearest, ResizeCoord::HalfPixel));
  ASSERT_FALSE(wrong_in.has_value());
  EXPECT_NE(wrong_in.error().message.find("has 2 positions, not 4"), std::string::npos)
      << wrong_in.error().message;
  ResizeAxis zero_scale = axis_of(4, 8, ResizeMode::Nearest, ResizeCoord::HalfPixel);
  zero_scale.scale = 0;
  EXPECT_FALSE(c.b.resize(x, 1, zero_scale).has_value());
  EXPECT_FALSE(
      c.b.resize(x, 2, axis_of(4, 8, ResizeMode::Nearest, ResizeCoord::HalfPixel)).has_value());
}

}  // namespace
}  // namespace kiln::testing
