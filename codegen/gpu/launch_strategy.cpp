// Strategy choice for GPU kernels: attention and matmul recognition, row-level reductions.
#include "codegen/gpu/launch_strategy.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include <unordered_set>
#include "codegen/gpu/lane_emitter.h"
#include "ir/post_order.h"

namespace kiln::codegen::gpu {

using kir::Expr;
using kir::ExprKind;

namespace {

// The shortest reduction worth a workgroup per row.
constexpr int64_t kMinRowReduce = 32;
// A workgroup per point (each reduction strided over the group) reads columns uncoalesced: only
// worth it when one thread per point leaves the device mostly idle.
constexpr int64_t kMaxPointsForGroupPerPoint = 2048;
// Column workgroups (Strategy::cols > 1) read coalesced: worth it until one thread per point
// (each folding its column alone) has enough threads to keep the device's memory busy.
constexpr int64_t kMaxPointsForColumns = 65536;
constexpr int64_t kMinColumns = 4;
constexpr int64_t kColumnThreads = int64_t{1} << 18;

int64_t product(const std::vector<int64_t>& v) {
  int64_t n = 1;
  for (int64_t d : v) n *= d;
  return n;
}

int64_t reduce_size(const Expr* r) { return product(r->rextents); }

}  // namespace

const char* strategy_name(Strategy::Kind k) {
  switch (k) {
    case Strategy::Kind::row_reduce: return "row-reduce";
    case Strategy::Kind::matmul_tiled: return "matmul-tiled";
    case Strategy::Kind::scan:
      return "scan";
    case Strategy::Kind::attention: return "attention";
    case Strategy::Kind::elementwise: break;
  }
  return "elementwise";
}

int heuristic_elementwise_block(int64_t points) {
  int g = 256;
  while (g > 32 && g / 2 >= points) g /= 2;
  return g;
}

int64_t row_count_of_scan(const kir::Kernel& k) {
  return k.domain.empty() ? 1 : product(std::vector<int64_t>(k.domain.begin(), k.domain.end() - 1));
}

int heuristic_matmul_tile(int64_t rows, int64_t cols) { return rows >= 64 && cols >= 64 ? 64 : 16; }

void collect_loads(const Expr* root, std::unordered_set<const Expr*>& seen,
                   std::vector<const Expr*>& out) {
  ir::pre_order(root, seen, [&](const Expr* e) {
    if (e->kind == ExprKind::Load) out.push_back(e);
    return true;
  });
}

int heuristic_columns(const kir::Kernel& k, const FreeVars& fv,
                      const std::vector<const Expr*>& reduces) {
  if (k.domain.empty() || k.domain.back() < kMinColumns) return 1;
  const auto col = static_cast<int32_t>(k.domain.size() - 1);
  int along_columns = 0, along_reduction = 0;
  for (const Expr* r : reduces) {
    std::unordered_set<const Expr*> seen;
    std::vector<const Expr*> loads;
    collect_loads(r->args[0], seen, loads);
    for (const Expr* load : loads) {
      if (!fv.uses(load, col)) continue;  // the same value for every column: cached
      if (var_coefficient(load->args[0], col, fv) == 1)
        ++along_columns;
      else if (var_coefficient(load->args[0], r->rvars.back(), fv) == 1)
        ++along_reduction;
    }
  }
  if (along_columns <= along_reduction) return 1;
  return static_cast<int>(
      std::min<int64_t>(kMaxColumns, std::bit_ceil(static_cast<uint64_t>(k.domain.back()))));
}

namespace {
std::optional<kir::MatmulPattern> worth_a_tile(const kir::Kernel& k,
                                               const std::optional<kir::MatmulPattern>& m) {
  const auto rank = static_cast<int32_t>(k.domain.size());
  if (rank < 2 || k.domain[rank - 1] < kMinMatmulSide || k.domain[rank - 2] < kMinMatmulSide)
    return std::nullopt;
  if (m && m->k_extent < 1) return std::nullopt;
  return m;
}
}  // namespace

std::optional<kir::MatmulPattern> matmul_of(const kir::Kernel& k, const kir::KernelFacts& facts) {
  return worth_a_tile(k, facts.matmul);
}

std::optional<AttentionTiles> attention_tiles(int rows, int64_t value_dim) {
  AttentionTiles t;
  t.rows = rows;
  t.probs = 0;
  t.max = int64_t{rows} * kKeyTile;
  t.sum = t.max + rows;
  t.scale = t.sum + rows;
  t.work = t.scale + rows;
  const int64_t budget = kAttentionSharedBytes / 4 - t.work;
  const int64_t chunks = int64_t{rows + kKeyTile} * kDepthChunk;
  if (chunks > budget || value_dim < 1) return std::nullopt;
  for (int keys = kKeyTile; keys >= 1 && t.value_keys == 0; keys /= 2)
    if (keys * value_dim <= budget) t.value_keys = keys;
  if (t.value_keys == 0) return std::nullopt;
  t.floats = t.work + std::max(chunks, t.value_keys * value_dim);
  return t;
}

int heuristic_attention_rows(const kir::Kernel& k, const kir::AttentionPattern& a) {
  const auto rank = static_cast<int32_t>(k.domain.size());
  const int64_t queries = k.domain[a.i_var], value_dim = k.domain[a.e_var];
  const int64_t batch =
      product(std::vector<int64_t>(k.domain.begin(), k.domain.begin() + rank - 2));
  const auto most = static_cast<uint64_t>(std::max<int64_t>(queries, 1));
  int rows = static_cast<int>(std::min<uint64_t>(kMaxAttentionRows, std::bit_ceil(most)));
  while (rows > 16 && batch * ((queries + rows - 1) / rows) < kSplitTargetGroups) rows /= 2;
  while (rows >= 1 && !attention_tiles(rows, value_dim)) rows /= 2;
  return rows;
}

int heuristic_attention_threads(int rows, int64_t value_dim) {
  const int64_t widest = int64_t{rows} * std::max<int64_t>(kKeyTile, value_dim);
  return static_cast<int>(std::clamp<int64_t>(
      static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(widest))) / 4, 64, 256));
}

