// Shared pieces of the GPU launch strategies' body writers (codegen/gpu/gpu_source.cpp,
// matmul_writer.cpp, attention_writer.cpp): flat-index decomposition, stores, constant loops,
// launch limits.
#pragma once

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codegen/gpu/c_expr_emitter.h"
#include "codegen/gpu/gpu_source.h"
#include "codegen/gpu/launch_strategy.h"

namespace kiln::codegen::gpu {

using Scope = CExprEmitter::Scope;

inline constexpr int64_t kMaxGroups = 65535;

inline int64_t product(const std::vector<int64_t>& v, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= v[i];
  return n;
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Binds loop variables `vars` (extents `dims`, C order) from the flat index `flat`.
inline void bind_flat(CExprEmitter& em, Scope* s, const std::vector<int64_t>& dims,
               const std::vector<int32_t>& vars, const std::string& flat) {
  DialectText& d = em.dialect();
  std::string rest = flat;
  for (size_t i = vars.size(); i-- > 0;) {
    const std::string v = fmt::format("v{}", vars[i]);
    if (i == 0) {
      em.append(s, fmt::format("{} {} = {};", d.i64_type(), v, rest));
    } else {
      em.append(s, fmt::format("{} {} = {} % {};", d.i64_type(), v, rest, d.i64_lit(dims[i])));
      const std::string next = em.fresh("q");
      em.append(s, fmt::format("{} {} = {} / {};", d.i64_type(), next, rest, d.i64_lit(dims[i])));
      rest = next;
    }
    em.bind_var(s, vars[i], v);
  }
}

inline std::vector<int32_t> iota_vars(size_t n) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(i);
  return v;
}

inline Expected<void> emit_stores(CExprEmitter& em, Scope* s, const kir::Kernel& k) {
  for (const kir::Store& st : k.stores)
    if (Expected<void> r = em.emit_store(s, st); !r) return r;
  return {};
}

// The loops over a thread's outputs and the staging steps of the tiled strategies (matmul,
// attention) run a constant number of trips. CUDA writes them as loops, nvcc unrolling those
// under `#pragma unroll` (registers for acc[]; CUDA has no loop budget). GLSL writes them
// unrolled, each iteration with the index replaced by its value: the SPIR-V then holds no loop
// for them, so they spend nothing of lavapipe's loop budget per invocation
// (GpuSource::loop_iterations) and count no trips; Mesa unrolls such loops too, but the bound
// cannot count on what a driver may do.
struct ConstantLoop {
  const char* var;
  int trips;
  bool pragma;  // CUDA: `#pragma unroll`
};

inline std::string loop_header(CExprEmitter& em, Scope* s, const ConstantLoop& l) {
  return fmt::format("{0}for (int {1} = 0; {1} < {2}; ++{1})",
                     l.pragma ? "#pragma unroll\n" + em.indent(s) : "", l.var, l.trips);
}

// Writes `body(scope, index)` for each iteration of `l` in `s`: once in a CUDA loop (the index
// is the loop variable), or once per value in a block of its own (the index is the value).
template <typename Body>
inline Expected<void> write_constant_loop(CExprEmitter& em, Scope* s, const ConstantLoop& l,
                                          Body body) {
  if (em.dialect().cuda()) {
    Scope* loop = em.open_loop(s, loop_header(em, s, l), l.trips);
    if (Expected<void> r = body(loop, std::string(l.var)); !r) return r;
    em.close(loop);
    return {};
  }
  for (int i = 0; i < l.trips; ++i) {
    Scope* block = em.open_block(s);
    if (Expected<void> r = body(block, std::to_string(i)); !r) return r;
    em.close(block);
  }
  return {};
}

// A loop whose body is the one statement `line(index)`: one line in CUDA, one per value in GLSL.
template <typename Line>
inline void write_constant_loop_line(CExprEmitter& em, Scope* s, const ConstantLoop& l,
                                     Line line) {
  if (em.dialect().cuda()) {
    em.append_loop(s, loop_header(em, s, l) + " " + line(std::string(l.var)), l.trips);
    return;
  }
  for (int i = 0; i < l.trips; ++i) em.append(s, line(std::to_string(i)));
}

// A workgroup (or st.splits of them) per row (codegen/gpu/row_reduce_writer.cpp); `shared`
// receives its shared arrays, the dialect its scratch arrays.
Expected<LaunchShape> write_row_reduce(CExprEmitter& em, const kir::Kernel& k, const Strategy& st,
                                       std::string& shared);

// Declares float `v` in `s`: `val` where `cond` holds, with variables bound as `binds` (variable,
// text) there, else 0 (an operand element staged by the tiled strategies, zero outside).
Expected<void> write_guarded_float(CExprEmitter& em, Scope* s, const kir::Expr* val,
                                   const std::string& cond,
                                   const std::vector<std::pair<int32_t, std::string>>& binds,
                                   const std::string& v);

// The matmul strategies' grid-stride loop over output tiles (`tile` x `tile`, the batch point
// outermost), opened in the root with i0, j0 (the tile's first row and column) and the batch
// variables bound; sets launch.groups from the tile count.
Scope* open_matmul_tiles(CExprEmitter& em, const kir::Kernel& k, int tile, LaunchShape& launch);
// The kernel's stores at output point (gi, gj) (declared before) when it is inside the output,
// the matmul's result there being `acc`.
Expected<void> store_matmul_point(CExprEmitter& em, Scope* s, const kir::Kernel& k,
                                  const kir::MatmulPattern& m, const std::string& acc);

// The tiled matmul (codegen/gpu/matmul_writer.cpp) with `tile` x `tile` output tiles (16, 32, 64
// or 128; 0: 64 when both sides reach 64, else 16); `shared` receives its shared arrays.
Expected<LaunchShape> write_matmul(CExprEmitter& em, const kir::Kernel& k,
                                   const kir::MatmulPattern& m, int tile, std::string& shared);

// The tensor-core matmul (codegen/gpu/mma_matmul_writer.cpp, CUDA on sm_80 and later) with
// `tile` x `tile` output tiles (16, 32, 64 or 128; 0: heuristic_mma_tile), for a pattern
// mma_supports takes: operands and sum of one dtype, f32 (on tf32), f16 or bf16.
bool mma_supports(const kir::MatmulPattern& m);
int heuristic_mma_tile(int64_t rows, int64_t cols);
Expected<LaunchShape> write_mma_matmul(CExprEmitter& em, const kir::Kernel& k,
                                       const kir::MatmulPattern& m, int tile, std::string& shared);

// `uint kiln_tf32(float)`: the float rounded to tf32 (cvt.rna), as a prelude helper's text
// (DialectText::define_helper key "kiln_mma_tf32").
std::string tf32_helper();
// One warp's `mma.sync.aligned.<shape>` (m16n8k8 or m16n8k16, f32 accumulators) as an inline-asm
// statement: c[0..3] += A fragment a[0..3] x B fragment (b0, b1), each operand a C expression.
std::string mma_sync_text(std::string_view shape, const std::array<std::string, 4>& c,
                          const std::array<std::string, 4>& a, const std::string& b0,
                          const std::string& b1);

// Pieces both flash-attention writers use (defined in attention_writer.cpp):
// The loop over tasks (batch point, block of `rows` query rows), opened in the root with `lid`
// declared there and i0 (the block's first row) and the batch variables bound; sets `launch`
// (groups from the task count, `group_size` threads).
Scope* open_attention_tasks(CExprEmitter& em, const kir::Kernel& k, const kir::AttentionPattern& a,
                            int rows, int group_size, LaunchShape& launch);
// The loop over key tiles of `tile` keys from j0, in `task`: up to the keys, or with a causal
// mask up to the block's last row + offset (later keys are masked for every row of the block).
Scope* open_key_tiles(CExprEmitter& em, Scope* task, const kir::Kernel& k,
                      const kir::AttentionPattern& a, int rows, int tile);
// Declares float `x` in `s`: the logit at query row `gi` and key `gj` with the scores bound to
// `scores`, or -inf past the last row or key.
Expected<void> write_logit(CExprEmitter& em, Scope* s, const kir::Kernel& k,
                           const kir::AttentionPattern& a, const std::string& gi,
                           const std::string& gj, const std::string& scores, const std::string& x);

// The kernel's stores at output point (row gi, value column ge), the attention's result there
// being `value` (a float of `s`).
Expected<void> store_attention_point(CExprEmitter& em, Scope* s, const kir::Kernel& k,
                                     const kir::AttentionPattern& a, const std::string& gi,
                                     const std::string& ge, const std::string& value);

// Flash attention on the tensor cores (codegen/gpu/mma_attention_writer.cpp, CUDA on sm_80 and
// later): both products on tf32 mma.sync, where mma_attention_supports (launch_strategy.h).
Expected<LaunchShape> write_mma_attention(CExprEmitter& em, const kir::Kernel& k,
                                          const kir::AttentionPattern& a, std::string& shared);

// Flash attention (codegen/gpu/attention_writer.cpp): st.attention_rows query rows per workgroup
// of st.group_size threads; `shared` receives its shared array.
Expected<LaunchShape> write_attention(CExprEmitter& em, const kir::Kernel& k, const Strategy& st,
                                      std::string& shared);

}  // namespace kiln::codegen::gpu
