// A recognized matmul kernel (codegen/cpu/matmul_recognizer.h) -> a tiled, register-blocked LLVM
// function with the same signature and semantics as the generic emitter's (llvm_emitter.h).
#pragma once

#include <cstdint>
#include <optional>

#include "codegen/cpu/llvm_emitter.h"
#include "codegen/cpu/matmul_recognizer.h"

namespace kiln::codegen::cpu {

// Per thread chunk [begin, end) of the outermost axis and per batch point: per block of columns
// (as many NR-wide panels as fit a quarter of a core's L2), the column operand is packed once into
// a scratch buffer (zero past N); per MR-row block the row operand is packed once (prologues
// evaluated there) unless its rows are read in place (one load contiguous in k), then each panel
// accumulates an MR x NR register tile over all of k and the epilogues run per element of the
// tile. A kernel of one batch point that is not dynamic takes [begin, end) in units of a column
// block and a group of rows (tiled_units), so that each block is packed by the one thread whose
// chunk holds its units. Each call packs what it meets, so a thread runs one chunk
// (chunks_per_thread 1). Scratch comes from malloc/free (never a global), so concurrent
// calls on disjoint ranges are safe. TuneParams::vector_width 4, 8 or 16 forces the tile's lanes.
//
// A matmul with at most kGemvMaxRows rows and unit batch axes (a matrix-vector product) takes a
// streaming path instead: no packing, the function's [begin, end) counts blocks of
// kGemvBlockColumns columns (gemv_column_blocks), and each row of b is read once, contiguously,
// into per-span accumulators that stay in L1. Where b's columns lie along k instead (x Wᵀ: ONNX's
// Gemm with transB, torch's Linear), each column is read once, in place, into one dot product per
// row, in an order fixed by the IR (16 lanes), so every CPU gives one result; the tiled path packs
// such a b column by column.
Expected<llvm::Function*> emit_matmul_kernel(const kir::Kernel& kernel, const MatmulPattern& p,
                                             const EmitOptions& options, llvm::Module& module);

constexpr int64_t kGemvMaxRows = 4;
constexpr int64_t kGemvBlockColumns = 64;

// The number of column blocks when `kernel` takes the matrix-vector path; nullopt otherwise.
std::optional<int64_t> gemv_column_blocks(const kir::Kernel& kernel, const MatmulPattern& p);
// The same for a kernel of this domain specialized to its size (not dynamic).
std::optional<int64_t> gemv_column_blocks_at_size(const std::vector<int64_t>& domain);

// The number of (column block, row group) units when `kernel` takes the tiled path over units
// (one batch point, not dynamic, not empty); nullopt where its range is the outermost axis.
std::optional<int64_t> tiled_units(const kir::Kernel& kernel, const MatmulPattern& p,
                                   const EmitOptions& options);

}  // namespace kiln::codegen::cpu
