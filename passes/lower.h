// Lowering of one fused group to kernel IR: movement ops become index expressions of loads,
// elementwise ops become ALU expressions, reductions and matmul become Reduce expressions.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/kernel_facts.h"
#include "ir/kernel_ir.h"
#include "passes/fuser.h"
#include "kiln/error.h"

namespace kiln::passes {

struct LoweredKernel {
  kir::Kernel kernel;
  // params[i] is the graph node bound to kernel parameter i: group inputs first (in the order
  // of group.inputs), then group outputs (in the order of group.outputs).
  std::vector<const ir::Node*> params;
  // What the backends ask of the kernel (the script's `analyze` step); null before it runs.
  std::shared_ptr<const kir::KernelFacts> facts;
};

Expected<LoweredKernel> lower_group(const FusedGroup& group, const std::string& name);

}  // namespace kiln::passes
