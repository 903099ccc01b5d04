// The fuzz generator's movement steps: views of a value (roll, flip, slices, pad, permute,
// reshape, unfold, expand, gather_elements by an integer value) and the ways reduced values grow
// back to full extent (pad, concat).
#include <random>

#include "fuzz_steps.h"

namespace kiln::testing::fuzz {

using ir::DType;
using ir::Op;

namespace {

const ir::Node* in_frame(Generator& g, const FuzzValue& v) {
  if (v.node->shape == v.frame) return v.node;
  return g.ok(g.b().reshape(v.node, std::vector<int64_t>(v.frame.begin(), v.frame.end())), "reshape");
}

size_t at(int64_t a) { return static_cast<size_t>(a); }

// A random axis along which v has more than one element, or -1.
int64_t long_axis(Generator& g, const FuzzValue& v) {
  std::vector<int64_t> axes;
  for (int64_t a = 0; a < g.rank(); ++a)
    if (v.frame[at(a)] > 1) axes.push_back(a);
  return axes.empty() ? -1 : axes[at(g.pick(static_cast<int64_t>(axes.size())))];
}

// What pad fills with: NaN or inf where the value may hold them anyway, else a small number.
double pad_value(Generator& g, const FuzzValue& v) {
  if (v.special && g.chance(0.4)) return g.chance(0.5) ? NAN : -INFINITY;
  if (v.dtype() == DType::boolean) return static_cast<double>(g.pick(2));
  if (v.dtype() == DType::u8) return static_cast<double>(g.pick(4));
  return ir::is_float(v.dtype()) && g.chance(0.3) ? 0.5 : static_cast<double>(g.pick(5) - 2);
}

FuzzValue with_pad(FuzzValue r, double value) {
  if (std::isnan(value) || std::isinf(value)) return r;  // already special and exact
  r.lo = std::min(r.lo, value), r.hi = std::max(r.hi, value);
  if (value != std::floor(value)) r.grid = r.grid < 0 ? -1 : std::max(r.grid, 1);
  return r;
}

std::vector<int64_t> random_axes(Generator& g) {
  std::vector<int64_t> axes;
  for (int64_t a = 0; a < g.rank(); ++a)
    if (g.chance(0.5)) axes.push_back(a);
  if (axes.empty()) axes.push_back(g.pick(g.rank()));
  return axes;
}

// x padded along `axis` by `before`/`after` and sliced back to its extent from `start`.
FuzzValue pad_shift(Generator& g, const FuzzValue& v, int64_t axis) {
  const int64_t n = v.frame[at(axis)], before = g.pick(3), after = g.pick(3);
  std::vector<int64_t> b(at(g.rank()), 0), a(at(g.rank()), 0);
  b[at(axis)] = before, a[at(axis)] = after;
  const double value = pad_value(g, v);
  const ir::Node* p = g.ok(g.b().pad(in_frame(g, v), b, a, value), "pad");
  const int64_t start = g.pick(before + after + 1);
  return with_pad(derive(g.ok(g.b().slice(p, axis, start, start + n, 1), "slice"), v), value);
}

// max(permute(x), permute(y)) permuted back: kernels over transposed views.
std::optional<FuzzValue> permuted_max(Generator& g, const FuzzValue& v) {
  auto w = g.pick_value([&](const FuzzValue& o) {
    return o.dtype() == v.dtype() && o.dtype() != DType::boolean && ((o.exact && v.exact) || (o.smooth_ok() && v.smooth_ok()));
  });
  if (!w || v.dtype() == DType::boolean) return std::nullopt;
  std::vector<int64_t> perm(at(g.rank())), inv(at(g.rank()));
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(g.seed() + static_cast<uint64_t>(g.pick(1000))));
  for (size_t i = 0; i < perm.size(); ++i) inv[at(perm[i])] = static_cast<int64_t>(i);
  const ir::Node* a = g.ok(g.b().permute(in_frame(g, v), perm), "permute");
  const ir::Node* b = g.ok(g.b().permute(in_frame(g, *w), perm), "permute");
  const ir::Node* m = g.ok(g.b().binary(Op::Max, a, b), "max");
  FuzzValue r = derive(g.ok(g.b().permute(m, inv), "permute back"), v, *w);
  r.lo = std::max(v.lo, w->lo), r.hi = std::max(v.hi, w->hi);
  return r;
}

// A sliding-window max of width 2 (unfold + max over the window), padded back to full extent.
FuzzValue window_max(Generator& g, const FuzzValue& v, int64_t axis) {
  const ir::Node* u = g.ok(g.b().unfold(in_frame(g, v), axis, 2, 1), "unfold");
  const ir::Node* m = g.ok(g.b().reduce(Op::ReduceMax, u, std::vector<int64_t>{g.rank()}, false), "window max");
  std::vector<int64_t> b(at(g.rank()), 0), a(at(g.rank()), 0);
  a[at(axis)] = 1;
  const double value = pad_value(g, v);
  return with_pad(derive(g.ok(g.b().pad(m, b, a, value), "pad"), v), value);
}

}  // namespace

