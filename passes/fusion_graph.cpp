// The beam fuser's static view of the live graph: roles, reads and forced buffers.
#include "passes/fusion_graph.h"

#include <set>
#include <unordered_set>

#include "passes/fusion_reads.h"

namespace kiln::passes {

namespace {

Role role_of(const ir::Node* n, const std::unordered_set<const ir::Node*>& outputs) {
  if (n->op == ir::Op::Input) return Role::Input;
  ir::OpKind kind = ir::op_kind(n->op);
  bool view_or_source = ir::is_view(n->op) || kind == ir::OpKind::Source;
  return view_or_source && !outputs.contains(n) ? Role::Inlined : Role::Placed;
}

}  // namespace

FusionGraph::FusionGraph(const Outputs& outputs) {
  std::unordered_set<const ir::Node*> outs(outputs.begin(), outputs.end());
  std::vector<const ir::Node*> live = ir::topo_order(outputs);
  nodes_.reserve(live.size());
  for (const ir::Node* n : live) {
    index_.emplace(n, static_cast<int32_t>(nodes_.size()));
    FusionNode fn;
    fn.node = n;
    fn.role = role_of(n, outs);
    nodes_.push_back(std::move(fn));
  }
  auto stop = [&](const ir::Node* m) { return nodes_[index_.at(m)].role != Role::Inlined; };
  // The distinct views through which each placed value is read, by view id (ordered).
  std::vector<std::set<uint32_t>> views(nodes_.size());
  for (FusionNode& fn : nodes_) {
    fn.flops = node_flops(fn.node);
    fn.bytes = node_bytes(fn.node);
    if (fn.role != Role::Placed) continue;
    fn.forced = outs.contains(fn.node);
    // A placed movement op (a graph output) is itself the view its operands are read through.
    bool is_view = ir::is_view(fn.node->op);
    for (const ValueRead& r : collect_reads(fn.node, stop)) {
      int32_t b = index_.at(r.base);
      fn.reads.push_back({b, r.reader, r.extra, !is_view && r.view == r.base});
      FusionNode& base = nodes_[static_cast<size_t>(b)];
      if (base.role != Role::Placed || ir::op_kind(base.node->op) == ir::OpKind::Source) continue;
      views[static_cast<size_t>(b)].insert(is_view ? fn.node->id : r.view->id);
      if (fn.node->op == ir::Op::Matmul) base.forced = true;
    }
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (views[i].size() < 2) continue;
    nodes_[i].multi_view = true;
    nodes_[i].forced = true;
  }
}

}  // namespace kiln::passes
