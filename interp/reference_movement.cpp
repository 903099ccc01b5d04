// Reference semantics of the movement ops: each output element is read from one input index
// (for gather and gather_elements, an index that an index tensor holds).
#include <algorithm>

#include "interp/reference_ops.h"
#include "ir/resize_taps.h"

namespace kiln::interp::reference {

namespace {

using ir::AttrKey;
using ir::Op;
using Index = std::vector<int64_t>;

int64_t rank_of(const Value& v) {
  return static_cast<int64_t>(v.shape.size());
}

// Builds the output by mapping each output index to an input index; `source` returns false
// when the element reads no input (pad's border), which then takes `fill`.
template <class SourceFn>
Value gather(const ir::Node& n, const Value& x, double fill, SourceFn source) {
  const std::vector<int64_t> strides = ir::contiguous_strides(x.shape);
  Value out = make_value(n.dtype, n.shape);
  // An exact i64 stays exact (the fill is pad's value, exact as its double).
  const bool exact = x.exact() && make_exact(out);
  Index in(x.shape.size());
  int64_t flat = 0;
  for_each_index(n.shape, [&](const Index& index) {
    if (!source(index, in)) {
      if (exact)
        set_int(out, flat, to_int64(fill));
      else
        out.data[flat] = fill;
      ++flat;
      return;
    }
    for (size_t a = 0; a < in.size(); ++a)
      KILN_CHECK(in[a] >= 0 && in[a] < x.shape[a])
          << ir::op_enum_name(n.op) << " reads index " << in[a] << " of axis " << a << " of "
          << ir::shape_str(x.shape);
    copy_element(out, flat++, x, offset_of(in, strides), exact);
  });
  return out;
}

Value reshape(const ir::Node& n, const Value& x) {
  KILN_CHECK(n.numel() == x.numel()) << ir::shape_str(x.shape) << " -> " << ir::shape_str(n.shape);
  return Value{n.dtype, n.shape, x.data, x.ints};
}

Value permute(const ir::Node& n, const Value& x) {
  const Index& dims = n.attrs.ints(AttrKey::dims);
  KILN_CHECK(static_cast<int64_t>(dims.size()) == rank_of(x)) << "permute rank";
  return gather(n, x, 0, [&](const Index& o, Index& in) {
    for (size_t i = 0; i < dims.size(); ++i) in[dims[i]] = o[i];
    return true;
  });
}

Value expand(const ir::Node& n, const Value& x) {
  const std::vector<int64_t> strides = broadcast_strides(x.shape, n.shape);
  Value out = make_value(n.dtype, n.shape);
  const bool exact = x.exact() && make_exact(out);
  int64_t flat = 0;
  for_each_index(
      n.shape, [&](const Index& o) { copy_element(out, flat++, x, offset_of(o, strides), exact); });
  return out;
}

Value slice(const ir::Node& n, const Value& x) {
  const int64_t axis = n.attrs.i(AttrKey::axis);
  const int64_t start = n.attrs.i(AttrKey::start), step = n.attrs.i(AttrKey::step);
  KILN_CHECK(step != 0) << "slice step 0";
  return gather(n, x, 0, [&](const Index& o, Index& in) {
    in = o;
    in[axis] = start + o[axis] * step;
    return true;
  });
}

Value pad(const ir::Node& n, const Value& x) {
  const Index& before = n.attrs.ints(AttrKey::before);
  KILN_CHECK(static_cast<int64_t>(before.size()) == rank_of(x)) << "pad rank";
  const double fill = normalize(n.attrs.f(AttrKey::value), n.dtype);
  return gather(n, x, fill, [&](const Index& o, Index& in) {
    for (size_t a = 0; a < o.size(); ++a) {
      in[a] = o[a] - before[a];
      if (in[a] < 0 || in[a] >= x.shape[a]) return false;
    }
    return true;
  });
}

Value flip(const ir::Node& n, const Value& x) {
  const Index& axes = n.attrs.ints(AttrKey::axes);
  return gather(n, x, 0, [&](const Index& o, Index& in) {
    in = o;
    for (int64_t a : axes) in[a] = x.shape[a] - 1 - o[a];
    return true;
  });
}

Value roll(const ir::Node& n, const Value& x) {
  const Index& shifts = n.attrs.ints(AttrKey::shifts);
  const Index& axes = n.attrs.ints(AttrKey::axes);
  KILN_CHECK(shifts.size() == axes.size()) << "roll shifts/axes";
  return gather(n, x, 0, [&](const Index& o, Index& in) {
    in = o;
    // Repeated axes accumulate their shifts, like torch.roll.
    for (size_t i = 0; i < axes.size(); ++i) {
      const int64_t len = x.shape[axes[i]];
      in[axes[i]] = ((in[axes[i]] - shifts[i]) % len + len) % len;
    }
    return true;
  });
}

Value unfold(const ir::Node& n, const Value& x) {
  const int64_t dim = n.attrs.i(AttrKey::dim), step = n.attrs.i(AttrKey::step);
  KILN_CHECK(static_cast<int64_t>(n.shape.size()) == rank_of(x) + 1) << "unfold rank";
  return gather(n, x, 0, [&](const Index& o, Index& in) {
    for (size_t a = 0; a < in.size(); ++a) in[a] = o[a];
    in[dim] = o[dim] * step + o.back();  // window o[dim], element o.back() of it
    return true;
  });
}

Value trilu(const ir::Node& n, const Value& x) {
  const int64_t k = n.attrs.i(AttrKey::k);
  const bool upper = n.attrs.b(AttrKey::upper);
  const size_t r = x.shape.size();
  return gather(n, x, 0, [&](const Index& o, Index& in) {
    in = o;
    const int64_t d = o[r - 1] - o[r - 2];
    return upper ? d >= k : d <= k;
  });
}

// The taps of ir/resize_taps.h in double precision: out = sum over taps of weight * x at the
// tap's position along the axis (nearest: the one tap's value), or the extrapolation value where a
// crop leaves the input.
Value resize(const ir::Node& n, const Value& x) {
  const auto axis = static_cast<size_t>(n.attrs.i(AttrKey::axis));
  Expected<ir::ResizeTaps> taps = ir::resize_taps(ir::resize_axis_of(n));
  KILN_CHECK(taps) << taps.error().message;
  const std::vector<int64_t> strides = ir::contiguous_strides(x.shape);
  const double extrapolation = n.attrs.f(AttrKey::value);
  Value out = make_value(n.dtype, n.shape);
  int64_t flat = 0;
  Index in;
  for_each_index(n.shape, [&](const Index& o) {
    const int64_t p = o[axis];
    double v = 0;
    if (!taps->inside.empty() && !taps->inside[p]) {
      v = extrapolation;
    } else {
      in = o;
      for (int64_t t = 0; t < taps->taps; ++t) {
        in[axis] = taps->index[t * taps->out + p];
        const double e = x.data[offset_of(in, strides)];
        v += taps->weight.empty() ? e : taps->weight[t * taps->out + p] * e;
      }
    }
    out.data[flat++] = v;
  });
  return out;
}

Value concat(const ir::Node& n, const Args& args) {
  const auto axis = static_cast<size_t>(n.attrs.i(AttrKey::axis));
  Value out = make_value(n.dtype, n.shape);
  const bool exact =
      std::ranges::all_of(args, [](const Value* x) { return x->exact(); }) && make_exact(out);
  const std::vector<int64_t> out_strides = ir::contiguous_strides(n.shape);
  int64_t offset = 0;  // where the current input starts along `axis`
  for (const Value* x : args) {
    KILN_CHECK(x->shape.size() == n.shape.size()) << "concat rank";
    for (size_t a = 0; a < n.shape.size(); ++a)
      KILN_CHECK(a == axis || x->shape[a] == n.shape[a])
          << "concat of " << ir::shape_str(x->shape) << " into " << ir::shape_str(n.shape);
    int64_t flat = 0;
    for_each_index(x->shape, [&](const Index& index) {
      Index o = index;
      o[axis] += offset;
      copy_element(out, offset_of(o, out_strides), *x, flat++, exact);
    });
    offset += x->shape[axis];
  }
  KILN_CHECK(offset == n.shape[axis]) << "concat lengths sum to " << offset;
  return out;
}

// Element `at` of the index tensor `idx`, normalized (i < 0 reads i + n) and clamped into [0, n):
// the builder's contract for gather and gather_elements.
int64_t take_index(const Value& idx, int64_t at, int64_t n) {
  if (idx.exact()) {
    const int64_t j = idx.ints[static_cast<size_t>(at)];
    if (j >= n) return n - 1;
    if (j < -n) return 0;
    return j < 0 ? j + n : j;
  }
  const double i = idx.data[static_cast<size_t>(at)];
  // Out of range either way before converting: a double at or past 2^63 has no int64_t.
  if (i >= static_cast<double>(n)) return n - 1;
  if (i < -static_cast<double>(n)) return 0;
  auto j = static_cast<int64_t>(i);
  if (j < 0) j += n;
  return std::clamp<int64_t>(j, 0, n - 1);
}

// out[a.., j.., b..] = x[a.., idx[j..], b..]
Value gather_op(const ir::Node& n, const Value& x, const Value& idx) {
  const auto axis = static_cast<size_t>(n.attrs.i(AttrKey::axis));
  const std::vector<int64_t> idx_strides = ir::contiguous_strides(idx.shape);
  Index at(idx.shape.size());
  return gather(n, x, 0, [&](const Index& o, Index& in) {
    for (size_t a = 0; a < at.size(); ++a) at[a] = o[axis + a];
    for (size_t a = 0; a < axis; ++a) in[a] = o[a];
    for (size_t a = axis + 1; a < in.size(); ++a) in[a] = o[a + at.size() - 1];
    in[axis] = take_index(idx, offset_of(at, idx_strides), x.shape[axis]);
    return true;
  });
}

// out[i] = x[i with i[axis] = idx[i]]
Value gather_elements(const ir::Node& n, const Value& x, const Value& idx) {
  const auto axis = static_cast<size_t>(n.attrs.i(AttrKey::axis));
  const std::vector<int64_t> idx_strides = ir::contiguous_strides(idx.shape);
  KILN_CHECK(idx.shape == n.shape) << "gather_elements of " << ir::shape_str(idx.shape);
  return gather(n, x, 0, [&](const Index& o, Index& in) {
    in = o;
    in[axis] = take_index(idx, offset_of(o, idx_strides), x.shape[axis]);
    return true;
  });
}

}  // namespace

Value eval_movement(const ir::Node& n, const Args& args) {
  if (n.op == Op::Concat) return concat(n, args);
  if (n.op == Op::ScatterElements) {
    KILN_CHECK(args.size() == 3) << "scatter_elements with " << args.size() << " inputs";
    return eval_scatter(n, *args[0], *args[1], *args[2]);
  }
  if (n.op == Op::Gather || n.op == Op::GatherElements) {
    KILN_CHECK(args.size() == 2) << ir::op_enum_name(n.op) << " with " << args.size() << " inputs";
    return n.op == Op::Gather ? gather_op(n, *args[0], *args[1])
                              : gather_elements(n, *args[0], *args[1]);
  }
  KILN_CHECK(args.size() == 1) << ir::op_enum_name(n.op) << " with " << args.size() << " inputs";
  const Value& x = *args[0];
  std::optional<ir::Movement> m = ir::movement_of(n.op);
  KILN_CHECK(m) << "not a movement op: " << ir::op_enum_name(n.op);
  switch (*m) {
    case ir::Movement::Reshape:
      return reshape(n, x);
    case ir::Movement::Permute:
      return permute(n, x);
    case ir::Movement::Expand:
      return expand(n, x);
    case ir::Movement::Slice:
      return slice(n, x);
    case ir::Movement::Pad:
      return pad(n, x);
    case ir::Movement::Concat:  // variadic: handled above
      break;
    case ir::Movement::Flip:
      return flip(n, x);
    case ir::Movement::Roll:
      return roll(n, x);
    case ir::Movement::Unfold:
      return unfold(n, x);
    case ir::Movement::Trilu:
      return trilu(n, x);
    case ir::Movement::Resize:
      return resize(n, x);
    case ir::Movement::Gather:  // two or three operands: handled above
    case ir::Movement::GatherElements:
    case ir::Movement::ScatterElements:
      break;
  }
  KILN_CHECK(false) << "not a movement op: " << ir::op_enum_name(n.op);
  return {};
}

}  // namespace kiln::interp::reference
