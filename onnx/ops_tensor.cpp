// ONNX's shape and data-movement ops (Reshape ... Gather), and the shape computations folded at
// import (Shape, Size, Constant, ConstantOfShape, Range).
#include <cmath>
#include <fmt/format.h>
#include <numeric>

#include "onnx/import_context.h"

namespace kiln::onnx {

namespace {

using ir::Op;

// An axis in [-rank, rank) made non-negative, or an error naming it.
Expected<int64_t> axis_of(Context& c, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return c.fail(fmt::format("axis {} is out of range for rank {}", axis, rank));
  return axis < 0 ? axis + rank : axis;
}

ir::HostTensor i64_tensor(const std::vector<int64_t>& v, ir::Shape shape) {
  ir::HostTensor t = ir::HostTensor::zeros(ir::DType::i64, std::move(shape));
  std::memcpy(t.bytes.data(), v.data(), v.size() * 8);
  return t;
}

Outs reshape(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  std::vector<int64_t> shape;
  if (c.opset() < 5) {
    auto s = c.attr_ints("shape");
    if (!s) return c.fail("attribute 'shape' is missing");
    shape = *s;
  } else {
    KILN_ONNX_TRY(shape, c.ints(1, "shape"));
  }
  bool allow_zero = c.attr_i("allowzero", 0) != 0;
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 0 && !allow_zero) {
      if (i >= x->shape.size()) return c.fail("a 0 in 'shape' past the input's rank");
      shape[i] = x->shape[i];
    }
  return one(c, c.b().reshape(x, shape));
}

Outs transpose(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  std::vector<int64_t> perm(x->shape.size());
  std::iota(perm.rbegin(), perm.rend(), 0);
  if (auto p = c.attr_ints("perm")) perm = *p;
  return one(c, c.b().permute(x, perm));
}

Outs flatten(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  const int64_t rank = x->shape.size();
  int64_t axis = c.attr_i("axis", 1);
  if (axis < -rank || axis > rank) return c.fail(fmt::format("axis {} is out of range", axis));
  if (axis < 0) axis += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : inner) *= x->shape[d];
  return one(c, c.b().reshape(x, {outer, inner}));
}

Expected<std::optional<std::vector<int64_t>>> axes_operand(Context& c, int since_opset, size_t input) {
  if (c.opset() < since_opset) return c.attr_ints("axes");
  if (!c.has(input)) return std::optional<std::vector<int64_t>>{};
  KILN_ONNX_TRY(std::vector<int64_t> a, c.ints(input, "axes"));
  return std::optional<std::vector<int64_t>>{a};
}

Outs squeeze(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  KILN_ONNX_TRY(auto axes, axes_operand(c, 13, 1));
  const int64_t rank = x->shape.size();
  std::vector<bool> drop(rank, false);
  if (!axes) {
    for (int64_t d = 0; d < rank; ++d) drop[d] = x->shape[d] == 1;
  } else {
    for (int64_t a : *axes) {
      KILN_ONNX_TRY(int64_t d, axis_of(c, a, rank));
      if (x->shape[d] != 1) return c.fail(fmt::format("cannot squeeze axis {} of size {}", a, x->shape[d]));
      drop[d] = true;
    }
  }
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d)
    if (!drop[d]) shape.push_back(x->shape[d]);
  return one(c, c.b().reshape(x, shape));
}

Outs unsqueeze(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  KILN_ONNX_TRY(auto axes, axes_operand(c, 13, 1));
  if (!axes) return c.fail("axes are missing");
  const int64_t rank = x->shape.size() + axes->size();
  std::vector<bool> added(rank, false);
  for (int64_t a : *axes) {
    KILN_ONNX_TRY(int64_t d, axis_of(c, a, rank));
    if (added[d]) return c.fail(fmt::format("axis {} is given twice", a));
    added[d] = true;
  }
  std::vector<int64_t> shape;
  size_t k = 0;
  for (int64_t d = 0; d < rank; ++d) shape.push_back(added[d] ? 1 : x->shape[k++]);
  return one(c, c.b().reshape(x, shape));
}

