// Checked construction of graph IR nodes: dtype and shape rules, numpy broadcasting, and the
// composites (mean, softmax, log_softmax, layernorm, attention) expanded into primitives.
//
// Rules (the reference interpreter and every backend implement exactly these):
// - Binary ops broadcast like numpy; both operands must have the same dtype (no implicit
//   promotion; a scalar literal takes the dtype of the op's tensor operand).
// - eq ne lt le gt ge -> bool. and, or, not: bool only.
// - exp log sqrt rsqrt recip sin cos tanh sigmoid gelu erf floor ceil pow: floating dtypes only.
// - neg abs sign relu add sub mul div max min sum prod: any dtype but bool.
//   Integer div is floor division (numpy floor_divide); integer division by zero yields 0.
// - argmax/argmin -> i32, first index on ties; the first NaN wins for both (numpy).
// - cumsum: any dtype but bool, rank >= 1; the sum runs in scan order (from the end if reverse).
// - topk_indices: any dtype but bool, rank >= 1, 0 <= k <= n -> i64 indices, best first; ties
//   give the lower index first; NaN ranks above every number (first when largest, last when
//   smallest), like torch.topk and numpy's sort.
// - Binary max/min and reduce max/min propagate NaN (numpy maximum / max).
// - reduce `axes` are normalized (non-negative, sorted, unique); no axes = all axes.
// - matmul follows numpy.matmul: 1-D operands are promoted and the added axis removed again
//   (expressed with reshape around a batched matmul node of rank >= 2).
// Every error names the op and the offending shapes, dtypes or attributes.
#pragma once

#include <array>
#include <optional>
#include <string_view>
#include <variant>
#include <vector>

#include "ir/graph.h"
#include "ir/resize_taps.h"
#include "kiln/error.h"

namespace kiln::ir {

using NodeResult = Expected<const Node*>;

// The scale a mean over `count` elements multiplies its sum by (Builder::mean): the double
// 1.0 / count. A shape family keeps `count` as a size (runtime/structural_key.h), and a symbolic
// plan computes a kernel's float slot from it (runtime/plan_family.h), so both take it from here.
double mean_scale(int64_t count);
// The count n >= 2 whose mean_scale is `scale`, bit for bit, or nullopt.
std::optional<int64_t> mean_count(double scale);

// An argument of a `.kg` call: a value or a numeric literal (an integer literal as written,
// so that an i64 operand takes it exactly).
using Operand = std::variant<const Node*, double, int64_t>;

// A value's dtype and shape (a node's, or one's that is still to be made).
struct ValueType {
  DType dtype;
  Shape shape;
};

class Builder {
 public:
  explicit Builder(Graph& g) : g_(g) {}
  Graph& graph() { return g_; }

  NodeResult unary(Op op, const Node* x);
  NodeResult binary(Op op, const Node* a, const Node* b);
  // The rules unary, binary and scalar check, without making a node: the result's dtype and
  // shape, or the op's error. (The frontend checks the ops it records with them.)
  static Expected<ValueType> unary_type(Op op, DType x, const Shape& shape);
  static Expected<ValueType> binary_type(Op op, DType a, const Shape& a_shape, DType b,
                                         const Shape& b_shape);
  // Whether `value` fits `dtype`: the error names `op` ("full: value 300 ...", or for a scalar
  // operand of another op "add: scalar 300 ...").
  static Expected<void> check_scalar(double value, DType dtype, std::string_view op = "full");
  NodeResult where(const Node* cond, const Node* a, const Node* b);
  // numpy clip / ONNX Clip: min(max(x, lo), hi), either bound optional (nullptr). Both bounds
  // make the clip row; one alone is max or min; none is x. The NaN rules are max's and min's (a
  // NaN in x or a bound gives NaN: numpy's maximum/minimum, torch.clamp, ONNX Clip; np.clip of
  // numpy 1.24 ignores a NaN bound instead); lo > hi gives hi; integer dtypes clip exactly; the
  // bounds broadcast with x and have x's dtype; bool is an error.
  NodeResult clip(const Node* x, const Node* lo, const Node* hi);
  NodeResult cast(const Node* x, DType to);
  NodeResult scalar(double value, DType dtype);  // full(shape=[])
  // An i64 full holds its value as an integer attribute (exact past 2^53); full() of an i64
  // dtype stores its (integral) double as one too, so equal fulls are one node.
  NodeResult full(const Shape& shape, double value, DType dtype);
  // full() with an integer value taken exactly: i64 values past 2^53 (a `.kg` literal, an ONNX
  // fill) keep every bit; other dtypes take it as full() does (their values are exact doubles).
  NodeResult full_int(const Shape& shape, int64_t value, DType dtype);
  NodeResult arange(int64_t start, int64_t end, int64_t step, DType dtype);

