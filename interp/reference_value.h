// The reference interpreter's value (dtype, shape, f64 elements) and its element conversions.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/shape.h"

namespace kiln::interp::reference {

// A tensor as the oracle keeps it: every element as a double, in C order. Integer and bool
// elements always hold exact values of their dtype (see normalize); float elements keep full
// double precision between ops.
//
// A double holds integers up to 2^53 only: an i64 value also keeps its elements exactly in
// `ints`, filled by the ops that keep i64 exact (inputs, full and arange, the movement ops, the
// elementwise ops with an integer meaning, casts to i64), `data` then holding each one's nearest
// double. `ints` is empty where an op computes an i64 through doubles (a matmul, a reduction);
// `data` is then all there is.
struct Value {
  ir::DType dtype = ir::DType::f32;
  ir::Shape shape;
  std::vector<double> data;
  std::vector<int64_t> ints;

  int64_t numel() const { return static_cast<int64_t>(data.size()); }
  bool exact() const { return !ints.empty(); }
};

// A value of `shape` filled with zeros.
Value make_value(ir::DType dtype, ir::Shape shape);
// Element i of an integer or bool value as an int64: exact from `ints`, else from `data`.
int64_t int_at(const Value& v, int64_t i);
// Makes an i64 value exact (`ints` sized, of zeros); a no-op for other dtypes, which stay
// doubles. Returns whether `v` is exact now.
bool make_exact(Value& v);
// Element i of an exact value set to `x` (`data` to its nearest double).
void set_int(Value& v, int64_t i, int64_t x);
// Element `from` of `x` copied to element `to` of `out`: exactly where `exact` (both values
// exact), else as its double.
inline void copy_element(Value& out, int64_t to, const Value& x, int64_t from, bool exact) {
  if (exact)
    set_int(out, to, x.ints[static_cast<size_t>(from)]);
  else
    out.data[static_cast<size_t>(to)] = x.data[static_cast<size_t>(from)];
}

// What an element of `dtype` holds after an op produced `v`: integers truncate toward zero and
// wrap to their width (NaN and infinities become 0), bool is 0 or 1, floats are unchanged.
double normalize(double v, ir::DType dtype);
// The integer an integer element holds (truncated, wrapped modulo 2^64).
int64_t to_int64(double v);
// An exact int64 result wrapped to an integer or bool `dtype`, before it becomes a double
// (a wrapped i32 product is exact; the unwrapped int64 one may not be as a double).
double wrap_integer(int64_t v, ir::DType dtype);
// Rounds `v` to what a float `dtype` can store (f32, f16, bf16 round to nearest even).
double round_to_float(double v, ir::DType dtype);

// Calls fn(index) for every multi-index of `shape` in C order; the k-th call is flat element k.
void for_each_index(const ir::Shape& shape,
                    const std::function<void(const std::vector<int64_t>&)>& fn);
// Element strides to read an operand of shape `in` at indices of the broadcast shape `out`
// (numpy rules: right-aligned, size-1 axes read index 0, i.e. stride 0).
std::vector<int64_t> broadcast_strides(const ir::Shape& in, const ir::Shape& out);
// sum(index[i] * strides[i]).
int64_t offset_of(const std::vector<int64_t>& index, const std::vector<int64_t>& strides);

}  // namespace kiln::interp::reference
