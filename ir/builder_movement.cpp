// Checked construction of movement (view) nodes and matmul, in the canonical attribute form of
// ir/builder.h's node attribute contract.
#include <algorithm>
#include <map>

#include "ir/builder.h"
#include "ir/builder_support.h"

namespace kiln::ir {

namespace {

using detail::ints_str;
using detail::op_error;

int64_t floor_mod(int64_t a, int64_t n) {
  return ((a % n) + n) % n;
}

// Python's slice.indices(n) followed by the length of the resulting range.
struct SliceRange {
  int64_t start, len;
};
SliceRange python_slice(int64_t n, std::optional<int64_t> start, std::optional<int64_t> end,
                        int64_t step) {
  int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? n : n - 1;
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v < 0 ? *v + n : *v;
    return std::clamp(x, lower, upper);
  };
  int64_t s = clamp(start, step > 0 ? lower : upper);
  int64_t e = clamp(end, step > 0 ? upper : lower);
  int64_t len = 0;
  // Written so that no step overflows: e - s and s - e are at most n + 1, and -step of the least
  // int64 is taken unsigned.
  if (step > 0 && e > s) len = (e - s - 1) / step + 1;
  if (step < 0 && s > e)
    len =
        static_cast<int64_t>(static_cast<uint64_t>(s - e - 1) / (0 - static_cast<uint64_t>(step))) +
        1;
  return {s, len};
}

}  // namespace

NodeResult Builder::reshape(const Node* x, std::vector<int64_t> shape) {
  std::optional<size_t> inferred;
  Shape given = shape;  // -1 taken as 1
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (inferred) return op_error("reshape", "more than one -1 in shape {}", ints_str(shape));
      inferred = i;
      given[i] = 1;
    } else if (shape[i] < 0) {
      return op_error("reshape", "invalid dimension {} in shape {}", shape[i], ints_str(shape));
    }
  }
  if (auto problem = shape_size_problem(given))
    return op_error("reshape", "shape {} {}", shape_brief(shape), *problem);
  const int64_t known = shape_numel(given);
  int64_t n = x->numel();
  bool ok = inferred ? known != 0 && n % known == 0 : known == n;
  if (!ok)
    return op_error("reshape", "cannot reshape {} ({} elements) into {}", shape_str(x->shape), n,
                    ints_str(shape));
  if (inferred) shape[*inferred] = n / known;
  return g_.make(Op::Reshape, x->dtype, shape, {x}, Attrs{{AttrKey::shape, shape}});
}

NodeResult Builder::permute(const Node* x, std::vector<int64_t> dims) {
  auto rank = static_cast<int64_t>(x->shape.size());
  auto not_permutation = [&] {
    return op_error("permute", "dims {} are not a permutation of the axes of {}", ints_str(dims),
                    shape_str(x->shape));
  };
  if (dims.size() != x->shape.size()) return not_permutation();
  std::vector<int64_t> norm;
  std::vector<bool> seen(rank, false);
  for (int64_t d : dims) {
    auto a = normalize_axis(d, rank);
    if (!a || seen[*a]) return not_permutation();
    seen[*a] = true;
    norm.push_back(*a);
  }
  Shape out;
  for (int64_t d : norm) out.push_back(x->shape[d]);
  return g_.make(Op::Permute, x->dtype, std::move(out), {x}, Attrs{{AttrKey::dims, norm}});
}

NodeResult Builder::expand(const Node* x, Shape shape) {
  bool ok = shape.size() >= x->shape.size();
  size_t lead = ok ? shape.size() - x->shape.size() : 0;
  for (size_t i = 0; ok && i < shape.size(); ++i) {
    if (shape[i] < 0)
      ok = false;
    else if (i >= lead)
      ok = x->shape[i - lead] == shape[i] || x->shape[i - lead] == 1;
  }
  if (!ok)
    return op_error("expand", "cannot expand {} to {}", shape_str(x->shape), shape_str(shape));
  KILN_IR_OK(detail::check_numel("expand", shape));
  return g_.make(Op::Expand, x->dtype, shape, {x}, Attrs{{AttrKey::shape, shape}});
}

NodeResult Builder::slice(const Node* x, int64_t axis, std::optional<int64_t> start,
                          std::optional<int64_t> end, int64_t step) {
  if (step == 0) return op_error("slice", "step must not be 0");
  KILN_IR_TRY(int64_t a, detail::normalize_one_axis("slice", axis, x->shape));
  int64_t n = x->shape[a];
  auto [s, len] = python_slice(n, start, end, step);
  // Canonical form: one spelling per selected element set, so equal slices intern together.
  int64_t e = 0;
  if (len == 0) {
    s = 0, step = 1;
  } else if (len == 1) {
    e = s + 1, step = 1;
  } else if (step > 0) {
    e = std::min(s + len * step, n);
  } else {
    e = s + len * step;
    if (e < 0) e = -n - 1;  // "before index 0": a plain -1 would mean n - 1 to Python
  }
  Shape out = x->shape;
  out[a] = len;
  return g_.make(
      Op::Slice, x->dtype, std::move(out), {x},
      Attrs{{AttrKey::axis, a}, {AttrKey::start, s}, {AttrKey::end, e}, {AttrKey::step, step}});
}

