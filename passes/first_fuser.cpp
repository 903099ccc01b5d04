// The first fuser: materialize outputs, reductions and matmuls; inline everything else into
// readers.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "passes/fuser.h"

namespace kiln::passes {

namespace {

using ir::Node;
using ir::Op;
using NodeSet = std::unordered_set<const Node*>;

// Follows movement ops down to the value they view.
const Node* view_base(const Node* n) {
  while (ir::is_movement(n->op) && n->inputs.size() == 1) n = n->inputs[0];  // not concat
  return n;
}

bool is_buffer(const Node* n, const NodeSet& materialized) {
  return n->op == Op::Input || materialized.count(n) != 0;
}

bool is_single_view(const Node* n) { return ir::is_movement(n->op) && n->inputs.size() == 1; }

// Computed values read through two or more different views (e.g. the eight rolls of a stencil).
// Inlined, such a value is recomputed once per view, and a chain of such steps multiplies:
// 100 steps of a 9-point stencil would inline 9^100 copies. Materializing it costs one write.
void add_multi_view_values(const std::vector<const Node*>& live, NodeSet& m) {
  std::unordered_map<const Node*, NodeSet> views;  // value -> the nodes through which it is read
  for (const Node* reader : live) {
    if (is_single_view(reader)) continue;
    for (const Node* in : reader->inputs) {
      const Node* base = view_base(in);
      ir::OpKind kind = ir::op_kind(base->op);
      if (kind == ir::OpKind::Input || kind == ir::OpKind::Source) continue;  // free to re-read
      views[base].insert(in);
    }
  }
  for (const Node* n : live) {
    auto it = views.find(n);
    if (it != views.end() && it->second.size() >= 2)
      m.insert(n);
  }
}

// Materialized nodes: graph outputs, reductions, matmuls, scans, scatters, values read through
// several views (add_multi_view_values), inner concats of wide concats, and matmul operands that
// are not pure views of a buffer (a matmul reads each operand element many times, so recomputing an
// elementwise operand per read would multiply its cost by the other matrix's extent).
NodeSet choose_materialized(const Outputs& outputs, const std::vector<const Node*>& live) {
  NodeSet m;
  add_multi_view_values(live, m);
  add_written_concat_pieces(live, m);
  for (const Node* o : outputs)
    if (o->op != Op::Input) m.insert(o);
  for (const Node* n : live)
    if (ir::is_reduce(n->op) || n->op == Op::Matmul || ir::op_kind(n->op) == ir::OpKind::Scan ||
        n->op == Op::ScatterElements)
      m.insert(n);
  // Matmuls in topological order: an operand materialized for an earlier matmul is a buffer
  // for views of it read by later ones.
  for (const Node* n : live) {
    if (n->op != Op::Matmul) continue;
    for (const Node* operand : n->inputs)
      if (!is_buffer(view_base(operand), m)) m.insert(operand);
  }
  return m;
}

// Collects what the group rooted at `root` inlines, and the buffers it reads in first-use order:
// the order in which a left-to-right depth-first walk (the walk lowering does) reaches them.
FusedGroup collect_group(const Node* root, const NodeSet& materialized) {
  FusedGroup group;
  group.outputs = {root};
  NodeSet seen{root};
  std::vector<std::pair<const Node*, size_t>> stack{{root, 0}};
  group.nodes.push_back(root);
  while (!stack.empty()) {
    auto& [n, next] = stack.back();
    if (next == n->inputs.size()) {
      stack.pop_back();
      continue;
    }
    const Node* in = n->inputs[next++];
    if (!seen.insert(in).second) continue;
    if (is_buffer(in, materialized)) {
      group.inputs.push_back(in);
    } else {
      group.nodes.push_back(in);
      stack.push_back({in, 0});
    }
  }
  std::sort(group.nodes.begin(), group.nodes.end(),
            [](const Node* a, const Node* b) { return a->id < b->id; });
  return group;
}

// Every computed node (not an input, source or view) written by its own kernel, and the inner
// concats of wide concats.
NodeSet materialize_all(const Outputs& outputs, const std::vector<const Node*>& live) {
  NodeSet m;
  add_written_concat_pieces(live, m);
  for (const Node* o : outputs)
    if (o->op != Op::Input) m.insert(o);
  for (const Node* n : live) {
    ir::OpKind kind = ir::op_kind(n->op);
    if (kind != ir::OpKind::Input && kind != ir::OpKind::Source && !ir::is_view(n->op)) m.insert(n);
  }
  return m;
}

class FirstFuser final : public Fuser {
 public:
  explicit FirstFuser(bool fuse) : fuse_(fuse) {}
  std::string_view name() const override { return fuse_ ? "first" : "unfused"; }

  FusionPlan fuse(const Outputs& outputs) const override {
    std::vector<const Node*> live = ir::topo_order(outputs);
    NodeSet materialized =
        fuse_ ? choose_materialized(outputs, live) : materialize_all(outputs, live);
    FusionPlan plan;
    for (const Node* n : live)  // by id: every group's inputs come from earlier groups
      if (materialized.count(n)) plan.groups.push_back(collect_group(n, materialized));
    return plan;
  }

 private:
  bool fuse_;
};

}  // namespace

std::unique_ptr<Fuser> make_first_fuser() { return std::make_unique<FirstFuser>(true); }

std::unique_ptr<Fuser> make_unfused() { return std::make_unique<FirstFuser>(false); }

}  // namespace kiln::passes