std::optional<kir::AttentionPattern> attention_of(const kir::Kernel& k,
                                                  const kir::KernelFacts& facts) {
  const std::optional<kir::AttentionPattern>& a = facts.attention;
  const auto rank = static_cast<int32_t>(k.domain.size());
  if (!a || rank < 2 || a->i_var != rank - 2 || a->e_var != rank - 1 || a->keys < 1 ||
      a->head_dim < 1)
    return std::nullopt;
  for (const Expr* e : {a->reduce, a->value, a->logits, a->scores, a->query, a->key})
    if (e == nullptr || e->dtype != ir::DType::f32) return std::nullopt;
  if (heuristic_attention_rows(k, *a) < 1) return std::nullopt;
  return a;
}

int64_t row_count(const kir::Kernel& k, const Strategy& st) {
  return product(std::vector<int64_t>(k.domain.begin(), k.domain.begin() + st.row_vars));
}

int64_t longest_row_reduce(const Strategy& st) {
  int64_t longest = 0;
  for (const Expr* r : st.row_reduces) longest = std::max(longest, reduce_size(r));
  return longest;
}

std::string splits_blocker(const kir::Kernel& k, const Strategy& st) {
  if (st.kind != Strategy::Kind::row_reduce) return "the kernel has no row reduction to split";
  const std::unordered_set<const Expr*> row(st.row_reduces.begin(), st.row_reduces.end());
  for (const Expr* r : st.row_reduces) {
    std::unordered_set<const Expr*> seen;
    std::vector<const Expr*> inner;
    kir::collect_reduces(r->args[0], seen, inner);
    for (const Expr* i : inner)
      if (row.contains(i))
        return "a row reduction reads another one (the whole row's result is needed first)";
  }
  const int64_t rows = row_count(k, st);
  if (st.cols > 1) return "a workgroup already shares its reductions over several columns";
  if (rows > kMaxSplitRows) return fmt::format("{} rows (over {}) already fill the device", rows, kMaxSplitRows);
  return "";
}

