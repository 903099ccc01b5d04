// The beam-search fuser (DESIGN.md §5): search (passes/beam_search.cpp), then turn the cheapest
// assignment into ordered groups with their costs and, for every edge between two groups, why.
#include <algorithm>
#include <array>
#include <functional>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>

#include "passes/beam_search.h"
#include "passes/cost_model.h"
#include "passes/fuser.h"
#include "kiln/error.h"

namespace kiln::passes {

namespace {

using ir::Node;

// A graph edge producer -> reader that crosses into `group` from a buffer.
struct Boundary {
  int32_t producer;    // placed node read from its buffer
  const Node* reader;  // the graph node with producer as a direct input
  int32_t owner;       // the placed node that reads it (the reader, or inlines the reader)
};

// One group as collect() finds it, with its cost: the beam's final states differ mostly in
// their last decisions, so most groups recur in all of them and are collected and priced once.
struct PricedGroup {
  std::vector<int32_t> key;  // per member (sorted): 2 * node, plus 1 where the group writes it
  FusedGroup group;
  std::vector<Boundary> edges;
  GroupCost cost;
};
using GroupCache = std::unordered_map<uint64_t, std::vector<PricedGroup>>;

class PlanBuilder {
 public:
  PlanBuilder(const FusionGraph& g, const SearchState& s, const CostModel& cost, size_t max_buffers)
      : g_(g),
        s_(s),
        cost_(cost),
        max_buffers_(max_buffers),
        members_(static_cast<size_t>(s.group_count())) {
    for (size_t i = 0; i < s.group_of.size(); ++i)
      if (s.group_of[i] >= 0)
        members_[static_cast<size_t>(s.group_of[i])].push_back(static_cast<int32_t>(i));
    for (const auto& [group, node] : s.copies) members_[static_cast<size_t>(group)].push_back(node);
    for (auto& m : members_) std::sort(m.begin(), m.end());
  }

  // Collects the groups and prices them: the sum a search state is judged by. A group equal to
  // one in `cache` (same members, same ones written) is taken from there.
  double price(GroupCache& cache) {
    groups_.resize(members_.size());
    edges_.resize(members_.size());
    std::vector<GroupCost> costs(members_.size());
    std::vector<int32_t> key;
    for (size_t gi = 0; gi < members_.size(); ++gi) {
      const auto group = static_cast<int32_t>(gi);
      key.clear();
      uint64_t hash = 0x9e3779b97f4a7c15ULL;
      for (int32_t n : members_[gi]) {
        const auto i = static_cast<size_t>(n);
        const bool written = s_.group_of[i] == group && s_.materialized[i];
        key.push_back(2 * n + (written ? 1 : 0));
        hash = (hash ^ static_cast<uint64_t>(key.back())) * 0x100000001b3ULL;
      }
      std::vector<PricedGroup>& bucket = cache[hash];
      auto same = std::find_if(bucket.begin(), bucket.end(),
                               [&](const PricedGroup& p) { return p.key == key; });
      if (same == bucket.end()) {
        PricedGroup priced{key, {}, {}, {}};
        priced.group = collect(group, priced.edges);
        if (!priced.group.outputs.empty()) priced.cost = cost_.estimate(priced.group);
        bucket.push_back(std::move(priced));
        same = bucket.end() - 1;
      }
      groups_[gi] = same->group;
      edges_[gi] = same->edges;
      costs[gi] = same->cost;
    }
    order_ = group_order(groups_);
    for (int32_t gi : order_) {
      costs_.push_back(costs[static_cast<size_t>(gi)]);
      total_ += costs_.back().seconds;
    }
    return total_;
  }
  double total() const { return total_; }

