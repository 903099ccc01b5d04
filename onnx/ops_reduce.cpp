// ONNX's reductions, arg-reductions, softmaxes, matrix products and normalizations.
#include <fmt/format.h>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>

#include "onnx/import_context.h"

namespace kiln::onnx {

namespace {

using ir::Op;

enum class Reduce { sum, mean, max, min, prod, sum_square, l1, l2, log_sum, log_sum_exp };

// The reduced axes: from input 1 since `input_since` (ReduceSum 13, the others 18), from the
// `axes` attribute before. `all`: every axis; `none` (noop_with_empty_axes and no axes): identity.
struct Axes {
  bool all = false;
  bool none = false;
  std::vector<int64_t> list;
  std::optional<std::vector<int64_t>> arg() const {
    if (all) return std::nullopt;
    return list;
  }
};

Expected<Axes> reduce_axes(Context& c, int input_since) {
  Axes axes;
  if (c.opset() >= input_since) {
    if (c.has(1)) {
      KILN_ONNX_TRY(axes.list, c.ints(1, "axes"));
    }
  } else if (auto a = c.attr_ints("axes")) {
    axes.list = *a;
  }
  bool noop = c.attr_i("noop_with_empty_axes", 0) != 0;
  if (axes.list.empty()) (noop ? axes.none : axes.all) = true;
  return axes;
}

OpImporter reduce(Reduce kind, int input_since) {
  return [kind, input_since](Context& c) -> Outs {
    KILN_ONNX_TRY(const ir::Node* x, c.x(0));
    bool keep = c.attr_i("keepdims", 1) != 0;
    KILN_ONNX_TRY(Axes ax, reduce_axes(c, input_since));
    if (ax.none) return std::vector<Value>{c.out(x)};
    const std::optional<std::vector<int64_t>> axes = ax.arg();
    ir::Builder& B = c.b();
    if (x->numel() == 0) {
      // An empty reduction is ONNX's identity, at the result's shape (a sum's gives it): 0 for
      // the sums, 1 for prod, the dtype's lowest (highest) value for max (min), -inf for the
      // logarithms, NaN for a float mean (0 / 0).
      KILN_ONNX_TRY(const ir::Node* sized, c.check(B.reduce(Op::Sum, x, axes, keep)));
      const bool fl = ir::is_float(x->dtype);
      const double inf = std::numeric_limits<double>::infinity();
      const auto lowest = [&](bool highest) -> int64_t {
        if (x->dtype == ir::DType::i8) return highest ? 127 : -128;
        if (x->dtype == ir::DType::u8) return highest ? 255 : 0;
        if (x->dtype == ir::DType::i32) return highest ? INT32_MAX : INT32_MIN;
        if (x->dtype == ir::DType::boolean) return highest ? 1 : 0;
        return highest ? INT64_MAX : INT64_MIN;
      };
      if (kind == Reduce::max || kind == Reduce::min) {
        const bool highest = kind == Reduce::min;
        if (fl) return one(c, B.full(sized->shape, highest ? inf : -inf, x->dtype));
        return one(c, B.full_int(sized->shape, lowest(highest), x->dtype));
      }
      double v = 0;
      if (kind == Reduce::prod) v = 1;
      if (kind == Reduce::log_sum || kind == Reduce::log_sum_exp) v = -inf;
      if (kind == Reduce::mean && fl) v = std::numeric_limits<double>::quiet_NaN();
      return one(c, B.full(sized->shape, v, x->dtype));
    }
    switch (kind) {
      case Reduce::sum: return one(c, B.reduce(Op::Sum, x, axes, keep));
      case Reduce::mean: return one(c, B.mean(x, axes, keep));
      case Reduce::max: return one(c, B.reduce(Op::ReduceMax, x, axes, keep));
      case Reduce::min: return one(c, B.reduce(Op::ReduceMin, x, axes, keep));
      case Reduce::prod: return one(c, B.reduce(Op::Prod, x, axes, keep));
      case Reduce::sum_square:
      case Reduce::l2: {
        KILN_ONNX_TRY(const ir::Node* sq, c.check(B.binary(Op::Mul, x, x)));
        KILN_ONNX_TRY(const ir::Node* s, c.check(B.reduce(Op::Sum, sq, axes, keep)));
        if (kind == Reduce::sum_square) return std::vector<Value>{c.out(s)};
        return one(c, B.unary(Op::Sqrt, s));
      }
      case Reduce::l1: {
        KILN_ONNX_TRY(const ir::Node* a, c.check(B.unary(Op::Abs, x)));
        return one(c, B.reduce(Op::Sum, a, axes, keep));
      }
      case Reduce::log_sum: {
        KILN_ONNX_TRY(const ir::Node* s, c.check(B.reduce(Op::Sum, x, axes, keep)));
        return one(c, B.unary(Op::Log, s));
      }
      case Reduce::log_sum_exp: {  // m + log(sum(exp(x - m))), m the max (kept finite)
        KILN_ONNX_TRY(const ir::Node* m, c.check(B.reduce(Op::ReduceMax, x, axes, true)));
        KILN_ONNX_TRY(const ir::Node* d, c.check(B.binary(Op::Sub, x, m)));
        KILN_ONNX_TRY(const ir::Node* e, c.check(B.unary(Op::Exp, d)));
        KILN_ONNX_TRY(const ir::Node* s, c.check(B.reduce(Op::Sum, e, axes, true)));
        KILN_ONNX_TRY(const ir::Node* l, c.check(B.unary(Op::Log, s)));
        KILN_ONNX_TRY(const ir::Node* r, c.check(B.binary(Op::Add, l, m)));
        if (keep) return std::vector<Value>{c.out(r)};
        ir::Shape out;
        std::vector<bool> reduced(x->shape.size(), ax.all);
        for (int64_t a : ax.list) {
          if (a < -int64_t(x->shape.size()) || a >= int64_t(x->shape.size())) return c.fail("axis out of range");
          reduced[a < 0 ? a + x->shape.size() : a] = true;
        }
        for (size_t d = 0; d < x->shape.size(); ++d)
          if (!reduced[d]) out.push_back(x->shape[d]);
        return one(c, B.reshape(r, out));
      }
    }
    return c.fail("unknown reduction");
  };
}

// ArgMax/ArgMin -> i64 (kiln's are i32); select_last_index through a flip: n - 1 - index.
OpImporter arg_reduce(Op op) {
  return [op](Context& c) -> Outs {
    KILN_ONNX_TRY(const ir::Node* x, c.x(0));
    const int64_t rank = x->shape.size();
    int64_t axis = c.attr_i("axis", 0);
    if (axis < -rank || axis >= rank) return c.fail(fmt::format("axis {} is out of range", axis));
    if (axis < 0) axis += rank;
    bool keep = c.attr_i("keepdims", 1) != 0;
    bool last = c.attr_i("select_last_index", 0) != 0;
    ir::Builder& B = c.b();
    if (last) { KILN_ONNX_TRY(x, c.check(B.flip(x, {axis}))); }
    KILN_ONNX_TRY(const ir::Node* i, c.check(B.arg_reduce(op, x, axis, keep)));
    KILN_ONNX_TRY(i, c.check(B.cast(i, ir::DType::i64)));
    if (last) {
      KILN_ONNX_TRY(const ir::Node* n1, c.check(B.scalar(double(x->shape[axis] - 1), ir::DType::i64)));
      KILN_ONNX_TRY(i, c.check(B.binary(Op::Sub, n1, i)));
    }
    return std::vector<Value>{c.out(i)};
  };
}

// Before opset 13, (log)softmax flattens to 2-D at `axis` (default 1) and normalizes the whole
// inner part; since 13 it normalizes along `axis` (default -1).
OpImporter softmax(bool log) {
  return [log](Context& c) -> Outs {
    KILN_ONNX_TRY(const ir::Node* x, c.x(0));
    const int64_t rank = x->shape.size();
    ir::Builder& B = c.b();
    if (c.opset() >= 13) {
      int64_t axis = c.attr_i("axis", -1);
      return one(c, log ? B.log_softmax(x, axis) : B.softmax(x, axis));
    }
    int64_t axis = c.attr_i("axis", 1);
    if (axis < -rank || axis > rank) return c.fail(fmt::format("axis {} is out of range", axis));
    if (axis < 0) axis += rank;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : inner) *= x->shape[d];
    KILN_ONNX_TRY(const ir::Node* flat, c.check(B.reshape(x, {outer, inner})));
    KILN_ONNX_TRY(const ir::Node* s, c.check(log ? B.log_softmax(flat, 1) : B.softmax(flat, 1)));
    return one(c, B.reshape(s, x->shape));
  };
}

Outs matmul(Context& c) {
  KILN_ONNX_TRY(const ir::Node* a, c.x(0));
  KILN_ONNX_TRY(const ir::Node* b, c.x(1));
  return one(c, c.b().matmul(a, b));
}

// Gemm: alpha * op(A) @ op(B) + beta * C.
Outs gemm(Context& c) {
  KILN_ONNX_TRY(const ir::Node* a, c.x(0));
  KILN_ONNX_TRY(const ir::Node* b, c.x(1));
  double alpha = c.attr_f("alpha", 1.0f), beta = c.attr_f("beta", 1.0f);
  bool ta = c.attr_i("transA", 0) != 0, tb = c.attr_i("transB", 0) != 0;
  if (c.opset() < 7) c.attr("broadcast");
  ir::Builder& B = c.b();
  if (a->shape.size() != 2 || b->shape.size() != 2) return c.fail("A and B must be matrices");
  if (ta) { KILN_ONNX_TRY(a, c.check(B.permute(a, {1, 0}))); }
  if (tb) { KILN_ONNX_TRY(b, c.check(B.permute(b, {1, 0}))); }
  KILN_ONNX_TRY(const ir::Node* y, c.check(B.matmul(a, b)));
  if (alpha != 1) {
    KILN_ONNX_TRY(const ir::Node* k, c.check(B.scalar(alpha, y->dtype)));
    KILN_ONNX_TRY(y, c.check(B.binary(Op::Mul, y, k)));
  }
  if (c.has(2)) {
    KILN_ONNX_TRY(const ir::Node* z, c.x(2));
    if (beta != 1) {
      KILN_ONNX_TRY(const ir::Node* k, c.check(B.scalar(beta, z->dtype)));
      KILN_ONNX_TRY(z, c.check(B.binary(Op::Mul, z, k)));
    }
    KILN_ONNX_TRY(y, c.check(B.binary(Op::Add, y, z)));
  }
  return std::vector<Value>{c.out(y)};
}

// (x - mean) / sqrt(var + eps) over `axes` (population variance), with the mean and the
// reciprocal deviation it used.
struct Normalized {
  const ir::Node* y;
  const ir::Node* mean;
  const ir::Node* inv_std;
};
Expected<Normalized> normalize(Context& c, const ir::Node* x, const std::vector<int64_t>& axes,
                               double eps) {
  ir::Builder& B = c.b();
  KILN_ONNX_TRY(const ir::Node* mu, c.check(B.mean(x, axes, true)));
  KILN_ONNX_TRY(const ir::Node* d, c.check(B.binary(Op::Sub, x, mu)));
  KILN_ONNX_TRY(const ir::Node* sq, c.check(B.binary(Op::Mul, d, d)));
  KILN_ONNX_TRY(const ir::Node* var, c.check(B.mean(sq, axes, true)));
  KILN_ONNX_TRY(const ir::Node* e, c.check(B.scalar(eps, x->dtype)));
  KILN_ONNX_TRY(const ir::Node* ve, c.check(B.binary(Op::Add, var, e)));
  KILN_ONNX_TRY(const ir::Node* inv, c.check(B.unary(Op::Rsqrt, ve)));
  KILN_ONNX_TRY(const ir::Node* y, c.check(B.binary(Op::Mul, d, inv)));
  return Normalized{y, mu, inv};
}

// LayerNormalization over axes [axis, rank), in f32 for narrower inputs (stash_type 1).
Outs layer_norm(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  KILN_ONNX_TRY(const ir::Node* scale, c.x(1));
  const int64_t rank = x->shape.size();
  int64_t axis = c.attr_i("axis", -1);
  double eps = c.attr_f("epsilon", 1e-5f);
  int64_t stash = c.attr_i("stash_type", 1);
  if (stash != 1) return c.unsupported(fmt::format("stash_type {}", stash));
  if (axis < -rank || axis >= rank) return c.fail(fmt::format("axis {} is out of range", axis));
  if (axis < 0) axis += rank;
  ir::Builder& B = c.b();
  const ir::DType t = x->dtype;
  const bool widen = t == ir::DType::f16 || t == ir::DType::bf16;
  if (widen) { KILN_ONNX_TRY(x, c.check(B.cast(x, ir::DType::f32))); }
  std::vector<int64_t> axes(rank - axis);
  std::iota(axes.begin(), axes.end(), axis);
  KILN_ONNX_TRY(Normalized norm, normalize(c, x, axes, eps));
  const ir::Node* y = norm.y;
  if (widen) { KILN_ONNX_TRY(y, c.check(B.cast(y, t))); }
  KILN_ONNX_TRY(y, c.check(B.binary(Op::Mul, y, scale)));
  if (c.has(2)) {
    KILN_ONNX_TRY(const ir::Node* bias, c.x(2));
    KILN_ONNX_TRY(y, c.check(B.binary(Op::Add, y, bias)));
  }
  return std::vector<Value>{c.out(y), c.out(norm.mean), c.out(norm.inv_std)};
}

// A per-channel vector [C] as [C, 1, ..., 1] against an input of rank `rank` (channels axis 1).
Expected<const ir::Node*> per_channel(Context& c, size_t input, int64_t rank) {
  KILN_ONNX_TRY(const ir::Node* v, c.x(input));
  if (v->shape.size() != 1) return c.fail(fmt::format("input {} must be a vector", input));
  ir::Shape s(std::max<int64_t>(rank - 1, 1), 1);
  s[0] = v->shape[0];
  return c.check(c.b().reshape(v, s));
}

// BatchNormalization: (x - mean) / sqrt(var + eps) * scale + B per channel (axis 1). In
// training mode (opset 14+) mean and var are the batch's (population variance), and the outputs
// 1 and 2 are the running statistics: input * momentum + batch * (1 - momentum).
Outs batch_norm(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  double eps = c.attr_f("epsilon", 1e-5f);
  double momentum = c.attr_f("momentum", 0.9f);
  // Training mode: is_test=0 before opset 7, training_mode=1 since 14 (7 to 13: inference only).
  bool training = c.opset() < 7 ? c.attr_i("is_test", 0) == 0 : c.attr_i("training_mode", 0) != 0;
  if (c.opset() < 9 && c.attr_i("spatial", 1) != 1) return c.unsupported("spatial=0");
  if (c.opset() < 6) c.attr("consumed_inputs");
  if (!training)
    for (size_t i = 1; i < c.num_outputs(); ++i)
      if (c.wants_output(i)) return c.unsupported("the training outputs outside training mode");
  const int64_t rank = x->shape.size();
  ir::Builder& B = c.b();
  KILN_ONNX_TRY(const ir::Node* scale, per_channel(c, 1, rank));
  KILN_ONNX_TRY(const ir::Node* bias, per_channel(c, 2, rank));
  KILN_ONNX_TRY(const ir::Node* mean, per_channel(c, 3, rank));
  KILN_ONNX_TRY(const ir::Node* var, per_channel(c, 4, rank));
  std::vector<Value> outs(1);
  if (training) {
    std::vector<int64_t> axes{0};
    for (int64_t d = 2; d < rank; ++d) axes.push_back(d);
    KILN_ONNX_TRY(const ir::Node* bm, c.check(B.mean(x, axes, true)));  // [1, C, 1...]
    KILN_ONNX_TRY(const ir::Node* d, c.check(B.binary(Op::Sub, x, bm)));
    KILN_ONNX_TRY(const ir::Node* sq, c.check(B.binary(Op::Mul, d, d)));
    KILN_ONNX_TRY(const ir::Node* bv, c.check(B.mean(sq, axes, true)));
    KILN_ONNX_TRY(bm, c.check(B.reshape(bm, mean->shape)));
    KILN_ONNX_TRY(bv, c.check(B.reshape(bv, var->shape)));
    KILN_ONNX_TRY(const ir::Node* m, c.check(B.scalar(momentum, x->dtype)));
    KILN_ONNX_TRY(const ir::Node* m1, c.check(B.scalar(1 - momentum, x->dtype)));
    for (auto [running, batch] : {std::pair{mean, bm}, std::pair{var, bv}}) {
      KILN_ONNX_TRY(const ir::Node* a, c.check(B.binary(Op::Mul, running, m)));
      KILN_ONNX_TRY(const ir::Node* b, c.check(B.binary(Op::Mul, batch, m1)));
      KILN_ONNX_TRY(const ir::Node* r, c.check(B.binary(Op::Add, a, b)));
      KILN_ONNX_TRY(r, c.check(B.reshape(r, {x->shape[1]})));
      outs.push_back(c.out(r));
    }
    mean = bm;
    var = bv;
  } else {
    c.attr("momentum");
  }
  KILN_ONNX_TRY(const ir::Node* e, c.check(B.scalar(eps, var->dtype)));
  KILN_ONNX_TRY(const ir::Node* ve, c.check(B.binary(Op::Add, var, e)));
  KILN_ONNX_TRY(const ir::Node* inv, c.check(B.unary(Op::Rsqrt, ve)));
  KILN_ONNX_TRY(const ir::Node* d, c.check(B.binary(Op::Sub, x, mean)));
  KILN_ONNX_TRY(const ir::Node* n, c.check(B.binary(Op::Mul, d, inv)));
  KILN_ONNX_TRY(const ir::Node* s, c.check(B.binary(Op::Mul, n, scale)));
  KILN_ONNX_TRY(const ir::Node* y, c.check(B.binary(Op::Add, s, bias)));
  outs[0] = c.out(y);
  return outs;
}

// InstanceNormalization: per sample and channel over the spatial axes.
Outs instance_norm(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  double eps = c.attr_f("epsilon", 1e-5f);
  const int64_t rank = x->shape.size();
  if (rank < 3) return c.fail("needs rank >= 3");
  std::vector<int64_t> axes(rank - 2);
  std::iota(axes.begin(), axes.end(), 2);
  ir::Builder& B = c.b();
  KILN_ONNX_TRY(const ir::Node* scale, per_channel(c, 1, rank));
  KILN_ONNX_TRY(const ir::Node* bias, per_channel(c, 2, rank));
  KILN_ONNX_TRY(Normalized norm, normalize(c, x, axes, eps));
  KILN_ONNX_TRY(const ir::Node* s, c.check(B.binary(Op::Mul, norm.y, scale)));
  return one(c, B.binary(Op::Add, s, bias));
}

// MeanVarianceNormalization, as ONNX's function defines it: (x - mean) / (sqrt(var) + 1e-9) over
// `axes` (default [0, 2, 3]).
Outs mean_variance_norm(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  if (!ir::is_float(x->dtype)) return c.fail("x must be floating point");
  const int64_t rank = x->shape.size();
  std::vector<int64_t> axes = c.attr_ints("axes").value_or(std::vector<int64_t>{0, 2, 3});
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) return c.fail(fmt::format("axis {} is out of range for rank {}", a, rank));
    if (a < 0) a += rank;
  }
  std::sort(axes.begin(), axes.end());
  ir::Builder& B = c.b();
  Expr e{c};
  KILN_ONNX_TRY(const ir::Node* mu, c.check(B.mean(x, axes, true)));
  KILN_ONNX_TRY(const ir::Node* d, e.bin(Op::Sub, x, mu));
  KILN_ONNX_TRY(const ir::Node* sq, e.bin(Op::Mul, d, d));
  KILN_ONNX_TRY(const ir::Node* var, c.check(B.mean(sq, axes, true)));
  KILN_ONNX_TRY(const ir::Node* sd, e.un(Op::Sqrt, var));
  KILN_ONNX_TRY(sd, e.bin(Op::Add, sd, 1e-9));
  return one(c, B.binary(Op::Div, d, sd));
}

