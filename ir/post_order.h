// Depth-first, operands-first evaluation of a DAG on an explicit stack.
//
// Memoized recursive evaluators (code emitters, printers) recurse once per level of the graph they
// walk, so a deep chain overflows the native stack. Run through post_order, such an evaluator is
// first called on the operands (deepest first, in the order the recursion would reach them), so
// that its own recursion finds each operand already done and goes one level deep.
#pragma once

#include <utility>
#include <vector>

namespace kiln::ir {

// `operands(x, out)` fills `out` with what evaluating x reaches first; `done(x)` says x is already
// evaluated (memoized); `eval(x)` evaluates x and returns a value that converts to bool (false
// stops the walk). Returns eval(root), or the first failing eval's result.
template <class Node, class Operands, class Done, class Eval>
auto post_order(const Node* root, Operands&& operands, Done&& done, Eval&& eval)
    -> decltype(eval(root)) {
  if (done(root)) return eval(root);
  struct Frame {
    const Node* x;
    std::vector<const Node*> ops;
    size_t next = 0;
  };
  std::vector<Frame> stack(1, Frame{root, {}});
  operands(root, stack.back().ops);
  while (true) {
    Frame& f = stack.back();
    if (f.next < f.ops.size()) {
      const Node* c = f.ops[f.next++];
      if (!done(c)) {
        stack.push_back(Frame{c, {}});  // invalidates f
        operands(c, stack.back().ops);
      }
      continue;
    }
    auto v = eval(f.x);
    if (!v || stack.size() == 1) return v;
    stack.pop_back();
  }
}

// Pre-order over a DAG whose nodes list their operands in `args`: operands left to right, each
// node once (`seen` gains every node visited), on an explicit stack. `visit(x)` returns whether
// the walk goes on into x's operands.
template <class Node, class Seen, class Visit>
void pre_order(const Node* root, Seen& seen, Visit&& visit) {
  std::vector<const Node*> stack{root};
  while (!stack.empty()) {
    const Node* x = stack.back();
    stack.pop_back();
    if (!seen.insert(x).second) continue;
    if (visit(x)) stack.insert(stack.end(), x->args.rbegin(), x->args.rend());
  }
}

}  // namespace kiln::ir