  // The plan of the priced state, with a reason for every edge between two groups. Only the
  // winning state's plan is built: the reasons cost more than the pricing.
  FusionPlan build() && {
    FusionPlan plan;
    const std::vector<std::string> reasons = edge_reasons();
    size_t next = 0;
    std::set<std::pair<uint32_t, uint32_t>> explained;
    for (int32_t gi : order_)
      for (const Boundary& e : edges_[static_cast<size_t>(gi)]) {
        const std::string& why = reasons[next++];
        if (!explained.insert({g_[e.producer].node->id, e.reader->id}).second) continue;
        plan.reasons.push_back(FusionReason{g_[e.producer].node, e.reader, why});
      }
    plan.costs = std::move(costs_);
    plan.total_seconds = total_;
    for (int32_t gi : order_) plan.groups.push_back(std::move(groups_[static_cast<size_t>(gi)]));
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

  // An edge whose reason depends on the other paths between its two groups.
  struct Query {
    size_t index;       // its reason's index in edge_reasons()
    const Boundary* e;
    int32_t from;       // the producer's group
    int32_t group;      // the reader's group
  };

  // One reason per boundary edge, in the order build() visits them (groups in order_, each
  // group's edges in collect order).
  std::vector<std::string> edge_reasons() const {
    std::vector<std::string> out;
    std::vector<Query> open;
    for (int32_t gi : order_)
      for (const Boundary& e : edges_[static_cast<size_t>(gi)]) {
        std::string why = direct_reason(gi, e);
        if (why.empty())
          open.push_back({out.size(), &e, s_.group_of[static_cast<size_t>(e.producer)], gi});
        out.push_back(std::move(why));
      }
    const std::vector<bool> cycle = other_paths(open);
    for (size_t q = 0; q < open.size(); ++q) {
      const Query& query = open[q];
      auto f = static_cast<size_t>(query.from);
      out[query.index] = cycle[q]                            ? "would create a cycle"
                         : s_.closed_at[f] <= query.e->owner ? "max_blocks reached"
                         : members_[f].size() >= static_cast<size_t>(kMaxGroupNodes)
                             ? "kernel size limit"
                         : binds(groups_[f]) >= max_buffers_ ? "kernel buffer limit"
                                                             : "cheaper to materialize";
    }
    return out;
  }

  // Why `e.owner` (in `group`) reads its producer from a buffer, when the edge alone tells;
  // empty when it depends on the other paths between the two groups.
  std::string direct_reason(int32_t group, const Boundary& e) const {
    const FusionNode& p = g_[e.producer];
    if (g_[e.owner].node->op == ir::Op::Matmul) return "matmul operand";
    if (p.node->op == ir::Op::TopKIndices) return "topk output (read from a buffer)";
    if (g_[e.owner].node->op == ir::Op::TopKIndices)
      return "topk operand (no reduction, matmul or scan inside a topk kernel)";
    if (ir::op_kind(p.node->op) == ir::OpKind::Scan) return "scan output (read from a buffer)";
    if (ir::op_kind(g_[e.owner].node->op) == ir::OpKind::Scan)
      return "scan operand (no reduction, matmul or scan inside a scan's kernel)";
    // Written because readers view it several ways; a direct reader sits with the viewers.
    if (p.multi_view) return "read through several views";
    int32_t from = s_.group_of[static_cast<size_t>(e.producer)];
    const FusedGroup& mine = groups_[static_cast<size_t>(group)];
    const FusedGroup& theirs = groups_[static_cast<size_t>(from)];
    // A matmul's kernel has the matmul's shape (beam_search.cpp, Planner::place).
    if (p.node->op == ir::Op::Matmul && !p.attention && mine.outputs[0]->shape != p.node->shape)
      return "matmul result read in another shape";
    if (mine.outputs[0]->shape != theirs.outputs[0]->shape) {
      // The consumer cannot join the producer's kernel; a value that need not be written could
      // still have been recomputed here, and the cost model preferred the buffer.
      return p.forced ? "shape mismatch" : "cheaper to materialize";
    }
    return "";
  }

  // For each query: does its group read, through another group, a value of `from` (so that
  // joining the two would make a cycle)? That is: is `from` an ancestor of a group the reader
  // reads from (a group is never its own ancestor). The producers asked about get bits, up to
  // kBatch at a time; one pass over the groups in order per batch tracks, for each group, which
  // of them it descends from. Memory stays linear in the number of groups.
  std::vector<bool> other_paths(const std::vector<Query>& queries) const {
    constexpr size_t kWords = 16, kBatch = kWords * 64;
    std::vector<bool> answer(queries.size(), false);
    std::vector<int32_t> bit_of(groups_.size(), -1);
    std::vector<int32_t> producers;  // each once, in first-asked order
    std::vector<bool> asked(groups_.size(), false);
    for (const Query& q : queries)
      if (!asked[static_cast<size_t>(q.from)]) {
        asked[static_cast<size_t>(q.from)] = true;
        producers.push_back(q.from);
      }
    // Each group's distinct source groups (graph inputs have none).
    std::vector<std::vector<int32_t>> sources(groups_.size());
    for (int32_t gi : order_) {
      std::vector<int32_t>& mine = sources[static_cast<size_t>(gi)];
      for (const Node* in : groups_[static_cast<size_t>(gi)].inputs)
        if (in->op != ir::Op::Input) mine.push_back(home(in));
      std::sort(mine.begin(), mine.end());
      mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
    }
    using Bits = std::array<uint64_t, kWords>;
    // Per group, of the batch's producers: those it reads through another group (`through`),
    // and all it descends from (`above`: `through` plus the sources themselves).
    std::vector<Bits> through(groups_.size()), above(groups_.size());
    for (size_t first = 0; first < producers.size(); first += kBatch) {
      const size_t last = std::min(producers.size(), first + kBatch);
      for (size_t i = first; i < last; ++i)
        bit_of[static_cast<size_t>(producers[i])] = static_cast<int32_t>(i - first);
      for (int32_t gi : order_) {
        Bits& ind = through[static_cast<size_t>(gi)];
        ind.fill(0);
        for (int32_t src : sources[static_cast<size_t>(gi)]) {
          const Bits& theirs = above[static_cast<size_t>(src)];
          for (size_t w = 0; w < kWords; ++w) ind[w] |= theirs[w];
        }
        Bits& all = above[static_cast<size_t>(gi)];
        all = ind;
        for (int32_t src : sources[static_cast<size_t>(gi)])
          if (int32_t bit = bit_of[static_cast<size_t>(src)]; bit >= 0)
            all[static_cast<size_t>(bit) / 64] |= uint64_t{1} << (static_cast<size_t>(bit) % 64);
      }
      for (size_t q = 0; q < queries.size(); ++q) {
        const int32_t bit = bit_of[static_cast<size_t>(queries[q].from)];
        if (bit < 0) continue;  // another batch's
        const Bits& ind = through[static_cast<size_t>(queries[q].group)];
        answer[q] = (ind[static_cast<size_t>(bit) / 64] >> (static_cast<size_t>(bit) % 64)) & 1;
      }
      for (size_t i = first; i < last; ++i) bit_of[static_cast<size_t>(producers[i])] = -1;
    }
    return answer;
  }

  static size_t binds(const FusedGroup& group) {
    return group.inputs.size() + group.outputs.size();
  }

  const FusionGraph& g_;
  const SearchState& s_;
  const CostModel& cost_;
  size_t max_buffers_;
  std::vector<std::vector<int32_t>> members_;  // per group: sorted node indices computed there
  mutable std::vector<uint32_t> seen_stamp_;    // collect(): per node, the walk that last saw it
  mutable uint32_t walks_ = 0;
  // Filled by price(): groups by id with their boundary edges, the order they run in, and the
  // costs in that order.
  std::vector<FusedGroup> groups_;
  std::vector<std::vector<Boundary>> edges_;
  std::vector<int32_t> order_;
  std::vector<GroupCost> costs_;
  double total_ = 0;
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
    // finished plans are priced exactly, and the cheapest wins: the first on a tie, compared at
    // float precision as the search compares (passes/beam_search.cpp, `expand`).
    std::vector<SearchState> states = beam_search(
        graph, cost_, {options_.max_blocks, options_.beam_width, options_.max_kernel_buffers});
    std::optional<PlanBuilder> best;
    GroupCache cache;
    for (const SearchState& s : states) {
      PlanBuilder candidate(graph, s, cost_, options_.max_kernel_buffers);
      const double total = candidate.price(cache);
      if (!best || static_cast<float>(total) < static_cast<float>(best->total()))
        best.emplace(std::move(candidate));
    }
    if (!best) return {};
    return std::move(*best).build();
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
      return make_beam_fuser(cost, BeamOptions{1, 1, beam.max_kernel_buffers});
    case FuserKind::first:
      return make_first_fuser();
    case FuserKind::none:
      return make_unfused();
  }
  return make_first_fuser();
}

}  // namespace kiln::passes
