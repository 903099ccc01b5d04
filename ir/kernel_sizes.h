// Run-time sizes: one kernel for every size of an inner axis (docs/dynamic-shapes.md).
//
// A dynamic kernel (Kernel::dynamic_outer) takes its outer extent at run time, which no index
// expression reads. A size of an inner axis is read everywhere: a softmax over [4, n] has n as
// its inner domain extent, as its reductions' extents, as the stride of its row index
// (v0 * n + v1) and in its buffers' shapes. kiln finds where a size enters a kernel by lowering
// it at two sizes: the two kernels are the same but for some i64 numbers, and each number that
// differs becomes a run-time size slot (ExprKind::Size, Kernel::domain_slots, Expr::rslots,
// Param::shape_slots). Numbers that differ in the same way (the same pair of values) share a
// slot; numbers that are equal in both stay fixed. A finite f32 or f64 constant that differs
// becomes a float slot (a Size of that dtype, its value a double's bits): a mean scales by 1/n,
// a float the builder computes from the size, which the kernel then takes at run time too.
//
// A third kernel is an instance of that general kernel when it is the same but for the slots'
// values, each slot's places holding one value (match_sizes): the general kernel with those
// values is then exactly that kernel, so the code made once for the general kernel computes it.
// That code must read every slot at run time and assume nothing of its value
// (codegen/cpu: serves_any_sizes).
#pragma once

#include <optional>
#include <string>

#include "ir/kernel_ir.h"

namespace kiln::kir {

// `current` with every i64 number (a domain or reduction extent, a parameter's extent, an i64
// constant) and every finite f32 or f64 constant that differs from the number at the same place
// of `other` made a run-time size slot (Kernel::sizes holds current's values). nullopt where the
// kernels differ in anything else (their structure, dtypes, variables, other constants, a
// selection scan's extent), where no i64 number differs (float constants alone are no sizes:
// x * 0.5 and x * 0.25 are a user's two constants) unless `floats_alone` (the caller knows a size
// changed between the two, as an unfused mean's scale by 1/n does), or where either is dynamic
// already or has run-time sizes.
std::optional<Kernel> generalize(const Kernel& current, const Kernel& other,
                                 bool floats_alone = false);

// `k` as an instance of `general` (a kernel with run-time sizes): k rebuilt with general's slots,
// whose identity (print_kernel without labels) is general's, and whose `sizes` are k's values of
// the slots. nullopt where k is not the same kernel but for the slots' values, or where one
// slot's places hold different values in k.
std::optional<Kernel> match_sizes(const Kernel& general, const Kernel& k);

// The kernel's identity (print_kernel without labels) with every number that stands alone (an
// extent, a constant) written `#`: kernels that may be one kernel but for their sizes share it,
// so a caller keeps the kernels it may generalize by it (generalize decides).
std::string sizes_key(const Kernel& k);

}  // namespace kiln::kir