// LRN: x / (bias + alpha / size * (sum of x^2 over the `size` channels around each))^beta, the
// window floor((size-1)/2) channels before and ceil((size-1)/2) after, cut at the edges.
Outs lrn(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  if (!ir::is_float(x->dtype)) return c.fail("x must be floating point");
  const int64_t rank = x->shape.size(), size = c.attr_i("size", 0);
  if (rank < 3) return c.fail("x must be [N, C, D1, ...]");
  if (size <= 0) return c.fail("attribute 'size' must be positive");
  const double alpha = c.attr_f("alpha", 1e-4f), beta = c.attr_f("beta", 0.75f), bias = c.attr_f("bias", 1.0f);
  ir::Builder& B = c.b();
  Expr e{c};
  KILN_ONNX_TRY(const ir::Node* sq, e.bin(Op::Mul, x, x));
  std::vector<int64_t> before(rank, 0), after(rank, 0);
  before[1] = (size - 1) / 2;
  after[1] = size - 1 - before[1];
  KILN_ONNX_TRY(sq, c.check(B.pad(sq, before, after, 0)));
  KILN_ONNX_TRY(sq, c.check(B.unfold(sq, 1, size, 1)));  // [N, C, D..., size]
  KILN_ONNX_TRY(const ir::Node* sum, c.check(B.reduce(Op::Sum, sq, std::vector<int64_t>{rank}, false)));
  KILN_ONNX_TRY(sum, e.bin(Op::Mul, sum, alpha / double(size)));
  KILN_ONNX_TRY(sum, e.bin(Op::Add, sum, bias));
  KILN_ONNX_TRY(sum, e.bin(Op::Pow, sum, beta));
  return one(c, B.binary(Op::Div, x, sum));
}