// Expand broadcasts both ways: the result has the numpy broadcast of the input's shape and `shape`.
Outs expand(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  KILN_ONNX_TRY(std::vector<int64_t> shape, c.ints(1, "shape"));
  const size_t rank = std::max(shape.size(), x->shape.size());
  ir::Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t a = i < rank - x->shape.size() ? 1 : x->shape[i - (rank - x->shape.size())];
    int64_t b = i < rank - shape.size() ? 1 : shape[i - (rank - shape.size())];
    if (a != b && a != 1 && b != 1)
      return c.fail(fmt::format("cannot broadcast {} to {}", ir::shape_str(x->shape), ir::shape_str(shape)));
    out[i] = a == 1 ? b : a;
  }
  return one(c, c.b().expand(x, out));
}

Outs slice(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  const int64_t rank = x->shape.size();
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset() < 10) {
    auto s = c.attr_ints("starts"), e = c.attr_ints("ends");
    if (!s || !e) return c.fail("attributes 'starts' and 'ends' are needed");
    starts = *s, ends = *e;
    if (auto a = c.attr_ints("axes")) axes = *a;
  } else {
    KILN_ONNX_TRY(starts, c.ints(1, "starts"));
    KILN_ONNX_TRY(ends, c.ints(2, "ends"));
    if (c.has(3)) { KILN_ONNX_TRY(axes, c.ints(3, "axes")); }
    if (c.has(4)) { KILN_ONNX_TRY(steps, c.ints(4, "steps")); }
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(i);
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return c.fail("starts, ends, axes and steps differ in length");
  for (size_t i = 0; i < starts.size(); ++i) {
    KILN_ONNX_TRY(int64_t axis, axis_of(c, axes[i], rank));
    const int64_t n = x->shape[axis], step = steps[i];
    if (step == 0) return c.fail("a step is 0");
    // ONNX clamps: negative indices count from the end, then [0, n] for positive steps and
    // [-1, n-1] for negative ones (-1: through index 0, which Python slicing spells as None).
    auto clamp = [&](int64_t v) {
      if (v < 0) v = v < -n ? (step > 0 ? 0 : -1) : v + n;
      return step > 0 ? std::min(v, n) : std::min(v, n - 1);
    };
    int64_t start = clamp(starts[i]), end = clamp(ends[i]);
    std::optional<int64_t> end_arg = end;
    if (step < 0 && end < 0) end_arg = std::nullopt;
    if (step < 0 && start < 0) {  // an empty slice
      start = 0;
      end_arg = 0;
    }
    KILN_ONNX_TRY(x, c.check(c.b().slice(x, axis, start, end_arg, step)));
  }
  return std::vector<Value>{c.out(x)};
}

// Pad edge (repeat the border), reflect (mirror without the border) and wrap (periodic) along
// one axis. Edge expands the first and last element; reflect and wrap read x through a `gather`
// by an index computed from an arange: output j reads (j - before) mod n for wrap, and for
// reflect t = (j - before) mod 2(n - 1), then t or 2(n - 1) - t (mirrored as often as the pads
// need, as numpy's pad does; an axis of one repeats its element).
Expected<const ir::Node*> pad_axis(Context& c, const ir::Node* x, int64_t d, int64_t before,
                                   int64_t after, const std::string& mode) {
  ir::Builder& B = c.b();
  const int64_t n = x->shape[d];
  if (before == 0 && after == 0) return x;
  if (n == 0)
    return c.fail(fmt::format("{} pads of {} and {} on an empty axis", mode, before, after));
  if (mode == "edge") {
    std::vector<const ir::Node*> parts;
    auto side = [&](int64_t count, bool front) -> Expected<const ir::Node*> {
      const int64_t at = front ? 0 : n - 1;
      KILN_ONNX_TRY(const ir::Node* s, c.check(B.slice(x, d, at, at + 1, 1)));
      ir::Shape shape = x->shape;
      shape[d] = count;
      return c.check(B.expand(s, shape));
    };
    if (before > 0) {
      KILN_ONNX_TRY(const ir::Node* p, side(before, true));
      parts.push_back(p);
    }
    parts.push_back(x);
    if (after > 0) {
      KILN_ONNX_TRY(const ir::Node* p, side(after, false));
      parts.push_back(p);
    }
    return c.check(B.concat(parts, d));
  }
  Expr e{c};
  const int64_t period = mode == "wrap" ? n : std::max<int64_t>(2 * (n - 1), 1);
  KILN_ONNX_TRY(const ir::Node* j, c.check(B.arange(-before, n + after, 1, ir::DType::i64)));
  // t = j mod period, in [0, period): kiln's integer division floors.
  KILN_ONNX_TRY(const ir::Node* q, e.bin(Op::Div, j, double(period)));
  KILN_ONNX_TRY(q, e.bin(Op::Mul, q, double(period)));
  KILN_ONNX_TRY(const ir::Node* t, e.bin(Op::Sub, j, q));
  if (mode == "reflect") {
    KILN_ONNX_TRY(const ir::Node* back, e.k(double(period), ir::DType::i64));
    KILN_ONNX_TRY(back, e.bin(Op::Sub, back, t));
    KILN_ONNX_TRY(const ir::Node* past, e.bin(Op::Ge, t, double(n)));
    KILN_ONNX_TRY(t, c.check(B.where(past, back, t)));
  }
  return c.check(B.gather(x, t, d));
}

