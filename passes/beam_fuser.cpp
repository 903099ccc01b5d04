// The beam-search fuser (DESIGN.md §5): search (passes/beam_search.cpp), then turn the cheapest
// assignment into ordered groups with their costs and, for every edge between two groups, why.
#include <algorithm>
#include <functional>
#include <queue>
#include <set>
#include <string>
#include <tuple>

#include "passes/beam_search.h"
#include "passes/cost_model.h"
#include "passes/fuser.h"
#include "support/error.h"

namespace kiln::passes {

namespace {

using ir::Node;

// A graph edge producer -> reader that crosses into `group` from a buffer.
struct Boundary {
  int32_t producer;    // placed node read from its buffer
  const Node* reader;  // the graph node with producer as a direct input
  int32_t owner;       // the placed node that reads it (the reader, or inlines the reader)
};

class PlanBuilder {
 public:
  PlanBuilder(const FusionGraph& g, const SearchState& s, const CostModel& cost)
      : g_(g), s_(s), cost_(cost), members_(static_cast<size_t>(s.group_count())) {
    for (size_t i = 0; i < s.group_of.size(); ++i)
      if (s.group_of[i] >= 0)
        members_[static_cast<size_t>(s.group_of[i])].push_back(static_cast<int32_t>(i));
    for (const auto& [group, node] : s.copies) members_[static_cast<size_t>(group)].push_back(node);
    for (auto& m : members_) std::sort(m.begin(), m.end());
  }

  FusionPlan build() {
    std::vector<FusedGroup> groups(members_.size());
    std::vector<std::vector<Boundary>> edges(members_.size());
    for (size_t gi = 0; gi < members_.size(); ++gi)
      groups[gi] = collect(static_cast<int32_t>(gi), edges[gi]);
    std::vector<int32_t> order = group_order(groups);
    FusionPlan plan;
    std::vector<std::vector<uint64_t>> anc = ancestors(groups, order);
    std::set<std::pair<uint32_t, uint32_t>> explained;
    for (int32_t gi : order) {
      auto i = static_cast<size_t>(gi);
      for (const Boundary& e : edges[i]) {
        if (!explained.insert({g_[e.producer].node->id, e.reader->id}).second) continue;
        plan.reasons.push_back(
            FusionReason{g_[e.producer].node, e.reader, reason(gi, e, groups, anc)});
      }
      plan.costs.push_back(cost_.estimate(groups[i]));
      plan.total_seconds += plan.costs.back().seconds;
      plan.groups.push_back(groups[i]);  // copied: reasons still read earlier groups
    }
    return plan;
  }

 private:
  bool member(int32_t group, int32_t node) const {
    const std::vector<int32_t>& m = members_[static_cast<size_t>(group)];
    return std::binary_search(m.begin(), m.end(), node);
  }

  bool is_buffer(int32_t group, int32_t node) const {
    Role role = g_[node].role;
    return role == Role::Input || (role == Role::Placed && !member(group, node));
  }

