// How a kernel maps to GPU threads, decided by analysing its expressions: flash attention, a
// tiled matmul, a workgroup per row with cooperative reductions, or one thread per point.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "codegen/gpu/c_expr_emitter.h"
#include "ir/kernel_facts.h"
#include "ir/kernel_ir.h"

namespace kiln::codegen::gpu {

struct Strategy {
  // scan: one thread per row (a point of every domain axis but the innermost), walking the
  // innermost axis in order with each scan's running sum in a register. Correct first: a row is
  // not yet shared by a workgroup (a blocked scan), so a long row runs long in one thread (and
  // over a driver's loop budget, check_loop_iterations, past about 65535 steps on lavapipe).
  // attention: a workgroup per (batch point, block of attention_rows query rows) walking the keys
  // in tiles with an online softmax (codegen/gpu/attention_writer.cpp).
  enum class Kind { elementwise, row_reduce, matmul_tiled, scan, attention };
  Kind kind = Kind::elementwise;
  // row_reduce: a workgroup per row = per point of the first `row_vars` parallel variables
  // (domain.size() - 1: threads share the innermost axis; domain.size(): a workgroup per point).
  // `row_reduces` read only those variables (operands first); each is computed cooperatively.
  int32_t row_vars = 0;
  int group_size = 256;
  // elementwise: consecutive points of the innermost axis per thread (1, or kLanes with vector
  // loads and stores: codegen/gpu/lane_emitter.h).
  int lanes = 1;
  // row_reduce: workgroups sharing each row (codegen/gpu/row_reduce_writer.cpp); 1: one per row.
  int splits = 1;
  // row_reduce with a workgroup per point (row_vars == domain.size()): consecutive points of the
  // innermost axis a workgroup computes together, group_size / cols threads folding each. More
  // than 1 when the reductions read along that axis (a column reduction: gemv, a sum over rows),
  // so that a warp's loads are consecutive in memory.
  int cols = 1;
  std::vector<const kir::Expr*> row_reduces;
  kir::MatmulPattern matmul;
  kir::AttentionPattern attention;
  int attention_rows = 0;  // attention: query rows per workgroup (a power of two, <= 64)
};

const char* strategy_name(Strategy::Kind k);

// The heuristic launch shapes (TuneParams fields left at 0): an elementwise workgroup of 256
// threads, halved (down to 32) while half of it still covers every point; a matmul tile of 64
// when both output sides reach 64, else 16.
int heuristic_elementwise_block(int64_t points);
int heuristic_matmul_tile(int64_t rows, int64_t cols);
// A scan kernel's rows: the points of every domain axis but the innermost (the scanned one).
int64_t row_count_of_scan(const kir::Kernel& k);

// A row-reduce strategy's rows (points of its row variables) and its longest reduction.
int64_t row_count(const kir::Kernel& k, const Strategy& st);
int64_t longest_row_reduce(const Strategy& st);

// Whether several workgroups may share each row of a row reduction: "" when they may, else why
// not (a reduction that reads another, as in softmax, needs the whole row's result first).
inline constexpr int64_t kMaxSplitRows = 16384;
inline constexpr int kMaxSplits = 256;
std::string splits_blocker(const kir::Kernel& k, const Strategy& st);
// The heuristic split: few rows with long reductions get enough workgroups to fill a GPU
// (about kSplitTargetGroups in all), each thread still folding at least 8 elements.
inline constexpr int64_t kSplitTargetGroups = 256;
int heuristic_splits(const kir::Kernel& k, const Strategy& st);

// Appends the loads `e` reads (not in `seen`, which gains every expression visited), reductions'
// bodies included.
void collect_loads(const kir::Expr* e, std::unordered_set<const kir::Expr*>& seen,
                   std::vector<const kir::Expr*>& out);

// The points of the innermost axis a workgroup per point should take together (Strategy::cols):
// 1, or up to kMaxColumns when the loads inside the reductions that vary along that axis move by
// one element along it more often than along their own innermost reduction variable.
inline constexpr int kMaxColumns = 32;
int heuristic_columns(const kir::Kernel& k, const FreeVars& fv,
                      const std::vector<const kir::Expr*>& reduces);

// The kernel's matmul pattern (kir::KernelFacts::matmul) with both output sides at least
// kMinMatmulSide and K >= 1: smaller ones are not worth a tile.
inline constexpr int64_t kMinMatmulSide = 8;
std::optional<kir::MatmulPattern> matmul_of(const kir::Kernel& k, const kir::KernelFacts& facts);

// The flash-attention tiling (codegen/gpu/attention_writer.cpp): `rows` query rows per workgroup,
// kKeyTile keys per tile, head_dim staged kDepthChunk at a time, the value tile staged
// `value_keys` keys at a time. One shared float array holds, at these offsets: the rows x
// kKeyTile logits (then probabilities), each row's running max, running sum and rescale factor,
// and a work area that first holds the query and key chunks (rows + kKeyTile) x kDepthChunk, then
// the value rows value_keys x value_dim. All within kAttentionSharedBytes (Vulkan's guaranteed
// minimum of shared memory, CUDA's static limit being larger) for both dialects alike.
inline constexpr int kKeyTile = 32;
inline constexpr int kDepthChunk = 16;
inline constexpr int64_t kAttentionSharedBytes = 16 * 1024;
inline constexpr int kMaxAttentionRows = 64;
struct AttentionTiles {
  int rows = 0;
  int value_keys = 0;
  int64_t probs = 0, max = 0, sum = 0, scale = 0, work = 0, floats = 0;  // offsets, size
};
// nullopt when even one value row does not fit beside the rest.
std::optional<AttentionTiles> attention_tiles(int rows, int64_t value_dim);
// Query rows per workgroup when the tile field is 0: up to 64 (at most the queries, rounded up to
// a power of two), halved down to 16 while the workgroups would number under
// kSplitTargetGroups, and while the tiles would not fit; 0 when not even one row fits.
int heuristic_attention_rows(const kir::Kernel& k, const kir::AttentionPattern& a);
// Threads per workgroup for `rows` query rows when block_size is 0: a quarter of the larger of
// the scores and the output tile, in [64, 256].
int heuristic_attention_threads(int rows, int64_t value_dim);
// Whether the tensor cores take this attention (codegen/gpu/mma_attention_writer.cpp, with
// compilation.matmul_precision = "high" on CUDA sm_80+): a head and a value width that are
// multiples of 8, up to 128. Its tiling is fixed (no tuning space).
bool mma_attention_supports(const kir::Kernel& k, const kir::AttentionPattern& a);
// The kernel's attention pattern (kir::KernelFacts::attention) when every value it computes is
// f32 and its tiles fit (some row count does): otherwise the generic strategies run it.
std::optional<kir::AttentionPattern> attention_of(const kir::Kernel& k,
                                                  const kir::KernelFacts& facts);

// `tensor_cores` (CUDA with matmul_precision = "high", gpu_source.h): f16 and bf16 matmuls
// (kir::recognize_matmul with half) are matmuls too; only the tensor-core writer takes them.
Strategy choose_strategy(const kir::Kernel& k, const kir::KernelFacts& facts,
                         bool tensor_cores = false);

}  // namespace kiln::codegen::gpu
