// The tuning spaces of the cpu and GPU targets: the TuneParams candidates of a kernel, by kernel
// kind, with priorities and groups (TVM meta_schedule's "space generator").
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
// - attention (codegen/cpu/attention_emitter.h): query rows per block (tile) 16..128, nearest to
//   32 first, then 16-lane micro-kernels at 32 and 64 rows;
// - other loops (elementwise, row reductions): first, where a large output could be written
//   either way, the store kind the default does not use (codegen/cpu/streaming_stores.h:
//   other_store_kind at `llc_bytes`, the last-level cache compiled for); then vector_width 4/8/16
//   x unroll (interleave) 1/2/4, nearest first to 256-bit vectors of the widest parameter dtype
//   and to unroll 2; widths whose vector x unroll exceeds the innermost trip count are left out
//   (width 4 x 1 always stays).
std::vector<TuneCandidate> cpu_tune_space(const kir::Kernel& kernel, int64_t llc_bytes = 0);

// The space cut to the level's candidate count (settings(level).max_candidates).
std::vector<TuneCandidate> cpu_tune_space(const kir::Kernel& kernel, Level level,
                                          int64_t llc_bytes = 0);

// The GPU space (CUDA and Vulkan share it: both run the codegen/gpu strategies), the default
// (TuneParams{}: the strategy's heuristic launch shape) first, then by priority; candidates that
// would emit the default's launch shape again are left out:
// - tiled matmuls: the output tile's side 16/32/64/128 (up to the next power of two of the
//   larger output side), nearest to 64 first;
// - flash attention: query rows per workgroup (tile) 16/32/64 (up to the next power of two of
//   the queries, where the tiles fit shared memory), nearest to the heuristic first; then
//   block_size 128 and 256;
// - row reductions (a workgroup per row): block sizes 32..1024 up to the next power of two of the
//   row's longest loop, nearest to 256 first; then, when every point has a reduction of its own
//   (not one broadcast over a row, as in softmax), reduce=thread (a thread per point, each
//   reduction a loop in it) with blocks of 64/128/256;
// - other kernels (a thread per point): block sizes 64..512 x items per thread 1/2/4 (up to the
//   points there are), nearest to 256 x 2 first; reduce=thread is the strategy already.
// `tensor_cores`: as codegen::gpu::choose_strategy's (f16 and bf16 matmuls are matmuls).
std::vector<TuneCandidate> gpu_tune_space(const kir::Kernel& kernel, bool tensor_cores = false);
std::vector<TuneCandidate> gpu_tune_space(const kir::Kernel& kernel, Level level,
                                          bool tensor_cores = false);

}  // namespace kiln::autotune
