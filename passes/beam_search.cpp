// The beam search of DESIGN.md §5: place each node, in topological order, into each compatible
// open group or a new one; keep the cheapest states.
//
// Costs are incremental: a placement's price is computed from the state it extends without
// touching the other groups (what the node adds to its group's work and buffers, the outputs it
// forces on its producers' groups, the copies it recomputes). A value read from another group
// is materialized there or recomputed here, whichever the cost model prices lower; a value
// whose consumers are not placed yet is not yet counted as an output (its cost arrives with the
// consumer that needs it in another group).
#include "passes/beam_search.h"

#include <algorithm>

#include "kiln/error.h"

namespace kiln::passes {

namespace {

// Largest closure of unmaterialized values one read may recompute before materializing wins.
constexpr size_t kMaxRecompute = 16;

bool sorted_contains(const std::vector<int32_t>& v, int32_t x) {
  return std::binary_search(v.begin(), v.end(), x);
}

void sorted_insert(std::vector<int32_t>& v, int32_t x) {
  auto it = std::lower_bound(v.begin(), v.end(), x);
  if (it == v.end() || *it != x) v.insert(it, x);
}

bool list_contains(const std::vector<int32_t>& v, int32_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

uint64_t mix(uint64_t kind, uint64_t a, uint64_t b) {
  uint64_t x = (kind << 60) ^ (a << 30) ^ b;
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

bool is_scan(const ir::Node* n) {
  return ir::op_kind(n->op) == ir::OpKind::Scan;
}
// What a scan's kernel may not hold (kir::Scan's contract): a reduction or a matmul (or a
// scatter_elements, which lowers to a reduction per element).
bool is_reduction(const ir::Node* n) {
  return ir::is_reduce(n->op) || n->op == ir::Op::Matmul || n->op == ir::Op::ScatterElements;
}

// What placing one node does to a state: computed without mutating it, applied to survivors.
struct Placement {
  int slot = -1;  // open group receiving the node, or -1 for a new group
  bool ok = true;
  double delta = 0;
  std::vector<int32_t> materialize;  // values that become outputs of their home groups
  std::vector<int32_t> recompute;    // values copied into the target group
  std::vector<int32_t> new_inputs;   // buffers the target group starts reading
  std::vector<std::pair<int32_t, double>> factors;  // raised evaluation factors in the target
  std::vector<std::pair<int32_t, int32_t>> shapes;  // (group, node) output shapes fixed here
};

class Planner {
 public:
  Planner(const FusionGraph& g, const CostModel& cost, const SearchState& s, int slot,
          size_t max_buffers)
      : g_(g),
        cost_(cost),
        s_(s),
        slot_(slot),
        max_buffers_(max_buffers),
        target_(slot >= 0 ? s.open[static_cast<size_t>(slot)].id : s.group_count()) {}

  Placement place(int32_t n) const {
    Placement p;
    p.slot = slot_;
    placing_ = n;
    const FusionNode& fn = g_[n];
    if (slot_ >= 0 && s_.open[static_cast<size_t>(slot_)].size >= kMaxGroupNodes) {
      fail(p);
      return p;
    }
    // The scan rule: a scan joins a group of elementwise and view nodes (its producers, or a
    // new group that copies them: fuse-on-read, the scan reads its operand through their
    // expression), and the group then takes no other node. Its value is read from a buffer (a
    // kernel boundary), and no reduction, matmul or other scan is in its group (kernel_ir.h: a
    // kernel with a scan holds no reduction).
    scan_group_ = is_scan(fn.node);
    if (slot_ >= 0) {
      const OpenGroup& open = s_.open[static_cast<size_t>(slot_)];
      if (open.has_scan || (scan_group_ && open.has_reduce) || (scan_group_ && open.has_matmul)) {
        fail(p);
        return p;
      }
      // One matmul a kernel: the backends' matmul loop nest computes one contraction, and a
      // kernel of two (a decoder's q, k and v projections of one row) ran each as a plain loop.
      if (fn.node->op == ir::Op::Matmul && !fn.attention && open.has_matmul) {
        fail(p);
        return p;
      }
      // A matmul's kernel holds no other reduction: with one, codegen no longer takes the kernel
      // for a matmul (kir::recognize_matmul) and computes the matmul as a loose reduction, in
      // another arithmetic than its loop nest has where it is alone, so the value would depend
      // on what else the plan puts in its kernel (RandomGraphFuzz seed 1971: a sum beside it).
      if ((fn.node->op == ir::Op::Matmul && !fn.attention && open.has_reduce) ||
          (is_reduction(fn.node) && open.has_matmul_nest)) {
        fail(p);
        return p;
      }
    }
    if (slot_ < 0) p.delta += cost_.launch_seconds(1);
    if (fn.forced && !fix_shape(p, target_, n)) return p;
    // A matmul's kernel has the matmul's domain (its epilogue's outputs have its shape): in a
    // larger one it would be evaluated per point of it (a [1, 256] projection inside a
    // [512, 256] cache update, 512 times) with no matmul loop nest, and it could not be written
    // from there for another kernel to read.
    if (fn.node->op == ir::Op::Matmul && !fn.attention && !fix_shape(p, target_, n)) return p;
    p.delta += (fn.forced ? cost_.buffer_seconds(fn.node, fn.bytes) : 0) + work(n, 1.0);
    for (const FusionRead& r : fn.reads) {
      if (!read(p, fn.node, r, 1.0, kMaxRecompute)) return p;
    }
    if (!within_buffer_limit(p)) fail(p);
    return p;
  }

 private:
  bool fail(Placement& p) const {
    p.ok = false;
    return false;
  }

  // The buffers `group` binds with this placement: those it reads and writes so far, and those
  // the placement adds (`extra` more written).
  size_t binds(const Placement& p, int32_t group, size_t extra = 0) const {
    size_t n = extra + (group < s_.group_count()
                            ? static_cast<size_t>(s_.buffers[static_cast<size_t>(group)])
                            : 0);
    if (group == target_) n += p.new_inputs.size() + (g_[placing_].forced ? 1 : 0);
    for (int32_t b : p.materialize) n += s_.group_of[static_cast<size_t>(b)] == group;
    return n;
  }

  // Whether the target, with this placement, binds at most max_buffers_ buffers. A new group
  // always takes its node (whose operands are what it needs).
  bool within_buffer_limit(const Placement& p) const {
    return slot_ < 0 || binds(p, target_) <= max_buffers_;
  }

  // Node q's work, evaluated `factor` times per element.
  double work(int32_t q, double factor) const {
    const FusionNode& fn = g_[q];
    if (fn.attention) return cost_.attention_seconds(*fn.attention) * factor;
    return cost_.work_seconds(fn.node, fn.flops * factor);
  }

  bool member(const Placement& p, int32_t q) const {
    if (s_.group_of[static_cast<size_t>(q)] == target_) return true;
    if (slot_ >= 0 && sorted_contains(s_.open[static_cast<size_t>(slot_)].copies, q)) return true;
    return list_contains(p.recompute, q);
  }

  int32_t shape_node(const Placement& p, int32_t group) const {
    for (const auto& [gr, node] : p.shapes)
      if (gr == group) return node;
    return group < s_.group_count() ? s_.shape_of[static_cast<size_t>(group)] : -1;
  }

  // Makes `n` an output of `group`: all outputs of a group share one shape (the kernel domain).
  bool fix_shape(Placement& p, int32_t group, int32_t n) const {
    int32_t have = shape_node(p, group);
    if (have < 0) {
      p.shapes.push_back({group, n});
      return true;
    }
    if (g_[have].node->shape == g_[n].node->shape) return true;
    return fail(p);
  }

  bool is_materialized(const Placement& p, int32_t q) const {
    return s_.materialized[static_cast<size_t>(q)] != 0 || list_contains(p.materialize, q);
  }

  bool add_buffer(Placement& p, int32_t b) const {
    if (slot_ >= 0 && sorted_contains(s_.open[static_cast<size_t>(slot_)].inputs, b)) return true;
    if (list_contains(p.new_inputs, b)) return true;
    if (g_[b].role == Role::Placed && slot_ >= 0) {
      int32_t home = s_.group_of[static_cast<size_t>(b)];
      // The producer's group already reads this one: reading it back closes a cycle.
      if (sorted_contains(s_.open[static_cast<size_t>(slot_)].desc, home)) return fail(p);
    }
    p.new_inputs.push_back(b);
    p.delta += cost_.buffer_seconds(g_[b].node, g_[b].bytes);
    return true;
  }

  double factor_of(const Placement& p, int32_t q) const {
    for (auto it = p.factors.rbegin(); it != p.factors.rend(); ++it)
      if (it->first == q) return it->second;
    return s_.factor[static_cast<size_t>(q)];
  }

  // A member of the target is now also evaluated `f` times per element: hoisting decides.
  void raise(Placement& p, int32_t q, double f) const {
    std::vector<std::pair<int32_t, double>> stack{{q, f}};  // iterative: chains can be long
    while (!stack.empty()) {
      auto [n, want] = stack.back();
      stack.pop_back();
      if (s_.group_of[static_cast<size_t>(n)] != target_) continue;  // copies keep their price
      double have = factor_of(p, n);
      if (want <= have * (1 + 1e-9)) continue;
      p.factors.push_back({n, want});
      p.delta += work(n, want - have);
      for (const FusionRead& r : g_[n].reads)
        if (g_[r.base].role == Role::Placed && member(p, r.base))
          stack.push_back({r.base, want * r.extra});
    }
  }

  // Whether `b`, a member of the target, is a matmul or computed from one in the target: a
  // reduction reading it would evaluate the matmul again in the reduction's own loop, as a loose
  // reduction of separately rounded products in another order than the matmul's loop nest, so
  // the kernel would see other bits of the value than the matmul's own kernel writes (a softmax
  // of x @ w came out 1 ulp apart in a traced replay and in the function run again). Such a
  // reduction goes to another kernel, which reads the matmul's result.
  bool reads_a_matmul(int32_t b) const {
    constexpr size_t kMaxWalk = 64;  // a bound on the walk; longer prologues are rare
    std::vector<int32_t> seen, stack{b};
    while (!stack.empty() && seen.size() < kMaxWalk) {
      int32_t q = stack.back();
      stack.pop_back();
      if (s_.group_of[static_cast<size_t>(q)] != target_ || list_contains(seen, q)) continue;
      seen.push_back(q);
      const ir::Node* n = g_[q].node;
      if (n->op == ir::Op::Matmul) return true;
      if (ir::is_reduce(n->op)) continue;
      for (const FusionRead& r : g_[q].reads) stack.push_back(r.base);
    }
    return false;
  }

  // One read of `reader` (a graph node evaluated `f` times per element) in the target group.
  bool read(Placement& p, const ir::Node* reader, const FusionRead& r, double f,
            size_t budget) const {
    int32_t b = r.base;
    if (g_[b].role == Role::Input) return add_buffer(p, b);
    if (is_scan(g_[b].node)) return member(p, b) ? fail(p) : materialize(p, b);
    if (member(p, b)) {
      if (reader->op == ir::Op::Matmul) return fail(p);
      if (g_[b].multi_view && !r.direct) return fail(p);
      // A matmul this group writes is read through a view from its buffer, in another kernel:
      // here the view would evaluate it a second time, at other indices, and codegen would take
      // the kernel's two contractions for loose sums (RandomGraphFuzz seed 2205: x @ w and its
      // flip, both outputs, were 1 ulp apart from x @ w alone).
      if (!r.direct && g_[b].forced && reads_a_matmul(b)) return fail(p);
      raise(p, b, f * r.extra);
      if ((ir::is_reduce(reader->op) || reader->op == ir::Op::ScatterElements) && slot_ >= 0 &&
          s_.open[static_cast<size_t>(slot_)].has_matmul && reads_a_matmul(b))
        return fail(p);
      return true;
    }
    if (is_materialized(p, b)) return add_buffer(p, b);
    if (reader->op == ir::Op::Matmul) return materialize(p, b);
    // Price both ways on the same placement, rolling back in between (no copies).
    Mark start = mark(p);
    // Writing b adds a buffer to its home group: past the limit, a copy is taken where one can be.
    const int32_t home = s_.group_of[static_cast<size_t>(b)];
    const bool home_fits = home < 0 || binds(p, home, 1) <= max_buffers_;
    bool buffered = materialize(p, b);
    double buffered_delta = p.delta;
    rollback(p, start);
    // Without a buffer, a new group must copy whatever it takes; an existing group only tries
    // (the copies run back through the producer's kernel, up to its size for every placement).
    bool copied = recompute(p, b, f * r.extra, buffered || slot_ >= 0 ? budget : SIZE_MAX);
    if (copied && buffered && !within_buffer_limit(p)) copied = false;  // copies read buffers too
    if (copied && (!buffered || !home_fits || p.delta < buffered_delta)) return true;
    rollback(p, start);
    if (!buffered) return fail(p);
    return materialize(p, b);
  }

  // A placement only grows; a mark is its sizes, to undo a priced alternative.
  struct Mark {
    double delta;
    size_t materialize, recompute, new_inputs, factors, shapes;
  };
  static Mark mark(const Placement& p) {
    return {p.delta,          p.materialize.size(), p.recompute.size(), p.new_inputs.size(),
            p.factors.size(), p.shapes.size()};
  }
  static void rollback(Placement& p, const Mark& m) {
    p.ok = true;
    p.delta = m.delta;
    p.materialize.resize(m.materialize);
    p.recompute.resize(m.recompute);
    p.new_inputs.resize(m.new_inputs);
    p.factors.resize(m.factors);
    p.shapes.resize(m.shapes);
  }

  bool materialize(Placement& p, int32_t b) const {
    int32_t home = s_.group_of[static_cast<size_t>(b)];
    if (!fix_shape(p, home, b)) return false;
    if (!is_materialized(p, b)) {
      p.materialize.push_back(b);
      p.delta += cost_.buffer_seconds(g_[b].node, g_[b].bytes);
    }
    return add_buffer(p, b);
  }

  // Whether the target group computes a matmul in its loop nest, or will with this placement.
  bool into_matmul_nest() const {
    const FusionNode& fn = g_[placing_];
    return (fn.node->op == ir::Op::Matmul && !fn.attention) ||
           (slot_ >= 0 && s_.open[static_cast<size_t>(slot_)].has_matmul_nest);
  }

  // Copies `b` and the unmaterialized values it needs into the target group.
  bool recompute(Placement& p, int32_t b, double f, size_t budget) const {
    if (p.recompute.size() >= budget) return fail(p);
    const ir::Node* n = g_[b].node;
    // A matmul is computed once, by its own loop nest: a copy would be a loose reduction of
    // separately rounded products, in another order, so a value would have other bits in the
    // kernel that copies it than in its own (a softmax of x @ w came out 1 ulp apart in a traced
    // replay and in the function run again, depending on which was realized first).
    if (n->op == ir::Op::Matmul && !g_[b].attention) return fail(p);
    // Nor is a reduction copied into a matmul's kernel (place: a matmul's kernel holds no other).
    if (is_reduction(n) && into_matmul_nest()) return fail(p);
    if (scan_group_ && (is_reduction(n) || is_scan(n))) return fail(p);
    p.recompute.push_back(b);
    p.delta += work(b, std::max(f, 1.0));
    for (const FusionRead& r : g_[b].reads)
      if (!read(p, g_[b].node, r, std::max(f, 1.0), budget)) return false;
    return true;
  }

  const FusionGraph& g_;
  const CostModel& cost_;
  const SearchState& s_;
  int slot_;
  size_t max_buffers_;
  int32_t target_;
  mutable bool scan_group_ = false;  // the node being placed is a scan (set by place)
  mutable int32_t placing_ = -1;     // the node being placed (set by place)
};

// Records a new edge producer group -> consumer group in the descendant sets of open groups.
void add_edge(SearchState& s, int32_t from, int32_t to) {
  std::vector<int32_t> reach;
  for (const OpenGroup& o : s.open)
    if (o.id == to) reach = o.desc;
  sorted_insert(reach, to);
  for (OpenGroup& o : s.open) {
    if (o.id != from && !sorted_contains(o.desc, from)) continue;
    for (int32_t x : reach) sorted_insert(o.desc, x);
  }
}

void apply(SearchState& s, const FusionGraph& g, int32_t n, int32_t step, const Placement& p,
           int max_blocks) {
  int slot = p.slot;
  if (slot < 0) {
    int32_t id = s.group_count();
    s.shape_of.push_back(-1);
    s.closed_at.push_back(INT_MAX);
    s.buffers.push_back(0);
    if (static_cast<int>(s.open.size()) >= max_blocks) {
      s.closed_at[static_cast<size_t>(s.open.front().id)] = step;
      s.open.erase(s.open.begin());
    }
    s.open.push_back(OpenGroup{.id = id,
                               .copies = {},
                               .inputs = {},
                               .desc = {},
                               .has_matmul = false,
                               .has_matmul_nest = false,
                               .has_reduce = false,
                               .has_scan = false,
                               .size = 0});
    slot = static_cast<int>(s.open.size()) - 1;
  }
  OpenGroup& target = s.open[static_cast<size_t>(slot)];
  int32_t tid = target.id;
  auto at = [](auto& v, int32_t i) -> auto& {
    return v[static_cast<size_t>(i)];
  };
  at(s.group_of, n) = tid;
  target.size += 1 + static_cast<int32_t>(p.recompute.size());
  if (g[n].node->op == ir::Op::Matmul) target.has_matmul = true;
  if (g[n].node->op == ir::Op::Matmul && !g[n].attention) target.has_matmul_nest = true;
  if (is_scan(g[n].node)) target.has_scan = true;
  if (is_reduction(g[n].node)) target.has_reduce = true;
  at(s.factor, n) = 1;
  s.signature ^= mix(1, static_cast<uint64_t>(n), static_cast<uint64_t>(tid));
  if (g[n].forced) {
    at(s.materialized, n) = 1;
    s.signature ^= mix(2, static_cast<uint64_t>(n), 0);
    ++at(s.buffers, tid);
  }
  for (const auto& [group, node] : p.shapes)
    if (at(s.shape_of, group) < 0) at(s.shape_of, group) = node;
  for (int32_t b : p.materialize) {
    at(s.materialized, b) = 1;
    s.signature ^= mix(2, static_cast<uint64_t>(b), 0);
    ++at(s.buffers, at(s.group_of, b));
  }
  for (int32_t c : p.recompute) {
    if (is_reduction(g[c].node)) target.has_reduce = true;
    sorted_insert(target.copies, c);
    s.copies.push_back({tid, c});
    s.signature ^= mix(3, static_cast<uint64_t>(c), static_cast<uint64_t>(tid));
  }
  for (const auto& [q, f] : p.factors) at(s.factor, q) = f;
  for (int32_t b : p.new_inputs) sorted_insert(target.inputs, b);
  at(s.buffers, tid) += static_cast<int32_t>(p.new_inputs.size());
  for (int32_t b : p.new_inputs)
    if (g[b].role == Role::Placed) add_edge(s, at(s.group_of, b), tid);
  s.cost += p.delta;
}

struct Candidate {
  size_t parent;
  Placement placement;
  double cost;
  uint64_t signature;
};

uint64_t candidate_signature(const SearchState& s, const FusionGraph& g, int32_t n,
                             const Placement& p) {
  int32_t tid = p.slot >= 0 ? s.open[static_cast<size_t>(p.slot)].id : s.group_count();
  uint64_t sig = s.signature ^ mix(1, static_cast<uint64_t>(n), static_cast<uint64_t>(tid));
  if (g[n].forced) sig ^= mix(2, static_cast<uint64_t>(n), 0);  // as apply() does
  for (int32_t b : p.materialize) sig ^= mix(2, static_cast<uint64_t>(b), 0);
  for (int32_t c : p.recompute) sig ^= mix(3, static_cast<uint64_t>(c), static_cast<uint64_t>(tid));
  return sig;
}

std::vector<Candidate> expand(const std::vector<SearchState>& beam, const FusionGraph& g,
                              const CostModel& cost, int32_t n, size_t max_buffers) {
  std::vector<Candidate> out;
  for (size_t i = 0; i < beam.size(); ++i) {
    const SearchState& s = beam[i];
    for (int slot = 0; slot <= static_cast<int>(s.open.size()); ++slot) {
      int target = slot == static_cast<int>(s.open.size()) ? -1 : slot;
      Placement p = Planner(g, cost, s, target, max_buffers).place(n);
      if (!p.ok) continue;
      double total = s.cost + p.delta;
      uint64_t sig = candidate_signature(s, g, n, p);
      out.push_back(Candidate{i, std::move(p), total, sig});
    }
  }
  // Stable: equal costs keep the order of generation (parent rank, then open-group age). Costs
  // are compared at float precision: two placements of equal work (an elementwise op at the end
  // of one kernel or at the start of the next) sum the same terms in another order, and their
  // last-bit difference, which falls either way as the sizes change, must not pick between them.
  // Otherwise one graph at batch 6 and at batch 7 groups differently, and the kernels of the two
  // sizes never share a dynamic form (docs/dynamic-shapes.md).
  std::stable_sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    return static_cast<float>(a.cost) < static_cast<float>(b.cost);
  });
  return out;
}

}  // namespace

std::vector<SearchState> beam_search(const FusionGraph& g, const CostModel& cost,
                                     SearchOptions options) {
  KILN_CHECK(options.max_blocks >= 1 && options.beam_width >= 1)
      << "beam search needs max_blocks >= 1 and beam_width >= 1";
  size_t count = g.nodes().size();
  SearchState init;
  init.group_of.assign(count, -1);
  init.materialized.assign(count, 0);
  init.factor.assign(count, 0);
  std::vector<SearchState> beam;
  beam.push_back(std::move(init));
  for (size_t i = 0; i < count; ++i) {
    auto n = static_cast<int32_t>(i);
    if (g[n].role != Role::Placed) continue;
    std::vector<Candidate> cands = expand(beam, g, cost, n, options.max_buffers);
    KILN_CHECK(!cands.empty()) << "beam fuser: no placement for node %" << g[n].node->id;
    std::vector<const Candidate*> chosen;
    std::vector<uint64_t> seen;
    for (const Candidate& c : cands) {
      if (chosen.size() == static_cast<size_t>(options.beam_width)) break;
      if (std::find(seen.begin(), seen.end(), c.signature) != seen.end()) continue;
      seen.push_back(c.signature);
      chosen.push_back(&c);
    }
    // A parent's state moves into its last surviving child instead of being copied.
    std::vector<size_t> uses(beam.size(), 0);
    for (const Candidate* c : chosen) ++uses[c->parent];
    std::vector<SearchState> next;
    next.reserve(chosen.size());
    for (const Candidate* c : chosen) {
      SearchState s = --uses[c->parent] == 0 ? std::move(beam[c->parent]) : beam[c->parent];
      apply(s, g, n, n, c->placement, options.max_blocks);
      next.push_back(std::move(s));
    }
    beam = std::move(next);
  }
  return beam;
}

}  // namespace kiln::passes
