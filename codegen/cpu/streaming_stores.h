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
#include <vector>

#include "ir/kernel_ir.h"

namespace llvm {
class Function;
}

namespace kiln::codegen::cpu {

// Outputs of at least this many bytes are written with streaming stores: well beyond a core's
// share of the last-level cache, so that the next kernel would read them from memory anyway.
inline constexpr int64_t kStreamingStoreBytes = int64_t{16} << 20;

// One flag per parameter of `kernel`: stored to, never loaded by the kernel, and of at least
// kStreamingStoreBytes.
std::vector<bool> streaming_buffers(const kir::Kernel& kernel);

// Makes the vector stores of `fn` (a kernel entry point, optimized) into the buffers flagged in
// `streaming` non-temporal, as described above; the number of stores changed. Scalar and masked
// stores are left as they are.
int stream_stores(llvm::Function& fn, const std::vector<bool>& streaming);

}  // namespace kiln::codegen::cpu
