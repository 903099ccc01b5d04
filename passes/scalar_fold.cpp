// Scalar evaluation of elementwise ops on literals, exact in the result dtype: the op table's
// scalar semantics (ir/scalar_semantics.h), then rounding or wrapping to the result dtype.
#include "passes/scalar_fold.h"

#include <cmath>
#include <cstdint>

#include "ir/scalar_semantics.h"

namespace kiln::passes {

namespace {

using ir::DType;
using ir::Op;

bool foldable(DType t) {
  return t != DType::f16 && t != DType::bf16;
}

double round_to(double v, DType t) {
  if (t == DType::f32) return static_cast<float>(v);
  return v;
}

std::optional<double> fold_cast(double v, DType to) {
  if (ir::is_float(to)) return round_to(v, to);
  if (to == DType::boolean) return v != 0;
  if (!std::isfinite(v)) return std::nullopt;
  double t = std::trunc(v);
  // Casting an out-of-range float to an integer differs between targets: leave it to them.
  if (std::fabs(t) >= 9.2e18) return std::nullopt;
  auto i = static_cast<int64_t>(t);
  if (ir::wrap_to_dtype(i, to) != i) return std::nullopt;
  return static_cast<double>(i);
}

}  // namespace

std::optional<double> fold_elementwise(Op op, DType result_dtype, DType operand_dtype,
                                       const std::vector<double>& args) {
  if (!foldable(result_dtype) || !foldable(operand_dtype)) return std::nullopt;
  if (op == Op::Cast) return fold_cast(args[0], result_dtype);
  const double v =
      ir::eval_elementwise(op, op == Op::Where ? DType::boolean : operand_dtype, args);
  if (ir::is_float(result_dtype)) return round_to(v, result_dtype);
  return static_cast<double>(ir::wrap_to_dtype(ir::wrap_to_int64(v), result_dtype));
}

}  // namespace kiln::passes
