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
// The most axes a tensor may have (numpy's limit): kiln's passes look at a shape's axes in pairs.
inline constexpr size_t kMaxRank = 64;

KILN_EXPORT int64_t shape_numel(const Shape& s);
// Why `s` cannot be a tensor's shape, as a phrase following it ("has too many elements (kiln
// indexes at most 2^59)"); nullopt when it can: at most kMaxRank axes, no extent negative, and
// the extents other than 0 multiply to at most kMaxNumel, whatever their order (an empty
// [2^40,2^40,0] is refused as [0,2^40,2^40] is: the strides of its axes would pass kiln's limit).
KILN_EXPORT std::optional<std::string> shape_size_problem(const Shape& s);
// "[8192,1024]"; "[]" for a scalar.
KILN_EXPORT std::string shape_str(const Shape& s);
// shape_str for an error message: past 16 axes, the first 8 and the last 2 with the count
// ("[1,1,1,1,1,1,1,1,...,1,1] (25000 axes)").
KILN_EXPORT std::string shape_brief(const Shape& s);
// numpy broadcasting of two shapes; nullopt when incompatible.
KILN_EXPORT std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);
// Row-major (C order) element strides.
KILN_EXPORT std::vector<int64_t> contiguous_strides(const Shape& s);
// Normalizes a possibly negative axis against `rank`; nullopt when out of range.
KILN_EXPORT std::optional<int64_t> normalize_axis(int64_t axis, int64_t rank);

}  // namespace kiln::ir
