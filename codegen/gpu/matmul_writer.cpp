// The tiled matmul strategy: a workgroup of 16x16 threads computes a T x T output tile (T = 16,
// 32, 64 or 128: each thread then owns R x R outputs, R = T / 16, strided by 16 so that loads,
// shared-memory reads and stores stay coalesced), staging 16-deep slices of both operands through
// shared memory. Prologues (casts, ...) are evaluated as the operand tiles are loaded; epilogues
// (bias, activation) as the outputs are stored.
#include <fmt/format.h>

#include <algorithm>

#include "codegen/gpu/strategy_writers.h"

namespace kiln::codegen::gpu {

namespace {

constexpr int kDepth = 16;  // the k slice staged per step
constexpr int kThreads = 256;

struct Tiling {
  int tile;     // T
  int per;      // R = T / 16
};

// Stages one operand slice: element e = lid + 256 q (q < R) of the slice, row-major with
// `inner` columns, holds `val` at (row var = base_row + e / inner, col var = base_col + e % inner)
// or 0 outside [0, rows) x [0, cols).
struct SliceSpec {
  const kir::Expr* val;
  int32_t row_var, col_var;
  std::string row_base, col_base, rows, cols, dst;
  int inner;
};

Expected<void> load_slice(CExprEmitter& em, Scope* ks, const SliceSpec& sp, const Tiling& t) {
  DialectText& d = em.dialect();
  const std::string L = d.i64_type();
  return write_constant_loop(em, ks, {"q", t.per, true}, [&](Scope* q, const std::string& qi) {
    const std::string e = em.fresh("e"), r = em.fresh("r"), c = em.fresh("c"), v = em.fresh("tv");
    em.append(q, fmt::format("{} {} = lid + {} * {};", L, e, d.i64_lit(kThreads), d.cast(L, qi)));
    em.append(q, fmt::format("{0} {1} = {2} + {3} / {4}; {0} {5} = {6} + {3} % {4};", L, r,
                             sp.row_base, e, d.i64_lit(sp.inner), c, sp.col_base));
    if (auto w = write_guarded_float(em, q, sp.val,
                                     fmt::format("{} < {} && {} < {}", r, sp.rows, c, sp.cols),
                                     {{sp.row_var, r}, {sp.col_var, c}}, v);
        !w)
      return w;
    em.append(q, fmt::format("{}[uint({})] = {};", sp.dst, e, v));
    return Expected<void>();
  });
}

// acc[r * R + c] += sA[row r][kk] * sB[kk][col c] over the staged slice.
Expected<void> write_products(CExprEmitter& em, Scope* ks, const Tiling& t) {
  auto product_row = [&](Scope* r, const std::string& kk, const std::string& ri) {
    em.append(r,
              fmt::format("float av = kiln_sa[uint((ty + 16 * {}) * {} + {})];", ri, kDepth, kk));
    write_constant_loop_line(em, r, {"c", t.per, true}, [&](const std::string& c) {
      return fmt::format("acc[{} * {} + {}] += av * kiln_sb[uint({} * {} + tx + 16 * {})];", ri,
                         t.per, c, kk, t.tile, c);
    });
    return Expected<void>();
  };
  return write_constant_loop(em, ks, {"kk", kDepth, true}, [&](Scope* kk, const std::string& ki) {
    return write_constant_loop(em, kk, {"r", t.per, true}, [&](Scope* r, const std::string& ri) {
      return product_row(r, ki, ri);
    });
  });
}

}  // namespace

Expected<void> write_guarded_float(CExprEmitter& em, Scope* s, const kir::Expr* val,
                                   const std::string& cond,
                                   const std::vector<std::pair<int32_t, std::string>>& binds,
                                   const std::string& v) {
  em.append(s, fmt::format("float {} = {};", v, em.dialect().float_lit(DType::f32, 0)));
  Scope* in = em.open_if(s, fmt::format("if ({})", cond));
  for (const auto& [var, text] : binds) em.bind_var(in, var, text);
  Expected<std::string> x = em.emit(val);
  if (!x) return std::unexpected(x.error());
  em.append(in, fmt::format("{} = {};", v, *x));
  em.close(in);
  return {};
}

namespace {
// The output's rows: a dynamic matmul of rank 2 takes them (its outer extent) at run time.
std::string matmul_rows(const DialectText& d, const kir::Kernel& k) {
  const size_t rank = k.domain.size();
  return d.dynamic_outer() && rank == 2 ? d.outer_extent() : d.i64_lit(k.domain[rank - 2]);
}
}  // namespace

Scope* open_matmul_tiles(CExprEmitter& em, const kir::Kernel& k, int tile, LaunchShape& launch) {
  DialectText& d = em.dialect();
  const size_t rank = k.domain.size();
  const int64_t tm = ceil_div(k.domain[rank - 2], tile), tn = ceil_div(k.domain[rank - 1], tile);
  const int64_t total = product(k.domain, 0, rank - 2) * tm * tn;
  const std::string L = d.i64_type();
  launch.groups = std::clamp<int64_t>(total, 1, kMaxGroups);
  // A dynamic kernel's tiles: its batch outermost, tm x tn per batch point; or (rank 2) its rows
  // outermost, tn per row tile.
  std::string total_text = d.i64_lit(total),
              row_tile = fmt::format("(tile / {}) % {}", d.i64_lit(tn), d.i64_lit(tm));
  if (d.dynamic_outer()) {
    launch.tasks_per_group = 1;
    if (rank == 2) {
      launch.dynamic_tasks = tn;
      launch.outer_block = tile;
      total_text = fmt::format("(({} + {}) / {} * {})", d.outer_extent(), d.i64_lit(tile - 1),
                               d.i64_lit(tile), d.i64_lit(tn));
      row_tile = fmt::format("(tile / {})", d.i64_lit(tn));  // tile < total: below the row tiles
    } else {
      launch.dynamic_tasks = total / k.domain[0];
      total_text = d.tasks(total, launch.dynamic_tasks);
    }
  }
  Scope* s = em.open_loop(em.root(),
                          fmt::format("for ({0} tile = {1}; tile < {2}; tile += {3})", L,
                                      d.group_id(), total_text, d.num_groups()),
                          ceil_div(total, launch.groups));
  em.append(s, fmt::format("{0} i0 = {1} * {2}; {0} j0 = tile % {3} * {2};", L, row_tile,
                           d.i64_lit(tile), d.i64_lit(tn)));
  em.append(s, fmt::format("{} bt = tile / {};", L, d.i64_lit(tm * tn)));
  if (rank > 2) bind_flat(em, s, k.domain, iota_vars(rank - 2), "bt");
  return s;
}

Expected<void> store_matmul_point(CExprEmitter& em, Scope* s, const kir::Kernel& k,
                                  const kir::MatmulPattern& m, const std::string& acc) {
  DialectText& d = em.dialect();
  const size_t rank = k.domain.size();
  Scope* out = em.open_if(
      s, fmt::format("if (gi < {} && gj < {})", matmul_rows(d, k), d.i64_lit(k.domain[rank - 1])));
  em.bind_var(out, static_cast<int32_t>(rank - 2), "gi");
  em.bind_var(out, static_cast<int32_t>(rank - 1), "gj");
  em.bind_expr(out, m.reduce, acc);
  if (Expected<void> r = emit_stores(em, out, k); !r) return r;
  em.close(out);
  return {};
}

Expected<LaunchShape> write_matmul(CExprEmitter& em, const kir::Kernel& k,
                                   const kir::MatmulPattern& m, int tile_side,
                                   std::string& shared) {
  DialectText& d = em.dialect();
  const size_t rank = k.domain.size();
  const int64_t M = k.domain[rank - 2], N = k.domain[rank - 1];
  const int side = tile_side != 0 ? tile_side : heuristic_matmul_tile(M, N);
  const Tiling t{side, side / 16};
  const std::string L = d.i64_type();
  shared += d.shared_decl("float", "kiln_sa", int64_t{t.tile} * kDepth);
  shared += d.shared_decl("float", "kiln_sb", int64_t{t.tile} * kDepth);
  Scope* root = em.root();
  em.append(root, fmt::format("{} lid = {};", L, d.local_id()));
  em.append(root, fmt::format("int ty = int(lid) / 16; int tx = int(lid) % 16;"));
  LaunchShape launch{1, kThreads};
  Scope* tile = open_matmul_tiles(em, k, t.tile, launch);
  em.append(tile, fmt::format("float acc[{}];", t.per * t.per));
  write_constant_loop_line(em, tile, {"r", t.per * t.per, false}, [&](const std::string& r) {
    return fmt::format("acc[{}] = {};", r, d.float_lit(DType::f32, 0));
  });
  Scope* ks = em.open_loop(tile,
                           fmt::format("for ({0} k0 = {1}; k0 < {2}; k0 += {3})", L, d.i64_lit(0),
                                       d.i64_lit(m.k_extent), d.i64_lit(kDepth)),
                           ceil_div(m.k_extent, kDepth));
  const auto iv = static_cast<int32_t>(rank - 2), jv = static_cast<int32_t>(rank - 1);
  const std::string K = d.i64_lit(m.k_extent);
  const SliceSpec a{m.a, iv, m.k_var, "i0", "k0", matmul_rows(d, k), K, "kiln_sa", kDepth};
  const SliceSpec b{m.b, m.k_var, jv, "k0", "j0", K, d.i64_lit(N), "kiln_sb", t.tile};
  if (auto r = load_slice(em, ks, a, t); !r) return std::unexpected(r.error());
  if (auto r = load_slice(em, ks, b, t); !r) return std::unexpected(r.error());
  em.append(ks, d.barrier());
  if (auto r = write_products(em, ks, t); !r) return std::unexpected(r.error());
  em.append(ks, d.barrier());
  em.close(ks);
  const Expected<void> stored = write_constant_loop(
      em, tile, {"rc", t.per * t.per, true}, [&](Scope* each, const std::string& rc) {
        em.append(
            each,
            fmt::format("{0} gi = i0 + ty + 16 * ({2} / {1}); {0} gj = j0 + tx + 16 * ({2} % {1});",
                        L, t.per, rc));
        return store_matmul_point(em, each, k, m, fmt::format("acc[{}]", rc));
      });
  if (!stored) return std::unexpected(stored.error());
  em.close(tile);
  return launch;
}

}  // namespace kiln::codegen::gpu
