// Matmul kernels for the cpu backend: the shared recognizer (ir/kernel_analysis.h) within the
// matmul emitter's limit on K, so that such kernels get a tiled, register-blocked loop nest
// instead of the generic one.
#pragma once

#include <cstdint>
#include <optional>

#include "ir/kernel_facts.h"
#include "ir/kernel_ir.h"

namespace kiln::codegen::cpu {

using kir::MatmulPattern;

// The longest reduction the matmul emitter takes (its scratch grows with K).
constexpr int64_t kMaxMatmulK = int64_t{1} << 16;

// The kernel's matmul pattern (kir::KernelFacts::matmul) with K <= kMaxMatmulK; nullopt for
// anything else.
std::optional<MatmulPattern> matmul_of(const kir::KernelFacts& facts);

}  // namespace kiln::codegen::cpu
