// Recognizes kernels that are a matmul with fused prologues and epilogues, so that the cpu
// backend can give them a tiled, register-blocked loop nest instead of the generic one.
#pragma once

#include <cstdint>
#include <optional>

#include "ir/kernel_ir.h"

namespace kiln::codegen::cpu {

// Every store is store(out[index(parallel vars)], epilogue(R)) where R is the one reduction of
// the kernel: Reduce(Sum, f32, [k], Mul(a, b)) over a single variable k, `a` independent of the
// innermost parallel variable j (the last domain axis) and `b` independent of the row variable i
// (the second-to-last axis); a, b and the epilogues contain no other reduction, and the epilogues
// and indices read parallel variables only. (The epilogue of a store may also not use R at all.)
struct MatmulPattern {
  const kir::Expr* reduce = nullptr;  // R
  const kir::Expr* a = nullptr;       // row operand: batch vars, i, k
  const kir::Expr* b = nullptr;       // column operand: batch vars, k, j
  int32_t k_var = -1;
  int64_t k_extent = 0;
  int32_t i_var = -1;  // domain.size() - 2
  int32_t j_var = -1;  // domain.size() - 1
};

// The longest reduction the matmul emitter takes (its scratch grows with K).
constexpr int64_t kMaxMatmulK = int64_t{1} << 16;

// nullopt when the kernel is anything else (or malformed: the generic emitter reports that).
std::optional<MatmulPattern> recognize_matmul(const kir::Kernel& kernel);

}  // namespace kiln::codegen::cpu