OpImporter global_pool(bool max) {
  return [max](Context& c) -> Outs {
    KILN_ONNX_TRY(const ir::Node* x, c.x(0));
    const int64_t rank = x->shape.size();
    if (rank < 3) return c.fail("needs rank >= 3");
    std::vector<int64_t> axes(rank - 2);
    std::iota(axes.begin(), axes.end(), 2);
    if (max) return one(c, c.b().reduce(Op::ReduceMax, x, axes, true));
    return one(c, c.b().mean(x, axes, true));
  };
}

// Det: LU factorization with partial pivoting (LAPACK's getrf, which numpy's det calls), unrolled
// at import over the M columns. Step k picks the row of largest |a[r, k]| among r >= k (the first
// on ties), swaps it with row k (a gather_elements by a row permutation computed on the device)
// and subtracts multiples of row k from the rows below it; the determinant is the product of the
// pivots, negated per swap. A zero pivot (a singular matrix) gives 0. f16 and bf16 are factored in
// f32. Each step is a pass over the [batch, M, M] matrices, so M is bounded (kMaxDetSize).
constexpr int64_t kMaxDetSize = 64;

Outs det(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  ir::Builder& B = c.b();
  Expr e{c};
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  if (rank < 2 || x->shape[rank - 1] != x->shape[rank - 2])
    return c.fail(fmt::format("Det: X must be [..., M, M], not {}", ir::shape_str(x->shape)));
  if (!ir::is_float(x->dtype))
    return c.fail(fmt::format("Det: X must be a float tensor, not {}", ir::dtype_name(x->dtype)));
  const int64_t m = x->shape.back();
  const ir::Shape batch(x->shape.begin(), x->shape.end() - 2);
  const int64_t n = ir::shape_numel(batch);
  if (m > kMaxDetSize)
    return c.unsupported(
        fmt::format("Det of {} x {} matrices (kiln unrolls the factorization's {} steps at "
                    "import; at most {})",
                    m, m, m, kMaxDetSize));
  if (n == 0 || m == 0) return one(c, B.full(batch, 1, x->dtype));  // an empty product: 1
  const ir::DType ct = x->dtype == ir::DType::f64 ? ir::DType::f64 : ir::DType::f32;
  const ir::Node* a = x;
  if (a->dtype != ct) {
    KILN_ONNX_TRY(a, c.check(B.cast(a, ct)));
  }
  KILN_ONNX_TRY(a, c.check(B.reshape(a, {n, m, m})));
  KILN_ONNX_TRY(const ir::Node* rows, c.check(B.arange(0, m, 1, ir::DType::i64)));
  KILN_ONNX_TRY(rows, c.check(B.reshape(rows, {1, m, 1})));
  KILN_ONNX_TRY(const ir::Node* zero, e.k(0, ct));
  const ir::Node* d = nullptr;  // [n, 1, 1]: the determinant so far
  for (int64_t k = 0; k < m; ++k) {
    KILN_ONNX_TRY(const ir::Node* col, c.check(B.slice(a, 2, k, k + 1, 1)));  // [n, m, 1]
    const ir::Node* swapped = nullptr;
    if (k + 1 < m) {
      KILN_ONNX_TRY(const ir::Node* mag, e.un(Op::Abs, col));
      KILN_ONNX_TRY(const ir::Node* below, e.bin(Op::Ge, rows, double(k)));
      KILN_ONNX_TRY(const ir::Node* none, e.k(-1, ct));
      KILN_ONNX_TRY(const ir::Node* cand, c.check(B.where(below, mag, none)));
      KILN_ONNX_TRY(const ir::Node* p,
                    c.check(B.arg_reduce(Op::ArgMax, cand, 1, true)));  // [n, 1, 1]
      KILN_ONNX_TRY(p, c.check(B.cast(p, ir::DType::i64)));
      // Row r of the swapped matrix reads row p where r = k, row k where r = p, else row r.
      KILN_ONNX_TRY(const ir::Node* is_k, e.bin(Op::Eq, rows, double(k)));
      KILN_ONNX_TRY(const ir::Node* is_p, e.bin(Op::Eq, rows, p));
      KILN_ONNX_TRY(const ir::Node* k_index, e.k(double(k), ir::DType::i64));
      KILN_ONNX_TRY(const ir::Node* from, c.check(B.where(is_p, k_index, rows)));
      KILN_ONNX_TRY(from, c.check(B.where(is_k, p, from)));
      KILN_ONNX_TRY(from, c.check(B.expand(from, {n, m, m})));
      KILN_ONNX_TRY(a, c.check(B.gather_elements(a, from, 1)));
      KILN_ONNX_TRY(swapped, e.bin(Op::Ne, p, double(k)));
      KILN_ONNX_TRY(col, c.check(B.slice(a, 2, k, k + 1, 1)));
    }
    KILN_ONNX_TRY(const ir::Node* pivot, c.check(B.slice(col, 1, k, k + 1, 1)));  // [n, 1, 1]
    if (d) {
      KILN_ONNX_TRY(d, e.bin(Op::Mul, d, pivot));
    } else {
      d = pivot;
    }
    if (swapped) {
      KILN_ONNX_TRY(const ir::Node* negated, e.un(Op::Neg, d));
      KILN_ONNX_TRY(d, c.check(B.where(swapped, negated, d)));
    }
    if (k + 1 == m) break;
    // Rows below k less (a[r, k] / pivot) times row k; nothing where the pivot is 0 (the column
    // is 0 from row k down, and the determinant is already 0).
    KILN_ONNX_TRY(const ir::Node* q, e.bin(Op::Div, col, pivot));
    KILN_ONNX_TRY(const ir::Node* after, e.bin(Op::Gt, rows, double(k)));
    KILN_ONNX_TRY(const ir::Node* singular, e.bin(Op::Eq, pivot, 0.0));
    KILN_ONNX_TRY(const ir::Node* keep, c.check(B.unary(Op::Not, singular)));
    KILN_ONNX_TRY(const ir::Node* live, e.bin(Op::And, after, keep));
    KILN_ONNX_TRY(q, c.check(B.where(live, q, zero)));
    KILN_ONNX_TRY(const ir::Node* row_k, c.check(B.slice(a, 1, k, k + 1, 1)));  // [n, 1, m]
    KILN_ONNX_TRY(const ir::Node* step, e.bin(Op::Mul, q, row_k));
    KILN_ONNX_TRY(a, e.bin(Op::Sub, a, step));
  }
  KILN_ONNX_TRY(d, c.check(B.reshape(d, std::vector<int64_t>(batch.begin(), batch.end()))));
  if (d->dtype != x->dtype) return one(c, B.cast(d, x->dtype));
  return std::vector<Value>{c.out(d)};
}

}  // namespace

