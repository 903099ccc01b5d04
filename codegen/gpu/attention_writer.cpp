// The flash-attention strategy (kir::AttentionPattern): a workgroup per (batch point, block of BQ
// query rows) walks the keys in tiles of kKeyTile, never materializing the Lq x Lk scores:
//   1. scores: the BQ x BK dot products over head_dim, staging kDepthChunk-deep chunks of the
//      query and key expressions in shared memory (a small tiled matmul, scores in registers);
//   2. logits: the logits expression at each (row, key) with its scores reduction bound to the
//      dot product (scale, masks, bias as the kernel computes them), -inf past the last key;
//   3. online softmax, a thread per row: m' = max(m, tile max) (NaN propagates), the rescale
//      alpha = exp(m - m'), p = exp(x - m'), l' = l alpha + sum p. While m' is -inf (every key so
//      far masked) p = 0 and alpha = 1, so that a fully masked row ends with 0 / 0 = NaN, as the
//      reference's exp(-inf - (-inf)) gives;
//   4. values: acc = acc alpha + P V, staging value rows in shared memory.
// At the end R = acc / l goes through the stores (the epilogue). With a causal offset, key tiles
// past the block's last row + offset are skipped: their keys are masked for every row.
//
// One shared float array holds the tile's probabilities, the rows' running max, sum and rescale,
// and a work area shared by the query/key chunks and the value rows (AttentionTiles). Every
// thread owns ceil(BQ BK / G) scores and ceil(BQ E / G) outputs, slot s = lid + G q, so that
// consecutive threads read consecutive keys and write consecutive output columns.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "codegen/gpu/strategy_writers.h"

namespace kiln::codegen::gpu {

namespace {

class AttentionWriter {
 public:
  AttentionWriter(CExprEmitter& em, const kir::Kernel& k, const Strategy& st,
                  const AttentionTiles& t)
      : em_(em),
        d_(em.dialect()),
        k_(k),
        a_(st.attention),
        t_(t),
        g_(st.group_size),
        bq_(t.rows),
        lq_(k.domain[st.attention.i_var]),
        e_(k.domain[st.attention.e_var]),
        L_(d_.i64_type()) {}

  Expected<LaunchShape> write();

 private:
  // `lid + G q` as an index (q a loop variable or, in GLSL, its value).
  std::string slot(const std::string& q) const {
    return fmt::format("(lid + {} * {})", d_.i64_lit(g_), d_.cast(L_, q));
  }
  // The slot, clamped into [0, n): threads past the end compute in range and store nothing.
  std::string clamped_slot(const std::string& q, int64_t n) const {
    if (n % g_ == 0) return slot(q);
    const std::string s = slot(q), last = d_.i64_lit(n - 1);
    return fmt::format("({0} < {1} ? {0} : {1})", s, last);
  }
  std::string at(int64_t base, const std::string& index) const {
    return fmt::format("kiln_at[uint({} + {})]", d_.i64_lit(base), index);
  }
  std::string lit(int64_t v) const { return d_.i64_lit(v); }
  std::string flt(double v) const { return d_.float_lit(DType::f32, v); }
  int per_thread(int64_t n) const { return static_cast<int>(ceil_div(n, g_)); }

  // Stages `rows` x kDepthChunk values of `val` (row variable `row_var` from `row_base`, d from
  // d0) into the work area at `offset`, element (row, dd) at row * row_stride + dd * dd_stride;
  // 0 past `row_end` or head_dim.
  Expected<void> stage_chunk(Scope* s, const kir::Expr* val, int32_t row_var, int64_t rows,
                             const std::string& row_base, int64_t row_end, int64_t offset,
                             int64_t row_stride, int64_t dd_stride);
  Expected<void> write_scores(Scope* keys);
  Expected<void> write_logits(Scope* keys);
  void write_softmax(Scope* keys);
  Expected<void> write_values(Scope* keys);
  Expected<void> write_outputs(Scope* task);