NodeResult Builder::pad(const Node* x, std::vector<int64_t> before, std::vector<int64_t> after,
                        double value) {
  if (before.size() != x->shape.size() || after.size() != x->shape.size())
    return op_error("pad", "before {} and after {} need one entry per axis of {}", ints_str(before),
                    ints_str(after), shape_str(x->shape));
  for (const auto* v : {&before, &after})
    for (int64_t p : *v)
      if (p < 0)
        return op_error("pad", "padding must be non-negative, got before {} and after {}",
                        ints_str(before), ints_str(after));
  if (auto why = detail::unrepresentable(value, x->dtype))
    return op_error("pad", "value {} {}", value, *why);
  if (!is_float(x->dtype)) value += 0.0;
  Shape out = x->shape;
  for (size_t i = 0; i < out.size(); ++i)
    if (__builtin_add_overflow(out[i], before[i], &out[i]) ||
        __builtin_add_overflow(out[i], after[i], &out[i]))
      return op_error("pad", "padding {} and {} of {} is too large", ints_str(before),
                      ints_str(after), shape_str(x->shape));
  KILN_IR_OK(detail::check_numel("pad", out));
  return g_.make(
      Op::Pad, x->dtype, std::move(out), {x},
      Attrs{{AttrKey::before, before}, {AttrKey::after, after}, {AttrKey::value, value}});
}

NodeResult Builder::concat(const std::vector<const Node*>& xs, int64_t axis) {
  if (xs.empty()) return op_error("concat", "needs at least one operand");
  const Node* first = xs.front();
  KILN_IR_TRY(int64_t a, detail::normalize_one_axis("concat", axis, first->shape));
  Shape out = first->shape;
  out[a] = 0;
  for (const Node* x : xs) {
    if (x->dtype != first->dtype)
      return op_error("concat", "dtypes {} and {} do not match", dtype_name(first->dtype),
                      dtype_name(x->dtype));
    bool ok = x->shape.size() == first->shape.size();
    for (size_t i = 0; ok && i < out.size(); ++i)
      ok = static_cast<int64_t>(i) == a || x->shape[i] == first->shape[i];
    if (!ok)
      return op_error("concat", "shapes {} and {} differ outside axis {}", shape_str(first->shape),
                      shape_str(x->shape), a);
    if (__builtin_add_overflow(out[a], x->shape[a], &out[a]))
      return op_error("concat", "the result is too large along axis {}", a);
  }
  KILN_IR_OK(detail::check_numel("concat", out));
  return g_.make(Op::Concat, first->dtype, std::move(out), xs, Attrs{{AttrKey::axis, a}});
}

NodeResult Builder::flip(const Node* x, std::vector<int64_t> axes) {
  KILN_IR_TRY(std::vector<int64_t> ax, detail::normalize_axes("flip", axes, x->shape));
  if (ax.empty()) return x;
  return g_.make(Op::Flip, x->dtype, x->shape, {x}, Attrs{{AttrKey::axes, std::move(ax)}});
}

NodeResult Builder::roll(const Node* x, std::vector<int64_t> shifts, std::vector<int64_t> axes) {
  if (shifts.size() != axes.size())
    return op_error("roll", "shifts {} and axes {} differ in length", ints_str(shifts),
                    ints_str(axes));
  // Shifts along a repeated axis add up (torch.roll); a whole turn is no shift at all.
  std::map<int64_t, int64_t> total;
  for (size_t i = 0; i < axes.size(); ++i) {
    KILN_IR_TRY(int64_t a, detail::normalize_one_axis("roll", axes[i], x->shape));
    int64_t n = x->shape[a];
    if (n > 0) total[a] = floor_mod(total[a] + floor_mod(shifts[i], n), n);
  }
  std::vector<int64_t> out_shifts, out_axes;
  for (auto [a, s] : total)
    if (s != 0) out_axes.push_back(a), out_shifts.push_back(s);
  if (out_axes.empty()) return x;
  return g_.make(Op::Roll, x->dtype, x->shape, {x},
                 Attrs{{AttrKey::shifts, out_shifts}, {AttrKey::axes, out_axes}});
}

