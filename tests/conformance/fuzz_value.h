// What the graph fuzzer knows about each value it built: its place in the graph's base frame and
// the properties (exactness, bounds, NaN, precision) that decide which ops it may feed and how
// strictly the devices' results for it are compared.
#pragma once

#include <algorithm>
#include <cmath>

#include "ir/graph.h"

namespace kiln::testing::fuzz {

struct FuzzValue {
  const ir::Node* node = nullptr;
  // The value in the graph's base shape: same rank, each extent the base extent or 1. The node's
  // own shape is the frame, or the frame with some extent-1 axes dropped (keepdim=false).
  ir::Shape frame;
  // Bit-identical on every correct device: only ops without rounding produced it. Only exact
  // values feed discontinuous ops (argmax, comparisons, floor, casts to integers), so those never
  // see rounding noise and their results can be compared exactly.
  bool exact = true;
  // Every finite element is a multiple of 2^-grid (add/sub/mul/sum on them stay exact while the
  // result is representable); -1: arbitrary (random reals).
  int grid = -1;
  bool special = false;    // may hold NaN or +-inf (only exact ops may see it)
  bool zero_sign = true;   // the sign of a zero result is fixed by IEEE 754 (checked when exact)
  double lo = 0, hi = 0;   // bounds of the finite elements
  ir::DType loosest = ir::DType::f64;  // least precise float dtype in its history

  double bound() const { return std::max(std::abs(lo), std::abs(hi)); }
  ir::DType dtype() const { return node->dtype; }
  bool smooth_ok() const { return !special; }  // may feed continuous (rounding) float ops
};

// Every integer in [-n, n] is exactly representable in `dtype` (ints: its range, bool: 1).
double exact_int_limit(ir::DType dtype);
// Multiples of 2^-grid with magnitude <= bound are exactly representable in `dtype`.
bool representable(ir::DType dtype, int grid, double bound);
// The less precise of two dtypes' rounding (integer and bool dtypes count as exact, f64).
ir::DType looser(ir::DType a, ir::DType b);
// Relative tolerance of results that went through `dtype`'s rounding.
double fuzz_tolerance(ir::DType dtype);

}  // namespace kiln::testing::fuzz