  // op: Sum, ReduceMax, ReduceMin, Prod. nullopt axes = all axes.
  NodeResult reduce(Op op, const Node* x, std::optional<std::vector<int64_t>> axes, bool keepdim);
  NodeResult mean(const Node* x, std::optional<std::vector<int64_t>> axes, bool keepdim);
  // op: ArgMax, ArgMin.
  NodeResult arg_reduce(Op op, const Node* x, int64_t axis, bool keepdim);

  NodeResult reshape(const Node* x, std::vector<int64_t> shape);  // one -1 allowed
  NodeResult permute(const Node* x, std::vector<int64_t> dims);
  NodeResult expand(const Node* x, Shape shape);  // numpy broadcast_to rules
  // Python slice semantics; nullopt start/end = the ends for the sign of step.
  NodeResult slice(const Node* x, int64_t axis, std::optional<int64_t> start,
                   std::optional<int64_t> end, int64_t step);
  NodeResult pad(const Node* x, std::vector<int64_t> before, std::vector<int64_t> after,
                 double value);
  NodeResult concat(const std::vector<const Node*>& xs, int64_t axis);
  NodeResult flip(const Node* x, std::vector<int64_t> axes);
  NodeResult roll(const Node* x, std::vector<int64_t> shifts, std::vector<int64_t> axes);
  NodeResult unfold(const Node* x, int64_t dim, int64_t size, int64_t step);
  // numpy take / ONNX Gather: out.shape = x.shape[:axis] + idx.shape + x.shape[axis+1:]; a
  // rank-0 idx drops the axis. idx is i32 or i64.
  NodeResult gather(const Node* x, const Node* idx, int64_t axis);
  // numpy take_along_axis / ONNX GatherElements: idx has x's rank, no axis but `axis` longer
  // than x's; out.shape = idx.shape. idx is i32 or i64.
  NodeResult gather_elements(const Node* x, const Node* idx, int64_t axis);
  // ONNX ScatterElements / numpy put_along_axis: x with the updates `upd` written (reduction
  // "none") or folded ("add", "mul", "max", "min") at x[p with p[axis] = idx[p]] for every
  // position p of idx. idx is i32 or i64, upd has idx's shape and x's dtype, both have x's rank
  // and no axis but `axis` longer than x's; out has x's shape and dtype.
  NodeResult scatter_elements(const Node* x, const Node* idx, const Node* upd, int64_t axis,
                              std::string_view reduction);
  NodeResult matmul(const Node* a, const Node* b);
  // ONNX Trilu / numpy triu (upper) and tril: keeps x[..., i, j] where j - i >= k (upper) or
  // j - i <= k (lower) and zeros the rest; x of rank 2 or more, any dtype (bool: false).
  NodeResult trilu(const Node* x, int64_t k, bool upper);
  // The resize row (ir/resize_taps.h): x resampled along `axis` (negative counts from the end)
  // from a.in = x.shape[axis] to a.out positions; `extrapolation` fills the positions a
  // tf_crop_and_resize crop leaves outside the input. Linear and cubic need a float x; nearest
  // takes every dtype. The sizes, scale, roi and filter reach are checked (check_resize_axis).
  NodeResult resize(const Node* x, int64_t axis, ResizeAxis a, double extrapolation = 0);
  // The running sum along `axis` (negative counts from the end): ONNX CumSum. exclusive: each
  // element sums the ones before it (0 first); reverse: the sums run from the end of the axis.
  NodeResult cumsum(const Node* x, int64_t axis, bool exclusive, bool reverse);
  // ONNX TopK's indices: the i64 positions along `axis` (negative counts from the end) of the k
  // largest (or smallest) elements, best first, ties to the lower index. The values are
  // gather_elements(x, indices, axis) (the C++ API's kiln::topk gives both).
  NodeResult topk_indices(const Node* x, int64_t k, int64_t axis, bool largest);

  NodeResult softmax(const Node* x, int64_t axis);
  NodeResult log_softmax(const Node* x, int64_t axis);
  NodeResult layernorm(const Node* x, const Node* gamma, const Node* beta, int64_t axis,
                       double eps);
  // q [..., Lq, D], k [..., Lk, D], v [..., Lk, Dv]; scale defaults to 1/sqrt(D).
  NodeResult attention(const Node* q, const Node* k, const Node* v, bool causal,
                       std::optional<double> scale);

  // The `.kg` entry point: an op or composite by its `.kg` name, with operands and attributes
  // as written. Literal operands take the dtype of the call's first tensor value operand (for
  // `where`, of the value operands, not the condition); f32 when there is none.
  NodeResult call(std::string_view name, const std::vector<Operand>& args, const Attrs& attrs);

