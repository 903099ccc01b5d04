// Non-temporal ("streaming") stores for large outputs. A kernel that writes an output far larger
// than the caches with ordinary stores first reads every line it writes (read-for-ownership): a
// third more memory traffic for y = f(a, b), half more for a copy. A non-temporal store writes the
// line without reading it. x86 has them for aligned vectors only, so:
//   - the emitter starts the innermost loop's vector body at a 64-byte-aligned element of each
//     streaming output (a peeled scalar head, emit_kernel);
//   - after optimization, every vector store into a streaming output becomes non-temporal where
//     its address is aligned to its size: always, when LLVM proves the alignment, else behind a
//     run-time test of the address (stream_stores);
//   - the function fences (sfence) before it returns, so the stores are visible to whoever waits
//     for the kernel.
// Results are those of ordinary stores: only where the bytes travel changes.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "codegen/tune_params.h"
#include "ir/kernel_ir.h"

namespace llvm {
class Function;
}

namespace kiln::codegen::cpu {

// Outputs of at least this many bytes are written with streaming stores: well beyond a core's
// share of the last-level cache, so that the next kernel would read them from memory anyway.
inline constexpr int64_t kStreamingStoreBytes = int64_t{16} << 20;

// On a CPU whose last-level cache is large next to its outputs, an output that stays there is
// read back (by the next kernel, or the same one next time) from the cache, and written there
// faster than to memory: streaming pays only when the kernel's buffers together (its footprint)
// exceed this fraction of the last-level cache. On a 2-core slice of a Xeon reporting 480 MiB
// of L3, layernorm's 32 MiB in and 32 MiB out ran in 1.27 ms with ordinary stores against 1.52
// streamed, while a copy of 64 MiB into 64 MiB took 3.1-3.5 ms against 2.4 streamed (a C
// model); on a Zen's 32 MiB the rule is the output's size alone.
inline constexpr int64_t kStreamingCacheFraction = 4;

// A smaller output streams too, from kStreamingMinBytes, where the kernel's buffers together are
// at least kStreamingFootprintCaches times the last-level cache: the kernel's own reads evict
// most of its output from the cache before anything could read it back, and ordinary stores
// read every line first. reduce_sum and argmax over axis 0 of [16, 1024, 1024] (64 MiB read,
// 4 MiB written) on a Zen 4 of 32 MiB L3, 2 cores, A B A B: 1.93-2.19 ms -> 1.78-1.84 and
// 1.79-1.96 -> 1.52-1.56.
inline constexpr int64_t kStreamingMinBytes = int64_t{1} << 20;
inline constexpr int64_t kStreamingFootprintCaches = 2;

// One flag per parameter of `kernel`: stored to, never loaded by the kernel, of at least
// kStreamingStoreBytes, in a kernel whose footprint is at least llc_bytes /
// kStreamingCacheFraction; or of at least kStreamingMinBytes in a kernel whose footprint is at
// least kStreamingFootprintCaches * llc_bytes (llc_bytes: the last-level cache's size; 0,
// unknown: the output's size alone decides).
//
// That rule is the default (CpuStores::heuristic); the autotuner also times the other choice
// (autotune/tune_space.h), since where the rule's line falls depends on more than the cache's
// size: on a 2-core slice of a Xeon with 35.8 MiB of L3, layernorm (32 MiB in, 32 MiB out, which
// the rule streams) ran in 3.37-3.38 ms with ordinary stores against 4.29-4.39 streamed, while
// ew_chain (three 64 MiB inputs) ran in 12.1-12.3 streamed against 13.2-15.6. `stores` cached
// flags nothing; streaming flags every written-only output of at least kStreamingMinBytes.
std::vector<bool> streaming_buffers(const kir::Kernel& kernel, int64_t llc_bytes = 0,
                                    CpuStores stores = CpuStores::heuristic);

// The store kind the autotuner times besides the default's (CpuStores::heuristic) for `kernel`
// at `llc_bytes`: cached where the rule streams an output; streaming where it streams none but
// an output could (a written-only output of kStreamingMinBytes) and the kernel's buffers are at
// least the last-level cache (the 4 MiB rows of a softmax held in a 36 MiB L3 took 1.06 ms
// streamed against 0.77); nullopt where neither applies (no such output, or a kernel with
// run-time sizes, which streams nothing).
std::optional<CpuStores> other_store_kind(const kir::Kernel& kernel, int64_t llc_bytes);

// Whether a kernel at the sizes of its parameters may write an output with streaming stores: one
// of at least kStreamingStoreBytes whatever the cache, or, where `llc_bytes` (the last-level
// cache's size) is known, one that streams by its footprint next to that cache. Such a kernel
// keeps its size (a dynamic kernel streams nothing). `written_only` is kir::written_only of the
// kernel's body, which a caller holding only the kernel's sizes (a symbolic plan read back from
// the cache) keeps.
bool streams_at_its_size(const kir::Kernel& kernel, const std::vector<bool>& written_only,
                         int64_t llc_bytes = 0);

// Makes the vector stores of `fn` (a kernel entry point, optimized) into the buffers flagged in
// `streaming` non-temporal, as described above; the number of stores changed. Scalar and masked
// stores are left as they are.
int stream_stores(llvm::Function& fn, const std::vector<bool>& streaming);

}  // namespace kiln::codegen::cpu
