// Flash attention on the tensor cores (CUDA, sm_80 and later, kiln.toml
// compilation.matmul_precision = "high"): the algorithm of attention_writer.cpp with both
// products as tf32 mma.sync m16n8k8 and the softmax in registers. A workgroup of 4 warps takes a
// task of 64 query rows (16 per warp, the rows of one m16 fragment) and walks the keys in tiles of
// KT (64, or 32 where the head or value width passes 64):
//   1. the key and value rows of the tile are staged in shared memory (tf32, rows padded so the
//      fragment reads hit 32 banks); each warp's query fragments stay in registers for the task;
//   2. scores S = Q K^T: KT / 8 m16n8 fragments per warp, the sum over the head in f32;
//   3. logits: the logits expression at each fragment element (row, key), its scores bound to
//      the element (scale, masks, bias as the kernel computes them), -inf outside;
//   4. online softmax per row: a thread holds two rows' elements (g and g + 8), the row max and
//      the final row sum reduce across the 4 threads of the row (shuffles); the running max m,
//      rescale alpha = exp(m - m') and p = exp(x - m') follow attention_writer.cpp (NaN
//      propagates, a row with every key so far masked keeps p = 0 and alpha = 1);
//   5. O = O alpha + P V: the probabilities are the A fragments as they are, the C layout's
//      element pair (2t, 2t + 1) of a row read as A's k = t and k = t + 4: the value rows are read
//      in the same order (b0 from key 2t, b1 from key 2t + 1), so no shuffle is needed.
// At the end R = O / l goes through the stores. f32 operands are rounded to tf32 (cvt.rna) as
// they are staged, the probabilities as they enter the second product.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "codegen/gpu/strategy_writers.h"

namespace kiln::codegen::gpu {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = 16 * kWarps;  // query rows per task
constexpr int64_t kMaxWidth = 128;  // head and value widths

class MmaAttentionWriter {
 public:
  MmaAttentionWriter(CExprEmitter& em, const kir::Kernel& k, const kir::AttentionPattern& a)
      : em_(em),
        d_(em.dialect()),
        k_(k),
        a_(a),
        lq_(k.domain[a.i_var]),
        e_(k.domain[a.e_var]),
        hd_(a.head_dim),
        kt_(a.head_dim > 64 || k.domain[a.e_var] > 64 ? 32 : 64),
        L_(d_.i64_type()) {}

  Expected<LaunchShape> write(std::string& shared);

 private:
  std::string lit(int64_t v) const { return d_.i64_lit(v); }
  std::string flt(double v) const { return d_.float_lit(DType::f32, v); }
  int64_t ks_stride() const { return hd_ + 4; }  // (g rows, t words) on distinct banks
  int64_t vs_stride() const { return e_ + 4; }   // (2t rows, g words) on distinct banks
  std::string max_step(const std::string& acc, const std::string& v) const {
    return reduce_step_text(d_, kir::ReduceOp::Max, DType::f32, acc, v);
  }

  Expected<void> load_query(Scope* task);
  // Stages the tile's rows of `val` (key variable j, column variable `col_var` of extent
  // `width`) into shared array `name` with row stride `stride`, as tf32; 0 past the last key.
  Expected<void> stage(Scope* s, const kir::Expr* val, int32_t col_var, int64_t width,
                       const std::string& name, int64_t stride);
  Expected<void> write_logits(Scope* keys);
  void write_softmax(Scope* keys);
  Expected<void> write_outputs(Scope* task);
  void mma(Scope* s, const std::string& c, const std::string& a, const std::string& b0,
           const std::string& b1);

