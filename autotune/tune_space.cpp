// The cpu and GPU tuning spaces by kernel kind.
#include "autotune/tune_space.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstdlib>

#include "codegen/cpu/matmul_recognizer.h"
#include "codegen/cpu/streaming_stores.h"
#include "codegen/gpu/lane_emitter.h"
#include "codegen/gpu/launch_strategy.h"

namespace kiln::autotune {

namespace {

using codegen::TuneParams;

TuneParams params(int vector_width, int unroll) {
  TuneParams p;
  p.vector_width = vector_width;
  p.unroll = unroll;
  return p;
}

int log2_int(int x) {
  return std::bit_width(static_cast<unsigned>(x)) - 1;
}

std::vector<TuneCandidate> matmul_space() {
  return {{params(8, 0), 1, "matmul/lanes"},
          {params(16, 0), 2, "matmul/lanes"},
          {params(4, 0), 3, "matmul/lanes"}};
}

// Attention (codegen/cpu/attention_emitter.h): query rows per block 16..128 (up to the next
// power of two of the query rows), nearest to 32 (the default) first, at the host's lanes; then 16-lane tiles
// at 32 and 64 rows. The key tile is fixed (results do not depend on the schedule).
std::vector<TuneCandidate> attention_space(const kir::Kernel& k) {
  const int64_t rows = k.domain[k.domain.size() - 2];
  std::vector<TuneCandidate> out;
  for (int tile : {16, 64, 128}) {  // 32 rows at the host's lanes is the default
    if (tile > 16 && tile / 2 >= rows) continue;
    TuneParams p;
    p.tile = tile;
    out.push_back({p, 1 + std::abs(log2_int(tile) - 5), "attention/rows"});
  }
  for (int tile : {32, 64}) {
    if (tile > 16 && tile / 2 >= rows) continue;
    TuneParams p;
    p.tile = tile;
    p.vector_width = 16;
    out.push_back({p, 4 + std::abs(log2_int(tile) - 5), "attention/lanes"});
  }
  return out;
}

// The longest trip count of a loop with no loop inside: the innermost parallel axis (when a store
// runs outside any reduction) or a reduction's innermost variable.
int64_t innermost_trip(const kir::Kernel& k) {
  int64_t trip = k.domain.empty() ? 1 : k.domain.back();
  for (const kir::Expr* e : kir::kernel_exprs(k))
    if (e->kind == kir::ExprKind::Reduce && !e->rextents.empty())
      trip = std::max(trip, e->rextents.back());
  return trip;
}

std::vector<TuneCandidate> loop_space(const kir::Kernel& k) {
  int widest = 1;
  for (const kir::Param& p : k.params) widest = std::max(widest, ir::dtype_size(p.dtype));
  const int natural = std::clamp(32 / widest, 4, 16);
  const int64_t trip = innermost_trip(k);
  std::vector<TuneCandidate> out;
  for (int vw : {4, 8, 16})
    for (int unroll : {1, 2, 4}) {
      if (vw * unroll > trip && !(vw == 4 && unroll == 1)) continue;
      const int priority =
          1 + 2 * std::abs(log2_int(vw) - log2_int(natural)) + std::abs(log2_int(unroll) - 1);
      out.push_back({params(vw, unroll), priority, fmt::format("loop/vector_width={}", vw)});
    }
  return out;
}

int64_t next_pow2(int64_t x) {
  int64_t p = 1;
  while (p < x) p *= 2;
  return p;
}

int64_t numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

TuneParams gpu_params(int block, int items, codegen::GpuReduce reduce, int tile) {
  TuneParams p;
  p.block_size = block;
  p.items_per_thread = items;
  p.reduce = reduce;
  p.tile = tile;
  return p;
}

std::vector<TuneCandidate> gpu_matmul_space(const kir::Kernel& k) {
  const size_t rank = k.domain.size();
  const int64_t side = std::max(k.domain[rank - 2], k.domain[rank - 1]);
  const int heuristic = codegen::gpu::heuristic_matmul_tile(k.domain[rank - 2], k.domain[rank - 1]);
  std::vector<TuneCandidate> out;
  for (int tile : {16, 32, 64, 128}) {
    if (tile == heuristic || tile > std::max<int64_t>(16, next_pow2(side))) continue;
    out.push_back({gpu_params(0, 0, codegen::GpuReduce::heuristic, tile),
                   1 + std::abs(log2_int(tile) - 6), "matmul/tile"});
  }
  return out;
}

std::vector<TuneCandidate> gpu_row_space(const kir::Kernel& k, const codegen::gpu::Strategy& st) {
  int64_t width = st.row_vars < static_cast<int32_t>(k.domain.size()) ? k.domain.back() : 1;
  for (const kir::Expr* r : st.row_reduces) width = std::max(width, numel(r->rextents));
  std::vector<TuneCandidate> out;
  for (int block = 32; block <= 1024; block *= 2) {
    if (block == st.group_size || block > std::max<int64_t>(32, next_pow2(width))) continue;
    out.push_back({gpu_params(block, 0, codegen::GpuReduce::heuristic, 0),
                   1 + std::abs(log2_int(block) - 8), "reduce=workgroup"});
  }
  // Workgroups per row, where rows may be split: fewer and more than the heuristic's, each
  // workgroup still folding at least one element per thread.
  if (codegen::gpu::splits_blocker(k, st).empty()) {
    const int64_t rows = codegen::gpu::row_count(k, st), longest = codegen::gpu::longest_row_reduce(st);
    for (int splits : {1, 4, 16, 64, 256}) {
      if (splits == st.splits || rows * splits > 4096 || longest < int64_t{splits} * st.group_size) continue;
      TuneParams p;
      p.splits = splits;
      out.push_back({p, 1 + std::abs(log2_int(splits) - log2_int(st.splits)) / 2, "reduce=workgroup/splits"});
    }
  }
  // A thread per point recomputes a reduction for every point that reads it: only when each
  // point has its own (a workgroup per point), never for reductions broadcast over a row.
  if (st.row_vars == static_cast<int32_t>(k.domain.size()))
    for (int block : {128, 64, 256})
      out.push_back({gpu_params(block, 0, codegen::GpuReduce::thread, 0),
                     3 + std::abs(log2_int(block) - 7), "reduce=thread"});
  return out;
}

// Block size x items per thread, and where four lanes apply (codegen/gpu/lane_emitter.h) both
// one and four points per thread; the default's launch (heuristic block, one item, heuristic
// lanes) is left out. Lanes are then always explicit, so a decision keeps its meaning.
std::vector<TuneCandidate> gpu_point_space(const kir::Kernel& k) {
  const int64_t points = numel(k.domain);
  const codegen::gpu::FreeVars fv(k);
  const bool lanes_apply = codegen::gpu::lanes_blocker(k, fv).empty();
  const int default_lanes = codegen::gpu::heuristic_lanes(k, fv);
  std::vector<TuneCandidate> out;
  for (int lanes : {default_lanes, default_lanes == 1 ? codegen::gpu::kLanes : 1}) {
    if (lanes != default_lanes && !lanes_apply) continue;
    const int64_t units = points / lanes;
    const int heuristic = codegen::gpu::heuristic_elementwise_block(units);
    for (int block : {64, 128, 256, 512})
      for (int items : {1, 2, 4}) {
        if (lanes == default_lanes && items == 1 && block == heuristic) continue;  // the default
        if (int64_t{block} * items > std::max<int64_t>(64, next_pow2(units))) continue;
        TuneParams p = gpu_params(block, items, codegen::GpuReduce::heuristic, 0);
        p.vector_loads = lanes_apply ? lanes : 0;
        // Other lanes are tried first at the default's block and one item.
        const int items_cost = lanes == default_lanes ? std::abs(log2_int(items) - 1) : log2_int(items);
        out.push_back({p, 1 + std::abs(log2_int(block) - 8) + items_cost,
                       fmt::format("elementwise/lanes={}/items={}", lanes, items)});
      }
  }
  return out;
}

// The default first, then `rest` by priority, without repeating params.
std::vector<TuneCandidate> with_default(std::vector<TuneCandidate> rest) {
  std::ranges::stable_sort(rest, {}, &TuneCandidate::priority);
  std::vector<TuneCandidate> out{{TuneParams{}, 0, "default"}};
  for (TuneCandidate& c : rest)
    if (std::ranges::none_of(out, [&](const TuneCandidate& o) { return o.params == c.params; }))
      out.push_back(std::move(c));
  return out;
}

std::vector<TuneCandidate> capped(std::vector<TuneCandidate> all, Level level) {
  const int cap = settings(level).max_candidates;
  if (cap > 0 && static_cast<int>(all.size()) > cap) all.resize(static_cast<size_t>(cap));
  return all;
}

bool has_scan(const kir::Kernel& k) {
  return std::ranges::any_of(kir::kernel_exprs(k),
                             [](const kir::Expr* e) { return e->kind == kir::ExprKind::Scan; });
}

// A scan kernel's rows are spread over the GPU one thread each: smaller workgroups spread few
// rows over more of its multiprocessors.
std::vector<TuneCandidate> gpu_scan_space() {
  std::vector<TuneCandidate> out;
  for (int block : {64, 128})
    out.push_back({gpu_params(block, 0, codegen::GpuReduce::heuristic, 0), 1,
                   fmt::format("scan/block_size={}", block)});
  return out;
}

// Flash attention (codegen/gpu/attention_writer.cpp): query rows per workgroup (tile) 16/32/64,
// up to the queries rounded up to a power of two, where the tiles fit, nearest to the heuristic
// first; then 128 and 256 threads for the heuristic rows.
std::vector<TuneCandidate> gpu_attention_space(const kir::Kernel& k,
                                               const codegen::gpu::Strategy& st) {
  namespace gpu = codegen::gpu;
  const int64_t queries = k.domain[st.attention.i_var], value_dim = k.domain.back();
  const int rows = st.attention_rows;
  std::vector<TuneCandidate> out;
  for (int tile : {16, 32, 64}) {
    if (tile == rows || tile > std::max<int64_t>(16, next_pow2(queries)) ||
        !gpu::attention_tiles(tile, value_dim))
      continue;
    out.push_back({gpu_params(0, 0, codegen::GpuReduce::heuristic, tile),
                   1 + std::abs(log2_int(tile) - log2_int(rows)), "attention/tile"});
  }
  for (int block : {128, 256})
    if (block != st.group_size && block >= rows)
      out.push_back({gpu_params(block, 0, codegen::GpuReduce::heuristic, 0), 3,
                     "attention/block_size"});
  return out;
}

}  // namespace

std::vector<TuneCandidate> cpu_tune_space(const kir::Kernel& kernel, int64_t llc_bytes) {
  // A scan's loop stays scalar (one summation order): vector widths and unrolls are one kernel.
  if (has_scan(kernel)) return with_default({});
  const kir::KernelFacts facts = kir::analyze_kernel(kernel);
  if (codegen::cpu::matmul_of(facts)) return with_default(matmul_space());
  if (facts.attention) return with_default(attention_space(kernel));
  std::vector<TuneCandidate> rest;
  if (const std::optional<codegen::CpuStores> other =
          codegen::cpu::other_store_kind(kernel, llc_bytes)) {
    TuneParams p;
    p.stores = *other;
    rest.push_back({p, 1, "loop/stores"});
  }
  for (TuneCandidate& c : loop_space(kernel)) rest.push_back(std::move(c));
  return with_default(std::move(rest));
}

std::vector<TuneCandidate> cpu_tune_space(const kir::Kernel& kernel, Level level,
                                          int64_t llc_bytes) {
  return capped(cpu_tune_space(kernel, llc_bytes), level);
}

std::vector<TuneCandidate> gpu_tune_space(const kir::Kernel& kernel, bool tensor_cores) {
  const codegen::gpu::Strategy st =
      codegen::gpu::choose_strategy(kernel, kir::analyze_kernel(kernel), tensor_cores);
  switch (st.kind) {
    case codegen::gpu::Strategy::Kind::matmul_tiled: return with_default(gpu_matmul_space(kernel));
    case codegen::gpu::Strategy::Kind::row_reduce: return with_default(gpu_row_space(kernel, st));
    case codegen::gpu::Strategy::Kind::scan:
      return with_default(gpu_scan_space());
    case codegen::gpu::Strategy::Kind::attention:
      // On the tensor cores (codegen/gpu/mma_attention_writer.cpp) the tiling is fixed.
      if (tensor_cores && codegen::gpu::mma_attention_supports(kernel, st.attention))
        return with_default({});
      return with_default(gpu_attention_space(kernel, st));
    case codegen::gpu::Strategy::Kind::elementwise: break;
  }
  return with_default(gpu_point_space(kernel));
}

std::vector<TuneCandidate> gpu_tune_space(const kir::Kernel& kernel, Level level,
                                          bool tensor_cores) {
  return capped(gpu_tune_space(kernel, tensor_cores), level);
}

}  // namespace kiln::autotune
