// The cpu tuning space: the TuneParams candidates of a kernel, by kernel kind, with priorities
// and groups (TVM meta_schedule's "space generator").
#pragma once

#include <string>
#include <vector>

#include "autotune/tune_level.h"
#include "codegen/tune_params.h"
#include "ir/kernel_ir.h"

namespace kiln::autotune {

struct TuneCandidate {
  codegen::TuneParams params;
  int priority = 0;   // lower is tried first; the default has 0
  std::string group;  // the knob family: "default", "matmul/lanes", "loop/vector_width=8", ...
};

// Every candidate of `kernel` (no duplicates), the default (TuneParams{}: the backend's
// heuristics) first, then by priority (ties keep generation order):
// - recognized matmuls (codegen/cpu/matmul_recognizer.h): the register tile's lanes,
//   vector_width 8, 16, 4 (the matmul emitter reads nothing else);
// - other loops (elementwise, row reductions): vector_width 4/8/16 x unroll (interleave) 1/2/4,
//   nearest first to 256-bit vectors of the widest parameter dtype and to unroll 2; widths whose
//   vector x unroll exceeds the innermost trip count are left out (width 4 x 1 always stays).
std::vector<TuneCandidate> cpu_tune_space(const kir::Kernel& kernel);

// The space cut to the level's candidate count (settings(level).max_candidates).
std::vector<TuneCandidate> cpu_tune_space(const kir::Kernel& kernel, Level level);

}  // namespace kiln::autotune