Outs pad(Context& c) {
  std::string mode = c.attr_s("mode").value_or("constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect" && mode != "wrap")
    return c.fail(fmt::format("Pad: unknown mode '{}' (constant, edge, reflect, wrap)", mode));
  if (mode == "wrap" && c.opset() < 19)
    return c.fail(fmt::format("Pad mode 'wrap' is opset 19's, not {}'s", c.opset()));
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  const int64_t rank = x->shape.size();
  std::vector<int64_t> pads, axes;
  double value = 0;
  if (c.opset() < 11) {
    auto p = c.attr_ints(c.opset() < 2 ? "paddings" : "pads");
    if (!p) return c.fail("attribute 'pads' is missing");
    pads = *p;
    value = c.attr_f("value", 0.0f);
  } else {
    KILN_ONNX_TRY(pads, c.ints(1, "pads"));
    if (c.has(2) && c.in(2).data && c.in(2).data->numel() == 0) {
    } else if (c.has(2)) {
      KILN_ONNX_TRY(value, c.scalar_of(2, "constant_value"));
    }
    if (c.has(3)) { KILN_ONNX_TRY(axes, c.ints(3, "axes")); }
  }
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  if (pads.size() != 2 * axes.size()) return c.fail("'pads' must hold two entries per axis");
  std::vector<int64_t> before(rank, 0), after(rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    KILN_ONNX_TRY(int64_t d, axis_of(c, axes[i], rank));
    before[d] = pads[i];
    after[d] = pads[i + axes.size()];
  }
  // Negative pads crop.
  for (int64_t d = 0; d < rank; ++d) {
    if (before[d] >= 0 && after[d] >= 0) continue;
    int64_t start = before[d] < 0 ? -before[d] : 0;
    int64_t end = x->shape[d] + std::min<int64_t>(after[d], 0);
    KILN_ONNX_TRY(x, c.check(c.b().slice(x, d, start, std::max(start, end), 1)));
    before[d] = std::max<int64_t>(before[d], 0);
    after[d] = std::max<int64_t>(after[d], 0);
  }
  if (mode != "constant") {
    for (int64_t d = 0; d < rank; ++d) {
      KILN_ONNX_TRY(x, pad_axis(c, x, d, before[d], after[d], mode));
    }
    return std::vector<Value>{c.out(x)};
  }
  return one(c, c.b().pad(x, before, after, value));
}

