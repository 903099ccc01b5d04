// ir/resize_taps.h: the taps of one resized axis, applied to a row on the host, against values
// ONNX's reference implementation (onnx/reference/ops/op_resize.py) gives for the same row.
#include <gtest/gtest.h>

#include "ir/resize_taps.h"

namespace kiln::ir {
namespace {

std::vector<double> resample_row(const ResizeAxis& a, const std::vector<double>& row,
                                 double extrapolation = 0) {
  Expected<ResizeTaps> t = resize_taps(a);
  EXPECT_TRUE(t.has_value()) << t.error().message;
  std::vector<double> out(a.out, 0);
  for (int64_t x = 0; x < a.out; ++x) {
    for (int64_t k = 0; k < t->taps; ++k) {
      const double w = t->weight.empty() ? 1 : t->weight[k * a.out + x];
      out[x] += w * row[t->index[k * a.out + x]];
    }
    if (!t->inside.empty() && !t->inside[x]) out[x] = extrapolation;
  }
  return out;
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-9) << "position " << i;
}

const std::vector<double> kRow = {1, 2, 4, 8, 16, 32, 64};

TEST(ResizeTaps, LinearAntialiasWidensTheFilterWhenDownscaling) {
  ResizeAxis a;
  a.in = 7;
  a.mode = ResizeMode::Linear;
  a.antialias = true;
  a.out = 3;
  a.scale = 3.0 / 7;
  expect_near(resample_row(a, kRow), {1.9375, 10.0, 43.0});
  a.scale = 0.5;  // a scale given: out = floor(7 * 0.5)
  expect_near(resample_row(a, kRow), {1.75, 6.75, 27.0});
  // Upscaling, antialias changes nothing: plain linear taps, two of them.
  a.out = 14;
  a.scale = 2;
  ResizeAxis plain = a;
  plain.antialias = false;
  expect_near(resample_row(a, kRow), resample_row(plain, kRow));
  EXPECT_EQ(resize_taps(a)->taps, 2);
}

TEST(ResizeTaps, NearestModesAndCoordinates) {
  ResizeAxis a;
  a.in = 4;
  a.out = 6;
  a.scale = 1.5;
  a.coord = ResizeCoord::Asymmetric;  // sources 0, 0.667, 1.333, 2, 2.667, 3.333
  a.nearest = ResizeNearest::Floor;
  expect_near(resample_row(a, kRow), {1, 1, 2, 4, 4, 8});
  a.nearest = ResizeNearest::Ceil;
  expect_near(resample_row(a, kRow), {1, 2, 4, 4, 8, 8});
  a.nearest = ResizeNearest::RoundPreferFloor;
  a.coord = ResizeCoord::HalfPixel;  // sources -0.167, 0.5, 1.167, 1.833, 2.5, 3.167
  expect_near(resample_row(a, kRow), {1, 1, 2, 4, 4, 8});
  a.nearest = ResizeNearest::RoundPreferCeil;
  expect_near(resample_row(a, kRow), {1, 2, 2, 4, 8, 8});
  EXPECT_TRUE(resize_taps(a)->weight.empty());
}

TEST(ResizeTaps, CropOutsideTheRoiTakesTheExtrapolationValue) {
  ResizeAxis a;
  a.in = 7;
  a.out = 4;
  a.scale = 4.0 / 7;
  a.mode = ResizeMode::Linear;
  a.coord = ResizeCoord::TfCropAndResize;
  a.roi_start = 0.5;
  a.roi_end = 1.2;  // sources 3, 4.4, 5.8, 7.2 (outside)
  expect_near(resample_row(a, kRow, -1), {8, 16 + 0.4 * 16, 32 + 0.8 * 32, -1});
}

TEST(ResizeTaps, IdentityAndErrors) {
  ResizeAxis a;
  a.in = a.out = 5;
  EXPECT_TRUE(resize_taps(a)->identity(5));
  a.mode = ResizeMode::Cubic;
  EXPECT_TRUE(resize_taps(a)->identity(5));
  a.out = 3;
  a.in = 0;
  EXPECT_EQ(resize_taps(a).error().message, "resize: an empty axis cannot be resized to 3");
  a.in = 2;
  a.scale = 0;
  EXPECT_EQ(resize_taps(a).error().message, "resize: scale 0 must be positive and finite");
  EXPECT_EQ(parse_resize_coord("centre").error().message.rfind(
                "resize: unknown coordinate_transformation_mode 'centre' (expected half_pixel,", 0),
            0u);
}

}  // namespace
}  // namespace kiln::ir
