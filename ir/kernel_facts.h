// What the backends ask of a kernel, in one record: the kernel-IR analyses every backend shares
// (free variables, the matmul pattern, row reuse, loop cuts), computed once by the lowering
// script's `analyze` step (passes/pipeline.h) and handed to codegen with the kernel, so that what
// KILN_DUMP shows (NN-analyze.txt) is exactly what codegen was given. Each backend applies only
// its own limits on top (codegen/cpu/matmul_recognizer.h, codegen/gpu/launch_strategy.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/kernel_analysis.h"
#include "ir/kernel_ir.h"
#include "ir/loop_split.h"
#include "ir/row_reuse.h"
#include "kiln/error.h"

namespace kiln::kir {

// Expressions are the kernel's own (its arena): a record is valid while the kernel is.
struct KernelFacts {
  FreeVars free_vars;
  std::optional<MatmulPattern> matmul;  // recognize_matmul
  std::optional<AttentionPattern> attention;  // recognize_attention
  std::vector<RowReuse> row_reuse;      // find_row_reuse
  LoopSplit loop_split;                 // split_innermost
  std::vector<ReduceSplit> reduce_splits;  // split_reduction of each reduction with steps
};

KernelFacts analyze_kernel(const Kernel& kernel);

// Every expression the record names is one of the kernel's, and each fact is what the analyses
// give for it now (a stale or foreign record is an error naming the fact).
Expected<void> verify_facts(const Kernel& kernel, const KernelFacts& facts);

// The record as text, expressions named as print_kernel names them ($N, vN):
//   matmul: $12 = reduce over v2<1024>, rows v0, columns v1   (or "matmul: no")
//   row reuse: $7 kept per row of $12, read back as $13       (one line each, or "row reuse: no")
//   loop cuts: innermost axis in 3 pieces [0,1) [1,511) [511,512), 4 wrapping indexes
//   reduction cuts: $12 over v1<1024> in 2 pieces [0,1000) [1000,1024), 6 steps (one line each)
std::string facts_text(const Kernel& kernel, const KernelFacts& facts);

}  // namespace kiln::kir
