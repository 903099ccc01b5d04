// Resampling of one axis (ONNX Resize and Upsample, torch interpolate), the meaning of the resize
// row of kiln/ops.def: its parameters (ResizeAxis, kept as the node's attributes), and its taps
// (for every output position, the input positions it reads and their weights) as ONNX's reference
// computes them in double precision. The reference interpreter evaluates the row with these taps;
// the kernels compute the same coordinates and weights per element (passes/lower_resize.cpp).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "kiln/error.h"

namespace kiln::ir {

enum class ResizeMode { Nearest, Linear, Cubic };
// How an output position x maps to an input coordinate (ONNX coordinate_transformation_mode).
enum class ResizeCoord {
  HalfPixel,           // (x + 0.5) / scale - 0.5
  HalfPixelSymmetric,  // half_pixel, centred when out != in * scale
  PytorchHalfPixel,    // half_pixel, but -0.5 when out == 1
  AlignCorners,        // x * (in - 1) / (out - 1)
  Asymmetric,          // x / scale
  TfHalfPixelForNn,    // (x + 0.5) / scale
  TfCropAndResize,     // within [roi_start, roi_end] of the axis; outside it, extrapolation
};
// Which neighbour nearest mode reads. Simple: floor when upsampling, ceil when downsampling
// (Upsample and Resize before opset 11, as onnxruntime reads them).
enum class ResizeNearest { RoundPreferFloor, RoundPreferCeil, Floor, Ceil, Simple };

// One axis of a resize: in -> out positions, with `scale` the ratio the coordinates use (out / in
// when the size was given; the given scale otherwise, where out = floor(in * scale)).
struct ResizeAxis {
  int64_t in = 1;
  int64_t out = 1;
  double scale = 1;
  ResizeMode mode = ResizeMode::Nearest;
  ResizeCoord coord = ResizeCoord::HalfPixel;
  ResizeNearest nearest = ResizeNearest::RoundPreferFloor;
  double roi_start = 0;  // TfCropAndResize only, as fractions of the axis
  double roi_end = 1;
  double cubic_a = -0.75;
  bool exclude_outside =
      false;               // linear, cubic: weights of taps outside the input renormalized away
  bool antialias = false;  // linear, cubic: the filter widened by 1 / scale when downscaling
};

// out[x] = sum over taps t of weight[t][x] * in[index[t][x]] (nearest: one tap, no weight); where
// `inside` is not empty and inside[x] is false, out[x] is the extrapolation value instead.
struct ResizeTaps {
  int64_t out = 0;
  int64_t taps = 0;
  std::vector<int64_t> index;   // [taps][out], each in [0, in)
  std::vector<double> weight;   // [taps][out]; empty for nearest
  std::vector<uint8_t> inside;  // [out]; empty unless TfCropAndResize leaves some position outside
  // The axis reads every input position once, in order, with weight 1: nothing to do.
  bool identity(int64_t in) const;
};

// The taps of `axis`, computed in double precision exactly as ONNX's reference implementation
// does (the K nearest input positions of each output coordinate, edge positions repeated); taps
// whose weight is zero everywhere are dropped. Errors: sizes, scale or roi out of range.
Expected<ResizeTaps> resize_taps(const ResizeAxis& axis);
// Whether the axis reads each input position once, in order, with weight 1 (a resize that can be
// left out).
bool resize_is_identity(const ResizeAxis& axis);
// The checks resize_taps makes of its sizes, scale, roi and filter reach (a bound of 2^26 taps
// along one axis), without computing the taps.
Expected<void> check_resize_axis(const ResizeAxis& axis);

// The filter of a linear or cubic axis: output position x reads the `taps` input positions
// f + start + i (i < taps, clamped into [0, in)), where f = floor(c) of its coordinate c (c - 1
// when c is an integer, whose fraction then counts as 1). Linear 2 taps from 0, cubic 4 from -1;
// antialiasing widens both by 1/scale when downscaling.
struct ResizeFootprint {
  int64_t start = 0;
  int64_t taps = 0;
};
ResizeFootprint resize_footprint(const ResizeAxis& a);

// The resize row's attributes for `axis` (ResizeAxis's fields, every one, and `value`, the
// extrapolation value), and the ResizeAxis a resize node stands for (in and out from its shapes).
Attrs resize_attrs(int64_t axis, const ResizeAxis& a, double extrapolation);
ResizeAxis resize_axis_of(const Node& n);

// The names ONNX and kiln's APIs use ("nearest", "half_pixel", "round_prefer_floor", ...).
Expected<ResizeMode> parse_resize_mode(std::string_view name);
Expected<ResizeCoord> parse_resize_coord(std::string_view name);
// `simple`: "simple" (Upsample's rule; not an ONNX nearest_mode) is accepted too.
Expected<ResizeNearest> parse_resize_nearest(std::string_view name, bool simple = false);
std::string_view resize_mode_name(ResizeMode m);
std::string_view resize_coord_name(ResizeCoord c);
std::string_view resize_nearest_name(ResizeNearest n);  // Simple: "simple" (Upsample's rule)

}  // namespace kiln::ir