  CExprEmitter& em_;
  DialectText& d_;
  const kir::Kernel& k_;
  const kir::AttentionPattern& a_;
  const AttentionTiles t_;
  const int g_, bq_;
  const int64_t lq_, e_;
  const std::string L_;
};

Expected<void> AttentionWriter::stage_chunk(Scope* s, const kir::Expr* val, int32_t row_var,
                                            int64_t rows, const std::string& row_base,
                                            int64_t row_end, int64_t offset, int64_t row_stride,
                                            int64_t dd_stride) {
  const int64_t n = rows * kDepthChunk;
  return write_constant_loop(
      em_, s, {"q", per_thread(n), true}, [&](Scope* q, const std::string& qi) {
        const std::string e = em_.fresh("e"), r = em_.fresh("r"), dd = em_.fresh("dd"),
                          v = em_.fresh("tv");
        em_.append(q, fmt::format("{} {} = {};", L_, e, slot(qi)));
        Scope* inside = n % g_ == 0 ? q : em_.open_if(q, fmt::format("if ({} < {})", e, lit(n)));
        em_.append(inside, fmt::format("{0} {1} = {2} + {3} / {4}; {0} {5} = d0 + {3} % {4};", L_,
                                       r, row_base, e, lit(kDepthChunk), dd));
        if (auto w = write_guarded_float(
                em_, inside, val, fmt::format("{} < {} && {} < {}", r, lit(row_end), dd, lit(a_.head_dim)),
                {{row_var, r}, {a_.d_var, dd}}, v);
            !w)
          return w;
        em_.append(inside, fmt::format("{} = {};",
                                       at(offset, fmt::format("{0} / {1} * {2} + {0} % {1} * {3}",
                                                              e, lit(kDepthChunk), lit(row_stride),
                                                              lit(dd_stride))),
                                       v));
        if (inside != q) em_.close(inside);
        return Expected<void>();
      });
}

// sc[q] = sum over head_dim of Q(row) K(key) for the thread's score slots.
Expected<void> AttentionWriter::write_scores(Scope* keys) {
  const int sp = per_thread(int64_t{bq_} * kKeyTile);
  write_constant_loop_line(em_, keys, {"q", sp, true}, [&](const std::string& q) {
    return fmt::format("sc[{}] = {};", q, flt(0));
  });
  Scope* chunk = em_.open_loop(keys,
                               fmt::format("for ({0} d0 = {1}; d0 < {2}; d0 += {3})", L_, lit(0),
                                           lit(a_.head_dim), lit(kDepthChunk)),
                               ceil_div(a_.head_dim, kDepthChunk));
  const int64_t queries = t_.work, key_chunk = t_.work + int64_t{bq_} * kDepthChunk;
  // Queries row-major (a row's chunk read by the threads of that row); keys transposed, so that
  // consecutive threads (consecutive keys) read consecutive words.
  if (auto r = stage_chunk(chunk, a_.query, a_.i_var, bq_, "i0", lq_, queries, kDepthChunk, 1); !r)
    return r;
  if (auto r =
          stage_chunk(chunk, a_.key, a_.j_var, kKeyTile, "j0", a_.keys, key_chunk, 1, kKeyTile);
      !r)
    return r;
  em_.append(chunk, d_.barrier());
  const int64_t ns = int64_t{bq_} * kKeyTile;
  Expected<void> products = write_constant_loop(
      em_, chunk, {"dd", kDepthChunk, true}, [&](Scope* s, const std::string& dd) {
        write_constant_loop_line(em_, s, {"q", sp, true}, [&](const std::string& q) {
          const std::string sl = clamped_slot(q, ns);
          return fmt::format("sc[{0}] += {1} * {2};", q,
                             at(queries, fmt::format("{} / {} * {} + {}", sl, lit(kKeyTile),
                                                     lit(kDepthChunk), d_.cast(L_, dd))),
                             at(key_chunk, fmt::format("{} * {} + {} % {}", d_.cast(L_, dd),
                                                       lit(kKeyTile), sl, lit(kKeyTile))));
        });
        return Expected<void>();
      });
  if (!products) return products;
  em_.append(chunk, d_.barrier());
  em_.close(chunk);
  return {};
}

// The logits of the thread's score slots, -inf past the last key (and past the last row, where
// they are never used), into the probabilities' array.
Expected<void> AttentionWriter::write_logits(Scope* keys) {
  const int64_t ns = int64_t{bq_} * kKeyTile;
  return write_constant_loop(
      em_, keys, {"q", per_thread(ns), true}, [&](Scope* q, const std::string& qi) {
        const std::string s = em_.fresh("s"), gi = em_.fresh("gi"), gj = em_.fresh("gj"),
                          x = em_.fresh("x");
        em_.append(q, fmt::format("{} {} = {};", L_, s, slot(qi)));
        Scope* inside = ns % g_ == 0 ? q : em_.open_if(q, fmt::format("if ({} < {})", s, lit(ns)));
        em_.append(inside, fmt::format("{0} {1} = i0 + {2} / {3}; {0} {4} = j0 + {2} % {3};", L_,
                                       gi, s, lit(kKeyTile), gj));
        if (auto r = write_logit(em_, inside, k_, a_, gi, gj, fmt::format("sc[{}]", qi), x); !r)
          return r;
        em_.append(inside, fmt::format("{} = {};", at(t_.probs, s), x));
        if (inside != q) em_.close(inside);
        return Expected<void>();
      });
}

// A thread per row folds the tile into the row's running max and sum, turning its logits into
// probabilities and leaving the accumulators' rescale factor.
void AttentionWriter::write_softmax(Scope* keys) {
  Scope* row = em_.open_if(keys, fmt::format("if (lid < {})", lit(bq_)));
  const std::string base = fmt::format("lid * {}", lit(kKeyTile));
  auto logit = [&](const std::string& kk) { return at(t_.probs, base + " + " + d_.cast(L_, kk)); };
  em_.append(row, fmt::format("float mo = {};", at(t_.max, "lid")));
  em_.append(row, "float mt = mo;");
  // max with numpy's NaN rule (a NaN logit makes the row NaN), not fmax.
  write_constant_loop_line(em_, row, {"kk", kKeyTile, true}, [&](const std::string& kk) {
    return fmt::format("mt = {};",
                       reduce_step_text(d_, kir::ReduceOp::Max, DType::f32, "mt", logit(kk)));
  });
  // Every key so far masked: exp(-inf - -inf) would be NaN; p = 0 and alpha = 1 keep acc = l = 0.
  em_.append(row, fmt::format("bool dead = mt == {};", flt(-INFINITY)));
  em_.append(row, fmt::format("float alpha = dead ? {} : {};", flt(1),
                              d_.math("exp", DType::f32, "mo - mt")));
  em_.append(row, fmt::format("float ps = {};", flt(0)));
  write_constant_loop_line(em_, row, {"kk", kKeyTile, true}, [&](const std::string& kk) {
    return fmt::format("{{ float p = dead ? {} : {}; {} = p; ps += p; }}", flt(0),
                       d_.math("exp", DType::f32, logit(kk) + " - mt"), logit(kk));
  });
  em_.append(row, fmt::format("{0} = {0} * alpha + ps;", at(t_.sum, "lid")));
  em_.append(row, fmt::format("{} = mt; {} = alpha;", at(t_.max, "lid"), at(t_.scale, "lid")));
  em_.close(row);
}

// acc = acc alpha + P V over the tile, value rows staged t_.value_keys at a time.
Expected<void> AttentionWriter::write_values(Scope* keys) {
  const int64_t no = int64_t{bq_} * e_, nv = int64_t{t_.value_keys} * e_;
  const int ap = per_thread(no);
  auto out_row = [&](const std::string& q) {
    return fmt::format("{} / {}", clamped_slot(q, no), lit(e_));
  };
  write_constant_loop_line(em_, keys, {"q", ap, true}, [&](const std::string& q) {
    return fmt::format("acc[{}] *= {};", q, at(t_.scale, out_row(q)));
  });
  Scope* part = em_.open_loop(keys,
                              fmt::format("for ({0} jv = {1}; jv < {2}; jv += {3})", L_, lit(0),
                                          lit(kKeyTile), lit(t_.value_keys)),
                              kKeyTile / t_.value_keys);
  Expected<void> staged = write_constant_loop(
      em_, part, {"q", per_thread(nv), true}, [&](Scope* q, const std::string& qi) {
        const std::string e = em_.fresh("e"), gj = em_.fresh("gj"), ge = em_.fresh("ge"),
                          v = em_.fresh("tv");
        em_.append(q, fmt::format("{} {} = {};", L_, e, slot(qi)));
        Scope* inside = nv % g_ == 0 ? q : em_.open_if(q, fmt::format("if ({} < {})", e, lit(nv)));
        em_.append(inside, fmt::format("{0} {1} = j0 + jv + {2} / {3}; {0} {4} = {2} % {3};", L_,
                                       gj, e, lit(e_), ge));
        if (auto w = write_guarded_float(em_, inside, a_.value,
                                         fmt::format("{} < {}", gj, lit(a_.keys)),
                                         {{a_.j_var, gj}, {a_.e_var, ge}}, v);
            !w)
          return w;
        em_.append(inside, fmt::format("{} = {};", at(t_.work, e), v));
        if (inside != q) em_.close(inside);
        return Expected<void>();
      });
  if (!staged) return staged;
  em_.append(part, d_.barrier());
  Expected<void> accumulated = write_constant_loop(
      em_, part, {"kk", t_.value_keys, true}, [&](Scope* s, const std::string& kk) {
        write_constant_loop_line(em_, s, {"q", ap, true}, [&](const std::string& q) {
          const std::string sl = clamped_slot(q, no);
          return fmt::format(
              "acc[{}] += {} * {};", q,
              at(t_.probs, fmt::format("{} / {} * {} + jv + {}", sl, lit(e_), lit(kKeyTile),
                                       d_.cast(L_, kk))),
              at(t_.work, fmt::format("{} * {} + {} % {}", d_.cast(L_, kk), lit(e_), sl, lit(e_))));
        });
        return Expected<void>();
      });
  if (!accumulated) return accumulated;
  em_.append(part, d_.barrier());
  em_.close(part);
  return {};
}

// R = acc / l through the stores, for the thread's output slots inside the block.
Expected<void> AttentionWriter::write_outputs(Scope* task) {
  const int64_t no = int64_t{bq_} * e_;
  return write_constant_loop(
      em_, task, {"q", per_thread(no), true}, [&](Scope* q, const std::string& qi) {
        const std::string o = em_.fresh("o"), gi = em_.fresh("gi"), ge = em_.fresh("ge"),
                          rv = em_.fresh("rv");
        em_.append(q, fmt::format("{} {} = {};", L_, o, slot(qi)));
        em_.append(q, fmt::format("{0} {1} = i0 + {2} / {3}; {0} {4} = {2} % {3};", L_, gi, o,
                                  lit(e_), ge));
        Scope* out =
            em_.open_if(q, fmt::format("if ({} < {} && {} < {})", o, lit(no), gi, lit(lq_)));
        em_.append(out, fmt::format("float {} = acc[{}] / {};", rv, qi,
                                    at(t_.sum, fmt::format("{} / {}", o, lit(e_)))));
        if (Expected<void> r = store_attention_point(em_, out, k_, a_, gi, ge, rv); !r) return r;
        em_.close(out);
        return Expected<void>();
      });
}

Expected<LaunchShape> AttentionWriter::write() {
  LaunchShape launch;
  Scope* task = open_attention_tasks(em_, k_, a_, bq_, g_, launch);
  em_.append(task, d_.barrier());  // the previous task's last reads of the row sums
  em_.append(task, fmt::format("if (lid < {}) {{ {} = {}; {} = {}; }}", lit(bq_), at(t_.max, "lid"),
                               flt(-INFINITY), at(t_.sum, "lid"), flt(0)));
  const int ap = per_thread(int64_t{bq_} * e_);
  em_.append(task, fmt::format("float acc[{}];", ap));
  em_.append(task, fmt::format("float sc[{}];", per_thread(int64_t{bq_} * kKeyTile)));
  write_constant_loop_line(em_, task, {"q", ap, false}, [&](const std::string& q) {
    return fmt::format("acc[{}] = {};", q, flt(0));
  });
  Scope* keys = open_key_tiles(em_, task, k_, a_, bq_, kKeyTile);
  if (auto r = write_scores(keys); !r) return std::unexpected(r.error());
  if (auto r = write_logits(keys); !r) return std::unexpected(r.error());
  em_.append(keys, d_.barrier());
  write_softmax(keys);
  em_.append(keys, d_.barrier());
  if (auto r = write_values(keys); !r) return std::unexpected(r.error());
  em_.close(keys);
  em_.append(task, d_.barrier());  // the row sums, when no key tile ran
  if (auto r = write_outputs(task); !r) return std::unexpected(r.error());
  em_.close(task);
  return launch;
}

}  // namespace

Scope* open_attention_tasks(CExprEmitter& em, const kir::Kernel& k, const kir::AttentionPattern& a,
                            int rows, int group_size, LaunchShape& launch) {
  DialectText& d = em.dialect();
  const std::string L = d.i64_type();
  const size_t rank = k.domain.size();
  const int64_t blocks = ceil_div(k.domain[a.i_var], rows);
  const int64_t tasks = product(k.domain, 0, rank - 2) * blocks;
  launch = {std::clamp<int64_t>(tasks, 1, kMaxGroups), group_size};
  Scope* root = em.root();
  em.append(root, fmt::format("{} lid = {};", L, d.cast(L, d.local_id())));
  Scope* task = em.open_loop(
      root,
      fmt::format("for ({0} task = {1}; task < {2}; task += {3})", L, d.cast(L, d.group_id()),
                  d.i64_lit(tasks), d.cast(L, d.num_groups())),
      ceil_div(tasks, launch.groups));
  em.append(task, fmt::format("{0} i0 = task % {1} * {2}; {0} bt = task / {1};", L,
                              d.i64_lit(blocks), d.i64_lit(rows)));
  if (rank > 2) bind_flat(em, task, k.domain, iota_vars(rank - 2), "bt");
  return task;
}

Scope* open_key_tiles(CExprEmitter& em, Scope* task, const kir::Kernel& k,
                      const kir::AttentionPattern& a, int rows, int tile) {
  DialectText& d = em.dialect();
  const std::string L = d.i64_type();
  const int64_t lq = k.domain[a.i_var];
  std::string end = d.i64_lit(a.keys);
  if (a.causal_offset) {
    const std::string last =
        fmt::format("(i0 + {0} < {1} ? i0 + {0} : {1})", d.i64_lit(rows), d.i64_lit(lq));
    const std::string limit = fmt::format("({} + {})", last, d.i64_lit(*a.causal_offset));
    end = fmt::format("({0} < {1} ? {0} : {1})", limit, d.i64_lit(a.keys));
  }
  em.append(task, fmt::format("{} jend = {};", L, end));
  return em.open_loop(
      task, fmt::format("for ({0} j0 = {1}; j0 < jend; j0 += {2})", L, d.i64_lit(0), d.i64_lit(tile)),
      ceil_div(a.keys, tile));
}

Expected<void> store_attention_point(CExprEmitter& em, Scope* s, const kir::Kernel& k,
                                     const kir::AttentionPattern& a, const std::string& gi,
                                     const std::string& ge, const std::string& value) {
  em.bind_var(s, a.i_var, gi);
  em.bind_var(s, a.e_var, ge);
  em.bind_expr(s, a.reduce, value);
  return emit_stores(em, s, k);
}

Expected<void> write_logit(CExprEmitter& em, Scope* s, const kir::Kernel& k,
                           const kir::AttentionPattern& a, const std::string& gi,
                           const std::string& gj, const std::string& scores, const std::string& x) {
  DialectText& d = em.dialect();
  em.append(s, fmt::format("float {} = {};", x, d.float_lit(DType::f32, -INFINITY)));
  Scope* in = em.open_if(s, fmt::format("if ({} < {} && {} < {})", gi,
                                        d.i64_lit(k.domain[a.i_var]), gj, d.i64_lit(a.keys)));
  em.bind_var(in, a.i_var, gi);
  em.bind_var(in, a.j_var, gj);
  em.bind_expr(in, a.scores, scores);
  Expected<std::string> v = em.emit(a.logits);
  if (!v) return std::unexpected(v.error());
  em.append(in, fmt::format("{} = {};", x, *v));
  em.close(in);
  return {};
}

Expected<LaunchShape> write_attention(CExprEmitter& em, const kir::Kernel& k, const Strategy& st,
                                      std::string& shared) {
  const std::optional<AttentionTiles> tiles =
      attention_tiles(st.attention_rows, k.domain[st.attention.e_var]);
  if (!tiles || st.group_size < st.attention_rows)
    return std::unexpected(kiln::Error{fmt::format(
        "gpu codegen: kernel {}: attention with {} query rows per workgroup of {} threads does "
        "not fit",
        k.name, st.attention_rows, st.group_size)});
  shared += em.dialect().shared_decl("float", "kiln_at", tiles->floats);
  AttentionWriter w(em, k, st, *tiles);
  return w.write();
}

}  // namespace kiln::codegen::gpu
