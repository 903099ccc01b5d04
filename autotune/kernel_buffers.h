// Host buffers for benchmarking a kernel: seeded random contents valid for every dtype, and the
// check that a candidate's outputs equal the default candidate's within the dtype's tolerance.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/host_tensor.h"
#include "ir/kernel_ir.h"

namespace kiln::autotune {

// One host tensor per kernel parameter, with the parameter's dtype and shape. A parameter with no
// elements still holds one element's bytes, so that every data pointer is valid.
using KernelBuffers = std::vector<ir::HostTensor>;

// Every parameter (outputs too, in case a kernel reads one) filled from `seed`: floats uniform in
// [-2, 2] rounded to the dtype, integers in [-8, 8] ([0, 16] for u8, small enough that no
// arithmetic on a few of them overflows), bools 0/1. The same seed gives the same bytes.
KernelBuffers random_buffers(const kir::Kernel& kernel, uint64_t seed);
// A copy of the outputs among `buffers` (the parameters of `kernel`) in fresh memory, on huge
// pages where one is large; the other parameters' tensors have no bytes.
KernelBuffers copy_outputs(const kir::Kernel& kernel, const KernelBuffers& buffers);
// The host bytes benchmarking `kernel` takes (every parameter, and two more copies of each output:
// the default candidate's and the one under test), and whether the host can hold them. A kernel
// that does not fit is not tuned: it runs with the default schedule.
double benchmark_bytes(const kir::Kernel& kernel);
bool fits_on_host(const kir::Kernel& kernel);

// Relative tolerance (of an output's largest finite magnitude) for float dtypes: 1e-4 for f32 and
// f64 (vector widths reassociate reductions), about two units in the last place for f16 (2e-3)
// and bf16 (1.6e-2); 0 (exact) for integers and bools.
double output_tolerance(ir::DType t);

// nullopt when every output parameter of `got` matches `want`: floats within
// output_tolerance(dtype) x the largest finite |want| of that output, NaN where NaN and infinities
// equal; integers and bools exactly. Otherwise the first mismatch, said for a person.
std::optional<std::string> compare_outputs(const kir::Kernel& kernel, const KernelBuffers& want,
                                           const KernelBuffers& got);

}  // namespace kiln::autotune
