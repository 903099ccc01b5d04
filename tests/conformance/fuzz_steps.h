// The generator's steps: each builds one op (plus the guards that keep it well conditioned) on
// values chosen from the graph so far, or returns nullopt when no value fits it.
#pragma once

#include <optional>

#include "fuzz_generator.h"

namespace kiln::testing::fuzz {

using StepResult = std::optional<FuzzValue>;

// fuzz_elementwise.cpp
StepResult step_unary_smooth(Generator& g);   // exp log sqrt rsqrt recip sin cos tanh ...
StepResult step_unary_exact(Generator& g);    // neg abs relu sign floor ceil
StepResult step_binary(Generator& g);         // add sub mul div pow max min
StepResult step_compare_where(Generator& g);  // comparisons, and/or/not, where
StepResult step_cast(Generator& g);

// Shared by the steps (fuzz_elementwise.cpp).
bool numeric(const FuzzValue& v);       // not bool
bool smooth_float(const FuzzValue& v);  // a float value without NaN/inf
// A positive value of `v` (abs(v) + 1) for log, sqrt, recip, div and pow.
FuzzValue guard_positive(Generator& g, const FuzzValue& v);
// v scaled by a power of two (exact) so that its bound is at most `limit`.
FuzzValue scale_down(Generator& g, const FuzzValue& v, double limit);
// A scalar literal (a `full` of shape []).
FuzzValue literal(Generator& g, ir::DType dtype, double value);
// Sets the bounds (integers that may have wrapped get their dtype's range).
void settle_bounds(FuzzValue& v, double lo, double hi);
// Exact float arithmetic stays exact only while its results are representable.
void settle_exactness(FuzzValue& v);

// fuzz_structure.cpp
StepResult step_reduce(Generator& g);      // sum mean max min prod over some or all axes
StepResult step_arg_reduce(Generator& g);  // argmax argmin
StepResult step_matmul(Generator& g);
StepResult step_composite(Generator& g);   // softmax log_softmax layernorm attention

// fuzz_movement.cpp
StepResult step_view(Generator& g);        // roll flip slice pad permute reshape unfold gather_elements
StepResult step_regrow(Generator& g);      // concat / pad of reduced values back to full extent

}  // namespace kiln::testing::fuzz
