// Shapes: extents per axis, numpy broadcasting, and strides of C-ordered buffers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::ir {

using Shape = std::vector<int64_t>;

// The most elements a tensor may have. Kernels index with 64-bit integers: at 2^59 elements the
// byte offset of an 8-byte element, a loop bound rounded up to whole blocks or vectors, and an
// index plus a stride all stay far below 2^63, so no index arithmetic can wrap.
inline constexpr int64_t kMaxNumel = int64_t{1} << 59;

int64_t shape_numel(const Shape& s);
// "[8192,1024]"; "[]" for a scalar.
std::string shape_str(const Shape& s);
// numpy broadcasting of two shapes; nullopt when incompatible.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);
// Row-major (C order) element strides.
std::vector<int64_t> contiguous_strides(const Shape& s);
// Normalizes a possibly negative axis against `rank`; nullopt when out of range.
std::optional<int64_t> normalize_axis(int64_t axis, int64_t rank);

}  // namespace kiln::ir
