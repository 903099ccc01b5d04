// The op functions of the public API: each records its node(s) through ir::Builder.
#include "ir/builder_support.h"
#include "tensor_impl.h"

namespace kiln {

using detail::TensorImpl;
using ir::Builder;
using ir::NodeResult;
using ir::Op;
using detail::Nodes;

namespace {
using Deps = std::vector<std::shared_ptr<TensorImpl>>;

Tensor unary(Op op, const Tensor& x) {
  return TensorImpl::apply_typed(
      {&x}, [op](const Deps& d) { return Builder::unary_type(op, d[0]->dtype, d[0]->shape); },
      [op](Builder& b, const Nodes& n) { return b.unary(op, n[0]); });
}
Tensor binary(Op op, const Tensor& a, const Tensor& c) {
  return TensorImpl::apply_typed(
      {&a, &c},
      [op](const Deps& d) {
        return Builder::binary_type(op, d[0]->dtype, d[0]->shape, d[1]->dtype, d[1]->shape);
      },
      [op](Builder& b, const Nodes& n) { return b.binary(op, n[0], n[1]); });
}
// where is the one ternary row of kiln/ops.def.
Tensor ternary(Op op, const Tensor& cond, const Tensor& a, const Tensor& c) {
  KILN_CHECK(op == Op::Where) << ir::op_enum_name(op);
  return TensorImpl::apply({&cond, &a, &c},
                           [](Builder& b, const Nodes& n) { return b.where(n[0], n[1], n[2]); });
}
// A scalar operand takes the dtype of the tensor operand. (The recipe's captures fit in 16
// bytes, which std::function keeps without allocating.)
Tensor binary_scalar(Op op, const Tensor& a, double s, bool scalar_first) {
  struct Scalar {
    double value;
    Op op;
    bool first;
  };
  const Scalar c{s, op, scalar_first};
  return TensorImpl::apply_typed(
      {&a},
      [c](const Deps& d) -> Expected<ir::ValueType> {
        const DType t = d[0]->dtype;
        if (auto ok = Builder::check_scalar(c.value, t, ir::op_name(c.op)); !ok)
          return std::unexpected(ok.error());
        return c.first ? Builder::binary_type(c.op, t, {}, t, d[0]->shape)
                       : Builder::binary_type(c.op, t, d[0]->shape, t, {});
      },
      [c](Builder& b, const Nodes& n) -> NodeResult {
        auto lit = b.scalar(c.value, n[0]->dtype);
        if (!lit) return lit;
        return c.first ? b.binary(c.op, *lit, n[0]) : b.binary(c.op, n[0], *lit);
      });
}
std::optional<std::vector<int64_t>> axes_or_all(std::vector<int64_t> axes) {
  if (axes.empty()) return std::nullopt;
  return axes;
}
Tensor reduction(Op op, const Tensor& x, std::vector<int64_t> axes, bool keepdim) {
  return TensorImpl::apply({&x}, [=](Builder& b, const Nodes& n) {
    return b.reduce(op, n[0], axes_or_all(axes), keepdim);
  });
}
}  // namespace

// One function per elementwise row of kiln/ops.def, named by its `api` column (kiln.h declares
// them from the same column). KILN_API_* turn the column into "form, name" for KILN_DEFINE_.
#define KILN_API_unary(fn) unary, fn
#define KILN_API_binary(fn) binary, fn
#define KILN_API_ternary(fn) ternary, fn
#define KILN_API_member(fn) member, fn
#define KILN_API_manual(fn) manual, fn
#define KILN_DEFINE(...) KILN_DEFINE_(__VA_ARGS__)
#define KILN_DEFINE_(Enum, form, fn) KILN_DEFINE_##form(Enum, fn)
#define KILN_DEFINE_unary(Enum, fn) \
  Tensor fn(const Tensor& x) { return unary(Op::Enum, x); }
#define KILN_DEFINE_binary(Enum, fn) \
  Tensor fn(const Tensor& a, const Tensor& b) { return binary(Op::Enum, a, b); }
#define KILN_DEFINE_ternary(Enum, fn)                            \
  Tensor fn(const Tensor& cond, const Tensor& a, const Tensor& b) { \
    return ternary(Op::Enum, cond, a, b);                          \
  }
#define KILN_DEFINE_member(Enum, fn)  // Tensor::cast, below
#define KILN_DEFINE_manual(Enum, fn)  // clip, below
#define KILN_ELEMENTWISE(Enum, name, arity, dtypes, cost, api) KILN_DEFINE(Enum, KILN_API_##api)
#include "kiln/ops.def"
#undef KILN_API_unary
#undef KILN_API_binary
#undef KILN_API_ternary
#undef KILN_API_member
#undef KILN_API_manual
#undef KILN_DEFINE
#undef KILN_DEFINE_
#undef KILN_DEFINE_unary
#undef KILN_DEFINE_binary
#undef KILN_DEFINE_ternary
#undef KILN_DEFINE_member
#undef KILN_DEFINE_manual

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return binary_scalar(Op::Add, a, b, false); }
Tensor operator-(const Tensor& a, double b) { return binary_scalar(Op::Sub, a, b, false); }
Tensor operator*(const Tensor& a, double b) { return binary_scalar(Op::Mul, a, b, false); }
Tensor operator/(const Tensor& a, double b) { return binary_scalar(Op::Div, a, b, false); }
Tensor operator+(double a, const Tensor& b) { return binary_scalar(Op::Add, b, a, true); }
Tensor operator-(double a, const Tensor& b) { return binary_scalar(Op::Sub, b, a, true); }
Tensor operator*(double a, const Tensor& b) { return binary_scalar(Op::Mul, b, a, true); }
Tensor operator/(double a, const Tensor& b) { return binary_scalar(Op::Div, b, a, true); }
Tensor Tensor::operator-() const { return neg(*this); }

