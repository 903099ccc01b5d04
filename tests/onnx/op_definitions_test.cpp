// ONNX ops whose importers compose several kiln primitives, against computations written here from
// the operators' definitions, on the reference interpreter and the cpu device both:
// - GridSample (onnx/ops_resize.cpp) against a sampler following ONNX's reference
//   (onnx/reference/ops/op_grid_sample.py): every mode, padding mode and align_corners, on grids
//   that reach far past the borders (reflected several times), with exact ties for nearest; 1, 2
//   and 3 spatial axes (opset 20), f64. And its errors.
// - Det (onnx/ops_reduce.cpp) against the Leibniz sum over permutations in long double: random,
//   pivoting and singular matrices, batches, f64 and f16.
// - RoiAlign (onnx/ops_resize.cpp) against ONNX's reference pooling: avg and max, both coordinate
//   modes, opset 10, rois past every edge and degenerate ones, two images. And its errors.
// - BitShift of u8 (onnx/ops_elementwise.cpp) against C's shifts, every value and shift.
// - Pad reflect and wrap (onnx/ops_tensor.cpp) against numpy's rules, pads past the axis.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "interp/reference.h"
#include "onnx/importer.h"
#include "runtime/device.h"
#include "tests/onnx/proto_writer.h"

namespace kiln::onnx {
namespace {

using namespace proto_writer;
constexpr int kDouble = 11;

// Imports the one-output model `bytes`, runs it on the reference interpreter and on `device` with
// `inputs` (by name) and expects y's shape and every value within tol * (1 + |want|) on both.
void expect_outputs(runtime::Device& device, const std::string& bytes,
                    const std::map<std::string, ir::HostTensor>& inputs,
                    const std::vector<int64_t>& y_dims, const std::vector<double>& want,
                    double tol) {
  ir::Graph g;
  auto m = import_model(g, bytes);
  ASSERT_TRUE(m) << m.error().message;
  std::unordered_map<const ir::Node*, ir::HostTensor> bind;
  runtime::Bindings bindings;
  for (const auto& [name, input] : m->graph.inputs) {
    const ir::HostTensor& value = inputs.at(name);
    bind.emplace(input, value);
    auto b = device.pool()->from_host(value, name);
    ASSERT_TRUE(b) << b.error().message;
    bindings[input] = std::move(*b);
  }
  const ir::Node* out = m->graph.outputs[0].second;
  auto ref = interp::evaluate_reference({out}, bind);
  ASSERT_TRUE(ref) << ref.error().message;
  auto run = device.execute(g, {out}, bindings);
  ASSERT_TRUE(run) << run.error().message;
  const ir::HostTensor got = (*run)[0]->to_host();
  ASSERT_EQ(got.shape, ir::Shape(y_dims.begin(), y_dims.end()));
  ASSERT_EQ((*ref)[0].shape, got.shape);
  int wrong = 0;
  for (size_t i = 0; i < want.size() && wrong < 5; ++i) {
    const double bound = tol * (1 + std::abs(want[i]));
    if (std::abs(got.get(i) - want[i]) > bound || std::abs((*ref)[0].get(i) - want[i]) > bound) {
      ++wrong;
      ADD_FAILURE() << "y[" << i << "]: cpu " << got.get(i) << ", reference interpreter "
                    << (*ref)[0].get(i) << ", expected " << want[i];
    }
  }
}

struct Sampler {
  std::string mode;     // nearest, linear, cubic
  std::string padding;  // zeros, border, reflection
  bool align = false;
};

// The reference's _gs_reflect, in double.
double reflect(double x, double lo, double hi) {
  const double span = hi - lo;
  if (x >= lo && x <= hi) return x;
  if (!(span > 0)) return lo;
  const double dx = x < lo ? lo - x : x - hi;
  const double n = std::floor(dx / span), r = dx - n * span;
  const bool even = std::fmod(n, 2.0) == 0;
  return x < lo ? (even ? lo + r : hi - r) : (even ? hi - r : lo + r);
}

// Y of GridSample over x (dims [N, C, spatial...]) at grid ([N, out..., k]), as the definition
// reads it: coordinates unnormalized in the grid's float type (f32 here, as the reference's
// float32 array), then everything in double.
std::vector<double> sample(const Sampler& s, const std::vector<int64_t>& xd,
                           const std::vector<double>& x, const std::vector<int64_t>& gd,
                           const std::vector<float>& grid) {
  const int64_t k = static_cast<int64_t>(xd.size()) - 2, n = xd[0], ch = xd[1];
  int64_t pixels = 1, points = 1;
  for (int64_t a = 0; a < k; ++a) pixels *= xd[2 + a], points *= gd[1 + a];
  std::vector<double> y(n * ch * points);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t p = 0; p < points; ++p) {
      std::vector<double> coord(k);
      for (int64_t a = 0; a < k; ++a) {
        const float g = grid[(b * points + p) * k + (k - 1 - a)];
        const float len = float(xd[2 + a]);
        float v = g + 1.0f;
        v = s.align ? v / 2.0f * (len - 1.0f) : (v * len - 1.0f) / 2.0f;
        double c = v;
        if (s.mode == "nearest") c = k == 3 ? std::round(c) : std::nearbyint(c);
        const double lo = s.align ? 0 : -0.5, hi = s.align ? len - 1 : len - 0.5;
        if (c < lo || c > hi) {
          if (s.padding == "border") c = std::clamp(c, 0.0, double(len - 1));
          if (s.padding == "reflection") c = reflect(c, lo, hi);
        }
        coord[a] = c;
      }
      // The pixel at integer indices (one per axis), padded.
      auto pixel = [&](int64_t c, const std::vector<int64_t>& idx) {
        int64_t flat = 0;
        for (int64_t a = 0; a < k; ++a) {
          const int64_t len = xd[2 + a];
          int64_t i = idx[a];
          if (s.padding == "zeros" && (i < 0 || i >= len)) return 0.0;
          if (s.padding == "border") i = std::clamp<int64_t>(i, 0, len - 1);
          if (s.padding == "reflection")
            i = static_cast<int64_t>(
                reflect(double(i), s.align ? 0 : -0.5, s.align ? len - 1 : len - 0.5));
          flat = flat * len + i;
        }
        return x[(b * ch + c) * pixels + flat];
      };
      for (int64_t c = 0; c < ch; ++c) {
        double out = 0;
        if (s.mode == "nearest") {
          std::vector<int64_t> idx(k);
          for (int64_t a = 0; a < k; ++a) idx[a] = static_cast<int64_t>(coord[a]);  // truncated
          out = pixel(c, idx);
        } else {
          // Interpolated axis by axis, the last innermost.
          std::vector<int64_t> idx(k);
          auto interp = [&](auto&& self, int64_t a) -> double {
            if (a == k) return pixel(c, idx);
            const double x0 = std::floor(coord[a]), t = coord[a] - x0;
            std::vector<double> w;
            int64_t first = 0;
            if (s.mode == "linear") {
              w = {1 - t, t};
            } else {
              constexpr double A = -0.75;
              auto far = [](double d) { return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A; };
              auto near = [](double d) { return ((A + 2) * d - (A + 3)) * d * d + 1; };
              w = {far(t + 1), near(t), near(1 - t), far(2 - t)};
              first = -1;
            }
            double sum = 0;
            for (size_t i = 0; i < w.size(); ++i) {
              idx[a] = static_cast<int64_t>(x0) + first + static_cast<int64_t>(i);
              sum += w[i] * self(self, a + 1);
            }
            return sum;
          };
          out = interp(interp, 0);
        }
        y[(b * ch + c) * points + p] = out;
      }
    }
  return y;
}

// Grid values: most in [-1.2, 1.2], some far out (up to 3 reflections), some exact (ties).
std::vector<float> grid_values(int64_t count, uint32_t seed) {
  std::vector<float> g(count);
  const float exact[] = {-1, -0.5f, 0, 0.5f, 1, 0.25f, -0.25f};
  for (int64_t i = 0; i < count; ++i) {
    seed = seed * 1664525u + 1013904223u;
    const double u = double(seed >> 8) / double(1u << 24);
    const uint32_t kind = (seed >> 4) % 8;
    g[i] = kind < 5   ? float(-1.2 + 2.4 * u)
           : kind < 7 ? float(-7 + 14 * u)
                      : exact[(seed >> 12) % 7];
  }
  return g;
}

struct Case {
  std::vector<int64_t> x_dims, grid_dims;
  Sampler s;
  int opset;
  bool f64 = false;
};

std::string mode_name(const Case& c) {
  if (c.opset >= 20 || c.s.mode == "nearest") return c.s.mode;
  return c.s.mode == "linear" ? "bilinear" : "bicubic";
}

void check_case(runtime::Device& device, const Case& t, uint32_t seed) {
  SCOPED_TRACE(fmt::format("x {} grid {} mode {} padding {} align {} opset {}{}",
                           fmt::join(t.x_dims, "x"), fmt::join(t.grid_dims, "x"), mode_name(t),
                           t.s.padding, t.s.align, t.opset, t.f64 ? " f64" : ""));
  int64_t nx = 1, ng = 1;
  for (int64_t d : t.x_dims) nx *= d;
  for (int64_t d : t.grid_dims) ng *= d;
  std::vector<int64_t> y_dims{t.x_dims[0], t.x_dims[1]};
  y_dims.insert(y_dims.end(), t.grid_dims.begin() + 1, t.grid_dims.end() - 1);
  const int elem = t.f64 ? kDouble : kFloat;
  std::string bytes =
      model({node("GridSample", {"x", "grid"}, {"y"}, "gs",
                  {str_attr("mode", mode_name(t)), str_attr("padding_mode", t.s.padding),
                   int_attr("align_corners", t.s.align)})},
            {value_info("x", elem, t.x_dims), value_info("grid", elem, t.grid_dims)},
            {value_info("y", elem, y_dims)}, {}, t.opset);
  const ir::DType dt = t.f64 ? ir::DType::f64 : ir::DType::f32;
  ir::HostTensor xt = ir::HostTensor::zeros(dt, ir::Shape(t.x_dims.begin(), t.x_dims.end()));
  ir::HostTensor gt = ir::HostTensor::zeros(dt, ir::Shape(t.grid_dims.begin(), t.grid_dims.end()));
  std::vector<double> xs(nx);
  for (int64_t i = 0; i < nx; ++i) {
    xs[i] = double((i * 37 + seed) % 101) / 50.0 - 1.0;
    xt.set(i, xs[i]);
  }
  const std::vector<float> grid = grid_values(ng, seed);
  for (int64_t i = 0; i < ng; ++i) gt.set(i, grid[i]);
  const std::vector<double> want = sample(t.s, t.x_dims, xs, t.grid_dims, grid);

  expect_outputs(device, bytes, {{"x", xt}, {"grid", gt}}, y_dims, want, 1e-4);
}

std::unique_ptr<runtime::Device> cpu_device() {
  runtime::DeviceOptions options;
  options.cpu_rates = runtime::RatesSource::reference;
  options.autotune = false;
  auto opened = runtime::open_device("cpu", std::move(options));
  EXPECT_TRUE(opened) << opened.error().message;
  return opened ? std::move(*opened) : nullptr;
}

TEST(OnnxGridSample, EveryModeAndPaddingMatchesTheDefinition) {
  auto device = cpu_device();
  ASSERT_TRUE(device);
  uint32_t seed = 7;
  for (const char* mode : {"nearest", "linear", "cubic"})
    for (const char* padding : {"zeros", "border", "reflection"})
      for (bool align : {false, true}) {
        const Sampler s{mode, padding, align};
        check_case(*device, Case{{2, 3, 4, 5}, {2, 6, 7, 2}, s, 16}, seed++);
        // An axis of one: align_corners maps every coordinate to it.
        check_case(*device, Case{{1, 2, 1, 6}, {1, 3, 4, 2}, s, 16}, seed++);
      }
}

TEST(OnnxGridSample, OneAndThreeSpatialAxesAndF64) {
  auto device = cpu_device();
  ASSERT_TRUE(device);
  uint32_t seed = 101;
  for (const char* mode : {"nearest", "linear", "cubic"})
    for (const char* padding : {"zeros", "border", "reflection"}) {
      const bool align = seed % 2 == 0;
      const Sampler s{mode, padding, align};
      check_case(*device, Case{{2, 3, 7}, {2, 9, 1}, s, 20}, seed++);
      check_case(*device, Case{{1, 2, 3, 4, 5}, {1, 2, 3, 4, 3}, s, 20}, seed++);
      check_case(*device, Case{{1, 2, 5, 4}, {1, 3, 3, 2}, s, 20, true}, seed++);
    }
}

TEST(OnnxGridSample, ErrorsNameWhatIsWrong) {
  auto error_of = [](const std::string& mode, std::vector<int64_t> x_dims,
                     std::vector<int64_t> grid_dims, int opset, int x_elem = kFloat) {
    std::string bytes =
        model({node("GridSample", {"x", "grid"}, {"y"}, "gs", {str_attr("mode", mode)})},
              {value_info("x", x_elem, x_dims), value_info("grid", kFloat, grid_dims)},
              {unshaped_value_info("y", x_elem)}, {}, opset);
    ir::Graph g;
    auto m = import_model(g, bytes);
    return m ? std::string("imported") : m.error().message;
  };
  EXPECT_NE(error_of("linear", {1, 1, 4, 4}, {1, 2, 2, 2}, 16)
                .find("GridSample-16: unknown mode 'linear'"),
            std::string::npos)
      << error_of("linear", {1, 1, 4, 4}, {1, 2, 2, 2}, 16);
  EXPECT_NE(error_of("bilinear", {1, 1, 4, 4}, {1, 2, 2, 2}, 20)
                .find("GridSample-20: unknown mode 'bilinear'"),
            std::string::npos);
  EXPECT_NE(error_of("bilinear", {1, 1, 4, 4}, {1, 2, 2, 3}, 16)
                .find("grid must be [N, out spatial..., 2]"),
            std::string::npos);
  EXPECT_NE(error_of("bilinear", {1, 1, 4, 4, 4}, {1, 2, 2, 2, 3}, 16).find("X must be 4-D"),
            std::string::npos);
  EXPECT_NE(error_of("nearest", {2, 1, 4, 4}, {1, 2, 2, 2}, 16).find("X has N = 2, grid 1"),
            std::string::npos);
  EXPECT_NE(error_of("bilinear", {1, 1, 4, 4}, {1, 2, 2, 2}, 16, kInt64)
                .find("unsupported: GridSample mode bilinear of i64 data"),
            std::string::npos)
      << error_of("bilinear", {1, 1, 4, 4}, {1, 2, 2, 2}, 16, kInt64);
  EXPECT_EQ(error_of("nearest", {1, 1, 4, 4}, {1, 2, 2, 2}, 16, kInt64), "imported");
}

// The determinant by the Leibniz formula: the sum over permutations of the signed products.
long double leibniz(const std::vector<double>& a, int64_t m) {
  std::vector<int64_t> perm(m);
  std::iota(perm.begin(), perm.end(), 0);
  long double total = 0;
  do {
    int64_t inversions = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = i + 1; j < m; ++j) inversions += perm[i] > perm[j];
    long double prod = inversions % 2 ? -1 : 1;
    for (int64_t i = 0; i < m; ++i) prod *= a[i * m + perm[i]];
    total += prod;
  } while (std::next_permutation(perm.begin(), perm.end()));
  return total;
}