Outs concat(Context& c) {
  const AttributeProto* axis = c.attr("axis");
  if (!axis) return c.fail("attribute 'axis' is missing");
  std::vector<const ir::Node*> xs;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    KILN_ONNX_TRY(const ir::Node* x, c.x(i));
    xs.push_back(x);
  }
  if (xs.empty()) return c.fail("needs at least one input");
  KILN_ONNX_TRY(int64_t a, axis_of(c, axis->i, xs[0]->shape.size()));
  // Empty inputs add nothing (and kiln's concat wants every input's length).
  std::vector<const ir::Node*> kept;
  for (const ir::Node* x : xs)
    if (x->shape.size() != xs[0]->shape.size() || x->shape[a] > 0) kept.push_back(x);
  if (kept.empty()) kept.push_back(xs[0]);
  if (kept.size() == 1) return std::vector<Value>{c.out(kept[0])};
  return one(c, c.b().concat(kept, a));
}

Outs split(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  KILN_ONNX_TRY(int64_t axis, axis_of(c, c.attr_i("axis", 0), x->shape.size()));
  const int64_t n = x->shape[axis];
  const int64_t outputs = c.num_outputs();
  std::vector<int64_t> sizes;
  if (c.opset() < 13) {
    if (auto s = c.attr_ints("split")) sizes = *s;
    if (c.opset() < 2 && c.has(1)) { KILN_ONNX_TRY(sizes, c.ints(1, "split")); }
  } else if (c.has(1)) {
    KILN_ONNX_TRY(sizes, c.ints(1, "split"));
  }
  int64_t parts = c.opset() >= 18 ? c.attr_i("num_outputs", outputs) : outputs;
  if (sizes.empty()) {
    if (parts <= 0) return c.fail("no outputs");
    int64_t chunk = (n + parts - 1) / parts;
    for (int64_t k = 0, left = n; k < parts; ++k, left -= chunk) sizes.push_back(std::min(chunk, left));
  }
  if (int64_t(sizes.size()) != outputs) return c.fail("'split' and the outputs differ in number");
  for (int64_t s : sizes)
    if (s < 0) return c.fail(fmt::format("'split' holds {}, a negative length", s));
  if (std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) != n)
    return c.fail(fmt::format("'split' does not add up to the axis' length {}", n));
  std::vector<Value> out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    KILN_ONNX_TRY(const ir::Node* part, c.check(c.b().slice(x, axis, start, start + s, 1)));
    out.push_back(c.out(part));
    start += s;
  }
  return out;
}

// Tile: each axis as an expand of a new leading axis of length `repeats`, merged into it.
Outs tile(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  KILN_ONNX_TRY(std::vector<int64_t> repeats, c.ints(1, "repeats"));
  const size_t rank = x->shape.size();
  if (repeats.size() != rank) return c.fail("'repeats' must hold one entry per axis");
  for (size_t d = 0; d < rank; ++d) {
    if (repeats[d] == 1) continue;
    if (repeats[d] < 0) return c.fail("negative repeats");
    ir::Shape s = x->shape;
    s.insert(s.begin() + d, 1);
    KILN_ONNX_TRY(const ir::Node* r, c.check(c.b().reshape(x, s)));
    s[d] = repeats[d];
    KILN_ONNX_TRY(const ir::Node* e, c.check(c.b().expand(r, s)));
    ir::Shape merged = x->shape;
    merged[d] *= repeats[d];
    KILN_ONNX_TRY(x, c.check(c.b().reshape(e, merged)));
  }
  return std::vector<Value>{c.out(x)};
}

Outs shape(Context& c) {
  if (!c.has(0)) return c.fail("input 0 is missing");
  const ir::Shape& s = c.in(0).shape;
  const int64_t rank = s.size();
  auto clamp = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  int64_t start = clamp(c.attr_i("start", 0)), end = clamp(c.attr_i("end", rank));
  std::vector<int64_t> dims(s.begin() + start, s.begin() + std::max(start, end));
  return std::vector<Value>{Context::constant(i64_tensor(dims, {int64_t(dims.size())}))};
}

Outs size(Context& c) {
  if (!c.has(0)) return c.fail("input 0 is missing");
  return std::vector<Value>{Context::constant(i64_tensor({ir::shape_numel(c.in(0).shape)}, {}))};
}

