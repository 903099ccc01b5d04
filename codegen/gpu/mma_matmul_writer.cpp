// The tensor-core matmul strategy (CUDA, sm_80 and later; kiln.toml compilation.matmul_precision
// = "high"): the tiled matmul of matmul_writer.cpp with the products on the tensor cores through
// warp-level `mma.sync`. A workgroup of W warps computes a T x T output tile (T = 16, 32, 64 or
// 128), each warp a (MI * 16) x (NI * 8) block of it as MI x NI m16n8 accumulator fragments. The
// operands are staged 32 deep through shared memory: each thread loads its 16 elements of the
// next slice of both operands into registers (prologues evaluated there, zero outside the
// matrices) while the warps multiply the current one, so the loads are in flight during the
// products.
//
// Element kinds (the operands' dtype):
// - f32: mma.m16n8k8 on tf32 operands, each element rounded to tf32 (10-bit mantissa, cvt.rna)
//   as it is staged (shared memory holds the tf32 bits).
// - f16 / bf16: mma.m16n8k16 on the operands as they are (shared memory holds them as floats,
//   exact; the fragments pack pairs along k); their products are exact in f32.
// Sums are in f32 either way; an f16 / bf16 result is rounded to its dtype once, at the end.
//
// Fragment layouts (PTX ISA), lane = 4 g + t (grp, quad in the text):
//   A (16 x 8 tf32):  a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4)
//   B (8 x 8 tf32):   b0 (t, g), b1 (t + 4, g)
//   A (16 x 16 f16):  a0 (g, 2t..2t+1), a1 (g + 8, 2t..), a2 (g, 2t+8..), a3 (g + 8, 2t+8..)
//   B (16 x 8 f16):   b0 (2t..2t+1, g), b1 (2t+8..2t+9, g)   (the lower k in the lower half)
//   C (16 x 8 f32):   c0 (g, 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1)
// Shared rows are padded (A by 4 words, B by 8) so that a warp's fragment reads hit 32 banks.
//
// Operands read straight from memory (write_mma_async): where both operands are plain loads
// whose index advances by one along k or along the output side (i for A, j for B) from a
// 16-byte boundary, with that extent a multiple of 16 bytes' elements, and the kernel writes no
// bounds checks, the slices skip the registers: `cp.async` copies them in 16-byte chunks into a
// ring of 2 to 4 shared-memory stages (zero-filling chunks outside the matrices) while the warps
// multiply an earlier stage, and the fragments are read with `ldmatrix` (16-bit elements; f32
// ones where k is the contiguous side, as pairs of 16-bit halves) or, for f32 stored along the
// output side, word by word from rows padded to keep the reads on 32 banks. Each stage is laid
// out as its operand is in memory: k-major [side][k] or side-major [k][side], with `.trans`
// giving a 16-bit side-major stage the fragment's k-pairs. f32 elements are rounded to tf32
// (cvt.rna) as the fragments are read; f16 and bf16 ones stay as they are (shared memory holds
// them as 16 bits).
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "codegen/gpu/lane_emitter.h"
#include "codegen/gpu/strategy_writers.h"