constexpr int kFloat16 = 10;

// Det of the m x m matrices `values` (batch dims `batch`) against the Leibniz sum of each.
void check_det(runtime::Device& device, const std::vector<int64_t>& batch, int64_t m, int elem,
               const std::vector<double>& values, double tol) {
  SCOPED_TRACE(fmt::format("batch [{}] m {} elem {}", fmt::join(batch, ","), m, elem));
  std::vector<int64_t> dims = batch;
  dims.push_back(m);
  dims.push_back(m);
  const ir::DType dt = elem == kDouble    ? ir::DType::f64
                       : elem == kFloat16 ? ir::DType::f16
                                          : ir::DType::f32;
  ir::HostTensor xt = ir::HostTensor::zeros(dt, ir::Shape(dims.begin(), dims.end()));
  for (size_t i = 0; i < values.size(); ++i) xt.set(static_cast<int64_t>(i), values[i]);
  const int64_t count = ir::shape_numel(ir::Shape(batch.begin(), batch.end()));
  std::vector<double> want(count);
  for (int64_t b = 0; b < count; ++b) {
    std::vector<double> a(m * m);
    for (int64_t i = 0; i < m * m; ++i) a[i] = xt.get(b * m * m + i);  // as stored (f16 rounds)
    want[b] = static_cast<double>(leibniz(a, m));
  }
  std::string bytes = model({node("Det", {"x"}, {"y"}, "det")}, {value_info("x", elem, dims)},
                            {value_info("y", elem, batch)}, {}, 11);
  expect_outputs(device, bytes, {{"x", xt}}, batch, want, tol);
}

