// Collapsing a kernel's innermost domain axes into one, when no expression can tell them apart.
//
// A kernel's domain is its output's shape, so y = f(x) over [1,8,8,8] runs four nested loops
// whose innermost one has 8 trips: too short for a vector loop to fill, too short to interleave.
// When every expression reads the axes a..rank-1 only through their C-order flat index
// (x[v1*64 + v2*8 + v3], y[the same], a reduction over another axis of x[... + v1*64 + v2*8 + v3]),
// those axes are one axis of their product's extent: the kernel over [1, 512] (or [512] when
// axis 0 joins too) computes the same values at the same addresses.
//
// Collapsible, for axes A = a..rank-1: each expression is classified as
//   - independent of A;
//   - linear in A (sums, differences and constant multiples of A's variables and independent
//     terms), with one coefficient per axis;
//   - flat: any other expression whose A-dependent operands are flat or linear with coefficients
//     proportional to A's C-order strides (coefficient of axis i = c * stride_i; axes of extent 1
//     can only be 0 and never count);
// and every store's index and value must be one of these. A variable used any other way (a
// comparison with v3, a wrap-around (v3 + 1) mod 8, a broadcast operand indexed by v3 alone)
// keeps the domain as it is. So does a matrix product (its rows and columns are the matmul
// emitters' pattern) and a scan (it runs along the innermost axis of a domain of rank >= 2).
//
// The collapsed kernel binds A's first variable to the flat index, the other variables of A to 0,
// and renumbers the reductions' variables after it; index arithmetic is rebuilt through
// IndexBuilder, so v1*64 + v2*8 + v3 becomes v1.
#pragma once

#include "ir/kernel_ir.h"

namespace kiln::passes {

// `k` with its innermost axes collapsed as far as they can be (from the outermost axis that
// can join), or `k` unchanged. The result shares `k`'s arena.
kir::Kernel collapse_domain(const kir::Kernel& k);

}  // namespace kiln::passes