Tensor concat(const std::vector<Tensor>& xs, int64_t axis) {
  std::vector<const Tensor*> ops;
  for (const Tensor& x : xs) ops.push_back(&x);
  return TensorImpl::apply(ops, [axis](Builder& b, const Nodes& n) { return b.concat(n, axis); });
}
Tensor matmul(const Tensor& a, const Tensor& c) {
  return TensorImpl::apply({&a, &c}, [](Builder& b, const Nodes& n) { return b.matmul(n[0], n[1]); });
}

Tensor gather(const Tensor& x, const Tensor& idx, int64_t axis) {
  return TensorImpl::apply(
      {&x, &idx}, [axis](Builder& b, const Nodes& n) { return b.gather(n[0], n[1], axis); });
}

Tensor gather_elements(const Tensor& x, const Tensor& idx, int64_t axis) {
  return TensorImpl::apply({&x, &idx}, [axis](Builder& b, const Nodes& n) {
    return b.gather_elements(n[0], n[1], axis);
  });
}

Tensor clip(const Tensor& x, const std::optional<Tensor>& lo, const std::optional<Tensor>& hi) {
  std::vector<const Tensor*> operands{&x};
  if (lo) operands.push_back(&*lo);
  if (hi) operands.push_back(&*hi);
  const bool has_lo = lo.has_value(), has_hi = hi.has_value();
  return TensorImpl::apply(operands, [has_lo, has_hi](Builder& b, const Nodes& n) {
    return b.clip(n[0], has_lo ? n[1] : nullptr, has_hi ? n[has_lo ? 2 : 1] : nullptr);
  });
}
Tensor clip(const Tensor& x, double lo, double hi) {
  return TensorImpl::apply({&x}, [lo, hi](Builder& b, const Nodes& n) -> NodeResult {
    KILN_IR_OK(Builder::check_scalar(lo, n[0]->dtype, "clip"));
    KILN_IR_OK(Builder::check_scalar(hi, n[0]->dtype, "clip"));
    KILN_IR_TRY(const ir::Node* l, b.scalar(lo, n[0]->dtype));
    KILN_IR_TRY(const ir::Node* h, b.scalar(hi, n[0]->dtype));
    return b.clip(n[0], l, h);
  });
}

Tensor trilu(const Tensor& x, int64_t k, bool upper) {
  return TensorImpl::apply({&x}, [=](Builder& b, const Nodes& n) { return b.trilu(n[0], k, upper); });
}

Tensor scatter_elements(const Tensor& x, const Tensor& idx, const Tensor& upd, int64_t axis,
                        std::string_view reduction) {
  return TensorImpl::apply({&x, &idx, &upd},
                           [axis, r = std::string(reduction)](Builder& b, const Nodes& n) {
                             return b.scatter_elements(n[0], n[1], n[2], axis, r);
                           });
}

Tensor cumsum(const Tensor& x, int64_t axis, bool exclusive, bool reverse) {
  return TensorImpl::apply(
      {&x}, [=](Builder& b, const Nodes& n) { return b.cumsum(n[0], axis, exclusive, reverse); });
}

TopK topk(const Tensor& x, int64_t k, int64_t axis, bool largest, bool /*sorted*/) {
  // Values are a gather at the indices (fused as an indexed load into their readers), so the
  // graph IR needs one single-output primitive, not a node with two results.
  Tensor indices = TensorImpl::apply(
      {&x}, [=](Builder& b, const Nodes& n) { return b.topk_indices(n[0], k, axis, largest); });
  Tensor values = gather_elements(x, indices, axis);
  return TopK{std::move(values), std::move(indices)};
}