 private:
  Graph& g_;
  // The scalars made most recently (round robin), by value bits and dtype: a chain of ops with a
  // few constants asks for the same ones again and again, and this skips building their
  // attributes only to find the node interned.
  struct RecentScalar {
    uint64_t bits;
    DType dtype;
    const Node* node;
  };
  std::array<RecentScalar, 8> recent_{};
  size_t recent_count_ = 0;
};

}  // namespace kiln::ir

// ---------------------------------------------------------------------------------------------
// Node attribute contract (what every consumer — printer, parser, reference, lowering — relies on;
// the builder produces exactly this canonical form):
// - Elementwise nodes broadcast implicitly: inputs may have any shapes that numpy-broadcast to
//   the node's shape (right-aligned; size-1 axes read index 0). dtype: comparisons -> bool,
//   Cast -> attr `to`, Where -> its value operands' dtype, all others -> the operands' dtype.
//   Cast: to=DType.
// - Sum/ReduceMax/ReduceMin/Prod: axes=[sorted, unique, non-negative], keepdim=bool (both always).
// - ArgMax/ArgMin: axis=non-negative int, keepdim=bool; dtype i32.
// - Reshape: shape=[...] resolved (no -1), same numel.
// - Permute: dims=[non-negative permutation]; out.shape[i] = in.shape[dims[i]].
// - Expand: shape=[...]; input rank <= output rank, right-aligned, each input dim equal or 1.
// - Slice: axis (non-negative), start, end, step (step != 0). Output element k along `axis`
//   reads input index start + k*step; the output length is node.shape[axis]. start is
//   normalized into [0, n) (any value when the length is 0); `end` is canonical such that
//   re-parsing start/end/step with Python semantics gives the same length.
// - Pad: before=[...], after=[...] (rank entries, non-negative), value=double.
// - Concat: axis (non-negative); >= 1 inputs, same dtype, same shape but along axis.
// - Flip: axes=[sorted, unique, non-negative].
// - Roll: shifts=[...] normalized into [0, n), axes=[non-negative], same length;
//   out[i] = in[(i - shift) mod n] along each axis.
// - Unfold: dim (non-negative), size, step; out.shape = in.shape with shape[dim] replaced by
//   (n - size) / step + 1, plus a trailing axis of length size; out[..w..,k] = in[..w*step+k..].
// - Gather: axis (non-negative); inputs {x, idx}, idx i32 or i64; dtype x's; out.shape =
//   x.shape[:axis] + idx.shape + x.shape[axis+1:]; out[a.., j.., b..] = x[a.., idx[j..], b..].
// - GatherElements: axis (non-negative); inputs {x, idx} of one rank, idx i32 or i64, each axis
//   of idx but `axis` no longer than x's; out.shape = idx.shape; out[i] = x[i with i[axis] =
//   idx[i]].
//   For both, an index i < 0 reads i + n (n = x.shape[axis]) and the result is then clamped into
//   [0, n): an index out of range reads the first or last element along the axis (ONNX calls it
//   an error; kiln never reads outside x). x.shape[axis] is 0 only when the result is empty.
// - ScatterElements: axis (non-negative), reduction (a string: none add mul max min); inputs
//   {x, idx, upd}: idx i32 or i64, upd of idx's shape and x's dtype, both of x's rank, no axis but
//   `axis` longer than x's; add/mul/max/min need a numeric dtype. out: x's dtype and shape;
//   out = x, then for every position p of idx (in C order) the element q = p with q[axis] =
//   idx[p] becomes upd[p] ("none") or op(out[q], upd[p]). An index i < 0 means i + n (n =
//   x.shape[axis]), once; an index still outside [0, n) drops its update (kiln never writes
//   outside x; ONNX calls it an error). Duplicate indices with "none": the last update along
//   the axis wins (numpy put_along_axis, torch's CPU scatter_), on every device.
// - CumSum: axis (non-negative), exclusive, reverse (bools, always); a numeric operand of rank
//   >= 1; out: the operand's dtype and shape. Integer sums wrap.
// - TopKIndices: axis (non-negative), k (0 <= k <= x.shape[axis]), largest (bool), always; a
//   numeric operand of rank >= 1; out: i64, x's shape with shape[axis] = k; out[.., j, ..] is the
//   index along `axis` of the j-th element in the order: larger first (smaller first unless
//   largest), NaN above every number, equal values (and NaNs) by ascending index.
// - Matmul: both operands rank >= 2, a [..., M, K], b [..., K, N]; batch dims broadcast
//   implicitly (right-aligned, like elementwise); out [batch..., M, N]; dtype of the operands.
// - Full: shape, value (double), dtype. Arange: start, end, step (ints), dtype; out [len],
//   element i = start + i*step.
// - Input: name (string, may be empty), slot (int, unique).
