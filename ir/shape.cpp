// Shape helpers.
#include "kiln/shape.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kiln::ir {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::optional<std::string> shape_size_problem(const Shape& s) {
  if (s.size() > kMaxRank)
    return fmt::format("has more than the {} axes kiln takes",
                       kMaxRank);  // shape_brief counts them
  for (int64_t d : s)
    if (d < 0) return fmt::format("has a negative extent {}", d);
  int64_t span = 1;  // the product of the non-zero extents
  for (int64_t d : s) {
    if (d == 0) continue;
    if (span > kMaxNumel / d)
      return std::ranges::find(s, 0) != s.end()
                 ? std::string(
                       "is empty, but its other extents multiply to more than 2^59, "
                       "past what kiln indexes")
                 : std::string("has too many elements (kiln indexes at most 2^59)");
    span *= d;
  }
  return std::nullopt;
}

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ",")); }

std::string shape_brief(const Shape& s) {
  if (s.size() <= 16) return shape_str(s);
  return fmt::format("[{},...,{}] ({} axes)", fmt::join(s.begin(), s.begin() + 8, ","),
                     fmt::join(s.end() - 2, s.end(), ","), s.size());
}

std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> contiguous_strides(const Shape& s) {
  std::vector<int64_t> st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

std::optional<int64_t> normalize_axis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

}  // namespace kiln::ir