namespace kiln::codegen::gpu {

namespace {

constexpr int kDepth = 32;        // the k slice staged per step
constexpr int kPerThread = 16;    // elements of each operand slice a thread stages
constexpr int kPadA = 4, kPadB = 8;

struct MmaTiling {
  int tile;            // T
  int warps_m, warps_n;
  int mi, ni;          // fragments per warp along M (16 rows each) and N (8 columns each)
  int threads() const { return 32 * warps_m * warps_n; }
  int a_stride() const { return kDepth + kPadA; }
  int b_stride() const { return tile + kPadB; }
};

MmaTiling mma_tiling(int tile) {
  MmaTiling t;
  t.tile = tile;
  t.warps_m = tile >= 64 ? 2 : 1;
  t.warps_n = tile == 128 ? 4 : tile >= 32 ? 2 : 1;
  t.mi = tile / (16 * t.warps_m);
  t.ni = tile / (8 * t.warps_n);
  return t;
}

// Loads this thread's kPerThread elements of an operand slice into registers `dst`: element
// e = lid + threads * q of the slice (row-major, `inner` columns) is `val` at (row var =
// row_base + e / inner, col var = col_base + e % inner), or 0 outside [0, rows) x [0, cols).
struct RegSlice {
  const kir::Expr* val;
  int32_t row_var, col_var;
  std::string row_base, col_base, rows, cols, dst;
  int inner;
};

Expected<void> load_registers(CExprEmitter& em, Scope* s, const RegSlice& sp, int threads) {
  DialectText& d = em.dialect();
  const std::string L = d.i64_type();
  return write_constant_loop(em, s, {"q", kPerThread, true}, [&](Scope* q, const std::string& qi) {
    const std::string e = em.fresh("e"), r = em.fresh("r"), c = em.fresh("c");
    em.append(q, fmt::format("{} {} = lid + {} * {};", L, e, d.i64_lit(threads), d.cast(L, qi)));
    em.append(q, fmt::format("{0} {1} = {2} + {3} / {4}; {0} {5} = {6} + {3} % {4};", L, r,
                             sp.row_base, e, d.i64_lit(sp.inner), c, sp.col_base));
    em.append(q, fmt::format("{}[{}] = 0.0f;", sp.dst, qi));
    Scope* in = em.open_if(q, fmt::format("if ({} < {} && {} < {})", r, sp.rows, c, sp.cols));
    em.bind_var(in, sp.row_var, r);
    em.bind_var(in, sp.col_var, c);
    Expected<std::string> x = em.emit(sp.val);
    if (!x) return Expected<void>(std::unexpected(x.error()));
    em.append(in, fmt::format("{}[{}] = {};", sp.dst, qi, *x));
    em.close(in);
    return Expected<void>();
  });
}

enum class Element { tf32, f16, bf16 };

// The conversions of staged elements and fragment pairs, as prelude device functions.
std::string mma_prelude(Element el) {
  if (el == Element::tf32) return tf32_helper();
  // cvt.rn.{f16,bf16}x2.f32 d, a, b puts a in the upper half and b in the lower.
  const char* t = el == Element::f16 ? "f16" : "bf16";
  return fmt::format(
      "__device__ __forceinline__ uint kiln_pack_{0}(uint lo, uint hi) {{ uint u; "
      "asm(\"cvt.rn.{0}x2.f32 %0, %1, %2;\" : \"=r\"(u) : \"f\"(__uint_as_float(hi)), "
      "\"f\"(__uint_as_float(lo))); return u; }}\n",
      t);
}

// The shared word of a staged element: tf32 bits, or the float's bits (f16 / bf16).
std::string staged(Element el, const std::string& v) {
  return (el == Element::tf32 ? "kiln_tf32(" : "__float_as_uint(") + v + ")";
}

// A fragment register of f16 / bf16 pairs from shared words `lo` (the lower k) and `hi`.
std::string pack(Element el, const std::string& lo, const std::string& hi) {
  return fmt::format("kiln_pack_{}({}, {})", el == Element::f16 ? "f16" : "bf16", lo, hi);
}

// The MI x NI mma.sync of one k step, fa[MI][4] x fb[NI][2] into acc.
void write_mma_products(CExprEmitter& em, Scope* s, const MmaTiling& t, Element el) {
  const char* op = el == Element::tf32  ? "m16n8k8.row.col.f32.tf32.tf32.f32"
                   : el == Element::f16 ? "m16n8k16.row.col.f32.f16.f16.f32"
                                        : "m16n8k16.row.col.f32.bf16.bf16.f32";
  // Cannot fail: the body only appends lines.
  (void)write_constant_loop(em, s, {"mi", t.mi, true}, [&](Scope* ms, const std::string& mi) {
    write_constant_loop_line(em, ms, {"ni", t.ni, true}, [&](const std::string& ni) {
      const std::string c = fmt::format("acc[({} * {} + {}) * 4", mi, t.ni, ni);
      const auto at = [](const std::string& base, const char* end, int i) {
        return fmt::format("{}{}{}", base, i, end);
      };
      const std::string a = fmt::format("fa[{}][", mi);
      return mma_sync_text(op,
                           {at(c + " + ", "]", 0), at(c + " + ", "]", 1), at(c + " + ", "]", 2),
                            at(c + " + ", "]", 3)},
                           {at(a, "]", 0), at(a, "]", 1), at(a, "]", 2), at(a, "]", 3)},
                           fmt::format("fb[{}][0]", ni), fmt::format("fb[{}][1]", ni));
    });
    return Expected<void>();
  });
}

// The kernel's stores of the tile's accumulators (C fragments), each output point once.
Expected<void> store_accumulators(CExprEmitter& em, Scope* tile, const kir::Kernel& k,
                                  const kir::MatmulPattern& m, const MmaTiling& t) {
  DialectText& d = em.dialect();
  return write_constant_loop(
      em, tile, {"f", t.mi * t.ni * 4, true}, [&](Scope* each, const std::string& f) {
        // Accumulator f = (mi * NI + ni) * 4 + c holds C fragment element c of (mi, ni).
        em.append(each, fmt::format("int fm = {0} / 4 / {1}, fn = {0} / 4 % {1}, fc = {0} % 4;", f,
                                    t.ni));
        em.append(each, fmt::format("{0} gi = i0 + wm + fm * 16 + grp + fc / 2 * 8; {0} gj = j0 + "
                                    "wn + fn * 8 + 2 * quad + fc % 2;",
                                    d.i64_type()));
        return store_matmul_point(em, each, k, m,
                                  d.round_to_storage(m.reduce->dtype, fmt::format("acc[{}]", f)));
      });
}

// ---- Operands read straight from memory (cp.async and ldmatrix) ----

constexpr int kChunkBytes = 16;   // one cp.async, one ldmatrix row
constexpr int kSliceBytes = 64;   // a stage row of k: 16 f32 or 32 f16 / bf16 elements
constexpr int kSharedBytes = 48 * 1024;  // static shared memory per workgroup
constexpr int kMaxStages = 4;

// An operand that is a plain load of an input, its index advancing by one along k (k_major) or
// along the output side from a multiple of a chunk, that extent a multiple of a chunk.
struct Direct {
  const kir::Expr* load;
  bool k_major;
};

std::optional<Direct> direct_operand(const CExprEmitter& em, const kir::Kernel& k,
                                     const kir::Expr* x, int32_t k_var, int64_t k_extent,
                                     int32_t side_var, int64_t side_extent, int chunk) {
  if (x->kind != kir::ExprKind::Load || x->buf < 0 ||
      x->buf >= static_cast<int32_t>(k.params.size()))
    return std::nullopt;
  const kir::Param& p = k.params[x->buf];
  if (p.output || p.dtype != x->dtype) return std::nullopt;
  const kir::Expr* index = x->args[0];
  const auto along = [&](int32_t var, int64_t extent) {
    const std::optional<int64_t> c = var_coefficient(index, var, em.free_vars());
    return c && *c == 1 && extent % chunk == 0 && known_divisor(index, var, chunk) % chunk == 0;
  };
  if (along(k_var, k_extent)) return Direct{x, true};
  if (along(side_var, side_extent)) return Direct{x, false};
  return std::nullopt;
}

// One operand's stages: [tile][depth + chunk] (k-major) or [depth][tile + pad] (side-major),
// in elements of `esize` bytes.
struct StageLayout {
  Direct src;
  std::string name;  // shared array
  int tile, depth, chunk, esize;
  int stride() const { return src.k_major ? depth + chunk : tile + (esize == 4 ? 8 : chunk); }
  int elements() const { return (src.k_major ? tile : depth) * stride(); }
  int bytes() const { return elements() * esize; }
  int chunks_per_row() const { return (src.k_major ? depth : tile) / chunk; }
  int chunks() const { return tile * depth / chunk; }
};

std::string async_prelude() {
  return "__device__ __forceinline__ void kiln_cp16(uint dst, const void* src, bool full) { "
         "asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\" :: \"r\"(dst), "
         "\"l\"(src), \"r\"(full ? 16 : 0) : \"memory\"); }\n"
         "__device__ __forceinline__ void kiln_ldm4(uint* r, uint a) { asm volatile("
         "\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\" : \"=r\"(r[0]), "
         "\"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(a) : \"memory\"); }\n"
         "__device__ __forceinline__ void kiln_ldm4t(uint* r, uint a) { asm volatile("
         "\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\" : \"=r\"(r[0]), "
         "\"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(a) : \"memory\"); }\n";
}

// Copies stage `slot` of an operand, k from `kb`: chunk c = lid + threads * q of the stage, row
// c / chunks_per_row; a chunk outside the matrix (row var >= rows, k >= K) is zero-filled.
Expected<void> copy_stage(CExprEmitter& em, Scope* s, const StageLayout& st, int threads,
                          const std::string& slot, const std::string& kb, int32_t k_var,
                          int32_t side_var, const std::string& side_base, int64_t side_extent,
                          int64_t K) {
  DialectText& d = em.dialect();
  const std::string L = d.i64_type();
  return write_constant_loop(
      em, s, {"q", st.chunks() / threads, true}, [&](Scope* q, const std::string& qi) {
        const std::string c = em.fresh("c"), r = em.fresh("r"), cc = em.fresh("cc");
        const std::string gk = em.fresh("gk"), gs = em.fresh("gs"), src = em.fresh("src");
        em.append(q, fmt::format("int {0} = int(lid) + {1} * {2}; int {3} = {0} / {4}, {5} = {0} % {4};",
                                 c, threads, qi, r, st.chunks_per_row(), cc));
        if (st.src.k_major)
          em.append(q, fmt::format("{0} {1} = {2} + {3} * {4}; {0} {5} = {6} + {7};", L, gk, kb, cc,
                                   st.chunk, gs, side_base, r));
        else
          em.append(q, fmt::format("{0} {1} = {2} + {3}; {0} {4} = {5} + {6} * {7};", L, gk, kb, r,
                                   gs, side_base, cc, st.chunk));
        const std::string buf = d.buffer_ref(st.src.load->buf);
        em.append(q, fmt::format("const void* {} = {}; bool {}ok = {} < {} && {} < {};", src, buf, src,
                                 gk, d.i64_lit(K), gs, d.i64_lit(side_extent)));
        Scope* in = em.open_if(q, fmt::format("if ({}ok)", src));
        em.bind_var(in, k_var, gk);
        em.bind_var(in, side_var, gs);
        Expected<std::string> index = em.emit(st.src.load->args[0]);
        if (!index) return Expected<void>(std::unexpected(index.error()));
        em.append(in, fmt::format("{} = {} + {};", src, buf, *index));
        em.close(in);
        em.append(q, fmt::format("kiln_cp16({}_s + ({} * {} + {} * {} + {} * {}) * {}, {}, {}ok);",
                                 st.name, slot, st.elements(), r, st.stride(), cc, st.chunk,
                                 st.esize, src, src));
        return Expected<void>();
      });
}

// Fragment registers of one k step `kk` of stage `slot`: fa[MI][4] from A, fb[NI][2] from B.
void read_fragments(CExprEmitter& em, Scope* s, const MmaTiling& t, Element el,
                    const StageLayout& a, const StageLayout& b, const std::string& slot,
                    const std::string& kk) {
  const int kstep = el == Element::tf32 ? 8 : 16;
  const bool half = el != Element::tf32;
  const std::string k0 = fmt::format("{} * {}", kk, kstep);
  // The shared address (bytes) of element (row, col) of a stage.
  const auto at = [&](const StageLayout& st, const std::string& row, const std::string& col) {
    return fmt::format("{}_s + ({} * {} + ({}) * {} + {}) * {}", st.name, slot, st.elements(), row,
                       st.stride(), col, st.esize);
  };
  const auto word = [&](const StageLayout& st, const std::string& row, const std::string& col) {
    return fmt::format("{}[{} * {} + ({}) * {} + {}]", st.name, slot, st.elements(), row,
                       st.stride(), col);
  };
  em.append(s, fmt::format("uint fa[{}][4]; uint fb[{}][2];", t.mi, t.ni));
  // A: m16 x k(kstep) per mi. k-major: ldmatrix x4, lane l addressing row (l & 15), k + 16 bytes
  // for l >= 16 (matrices a0..a3). Side-major 16-bit: .trans, lane l addressing k row (l & 7) +
  // 8 (l >> 4), side + 8 ((l >> 3) & 1). Side-major f32: word reads (a0 (g, t) .. a3 (g+8, t+4)).
  write_constant_loop_line(em, s, {"mi", t.mi, true}, [&](const std::string& mi) {
    const std::string m0 = fmt::format("wm + {} * 16", mi);
    if (a.src.k_major)
      return fmt::format("kiln_ldm4(fa[{}], {});", mi,
                         at(a, m0 + " + (lane & 15)", fmt::format("{} + (lane >> 4) * {}", k0, a.chunk)));
    if (half)
      return fmt::format("kiln_ldm4t(fa[{}], {});", mi,
                         at(a, k0 + " + (lane & 7) + (lane >> 4) * 8", m0 + " + ((lane >> 3) & 1) * 8"));
    return fmt::format(
        "{{ fa[{0}][0] = {1}; fa[{0}][1] = {2}; fa[{0}][2] = {3}; fa[{0}][3] = {4}; }}", mi,
        word(a, k0 + " + quad", m0 + " + grp"), word(a, k0 + " + quad", m0 + " + grp + 8"),
        word(a, k0 + " + quad + 4", m0 + " + grp"), word(a, k0 + " + quad + 4", m0 + " + grp + 8"));
  });
  // B: k(kstep) x n8 per ni; ldmatrix x4 reads the pair ni, ni + 1 (NI is even). k-major: lane l
  // addressing side row (l & 7) of fragment ni + (l >> 4), k + 16 bytes for (l >> 3) & 1.
  // Side-major 16-bit: .trans, k row (l & 7) + 8 ((l >> 3) & 1), side 8 (ni + (l >> 4)).
  // Side-major f32: word reads (b0 (t, g), b1 (t + 4, g)).
  if (b.src.k_major || half) {
    write_constant_loop_line(em, s, {"ni", t.ni / 2, true}, [&](const std::string& np) {
      const std::string n0 = fmt::format("wn + ({} * 2 + (lane >> 4)) * 8", np);
      const std::string addr =
          b.src.k_major ? at(b, n0 + " + (lane & 7)", fmt::format("{} + ((lane >> 3) & 1) * {}", k0, b.chunk))
                        : at(b, k0 + " + (lane & 7) + ((lane >> 3) & 1) * 8", n0);
      return fmt::format("{{ uint r[4]; {}(r, {}); fb[{} * 2][0] = r[0]; fb[{} * 2][1] = r[1]; "
                         "fb[{} * 2 + 1][0] = r[2]; fb[{} * 2 + 1][1] = r[3]; }}",
                         b.src.k_major ? "kiln_ldm4" : "kiln_ldm4t", addr, np, np, np, np);
    });
  } else {
    write_constant_loop_line(em, s, {"ni", t.ni, true}, [&](const std::string& ni) {
      const std::string c = fmt::format("wn + {} * 8 + grp", ni);
      return fmt::format("{{ fb[{0}][0] = {1}; fb[{0}][1] = {2}; }}", ni, word(b, k0 + " + quad", c),
                         word(b, k0 + " + quad + 4", c));
    });
  }
  if (!half) {  // round f32 to tf32
    write_constant_loop_line(em, s, {"r", t.mi * 4, true}, [&](const std::string& r) {
      return fmt::format("fa[{0} / 4][{0} % 4] = kiln_tf32(__uint_as_float(fa[{0} / 4][{0} % 4]));", r);
    });
    write_constant_loop_line(em, s, {"r", t.ni * 2, true}, [&](const std::string& r) {
      return fmt::format("fb[{0} / 2][{0} % 2] = kiln_tf32(__uint_as_float(fb[{0} / 2][{0} % 2]));", r);
    });
  }
}

// The matmul with both operands direct: a ring of `stages` shared stages filled by cp.async,
// one barrier per stage (after it, every warp is done with the stage the next copy overwrites).
Expected<LaunchShape> write_mma_async(CExprEmitter& em, const kir::Kernel& k,
                                      const kir::MatmulPattern& m, const MmaTiling& t, Element el,
                                      const Direct& da, const Direct& db, std::string& shared) {
  DialectText& d = em.dialect();
  const size_t rank = k.domain.size();
  const int64_t M = k.domain[rank - 2], N = k.domain[rank - 1], K = m.k_extent;
  const int esize = el == Element::tf32 ? 4 : 2, chunk = kChunkBytes / esize;
  const int depth = kSliceBytes / esize, kstep = el == Element::tf32 ? 8 : 16;
  const StageLayout a{da, "kiln_sa", t.tile, depth, chunk, esize};
  const StageLayout b{db, "kiln_sb", t.tile, depth, chunk, esize};
  const int stages = std::min(kMaxStages, kSharedBytes / (a.bytes() + b.bytes()));
  const int64_t slices = ceil_div(K, depth);
  const std::string word_type = esize == 4 ? "uint" : "unsigned short";
  d.define_helper(el == Element::tf32 ? "kiln_mma_tf32" : "kiln_mma_half", mma_prelude(el));
  d.define_helper("kiln_mma_async", async_prelude());
  for (const StageLayout* st : {&a, &b})
    shared += fmt::format("  __shared__ __align__(16) {} {}[{}];\n", word_type, st->name,
                          int64_t{stages} * st->elements());
  const std::string L = d.i64_type();
  Scope* root = em.root();
  em.append(root, fmt::format("{} lid = {};", L, d.local_id()));
  em.append(root, "int lane = int(lid) & 31; int warp = int(lid) >> 5; int grp = lane >> 2; int "
                  "quad = lane & 3;");
  em.append(root, fmt::format("int wm = warp / {} * {}; int wn = warp % {} * {};", t.warps_n,
                              t.mi * 16, t.warps_n, t.ni * 8));
  em.append(root, "uint kiln_sa_s = uint(__cvta_generic_to_shared(kiln_sa)); uint kiln_sb_s = "
                  "uint(__cvta_generic_to_shared(kiln_sb));");
  LaunchShape launch{1, t.threads()};
  Scope* tile = open_matmul_tiles(em, k, t.tile, launch);
  const auto iv = static_cast<int32_t>(rank - 2), jv = static_cast<int32_t>(rank - 1);
  // Stage `slot` of both operands, k from `kb`, then one commit group.
  const auto copy = [&](Scope* s, const std::string& slot, const std::string& kb) -> Expected<void> {
    if (auto r = copy_stage(em, s, a, t.threads(), slot, kb, m.k_var, iv, "i0", M, K); !r) return r;
    return copy_stage(em, s, b, t.threads(), slot, kb, m.k_var, jv, "j0", N, K);
  };
  // A grid-stride tile starts once every warp is done with the last tile's stages.
  em.append(tile, d.barrier());
  const int accs = t.mi * t.ni * 4;
  em.append(tile, fmt::format("float acc[{}];", accs));
  write_constant_loop_line(em, tile, {"r", accs, true},
                           [&](const std::string& r) { return fmt::format("acc[{}] = 0.0f;", r); });
  // The first stages - 1 slices, a group each (empty past the last slice: the waits below
  // count stages - 1 groups ahead of the loop's).
  for (int64_t p = 0; p < stages - 1; ++p) {
    if (p < slices) {
      Scope* block = em.open_block(tile);
      if (auto r = copy(block, std::to_string(p), d.i64_lit(p * depth)); !r)
        return std::unexpected(r.error());
      em.close(block);
    }
    em.append(tile, "asm volatile(\"cp.async.commit_group;\" ::: \"memory\");");
  }
  Scope* ks = em.open_loop(tile, fmt::format("for (int kt = 0; kt < {}; ++kt)", slices), slices);
  // Groups committed before this wait: stages - 1 + kt (some empty); slice kt's is done when at
  // most stages - 2 are pending.
  em.append(ks, fmt::format("asm volatile(\"cp.async.wait_group {};\" ::: \"memory\");", stages - 2));
  em.append(ks, d.barrier());
  Scope* next = em.open_if(ks, fmt::format("if (kt + {} < {})", stages - 1, slices));
  if (auto r = copy(next, fmt::format("((kt + {}) % {})", stages - 1, stages),
                    d.cast(L, fmt::format("(kt + {}) * {}", stages - 1, depth)));
      !r)
    return std::unexpected(r.error());
  em.close(next);
  em.append(ks, "asm volatile(\"cp.async.commit_group;\" ::: \"memory\");");
  em.append(ks, fmt::format("int slot = kt % {};", stages));
  const Expected<void> products = write_constant_loop(
      em, ks, {"kk", depth / kstep, true}, [&](Scope* s, const std::string& kk) {
        read_fragments(em, s, t, el, a, b, "slot", kk);
        write_mma_products(em, s, t, el);
        return Expected<void>();
      });
  if (!products) return std::unexpected(products.error());
  em.close(ks);
  em.append(tile, "asm volatile(\"cp.async.wait_group 0;\" ::: \"memory\");");
  if (auto r = store_accumulators(em, tile, k, m, t); !r) return std::unexpected(r.error());
  em.close(tile);
  return launch;
}

}  // namespace

std::string tf32_helper() {
  return "__device__ __forceinline__ uint kiln_tf32(float x) { uint u; asm(\"cvt.rna.tf32.f32 "
         "%0, %1;\" : \"=r\"(u) : \"f\"(x)); return u; }\n";
}

std::string mma_sync_text(std::string_view shape, const std::array<std::string, 4>& c,
                          const std::array<std::string, 4>& a, const std::string& b0,
                          const std::string& b1) {
  return fmt::format(
      "asm volatile(\"mma.sync.aligned.{} {{%0,%1,%2,%3}}, {{%4,%5,%6,%7}}, {{%8,%9}}, "
      "{{%0,%1,%2,%3}};\" : \"+f\"({}), \"+f\"({}), \"+f\"({}), \"+f\"({}) : \"r\"({}), "
      "\"r\"({}), \"r\"({}), \"r\"({}), \"r\"({}), \"r\"({}));",
      shape, c[0], c[1], c[2], c[3], a[0], a[1], a[2], a[3], b0, b1);
}

int heuristic_mma_tile(int64_t rows, int64_t cols) {
  const int64_t side = std::min(rows, cols);
  return side >= 1024 ? 128 : side >= 64 ? 64 : side >= 32 ? 32 : 16;
}

bool mma_supports(const kir::MatmulPattern& m) {
  if (!m.a || !m.b || !m.reduce) return false;
  const DType t = m.reduce->dtype;
  return (t == DType::f32 || t == DType::f16 || t == DType::bf16) && m.a->dtype == t &&
         m.b->dtype == t;
}

Expected<LaunchShape> write_mma_matmul(CExprEmitter& em, const kir::Kernel& k,
                                       const kir::MatmulPattern& m, int tile_side,
                                       std::string& shared) {
  DialectText& d = em.dialect();
  const size_t rank = k.domain.size();
  const int64_t M = k.domain[rank - 2], N = k.domain[rank - 1];
  const MmaTiling t = mma_tiling(tile_side != 0 ? tile_side : heuristic_mma_tile(M, N));
  const Element el = m.a->dtype == DType::f16    ? Element::f16
                     : m.a->dtype == DType::bf16 ? Element::bf16
                                                 : Element::tf32;
  {
    const int chunk = el == Element::tf32 ? 4 : 8;
    const auto iv = static_cast<int32_t>(rank - 2), jv = static_cast<int32_t>(rank - 1);
    const std::optional<Direct> da = direct_operand(em, k, m.a, m.k_var, m.k_extent, iv, M, chunk);
    const std::optional<Direct> db = direct_operand(em, k, m.b, m.k_var, m.k_extent, jv, N, chunk);
    if (da && db && em.check() == CheckMode::none)
      return write_mma_async(em, k, m, t, el, *da, *db, shared);
  }
  const int kstep = el == Element::tf32 ? 8 : 16;
  const std::string L = d.i64_type();
  d.define_helper(el == Element::tf32 ? "kiln_mma_tf32" : "kiln_mma_half", mma_prelude(el));
  const int as = t.a_stride(), bs = t.b_stride();
  shared += d.shared_decl("uint", "kiln_ta", int64_t{t.tile} * as);
  shared += d.shared_decl("uint", "kiln_tb", int64_t{kDepth} * bs);
  Scope* root = em.root();
  em.append(root, fmt::format("{} lid = {};", L, d.local_id()));
  em.append(root, fmt::format("int lane = int(lid) & 31; int warp = int(lid) >> 5; int grp = lane "
                              ">> 2; int quad = lane & 3;"));
  em.append(root, fmt::format("int wm = warp / {} * {}; int wn = warp % {} * {};", t.warps_n,
                              t.mi * 16, t.warps_n, t.ni * 8));
  LaunchShape launch{1, t.threads()};
  Scope* tile = open_matmul_tiles(em, k, t.tile, launch);
  const int accs = t.mi * t.ni * 4;
  em.append(tile, fmt::format("float acc[{}];", accs));
  write_constant_loop_line(em, tile, {"r", accs, true},
                           [&](const std::string& r) { return fmt::format("acc[{}] = 0.0f;", r); });
  em.append(tile, fmt::format("float pa[{0}]; float pb[{0}];", kPerThread));
  const auto iv = static_cast<int32_t>(rank - 2), jv = static_cast<int32_t>(rank - 1);
  const std::string K = d.i64_lit(m.k_extent);
  const auto load = [&](Scope* s, const std::string& k0) -> Expected<void> {
    const RegSlice a{m.a, iv, m.k_var, "i0", k0, d.i64_lit(M), K, "pa", kDepth};
    const RegSlice b{m.b, m.k_var, jv, k0, "j0", K, d.i64_lit(N), "pb", t.tile};
    if (auto r = load_registers(em, s, a, t.threads()); !r) return r;
    return load_registers(em, s, b, t.threads());
  };
  if (auto r = load(tile, d.i64_lit(0)); !r) return std::unexpected(r.error());
  Scope* ks = em.open_loop(tile,
                           fmt::format("for ({0} k0 = {1}; k0 < {2}; k0 += {3})", L, d.i64_lit(0),
                                       K, d.i64_lit(kDepth)),
                           ceil_div(m.k_extent, kDepth));
  em.append(ks, d.barrier());
  write_constant_loop_line(em, ks, {"q", kPerThread, true}, [&](const std::string& q) {
    return fmt::format(
        "{{ int e = int(lid) + {0} * {1}; kiln_ta[e / {2} * {3} + e % {2}] = {4}; "
        "kiln_tb[e / {5} * {6} + e % {5}] = {7}; }}",
        t.threads(), q, kDepth, as, staged(el, "pa[" + q + "]"), t.tile, bs,
        staged(el, "pb[" + q + "]"));
  });
  em.append(ks, d.barrier());
  Scope* next = em.open_if(ks, fmt::format("if (k0 + {} < {})", d.i64_lit(kDepth), K));
  em.append(next, fmt::format("{} k1 = k0 + {};", L, d.i64_lit(kDepth)));
  if (auto r = load(next, "k1"); !r) return std::unexpected(r.error());
  em.close(next);
  // The products of the staged slice, kstep deep at a time.
  const Expected<void> products = write_constant_loop(
      em, ks, {"kk", kDepth / kstep, true}, [&](Scope* s, const std::string& kk) {
        em.append(s, fmt::format("uint fa[{}][4]; uint fb[{}][2];", t.mi, t.ni));
        // A element (row r of the tile, k c of the slice) and B element (k r, column c).
        const auto a_at = [&](const std::string& r, const std::string& c) {
          return fmt::format("kiln_ta[({}) * {} + {}]", r, as, c);
        };
        const auto b_at = [&](const std::string& r, const std::string& c) {
          return fmt::format("kiln_tb[({}) * {} + {}]", r, bs, c);
        };
        const std::string k8 = fmt::format("{} * {}", kk, kstep);
        write_constant_loop_line(em, s, {"mi", t.mi, true}, [&](const std::string& mi) {
          const std::string r0 = fmt::format("wm + {} * 16 + grp", mi), r1 = r0 + " + 8";
          const std::string text = "{{ fa[{0}][0] = {1}; fa[{0}][1] = {2}; fa[{0}][2] = {3}; "
                                   "fa[{0}][3] = {4}; }}";
          if (el == Element::tf32) {
            const std::string c0 = k8 + " + quad", c1 = k8 + " + quad + 4";
            return fmt::format(fmt::runtime(text), mi, a_at(r0, c0), a_at(r1, c0), a_at(r0, c1),
                               a_at(r1, c1));
          }
          const std::string c0 = k8 + " + 2 * quad", c1 = k8 + " + 2 * quad + 8";
          const auto pair = [&](const std::string& r, const std::string& c) {
            return pack(el, a_at(r, c), a_at(r, c + " + 1"));
          };
          return fmt::format(fmt::runtime(text), mi, pair(r0, c0), pair(r1, c0), pair(r0, c1),
                             pair(r1, c1));
        });
        write_constant_loop_line(em, s, {"ni", t.ni, true}, [&](const std::string& ni) {
          const std::string c = fmt::format("wn + {} * 8 + grp", ni);
          const std::string text = "{{ fb[{0}][0] = {1}; fb[{0}][1] = {2}; }}";
          if (el == Element::tf32)
            return fmt::format(fmt::runtime(text), ni, b_at(k8 + " + quad", c),
                               b_at(k8 + " + quad + 4", c));
          const std::string r0 = k8 + " + 2 * quad", r1 = k8 + " + 2 * quad + 8";
          return fmt::format(fmt::runtime(text), ni, pack(el, b_at(r0, c), b_at(r0 + " + 1", c)),
                             pack(el, b_at(r1, c), b_at(r1 + " + 1", c)));
        });
        write_mma_products(em, s, t, el);
        return Expected<void>();
      });
  if (!products) return std::unexpected(products.error());
  em.close(ks);
  if (auto r = store_accumulators(em, tile, k, m, t); !r) return std::unexpected(r.error());
  em.close(tile);
  return launch;
}

}  // namespace kiln::codegen::gpu
