// The graph IR's elementwise semantics (ir/builder.h) on scalars: the one definition that the
// reference interpreter and compile-time folding both evaluate. Each elementwise row of
// kiln/ops.def has its scalar function here (scalar_semantics.cpp, `Scalar<Op::Enum>`); a row
// without one does not compile.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "kiln/dtype.h"
#include "ir/graph.h"

namespace kiln::ir {

// Elementwise op `op` on op_arity(op) operands held as doubles, the first of dtype
// `operand_dtype` (for where: the condition). Floats: math in double. Integers: add sub mul div
// are exact arithmetic modulo 2^64 (div is floor_div), wrapped to `operand_dtype`; the other ops
// the builder allows on integers and bools (neg abs sign relu max min, comparisons, logic) are
// exact in double. Comparisons and logic give 0 or 1 (and/or/not test against zero, so NaN is
// true); where(c, a, b) picks a when c != 0. relu(x) = ieee_maximum(x, 0); sign propagates NaN.
// cast gives its operand unchanged: converting to the result dtype is the caller's.
// The result is not yet rounded or wrapped to the result dtype.
double eval_elementwise(Op op, DType operand_dtype, std::span<const double> operands);

// The same op on int64 operands, exactly (a double holds integers up to 2^53 only): add sub mul
// div as above, neg abs sign relu max min clip where, comparisons and logic (0 or 1), for i64
// values and the bools beside them. nullopt for an op without an exact integer meaning here
// (the float math, pow, cast).
std::optional<int64_t> eval_elementwise_int(Op op, std::span<const int64_t> operands);
// Whether eval_elementwise_int gives `op` a value (an elementwise op with an exact integer
// meaning).
bool has_int_meaning(Op op);

// kiln's one rule for max and min (docs/graph-format.md, "NaN, signed zero and infinities"),
// IEEE 754-2019 maximum / minimum: a NaN operand gives NaN, -0 orders below +0 (in either operand
// order), infinities are ordinary values. Every target implements exactly this.
double ieee_maximum(double a, double b);
double ieee_minimum(double a, double b);

// numpy floor_divide on int64 with kiln's x / 0 = 0, and INT64_MIN / -1 wrapping (no trap).
int64_t floor_div(int64_t a, int64_t b);

// The integer a double becomes when stored in an integer element: truncated toward zero, then
// wrapped modulo 2^64 like a C cast from a wider integer; NaN and +-inf become 0.
int64_t wrap_to_int64(double v);

// v wrapped to an integer dtype's width like the targets' two's-complement arithmetic (a C cast
// from int64); bool: v != 0. A float dtype is a bug in the caller.
int64_t wrap_to_dtype(int64_t v, DType integer_dtype);

// cast(x, to) of a float to an integer dtype, as every target computes it: truncated toward zero
// and saturated (NaN is 0), to i64's range for i64 and to i32's for the narrower types, which
// then wrap to their width (300.0 is 44 as u8; +inf is INT32_MAX, so -1 as i8). Bool is x != 0.
int64_t float_to_int(double x, DType to);

}  // namespace kiln::ir