NodeResult Builder::unfold(const Node* x, int64_t dim, int64_t size, int64_t step) {
  KILN_IR_TRY(int64_t d, detail::normalize_one_axis("unfold", dim, x->shape));
  if (step < 1) return op_error("unfold", "step must be at least 1, got {}", step);
  if (size < 0 || size > x->shape[d])
    return op_error("unfold", "size {} does not fit axis {} of shape {}", size, d,
                    shape_str(x->shape));
  Shape out = x->shape;
  out[d] = (x->shape[d] - size) / step + 1;
  out.push_back(size);
  KILN_IR_OK(detail::check_numel("unfold", out));
  return g_.make(Op::Unfold, x->dtype, std::move(out), {x},
                 Attrs{{AttrKey::dim, d}, {AttrKey::size, size}, {AttrKey::step, step}});
}

NodeResult Builder::trilu(const Node* x, int64_t k, bool upper) {
  if (x->shape.size() < 2)
    return op_error("trilu", "needs a tensor of rank 2 or more, got {}", shape_str(x->shape));
  return g_.make(Op::Trilu, x->dtype, x->shape, {x}, Attrs{{AttrKey::k, k}, {AttrKey::upper, upper}});
}

NodeResult Builder::resize(const Node* x, int64_t axis, ResizeAxis a, double extrapolation) {
  KILN_IR_TRY(const int64_t d, detail::normalize_one_axis("resize", axis, x->shape));
  if (a.in != x->shape[static_cast<size_t>(d)])
    return op_error("resize", "axis {} of {} has {} positions, not {}", axis, shape_str(x->shape),
                    x->shape[static_cast<size_t>(d)], a.in);
  if (a.mode != ResizeMode::Nearest && !is_float(x->dtype))
    return op_error("resize", "mode {} needs a floating dtype, got {}", resize_mode_name(a.mode),
                    dtype_name(x->dtype));
  KILN_IR_OK(check_resize_axis(a));
  if (auto why = detail::unrepresentable(extrapolation, x->dtype))
    return op_error("resize", "extrapolation value {} {}", extrapolation, *why);
  Shape out = x->shape;
  out[static_cast<size_t>(d)] = a.out;
  KILN_IR_OK(detail::check_numel("resize", out));
  return g_.make(Op::Resize, x->dtype, std::move(out), {x}, resize_attrs(d, a, extrapolation));
}

NodeResult Builder::matmul(const Node* a, const Node* b) {
  if (a->shape.empty() || b->shape.empty())
    return op_error("matmul", "operands must be at least 1-D, got {} and {}", shape_str(a->shape),
                    shape_str(b->shape));
  if (a->dtype != b->dtype)
    return op_error("matmul", "dtypes {} and {} do not match", dtype_name(a->dtype),
                    dtype_name(b->dtype));
  if (a->dtype == DType::boolean) return op_error("matmul", "needs a numeric dtype, got bool");
  // numpy: a 1-D left operand is a row [1,K], a 1-D right operand a column [K,1].
  Shape as = a->shape.size() == 1 ? Shape{1, a->shape[0]} : a->shape;
  Shape bs = b->shape.size() == 1 ? Shape{b->shape[0], 1} : b->shape;
  int64_t ka = as[as.size() - 1], kb = bs[bs.size() - 2];
  if (ka != kb)
    return op_error("matmul", "inner dimensions of {} and {} differ ({} vs {})",
                    shape_str(a->shape), shape_str(b->shape), ka, kb);
  auto batch = broadcast_shapes(Shape(as.begin(), as.end() - 2), Shape(bs.begin(), bs.end() - 2));
  if (!batch)
    return op_error("matmul", "batch dimensions of {} and {} do not broadcast", shape_str(a->shape),
                    shape_str(b->shape));
  const Node* a2 = a;
  const Node* b2 = b;
  if (a->shape.size() == 1) {
    KILN_IR_TRY(a2, reshape(a, as));
  }
  if (b->shape.size() == 1) {
    KILN_IR_TRY(b2, reshape(b, bs));
  }
  Shape out = *batch;
  out.push_back(as[as.size() - 2]);
  out.push_back(bs[bs.size() - 1]);
  KILN_IR_OK(detail::check_numel("matmul", out));
  const Node* m = g_.make(Op::Matmul, a->dtype, out, {a2, b2}, {});
  if (a->shape.size() > 1 && b->shape.size() > 1) return m;
  // Drop the axes the promotion added: M for a 1-D a, N for a 1-D b.
  Shape final_shape = *batch;
  if (a->shape.size() > 1) final_shape.push_back(out[out.size() - 2]);
  if (b->shape.size() > 1) final_shape.push_back(out[out.size() - 1]);
  return reshape(m, final_shape);
}

}  // namespace kiln::ir
