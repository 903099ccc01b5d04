// Shapes: extents per axis, numpy broadcasting, and strides of C-ordered buffers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/export.h"

namespace kiln::ir {

using Shape = std::vector<int64_t>;

// The most elements a tensor may have. Kernels index with 64-bit integers: at 2^59 elements the
// byte offset of an 8-byte element, a loop bound rounded up to whole blocks or vectors, and an
// index plus a stride all stay far below 2^63, so no index arithmetic can wrap.
inline constexpr int64_t kMaxNumel = int64_t{1} << 59;

KILN_EXPORT int64_t shape_numel(const Shape& s);
// "[8192,1024]"; "[]" for a scalar.
KILN_EXPORT std::string shape_str(const Shape& s);
// numpy broadcasting of two shapes; nullopt when incompatible.
KILN_EXPORT std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);
// Row-major (C order) element strides.
KILN_EXPORT std::vector<int64_t> contiguous_strides(const Shape& s);
// Normalizes a possibly negative axis against `rank`; nullopt when out of range.
KILN_EXPORT std::optional<int64_t> normalize_axis(int64_t axis, int64_t rank);

}  // namespace kiln::ir
