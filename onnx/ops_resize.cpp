// ONNX Resize (opsets 10-19) and Upsample (7, 9): each resized axis is one resize row of kiln's op
// table (ir/resize_taps.h); axes are separable, so an n-d resize is these per-axis steps in
// sequence, which the fuser inlines into one kernel like any chain of views and elementwise ops.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

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

}  // namespace

void add_resize_ops(OpTable& t) {
  t["Resize"] = resize;
  t["Upsample"] = upsample;
}

}  // namespace kiln::onnx