  // The walk lowering does: depth-first from the outputs, left to right; buffers in first use.
  FusedGroup collect(int32_t group, std::vector<Boundary>& edges) const {
    FusedGroup out;
    for (int32_t n : members_[static_cast<size_t>(group)])
      if (s_.group_of[static_cast<size_t>(n)] == group && s_.materialized[static_cast<size_t>(n)])
        out.outputs.push_back(g_[n].node);
    if (out.outputs.empty()) return out;  // every value it computed is recomputed elsewhere
    // Visited marks stamped with this walk's number: a cleared array per group would cost the
    // graph's size for each of its (possibly thousands of) groups.
    if (seen_stamp_.empty()) seen_stamp_.assign(g_.nodes().size(), 0);
    const uint32_t stamp = ++walks_;
    auto seen = [&](int32_t i) -> bool { return seen_stamp_[static_cast<size_t>(i)] == stamp; };
    auto mark = [&](int32_t i) { seen_stamp_[static_cast<size_t>(i)] = stamp; };
    struct Frame {
      int32_t node;
      size_t next;
      int32_t owner;
    };
    std::vector<Frame> stack;
    for (const Node* o : out.outputs) {
      int32_t oi = g_.index_of(o);
      if (seen(oi)) continue;
      mark(oi);
      out.nodes.push_back(o);
      stack.push_back({oi, 0, oi});
      while (!stack.empty()) {
        Frame& f = stack.back();
        const Node* n = g_[f.node].node;
        if (f.next == n->inputs.size()) {
          stack.pop_back();
          continue;
        }
        int32_t in = g_.index_of(n->inputs[f.next++]);
        int32_t owner = f.owner;
        if (is_buffer(group, in)) {
          if (g_[in].role == Role::Placed) edges.push_back({in, n, owner});
          if (!seen(in)) out.inputs.push_back(g_[in].node);
        } else if (!seen(in)) {
          out.nodes.push_back(g_[in].node);
          stack.push_back({in, 0, g_[in].role == Role::Placed ? in : owner});
        }
        mark(in);
      }
    }
    std::sort(out.nodes.begin(), out.nodes.end(),
              [](const Node* a, const Node* b) { return a->id < b->id; });
    return out;
  }

  int32_t home(const Node* n) const { return s_.group_of[static_cast<size_t>(g_.index_of(n))]; }

  // Kahn's algorithm, the lowest group id first among those ready: deterministic.
  std::vector<int32_t> group_order(const std::vector<FusedGroup>& groups) const {
    size_t count = groups.size();
    std::vector<int> pending(count, 0);
    std::vector<std::vector<int32_t>> readers(count);
    for (size_t gi = 0; gi < count; ++gi) {
      std::set<int32_t> deps;
      for (const Node* in : groups[gi].inputs)
        if (in->op != ir::Op::Input) deps.insert(home(in));
      for (int32_t d : deps) readers[static_cast<size_t>(d)].push_back(static_cast<int32_t>(gi));
      pending[gi] = static_cast<int>(deps.size());
    }
    std::priority_queue<int32_t, std::vector<int32_t>, std::greater<>> ready;
    for (size_t gi = 0; gi < count; ++gi)
      if (pending[gi] == 0) ready.push(static_cast<int32_t>(gi));
    std::vector<int32_t> order;
    while (!ready.empty()) {
      int32_t gi = ready.top();
      ready.pop();
      if (!groups[static_cast<size_t>(gi)].outputs.empty()) order.push_back(gi);
      for (int32_t r : readers[static_cast<size_t>(gi)])
        if (--pending[static_cast<size_t>(r)] == 0) ready.push(r);
    }
    KILN_CHECK(std::all_of(pending.begin(), pending.end(), [](int p) { return p == 0; }))
        << "beam fuser: the groups depend on each other in a cycle";
    return order;
  }

  // anc[g]: bitset of the groups g reads from, directly or transitively.
  std::vector<std::vector<uint64_t>> ancestors(const std::vector<FusedGroup>& groups,
                                               const std::vector<int32_t>& order) const {
    size_t words = (groups.size() + 63) / 64;
    std::vector<std::vector<uint64_t>> anc(groups.size(), std::vector<uint64_t>(words, 0));
    for (int32_t gi : order) {
      auto& mine = anc[static_cast<size_t>(gi)];
      for (const Node* in : groups[static_cast<size_t>(gi)].inputs) {
        if (in->op == ir::Op::Input) continue;
        auto d = static_cast<size_t>(home(in));
        mine[d / 64] |= uint64_t{1} << (d % 64);
        for (size_t w = 0; w < words; ++w) mine[w] |= anc[d][w];
      }
    }
    return anc;
  }