int heuristic_splits(const kir::Kernel& k, const Strategy& st) {
  if (!splits_blocker(k, st).empty()) return 1;
  const int64_t rows = row_count(k, st), longest = longest_row_reduce(st);
  int splits = 1;
  while (splits < kMaxSplits && int64_t{splits} * 2 * rows <= kSplitTargetGroups &&
         longest >= int64_t{splits} * 2 * st.group_size * 8)
    splits *= 2;
  return splits;
}

Strategy choose_strategy(const kir::Kernel& k, const kir::KernelFacts& facts, bool tensor_cores) {
  const FreeVars& fv = facts.free_vars;
  Strategy s;
  for (const Expr* e : kir::kernel_exprs(k))
    if (e->kind == ExprKind::Scan) {
      s.kind = Strategy::Kind::scan;
      s.group_size = heuristic_elementwise_block(row_count_of_scan(k));
      return s;
    }
  // Before the matmul: R = sum_j P V is one too, with P recomputed for every output.
  if (auto a = gpu::attention_of(k, facts)) {
    s.kind = Strategy::Kind::attention;
    s.attention = *a;
    s.attention_rows = heuristic_attention_rows(k, *a);
    s.group_size = heuristic_attention_threads(s.attention_rows, k.domain.back());
    return s;
  }
  if (auto m = gpu::matmul_of(k, facts)) {
    s.kind = Strategy::Kind::matmul_tiled;
    s.matmul = *m;
    return s;
  }
  if (tensor_cores) {
    if (auto m = worth_a_tile(k, kir::recognize_matmul(k, fv, /*half=*/true))) {
      s.kind = Strategy::Kind::matmul_tiled;
      s.matmul = *m;
      return s;
    }
  }
  const auto rank = static_cast<int32_t>(k.domain.size());
  // Prefer sharing the innermost axis (softmax rows); else a workgroup per point.
  for (int32_t row_vars : {rank - 1, rank}) {
    if (row_vars < 0) continue;
    int64_t longest = 0;
    std::vector<const Expr*> found;
    for (const Expr* e : kir::kernel_exprs(k)) {  // operands first
      if (e->kind != ExprKind::Reduce) continue;
      if (!std::ranges::all_of(fv.of(e), [&](int32_t v) { return v >= 0 && v < row_vars; })) continue;
      found.push_back(e);
      longest = std::max(longest, reduce_size(e));
    }
    if (longest < kMinRowReduce) continue;
    const int cols = row_vars == rank ? heuristic_columns(k, fv, found) : 1;
    if (row_vars == rank &&
        product(k.domain) > (cols > 1 ? kMaxPointsForColumns : kMaxPointsForGroupPerPoint))
      continue;
    s.kind = Strategy::Kind::row_reduce;
    s.row_vars = row_vars;
    s.row_reduces = std::move(found);
    s.cols = cols;
    const int64_t width = std::max(longest, row_vars < rank ? k.domain.back() : 1);
    s.group_size = 32;
    while (s.group_size < 256 && s.group_size < width * cols) s.group_size *= 2;
    // Few column groups: more slices per column, up to kColumnThreads threads in all.
    const int64_t groups = product(k.domain) / cols;
    while (cols > 1 && s.group_size < 1024 && groups * s.group_size < kColumnThreads &&
           longest >= int64_t{s.group_size * 2 / cols} * 8)
      s.group_size *= 2;
    s.splits = heuristic_splits(k, s);
    break;
  }
  return s;
}

}  // namespace kiln::codegen::gpu
