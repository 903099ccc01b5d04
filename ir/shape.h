// Shapes: extents per axis, numpy broadcasting, and strides of C-ordered buffers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::ir {

using Shape = std::vector<int64_t>;

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