  // Why `e.owner` (in `group`) reads its producer from a buffer instead of computing it.
  std::string reason(int32_t group, const Boundary& e, const std::vector<FusedGroup>& groups,
                     const std::vector<std::vector<uint64_t>>& anc) const {
    const FusionNode& p = g_[e.producer];
    if (g_[e.owner].node->op == ir::Op::Matmul) return "matmul operand";
    // Written because readers view it several ways; a direct reader sits with the viewers.
    if (p.multi_view) return "read through several views";
    int32_t from = s_.group_of[static_cast<size_t>(e.producer)];
    const FusedGroup& mine = groups[static_cast<size_t>(group)];
    const FusedGroup& theirs = groups[static_cast<size_t>(from)];
    if (mine.outputs[0]->shape != theirs.outputs[0]->shape) {
      // The consumer cannot join the producer's kernel; a value that need not be written could
      // still have been recomputed here, and the cost model preferred the buffer.
      return p.forced ? "shape mismatch" : "cheaper to materialize";
    }
    auto f = static_cast<size_t>(from);
    for (const Node* in : mine.inputs) {
      if (in->op == ir::Op::Input || home(in) == from) continue;
      const auto& a = anc[static_cast<size_t>(home(in))];
      if ((a[f / 64] >> (f % 64)) & 1) return "would create a cycle";
    }
    if (s_.closed_at[f] <= e.owner) return "max_blocks reached";
    if (members_[f].size() >= static_cast<size_t>(kMaxGroupNodes)) return "kernel size limit";
    return "cheaper to materialize";
  }

  const FusionGraph& g_;
  const SearchState& s_;
  const CostModel& cost_;
  std::vector<std::vector<int32_t>> members_;  // per group: sorted node indices computed there
  mutable std::vector<uint32_t> seen_stamp_;    // collect(): per node, the walk that last saw it
  mutable uint32_t walks_ = 0;
};

class BeamFuser final : public Fuser {
 public:
  BeamFuser(const CostModel& cost, BeamOptions options)
      : cost_(cost),
        options_(options),
        name_(options.max_blocks == 1 && options.beam_width == 1 ? "greedy" : "beam") {}
  std::string_view name() const override { return name_; }

  FusionPlan fuse(const Outputs& outputs) const override {
    FusionGraph graph(outputs);
    // The running estimate of the search approximates what a value's readers will need; the
    // finished plans are priced exactly, and the cheapest wins (the first on a tie).
    FusionPlan best;
    bool first = true;
    for (const SearchState& s :
         beam_search(graph, cost_, {options_.max_blocks, options_.beam_width})) {
      FusionPlan plan = PlanBuilder(graph, s, cost_).build();
      if (first || plan.total_seconds < best.total_seconds) best = std::move(plan);
      first = false;
    }
    return best;
  }

 private:
  const CostModel& cost_;
  BeamOptions options_;
  std::string name_;
};

}  // namespace

std::unique_ptr<Fuser> make_beam_fuser(const CostModel& cost, BeamOptions options) {
  return std::make_unique<BeamFuser>(cost, options);
}

std::string_view fuser_kind_name(FuserKind kind) {
  switch (kind) {
    case FuserKind::beam:
      return "beam";
    case FuserKind::greedy:
      return "greedy";
    case FuserKind::first:
      return "first";
    case FuserKind::none:
      return "none";
  }
  return "?";
}

std::optional<FuserKind> parse_fuser_kind(std::string_view name) {
  for (FuserKind k : {FuserKind::beam, FuserKind::greedy, FuserKind::first, FuserKind::none})
    if (fuser_kind_name(k) == name) return k;
  return std::nullopt;
}

std::unique_ptr<Fuser> make_fuser(FuserKind kind, const CostModel& cost, BeamOptions beam) {
  switch (kind) {
    case FuserKind::beam:
      return make_beam_fuser(cost, beam);
    case FuserKind::greedy:
      return make_beam_fuser(cost, BeamOptions{1, 1});
    case FuserKind::first:
      return make_first_fuser();
    case FuserKind::none:
      return make_unfused();
  }
  return make_first_fuser();
}

}  // namespace kiln::passes