Outs constant(Context& c) {
  if (const AttributeProto* a = c.attr("value")) {
    if (!a->t) return c.fail("attribute 'value' holds no tensor");
    auto t = to_host_tensor(*a->t);
    if (!t) return c.unsupported(t.error().message);
    return std::vector<Value>{Context::constant(std::move(*t))};
  }
  if (const AttributeProto* a = c.attr("value_float")) {
    ir::HostTensor t = ir::HostTensor::zeros(ir::DType::f32, {});
    t.set(0, a->f);
    return std::vector<Value>{Context::constant(std::move(t))};
  }
  if (const AttributeProto* a = c.attr("value_floats")) {
    ir::HostTensor t = ir::HostTensor::zeros(ir::DType::f32, {int64_t(a->floats.size())});
    std::memcpy(t.bytes.data(), a->floats.data(), a->floats.size() * 4);
    return std::vector<Value>{Context::constant(std::move(t))};
  }
  if (const AttributeProto* a = c.attr("value_int"))
    return std::vector<Value>{Context::constant(i64_tensor({a->i}, {}))};
  if (const AttributeProto* a = c.attr("value_ints"))
    return std::vector<Value>{Context::constant(i64_tensor(a->ints, {int64_t(a->ints.size())}))};
  return c.unsupported("a Constant without value, value_float(s) or value_int(s)");
}

Outs constant_of_shape(Context& c) {
  KILN_ONNX_TRY(std::vector<int64_t> shape, c.ints(0, "shape"));
  ir::HostTensor fill = ir::HostTensor::zeros(ir::DType::f32, {1});
  if (const AttributeProto* a = c.attr("value")) {
    if (!a->t) return c.fail("attribute 'value' holds no tensor");
    auto t = to_host_tensor(*a->t);
    if (!t) return c.unsupported(t.error().message);
    if (t->numel() != 1) return c.fail("attribute 'value' must hold one value");
    fill = std::move(*t);
  }
  for (int64_t d : shape)
    if (d < 0) return c.fail("a negative dimension");
  ir::Shape s(shape.begin(), shape.end());
  Value v;
  v.dtype = fill.dtype;
  v.shape = s;
  // Small fills are constants (folded); the product is checked without overflowing, and a large
  // shape goes to the builder, whose size checks name it.
  int64_t numel = 1;
  for (int64_t d : shape) numel = d > 4096 || numel * d > 4096 ? 4097 : numel * d;
  if (numel <= 4096) {
    ir::HostTensor t = ir::HostTensor::zeros(fill.dtype, s);
    const int size = ir::dtype_size(fill.dtype);
    for (int64_t i = 0; i < t.numel(); ++i)
      std::memcpy(t.bytes.data() + i * size, fill.bytes.data(), size);
    return std::vector<Value>{Context::constant(std::move(t))};
  }
  if (fill.dtype == ir::DType::i64)  // exact past 2^53
    return one(c, c.b().full_int(s, fill.get_int(0), fill.dtype));
  return one(c, c.b().full(s, fill.get(0), fill.dtype));
}

// Range: its length depends on the values, which must be known; the values themselves are
// computed on the device from the (possibly runtime) start and delta: start + i * delta.
Outs range(Context& c) {
  KILN_ONNX_TRY(double start, c.scalar_of(0, "start"));
  KILN_ONNX_TRY(double limit, c.scalar_of(1, "limit"));
  KILN_ONNX_TRY(double delta, c.scalar_of(2, "delta"));
  if (delta == 0) return c.fail("delta is 0");
  const int64_t n = std::max<int64_t>(0, int64_t(std::ceil((limit - start) / delta)));
  KILN_ONNX_TRY(const ir::Node* s, c.x(0));
  KILN_ONNX_TRY(const ir::Node* d, c.x(2));
  KILN_ONNX_TRY(const ir::Node* i, c.check(c.b().arange(0, n, 1, s->dtype)));
  KILN_ONNX_TRY(const ir::Node* id, c.check(c.b().binary(Op::Mul, i, d)));
  return one(c, c.b().binary(Op::Add, id, s));
}