void add_reduce_ops(OpTable& t) {
  t["ReduceSum"] = reduce(Reduce::sum, 13);
  t["ReduceMean"] = reduce(Reduce::mean, 18);
  t["ReduceMax"] = reduce(Reduce::max, 18);
  t["ReduceMin"] = reduce(Reduce::min, 18);
  t["ReduceProd"] = reduce(Reduce::prod, 18);
  t["ReduceSumSquare"] = reduce(Reduce::sum_square, 18);
  t["ReduceL1"] = reduce(Reduce::l1, 18);
  t["ReduceL2"] = reduce(Reduce::l2, 18);
  t["ReduceLogSum"] = reduce(Reduce::log_sum, 18);
  t["ReduceLogSumExp"] = reduce(Reduce::log_sum_exp, 18);
  t["ArgMax"] = arg_reduce(Op::ArgMax);
  t["ArgMin"] = arg_reduce(Op::ArgMin);
  t["Softmax"] = softmax(false);
  t["LogSoftmax"] = softmax(true);
  t["MatMul"] = matmul;
  t["Gemm"] = gemm;
  t["Det"] = det;
  t["LayerNormalization"] = layer_norm;
  t["BatchNormalization"] = batch_norm;
  t["InstanceNormalization"] = instance_norm;
  t["MeanVarianceNormalization"] = mean_variance_norm;
  t["LRN"] = lrn;
  t["GlobalAveragePool"] = global_pool(false);
  t["GlobalMaxPool"] = global_pool(true);
}

}  // namespace kiln::onnx
