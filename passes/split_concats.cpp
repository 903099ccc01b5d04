// Wide concats as trees of narrow ones (passes.h: split_wide_concats).
#include <algorithm>
#include <vector>

#include "passes/passes.h"
#include "passes/rewrite.h"

namespace kiln::passes {

namespace {

using ir::AttrKey;
using ir::Node;
using ir::Op;

// One concat of `pieces` along `axis` (a single piece is itself).
const Node* concat_of(ir::Graph& g, const Node* like, const std::vector<const Node*>& pieces,
                      size_t axis) {
  if (pieces.size() == 1) return pieces[0];
  ir::Shape shape = like->shape;
  shape[axis] = 0;
  for (const Node* p : pieces) shape[axis] += p->shape[axis];
  return g.make(Op::Concat, like->dtype, std::move(shape), pieces, like->attrs);
}

}  // namespace

bool is_written_concat_piece(const Node* reader, const Node* piece) {
  return reader->op == Op::Concat && piece->op == Op::Concat &&
         reader->attrs.i(AttrKey::axis) == piece->attrs.i(AttrKey::axis) &&
         reader->inputs.size() - 1 + piece->inputs.size() > kConcatFanIn;
}

void add_written_concat_pieces(const std::vector<const Node*>& live,
                               std::unordered_set<const Node*>& written) {
  for (const Node* n : live)
    for (const Node* in : n->inputs)
      if (is_written_concat_piece(n, in)) written.insert(in);
}

Outputs split_wide_concats(ir::Graph& g, const Outputs& outputs) {
  return rewrite_bottom_up(g, outputs, [](ir::Graph& gr, const Node* n) {
    if (n->op != Op::Concat || n->inputs.size() <= kConcatFanIn) return n;
    const auto axis = static_cast<size_t>(n->attrs.i(AttrKey::axis));
    std::vector<const Node*> level = n->inputs;
    while (level.size() > kConcatFanIn) {
      std::vector<const Node*> next;
      for (size_t i = 0; i < level.size(); i += kConcatFanIn) {
        const size_t end = std::min(level.size(), i + kConcatFanIn);
        next.push_back(concat_of(gr, n,
                                 {level.begin() + static_cast<std::ptrdiff_t>(i),
                                  level.begin() + static_cast<std::ptrdiff_t>(end)},
                                 axis));
      }
      level = std::move(next);
    }
    return concat_of(gr, n, level, axis);
  });
}

}  // namespace kiln::passes
