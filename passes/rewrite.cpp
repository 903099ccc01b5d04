// The bottom-up graph rewriter: one traversal, memoized, re-interning changed nodes.
#include "passes/rewrite.h"

#include <unordered_map>

namespace kiln::passes {

Outputs rewrite_bottom_up(ir::Graph& g, const Outputs& outputs, const RewriteRule& rule) {
  std::unordered_map<const ir::Node*, const ir::Node*> replaced;
  for (const ir::Node* n : ir::topo_order(outputs)) {
    std::vector<const ir::Node*> inputs;
    inputs.reserve(n->inputs.size());
    bool changed = false;
    for (const ir::Node* in : n->inputs) {
      const ir::Node* r = replaced.at(in);
      changed |= r != in;
      inputs.push_back(r);
    }
    const ir::Node* cur =
        changed ? g.make(n->op, n->dtype, n->shape, std::move(inputs), n->attrs) : n;
    replaced[n] = rule(g, cur);
  }
  Outputs result;
  result.reserve(outputs.size());
  for (const ir::Node* o : outputs) result.push_back(replaced.at(o));
  return result == outputs ? outputs : result;
}

const ir::Node* make_full(ir::Graph& g, ir::DType dtype, const ir::Shape& shape,
                          ir::AttrValue value) {
  // An i64 full holds an integer (ir::Builder::full), exact past 2^53.
  if (const double* d = std::get_if<double>(&value); d && dtype == ir::DType::i64)
    value = static_cast<int64_t>(*d);
  return g.make(
      ir::Op::Full, dtype, shape, {},
      ir::Attrs{
          {ir::AttrKey::shape, shape}, {ir::AttrKey::value, value}, {ir::AttrKey::dtype, dtype}});
}

}  // namespace kiln::passes
