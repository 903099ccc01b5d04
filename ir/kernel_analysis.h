// Kernel-IR analyses the backends share (one implementation, tested IR in / facts out): matmul
// recognition here; free loop variables in ir/kernel_ir.h. A backend adds only its own limits
// (codegen/cpu/matmul_recognizer.h, codegen/gpu/launch_strategy.h).
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_set>
#include <vector>

#include "ir/kernel_ir.h"

namespace kiln::kir {

// The reductions reachable from `e`, not looking inside them, each once (`seen` gains every
// expression visited).
void collect_reduces(const Expr* e, std::unordered_set<const Expr*>& seen,
                     std::vector<const Expr*>& out);
// Whether a reduction sits anywhere in `e`.
bool has_reduce(const Expr* e);

// A matmul with fused prologues and epilogues: every store is store(out[index(parallel vars)],
// epilogue(R)) where R is the kernel's one reduction, Reduce(Sum, f32, [k], Mul(a, b)) over a
// single variable k; `a` does not read the column variable j (the last domain axis), `b` not the
// row variable i (the second-to-last); a, b and the epilogues hold no other reduction, and the
// store indices and epilogues read parallel variables only (an epilogue may also not use R).
struct MatmulPattern {
  const Expr* reduce = nullptr;  // R
  const Expr* a = nullptr;       // row operand: batch vars, i, k
  const Expr* b = nullptr;       // column operand: batch vars, k, j
  int32_t k_var = -1;
  int64_t k_extent = 0;
  int32_t i_var = -1;  // domain.size() - 2
  int32_t j_var = -1;  // domain.size() - 1
};

// nullopt when the kernel is anything else, or malformed (a buffer or dtype that does not match
// its parameter: the generic code paths report those).
std::optional<MatmulPattern> recognize_matmul(const Kernel& k, const FreeVars& fv);

}  // namespace kiln::kir
