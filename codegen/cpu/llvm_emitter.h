// Kernel IR -> one LLVM function `void NAME(void* const* buffers, int64_t begin, int64_t end)`:
// the parallel loop nest, memoized expressions hoisted to the loop that defines their variables,
// and reductions as loop nests of their own at the point of use.
#pragma once

#include <string>
#include <vector>

#include "codegen/check_mode.h"
#include "codegen/tune_params.h"
#include "ir/kernel_facts.h"
#include "ir/kernel_ir.h"
#include "kiln/error.h"

namespace llvm {
class Function;
class IRBuilderBase;
class LLVMContext;
class MDNode;
class Module;
class Value;
}  // namespace llvm

namespace kiln::codegen::cpu {

struct EmitOptions {
  std::string symbol;    // the function's name, unique within the JIT
  std::string cpu;       // "target-cpu" attribute, so the cost model sees the host's vectors
  std::string features;  // "target-features" attribute
  TuneParams params;     // vector_width / unroll > 0 become llvm.loop metadata
  CheckMode check = CheckMode::none;  // bounds checks on every load and store index
  // The kernel's analyses (ir/kernel_facts.h): free variables, matmul pattern, row reuse, loop
  // cuts. Never null when emitting.
  const kir::KernelFacts* facts = nullptr;
  // The last-level cache's bytes (0: unknown), which decides streaming stores (streaming_stores.h).
  int64_t llc_bytes = 0;
};

// Declares the kernel entry point `void SYMBOL(ptr buffers, i64 begin, i64 end)` in `module`
// with the host attributes of `options`, shared by every kernel kind's emitter.
llvm::Function* create_kernel_function(llvm::Module& module, const EmitOptions& options);

// The kernel's `count` buffer pointers, loaded from its first argument at b's insertion point
// (named buf0, buf1, ...): every emitter's prologue.
std::vector<llvm::Value*> load_buffer_pointers(llvm::IRBuilderBase& b, llvm::Function* fn,
                                               size_t count);
// A kernel with run-time sizes (ir/kernel_sizes.h): each slot's value this launch, from the array
// of i64 after the parameters, as its dtype (a float slot's double bits rounded as
// register_constant rounds). Empty for a kernel without sizes.
std::vector<llvm::Value*> load_size_values(llvm::IRBuilderBase& b, llvm::Function* fn,
                                           const kir::Kernel& kernel);

// The most buffers a kernel gets alias scopes for (see add_buffer_alias_scopes).
inline constexpr size_t kMaxScopedBuffers = 16;

// Marks every load and store of `fn` whose address derives from buffers[i] as not aliasing any
// other buffer's (scoped noalias metadata). The runtime never passes one allocation as two
// parameters that a kernel both writes and reads, so loops need no runtime overlap checks (which
// LLVM refuses for short loops: an [8,8,8] elementwise kernel stayed scalar).
void add_buffer_alias_scopes(llvm::Function& fn, const std::vector<llvm::Value*>& buffers);

// llvm.loop metadata asking the vectorizer for `vector_width` lanes and `interleave` copies (each
// ignored when <= 0) for a loop with no loop inside; with `keep_rolled`, LLVM's unroller leaves
// the (vectorized) loop a loop. Null when there is nothing to ask.
llvm::MDNode* vectorize_hints(llvm::LLVMContext& ctx, int vector_width, int interleave,
                              bool keep_rolled = false);
// Loop metadata that keeps the loop vectorizer (and its interleaving) off the loop.
llvm::MDNode* no_vectorize_hint(llvm::LLVMContext& ctx);

// Emits `kernel` into `module` (whose data layout and triple the caller has set). Errors name the
// kernel and what in it could not be lowered; the module is then left incomplete. Checked kernels
// always take the generic loop-nest emitter (the tiled matmul emitter has no checks).
Expected<llvm::Function*> emit_kernel(const kir::Kernel& kernel, const EmitOptions& options,
                                      llvm::Module& module);

// The range [begin, end) that emit_kernel's function takes for `kernel`: the extent of the
// outermost domain axis, except for kernels that the matmul emitter runs as a matrix-vector
// product (blocks of columns), a tiled matmul (its tiles) or attention (blocks of query rows).
int64_t parallel_extent(const kir::Kernel& kernel, const EmitOptions& options);

// For a kernel with run-time sizes whose range is neither fixed nor its outer extent, the query
// rows of one unit of it (attention over a run-time count of query rows: attention_unit_rows);
// 0 otherwise. CpuBackend::instance_range computes an instance's range with it.
int64_t unit_rows(const kir::Kernel& kernel, const EmitOptions& options);

// How many chunks per thread the range [0, parallel_extent) should be cut into (0: the thread
// pool's default, which balances late-waking threads). A matrix-vector product takes 1: its
// chunks are stripes of columns, and a stripe per thread reads each row of the matrix in the
// longest runs the hardware prefetchers follow (4096 x 4096 floats on 2 cores: 8 stripes of 512
// columns read at 27 GB/s, 2 of 2048 at 45).
int chunks_per_thread(const kir::Kernel& kernel, const kir::KernelFacts& facts, CheckMode check);

// The multiple of which the caller cuts [0, parallel_extent) into chunks: for a kernel of one axis
// (which is its vectorized loop), the elements of one iteration of its vector body (lanes times
// interleave), so that no chunk runs its points in the loop's remainder; 1 for the others. A
// deep chain (small_ops: 512 points, 768 dependent operations each) on 2 threads was cut into 6
// chunks of 85 points, short of one 128-point iteration: 5.8 us, against 4.2 on one thread.
int64_t chunk_alignment(const kir::Kernel& kernel, const EmitOptions& options);

// Whether emit_kernel's code for `kernel` made dynamic (kir::Kernel::dynamic_outer) serves every
// extent of its outer axis, with parallel_extent the outer extent of each instance: the emitters
// read domain[0] only as the [begin, end) they are called with. Not so for checked code, attention,
// a one-row matrix-vector product, a one-axis kernel cut in pieces, with steps (their arms are
// this extent's) or reusing reduction rows, or a kernel with streaming outputs.
bool serves_any_outer_extent(const kir::Kernel& kernel, const kir::KernelFacts& facts,
                             CheckMode check, int64_t llc_bytes = 0);

// Whether emit_kernel's code for `kernel`, a kernel with run-time sizes (ir/kernel_sizes.h), and
// `facts`, its own analyses, serves every instance kir::match_sizes finds: the generic emitter
// reads every slot at run time (the sizes array is the function's buffer after the parameters)
// and keeps no reduction row. An attention kernel (the flash-style emitter) does where its key
// count alone is a slot (a cache read to any length): its query rows, head width and batch are
// compiled in. Not so for checked code, matrix products (their emitter is built on fixed sizes),
// other attention kernels, an innermost axis cut in pieces by wrap-around indices, a
// float sum whose run-time extent is not its outermost one or whose inner extents exceed one
// block (codegen/sum_blocks.h), or a kernel with streaming outputs at this instance's sizes.
bool serves_any_sizes(const kir::Kernel& kernel, const kir::KernelFacts& facts, CheckMode check,
                      int64_t llc_bytes = 0);

// Whether that code (`general`: its facts) runs `special`, an instance of it at fixed sizes whose
// own analyses are `special_facts`, as fast as the code compiled for it would: the same rows kept
// (a kept row's length is the innermost axis, up to kir::kMaxRowReuseBytes; longer rows are
// computed again, by both), and no streaming stores chosen at its size.
bool serves_sizes_instance(const kir::KernelFacts& general, const kir::Kernel& special,
                           const kir::KernelFacts& special_facts, int64_t llc_bytes = 0);

// The largest value each run-time size may take in emit_kernel's code for `kernel` (-1: any): a
// row kept on the stack holds at most kir::kMaxRowReuseBytes (CpuArtifact::size_limits).
std::vector<int64_t> size_limits(const kir::Kernel& kernel, const kir::KernelFacts& facts);

}  // namespace kiln::codegen::cpu