// Gather: a single constant index is a slice (a view, no index load); other indices, constant
// or runtime, are kiln's gather. Constant indices out of range are the model's error; runtime ones
// are normalized and clamped (ir/builder.h), where ONNX leaves the result undefined.
Outs gather(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  const int64_t rank = x->shape.size();
  KILN_ONNX_TRY(int64_t axis, axis_of(c, c.attr_i("axis", 0), rank));
  if (!c.has(1)) return c.fail("input 1 (indices) is missing");
  if (!ir::is_int(c.in(1).dtype)) return c.fail("indices must be integers");
  const int64_t n = x->shape[axis];
  if (c.in(1).folded) {
    KILN_ONNX_TRY(std::vector<int64_t> idx, c.ints(1, "indices"));
    for (int64_t i : idx)
      if (i < -n || i >= n)
        return c.fail(fmt::format("index {} is out of range for length {}", i, n));
    if (idx.size() == 1) {
      int64_t i = idx[0] < 0 ? idx[0] + n : idx[0];
      ir::Shape out(x->shape.begin(), x->shape.begin() + axis);
      const ir::Shape& ishape = c.in(1).shape;
      out.insert(out.end(), ishape.begin(), ishape.end());
      out.insert(out.end(), x->shape.begin() + axis + 1, x->shape.end());
      KILN_ONNX_TRY(const ir::Node* p, c.check(c.b().slice(x, axis, i, i + 1, 1)));
      return one(c, c.b().reshape(p, out));
    }
  }
  KILN_ONNX_TRY(const ir::Node* idx, c.x(1));
  return one(c, c.b().gather(x, idx, axis));
}

// Dropout: the identity in inference, and in training with ratio 0 (random masks are not
// supported); the mask output is then all true.
Outs dropout(Context& c) {
  c.attr("seed");
  bool training = false;
  double ratio = 0.5;
  if (c.opset() < 7) training = c.attr_i("is_test", 0) == 0;
  if (c.opset() < 12) {
    ratio = c.attr_f("ratio", 0.5f);
  } else if (c.has(1)) {
    KILN_ONNX_TRY(ratio, c.scalar_of(1, "ratio"));
  }
  if (c.has(2)) {
    KILN_ONNX_TRY(double t, c.scalar_of(2, "training_mode"));
    training = t != 0;
  }
  if (training && ratio != 0) return c.unsupported("Dropout in training mode (random masks)");
  if (!c.has(0)) return c.fail("input 0 is missing");
  std::vector<Value> outs{c.in(0)};
  if (c.wants_output(1)) {
    if (c.opset() < 10) return c.unsupported("Dropout's mask before opset 10 (of the input's dtype)");
    KILN_ONNX_TRY(const ir::Node* mask, c.check(c.b().full(c.in(0).shape, 1, ir::DType::boolean)));
    outs.push_back(c.out(mask));
  }
  return outs;
}

// Trilu: kiln's trilu primitive (keeps col - row >= k (upper) or <= k (lower) of the last two
// axes, zeros elsewhere).
Outs trilu(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  bool upper = c.attr_i("upper", 1) != 0;
  int64_t k = 0;
  if (c.has(1)) {
    KILN_ONNX_TRY(std::vector<int64_t> kv, c.ints(1, "k"));
    if (kv.size() != 1) return c.fail("k must hold one value");
    k = kv[0];
  }
  if (x->shape.size() < 2) return c.fail("needs rank >= 2");
  return one(c, c.b().trilu(x, k, upper));
}

}  // namespace

void add_tensor_ops(OpTable& t) {
  t["Reshape"] = reshape;
  t["Transpose"] = transpose;
  t["Flatten"] = flatten;
  t["Squeeze"] = squeeze;
  t["Unsqueeze"] = unsqueeze;
  t["Expand"] = expand;
  t["Slice"] = slice;
  t["Pad"] = pad;
  t["Concat"] = concat;
  t["Split"] = split;
  t["Tile"] = tile;
  t["Shape"] = shape;
  t["Size"] = size;
  t["Constant"] = constant;
  t["ConstantOfShape"] = constant_of_shape;
  t["Range"] = range;
  t["Gather"] = gather;
  t["Dropout"] = dropout;
  t["Trilu"] = trilu;
}

}  // namespace kiln::onnx
