// ONNX Resize (opsets 10-19) and Upsample (7, 9): each resized axis is one resize row of kiln's op
// table (ir/resize_taps.h); axes are separable, so an n-d resize is these per-axis steps in
// sequence, which the fuser inlines into one kernel like any chain of views and elementwise ops.
// GridSample (opsets 16, 20) and RoiAlign (10, 16) read X at coordinates tensors give: per tap,
// an index computed on the device and a gather_elements, weighted as ONNX's reference does.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <tuple>

#include "ir/resize_taps.h"
#include "onnx/import_context.h"

namespace kiln::onnx {

namespace {

using ir::Op;

// x resampled along every axis of `axes` (one entry per axis of x): one resize row per axis
// that moves, the last axis first as ONNX's reference interpolates (so a crop's extrapolation
// value along an inner axis is what the outer axes interpolate, as there).
Expected<const ir::Node*> resample(Context& c, const ir::Node* x,
                                   const std::vector<ir::ResizeAxis>& axes, double extrapolation) {
  const ir::Node* y = x;
  for (size_t d = axes.size(); d-- > 0;) {
    if (ir::resize_is_identity(axes[d])) continue;
    KILN_ONNX_TRY(y, c.check(c.b().resize(y, static_cast<int64_t>(d), axes[d], extrapolation)));
  }
  return y;
}

// Input i's values, or none when the input is missing or empty (an empty name or a [0] tensor:
// Resize-11 models pass an empty scales beside sizes).
Expected<std::vector<double>> optional_floats(Context& c, size_t i, std::string_view what) {
  if (!c.has(i) || (c.in(i).shape.size() == 1 && c.in(i).shape[0] == 0))
    return std::vector<double>{};
  return c.floats(i, what);
}

Expected<ir::ResizeMode> mode_of(Context& c, std::string_view op, const ir::Node* x) {
  const std::string name = c.attr_s("mode").value_or("nearest");
  Expected<ir::ResizeMode> mode = ir::parse_resize_mode(name);
  if (!mode || (name != "nearest" && name != "linear" && name != "cubic"))
    return c.fail(fmt::format("{}: unknown mode '{}'", op, name));
  if (*mode != ir::ResizeMode::Nearest && !ir::is_float(x->dtype))
    return c.unsupported(fmt::format("{} mode {} of {} data (kiln interpolates floats only)", op,
                                     name, ir::dtype_name(x->dtype)));
  return mode;
}

Outs resize(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  const bool v10 = c.opset() < 11;
  KILN_ONNX_TRY(ir::ResizeMode mode, mode_of(c, "Resize", x));
  ir::ResizeAxis proto;
  proto.mode = mode;
  proto.coord = ir::ResizeCoord::Asymmetric;
  proto.nearest = ir::ResizeNearest::Simple;
  if (auto s = c.attr_s("coordinate_transformation_mode"); !v10 || s) {
    auto coord = ir::parse_resize_coord(s.value_or("half_pixel"));
    if (!coord) return c.fail(coord.error().message);
    proto.coord = *coord;
  }
  if (auto s = c.attr_s("nearest_mode"); !v10 || s) {
    auto nearest = ir::parse_resize_nearest(s.value_or("round_prefer_floor"));
    if (!nearest) return c.fail(nearest.error().message);
    proto.nearest = *nearest;
  }
  proto.cubic_a = c.attr_f("cubic_coeff_a", -0.75f);
  proto.exclude_outside = c.attr_i("exclude_outside", 0) != 0;
  proto.antialias = c.attr_i("antialias", 0) != 0;
  const double extrapolation = c.attr_f("extrapolation_value", 0.f);
  const std::string policy = c.attr_s("keep_aspect_ratio_policy").value_or("stretch");
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    return c.fail(fmt::format("Resize: unknown keep_aspect_ratio_policy '{}'", policy));
  std::vector<int64_t> axes(rank);
  for (int64_t d = 0; d < rank; ++d) axes[d] = d;
  if (auto given = c.attr_ints("axes")) {
    axes.clear();
    for (int64_t a : *given) {
      if (a < -rank || a >= rank)
        return c.fail(fmt::format("Resize: axis {} is out of range for rank {}", a, rank));
      a = a < 0 ? a + rank : a;
      if (std::find(axes.begin(), axes.end(), a) != axes.end())
        return c.fail("Resize: axes repeat an axis");
      axes.push_back(a);
    }
  }
  const size_t n = axes.size();
  // The operands: scales (opset 10: input 1), or roi, scales, sizes (11+).
  std::vector<double> scales, roi;
  std::vector<int64_t> sizes;
  if (v10) {
    KILN_ONNX_TRY(scales, c.floats(1, "scales"));
  } else {
    KILN_ONNX_TRY(roi, optional_floats(c, 1, "roi"));
    KILN_ONNX_TRY(scales, optional_floats(c, 2, "scales"));
    if (c.has(3) && !(c.in(3).shape.size() == 1 && c.in(3).shape[0] == 0)) {
      KILN_ONNX_TRY(sizes, c.ints(3, "sizes"));
    }
  }
  if (scales.empty() == sizes.empty())
    return c.fail("Resize: exactly one of scales and sizes must be given");
  if (!scales.empty() && scales.size() != n)
    return c.fail(fmt::format("Resize: {} scales for {} axes", scales.size(), n));
  if (!sizes.empty() && sizes.size() != n)
    return c.fail(fmt::format("Resize: {} sizes for {} axes", sizes.size(), n));
  const bool crop = proto.coord == ir::ResizeCoord::TfCropAndResize;
  if (crop && roi.size() != 2 * n)
    return c.fail(fmt::format("Resize: tf_crop_and_resize needs a roi of {} values, not {}", 2 * n,
                              roi.size()));
  std::vector<ir::ResizeAxis> plan(rank, proto);
  for (int64_t d = 0; d < rank; ++d) {
    plan[d].in = plan[d].out = x->shape[d];
    plan[d].scale = 1;
    plan[d].mode = ir::ResizeMode::Nearest;  // an axis not resized is read as is
    plan[d].coord = ir::ResizeCoord::Asymmetric;
  }
  // An output length from a double the model's scales or sizes give: refused when not finite or
  // past the table bound before it is converted (a conversion out of range has no value).
  auto length = [&](double v, std::string_view what) -> Expected<int64_t> {
    if (!std::isfinite(v) || v < 0 || v > double(kMaxImportTable))
      return c.unsupported(fmt::format("Resize: {} gives an output length of {} (at most {})", what, v, kMaxImportTable));
    return static_cast<int64_t>(v);
  };
  double kept = 0;  // keep_aspect_ratio_policy's one scale
  if (!sizes.empty() && policy != "stretch") {
    kept = policy == "not_larger" ? INFINITY : 0;
    for (size_t i = 0; i < n; ++i) {
      if (x->shape[axes[i]] == 0)
        return c.fail(fmt::format("Resize: keep_aspect_ratio_policy {} over the empty axis {}", policy, axes[i]));
      const double s = double(sizes[i]) / double(x->shape[axes[i]]);
      kept = policy == "not_larger" ? std::min(kept, s) : std::max(kept, s);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    ir::ResizeAxis& a = plan[axes[i]];
    a = proto;
    a.in = x->shape[axes[i]];
    if (crop) {
      a.roi_start = roi[i];
      a.roi_end = roi[n + i];
    }
    if (!sizes.empty()) {
      if (sizes[i] < 0) return c.fail(fmt::format("Resize: size {} is negative", sizes[i]));
      if (policy == "stretch") {
        a.out = sizes[i];
        a.scale = double(sizes[i]) / double(a.in);
      } else {
        a.scale = kept;
        KILN_ONNX_TRY(a.out, length(kept * double(a.in) + 0.5, "keep_aspect_ratio_policy"));
      }
    } else {
      if (!(scales[i] > 0) || !std::isfinite(scales[i]))
        return c.fail(fmt::format("Resize: scale {} must be positive and finite", scales[i]));
      a.scale = scales[i];
      const double span = crop ? a.roi_end - a.roi_start : 1.0;
      KILN_ONNX_TRY(a.out, length(std::floor(double(a.in) * span * a.scale), "scales"));
    }
  }
  KILN_ONNX_TRY(const ir::Node* y, resample(c, x, plan, extrapolation));
  return std::vector<Value>{c.out(y)};
}

// Upsample: Resize before Resize, asymmetric coordinates (opset 7: scales an attribute).
Outs upsample(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  KILN_ONNX_TRY(ir::ResizeMode mode, mode_of(c, "Upsample", x));
  if (mode == ir::ResizeMode::Cubic) return c.fail("Upsample: mode cubic is not an Upsample mode");
  std::vector<double> scales;
  if (c.opset() < 9) {
    auto s = c.attr_floats("scales");
    if (!s) return c.fail("Upsample: attribute scales is missing");
    scales.assign(s->begin(), s->end());
  } else {
    KILN_ONNX_TRY(scales, c.floats(1, "scales"));
  }
  if (static_cast<int64_t>(scales.size()) != rank)
    return c.fail(fmt::format("Upsample: {} scales for rank {}", scales.size(), rank));
  std::vector<ir::ResizeAxis> plan(rank);
  for (int64_t d = 0; d < rank; ++d) {
    if (!(scales[d] > 0) || !std::isfinite(scales[d]) || double(x->shape[d]) * scales[d] > double(kMaxImportTable))
      return c.unsupported(fmt::format("Upsample: scale {} of an axis of {} (positive, finite, and at most {} "
                                       "outputs)",
                                       scales[d], x->shape[d], kMaxImportTable));
    ir::ResizeAxis& a = plan[d];
    a.mode = mode;
    a.coord = ir::ResizeCoord::Asymmetric;
    a.nearest = ir::ResizeNearest::Simple;
    a.in = x->shape[d];
    a.scale = scales[d];
    a.out = static_cast<int64_t>(std::floor(double(a.in) * a.scale));
  }
  KILN_ONNX_TRY(const ir::Node* y, resample(c, x, plan, 0));
  return std::vector<Value>{c.out(y)};
}

// GridSample's coordinate x reflected by the near border into [lo, hi] until it is inside, as
// ONNX's reference (_gs_reflect) does: dx past the border, n = floor(dx / (hi - lo)) whole
// spans, the rest r; even n reflects to the border crossed plus r, odd to the other minus r.
// Where hi = lo (align_corners over an axis of one), every x is lo.
Expected<const ir::Node*> reflect(Context& c, const ir::Node* x, double lo, double hi) {
  Expr e{c};
  ir::Builder& B = c.b();
  KILN_ONNX_TRY(const ir::Node* below, e.bin(Op::Lt, x, lo));
  KILN_ONNX_TRY(const ir::Node* above, e.bin(Op::Gt, x, hi));
  KILN_ONNX_TRY(const ir::Node* lo_k, e.k(lo, x->dtype));
  KILN_ONNX_TRY(const ir::Node* hi_k, e.k(hi, x->dtype));
  const double span = hi - lo;
  if (!(span > 0)) {
    KILN_ONNX_TRY(const ir::Node* out, e.bin(Op::Or, below, above));
    return c.check(B.where(out, lo_k, x));
  }
  KILN_ONNX_TRY(const ir::Node* from_lo, e.bin(Op::Sub, lo_k, x));  // lo - x
  KILN_ONNX_TRY(const ir::Node* from_hi, e.bin(Op::Sub, x, hi));    // x - hi
  KILN_ONNX_TRY(const ir::Node* dx, c.check(B.where(below, from_lo, from_hi)));
  KILN_ONNX_TRY(const ir::Node* q, e.bin(Op::Div, dx, span));
  KILN_ONNX_TRY(const ir::Node* n, e.un(Op::Floor, q));
  KILN_ONNX_TRY(const ir::Node* whole, e.bin(Op::Mul, n, span));
  KILN_ONNX_TRY(const ir::Node* r, e.bin(Op::Sub, dx, whole));
  KILN_ONNX_TRY(const ir::Node* half, e.bin(Op::Mul, n, 0.5));
  KILN_ONNX_TRY(half, e.un(Op::Floor, half));
  KILN_ONNX_TRY(half, e.bin(Op::Mul, half, 2.0));
  KILN_ONNX_TRY(const ir::Node* parity, e.bin(Op::Sub, n, half));
  KILN_ONNX_TRY(const ir::Node* odd, e.bin(Op::Gt, parity, 0.5));
  KILN_ONNX_TRY(const ir::Node* lo_r, e.bin(Op::Add, lo_k, r));
  KILN_ONNX_TRY(const ir::Node* hi_r, e.bin(Op::Sub, hi_k, r));
  KILN_ONNX_TRY(const ir::Node* up, c.check(B.where(odd, hi_r, lo_r)));
  KILN_ONNX_TRY(const ir::Node* down, c.check(B.where(odd, lo_r, hi_r)));
  KILN_ONNX_TRY(const ir::Node* inside, c.check(B.where(above, down, x)));
  return c.check(B.where(below, up, inside));
}

enum class SampleMode { nearest, linear, cubic };
enum class SamplePadding { zeros, border, reflection };

// One tap of one spatial axis: the index it reads (i64, within the axis), whether it lies inside
// the axis (zeros padding only; null where every tap does) and its weight (null: nearest).
struct Tap {
  const ir::Node* index = nullptr;
  const ir::Node* inside = nullptr;
  const ir::Node* weight = nullptr;
};

// The pixel index of an integral float coordinate f along an axis of `length`, with the padding
// ONNX's reference applies there (_pixel_at_array): zeros marks it outside, border clamps it,
// reflection reflects it by the axis' borders and truncates.
Expected<Tap> pixel_at(Context& c, const ir::Node* f, int64_t length, SamplePadding padding,
                       double lo, double hi) {
  Expr e{c};
  ir::Builder& B = c.b();
  Tap t;
  if (padding == SamplePadding::zeros) {
    KILN_ONNX_TRY(const ir::Node* ge, e.bin(Op::Ge, f, 0.0));
    KILN_ONNX_TRY(const ir::Node* le, e.bin(Op::Le, f, double(length - 1)));
    KILN_ONNX_TRY(t.inside, e.bin(Op::And, ge, le));
  } else if (padding == SamplePadding::reflection) {
    KILN_ONNX_TRY(f, reflect(c, f, lo, hi));
  }
  // Clamped into the axis (border's rule; for zeros and reflection it only keeps a far or NaN
  // coordinate's conversion in range), then truncated.
  KILN_ONNX_TRY(const ir::Node* zero, e.k(0, f->dtype));
  KILN_ONNX_TRY(const ir::Node* last, e.k(double(length - 1), f->dtype));
  KILN_ONNX_TRY(const ir::Node* clamped, c.check(B.clip(f, zero, last)));
  KILN_ONNX_TRY(t.index, c.check(B.cast(clamped, ir::DType::i64)));
  return t;
}

// The cubic convolution weights of the 4 taps at x0 - 1 .. x0 + 2 for t = x - x0 in [0, 1)
// (Keys, a = -0.75: ONNX's _gs_get_cubic_coeffs).
Expected<std::vector<const ir::Node*>> cubic_weights(Context& c, const ir::Node* t) {
  Expr e{c};
  constexpr double a = -0.75;
  // far(d) for d in [1, 2]: ((a d - 5a) d + 8a) d - 4a; near(d) for d in [0, 1]:
  // ((a + 2) d - (a + 3)) d d + 1.
  auto far = [&](const ir::Node* d) -> Expected<const ir::Node*> {
    KILN_ONNX_TRY(const ir::Node* v, e.bin(Op::Mul, d, a));
    KILN_ONNX_TRY(v, e.bin(Op::Sub, v, 5 * a));
    KILN_ONNX_TRY(v, e.bin(Op::Mul, v, d));
    KILN_ONNX_TRY(v, e.bin(Op::Add, v, 8 * a));
    KILN_ONNX_TRY(v, e.bin(Op::Mul, v, d));
    return e.bin(Op::Sub, v, 4 * a);
  };
  auto near = [&](const ir::Node* d) -> Expected<const ir::Node*> {
    KILN_ONNX_TRY(const ir::Node* v, e.bin(Op::Mul, d, a + 2));
    KILN_ONNX_TRY(v, e.bin(Op::Sub, v, a + 3));
    KILN_ONNX_TRY(v, e.bin(Op::Mul, v, d));
    KILN_ONNX_TRY(v, e.bin(Op::Mul, v, d));
    return e.bin(Op::Add, v, 1.0);
  };
  KILN_ONNX_TRY(const ir::Node* t1, e.bin(Op::Add, t, 1.0));
  KILN_ONNX_TRY(const ir::Node* one, e.k(1.0, t->dtype));
  KILN_ONNX_TRY(const ir::Node* u, e.bin(Op::Sub, one, t));
  KILN_ONNX_TRY(const ir::Node* u1, e.bin(Op::Add, u, 1.0));
  std::vector<const ir::Node*> w(4);
  KILN_ONNX_TRY(w[0], far(t1));
  KILN_ONNX_TRY(w[1], near(t));
  KILN_ONNX_TRY(w[2], near(u));
  KILN_ONNX_TRY(w[3], far(u1));
  return w;
}

// GridSample: Y[n, c, o...] is X[n, c] sampled at the coordinates grid[n, o..., :], each in
// [-1, 1] across its axis and given last axis first (x, then y, ...). Every spatial axis'
// coordinate is unnormalized (align_corners), rounded (nearest) and moved inside by the padding
// mode; each tap's index is computed on the device and read by a gather_elements of X flattened
// to [N, C, spatial]; the taps combine as the reference interpolates, the last axis innermost:
// sum_j w0_j * (sum_i w1_i * X[.., j, i]). Opset 16 takes 4-D X and the modes bilinear, nearest
// and bicubic; opset 20 any number of spatial axes and linear, nearest and cubic.
Outs grid_sample(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  KILN_ONNX_TRY(const ir::Node* grid, c.x(1));
  ir::Builder& B = c.b();
  Expr e{c};
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  const bool v20 = c.opset() >= 20;
  if (rank < 3 || (!v20 && rank != 4))
    return c.fail(fmt::format("GridSample: X must be {} ([N, C, spatial...]), not rank {}",
                              v20 ? "of rank 3 or more" : "4-D", rank));
  const int64_t k = rank - 2;  // spatial axes
  if (static_cast<int64_t>(grid->shape.size()) != rank || grid->shape.back() != k)
    return c.fail(fmt::format("GridSample: grid must be [N, out spatial..., {}] (rank {}), not {}",
                              k, rank, ir::shape_str(grid->shape)));
  if (grid->shape[0] != x->shape[0])
    return c.fail(fmt::format("GridSample: X has N = {}, grid {}", x->shape[0], grid->shape[0]));
  if (!ir::is_float(grid->dtype))
    return c.fail(fmt::format("GridSample: grid must be a float tensor, not {}",
                              ir::dtype_name(grid->dtype)));
  const std::string mode_name = c.attr_s("mode").value_or(v20 ? "linear" : "bilinear");
  SampleMode mode;
  if (mode_name == "nearest")
    mode = SampleMode::nearest;
  else if (mode_name == (v20 ? "linear" : "bilinear"))
    mode = SampleMode::linear;
  else if (mode_name == (v20 ? "cubic" : "bicubic"))
    mode = SampleMode::cubic;
  else
    return c.fail(fmt::format("GridSample-{}: unknown mode '{}' (nearest, {}, {})", v20 ? 20 : 16,
                              mode_name, v20 ? "linear" : "bilinear", v20 ? "cubic" : "bicubic"));
  const std::string padding_name = c.attr_s("padding_mode").value_or("zeros");
  SamplePadding padding;
  if (padding_name == "zeros")
    padding = SamplePadding::zeros;
  else if (padding_name == "border")
    padding = SamplePadding::border;
  else if (padding_name == "reflection")
    padding = SamplePadding::reflection;
  else
    return c.fail(fmt::format("GridSample: unknown padding_mode '{}' (zeros, border, reflection)",
                              padding_name));
  const bool align = c.attr_i("align_corners", 0) != 0;
  if (mode != SampleMode::nearest && !ir::is_float(x->dtype))
    return c.unsupported(
        fmt::format("GridSample mode {} of {} data (kiln interpolates floats only)", mode_name,
                    ir::dtype_name(x->dtype)));

  const int64_t n = x->shape[0], channels = x->shape[1];
  int64_t points = 1, pixels = 1;
  for (int64_t a = 0; a < k; ++a) {
    points *= grid->shape[1 + a];
    pixels *= x->shape[2 + a];
  }
  ir::Shape out_shape{n, channels};
  out_shape.insert(out_shape.end(), grid->shape.begin() + 1, grid->shape.end() - 1);
  if (n * channels * points == 0) return one(c, B.full(out_shape, 0, x->dtype));
  if (pixels == 0) {
    if (padding != SamplePadding::zeros)
      return c.fail(fmt::format("GridSample: padding_mode {} over X {} with an empty spatial axis",
                                padding_name, ir::shape_str(x->shape)));
    return one(c, B.full(out_shape, 0, x->dtype));
  }
  const int64_t taps_per_axis = mode == SampleMode::nearest  ? 1
                                : mode == SampleMode::linear ? 2
                                                             : 4;
  int64_t combos = 1;
  for (int64_t a = 0; a < k; ++a) combos *= taps_per_axis;
  if (combos > 256)
    return c.unsupported(
        fmt::format("GridSample: {} taps a point ({} spatial axes, mode {}; at most 256)", combos,
                    k, mode_name));

  // Coordinates in f32 (f64 for an f64 grid), as [N, 1, points] (C broadcasts).
  const ir::DType ct = grid->dtype == ir::DType::f64 ? ir::DType::f64 : ir::DType::f32;
  const ir::Node* g = grid;
  if (g->dtype != ct) {
    KILN_ONNX_TRY(g, c.check(B.cast(g, ct)));
  }
  const ir::DType vt = x->dtype;
  // Per spatial axis, its taps.
  std::vector<std::vector<Tap>> taps(k);
  for (int64_t a = 0; a < k; ++a) {
    const int64_t length = x->shape[2 + a];
    const double lo = align ? 0.0 : -0.5, hi = align ? double(length - 1) : double(length) - 0.5;
    KILN_ONNX_TRY(const ir::Node* v, c.check(B.slice(g, rank - 1, k - 1 - a, k - a, 1)));
    KILN_ONNX_TRY(v, c.check(B.reshape(v, {n, 1, points})));
    // Unnormalized: (v + 1) / 2 * (length - 1) with align_corners, ((v + 1) length - 1) / 2
    // without.
    KILN_ONNX_TRY(v, e.bin(Op::Add, v, 1.0));
    if (align) {
      KILN_ONNX_TRY(v, e.bin(Op::Div, v, 2.0));
      KILN_ONNX_TRY(v, e.bin(Op::Mul, v, double(length - 1)));
    } else {
      KILN_ONNX_TRY(v, e.bin(Op::Mul, v, double(length)));
      KILN_ONNX_TRY(v, e.bin(Op::Sub, v, 1.0));
      KILN_ONNX_TRY(v, e.bin(Op::Div, v, 2.0));
    }
    if (mode == SampleMode::nearest) {
      if (k == 3) {  // the reference rounds 3-D half away from zero (std::round), others to even
        KILN_ONNX_TRY(const ir::Node* mag, e.un(Op::Abs, v));
        KILN_ONNX_TRY(mag, e.bin(Op::Add, mag, 0.5));
        KILN_ONNX_TRY(mag, e.un(Op::Floor, mag));
        KILN_ONNX_TRY(const ir::Node* sign, e.un(Op::Sign, v));
        KILN_ONNX_TRY(v, e.bin(Op::Mul, mag, sign));
      } else {
        KILN_ONNX_TRY(v, round_half_even(c, v));
      }
    }
    // A coordinate past the borders is moved inside: clamped (border) or reflected.
    if (padding == SamplePadding::border) {
      KILN_ONNX_TRY(const ir::Node* below, e.bin(Op::Lt, v, lo));
      KILN_ONNX_TRY(const ir::Node* above, e.bin(Op::Gt, v, hi));
      KILN_ONNX_TRY(const ir::Node* out, e.bin(Op::Or, below, above));
      KILN_ONNX_TRY(const ir::Node* zero, e.k(0, ct));
      KILN_ONNX_TRY(const ir::Node* last, e.k(double(length - 1), ct));
      KILN_ONNX_TRY(const ir::Node* clamped, c.check(B.clip(v, zero, last)));
      KILN_ONNX_TRY(v, c.check(B.where(out, clamped, v)));
    } else if (padding == SamplePadding::reflection) {
      KILN_ONNX_TRY(v, reflect(c, v, lo, hi));
    }
    if (mode == SampleMode::nearest) {
      // Truncated toward zero (the reference's astype(int32)).
      KILN_ONNX_TRY(const ir::Node* down, e.un(Op::Floor, v));
      KILN_ONNX_TRY(const ir::Node* up, e.un(Op::Ceil, v));
      KILN_ONNX_TRY(const ir::Node* neg, e.bin(Op::Lt, v, 0.0));
      KILN_ONNX_TRY(const ir::Node* f, c.check(B.where(neg, up, down)));
      KILN_ONNX_TRY(Tap t, pixel_at(c, f, length, padding, lo, hi));
      taps[a].push_back(t);
      continue;
    }
    KILN_ONNX_TRY(const ir::Node* x0, e.un(Op::Floor, v));
    KILN_ONNX_TRY(const ir::Node* t, e.bin(Op::Sub, v, x0));
    std::vector<const ir::Node*> weights;
    if (mode == SampleMode::linear) {
      KILN_ONNX_TRY(const ir::Node* one_k, e.k(1.0, ct));
      KILN_ONNX_TRY(const ir::Node* w0, e.bin(Op::Sub, one_k, t));
      weights = {w0, t};
    } else {
      KILN_ONNX_TRY(weights, cubic_weights(c, t));
    }
    const int64_t first = mode == SampleMode::linear ? 0 : -1;
    for (int64_t i = 0; i < taps_per_axis; ++i) {
      const ir::Node* f = x0;
      if (first + i != 0) {
        KILN_ONNX_TRY(f, e.bin(Op::Add, x0, double(first + i)));
      }
      KILN_ONNX_TRY(Tap tap, pixel_at(c, f, length, padding, lo, hi));
      tap.weight = weights[i];
      if (tap.weight->dtype != vt) {
        KILN_ONNX_TRY(tap.weight, c.check(B.cast(tap.weight, vt)));
      }
      taps[a].push_back(tap);
    }
  }

  // X as [N, C, pixels]; a tap combination's flat index, broadcast over C, reads it.
  KILN_ONNX_TRY(const ir::Node* flat_x, c.check(B.reshape(x, {n, channels, pixels})));
  const ir::Shape read_shape{n, channels, points};
  std::vector<int64_t> strides(k, 1);
  for (int64_t a = k - 1; a-- > 0;) strides[a] = strides[a + 1] * x->shape[3 + a];
  // The value at the taps chosen so far (`chosen`, one per axis before `a`): axis a's taps
  // weighted and summed in order, the last axis innermost.
  std::vector<const Tap*> chosen;
  std::function<Expected<const ir::Node*>(int64_t)> sample =
      [&](int64_t a) -> Expected<const ir::Node*> {
    if (a == k) {
      const ir::Node* index = nullptr;
      const ir::Node* inside = nullptr;
      for (int64_t d = 0; d < k; ++d) {
        const ir::Node* term = chosen[d]->index;
        if (strides[d] != 1) {
          KILN_ONNX_TRY(term, e.bin(Op::Mul, term, double(strides[d])));
        }
        if (index) {
          KILN_ONNX_TRY(index, e.bin(Op::Add, index, term));
        } else {
          index = term;
        }
        if (chosen[d]->inside) {
          if (inside) {
            KILN_ONNX_TRY(inside, e.bin(Op::And, inside, chosen[d]->inside));
          } else {
            inside = chosen[d]->inside;
          }
        }
      }
      KILN_ONNX_TRY(index, c.check(B.expand(index, read_shape)));
      KILN_ONNX_TRY(const ir::Node* value, c.check(B.gather_elements(flat_x, index, 2)));
      if (!inside) return value;
      KILN_ONNX_TRY(const ir::Node* zero, e.k(0, vt));
      return c.check(B.where(inside, value, zero));
    }
    const ir::Node* sum = nullptr;
    for (const Tap& tap : taps[a]) {
      chosen.push_back(&tap);
      Expected<const ir::Node*> inner = sample(a + 1);
      chosen.pop_back();
      if (!inner) return inner;
      const ir::Node* term = *inner;
      if (tap.weight) {
        KILN_ONNX_TRY(term, e.bin(Op::Mul, tap.weight, term));
      }
      if (sum) {
        KILN_ONNX_TRY(sum, e.bin(Op::Add, sum, term));
      } else {
        sum = term;
      }
    }
    return sum;
  };
  KILN_ONNX_TRY(const ir::Node* y, sample(0));
  return one(c, B.reshape(y, std::vector<int64_t>(out_shape.begin(), out_shape.end())));
}

// RoiAlign (opsets 10, 16): Y[r, c, ph, pw] pools X[batch_indices[r], c] over bin (ph, pw) of roi
// r, sampled at sampling_ratio^2 points a bin, each bilinearly interpolated with the reference's
// edge rules (a point past -1 or the far edge reads 0; one inside the last pixel reads it) and
// averaged (avg) or the largest of the weighted corners taken (max), as ONNX's reference does.
// The points' coordinates come from the rois on the device, as [R, out_h, out_w, sr, sr] tensors;
// the corners are gather_elements of X viewed as [C, N * H * W]. sampling_ratio 0 (as many points
// as the roi is pixels a bin) makes the point count depend on the rois' values: unsupported.
Outs roi_align(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  KILN_ONNX_TRY(const ir::Node* rois, c.x(1));
  KILN_ONNX_TRY(const ir::Node* batch_indices, c.x(2));
  ir::Builder& B = c.b();
  Expr e{c};
  if (x->shape.size() != 4)
    return c.fail(fmt::format("RoiAlign: X must be [N, C, H, W], not {}", ir::shape_str(x->shape)));
  if (!ir::is_float(x->dtype))
    return c.fail(
        fmt::format("RoiAlign: X must be a float tensor, not {}", ir::dtype_name(x->dtype)));
  if (rois->shape.size() != 2 || rois->shape[1] != 4)
    return c.fail(
        fmt::format("RoiAlign: rois must be [num_rois, 4], not {}", ir::shape_str(rois->shape)));
  if (batch_indices->shape.size() != 1 || batch_indices->shape[0] != rois->shape[0] ||
      !ir::is_int(batch_indices->dtype))
    return c.fail(fmt::format("RoiAlign: batch_indices must be {} integers ([num_rois]), not {} {}",
                              rois->shape[0], ir::dtype_name(batch_indices->dtype),
                              ir::shape_str(batch_indices->shape)));
  const std::string mode = c.attr_s("mode").value_or("avg");
  if (mode != "avg" && mode != "max")
    return c.fail(fmt::format("RoiAlign: unknown mode '{}' (avg, max)", mode));
  const std::string coord = c.opset() >= 16
                                ? c.attr_s("coordinate_transformation_mode").value_or("half_pixel")
                                : "output_half_pixel";
  if (coord != "half_pixel" && coord != "output_half_pixel")
    return c.fail(fmt::format("RoiAlign: unknown coordinate_transformation_mode '{}'", coord));
  const bool half_pixel = coord == "half_pixel";
  const int64_t out_h = c.attr_i("output_height", 1), out_w = c.attr_i("output_width", 1);
  const int64_t sr = c.attr_i("sampling_ratio", 0);
  const double scale = c.attr_f("spatial_scale", 1.0f);
  if (out_h < 1 || out_w < 1)
    return c.fail(fmt::format("RoiAlign: output_height {} and output_width {} must be positive",
                              out_h, out_w));
  if (sr < 0) return c.fail(fmt::format("RoiAlign: sampling_ratio {} is negative", sr));
  if (sr == 0)
    return c.unsupported(
        "RoiAlign with sampling_ratio 0 (its points a bin depend on the rois' values)");
  const int64_t n = x->shape[0], channels = x->shape[1], h = x->shape[2], w = x->shape[3];
  const int64_t r = rois->shape[0];
  KILN_ONNX_TRY(std::ignore,
                check_table_size(c, {r, out_h, out_w, sr, sr}, "RoiAlign's sample points"));
  const ir::Shape y_shape{r, channels, out_h, out_w};
  if (r * channels == 0) return one(c, B.full(y_shape, 0, x->dtype));
  if (n * h * w == 0)
    return c.fail(fmt::format("RoiAlign: X {} is empty", ir::shape_str(x->shape)));

  const ir::DType ct = x->dtype == ir::DType::f64 ? ir::DType::f64 : ir::DType::f32;
  const ir::Node* boxes = rois;
  if (boxes->dtype != ct) {
    KILN_ONNX_TRY(boxes, c.check(B.cast(boxes, ct)));
  }
  // One axis' sample coordinates, shaped [R, bins, 1, sr, 1] (y) or [R, 1, bins, 1, sr] (x):
  // start + bin * size + (i + 0.5) * size / sr, with size = extent / bins.
  auto coords = [&](int64_t first, int64_t bins, bool is_y) -> Expected<const ir::Node*> {
    KILN_ONNX_TRY(const ir::Node* start, c.check(B.slice(boxes, 1, first, first + 1, 1)));
    KILN_ONNX_TRY(const ir::Node* end, c.check(B.slice(boxes, 1, first + 2, first + 3, 1)));
    KILN_ONNX_TRY(start, e.bin(Op::Mul, start, scale));
    KILN_ONNX_TRY(end, e.bin(Op::Mul, end, scale));
    if (half_pixel) {
      KILN_ONNX_TRY(start, e.bin(Op::Sub, start, 0.5));
      KILN_ONNX_TRY(end, e.bin(Op::Sub, end, 0.5));
    }
    KILN_ONNX_TRY(const ir::Node* extent, e.bin(Op::Sub, end, start));
    if (!half_pixel) {  // malformed rois are forced to 1 x 1
      KILN_ONNX_TRY(extent, e.bin(Op::Max, extent, 1.0));
    }
    KILN_ONNX_TRY(const ir::Node* size, e.bin(Op::Div, extent, double(bins)));
    KILN_ONNX_TRY(start, c.check(B.reshape(start, {r, 1, 1, 1, 1})));
    KILN_ONNX_TRY(size, c.check(B.reshape(size, {r, 1, 1, 1, 1})));
    KILN_ONNX_TRY(const ir::Node* bin, c.check(B.arange(0, bins, 1, ct)));
    KILN_ONNX_TRY(bin, c.check(B.reshape(bin, is_y ? std::vector<int64_t>{1, bins, 1, 1, 1}
                                                   : std::vector<int64_t>{1, 1, bins, 1, 1})));
    KILN_ONNX_TRY(const ir::Node* i, c.check(B.arange(0, sr, 1, ct)));
    KILN_ONNX_TRY(i, c.check(B.reshape(i, is_y ? std::vector<int64_t>{1, 1, 1, sr, 1}
                                               : std::vector<int64_t>{1, 1, 1, 1, sr})));
    KILN_ONNX_TRY(const ir::Node* offset, e.bin(Op::Mul, bin, size));
    KILN_ONNX_TRY(const ir::Node* v, e.bin(Op::Add, start, offset));
    KILN_ONNX_TRY(const ir::Node* frac, e.bin(Op::Add, i, 0.5));
    KILN_ONNX_TRY(frac, e.bin(Op::Mul, frac, size));
    KILN_ONNX_TRY(frac, e.bin(Op::Div, frac, double(sr)));
    return e.bin(Op::Add, v, frac);
  };
  // One axis' corners and weights at coordinates v along an axis of `length`: (low, high) indices
  // and (1 - l, l) weights, with the reference's rules; `outside`: v < -1 or v > length.
  struct Corners {
    const ir::Node *low, *high, *w_low, *w_high, *outside;
  };
  auto corners = [&](const ir::Node* v, int64_t length) -> Expected<Corners> {
    Corners k;
    KILN_ONNX_TRY(const ir::Node* under, e.bin(Op::Lt, v, -1.0));
    KILN_ONNX_TRY(const ir::Node* over, e.bin(Op::Gt, v, double(length)));
    KILN_ONNX_TRY(k.outside, e.bin(Op::Or, under, over));
    KILN_ONNX_TRY(v, e.bin(Op::Max, v, 0.0));
    KILN_ONNX_TRY(const ir::Node* low, e.un(Op::Floor, v));
    KILN_ONNX_TRY(const ir::Node* last_k, e.k(double(length - 1), ct));
    KILN_ONNX_TRY(const ir::Node* at_end, e.bin(Op::Ge, low, double(length - 1)));
    KILN_ONNX_TRY(low, c.check(B.where(at_end, last_k, low)));
    KILN_ONNX_TRY(v, c.check(B.where(at_end, last_k, v)));
    KILN_ONNX_TRY(const ir::Node* high, e.bin(Op::Add, low, 1.0));
    KILN_ONNX_TRY(high, c.check(B.where(at_end, last_k, high)));
    KILN_ONNX_TRY(k.w_high, e.bin(Op::Sub, v, low));
    KILN_ONNX_TRY(const ir::Node* one_k, e.k(1.0, ct));
    KILN_ONNX_TRY(k.w_low, e.bin(Op::Sub, one_k, k.w_high));
    KILN_ONNX_TRY(k.low, c.check(B.cast(low, ir::DType::i64)));
    KILN_ONNX_TRY(k.high, c.check(B.cast(high, ir::DType::i64)));
    return k;
  };
  KILN_ONNX_TRY(const ir::Node* ys, coords(1, out_h, true));
  KILN_ONNX_TRY(const ir::Node* xs, coords(0, out_w, false));
  KILN_ONNX_TRY(Corners cy, corners(ys, h));
  KILN_ONNX_TRY(Corners cx, corners(xs, w));
  KILN_ONNX_TRY(const ir::Node* outside,
                e.bin(Op::Or, cy.outside, cx.outside));  // [R, oh, ow, sr, sr]
  // Each roi's image: its batch index clamped into [0, N) (an index out of range, which ONNX leaves
  // undefined, reads the nearest image), as the first pixel's flat offset.
  KILN_ONNX_TRY(const ir::Node* image, c.check(B.cast(batch_indices, ir::DType::i64)));
  KILN_ONNX_TRY(const ir::Node* zero_i, e.k(0, ir::DType::i64));
  KILN_ONNX_TRY(const ir::Node* last_i, e.k(double(n - 1), ir::DType::i64));
  KILN_ONNX_TRY(image, c.check(B.clip(image, zero_i, last_i)));
  KILN_ONNX_TRY(image, e.bin(Op::Mul, image, double(h * w)));
  KILN_ONNX_TRY(image, c.check(B.reshape(image, {r, 1, 1, 1, 1})));
  KILN_ONNX_TRY(const ir::Node* flat_x, c.check(B.permute(x, {1, 0, 2, 3})));
  KILN_ONNX_TRY(flat_x, c.check(B.reshape(flat_x, {channels, n * h * w})));
  KILN_ONNX_TRY(const ir::Node* zero_v, e.k(0, ct));
  const int64_t points = r * out_h * out_w * sr * sr;
  // The four weighted corners, each [C, R, oh, ow, sr * sr].
  std::vector<const ir::Node*> terms;
  for (const auto& [yi, wy] : {std::pair{cy.low, cy.w_low}, std::pair{cy.high, cy.w_high}})
    for (const auto& [xi, wx] : {std::pair{cx.low, cx.w_low}, std::pair{cx.high, cx.w_high}}) {
      KILN_ONNX_TRY(const ir::Node* index, e.bin(Op::Mul, yi, double(w)));
      KILN_ONNX_TRY(index, e.bin(Op::Add, index, xi));
      KILN_ONNX_TRY(index, e.bin(Op::Add, index, image));
      KILN_ONNX_TRY(index, c.check(B.reshape(index, {1, points})));
      KILN_ONNX_TRY(index, c.check(B.expand(index, {channels, points})));
      KILN_ONNX_TRY(const ir::Node* v, c.check(B.gather_elements(flat_x, index, 1)));
      if (v->dtype != ct) {
        KILN_ONNX_TRY(v, c.check(B.cast(v, ct)));
      }
      KILN_ONNX_TRY(v, c.check(B.reshape(v, {channels, r, out_h, out_w, sr * sr})));
      KILN_ONNX_TRY(const ir::Node* weight, e.bin(Op::Mul, wy, wx));
      KILN_ONNX_TRY(weight, c.check(B.where(outside, zero_v, weight)));
      KILN_ONNX_TRY(weight, c.check(B.reshape(weight, {1, r, out_h, out_w, sr * sr})));
      KILN_ONNX_TRY(const ir::Node* term, e.bin(Op::Mul, weight, v));
      terms.push_back(term);
    }
  const ir::Node* pooled = nullptr;
  if (mode == "avg") {
    KILN_ONNX_TRY(const ir::Node* sum, e.bin(Op::Add, terms[0], terms[1]));
    KILN_ONNX_TRY(sum, e.bin(Op::Add, sum, terms[2]));
    KILN_ONNX_TRY(sum, e.bin(Op::Add, sum, terms[3]));
    KILN_ONNX_TRY(pooled, c.check(B.reduce(Op::Sum, sum, std::vector<int64_t>{4}, false)));
    KILN_ONNX_TRY(pooled, e.bin(Op::Div, pooled, double(sr * sr)));
  } else {
    KILN_ONNX_TRY(const ir::Node* top, e.bin(Op::Max, terms[0], terms[1]));
    KILN_ONNX_TRY(top, e.bin(Op::Max, top, terms[2]));
    KILN_ONNX_TRY(top, e.bin(Op::Max, top, terms[3]));
    KILN_ONNX_TRY(pooled, c.check(B.reduce(Op::ReduceMax, top, std::vector<int64_t>{4}, false)));
  }
  KILN_ONNX_TRY(pooled, c.check(B.permute(pooled, {1, 0, 2, 3})));
  if (pooled->dtype != x->dtype) return one(c, B.cast(pooled, x->dtype));
  return std::vector<Value>{c.out(pooled)};
}

}  // namespace

void add_resize_ops(OpTable& t) {
  t["Resize"] = resize;
  t["Upsample"] = upsample;
  t["GridSample"] = grid_sample;
  t["RoiAlign"] = roi_align;
}

}  // namespace kiln::onnx
