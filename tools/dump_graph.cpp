// build_dump_graph: one box per op per kernel that computes it, arrows along operands.
#include "tools/dump_graph.h"

#include <fmt/format.h>

#include <map>
#include <set>
#include <unordered_map>

namespace kiln::tools {

namespace {

class GraphBuilder {
 public:
  GraphBuilder(const runtime::ValueNamer& namer, DumpGraph& out) : namer_(namer), out_(out) {}

  int add_op(const ir::Node* n, int kernel, bool output) {
    std::string id = fmt::format("k{}_n{}", kernel, n->id);
    return add(n, std::move(id), std::string(ir::op_name(n->op)), kernel, output);
  }
  int input(const ir::Node* n) {
    auto it = inputs_.find(n);
    if (it != inputs_.end()) return it->second;
    return inputs_[n] = add(n, fmt::format("in{}", n->id), "input", -1, false);
  }
  void edge(int from, int to, bool crosses, std::string reason) {
    if (edges_.emplace(from, to).second) out_.edges.push_back({from, to, std::move(reason), crosses});
  }

 private:
  int add(const ir::Node* n, std::string id, std::string op, int kernel, bool output) {
    out_.nodes.push_back({std::move(id), namer_(n), std::move(op),
                          fmt::format("{}{}", ir::dtype_name(n->dtype), ir::shape_str(n->shape)),
                          kernel, output});
    return static_cast<int>(out_.nodes.size()) - 1;
  }
  const runtime::ValueNamer& namer_;
  DumpGraph& out_;
  std::unordered_map<const ir::Node*, int> inputs_;
  std::set<std::pair<int, int>> edges_;
};

}  // namespace

DumpGraph build_dump_graph(const runtime::Plan& plan, const runtime::ValueNamer& namer,
                           const passes::CostModel& model) {
  const passes::FusionPlan& fusion = plan.fusion;
  DumpGraph out;
  runtime::PlanCosts costs = runtime::plan_costs(plan, model);
  out.total_seconds = costs.total_seconds;
  std::map<std::pair<uint32_t, uint32_t>, std::string> reasons;
  for (const passes::FusionReason& r : runtime::boundary_reasons(fusion)) {
    std::string estimates = runtime::boundary_estimates(r, fusion, model, namer);
    reasons.emplace(std::pair{r.producer->id, r.consumer->id},
                    estimates.empty() ? r.reason : r.reason + " (" + estimates + ")");
  }

  GraphBuilder b(namer, out);
  // Box of each node in each kernel that computes it; the kernel writing a value owns its buffer.
  std::vector<std::unordered_map<const ir::Node*, int>> box(fusion.groups.size());
  std::unordered_map<const ir::Node*, int> writer;
  for (size_t k = 0; k < fusion.groups.size(); ++k) {
    const passes::FusedGroup& group = fusion.groups[k];
    out.kernels.push_back({plan.steps[k].kernel.name, costs.groups[k]});
    std::set<const ir::Node*> outputs(group.outputs.begin(), group.outputs.end());
    for (const ir::Node* n : group.nodes)
      if (runtime::is_shown_op(n)) box[k][n] = b.add_op(n, static_cast<int>(k), outputs.contains(n));
    for (const ir::Node* n : group.outputs) writer.emplace(n, static_cast<int>(k));
  }
  for (size_t k = 0; k < fusion.groups.size(); ++k) {
    for (const ir::Node* n : fusion.groups[k].nodes) {
      if (!runtime::is_shown_op(n)) continue;
      int to = box[k].at(n);
      for (const ir::Node* p : n->inputs) {
        if (p->op == ir::Op::Input) {
          b.edge(b.input(p), to, true, "");
        } else if (auto inside = box[k].find(p); inside != box[k].end()) {
          b.edge(inside->second, to, false, "");
        } else if (auto w = writer.find(p); w != writer.end() && runtime::is_shown_op(p)) {
          auto r = reasons.find({p->id, n->id});
          b.edge(box[w->second].at(p), to, true, r != reasons.end() ? r->second : "");
        }
      }
    }
  }
  return out;
}

}  // namespace kiln::tools
