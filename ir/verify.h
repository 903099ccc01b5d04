// The IR verifiers: what every lowering step must leave behind, checked between steps in debug and
// test builds (passes/pipeline.h) and by tools on IR read from outside. Each returns the first
// violation as an error that names the node or kernel and what is wrong; none aborts.
#pragma once

#include <vector>

#include "ir/graph.h"
#include "ir/kernel_ir.h"
#include "kiln/error.h"

namespace kiln::ir {

// The graph reachable from `outputs` obeys the builder's rules (ir/builder.h): every node's
// operand count is its op's arity, its operands were made before it (ids grow), an input has a
// slot, and what Builder::call makes of the node's operands and attributes has the node's dtype
// and shape. Errors name the node as "%t<id> = <op>".
Expected<void> verify_graph(const std::vector<const Node*>& outputs);

}  // namespace kiln::ir

namespace kiln::kir {

// The kernel obeys the contract of ir/kernel_ir.h: domain extents are non-negative; loads and
// stores name a parameter of their dtype at an i64 index, stores an output parameter, and every
// output parameter is stored; ALU ops have their arity and operand dtypes (comparisons give bool,
// where takes a bool condition, cast any operand, IDiv/Mod i64, the rest the result's dtype);
// reductions own one or more variables numbered after the domain, unique in the kernel, with
// non-negative extents, and give the body's dtype (i32 for argmax/argmin, over one variable);
// stores read only parallel variables. Errors name the kernel and the expression.
Expected<void> verify_kernel(const Kernel& k);

}  // namespace kiln::kir
