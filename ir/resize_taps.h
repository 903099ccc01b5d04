// Resampling taps of one resized axis (ONNX Resize and Upsample, torch interpolate): for every
// output position, the input positions it reads and their weights. They are computed on the host
// when a resize is recorded (kiln::resize) or imported (onnx/ops_resize.cpp), and the graph reads
// them as constants: one gather per tap along the axis, weighted and summed by elementwise ops.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

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

// The names ONNX and kiln's APIs use ("nearest", "half_pixel", "round_prefer_floor", ...).
Expected<ResizeMode> parse_resize_mode(std::string_view name);
Expected<ResizeCoord> parse_resize_coord(std::string_view name);
Expected<ResizeNearest> parse_resize_nearest(std::string_view name);

}  // namespace kiln::ir
