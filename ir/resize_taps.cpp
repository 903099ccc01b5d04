// Resampling taps of one resized axis: ONNX Resize's coordinate transforms and filters, evaluated
// on the host in double precision.
#include "ir/resize_taps.h"

#include "ir/builder_support.h"
#include "kiln/host_tensor.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

namespace kiln::ir {

namespace {

// The input coordinate of output position x (nullopt: outside the crop, extrapolation).
std::optional<double> source_coordinate(const ResizeAxis& a, int64_t x) {
  const double xd = static_cast<double>(x), in = static_cast<double>(a.in);
  const double out_width = a.scale * in;  // the reference's "output_width": not rounded
  switch (a.coord) {
    case ResizeCoord::HalfPixel:
      return (xd + 0.5) / a.scale - 0.5;
    case ResizeCoord::HalfPixelSymmetric: {
      const double adjustment = static_cast<double>(a.out) / out_width;
      const double offset = in / 2 * (1 - adjustment);
      return offset + (xd + 0.5) / a.scale - 0.5;
    }
    case ResizeCoord::PytorchHalfPixel:
      return out_width == 1 ? -0.5 : (xd + 0.5) / a.scale - 0.5;
    case ResizeCoord::AlignCorners:
      return out_width == 1 ? 0.0 : xd * (in - 1) / (out_width - 1);
    case ResizeCoord::Asymmetric:
      return xd / a.scale;
    case ResizeCoord::TfHalfPixelForNn:
      return (xd + 0.5) / a.scale;
    case ResizeCoord::TfCropAndResize: {
      const double span = a.roi_end - a.roi_start;
      double v = out_width == 1 ? span * (in - 1) / 2 : xd * span * (in - 1) / (out_width - 1);
      v += a.roi_start * (in - 1);
      if (v < 0 || v > in - 1) return std::nullopt;
      return v;
    }
  }
  return 0.0;
}

double cubic_kernel(double x, double A) {
  x = std::abs(x);
  if (x <= 1) return (A + 2) * x * x * x - (A + 3) * x * x + 1;
  if (x < 2) return A * x * x * x - 5 * A * x * x + 8 * A * x - 4 * A;
  return 0;
}

// The filter's weights for the K nearest positions, given the coordinate's fraction `ratio` in
// (0, 1] (1 when the coordinate is an integer: its neighbours are then [x-K/2, x+K/2)).
std::vector<double> coefficients(const ResizeAxis& a, double ratio) {
  const double A = a.cubic_a;
  if (a.mode == ResizeMode::Nearest) {
    if (ratio == 1) return {0, 1};
    bool second = false;
    switch (a.nearest) {
      case ResizeNearest::RoundPreferFloor:
        second = ratio > 0.5;
        break;
      case ResizeNearest::RoundPreferCeil:
        second = ratio >= 0.5;
        break;
      case ResizeNearest::Floor:
        second = false;
        break;
      case ResizeNearest::Ceil:
        second = true;
        break;
      case ResizeNearest::Simple:
        second = a.scale < 1;
        break;
    }
    return {second ? 0.0 : 1.0, second ? 1.0 : 0.0};
  }
  const double s = std::min(a.scale, 1.0);
  if (a.mode == ResizeMode::Linear) {
    if (!a.antialias) return {1 - ratio, ratio};
    const auto [start, footprint] = resize_footprint(a);
    std::vector<double> c(footprint);
    for (int64_t i = 0; i < footprint; ++i)
      c[i] = std::clamp(1 - std::abs((static_cast<double>(start + i) - ratio) * s), 0.0, 1.0);
    const double sum = std::accumulate(c.begin(), c.end(), 0.0);
    for (double& v : c) v /= sum;
    return c;
  }
  if (!a.antialias) {
    const double r = ratio, q = 1 - ratio;
    return {((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A,
            ((A + 2) * r - (A + 3)) * r * r + 1, ((A + 2) * q - (A + 3)) * q * q + 1,
            ((A * (q + 1) - 5 * A) * (q + 1) + 8 * A) * (q + 1) - 4 * A};
  }
  const int64_t start = resize_footprint(a).start;
  std::vector<double> c;
  for (int64_t i = start; i < 2 - start; ++i)
    c.push_back(cubic_kernel(s * (static_cast<double>(i) - ratio), A));
  const double sum = std::accumulate(c.begin(), c.end(), 0.0);
  for (double& v : c) v /= sum;
  return c;
}

// The k positions of [0, limit) nearest to x, ties to the smaller, in ascending order.
std::vector<int64_t> nearest_positions(double x, int64_t k, int64_t limit) {
  const int64_t c = std::clamp(static_cast<int64_t>(std::floor(std::clamp(x, -1e15, 1e15))),
                               int64_t{0}, limit - 1);
  std::vector<int64_t> cand;
  for (int64_t i = std::max<int64_t>(0, c - k - 1); i < std::min(limit, c + k + 2); ++i)
    cand.push_back(i);
  std::stable_sort(cand.begin(), cand.end(), [x](int64_t p, int64_t q) {
    const double dp = std::abs(x - static_cast<double>(p)),
                 dq = std::abs(x - static_cast<double>(q));
    return dp != dq ? dp < dq : p < q;
  });
  cand.resize(std::min<size_t>(cand.size(), static_cast<size_t>(k)));
  std::sort(cand.begin(), cand.end());
  return cand;
}

}  // namespace

ResizeFootprint resize_footprint(const ResizeAxis& a) {
  if (a.mode == ResizeMode::Nearest) return {0, 2};
  const double reach = a.mode == ResizeMode::Linear ? 1 : 2;
  if (!a.antialias) return {1 - static_cast<int64_t>(reach), 2 * static_cast<int64_t>(reach)};
  const double s = std::min(a.scale, 1.0);
  const auto start = static_cast<int64_t>(std::floor(-reach / s) + 1);
  return {start, 2 - 2 * start};
}

Attrs resize_attrs(int64_t axis, const ResizeAxis& a, double extrapolation) {
  return Attrs{{AttrKey::axis, axis},
               {AttrKey::size, a.out},
               {AttrKey::mode, std::string(resize_mode_name(a.mode))},
               {AttrKey::coord, std::string(resize_coord_name(a.coord))},
               {AttrKey::nearest, std::string(resize_nearest_name(a.nearest))},
               {AttrKey::scale, a.scale},
               {AttrKey::roi_start, a.roi_start},
               {AttrKey::roi_end, a.roi_end},
               {AttrKey::cubic_a, a.cubic_a},
               {AttrKey::exclude_outside, a.exclude_outside},
               {AttrKey::antialias, a.antialias},
               {AttrKey::value, extrapolation}};
}

ResizeAxis resize_axis_of(const Node& n) {
  KILN_CHECK(n.op == Op::Resize) << op_enum_name(n.op);
  const auto axis = static_cast<size_t>(n.attrs.i(AttrKey::axis));
  ResizeAxis a;
  a.in = n.inputs[0]->shape[axis];
  a.out = n.shape[axis];
  auto mode = parse_resize_mode(n.attrs.s(AttrKey::mode));
  auto coord = parse_resize_coord(n.attrs.s(AttrKey::coord));
  KILN_CHECK(mode && coord) << "resize attributes";
  a.mode = *mode;
  a.coord = *coord;
  auto nearest = parse_resize_nearest(n.attrs.s(AttrKey::nearest), true);
  KILN_CHECK(nearest) << "resize nearest " << n.attrs.s(AttrKey::nearest);
  a.nearest = *nearest;
  a.scale = n.attrs.f(AttrKey::scale);
  a.roi_start = n.attrs.f(AttrKey::roi_start);
  a.roi_end = n.attrs.f(AttrKey::roi_end);
  a.cubic_a = n.attrs.f(AttrKey::cubic_a);
  a.exclude_outside = n.attrs.b(AttrKey::exclude_outside);
  a.antialias = n.attrs.b(AttrKey::antialias);
  return a;
}

std::string_view resize_mode_name(ResizeMode m) {
  switch (m) {
    case ResizeMode::Nearest: return "nearest";
    case ResizeMode::Linear: return "linear";
    case ResizeMode::Cubic: return "cubic";
  }
  return "?";
}

std::string_view resize_coord_name(ResizeCoord c) {
  switch (c) {
    case ResizeCoord::HalfPixel: return "half_pixel";
    case ResizeCoord::HalfPixelSymmetric: return "half_pixel_symmetric";
    case ResizeCoord::PytorchHalfPixel: return "pytorch_half_pixel";
    case ResizeCoord::AlignCorners: return "align_corners";
    case ResizeCoord::Asymmetric: return "asymmetric";
    case ResizeCoord::TfHalfPixelForNn: return "tf_half_pixel_for_nn";
    case ResizeCoord::TfCropAndResize: return "tf_crop_and_resize";
  }
  return "?";
}

std::string_view resize_nearest_name(ResizeNearest n) {
  switch (n) {
    case ResizeNearest::RoundPreferFloor: return "round_prefer_floor";
    case ResizeNearest::RoundPreferCeil: return "round_prefer_ceil";
    case ResizeNearest::Floor: return "floor";
    case ResizeNearest::Ceil: return "ceil";
    case ResizeNearest::Simple: return "simple";
  }
  return "?";
}

bool ResizeTaps::identity(int64_t in) const {
  if (taps != 1 || out != in || !inside.empty()) return false;
  for (int64_t x = 0; x < out; ++x)
    if (index[x] != x || (!weight.empty() && weight[x] != 1)) return false;
  return true;
}

bool resize_is_identity(const ResizeAxis& a) {
  if (a.in != a.out || a.scale != 1 || a.coord == ResizeCoord::TfCropAndResize) return false;
  Expected<ResizeTaps> taps = resize_taps(a);
  return taps && taps->identity(a.in);
}

Expected<void> check_resize_axis(const ResizeAxis& a) {
  if (a.in < 0 || a.out < 0)
    return make_error(fmt::format("resize: sizes {} -> {} are negative", a.in, a.out));
  if (a.in == 0 && a.out > 0)
    return make_error(fmt::format("resize: an empty axis cannot be resized to {}", a.out));
  if (a.out > 0 && !(a.scale > 0 && std::isfinite(a.scale)))
    return make_error(fmt::format("resize: scale {} must be positive and finite", a.scale));
  // The taps are tables computed on the host (out positions x taps each): bounded up front, like
  // the importer's other tables (2^26 entries), and so is an antialiasing filter's reach, which
  // grows as 1/scale.
  constexpr double kMaxTaps = double(int64_t(1) << 26);
  if (static_cast<double>(a.out) > kMaxTaps)
    return make_error(fmt::format("resize: {} output positions along one axis (at most {})", a.out, kMaxTaps));
  if (a.out > 0 && a.antialias && a.scale < 1 && a.mode != ResizeMode::Nearest) {
    const double per_position = (a.mode == ResizeMode::Cubic ? 4.0 : 2.0) / a.scale + 2;
    if (per_position * static_cast<double>(a.out) > kMaxTaps)
      return make_error(fmt::format("resize: antialiasing at scale {} reads {} inputs per output: {} taps in all "
                                    "(at most {})",
                                    a.scale, per_position, per_position * static_cast<double>(a.out), kMaxTaps));
  }
  if (!std::isfinite(a.roi_start) || !std::isfinite(a.roi_end) || !std::isfinite(a.cubic_a))
    return make_error(fmt::format("resize: roi [{}, {}] and cubic coefficient {} must be finite",
                                  a.roi_start, a.roi_end, a.cubic_a));
  return {};
}

Expected<ResizeTaps> resize_taps(const ResizeAxis& a) {
  KILN_IR_OK(check_resize_axis(a));
  // Each output position's neighbours, weights and tap rows: refused up front when they would not
  // fit.
  if (!HostTensor::fits_in_memory(static_cast<double>(a.out) * 96))
    return make_error(fmt::format("resize: {} positions do not fit in memory", a.out));
  ResizeTaps t;
  t.out = a.out;
  if (a.out == 0) return t;
  // Each output position's K neighbours (their value the edge's beyond the input) and weights.
  std::vector<std::vector<int64_t>> idx(a.out);
  std::vector<std::vector<double>> w(a.out);
  bool any_outside = false;
  std::vector<uint8_t> inside(a.out, 1);
  size_t k = 0;
  for (int64_t x = 0; x < a.out; ++x) {
    const std::optional<double> src = source_coordinate(a, x);
    if (!src) {
      inside[x] = 0;
      any_outside = true;
      continue;
    }
    const double f = std::floor(*src);
    const double ratio = *src == f ? 1.0 : *src - f;
    std::vector<double> c = coefficients(a, ratio);
    const int64_t n = static_cast<int64_t>(c.size());
    const int64_t pad = (n + 1) / 2;
    std::vector<int64_t> pos =
        nearest_positions(*src + static_cast<double>(pad), n, a.in + 2 * pad);
    for (int64_t& p : pos) p -= pad;
    if (a.exclude_outside && a.mode != ResizeMode::Nearest) {
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) {
        if (pos[j] < 0 || pos[j] >= a.in) c[j] = 0;
        sum += c[j];
      }
      for (double& v : c) v /= sum;
    }
    for (int64_t& p : pos) p = std::clamp<int64_t>(p, 0, a.in - 1);
    k = std::max(k, c.size());
    idx[x] = std::move(pos);
    w[x] = std::move(c);
  }
  if (any_outside) t.inside = std::move(inside);
  // Lay the taps out [tap][out]; an outside position reads position 0 with weight 0.
  std::vector<int64_t> index(k * a.out, 0);
  std::vector<double> weight(k * a.out, 0.0);
  for (int64_t x = 0; x < a.out; ++x)
    for (size_t j = 0; j < idx[x].size(); ++j) {
      index[j * a.out + x] = idx[x][j];
      weight[j * a.out + x] = w[x][j];
    }
  if (a.mode == ResizeMode::Nearest) {
    // One tap: the neighbour of weight 1.
    t.taps = 1;
    t.index.assign(a.out, 0);
    for (int64_t x = 0; x < a.out; ++x)
      for (size_t j = 0; j < k; ++j)
        if (weight[j * a.out + x] != 0) t.index[x] = index[j * a.out + x];
    return t;
  }
  for (size_t j = 0; j < k; ++j) {
    bool used = false;
    for (int64_t x = 0; x < a.out; ++x) used = used || weight[j * a.out + x] != 0;
    if (!used) continue;
    t.index.insert(t.index.end(), index.begin() + j * a.out, index.begin() + (j + 1) * a.out);
    t.weight.insert(t.weight.end(), weight.begin() + j * a.out, weight.begin() + (j + 1) * a.out);
    ++t.taps;
  }
  return t;
}

Expected<ResizeMode> parse_resize_mode(std::string_view name) {
  if (name == "nearest") return ResizeMode::Nearest;
  if (name == "linear" || name == "bilinear" || name == "trilinear") return ResizeMode::Linear;
  if (name == "cubic" || name == "bicubic") return ResizeMode::Cubic;
  return make_error(
      fmt::format("resize: unknown mode '{}' (expected nearest, linear or cubic)", name));
}

Expected<ResizeCoord> parse_resize_coord(std::string_view name) {
  if (name == "half_pixel") return ResizeCoord::HalfPixel;
  if (name == "half_pixel_symmetric") return ResizeCoord::HalfPixelSymmetric;
  if (name == "pytorch_half_pixel") return ResizeCoord::PytorchHalfPixel;
  if (name == "align_corners") return ResizeCoord::AlignCorners;
  if (name == "asymmetric") return ResizeCoord::Asymmetric;
  if (name == "tf_half_pixel_for_nn") return ResizeCoord::TfHalfPixelForNn;
  if (name == "tf_crop_and_resize") return ResizeCoord::TfCropAndResize;
  return make_error(fmt::format(
      "resize: unknown coordinate_transformation_mode '{}' (expected half_pixel, "
      "half_pixel_symmetric, pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn "
      "or tf_crop_and_resize)",
      name));
}

Expected<ResizeNearest> parse_resize_nearest(std::string_view name, bool simple) {
  if (simple && name == resize_nearest_name(ResizeNearest::Simple)) return ResizeNearest::Simple;
  if (name == "round_prefer_floor") return ResizeNearest::RoundPreferFloor;
  if (name == "round_prefer_ceil") return ResizeNearest::RoundPreferCeil;
  if (name == "floor") return ResizeNearest::Floor;
  if (name == "ceil") return ResizeNearest::Ceil;
  return make_error(fmt::format(
      "resize: unknown nearest_mode '{}' (expected round_prefer_floor, round_prefer_ceil, floor or "
      "ceil)",
      name));
}

}  // namespace kiln::ir
