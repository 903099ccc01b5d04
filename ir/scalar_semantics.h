// The graph IR's elementwise semantics (ir/builder.h) on scalars: the one definition that the
// reference interpreter and compile-time folding both evaluate.
#pragma once

#include <cstdint>
#include <optional>

#include "ir/graph.h"

namespace kiln::ir {

// Unary ops in double: neg abs exp log sqrt rsqrt recip sin cos tanh sigmoid relu gelu erf floor
// ceil sign not; nullopt for any other op. Exact for integer and bool operands on the ops the
// builder allows them (neg abs sign relu not); the caller wraps the result to its dtype.
// relu(x) = ieee_maximum(x, 0) (NaN propagates, relu(-0) = +0); sign propagates NaN.
std::optional<double> eval_float_unary(Op op, double x);

// kiln's one rule for max and min (docs/graph-format.md, "NaN, signed zero and infinities"),
// IEEE 754-2019 maximum / minimum: a NaN operand gives NaN, -0 orders below +0 (in either operand
// order), infinities are ordinary values. Every target implements exactly this.
double ieee_maximum(double a, double b);
double ieee_minimum(double a, double b);

// Binary arithmetic with float semantics in double: add sub mul div pow max min; nullopt for any
// other op. max and min are ieee_maximum / ieee_minimum.
std::optional<double> eval_float_binary(Op op, double a, double b);

// eq ne lt le gt ge and or as 0 or 1 (and/or test against zero, so NaN is true); nullopt for
// any other op. Exact for every dtype.
std::optional<double> eval_compare(Op op, double a, double b);

// numpy floor_divide on int64 with kiln's x / 0 = 0, and INT64_MIN / -1 wrapping (no trap).
int64_t floor_div(int64_t a, int64_t b);

// add sub mul div on integer dtypes: exact arithmetic modulo 2^64 (div is floor_div); nullopt for
// any other op. The caller wraps the result to its narrower dtype.
std::optional<int64_t> eval_int_binary(Op op, int64_t a, int64_t b);

// The integer a double becomes when stored in an integer element: truncated toward zero, then
// wrapped modulo 2^64 like a C cast from a wider integer; NaN and +-inf become 0.
int64_t wrap_to_int64(double v);

}  // namespace kiln::ir
