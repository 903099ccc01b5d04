// Float sums over many elements: where one accumulator stops being exact.
//
// A float accumulator that keeps adding small terms stops growing once the terms fall below half
// its spacing: an f32 sum of ones sticks at 2^24 per accumulator (2^30 over the cpu's 64 vector
// lanes), so a sum of 1.5e9 ones came out as 1.07e9. Every backend therefore folds a long float sum
// in blocks: a fresh accumulator sums at most kSumBlock terms, and the block's total is added to the
// reduction's running total (on the cpu an f64, on GPUs the body type). The error then grows with
// the block size and with the number of blocks, not with their product.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace kiln::codegen {

inline constexpr int64_t kSumBlock = int64_t{1} << 14;

// Where a reduction over `extents` (outer to inner) is split into blocks: loop `level` runs in
// blocks of `block` iterations, the loops inside it complete within each block. level -1: the
// whole reduction fits one block.
struct SumBlocks {
  int level = -1;
  int64_t block = 0;
};

inline SumBlocks sum_blocks(const std::vector<int64_t>& extents, int64_t max_terms = kSumBlock) {
  // inner[k]: the product of the extents inside loop k, saturated at max_terms + 1.
  const int n = static_cast<int>(extents.size());
  std::vector<int64_t> inner(static_cast<size_t>(n) + 1, 1);
  for (int k = n - 1; k >= 0; --k) {
    const int64_t e = extents[static_cast<size_t>(k)];
    const int64_t in = inner[static_cast<size_t>(k) + 1];
    inner[static_cast<size_t>(k)] =
        e != 0 && in > (max_terms + 1) / e ? max_terms + 1 : e * in;  // no overflow
  }
  if (inner[0] <= max_terms) return {};
  for (int k = 0; k < n; ++k)
    if (inner[static_cast<size_t>(k) + 1] <= max_terms)
      return {k, std::max<int64_t>(1, max_terms / inner[static_cast<size_t>(k) + 1])};
  return {};
}

// The block along the outermost loop of a reduction whose outermost extent is known only at run
// time and whose inner extents' product is at most max_terms: what sum_blocks gives at every
// size whose sum needs blocks. (At a size that needs none, the sum is one block of this size.)
inline int64_t sum_blocks_along_first(const std::vector<int64_t>& extents,
                                      int64_t max_terms = kSumBlock) {
  int64_t inner = 1;
  for (size_t k = 1; k < extents.size(); ++k) inner = std::min(inner * extents[k], max_terms + 1);
  return std::max<int64_t>(1, max_terms / std::max<int64_t>(inner, 1));
}

}  // namespace kiln::codegen
