// ONNX's sliding-window ops as kiln `unfold` windows (DESIGN's stencils): Conv as a matmul over
// the windows, MaxPool and AveragePool as reductions over them.
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <numeric>

#include "onnx/import_context.h"

namespace kiln::onnx {

namespace {

using ir::Op;

// The geometry of a window op over the spatial axes (2...) of an input of shape `in`.
struct Windows {
  std::vector<int64_t> kernel, strides, dilations, begin, end;  // end: explicit pads
  std::vector<int64_t> extra;  // ceil_mode padding past `end`, which no window average counts
  std::vector<int64_t> out;
};

Expected<Windows> windows(Context& c, const ir::Shape& in, std::vector<int64_t> kernel, bool ceil_mode) {
  const size_t s = in.size() - 2;
  Windows w;
  w.kernel = kernel;
  if (w.kernel.size() != s) return c.fail("kernel_shape does not match the spatial rank");
  w.strides = c.attr_ints("strides").value_or(std::vector<int64_t>(s, 1));
  w.dilations = c.attr_ints("dilations").value_or(std::vector<int64_t>(s, 1));
  std::vector<int64_t> pads = c.attr_ints("pads").value_or(std::vector<int64_t>(2 * s, 0));
  std::string auto_pad = c.attr_s("auto_pad").value_or("NOTSET");
  if (w.strides.size() != s || w.dilations.size() != s || pads.size() != 2 * s)
    return c.fail("strides, dilations or pads do not match the spatial rank");
  w.begin.assign(pads.begin(), pads.begin() + s);
  w.end.assign(pads.begin() + s, pads.end());
  w.extra.assign(s, 0);
  for (size_t i = 0; i < s; ++i) {
    const int64_t n = in[2 + i], k = (w.kernel[i] - 1) * w.dilations[i] + 1, st = w.strides[i];
    if (st <= 0 || w.dilations[i] <= 0 || w.kernel[i] <= 0) return c.fail("non-positive window geometry");
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t o = (n + st - 1) / st;
      const int64_t total = std::max<int64_t>((o - 1) * st + k - n, 0);
      w.begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.end[i] = total - w.begin[i];
    } else if (auto_pad == "VALID") {
      w.begin[i] = w.end[i] = 0;
    } else if (auto_pad != "NOTSET") {
      return c.unsupported(fmt::format("auto_pad '{}'", auto_pad));
    }
    const int64_t span = n + w.begin[i] + w.end[i] - k;
    if (span < 0) return c.fail("the window is larger than the padded input");
    int64_t o = span / st + 1;
    if (ceil_mode) {
      o = (span + st - 1) / st + 1;
      if ((o - 1) * st >= n + w.begin[i]) --o;  // the last window must start inside the input
      w.extra[i] = std::max<int64_t>((o - 1) * st + k - (n + w.begin[i] + w.end[i]), 0);
    }
    w.out.push_back(o);
  }
  return w;
}

// x [N, C, spatial...] padded with `value` (explicit pads) and `extra_value` (ceil_mode pads),
// unfolded into [N, C, out..., kernel...].
Expected<const ir::Node*> unfold(Context& c, const ir::Node* x, const Windows& w, double value,
                                 double extra_value) {
  ir::Builder& B = c.b();
  const size_t s = w.kernel.size();
  std::vector<int64_t> before(s + 2, 0), after(s + 2, 0), extra(s + 2, 0);
  bool pad = false, more = false;
  for (size_t i = 0; i < s; ++i) {
    before[2 + i] = w.begin[i];
    after[2 + i] = w.end[i];
    extra[2 + i] = w.extra[i];
    pad |= w.begin[i] || w.end[i];
    more |= w.extra[i] > 0;
  }
  if (pad) { KILN_ONNX_TRY(x, c.check(B.pad(x, before, after, value))); }
  if (more) { KILN_ONNX_TRY(x, c.check(B.pad(x, std::vector<int64_t>(s + 2, 0), extra, extra_value))); }
  for (size_t i = 0; i < s; ++i) {
    const int64_t k = (w.kernel[i] - 1) * w.dilations[i] + 1;
    KILN_ONNX_TRY(x, c.check(B.unfold(x, 2 + i, k, w.strides[i])));
    if (w.dilations[i] > 1) {
      KILN_ONNX_TRY(x, c.check(B.slice(x, x->shape.size() - 1, 0, std::nullopt, w.dilations[i])));
    }
  }
  return x;
}

std::vector<int64_t> last_axes(size_t rank, size_t count) {
  std::vector<int64_t> axes(count);
  std::iota(axes.begin(), axes.end(), rank - count);
  return axes;
}

// MaxPool's Indices: for each window of `u` ([N, C, out..., k...], the padded input unfolded), the
// flat index into x of the first element in window order (row-major over k...) that is not
// padding and equals the window's maximum `y`, as ONNX's reference picks it. storage_order 1
// counts the spatial axes column-major. A window whose maximum is NaN has no equal element: its
// index is the window's first position.
Expected<const ir::Node*> max_indices(Context& c, const ir::Node* x, const ir::Node* u,
                                      const ir::Node* y, const Windows& w, int64_t storage_order) {
  ir::Builder& B = c.b();
  const size_t s = w.kernel.size(), rank = s + 2;
  const int64_t ks = std::accumulate(w.kernel.begin(), w.kernel.end(), int64_t{1}, std::multiplies<>());
  Expr e{c};  // its scalars take the operand's dtype: i64 below
  auto iota = [&](int64_t n, size_t axis) -> Expected<const ir::Node*> {  // arange(n) along `axis`
    KILN_ONNX_TRY(const ir::Node* r, c.check(B.arange(0, n, 1, ir::DType::i64)));
    ir::Shape shape(rank, 1);
    shape[axis] = n;
    return c.check(B.reshape(r, shape));
  };
  // Which window positions are inside x: ones over x's spatial shape, unfolded with false padding.
  ir::Shape ones_shape(2, 1);
  ones_shape.insert(ones_shape.end(), x->shape.begin() + 2, x->shape.end());
  KILN_ONNX_TRY(const ir::Node* ones, c.check(B.full(ones_shape, 1, ir::DType::boolean)));
  KILN_ONNX_TRY(const ir::Node* valid, unfold(c, ones, w, 0, 0));
  ir::Shape flat(u->shape.begin(), u->shape.begin() + rank);
  flat.push_back(ks);
  ir::Shape valid_flat(valid->shape.begin(), valid->shape.begin() + rank);
  valid_flat.push_back(ks);
  ir::Shape y_col = y->shape;
  y_col.push_back(1);
  KILN_ONNX_TRY(const ir::Node* uf, c.check(B.reshape(u, flat)));
  KILN_ONNX_TRY(const ir::Node* vf, c.check(B.reshape(valid, valid_flat)));
  KILN_ONNX_TRY(const ir::Node* yc, c.check(B.reshape(y, y_col)));
  KILN_ONNX_TRY(const ir::Node* hit, c.check(B.binary(Op::Eq, uf, yc)));
  KILN_ONNX_TRY(hit, c.check(B.binary(Op::And, hit, vf)));
  KILN_ONNX_TRY(const ir::Node* p, c.check(B.arg_reduce(Op::ArgMax, hit, int64_t(rank), false)));
  KILN_ONNX_TRY(p, c.check(B.cast(p, ir::DType::i64)));  // window position, [N, C, out...]
  // Spatial coordinates in x, then the flat index (n * C + c) * prod(spatial) + spatial offset.
  const ir::Shape& in = x->shape;
  std::vector<int64_t> stride(s, 1);  // of each spatial axis in the flat index
  for (size_t i = 0; i < s; ++i)
    for (size_t j = 0; j < s; ++j)
      if (storage_order == 0 ? j > i : j < i) stride[i] *= in[2 + j];
  int64_t after = ks, spatial = 1;
  for (size_t i = 0; i < s; ++i) spatial *= in[2 + i];
  KILN_ONNX_TRY(const ir::Node* n_iota, iota(in[0], 0));
  KILN_ONNX_TRY(const ir::Node* c_iota, iota(in[1], 1));
  KILN_ONNX_TRY(const ir::Node* index, e.bin(Op::Mul, n_iota, double(in[1])));
  KILN_ONNX_TRY(index, c.check(B.binary(Op::Add, index, c_iota)));
  KILN_ONNX_TRY(index, e.bin(Op::Mul, index, double(spatial)));
  for (size_t i = 0; i < s; ++i) {
    after /= w.kernel[i];
    // k_i = (p / after) mod kernel[i], with p >= 0
    KILN_ONNX_TRY(const ir::Node* q, e.bin(Op::Div, p, double(after)));
    KILN_ONNX_TRY(const ir::Node* qq, e.bin(Op::Div, q, double(w.kernel[i])));
    KILN_ONNX_TRY(qq, e.bin(Op::Mul, qq, double(w.kernel[i])));
    KILN_ONNX_TRY(const ir::Node* k, c.check(B.binary(Op::Sub, q, qq)));
    // h_i = o_i * stride - pad_begin + k_i * dilation
    KILN_ONNX_TRY(const ir::Node* o, iota(w.out[i], 2 + i));
    KILN_ONNX_TRY(o, e.bin(Op::Mul, o, double(w.strides[i])));
    KILN_ONNX_TRY(o, e.bin(Op::Add, o, double(-w.begin[i])));
    KILN_ONNX_TRY(k, e.bin(Op::Mul, k, double(w.dilations[i])));
    KILN_ONNX_TRY(const ir::Node* h, c.check(B.binary(Op::Add, o, k)));
    KILN_ONNX_TRY(h, e.bin(Op::Mul, h, double(stride[i])));
    KILN_ONNX_TRY(index, c.check(B.binary(Op::Add, index, h)));
  }
  return index;
}

OpImporter pool(bool max) {
  return [max](Context& c) -> Outs {
    KILN_ONNX_TRY(const ir::Node* x, c.x(0));
    if (x->shape.size() < 3) return c.fail("needs [N, C, spatial...]");
    auto kernel = c.attr_ints("kernel_shape");
    if (!kernel) return c.fail("attribute 'kernel_shape' is missing");
    bool ceil_mode = c.attr_i("ceil_mode", 0) != 0;
    int64_t storage_order = 0;
    if (max) {
      storage_order = c.attr_i("storage_order", 0);
      if (storage_order != 0 && storage_order != 1) return c.fail("storage_order must be 0 or 1");
    } else if (c.attr("dilations")) {
      if (c.opset() < 19) return c.fail("AveragePool has dilations since opset 19");
    }
    bool include_pad = !max && c.attr_i("count_include_pad", 0) != 0;
    KILN_ONNX_TRY(Windows w, windows(c, x->shape, *kernel, ceil_mode));
    ir::Builder& B = c.b();
    const size_t s = kernel->size();
    if (max) {
      // Padding never wins: -inf, or the integer dtype's least value.
      double lowest = -std::numeric_limits<double>::infinity();
      switch (x->dtype) {
        case ir::DType::u8: lowest = 0; break;
        case ir::DType::i8: lowest = -128; break;
        case ir::DType::i32: lowest = std::numeric_limits<int32_t>::min(); break;
        case ir::DType::i64: lowest = double(std::numeric_limits<int64_t>::min()); break;
        case ir::DType::boolean: return c.unsupported("MaxPool of bool");
        case ir::DType::f32:
        case ir::DType::f64:
        case ir::DType::f16:
        case ir::DType::bf16: break;
      }
      KILN_ONNX_TRY(const ir::Node* u, unfold(c, x, w, lowest, lowest));
      KILN_ONNX_TRY(const ir::Node* y, c.check(B.reduce(Op::ReduceMax, u, last_axes(u->shape.size(), s), false)));
      if (!c.wants_output(1)) return std::vector<Value>{c.out(y)};
      KILN_ONNX_TRY(const ir::Node* indices, max_indices(c, x, u, y, w, storage_order));
      return std::vector<Value>{c.out(y), c.out(indices)};
    }
    KILN_ONNX_TRY(const ir::Node* u, unfold(c, x, w, 0, 0));
    KILN_ONNX_TRY(const ir::Node* sum, c.check(B.reduce(Op::Sum, u, last_axes(u->shape.size(), s), false)));
    // How many elements each window averages: a ones tensor of the input's spatial shape, padded
    // like it (explicit pads count with count_include_pad; ceil_mode pads never do).
    ir::Shape ones_shape(2, 1);
    ones_shape.insert(ones_shape.end(), x->shape.begin() + 2, x->shape.end());
    KILN_ONNX_TRY(const ir::Node* ones, c.check(B.full(ones_shape, 1, x->dtype)));
    KILN_ONNX_TRY(const ir::Node* cu, unfold(c, ones, w, include_pad ? 1 : 0, 0));
    KILN_ONNX_TRY(const ir::Node* count, c.check(B.reduce(Op::Sum, cu, last_axes(cu->shape.size(), s), false)));
    KILN_ONNX_TRY(const ir::Node* y, c.check(B.binary(Op::Div, sum, count)));
    return std::vector<Value>{c.out(y)};
  };
}

// Conv over windows `w` of x: windows [N, G, C/G, out..., k...] against weights
// [G, M/G, C/G * K] as one batched matmul; the bias (if any) added per output channel.
Expected<const ir::Node*> conv_windows(Context& c, const ir::Node* x, const ir::Node* wt,
                                       const ir::Node* bias, const Windows& w, int64_t groups) {
  const size_t s = x->shape.size() - 2;
  const std::vector<int64_t>& kernel = w.kernel;
  const int64_t n = x->shape[0], channels = x->shape[1], m = wt->shape[0];
  ir::Builder& B = c.b();
  KILN_ONNX_TRY(const ir::Node* u, unfold(c, x, w, 0, 0));  // [N, C, out..., k...]
  const int64_t cg = channels / groups, mg = m / groups;
  const int64_t outs = std::accumulate(w.out.begin(), w.out.end(), int64_t{1}, std::multiplies<>());
  const int64_t ks = std::accumulate(kernel.begin(), kernel.end(), int64_t{1}, std::multiplies<>());
  // [N, C, out..., k...] -> [N, G, out..., C/G, k...] -> [N, G, O, C/G * K]
  ir::Shape split{n, groups, cg};
  split.insert(split.end(), u->shape.begin() + 2, u->shape.end());
  KILN_ONNX_TRY(u, c.check(B.reshape(u, split)));
  std::vector<int64_t> perm{0, 1};
  for (size_t i = 0; i < s; ++i) perm.push_back(3 + i);
  perm.push_back(2);
  for (size_t i = 0; i < s; ++i) perm.push_back(3 + s + i);
  KILN_ONNX_TRY(u, c.check(B.permute(u, perm)));
  KILN_ONNX_TRY(u, c.check(B.reshape(u, {n, groups, outs, cg * ks})));
  KILN_ONNX_TRY(const ir::Node* wm, c.check(B.reshape(wt, {groups, mg, cg * ks})));
  KILN_ONNX_TRY(wm, c.check(B.permute(wm, {0, 2, 1})));
  KILN_ONNX_TRY(const ir::Node* y, c.check(B.matmul(u, wm)));  // [N, G, O, M/G]
  KILN_ONNX_TRY(y, c.check(B.permute(y, {0, 1, 3, 2})));
  ir::Shape out{n, m};
  out.insert(out.end(), w.out.begin(), w.out.end());
  KILN_ONNX_TRY(y, c.check(B.reshape(y, out)));
  if (bias) {
    ir::Shape bs(s + 1, 1);
    bs[0] = m;
    KILN_ONNX_TRY(bias, c.check(B.reshape(bias, bs)));
    KILN_ONNX_TRY(y, c.check(B.binary(Op::Add, y, bias)));
  }
  return y;
}

Outs conv(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  KILN_ONNX_TRY(const ir::Node* wt, c.x(1));
  const ir::Node* bias = nullptr;
  if (c.has(2)) { KILN_ONNX_TRY(bias, c.x(2)); }
  KILN_ONNX_TRY(const ir::Node* y, conv_of(c, x, wt, bias));
  return std::vector<Value>{c.out(y)};
}

// ConvTranspose as a Conv: the input with stride - 1 zeros between its elements, padded by
// k_eff - 1 - pad on each side (output_padding more at the end; negative amounts crop), against
// the weights [C, M/G, k...] regrouped to [M, C/G, k...] and flipped, with stride 1.
Outs conv_transpose(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  KILN_ONNX_TRY(const ir::Node* wt, c.x(1));
  const int64_t rank = x->shape.size();
  if (rank < 3 || int64_t(wt->shape.size()) != rank) return c.fail("needs X [N, C, spatial...] and W [C, M/group, k...]");
  const size_t s = rank - 2;
  std::vector<int64_t> kernel(wt->shape.begin() + 2, wt->shape.end());
  if (auto k = c.attr_ints("kernel_shape"); k && *k != kernel) return c.fail("kernel_shape differs from W's");
  const int64_t groups = c.attr_i("group", 1);
  const int64_t channels = x->shape[1], mg = wt->shape[1];
  if (groups <= 0 || channels % groups || wt->shape[0] != channels) return c.fail("channels and group do not match");
  auto strides = c.attr_ints("strides").value_or(std::vector<int64_t>(s, 1));
  auto dilations = c.attr_ints("dilations").value_or(std::vector<int64_t>(s, 1));
  auto pads = c.attr_ints("pads").value_or(std::vector<int64_t>(2 * s, 0));
  auto out_pad = c.attr_ints("output_padding").value_or(std::vector<int64_t>(s, 0));
  auto output_shape = c.attr_ints("output_shape");
  std::string auto_pad = c.attr_s("auto_pad").value_or("NOTSET");
  if (strides.size() != s || dilations.size() != s || pads.size() != 2 * s || out_pad.size() != s ||
      (output_shape && output_shape->size() != s))
    return c.fail("strides, dilations, pads, output_padding or output_shape do not match the spatial rank");
  if (auto_pad != "NOTSET" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER" && auto_pad != "VALID")
    return c.unsupported(fmt::format("auto_pad '{}'", auto_pad));
  ir::Builder& B = c.b();
  Windows w;
  w.kernel = kernel;
  w.strides.assign(s, 1);
  w.dilations = dilations;
  w.extra.assign(s, 0);
  for (size_t i = 0; i < s; ++i) {
    const int64_t d = 2 + i, n = x->shape[d], st = strides[i];
    const int64_t k = (kernel[i] - 1) * dilations[i] + 1;
    int64_t pb = pads[i], pe = pads[s + i];
    if (output_shape || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t target = output_shape ? (*output_shape)[i] : n * st;
      const int64_t total = st * (n - 1) + out_pad[i] + k - target;
      if (auto_pad == "SAME_UPPER" || (output_shape && auto_pad != "SAME_LOWER")) {
        pb = total / 2;
        pe = total - total / 2;
      } else {
        pb = total - total / 2;
        pe = total / 2;
      }
    } else if (auto_pad == "VALID") {
      pb = pe = 0;
    }
    if (st > 1) {  // [.., n] -> [.., n, st] (zeros after each) -> [.., n * st] -> first (n-1)*st+1
      ir::Shape sh = x->shape;
      sh.insert(sh.begin() + d + 1, 1);
      KILN_ONNX_TRY(x, c.check(B.reshape(x, sh)));
      std::vector<int64_t> before(sh.size(), 0), after(sh.size(), 0);
      after[d + 1] = st - 1;
      KILN_ONNX_TRY(x, c.check(B.pad(x, before, after, 0)));
      ir::Shape merged = x->shape;
      merged.erase(merged.begin() + d + 1);
      merged[d] = n * st;
      KILN_ONNX_TRY(x, c.check(B.reshape(x, merged)));
      KILN_ONNX_TRY(x, c.check(B.slice(x, d, 0, (n - 1) * st + 1, 1)));
    }
    int64_t left = k - 1 - pb, right = k - 1 - pe + out_pad[i];
    if (left < 0 || right < 0) {
      const int64_t len = x->shape[d];
      const int64_t start = std::max<int64_t>(-left, 0), end = len - std::max<int64_t>(-right, 0);
      if (end <= start) return c.fail("the padding crops the whole input");
      KILN_ONNX_TRY(x, c.check(B.slice(x, d, start, end, 1)));
      left = std::max<int64_t>(left, 0);
      right = std::max<int64_t>(right, 0);
    }
    w.begin.push_back(left);
    w.end.push_back(right);
    w.out.push_back(x->shape[d] + left + right - k + 1);
  }
  // [C, M/G, k...] -> [G, C/G, M/G, k...] -> [G, M/G, C/G, k...] -> [M, C/G, k...], flipped.
  const int64_t cg = channels / groups;
  ir::Shape gs{groups, cg, mg};
  gs.insert(gs.end(), kernel.begin(), kernel.end());
  KILN_ONNX_TRY(const ir::Node* wr, c.check(B.reshape(wt, gs)));
  std::vector<int64_t> perm{0, 2, 1};
  for (size_t i = 0; i < s; ++i) perm.push_back(3 + i);
  KILN_ONNX_TRY(wr, c.check(B.permute(wr, perm)));
  ir::Shape ws{groups * mg, cg};
  ws.insert(ws.end(), kernel.begin(), kernel.end());
  KILN_ONNX_TRY(wr, c.check(B.reshape(wr, ws)));
  std::vector<int64_t> spatial;
  for (size_t i = 0; i < s; ++i) spatial.push_back(2 + i);
  KILN_ONNX_TRY(wr, c.check(B.flip(wr, spatial)));
  const ir::Node* bias = nullptr;
  if (c.has(2)) { KILN_ONNX_TRY(bias, c.x(2)); }
  KILN_ONNX_TRY(const ir::Node* y, conv_windows(c, x, wr, bias, w, groups));
  return std::vector<Value>{c.out(y)};
}

}  // namespace

Expected<const ir::Node*> conv_of(Context& c, const ir::Node* x, const ir::Node* wt, const ir::Node* bias) {
  const int64_t rank = x->shape.size();
  if (rank < 3 || int64_t(wt->shape.size()) != rank) return c.fail("needs X [N, C, spatial...] and W [M, C/group, k...]");
  std::vector<int64_t> kernel(wt->shape.begin() + 2, wt->shape.end());
  if (auto k = c.attr_ints("kernel_shape"); k && *k != kernel) return c.fail("kernel_shape differs from W's");
  const int64_t groups = c.attr_i("group", 1);
  const int64_t channels = x->shape[1], m = wt->shape[0];
  if (groups <= 0 || channels % groups || m % groups || wt->shape[1] != channels / groups)
    return c.fail("channels and group do not match");
  KILN_ONNX_TRY(Windows w, windows(c, x->shape, kernel, false));
  return conv_windows(c, x, wt, bias, w, groups);
}

void add_window_ops(OpTable& t) {
  t["Conv"] = conv;
  t["ConvTranspose"] = conv_transpose;
  t["MaxPool"] = pool(true);
  t["AveragePool"] = pool(false);
}

}  // namespace kiln::onnx