TEST(OnnxDet, MatchesTheLeibnizSum) {
  auto device = cpu_device();
  ASSERT_TRUE(device);
  uint32_t seed = 3;
  auto random = [&](int64_t count) {
    std::vector<double> v(count);
    for (double& x : v) {
      seed = seed * 1664525u + 1013904223u;
      x = double(seed >> 8) / double(1u << 24) * 4 - 2;
    }
    return v;
  };
  for (int64_t m = 1; m <= 6; ++m) check_det(*device, {}, m, kFloat, random(m * m), 1e-4);
  check_det(*device, {3}, 4, kFloat, random(3 * 16), 1e-4);
  check_det(*device, {2, 2}, 5, kDouble, random(4 * 25), 1e-12);
  // Pivoting: a zero where the first pivot would be; a 4-cycle's permutation matrix (det -1); an
  // anti-diagonal.
  check_det(*device, {}, 2, kFloat, {0, 1, 1, 0}, 1e-6);
  check_det(*device, {}, 4, kFloat, {0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0}, 1e-6);
  check_det(*device, {}, 3, kFloat, {0, 0, 2, 0, 3, 0, 5, 0, 0}, 1e-6);
  // Singular: a repeated row, and a zero column (every pivot candidate 0).
  check_det(*device, {2}, 3, kFloat, {1, 2, 3, 4, 5, 6, 1, 2, 3, 1, 0, 3, 2, 0, 5, 7, 0, 1}, 1e-5);
  check_det(*device, {}, 3, kFloat16, random(9), 4e-3);
}