StepResult step_view(Generator& g) {
  auto v = g.pick_value([](const FuzzValue& v) { return v.exact || v.smooth_ok(); });
  if (!v) return std::nullopt;
  const int64_t axis = long_axis(g, *v);
  switch (g.pick(9)) {
    case 0: {
      std::vector<int64_t> axes = random_axes(g), shifts;
      for (int64_t a : axes) shifts.push_back(g.pick(2 * v->frame[at(a)] + 1) - v->frame[at(a)]);
      return derive(g.ok(g.b().roll(in_frame(g, *v), shifts, axes), "roll"), *v);
    }
    case 1: return derive(g.ok(g.b().flip(in_frame(g, *v), random_axes(g)), "flip"), *v);
    case 2: return axis < 0 ? std::nullopt : StepResult(pad_shift(g, *v, axis));
    case 3: {  // one index of an axis (extent 1: a row or a column), or the axis reversed
      if (axis < 0) return std::nullopt;
      if (g.chance(0.3))
        return derive(g.ok(g.b().slice(in_frame(g, *v), axis, std::nullopt, std::nullopt, -1), "reverse"), *v);
      const int64_t k = g.pick(v->frame[at(axis)]);
      FuzzValue r = derive(g.ok(g.b().slice(in_frame(g, *v), axis, k, k + 1, 1), "slice"), *v);
      r.frame[at(axis)] = 1;
      return r;
    }
    case 4: return permuted_max(g, *v);
    case 5: {  // flattened, negated, reshaped back
      const ir::Node* flat = g.ok(g.b().reshape(v->node, {-1}), "flatten");
      if (v->dtype() == DType::boolean || v->dtype() == DType::u8) return std::nullopt;
      const ir::Node* n = g.ok(g.b().unary(Op::Neg, flat), "neg");
      FuzzValue r = derive(g.ok(g.b().reshape(n, std::vector<int64_t>(v->frame.begin(), v->frame.end())), "reshape"), *v);
      r.lo = -v->hi, r.hi = -v->lo;
      return r;
    }
    case 6:
      if (axis < 0 || v->dtype() == DType::boolean) return std::nullopt;
      return window_max(g, *v, axis);
    case 7: {  // torch.gather along an axis by an integer value (indices wrapped and clamped)
      auto w = g.pick_value(
          [](const FuzzValue& o) { return o.dtype() == DType::i32 || o.dtype() == DType::i64; });
      if (!w || axis < 0) return std::nullopt;
      const ir::Node* x = g.ok(g.b().expand(in_frame(g, *v), g.base()), "expand");
      const ir::Node* idx = g.ok(g.b().expand(in_frame(g, *w), g.base()), "expand indices");
      FuzzValue r = derive(g.ok(g.b().gather_elements(x, idx, axis), "gather_elements"), *v);
      r.frame = g.base();
      return r;
    }
    default: {  // an explicit broadcast to the base shape
      FuzzValue r = derive(g.ok(g.b().expand(in_frame(g, *v), g.base()), "expand"), *v);
      r.frame = g.base();
      return r;
    }
  }
}

StepResult step_regrow(Generator& g) {
  const int64_t axis = g.pick(g.rank());
  const int64_t n = g.base()[at(axis)];
  if (n == 1) return std::nullopt;
  auto reduced = [&](const FuzzValue& v) { return v.frame[at(axis)] == 1 && (v.exact || v.smooth_ok()); };
  auto v = g.pick_value(reduced);
  if (!v) return std::nullopt;
  if (g.chance(0.4)) {  // pad the reduced axis out to full extent
    std::vector<int64_t> b(at(g.rank()), 0), a(at(g.rank()), 0);
    b[at(axis)] = g.pick(n), a[at(axis)] = n - 1 - b[at(axis)];
    const double value = pad_value(g, *v);
    FuzzValue r = with_pad(derive(g.ok(g.b().pad(in_frame(g, *v), b, a, value), "pad"), *v), value);
    r.frame[at(axis)] = n;
    return r;
  }
  // concat of two reduced values, broadcast to extents 1 and n-1 along the axis
  auto w = g.pick_value([&](const FuzzValue& o) {
    return reduced(o) && o.dtype() == v->dtype() && ((o.exact && v->exact) || (o.smooth_ok() && v->smooth_ok()));
  });
  FuzzValue r = derive(v->node, *v, *w);
  ir::Shape one = r.frame, rest = r.frame;
  rest[at(axis)] = n - 1;
  const ir::Node* a = g.ok(g.b().expand(in_frame(g, *v), one), "expand");
  const ir::Node* b = g.ok(g.b().expand(in_frame(g, *w), rest), "expand");
  const bool swap = g.chance(0.5);
  r.node = g.ok(g.b().concat(swap ? std::vector{b, a} : std::vector{a, b}, axis), "concat");
  r.frame[at(axis)] = n;
  r.lo = std::min(v->lo, w->lo), r.hi = std::max(v->hi, w->hi);
  return r;
}

}  // namespace kiln::testing::fuzz
