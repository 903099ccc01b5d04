// Whether a kernel's i64 arithmetic (indices, loop variables) provably stays within 32 bits, so
// that GPU source can use int instead of 64-bit integers (much cheaper division and modulo).
#pragma once

#include "ir/kernel_ir.h"

namespace kiln::codegen::gpu {

// True when every buffer, the domain and every reduction have fewer than 2^30 elements and
// interval analysis bounds every i64 expression within +-2^30 (loads of i64 data, float -> i64
// casts and i64 max/min/prod reductions make it false).
bool index_math_fits_i32(const kir::Kernel& k);

}  // namespace kiln::codegen::gpu