Tensor softmax(const Tensor& x, int64_t axis) {
  return TensorImpl::apply({&x}, [axis](Builder& b, const Nodes& n) { return b.softmax(n[0], axis); });
}
Tensor log_softmax(const Tensor& x, int64_t axis) {
  return TensorImpl::apply({&x},
                           [axis](Builder& b, const Nodes& n) { return b.log_softmax(n[0], axis); });
}
Tensor layernorm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int64_t axis, double eps) {
  return TensorImpl::apply({&x, &gamma, &beta}, [=](Builder& b, const Nodes& n) {
    return b.layernorm(n[0], n[1], n[2], axis, eps);
  });
}
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                 std::optional<double> scale) {
  return TensorImpl::apply({&q, &k, &v}, [=](Builder& b, const Nodes& n) {
    return b.attention(n[0], n[1], n[2], causal, scale);
  });
}

Tensor Tensor::cast(DType to) const {
  return TensorImpl::apply({this}, [to](Builder& b, const Nodes& n) { return b.cast(n[0], to); });
}
Tensor Tensor::sum(std::vector<int64_t> axes, bool keepdim) const {
  return reduction(Op::Sum, *this, std::move(axes), keepdim);
}
Tensor Tensor::max(std::vector<int64_t> axes, bool keepdim) const {
  return reduction(Op::ReduceMax, *this, std::move(axes), keepdim);
}
Tensor Tensor::min(std::vector<int64_t> axes, bool keepdim) const {
  return reduction(Op::ReduceMin, *this, std::move(axes), keepdim);
}
Tensor Tensor::prod(std::vector<int64_t> axes, bool keepdim) const {
  return reduction(Op::Prod, *this, std::move(axes), keepdim);
}
Tensor Tensor::mean(std::vector<int64_t> axes, bool keepdim) const {
  return TensorImpl::apply({this}, [=](Builder& b, const Nodes& n) {
    return b.mean(n[0], axes_or_all(axes), keepdim);
  });
}
Tensor Tensor::argmax(int64_t axis, bool keepdim) const {
  return TensorImpl::apply({this}, [=](Builder& b, const Nodes& n) {
    return b.arg_reduce(Op::ArgMax, n[0], axis, keepdim);
  });
}
Tensor Tensor::argmin(int64_t axis, bool keepdim) const {
  return TensorImpl::apply({this}, [=](Builder& b, const Nodes& n) {
    return b.arg_reduce(Op::ArgMin, n[0], axis, keepdim);
  });
}
Tensor Tensor::reshape(std::vector<int64_t> shape) const {
  return TensorImpl::apply({this}, [=](Builder& b, const Nodes& n) { return b.reshape(n[0], shape); });
}
Tensor Tensor::permute(std::vector<int64_t> dims) const {
  return TensorImpl::apply({this}, [=](Builder& b, const Nodes& n) { return b.permute(n[0], dims); });
}
Tensor Tensor::transpose() const {
  return TensorImpl::apply({this}, [](Builder& b, const Nodes& n) -> NodeResult {
    int64_t r = static_cast<int64_t>(n[0]->shape.size());
    if (r < 2) return kiln::make_error("transpose: needs rank >= 2, got " + ir::shape_str(n[0]->shape));
    std::vector<int64_t> dims(r);
    for (int64_t i = 0; i < r; ++i) dims[i] = i;
    std::swap(dims[r - 1], dims[r - 2]);
    return b.permute(n[0], dims);
  });
}
Tensor Tensor::expand(Shape shape) const {
  return TensorImpl::apply({this}, [=](Builder& b, const Nodes& n) { return b.expand(n[0], shape); });
}
Tensor Tensor::slice(int64_t axis, std::optional<int64_t> start, std::optional<int64_t> end,
                     int64_t step) const {
  return TensorImpl::apply(
      {this}, [=](Builder& b, const Nodes& n) { return b.slice(n[0], axis, start, end, step); });
}
Tensor Tensor::pad(std::vector<int64_t> before, std::vector<int64_t> after, double value) const {
  return TensorImpl::apply(
      {this}, [=](Builder& b, const Nodes& n) { return b.pad(n[0], before, after, value); });
}
Tensor Tensor::flip(std::vector<int64_t> axes) const {
  return TensorImpl::apply({this}, [=](Builder& b, const Nodes& n) { return b.flip(n[0], axes); });
}
Tensor Tensor::roll(std::vector<int64_t> shifts, std::vector<int64_t> axes) const {
  return TensorImpl::apply({this},
                           [=](Builder& b, const Nodes& n) { return b.roll(n[0], shifts, axes); });
}
Tensor Tensor::unfold(int64_t dim, int64_t size, int64_t step) const {
  return TensorImpl::apply(
      {this}, [=](Builder& b, const Nodes& n) { return b.unfold(n[0], dim, size, step); });
}

}  // namespace kiln