TEST(OnnxDet, ErrorsNameWhatIsWrong) {
  auto error_of = [](std::vector<int64_t> dims, int elem) {
    std::string bytes = model({node("Det", {"x"}, {"y"}, "det")}, {value_info("x", elem, dims)},
                              {unshaped_value_info("y", elem)}, {}, 11);
    ir::Graph g;
    auto m = import_model(g, bytes);
    return m ? std::string("imported") : m.error().message;
  };
  EXPECT_NE(error_of({2, 3}, kFloat).find("Det: X must be [..., M, M], not [2,3]"),
            std::string::npos)
      << error_of({2, 3}, kFloat);
  EXPECT_NE(error_of({3}, kFloat).find("Det: X must be [..., M, M]"), std::string::npos);
  EXPECT_NE(error_of({2, 2}, kInt64).find("Det: X must be a float tensor, not i64"),
            std::string::npos);
  EXPECT_NE(error_of({65, 65}, kFloat).find("unsupported: Det of 65 x 65 matrices"),
            std::string::npos)
      << error_of({65, 65}, kFloat);
  EXPECT_EQ(error_of({64, 64}, kFloat), "imported");
}

// RoiAlign as ONNX's reference computes it (op_roi_align.py), in double.
std::vector<double> roi_align_ref(const std::vector<double>& x, int64_t n, int64_t ch, int64_t h,
                                  int64_t w, const std::vector<float>& rois,
                                  const std::vector<int64_t>& batch, bool avg, bool half_pixel,
                                  int64_t oh, int64_t ow, int64_t sr, double scale) {
  const int64_t r_count = static_cast<int64_t>(batch.size());
  std::vector<double> y(r_count * ch * oh * ow);
  (void)n;
  for (int64_t r = 0; r < r_count; ++r) {
    const double off = half_pixel ? 0.5 : 0;
    const double sw = rois[r * 4] * scale - off, sh = rois[r * 4 + 1] * scale - off;
    const double ew = rois[r * 4 + 2] * scale - off, eh = rois[r * 4 + 3] * scale - off;
    double rw = ew - sw, rh = eh - sh;
    if (!half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
    const double bh = rh / double(oh), bw = rw / double(ow);
    for (int64_t c = 0; c < ch; ++c)
      for (int64_t ph = 0; ph < oh; ++ph)
        for (int64_t pw = 0; pw < ow; ++pw) {
          double out = 0;
          bool first = true;
          for (int64_t iy = 0; iy < sr; ++iy)
            for (int64_t ix = 0; ix < sr; ++ix) {
              double yy = sh + double(ph) * bh + (double(iy) + 0.5) * bh / double(sr);
              double xx = sw + double(pw) * bw + (double(ix) + 0.5) * bw / double(sr);
              double v[4] = {0, 0, 0, 0}, wt[4] = {0, 0, 0, 0};
              if (!(yy < -1.0 || yy > double(h) || xx < -1.0 || xx > double(w))) {
                yy = std::max(yy, 0.0), xx = std::max(xx, 0.0);
                int64_t yl = static_cast<int64_t>(yy), xl = static_cast<int64_t>(xx), yh, xh;
                if (yl >= h - 1)
                  yh = yl = h - 1, yy = double(yl);
                else
                  yh = yl + 1;
                if (xl >= w - 1)
                  xh = xl = w - 1, xx = double(xl);
                else
                  xh = xl + 1;
                const double ly = yy - double(yl), lx = xx - double(xl), hy = 1 - ly, hx = 1 - lx;
                const double* img = &x[(batch[r] * ch + c) * h * w];
                v[0] = img[yl * w + xl], v[1] = img[yl * w + xh], v[2] = img[yh * w + xl],
                v[3] = img[yh * w + xh];
                wt[0] = hy * hx, wt[1] = hy * lx, wt[2] = ly * hx, wt[3] = ly * lx;
              }
              if (avg) {
                out += wt[0] * v[0] + wt[1] * v[1] + wt[2] * v[2] + wt[3] * v[3];
              } else {
                const double m = std::max({wt[0] * v[0], wt[1] * v[1], wt[2] * v[2], wt[3] * v[3]});
                out = first ? m : std::max(out, m);
                first = false;
              }
            }
          if (avg) out /= double(sr * sr);
          y[((r * ch + c) * oh + ph) * ow + pw] = out;
        }
  }
  return y;
}

TEST(OnnxRoiAlign, MatchesTheReferencesPooling) {
  auto device = cpu_device();
  ASSERT_TRUE(device);
  const int64_t n = 2, ch = 3, h = 6, w = 7;
  std::vector<double> xs(n * ch * h * w);
  for (size_t i = 0; i < xs.size(); ++i)
    xs[i] = double((i * 29) % 53) / 13.0 - 2.0;  // negatives too
  ir::HostTensor xt = ir::HostTensor::zeros(ir::DType::f32, {n, ch, h, w});
  for (size_t i = 0; i < xs.size(); ++i) xt.set(static_cast<int64_t>(i), xs[i]);
  // Inside, past every edge, past -1 and the far edge entirely, degenerate (end before start),
  // and one of the second image.
  const std::vector<float> rois = {0, 0, 6,  5, 1.5f, 2.25f, 9, 7.5f, -3,   -2, 2,    1,
                                   8, 7, 12, 9, 4,    4,     2, 3,    0.5f, 1,  5.5f, 5};
  const std::vector<int64_t> batch = {0, 1, 0, 1, 0, 1};
  const int64_t r = 6;
  ir::HostTensor rt = ir::HostTensor::zeros(ir::DType::f32, {r, 4});
  for (size_t i = 0; i < rois.size(); ++i) rt.set(static_cast<int64_t>(i), rois[i]);
  ir::HostTensor bt = ir::HostTensor::zeros(ir::DType::i64, {r});
  for (int64_t i = 0; i < r; ++i) bt.set(i, double(batch[i]));
  struct Case {
    bool avg, half_pixel;
    int64_t oh, ow, sr;
    float scale;
    int opset;
  };
  for (const Case& t :
       {Case{true, true, 3, 2, 2, 1.0f, 16}, Case{false, true, 2, 3, 3, 0.5f, 16},
        Case{true, false, 2, 2, 1, 1.0f, 16}, Case{false, false, 4, 3, 2, 0.75f, 16},
        Case{true, false, 3, 3, 2, 1.0f, 10}}) {
    SCOPED_TRACE(fmt::format("{} {} {}x{} sampling {} scale {} opset {}", t.avg ? "avg" : "max",
                             t.half_pixel ? "half_pixel" : "output_half_pixel", t.oh, t.ow, t.sr,
                             t.scale, t.opset));
    std::vector<Msg> attrs = {str_attr("mode", t.avg ? "avg" : "max"),
                              int_attr("output_height", t.oh), int_attr("output_width", t.ow),
                              int_attr("sampling_ratio", t.sr),
                              float_attr("spatial_scale", t.scale)};
    if (t.opset >= 16)
      attrs.push_back(str_attr("coordinate_transformation_mode",
                               t.half_pixel ? "half_pixel" : "output_half_pixel"));
    std::string bytes = model({node("RoiAlign", {"x", "rois", "b"}, {"y"}, "roi", attrs)},
                              {value_info("x", kFloat, {n, ch, h, w}),
                               value_info("rois", kFloat, {r, 4}), value_info("b", kInt64, {r})},
                              {value_info("y", kFloat, {r, ch, t.oh, t.ow})}, {}, t.opset);
    const auto want =
        roi_align_ref(xs, n, ch, h, w, rois, batch, t.avg, t.half_pixel, t.oh, t.ow, t.sr, t.scale);
    expect_outputs(*device, bytes, {{"x", xt}, {"rois", rt}, {"b", bt}}, {r, ch, t.oh, t.ow}, want,
                   1e-5);
  }
}

TEST(OnnxRoiAlign, ErrorsNameWhatIsWrong) {
  auto error_of = [](std::vector<Msg> attrs, std::vector<int64_t> rois_dims) {
    std::string bytes =
        model({node("RoiAlign", {"x", "rois", "b"}, {"y"}, "roi", std::move(attrs))},
              {value_info("x", kFloat, {1, 1, 4, 4}), value_info("rois", kFloat, rois_dims),
               value_info("b", kInt64, {rois_dims[0]})},
              {unshaped_value_info("y", kFloat)}, {}, 16);
    ir::Graph g;
    auto m = import_model(g, bytes);
    return m ? std::string("imported") : m.error().message;
  };
  EXPECT_NE(error_of({}, {2, 4}).find("unsupported: RoiAlign with sampling_ratio 0"),
            std::string::npos)
      << error_of({}, {2, 4});
  EXPECT_NE(error_of({int_attr("sampling_ratio", 2)}, {2, 5})
                .find("rois must be [num_rois, 4], not [2,5]"),
            std::string::npos);
  EXPECT_NE(error_of({int_attr("sampling_ratio", 2), str_attr("mode", "sum")}, {2, 4})
                .find("unknown mode 'sum' (avg, max)"),
            std::string::npos);
  EXPECT_EQ(error_of({int_attr("sampling_ratio", 2)}, {2, 4}), "imported");
}

// BitShift of u8 over every value and every shift from 0 to 10, against C's shifts (the bits
// shifted out dropped; 8 and more give 0).
TEST(OnnxBitShift, EveryU8ValueAndShift) {
  auto device = cpu_device();
  ASSERT_TRUE(device);
  constexpr int kUint8 = 2;
  const int64_t count = 256 * 11;
  ir::HostTensor xt = ir::HostTensor::zeros(ir::DType::u8, {count});
  ir::HostTensor yt = ir::HostTensor::zeros(ir::DType::u8, {count});
  std::vector<double> left(count), right(count);
  for (int64_t i = 0; i < count; ++i) {
    const unsigned v = static_cast<unsigned>(i % 256), s = static_cast<unsigned>(i / 256);
    xt.set(i, v);
    yt.set(i, s);
    left[i] = s >= 8 ? 0 : (v << s) & 0xffu;
    right[i] = s >= 8 ? 0 : v >> s;
  }
  for (const char* direction : {"LEFT", "RIGHT"}) {
    SCOPED_TRACE(direction);
    std::string bytes =
        model({node("BitShift", {"x", "y"}, {"z"}, "shift", {str_attr("direction", direction)})},
              {value_info("x", kUint8, {count}), value_info("y", kUint8, {count})},
              {value_info("z", kUint8, {count})}, {}, 11);
    expect_outputs(*device, bytes, {{"x", xt}, {"y", yt}}, {count},
                   std::string(direction) == "LEFT" ? left : right, 0);
  }
  auto error_of = [](int elem, const char* direction) {
    std::string bytes =
        model({node("BitShift", {"x", "y"}, {"z"}, "shift", {str_attr("direction", direction)})},
              {value_info("x", elem, {4}), value_info("y", elem, {4})},
              {unshaped_value_info("z", elem)}, {}, 11);
    ir::Graph g;
    auto m = import_model(g, bytes);
    return m ? std::string("imported") : m.error().message;
  };
  EXPECT_NE(
      error_of(kInt64, "LEFT").find("BitShift takes unsigned integers (kiln has u8), not i64"),
      std::string::npos)
      << error_of(kInt64, "LEFT");
  EXPECT_NE(error_of(kUint8, "UP").find("BitShift: direction must be LEFT or RIGHT, not 'UP'"),
            std::string::npos);
}

// Pad's reflect and wrap along two axes, with pads past the axis' length (mirrored and wrapped
// several times), against numpy's pad rules written here; edge beside them.
TEST(OnnxPad, ReflectAndWrapReachPastTheAxis) {
  auto device = cpu_device();
  ASSERT_TRUE(device);
  const int64_t rows = 3, cols = 4;
  ir::HostTensor xt = ir::HostTensor::zeros(ir::DType::f32, {rows, cols});
  for (int64_t i = 0; i < rows * cols; ++i) xt.set(i, double(i * 3 % 7) - 2.5);
  // numpy's source index for output j of an axis of n padded by `before`.
  auto source = [](const std::string& mode, int64_t j, int64_t before, int64_t n) -> int64_t {
    const int64_t i = j - before;
    if (mode == "edge") return std::clamp<int64_t>(i, 0, n - 1);
    if (mode == "wrap") return ((i % n) + n) % n;
    if (n == 1) return 0;
    const int64_t p = 2 * (n - 1), t = ((i % p) + p) % p;
    return t < n ? t : p - t;
  };
  struct Case {
    const char* mode;
    std::vector<int64_t> pads;  // rows before, cols before, rows after, cols after
  };
  for (const Case& t :
       {Case{"wrap", {2, 9, 5, 1}}, Case{"reflect", {4, 7, 2, 10}}, Case{"wrap", {0, 4, 0, 4}},
        Case{"reflect", {1, 3, 1, 3}}, Case{"edge", {3, 2, 0, 5}}}) {
    SCOPED_TRACE(fmt::format("{} pads {}", t.mode, fmt::join(t.pads, ",")));
    const int64_t out_r = rows + t.pads[0] + t.pads[2], out_c = cols + t.pads[1] + t.pads[3];
    std::vector<double> want(out_r * out_c);
    for (int64_t r = 0; r < out_r; ++r)
      for (int64_t q = 0; q < out_c; ++q)
        want[r * out_c + q] =
            xt.get(source(t.mode, r, t.pads[0], rows) * cols + source(t.mode, q, t.pads[1], cols));
    std::string bytes =
        model({node("Pad", {"x", "p"}, {"y"}, "pad", {str_attr("mode", t.mode)})},
              {value_info("x", kFloat, {rows, cols})}, {value_info("y", kFloat, {out_r, out_c})},
              {i64_tensor("p", {4}, t.pads)}, 19);
    ir::HostTensor pt = ir::HostTensor::zeros(ir::DType::i64, {4});
    for (int64_t i = 0; i < 4; ++i) pt.set(i, double(t.pads[i]));
    expect_outputs(*device, bytes, {{"x", xt}, {"p", pt}}, {out_r, out_c}, want, 0);
  }
  // An axis of one: reflect repeats its element.
  ir::HostTensor one = ir::HostTensor::zeros(ir::DType::f32, {1});
  one.set(0, 7);
  std::string bytes = model({node("Pad", {"x", "p"}, {"y"}, "pad", {str_attr("mode", "reflect")})},
                            {value_info("x", kFloat, {1})}, {value_info("y", kFloat, {4})},
                            {i64_tensor("p", {2}, {2, 1})}, 19);
  ir::HostTensor pt = ir::HostTensor::zeros(ir::DType::i64, {2});
  pt.set(0, 2), pt.set(1, 1);
  expect_outputs(*device, bytes, {{"x", one}, {"p", pt}}, {4}, {7, 7, 7, 7}, 0);
}

}  // namespace
}  // namespace kiln::onnx
