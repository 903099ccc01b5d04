// A recognized attention kernel (kir::AttentionPattern, ir/kernel_analysis.h) -> a flash-style
// LLVM function with the generic emitter's signature and semantics (llvm_emitter.h).
//
// The function's [begin, end) counts work units: (batch point, block of query rows), the block
// fastest (attention_units). Per call, per batch point met: K is packed in key tiles of
// kAttentionKeyTile ([tile][d][key], zero past the last key) and V as rows padded to the vector
// width; per unit, Q's rows are packed ([d][row]). Per key tile (tiles wholly past a causal
// mask's limit for the block's last row are skipped): the scores of the block's rows in a
// register tile (fused multiply-adds over d in order), the logits expression per score (a tile
// that every row of the block sees whole takes the causal mask's visible branch alone), then the
// online softmax in passes over the block's rows (each row's tile max; over the rows at once the
// running max m and the rescale alpha = exp(m_old - m_new); per row p = exp(x - m) and the running
// sum l), and the accumulation of p·V (over keys in order), acc rescaled by alpha as it is loaded.
// Stores: the epilogue at acc / l.
//
// One difference from the reference's dense evaluation: a key tile skipped under a causal mask
// adds nothing, where the reference adds 0 * V (NaN for an infinite or NaN value row). Masked keys
// inside a computed tile add 0 * V like the reference.
//
// Results do not depend on the vector width or ISA: every sum runs in a fixed order (d, then
// keys; the running sum l in 16 fixed lanes reduced by a fixed tree), and the key tile is a
// constant. TuneParams::tile picks the query rows per block (16..128; 0: the heuristic),
// vector_width 8 or 16 the micro-kernels' lanes.
#pragma once

#include <cstdint>

#include "codegen/cpu/llvm_emitter.h"
#include "ir/kernel_analysis.h"

namespace kiln::codegen::cpu {

inline constexpr int64_t kAttentionKeyTile = 64;

Expected<llvm::Function*> emit_attention_kernel(const kir::Kernel& kernel,
                                                const kir::AttentionPattern& p,
                                                const EmitOptions& options, llvm::Module& module);

// The number of work units the function's [begin, end) ranges over.
int64_t attention_units(const kir::Kernel& kernel, const EmitOptions& options);

// Where the query rows are a run-time size: the rows of a work unit's block (an instance of n
// rows runs batch points x ceil(n / rows) units); 0 where they are compiled in.
int64_t attention_unit_rows(const kir::Kernel& kernel, const EmitOptions& options);

}  // namespace kiln::codegen::cpu
