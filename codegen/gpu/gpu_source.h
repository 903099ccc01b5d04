// GPU kernel source: kernel IR -> CUDA C or GLSL 450 compute text with its launch shape. One
// emitter serves both dialects (they differ in types, intrinsics and buffer declarations only);
// codegen/cuda and codegen/spirv turn the text into PTX/cubin and SPIR-V.
//
// Contract shared by both dialects and every runtime that launches the result:
// - Buffer parameters are bound in kernel parameter order: CUDA takes them as the kernel
//   function's pointer arguments (param i = argument i); GLSL declares them as storage buffers
//   `layout(set = 0, binding = i)`. With CheckMode::validate (codegen/check_mode.h) one more
//   buffer (argument / binding params.size()) holds the error slot of check_mode.h; a kernel
//   with scratch_bytes > 0 takes its scratch buffer last.
// - The kernel is launched as `launch.groups` workgroups (CUDA blocks) of `launch.group_size`
//   threads on the x dimension only. groups <= 65535 always, so both APIs accept it; kernels
//   larger than that loop (grid-stride) inside.
// - Shapes are static (baked into the text), except the outer extent of a dynamic kernel
//   (kir::Kernel::dynamic_outer, where serves_any_outer_extent holds): it is the run-time
//   argument `int kiln_extent`, CUDA's last kernel argument (after the error slot and scratch
//   buffer), GLSL's push constant block `KilnSizes { int outer; }` at offset 0; its launch has
//   launch_at(launch, extent).groups workgroups. Such a text is written for the kernel at its
//   size bucket's bound (kir::Kernel::dynamic_bound): every choice that reads sizes (block size,
//   vector lanes, index width, loop bounds) is the bound's, so one text serves the bucket.
// - Every loop's trip count is known when the text is written (shapes and launch shape are
//   static, a dynamic kernel's taken at its bound), so the source says how many loop iterations
//   one invocation runs at most (loop_iterations). Mesa's llvmpipe (lavapipe) ends all of an
//   invocation's loops early, without an error, once they have run 65535 iterations in all; a
//   device with such a budget refuses sources over it (check_loop_iterations).
#pragma once

#include <cstdint>
#include <string>

#include "codegen/check_mode.h"
#include "codegen/tune_params.h"
#include "ir/kernel_facts.h"
#include "ir/kernel_ir.h"
#include "kiln/error.h"

namespace kiln::codegen::gpu {

enum class Dialect { cuda, glsl };

struct LaunchShape {
  int64_t groups = 1;  // CUDA gridDim.x / vkCmdDispatch(groups, 1, 1); in [1, 65535]
  int group_size = 1;  // CUDA blockDim.x / GLSL local_size_x
  // A dynamic kernel's launch (0: static): `dynamic_tasks` workgroup tasks per `outer_block`
  // points of the outer axis (a matmul's row tile; else 1), `tasks_per_group` of them per
  // workgroup, so launch_at gives the extent's groups. `groups` is then the count at the bound.
  int64_t dynamic_tasks = 0;
  int64_t tasks_per_group = 1;
  int64_t outer_block = 1;
};

// The launch of a kernel at outer extent `outer`: `launch` itself for a static kernel; for a
// dynamic one, ceil(ceil(outer / outer_block) x dynamic_tasks / tasks_per_group) workgroups
// within [1, 65535].
LaunchShape launch_at(const LaunchShape& launch, int64_t outer);

// The largest bound (kir::Kernel::dynamic_bound) of a dynamic GPU kernel: its outer extent is an
// int argument.
inline constexpr int64_t kMaxDynamicBound = int64_t{1} << 30;

// Whether the GPU source of `kernel`, made dynamic with its bound set (kir::Kernel::dynamic_outer,
// dynamic_bound > 0), serves every outer extent from 2 up to the bound under `check` and
// `tensor_cores` (emit_source's): elementwise kernels (vector lanes only where the inner axes make
// them whole), row reductions unsplit whose rows include the outer axis, and the tiled matmul
// (its rows or its batch outermost). Bounds-checked code, scans, attention and the tensor-core
// matmul keep their sizes, as do instances of extent 0 or 1.
bool serves_any_outer_extent(const kir::Kernel& kernel, const kir::KernelFacts& facts,
                             CheckMode check, bool tensor_cores = false);

struct GpuSource {
  std::string text;      // a whole translation unit / shader
  std::string entry;     // CUDA: the extern "C" __global__ function; GLSL: "main"
  LaunchShape launch;
  std::string strategy;  // how the kernel maps to threads, for dumps ("elementwise", ...)
  // Split row reductions share partial results across workgroups through one more buffer, bound
  // after the parameters and the error slot: scratch_bytes long, its first scratch_zero_bytes
  // zeroed before the launch (the kernel leaves them zero again). 0: no scratch buffer.
  int64_t scratch_bytes = 0;
  int64_t scratch_zero_bytes = 0;
  // The most loop iterations one invocation runs, all loops together (nested loops' iterations
  // multiplied by their enclosing loops', a prelude helper's loops once per call written),
  // counted as llvmpipe counts them: each time a loop is reached, its iterations plus the pass
  // that finds its condition false. 0: not counted (tests' hand-written shaders, cache entries
  // written before the count).
  int64_t loop_iterations = 0;
  // Where the default schedule ran past a device's loop budget (runtime/gpu_target.cpp
  // emit_for_device): how many other schedules of the kernel's tuning space were tried, none
  // within it. -1: none was looked for (the budget held, or a tuner's candidate).
  int other_schedules_tried = -1;
};

// Deterministic: the same kernel, params and dialect give byte-identical text. `facts` are the
// kernel's analyses (ir/kernel_facts.h) as the lowering script recorded them; null: computed here.
// `tensor_cores` (CUDA on sm_80 and later, kiln.toml compilation.matmul_precision = "high"): a
// matmul runs on the tensor cores (strategy "matmul-mma"): f32 operands rounded to tf32 (10
// mantissa bits); f16 and bf16 ones as they are, their products exact (where the reference rounds
// each to the operand dtype); products and sums in f32.
Expected<GpuSource> emit_source(const kir::Kernel& kernel, const TuneParams& params, Dialect dialect,
                                CheckMode check = CheckMode::none,
                                const kir::KernelFacts* facts = nullptr,
                                bool tensor_cores = false);

// An error when `source` (of kernel `kernel`) runs more loop iterations per invocation than
// `limit`, the budget of `device` (a driver that cuts loops short past it): it names the kernel,
// its bound, the limit and the device.
Expected<void> check_loop_iterations(const GpuSource& source, const std::string& kernel,
                                     int64_t limit, const std::string& device);

// Bump when the emitted text changes for the same kernel (part of GPU cache keys).
inline constexpr const char* kGpuCodegenVersion = "kiln-gpu-15";

}  // namespace kiln::codegen::gpu
