// The roofline bound of a kernel: the fastest it could run given memory bandwidth and peak
// arithmetic rate, which ends the autotuner's search early when a candidate gets close to it.
#pragma once

#include <cstdint>

#include "ir/kernel_ir.h"

namespace kiln::autotune {

struct KernelWork {
  double bytes = 0;  // every parameter read or written once: sum of numel x dtype size
  double flops = 0;  // ALU and reduction steps, see kernel_work()
};

// An approximate count (documented, not exact):
// - bytes: each parameter buffer moved once (re-reads that hit the cache are free; a buffer read
//   from many points is still counted once);
// - flops: one per ALU op (transcendentals too) and one per reduction step, per point of the
//   domain, times the extents of the reductions enclosing the op; index arithmetic (the operands
//   of load indices and store indices) is not counted. A shared subexpression counts once per
//   enclosing reduction (as the generic emitter's memoization computes it);
// - an attention kernel (kir::recognize_attention): per score a causal mask leaves visible,
//   2 * (head dim + value dim) for the two contractions, the logits' own ops, and 4 for the
//   softmax's max, subtraction, exponential and sum (the flash-style kernels' work).
KernelWork kernel_work(const kir::Kernel& kernel);
// kernel_work's bytes alone, from the parameters (no walk of the body).
double kernel_bytes(const kir::Kernel& kernel);

// max(bytes / bandwidth, flops / peak) in ms; a rate <= 0 leaves its term out.
double roofline_ms(const kir::Kernel& kernel, double bandwidth_bytes_per_s, double flops_per_s);

}  // namespace kiln::autotune
