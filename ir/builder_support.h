// Internal helpers shared by the builder's source files: error text, axis normalization, and
// the Expected plumbing (not part of any public contract).
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "kiln/error.h"

namespace kiln::ir::detail {

// "op: message" as an error value.
template <class... Args>
std::unexpected<Error> op_error(std::string_view op, fmt::format_string<Args...> f,
                                Args&&... args) {
  return make_error(fmt::format("{}: {}", op, fmt::format(f, std::forward<Args>(args)...)));
}

inline std::string ints_str(const std::vector<int64_t>& v) {
  return fmt::format("[{}]", fmt::join(v, ","));
}

// Why `value` cannot be stored in `dtype`, as a phrase following the value ("is out of range for
// u8"); nullopt when it can: integers must be integral and in range, bool must be 0 or 1.
std::optional<std::string> unrepresentable(double value, DType dtype);

// Fails when the element count of `shape` does not fit in int64 (or a dimension is negative), so
// that no later size computation can overflow.
Expected<void> check_numel(std::string_view op, const Shape& shape);

// Fails when `dtype` is no DType enumerator (a value cast from an integer): an op's dtype argument.
Expected<void> check_known_dtype(std::string_view op, DType dtype);

// Normalizes `axes` against `shape` (negatives count from the end), sorted and unique.
Expected<std::vector<int64_t>> normalize_axes(std::string_view op, const std::vector<int64_t>& axes,
                                              const Shape& shape);
// Normalizes one axis against `shape`.
Expected<int64_t> normalize_one_axis(std::string_view op, int64_t axis, const Shape& shape);

}  // namespace kiln::ir::detail

// Evaluates an Expected expression; on error returns the error from the enclosing function,
// otherwise declares `var` holding the value.
#define KILN_IR_CONCAT_INNER(a, b) a##b
#define KILN_IR_CONCAT(a, b) KILN_IR_CONCAT_INNER(a, b)
#define KILN_IR_TRY(var, expr)                                              \
  auto KILN_IR_CONCAT(kiln_ir_try_, __LINE__) = (expr);                     \
  if (!KILN_IR_CONCAT(kiln_ir_try_, __LINE__))                              \
    return std::unexpected(KILN_IR_CONCAT(kiln_ir_try_, __LINE__).error()); \
  var = std::move(*KILN_IR_CONCAT(kiln_ir_try_, __LINE__))
// Returns the error of an Expected<void> expression.
#define KILN_IR_OK(expr) \
  if (auto kiln_ir_ok_ = (expr); !kiln_ir_ok_) return std::unexpected(kiln_ir_ok_.error())
