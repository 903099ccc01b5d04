// ONNX Resize (opsets 10-19) and Upsample (7, 9): each resized axis is one resize row of kiln's op
// table (ir/resize_taps.h); axes are separable, so an n-d resize is these per-axis steps in
// sequence, which the fuser inlines into one kernel like any chain of views and elementwise ops.
// GridSample (opsets 16, 20) reads X at coordinates a tensor gives: per tap, an index computed on
// the device and a gather_elements, weighted as ONNX's reference interpolates.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

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

}  // namespace

void add_resize_ops(OpTable& t) {
  t["Resize"] = resize;
  t["Upsample"] = upsample;
  t["GridSample"] = grid_sample;
}

}  // namespace kiln::onnx
