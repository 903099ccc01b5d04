// Test-only interpreter of kir::Kernel on host buffers of doubles (one per kernel parameter).
#pragma once

#include <string>
#include <vector>

#include "ir/kernel_ir.h"

namespace kiln::testing {

using Buffer = std::vector<double>;

// Runs every store of `k` over its domain. buffers[i] belongs to k.params[i]; output buffers are
// resized to the parameter's element count. Values are rounded to each expression's dtype
// (f32 through float, integers wrap). Every operand of Where is evaluated, so a guarded load is
// still checked. Returns an empty string, or the first contract violation: an out-of-range load
// or store index, or an IDiv/Mod with a negative operand or non-positive divisor.
std::string run_kernel(const kir::Kernel& k, std::vector<Buffer>& buffers);

}  // namespace kiln::testing
