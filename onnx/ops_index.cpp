// ONNX ops that select by runtime indices: GatherElements and GatherND on kiln's gather
// primitives; ScatterElements, Scatter, ScatterND and MaxUnpool on kiln's scatter_elements;
// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss on gather too (the target's
// class picked by an index load); Hardmax and OneHot as one-hot masks (eq against an arange), O(1)
// per output element. CumSum is kiln's cumsum primitive (a scan); TopK is kiln's topk_indices (a
// selection scan) and a gather_elements of the data at its indices. ReverseSequence is a
// gather_elements by indices computed on the device.
#include <fmt/format.h>
#include <numeric>

#include "onnx/import_context.h"

namespace kiln::onnx {

namespace {

using ir::Op;

// arange(n) shaped [1, ..., n, ..., 1] (n at `axis` of `rank` axes).
Expected<const ir::Node*> iota_along(Context& c, int64_t n, int64_t axis, int64_t rank, ir::DType t) {
  KILN_ONNX_TRY(const ir::Node* r, c.check(c.b().arange(0, n, 1, t)));
  ir::Shape s(rank, 1);
  s[axis] = n;
  return c.check(c.b().reshape(r, s));
}

Expected<int64_t> axis_of(Context& c, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return c.fail(fmt::format("axis {} is out of range for rank {}", axis, rank));
  return axis < 0 ? axis + rank : axis;
}

// GatherElements: kiln's gather_elements (out-of-range indices clamped, see ir/builder.h).
Outs gather_elements(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  KILN_ONNX_TRY(const ir::Node* idx, c.x(1));
  const int64_t rank = x->shape.size();
  if (int64_t(idx->shape.size()) != rank) return c.fail("data and indices differ in rank");
  KILN_ONNX_TRY(int64_t axis, axis_of(c, c.attr_i("axis", 0), rank));
  return one(c, c.b().gather_elements(x, idx, axis));
}

// GatherND: out[b.., i..] = x[b.., idx[b.., i.., 0], ..., idx[b.., i.., m-1], ...] with b the
// batch_dims leading axes. The m index components (each normalized and clamped into its axis)
// and the batch position make one flat index into x reshaped to [batch * indexed axes, rest...],
// which gather reads along axis 0.
Outs gather_nd(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  KILN_ONNX_TRY(const ir::Node* idx, c.x(1));
  const int64_t r = x->shape.size(), q = idx->shape.size(), b = c.attr_i("batch_dims", 0);
  if (!ir::is_int(idx->dtype)) return c.fail("indices must be integers");
  if (q < 1) return c.fail("indices must have rank 1 or more");
  if (b < 0 || b >= std::min(r, q)) return c.fail(fmt::format("batch_dims {} is out of range", b));
  const int64_t m = idx->shape[q - 1];
  if (m < 1 || m > r - b)
    return c.fail(fmt::format("indices' last axis {} must be in [1, {}]", m, r - b));
  for (int64_t d = 0; d < b; ++d)
    if (idx->shape[d] != x->shape[d]) return c.fail("data and indices differ in their batch axes");
  ir::Builder& B = c.b();
  const ir::Shape lead(idx->shape.begin(), idx->shape.end() - 1);  // [b.., i..]
  KILN_ONNX_TRY(const ir::Node* wide, c.check(B.cast(idx, ir::DType::i64)));
  const ir::Node* flat = nullptr;
  int64_t span = 1;  // elements of the indexed axes of one batch
  for (int64_t j = m; j-- > 0;) {
    const int64_t n = x->shape[b + j];
    KILN_ONNX_TRY(const ir::Node* k, c.check(B.slice(wide, q - 1, j, j + 1, 1)));
    KILN_ONNX_TRY(k, c.check(B.reshape(k, lead)));
    KILN_ONNX_TRY(const ir::Node* zero, c.check(B.scalar(0, ir::DType::i64)));
    KILN_ONNX_TRY(const ir::Node* len, c.check(B.scalar(double(n), ir::DType::i64)));
    KILN_ONNX_TRY(const ir::Node* last,
                  c.check(B.scalar(double(std::max<int64_t>(n - 1, 0)), ir::DType::i64)));
    KILN_ONNX_TRY(const ir::Node* neg, c.check(B.binary(Op::Lt, k, zero)));
    KILN_ONNX_TRY(const ir::Node* wrapped, c.check(B.binary(Op::Add, k, len)));
    KILN_ONNX_TRY(k, c.check(B.where(neg, wrapped, k)));
    KILN_ONNX_TRY(k, c.check(B.binary(Op::Max, k, zero)));
    KILN_ONNX_TRY(k, c.check(B.binary(Op::Min, k, last)));
    if (span != 1) {
      KILN_ONNX_TRY(const ir::Node* stride, c.check(B.scalar(double(span), ir::DType::i64)));
      KILN_ONNX_TRY(k, c.check(B.binary(Op::Mul, k, stride)));
    }
    if (flat) {
      KILN_ONNX_TRY(flat, c.check(B.binary(Op::Add, flat, k)));
    } else {
      flat = k;
    }
    span *= n;
  }
  ir::Shape xs;  // [batch * span, rest...]
  int64_t batch = 1;
  for (int64_t d = 0; d < b; ++d) batch *= x->shape[d];
  xs.push_back(batch * span);
  xs.insert(xs.end(), x->shape.begin() + b + m, x->shape.end());
  if (b > 0) {  // the batch position, broadcast over the index axes
    KILN_ONNX_TRY(const ir::Node* pos, c.check(B.arange(0, batch, 1, ir::DType::i64)));
    ir::Shape ps(x->shape.begin(), x->shape.begin() + b);
    ps.insert(ps.end(), q - 1 - b, 1);
    KILN_ONNX_TRY(pos, c.check(B.reshape(pos, ps)));
    KILN_ONNX_TRY(const ir::Node* stride, c.check(B.scalar(double(span), ir::DType::i64)));
    KILN_ONNX_TRY(pos, c.check(B.binary(Op::Mul, pos, stride)));
    KILN_ONNX_TRY(flat, c.check(B.binary(Op::Add, flat, pos)));
  }
  KILN_ONNX_TRY(const ir::Node* data, c.check(B.reshape(x, xs)));
  KILN_ONNX_TRY(const ir::Node* out, c.check(B.gather(data, flat, 0)));
  ir::Shape os = lead;
  os.insert(os.end(), x->shape.begin() + b + m, x->shape.end());
  return one(c, B.reshape(out, os));
}

// ScatterElements (reduction none/add/mul, max/min from opset 18) and Scatter (opset 9/10, its
// deprecated name without reduction): kiln's scatter_elements. Out-of-range indices (an error
// for ONNX) drop their update; duplicates with reduction none: the last one along the axis wins.
Outs scatter_elements(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  KILN_ONNX_TRY(const ir::Node* idx, c.x(1));
  KILN_ONNX_TRY(const ir::Node* upd, c.x(2));
  const int64_t rank = x->shape.size();
  if (int64_t(idx->shape.size()) != rank) return c.fail("data and indices differ in rank");
  KILN_ONNX_TRY(int64_t axis, axis_of(c, c.attr_i("axis", 0), rank));
  const std::string reduction = c.attr_s("reduction").value_or("none");
  return one(c, c.b().scatter_elements(x, idx, upd, axis, reduction));
}

// ScatterND: out = x, then out[idx[i]] = upd[i] (or combined by reduction) for each index tuple
// i of idx [..., k]. x is viewed as [N, R] (N: its first k axes, R: the rest); each tuple is one
// flat position along N (its components wrapped once; a component still out of range makes it
// N, which scatter_elements drops), so the scatter is scatter_elements along axis 0 of that view,
// the positions broadcast over R and the updates viewed as [M, R].
Outs scatter_nd(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  KILN_ONNX_TRY(const ir::Node* idx, c.x(1));
  KILN_ONNX_TRY(const ir::Node* upd, c.x(2));
  const std::string reduction = c.attr_s("reduction").value_or("none");
  const int64_t r = x->shape.size(), q = idx->shape.size();
  if (!ir::is_int(idx->dtype)) return c.fail("indices must be integers");
  if (q < 1) return c.fail("indices must have rank 1 or more");
  const int64_t k = idx->shape[q - 1];
  if (k < 1 || k > r) return c.fail(fmt::format("indices' last axis {} must be in [1, {}]", k, r));
  ir::Shape want(idx->shape.begin(), idx->shape.end() - 1);
  want.insert(want.end(), x->shape.begin() + k, x->shape.end());
  if (upd->shape != want)
    return c.fail(fmt::format("updates {} must have shape {}", ir::shape_str(upd->shape),
                              ir::shape_str(want)));
  ir::Builder& B = c.b();
  Expr E{c};
  const ir::DType i64 = ir::DType::i64;
  int64_t n = 1, rest = 1, m = 1;
  for (int64_t d = 0; d < r; ++d) (d < k ? n : rest) *= x->shape[d];
  for (int64_t d = 0; d + 1 < q; ++d) m *= idx->shape[d];
  KILN_ONNX_TRY(const ir::Node* wide, c.check(B.cast(idx, i64)));
  KILN_ONNX_TRY(wide, c.check(B.reshape(wide, {m, k})));
  const ir::Node* flat = nullptr;
  const ir::Node* valid = nullptr;
  int64_t span = 1;
  for (int64_t j = k; j-- > 0;) {
    const int64_t len = x->shape[j];
    KILN_ONNX_TRY(const ir::Node* comp, c.check(B.slice(wide, 1, j, j + 1, 1)));
    KILN_ONNX_TRY(const ir::Node* neg, E.bin(Op::Lt, comp, 0.0));
    KILN_ONNX_TRY(const ir::Node* wrapped, E.bin(Op::Add, comp, double(len)));
    KILN_ONNX_TRY(comp, c.check(B.where(neg, wrapped, comp)));
    KILN_ONNX_TRY(const ir::Node* ge, E.bin(Op::Ge, comp, 0.0));
    KILN_ONNX_TRY(const ir::Node* lt, E.bin(Op::Lt, comp, double(len)));
    KILN_ONNX_TRY(const ir::Node* ok, E.bin(Op::And, ge, lt));
    if (valid) {
      KILN_ONNX_TRY(valid, E.bin(Op::And, valid, ok));
    } else {
      valid = ok;
    }
    if (span != 1) {
      KILN_ONNX_TRY(comp, E.bin(Op::Mul, comp, double(span)));
    }
    if (flat) {
      KILN_ONNX_TRY(flat, E.bin(Op::Add, flat, comp));
    } else {
      flat = comp;
    }
    span *= len;
  }
  KILN_ONNX_TRY(const ir::Node* dropped, E.k(double(n), i64));
  KILN_ONNX_TRY(flat, c.check(B.where(valid, flat, dropped)));  // [m, 1]
  KILN_ONNX_TRY(flat, c.check(B.expand(flat, {m, rest})));
  KILN_ONNX_TRY(const ir::Node* data, c.check(B.reshape(x, {n, rest})));
  KILN_ONNX_TRY(const ir::Node* u, c.check(B.reshape(upd, {m, rest})));
  KILN_ONNX_TRY(const ir::Node* y, c.check(B.scatter_elements(data, flat, u, 0, reduction)));
  return one(c, B.reshape(y, x->shape));
}

// MaxUnpool: zeros of the unpooled shape [N, C, spatial...] ((in - 1) * stride + kernel - pads
// per spatial axis) with X written at its flat indices I (MaxPool's Indices: positions in the
// whole flattened tensor), then padded with zeros at the end of each axis up to output_shape
// when that is given (ONNX's reference). Each (n, c) plane's indices are made relative to it, so
// the scatter runs along the plane's axis of an [N*C, plane] view.
Outs max_unpool(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  KILN_ONNX_TRY(const ir::Node* idx, c.x(1));
  const int64_t r = x->shape.size();
  if (r < 3) return c.fail("X must be [N, C, spatial...]");
  if (idx->shape != x->shape) return c.fail("X and I differ in shape");
  const int64_t sp = r - 2;
  std::vector<int64_t> kernel = c.attr_ints("kernel_shape").value_or(std::vector<int64_t>{});
  if (int64_t(kernel.size()) != sp) return c.fail("kernel_shape must give every spatial axis");
  std::vector<int64_t> strides = c.attr_ints("strides").value_or(std::vector<int64_t>(sp, 1));
  std::vector<int64_t> pads = c.attr_ints("pads").value_or(std::vector<int64_t>(2 * sp, 0));
  if (int64_t(strides.size()) != sp || int64_t(pads.size()) != 2 * sp)
    return c.fail("strides and pads must give every spatial axis");
  // The unpooled extents, from the model's attributes: each checked before it is used, and every
  // product bounded (kiln indexes at most 2^59 elements; the builder checks the total).
  constexpr int64_t kMaxExtent = int64_t(1) << 40;
  ir::Shape out(x->shape.begin(), x->shape.begin() + 2);
  for (int64_t d = 0; d < sp; ++d) {
    if (strides[d] < 1 || strides[d] > kMaxExtent || kernel[d] < 1 || kernel[d] > kMaxExtent || pads[d] < 0 ||
        pads[sp + d] < 0 || pads[d] > kMaxExtent || pads[sp + d] > kMaxExtent)
      return c.fail(fmt::format("spatial axis {}: kernel {}, stride {} and pads {}, {} must be positive (pads "
                                "non-negative) and at most 2^40",
                                d, kernel[d], strides[d], pads[d], pads[sp + d]));
    const int64_t n = x->shape[2 + d];
    if (n > 0 && n - 1 > kMaxExtent / strides[d])
      return c.fail(fmt::format("spatial axis {}: {} positions at stride {} overflow", d, n, strides[d]));
    const int64_t extent = (n - 1) * strides[d] + kernel[d] - pads[d] - pads[sp + d];
    if (extent <= 0)
      return c.fail(fmt::format("spatial axis {}: the unpooled extent {} is not positive", d, extent));
    out.push_back(extent);
  }
  int64_t total = 1;
  for (int64_t e : out)
    if (e > 0 && total > (int64_t(1) << 59) / e)
      return c.fail(fmt::format("the unpooled shape {} has too many elements", ir::shape_str(out)));
    else
      total *= e;
  std::vector<int64_t> padded = out;
  if (c.has(2)) {
    KILN_ONNX_TRY(padded, c.ints(2, "output_shape"));
    if (int64_t(padded.size()) != r) return c.fail("output_shape must have X's rank");
    for (int64_t d = 0; d < r; ++d)
      if (padded[d] < out[d] || (d < 2 && padded[d] != out[d]))
        return c.unsupported(
            fmt::format("output_shape {} smaller than the unpooled {}, or with "
                        "other N or C",
                        ir::shape_str(padded), ir::shape_str(out)));
  }
  ir::Builder& B = c.b();
  Expr E{c};
  const int64_t planes = x->shape[0] * x->shape[1];
  int64_t plane = 1, in_plane = 1;
  for (int64_t d = 2; d < r; ++d) plane *= out[d], in_plane *= x->shape[d];
  KILN_ONNX_TRY(const ir::Node* rel, c.check(B.cast(idx, ir::DType::i64)));
  KILN_ONNX_TRY(rel, c.check(B.reshape(rel, {planes, in_plane})));
  KILN_ONNX_TRY(const ir::Node* base, c.check(B.arange(0, planes, 1, ir::DType::i64)));
  KILN_ONNX_TRY(base, c.check(B.reshape(base, {planes, 1})));
  KILN_ONNX_TRY(base, E.bin(Op::Mul, base, double(plane)));
  KILN_ONNX_TRY(rel, E.bin(Op::Sub, rel, base));
  // A negative relative index belongs to an earlier plane: made out of range (dropped), not
  // wrapped.
  KILN_ONNX_TRY(const ir::Node* neg, E.bin(Op::Lt, rel, 0.0));
  KILN_ONNX_TRY(const ir::Node* dropped, E.k(double(plane), ir::DType::i64));
  KILN_ONNX_TRY(rel, c.check(B.where(neg, dropped, rel)));
  KILN_ONNX_TRY(const ir::Node* zeros, c.check(B.full({planes, plane}, 0.0, x->dtype)));
  KILN_ONNX_TRY(const ir::Node* u, c.check(B.reshape(x, {planes, in_plane})));
  KILN_ONNX_TRY(const ir::Node* y, c.check(B.scatter_elements(zeros, rel, u, 1, "none")));
  KILN_ONNX_TRY(y, c.check(B.reshape(y, out)));
  if (padded == out) return std::vector<Value>{c.out(y)};
  std::vector<int64_t> before(r, 0), after(r, 0);
  for (int64_t d = 0; d < r; ++d) after[d] = padded[d] - out[d];
  return one(c, B.pad(y, before, after, 0.0));
}

// loss[n, d...] = -x[n, t[n, d...], d...] * weight[t[...]], 0 where t == ignore_index; reduced
// by none, sum, or mean (divided by the summed weights).
Expected<std::vector<const ir::Node*>> nll(Context& c, const ir::Node* x, const ir::Node* t,
                                           const ir::Node* weight, std::optional<int64_t> ignore,
                                           const std::string& reduction) {
  ir::Builder& B = c.b();
  const int64_t rank = x->shape.size();
  if (rank < 2 || int64_t(t->shape.size()) != rank - 1) return c.fail("input [N, C, ...] and target [N, ...] expected");
  if (!ir::is_int(t->dtype)) return c.fail("target must be integers");
  const int64_t classes = x->shape[1];
  for (size_t d = 0; d < t->shape.size(); ++d)
    if (t->shape[d] != x->shape[d == 0 ? 0 : d + 1])
      return c.fail(fmt::format("target {} does not fit input {}", ir::shape_str(t->shape), ir::shape_str(x->shape)));
  // x[n, t[n, d...], d...] and weight[t[...]] by gather (an index load: O(1) per element). An
  // ignored target (any value, in range or not) gives 0 through `where`, never a product with an
  // element it clamped to.
  ir::Shape tshape = t->shape;
  tshape.insert(tshape.begin() + 1, 1);
  KILN_ONNX_TRY(const ir::Node* tu, c.check(B.reshape(t, tshape)));
  KILN_ONNX_TRY(const ir::Node* picked, c.check(B.gather_elements(x, tu, 1)));
  KILN_ONNX_TRY(picked, c.check(B.reshape(picked, t->shape)));
  KILN_ONNX_TRY(const ir::Node* zero, c.check(B.scalar(0, x->dtype)));
  KILN_ONNX_TRY(const ir::Node* w, c.check(B.full(t->shape, 1, x->dtype)));
  if (weight) {
    if (weight->shape != ir::Shape{classes}) return c.fail(fmt::format("weight must be [{}]", classes));
    KILN_ONNX_TRY(w, c.check(B.gather(weight, t, 0)));
  }
  if (ignore) {
    KILN_ONNX_TRY(const ir::Node* ig, c.check(B.scalar(double(*ignore), t->dtype)));
    KILN_ONNX_TRY(const ir::Node* keep, c.check(B.binary(Op::Ne, t, ig)));
    KILN_ONNX_TRY(w, c.check(B.where(keep, w, zero)));
    KILN_ONNX_TRY(picked, c.check(B.where(keep, picked, zero)));
  }
  KILN_ONNX_TRY(const ir::Node* pw, c.check(B.binary(Op::Mul, picked, w)));
  KILN_ONNX_TRY(const ir::Node* loss, c.check(B.unary(Op::Neg, pw)));
  if (reduction == "none") return std::vector<const ir::Node*>{loss};
  KILN_ONNX_TRY(const ir::Node* total, c.check(B.reduce(Op::Sum, loss, std::nullopt, false)));
  if (reduction == "sum") return std::vector<const ir::Node*>{total};
  if (reduction != "mean") return c.unsupported(fmt::format("reduction '{}'", reduction));
  KILN_ONNX_TRY(const ir::Node* wsum, c.check(B.reduce(Op::Sum, w, std::nullopt, false)));
  KILN_ONNX_TRY(const ir::Node* mean, c.check(B.binary(Op::Div, total, wsum)));
  return std::vector<const ir::Node*>{mean};
}

std::optional<int64_t> ignore_index(Context& c) {
  if (const AttributeProto* a = c.attr("ignore_index")) return a->i;
  return std::nullopt;
}

// NegativeLogLikelihoodLoss on log-probabilities; SoftmaxCrossEntropyLoss (`from_logits`) on
// scores, through log_softmax over the class axis, with log-probabilities as its second output.
OpImporter nll_loss(bool from_logits) {
  return [from_logits](Context& c) -> Outs {
    KILN_ONNX_TRY(const ir::Node* x, c.x(0));
    KILN_ONNX_TRY(const ir::Node* t, c.x(1));
    const ir::Node* weight = nullptr;
    if (c.has(2)) { KILN_ONNX_TRY(weight, c.x(2)); }
    auto ignore = ignore_index(c);
    std::string reduction = c.attr_s("reduction").value_or("mean");
    if (from_logits) { KILN_ONNX_TRY(x, c.check(c.b().log_softmax(x, 1))); }
    KILN_ONNX_TRY(auto out, nll(c, x, t, weight, ignore, reduction));
    if (!from_logits) return std::vector<Value>{c.out(out[0])};
    return std::vector<Value>{c.out(out[0]), c.out(x)};
  };
}

// Hardmax: 1 at the first maximum along the axis (the whole flattened inner part before opset 13).
Outs hardmax(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  ir::Builder& B = c.b();
  const int64_t rank = x->shape.size();
  const ir::Shape shape = x->shape;
  int64_t axis;
  if (c.opset() >= 13) {
    KILN_ONNX_TRY(axis, axis_of(c, c.attr_i("axis", -1), rank));
  } else {
    KILN_ONNX_TRY(int64_t a, axis_of(c, c.attr_i("axis", 1), rank));
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < rank; ++d) (d < a ? outer : inner) *= shape[d];
    KILN_ONNX_TRY(x, c.check(B.reshape(x, {outer, inner})));
    axis = 1;
  }
  const int64_t r = x->shape.size();
  KILN_ONNX_TRY(const ir::Node* am, c.check(B.arg_reduce(Op::ArgMax, x, axis, true)));
  KILN_ONNX_TRY(const ir::Node* ks, iota_along(c, x->shape[axis], axis, r, am->dtype));
  KILN_ONNX_TRY(const ir::Node* hot, c.check(B.binary(Op::Eq, am, ks)));
  KILN_ONNX_TRY(const ir::Node* y, c.check(B.cast(hot, x->dtype)));
  if (y->shape != shape) { KILN_ONNX_TRY(y, c.check(B.reshape(y, shape))); }
  return std::vector<Value>{c.out(y)};
}

// CumSum: kiln's cumsum (one running sum per row, O(length) work), axis an input (negative
// counts from the end), exclusive and reverse attributes.
Outs cumsum(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  KILN_ONNX_TRY(double a, c.scalar_of(1, "axis"));
  const bool exclusive = c.attr_i("exclusive", 0) != 0, reverse = c.attr_i("reverse", 0) != 0;
  KILN_ONNX_TRY(int64_t axis,
                axis_of(c, static_cast<int64_t>(a), static_cast<int64_t>(x->shape.size())));
  KILN_ONNX_TRY(const ir::Node* y, c.check(c.b().cumsum(x, axis, exclusive, reverse)));
  return std::vector<Value>{c.out(y)};
}

// TopK: opset 1 takes k as an attribute, opsets 10 and later as input 1 (a one-element i64 tensor,
// a constant at import); axis (default -1), largest and sorted (opset 11, default 1). Outputs:
// the values and their i64 indices, best first, ties to the lower index (kiln always sorts, which
// sorted = 0 allows).
Outs topk(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  int64_t k = 0;
  if (c.has(1)) {
    KILN_ONNX_TRY(std::vector<int64_t> ks, c.ints(1, "K"));
    if (ks.size() != 1) return c.fail(fmt::format("K has {} elements, not 1", ks.size()));
    k = ks[0];
  } else if (auto a = c.attr("k")) {
    k = a->i;
  } else {
    return c.fail("neither the input K nor the attribute k");
  }
  const bool largest = c.attr_i("largest", 1) != 0;
  c.attr_i("sorted", 1);  // read: any order is allowed when 0, and kiln's is sorted
  KILN_ONNX_TRY(int64_t axis,
                axis_of(c, c.attr_i("axis", -1), static_cast<int64_t>(x->shape.size())));
  KILN_ONNX_TRY(const ir::Node* idx, c.check(c.b().topk_indices(x, k, axis, largest)));
  KILN_ONNX_TRY(const ir::Node* values, c.check(c.b().gather_elements(x, idx, axis)));
  return std::vector<Value>{c.out(values), c.out(idx)};
}

// EyeLike: ones where col - row == k, of the input's shape (2-D) and `dtype` (else the input's).
Outs eye_like(Context& c) {
  if (!c.has(0)) return c.fail("input 0 is missing");
  const ir::Shape shape = c.in(0).shape;
  ir::DType dtype = c.in(0).dtype;
  if (const AttributeProto* d = c.attr("dtype")) {
    auto t = onnx_dtype(static_cast<int32_t>(d->i));
    if (!t) return c.unsupported(t.error().message);
    dtype = *t;
  }
  int64_t k = c.attr_i("k", 0);
  if (shape.size() != 2) return c.fail("needs a matrix");
  ir::Builder& B = c.b();
  KILN_ONNX_TRY(const ir::Node* rows, iota_along(c, shape[0], 0, 2, ir::DType::i64));
  KILN_ONNX_TRY(const ir::Node* cols, iota_along(c, shape[1], 1, 2, ir::DType::i64));
  KILN_ONNX_TRY(const ir::Node* diff, c.check(B.binary(Op::Sub, cols, rows)));
  KILN_ONNX_TRY(const ir::Node* kk, c.check(B.scalar(double(k), ir::DType::i64)));
  KILN_ONNX_TRY(const ir::Node* on, c.check(B.binary(Op::Eq, diff, kk)));
  KILN_ONNX_TRY(const ir::Node* y, c.check(B.cast(on, dtype)));
  return std::vector<Value>{c.out(y)};
}

// OneHot: on where the (wrapped, truncated) index equals the position along the new axis.
Outs one_hot(Context& c) {
  KILN_ONNX_TRY(const ir::Node* idx, c.x(0));
  KILN_ONNX_TRY(double depth_v, c.scalar_of(1, "depth"));
  KILN_ONNX_TRY(const ir::Node* values, c.x(2));
  if (values->numel() != 2) return c.fail("values must hold [off, on]");
  // ONNX: depth > 0 (NaN, an infinity or a value past int64 converted to a garbage size).
  if (!(depth_v >= 1 && depth_v < 9.2e18))
    return c.fail(fmt::format("depth is {}; it must be a positive number", depth_v));
  const int64_t depth = static_cast<int64_t>(depth_v);
  const int64_t rank = idx->shape.size() + 1;
  KILN_ONNX_TRY(int64_t axis, axis_of(c, c.attr_i("axis", -1), rank));
  ir::Builder& B = c.b();
  if (idx->dtype != ir::DType::i64) { KILN_ONNX_TRY(idx, c.check(B.cast(idx, ir::DType::i64))); }
  KILN_ONNX_TRY(const ir::Node* zero, c.check(B.scalar(0, ir::DType::i64)));
  KILN_ONNX_TRY(const ir::Node* d, c.check(B.scalar(double(depth), ir::DType::i64)));
  KILN_ONNX_TRY(const ir::Node* neg, c.check(B.binary(Op::Lt, idx, zero)));
  KILN_ONNX_TRY(const ir::Node* wrapped, c.check(B.binary(Op::Add, idx, d)));
  KILN_ONNX_TRY(idx, c.check(B.where(neg, wrapped, idx)));
  ir::Shape us = idx->shape;
  us.insert(us.begin() + axis, 1);
  KILN_ONNX_TRY(const ir::Node* iu, c.check(B.reshape(idx, us)));
  KILN_ONNX_TRY(const ir::Node* ks, iota_along(c, depth, axis, rank, ir::DType::i64));
  KILN_ONNX_TRY(const ir::Node* hot, c.check(B.binary(Op::Eq, iu, ks)));
  KILN_ONNX_TRY(const ir::Node* flat, c.check(B.reshape(values, {2})));
  KILN_ONNX_TRY(const ir::Node* off, c.check(B.slice(flat, 0, 0, 1, 1)));
  KILN_ONNX_TRY(const ir::Node* on, c.check(B.slice(flat, 0, 1, 2, 1)));
  KILN_ONNX_TRY(off, c.check(B.reshape(off, {})));
  KILN_ONNX_TRY(on, c.check(B.reshape(on, {})));
  KILN_ONNX_TRY(const ir::Node* y, c.check(B.where(hot, on, off)));
  return std::vector<Value>{c.out(y)};
}

// DepthToSpace (DCR or CRD) and SpaceToDepth: a reshape, a permute and a reshape.
Outs depth_to_space(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  const int64_t b = c.attr_i("blocksize", 0);
  const std::string mode = c.attr_s("mode").value_or("DCR");
  if (x->shape.size() != 4 || b <= 0 || x->shape[1] % (b * b)) return c.fail("needs [N, C, H, W] with C a multiple of blocksize^2");
  if (mode != "DCR" && mode != "CRD") return c.fail(fmt::format("mode '{}'", mode));
  const int64_t n = x->shape[0], ch = x->shape[1] / (b * b), h = x->shape[2], w = x->shape[3];
  ir::Builder& B = c.b();
  const bool dcr = mode == "DCR";
  KILN_ONNX_TRY(x, c.check(B.reshape(x, dcr ? ir::Shape{n, b, b, ch, h, w} : ir::Shape{n, ch, b, b, h, w})));
  KILN_ONNX_TRY(x, c.check(B.permute(x, dcr ? std::vector<int64_t>{0, 3, 4, 1, 5, 2}
                                             : std::vector<int64_t>{0, 1, 4, 2, 5, 3})));
  KILN_ONNX_TRY(x, c.check(B.reshape(x, {n, ch, h * b, w * b})));
  return std::vector<Value>{c.out(x)};
}

Outs space_to_depth(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  const int64_t b = c.attr_i("blocksize", 0);
  if (x->shape.size() != 4 || b <= 0 || x->shape[2] % b || x->shape[3] % b)
    return c.fail("needs [N, C, H, W] with H and W multiples of blocksize");
  const int64_t n = x->shape[0], ch = x->shape[1], h = x->shape[2] / b, w = x->shape[3] / b;
  ir::Builder& B = c.b();
  KILN_ONNX_TRY(x, c.check(B.reshape(x, {n, ch, h, b, w, b})));
  KILN_ONNX_TRY(x, c.check(B.permute(x, {0, 3, 5, 1, 2, 4})));
  KILN_ONNX_TRY(x, c.check(B.reshape(x, {n, ch * b * b, h, w})));
  return std::vector<Value>{c.out(x)};
}

// ReverseSequence: along time_axis, each batch entry's first sequence_lens[b] elements reversed,
// the rest as they are: a gather_elements by the index t < len ? len - 1 - t : t, computed on the
// device from the lengths (which may be a runtime input).
Outs reverse_sequence(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  KILN_ONNX_TRY(const ir::Node* lens, c.x(1));
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  if (rank < 2) return c.fail("input must have at least 2 axes");
  const int64_t batch_axis = c.attr_i("batch_axis", 1), time_axis = c.attr_i("time_axis", 0);
  if (!((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0)))
    return c.fail(fmt::format("batch_axis {} and time_axis {}: one must be 0, the other 1", batch_axis, time_axis));
  if (!ir::is_int(lens->dtype) || lens->shape != ir::Shape{x->shape[size_t(batch_axis)]})
    return c.fail(fmt::format("sequence_lens must be [{}] integers", x->shape[size_t(batch_axis)]));
  Expr e{c};
  ir::Builder& B = c.b();
  KILN_ONNX_TRY(const ir::Node* t, iota_along(c, x->shape[size_t(time_axis)], time_axis, rank, ir::DType::i64));
  ir::Shape len_shape(size_t(rank), 1);
  len_shape[size_t(batch_axis)] = x->shape[size_t(batch_axis)];
  KILN_ONNX_TRY(const ir::Node* len, c.check(B.cast(lens, ir::DType::i64)));
  KILN_ONNX_TRY(len, c.check(B.reshape(len, std::vector<int64_t>(len_shape.begin(), len_shape.end()))));
  KILN_ONNX_TRY(const ir::Node* inside, e.bin(Op::Lt, t, len));
  KILN_ONNX_TRY(const ir::Node* back, e.bin(Op::Sub, len, t));
  KILN_ONNX_TRY(back, e.bin(Op::Sub, back, 1.0));
  KILN_ONNX_TRY(const ir::Node* idx, c.check(B.where(inside, back, t)));
  KILN_ONNX_TRY(idx, c.check(B.expand(idx, x->shape)));
  return one(c, B.gather_elements(x, idx, time_axis));
}

}  // namespace

void add_index_ops(OpTable& t) {
  t["ReverseSequence"] = reverse_sequence;
  t["OneHot"] = one_hot;
  t["DepthToSpace"] = depth_to_space;
  t["SpaceToDepth"] = space_to_depth;
  t["GatherElements"] = gather_elements;
  t["GatherND"] = gather_nd;
  t["ScatterElements"] = scatter_elements;
  t["Scatter"] = scatter_elements;
  t["ScatterND"] = scatter_nd;
  t["MaxUnpool"] = max_unpool;
  t["NegativeLogLikelihoodLoss"] = nll_loss(false);
  t["SoftmaxCrossEntropyLoss"] = nll_loss(true);
  t["Hardmax"] = hardmax;
  t["CumSum"] = cumsum;
  t["TopK"] = topk;
  t["EyeLike"] = eye_like;
}

}  // namespace kiln::onnx