  CExprEmitter& em_;
  DialectText& d_;
  const kir::Kernel& k_;
  const kir::AttentionPattern& a_;
  const int64_t lq_, e_, hd_;
  const int kt_;
  const std::string L_;
};

// c[0..3] += a[0..3] (tf32 bits) x (b0, b1).
void MmaAttentionWriter::mma(Scope* s, const std::string& c, const std::string& a,
                             const std::string& b0, const std::string& b1) {
  const auto at = [](const std::string& x, int i) { return fmt::format("{}[{}]", x, i); };
  em_.append(s, mma_sync_text("m16n8k8.row.col.f32.tf32.tf32.f32",
                              {at(c, 0), at(c, 1), at(c, 2), at(c, 3)},
                              {at(a, 0), at(a, 1), at(a, 2), at(a, 3)}, b0, b1));
}

// qf[k8][c]: A fragment element c of the head's slice k8 for the warp's rows: a0 (g, t),
// a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4); 0 past the last query row.
Expected<void> MmaAttentionWriter::load_query(Scope* task) {
  em_.append(task, fmt::format("uint qf[{}][4];", hd_ / 8));
  return write_constant_loop(
      em_, task, {"qc", static_cast<int>(hd_ / 8 * 4), true}, [&](Scope* s, const std::string& qc) {
        const std::string gi = em_.fresh("gi"), dd = em_.fresh("dd"), v = em_.fresh("qv");
        em_.append(s, fmt::format("{0} {1} = r0 + {2} % 2 * 8; {0} {3} = {2} / 4 * 8 + quad + {2} % 4 / 2 * 4;",
                                  L_, gi, qc, dd));
        if (auto w = write_guarded_float(em_, s, a_.query, fmt::format("{} < {}", gi, lit(lq_)),
                                         {{a_.i_var, gi}, {a_.d_var, dd}}, v);
            !w)
          return w;
        em_.append(s, fmt::format("qf[{0} / 4][{0} % 4] = kiln_tf32({1});", qc, v));
        return Expected<void>();
      });
}

Expected<void> MmaAttentionWriter::stage(Scope* s, const kir::Expr* val, int32_t col_var,
                                         int64_t width, const std::string& name, int64_t stride) {
  const int64_t n = kt_ * width;  // a multiple of kThreads: kt_ >= 32, width a multiple of 8
  return write_constant_loop(
      em_, s, {"q", static_cast<int>(n / kThreads), true}, [&](Scope* q, const std::string& qi) {
        const std::string e = em_.fresh("e"), r = em_.fresh("r"), c = em_.fresh("c"),
                          gj = em_.fresh("gj"), v = em_.fresh("tv");
        em_.append(q, fmt::format("int {0} = int(lid) + {1} * {2}; int {3} = {0} / {4}, {5} = {0} % {4};",
                                  e, kThreads, qi, r, width, c));
        em_.append(q, fmt::format("{} {} = j0 + {};", L_, gj, r));
        if (auto w = write_guarded_float(em_, q, val, fmt::format("{} < {}", gj, lit(a_.keys)),
                                         {{a_.j_var, gj}, {col_var, d_.cast(L_, c)}}, v);
            !w)
          return w;
        em_.append(q, fmt::format("{}[{} * {} + {}] = kiln_tf32({});", name, r, stride, c, v));
        return Expected<void>();
      });
}

// s[n8][c] becomes the logit at fragment element c of key slice n8: row r0 + c / 2 * 8, key
// j0 + n8 * 8 + 2 t + c % 2; -inf past the last row or key.
Expected<void> MmaAttentionWriter::write_logits(Scope* keys) {
  return write_constant_loop(
      em_, keys, {"sx", kt_ / 8 * 4, true}, [&](Scope* s, const std::string& sx) {
        const std::string gi = em_.fresh("gi"), gj = em_.fresh("gj"), x = em_.fresh("x");
        em_.append(s, fmt::format("{0} {1} = r0 + {2} % 4 / 2 * 8; {0} {3} = j0 + {2} / 4 * 8 + 2 * quad + {2} % 2;",
                                  L_, gi, sx, gj));
        const std::string at = fmt::format("sf[{0} / 4][{0} % 4]", sx);
        if (auto r = write_logit(em_, s, k_, a_, gi, gj, at, x); !r) return r;
        em_.append(s, fmt::format("{} = {};", at, x));
        return Expected<void>();
      });
}

// Rows h = 0 (g: elements 0, 1) and h = 1 (g + 8: elements 2, 3) of the thread.
void MmaAttentionWriter::write_softmax(Scope* keys) {
  const int n8 = kt_ / 8;
  for (int h = 0; h < 2; ++h) {
    const std::string m = fmt::format("m{}", h), mt = fmt::format("mt{}", h);
    em_.append(keys, fmt::format("float {} = {};", mt, m));
    write_constant_loop_line(em_, keys, {"n", n8, true}, [&](const std::string& n) {
      return fmt::format("{{ {0} = {1}; {0} = {2}; }}", mt,
                         max_step(mt, fmt::format("sf[{}][{}]", n, 2 * h)),
                         max_step(mt, fmt::format("sf[{}][{}]", n, 2 * h + 1)));
    });
    for (int lane_mask : {1, 2})
      em_.append(keys, fmt::format("{} = {};", mt,
                                   max_step(mt, fmt::format("__shfl_xor_sync(0xffffffffu, {}, {})",
                                                            mt, lane_mask))));
    // Every key so far masked: exp(-inf - -inf) would be NaN; p = 0 and alpha = 1 keep O = l = 0.
    em_.append(keys, fmt::format("bool dead{0} = {1} == {2}; float alpha{0} = dead{0} ? {3} : {4};",
                                 h, mt, flt(-INFINITY), flt(1),
                                 d_.math("exp", DType::f32, m + " - " + mt)));
    em_.append(keys, fmt::format("float ps{} = {};", h, flt(0)));
    write_constant_loop_line(em_, keys, {"n", n8 * 2, true}, [&](const std::string& n) {
      const std::string at = fmt::format("sf[{0} / 2][{0} % 2 + {1}]", n, 2 * h);
      return fmt::format("{{ float p = dead{0} ? {1} : {2}; {3} = p; ps{0} += p; }}", h, flt(0),
                         d_.math("exp", DType::f32, at + " - " + mt), at);
    });
    em_.append(keys, fmt::format("l{0} = l{0} * alpha{0} + ps{0}; {1} = {2};", h, m, mt));
  }
  write_constant_loop_line(em_, keys, {"n", static_cast<int>(e_ / 8), true}, [&](const std::string& n) {
    return fmt::format("{{ of[{0}][0] *= alpha0; of[{0}][1] *= alpha0; of[{0}][2] *= alpha1; "
                       "of[{0}][3] *= alpha1; }}",
                       n);
  });
}

// R = O / l through the stores: element c of value slice n8 is (row r0 + c / 2 * 8, column
// n8 * 8 + 2 t + c % 2).
Expected<void> MmaAttentionWriter::write_outputs(Scope* task) {
  for (int h = 0; h < 2; ++h)
    for (int lane_mask : {1, 2})
      em_.append(task, fmt::format("l{0} += __shfl_xor_sync(0xffffffffu, l{0}, {1});", h, lane_mask));
  return write_constant_loop(
      em_, task, {"oc", static_cast<int>(e_ / 8 * 4), true}, [&](Scope* s, const std::string& oc) {
        const std::string gi = em_.fresh("gi"), ge = em_.fresh("ge"), rv = em_.fresh("rv");
        em_.append(s, fmt::format("{0} {1} = r0 + {2} % 4 / 2 * 8; {0} {3} = {2} / 4 * 8 + 2 * quad + {2} % 2;",
                                  L_, gi, oc, ge));
        Scope* out = em_.open_if(s, fmt::format("if ({} < {})", gi, lit(lq_)));
        em_.append(out, fmt::format("float {0} = of[{1} / 4][{1} % 4] / ({1} % 4 < 2 ? l0 : l1);",
                                    rv, oc));
        if (Expected<void> r = store_attention_point(em_, out, k_, a_, gi, ge, rv); !r) return r;
        em_.close(out);
        return Expected<void>();
      });
}

Expected<LaunchShape> MmaAttentionWriter::write(std::string& shared) {
  d_.define_helper("kiln_mma_tf32", tf32_helper());
  shared += d_.shared_decl("uint", "kiln_ks", kt_ * ks_stride());
  shared += d_.shared_decl("uint", "kiln_vs", kt_ * vs_stride());
  LaunchShape launch;
  Scope* task = open_attention_tasks(em_, k_, a_, kRows, kThreads, launch);
  em_.append(em_.root(), "int lane = int(lid) & 31; int warp = int(lid) >> 5; int grp = lane >> 2; "
                         "int quad = lane & 3;");
  em_.append(task, fmt::format("{} r0 = i0 + warp * 16 + grp;", L_));
  if (auto r = load_query(task); !r) return std::unexpected(r.error());
  em_.append(task, fmt::format("float of[{}][4];", e_ / 8));
  write_constant_loop_line(em_, task, {"n", static_cast<int>(e_ / 8), true}, [&](const std::string& n) {
    return fmt::format("{{ of[{0}][0] = 0.0f; of[{0}][1] = 0.0f; of[{0}][2] = 0.0f; of[{0}][3] = 0.0f; }}", n);
  });
  em_.append(task, fmt::format("float m0 = {0}, m1 = {0}, l0 = {1}, l1 = {1};", flt(-INFINITY), flt(0)));
  Scope* keys = open_key_tiles(em_, task, k_, a_, kRows, kt_);
  em_.append(keys, d_.barrier());  // every warp is done with the last tile's rows
  if (auto r = stage(keys, a_.key, a_.d_var, hd_, "kiln_ks", ks_stride()); !r)
    return std::unexpected(r.error());
  if (auto r = stage(keys, a_.value, a_.e_var, e_, "kiln_vs", vs_stride()); !r)
    return std::unexpected(r.error());
  em_.append(keys, d_.barrier());
  // Scores: B fragment b0 (k = t, n = g), b1 (k = t + 4, n = g) of K^T is key g's head slice.
  em_.append(keys, fmt::format("float sf[{}][4];", kt_ / 8));
  const Expected<void> scores = write_constant_loop(
      em_, keys, {"n", kt_ / 8, true}, [&](Scope* s, const std::string& n) {
        em_.append(s, fmt::format("sf[{0}][0] = 0.0f; sf[{0}][1] = 0.0f; sf[{0}][2] = 0.0f; sf[{0}][3] = 0.0f;", n));
        return write_constant_loop(em_, s, {"k8", static_cast<int>(hd_ / 8), true},
                                   [&](Scope* ks, const std::string& k8) {
                                     const std::string row = fmt::format("({} * 8 + grp) * {} + {} * 8 + quad", n, ks_stride(), k8);
                                     mma(ks, fmt::format("sf[{}]", n), fmt::format("qf[{}]", k8),
                                         fmt::format("kiln_ks[{}]", row),
                                         fmt::format("kiln_ks[{} + 4]", row));
                                     return Expected<void>();
                                   });
      });
  if (!scores) return std::unexpected(scores.error());
  if (auto r = write_logits(keys); !r) return std::unexpected(r.error());
  write_softmax(keys);
  // O += P V: A fragment (a0, a1, a2, a3) = (c0, c2, c1, c3) of the probabilities' slice kb, k = t
  // standing for key 2t and k = t + 4 for key 2t + 1; B likewise from value rows 2t and 2t + 1.
  const Expected<void> values = write_constant_loop(
      em_, keys, {"kb", kt_ / 8, true}, [&](Scope* s, const std::string& kb) {
        em_.append(s, fmt::format("uint pf[4] = {{kiln_tf32(sf[{0}][0]), kiln_tf32(sf[{0}][2]), "
                                  "kiln_tf32(sf[{0}][1]), kiln_tf32(sf[{0}][3])}};",
                                  kb));
        return write_constant_loop(em_, s, {"n", static_cast<int>(e_ / 8), true},
                                   [&](Scope* vs, const std::string& n) {
                                     const std::string row = fmt::format("({} * 8 + 2 * quad) * {} + {} * 8 + grp", kb, vs_stride(), n);
                                     mma(vs, fmt::format("of[{}]", n), "pf",
                                         fmt::format("kiln_vs[{}]", row),
                                         fmt::format("kiln_vs[{} + {}]", row, vs_stride()));
                                     return Expected<void>();
                                   });
      });
  if (!values) return std::unexpected(values.error());
  em_.close(keys);
  if (auto r = write_outputs(task); !r) return std::unexpected(r.error());
  em_.close(task);
  return launch;
}

}  // namespace

bool mma_attention_supports(const kir::Kernel& k, const kir::AttentionPattern& a) {
  const int64_t e = k.domain[a.e_var];
  return a.head_dim % 8 == 0 && a.head_dim <= kMaxWidth && e % 8 == 0 && e <= kMaxWidth;
}

Expected<LaunchShape> write_mma_attention(CExprEmitter& em, const kir::Kernel& k,
                                          const kir::AttentionPattern& a, std::string& shared) {
  MmaAttentionWriter w(em, k, a);
  return w.write(shared);
}

}  // namespace kiln::codegen::gpu
