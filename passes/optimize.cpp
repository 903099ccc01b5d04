// Graph simplification: literal folding, common-subexpression elimination, DCE and the pipeline.
#include <cmath>
#include <utility>
#include <vector>

#include "passes/passes.h"
#include "passes/rewrite.h"
#include "passes/scalar_fold.h"

namespace kiln::passes {

namespace {

using ir::Node;
using ir::Op;

bool is_full(const Node* n) {
  return n->op == Op::Full;
}
bool is_full_of(const Node* n, double v) {
  return is_full(n) && n->attrs.f(ir::AttrKey::value) == v;
}
// A literal zero that is an identity of addition (`negative`: -0) or subtraction (+0) for its
// dtype: any zero for integers, the one with that sign for floats.
bool is_zero(const Node* n, bool negative) {
  if (!is_full_of(n, 0)) return false;
  return !ir::is_float(n->dtype) || std::signbit(n->attrs.f(ir::AttrKey::value)) == negative;
}
// Replacing `n` by `x` must keep the dtype and shape exactly: x*1 where the literal broadcasts
// x to a bigger shape is not an identity.
bool same_type(const Node* n, const Node* x) {
  return n->dtype == x->dtype && n->shape == x->shape;
}

// elementwise(full, full, ...) -> full(value computed now)
const Node* fold_all_literal(ir::Graph& g, const Node* n) {
  std::vector<double> values;
  for (const Node* in : n->inputs) {
    if (!is_full(in)) return n;
    values.push_back(in->attrs.f(ir::AttrKey::value));
  }
  ir::DType operand = n->inputs[n->op == Op::Where ? 1 : 0]->dtype;
  // Folding is in doubles: an i64 past 2^53, an operand or the result, stays for the kernel,
  // which computes it exactly.
  const auto exact = [](double v) { return std::fabs(v) <= 0x1p53; };
  for (size_t i = 0; i < values.size(); ++i)
    if (n->inputs[i]->dtype == ir::DType::i64 && !exact(values[i])) return n;
  std::optional<double> v = fold_elementwise(n->op, n->dtype, operand, values);
  if (v && n->dtype == ir::DType::i64 && !exact(*v)) return n;
  return v ? make_full(g, n->dtype, n->shape, *v) : n;
}

// Algebraic identities; returns n when none applies.
const Node* fold_identity(const Node* n) {
  auto keep = [&](const Node* x) { return same_type(n, x) ? x : n; };
  const Node* a = n->inputs.empty() ? nullptr : n->inputs[0];
  const Node* b = n->inputs.size() > 1 ? n->inputs[1] : nullptr;
  // x+(-0) -> x and x-(+0) -> x; for floats x+(+0) is not x: IEEE gives -0 + +0 = +0.
  if (n->op == Op::Add) {
    if (is_zero(b, /*negative=*/true)) return keep(a);
    if (is_zero(a, /*negative=*/true)) return keep(b);
  } else if (n->op == Op::Sub) {
    if (is_zero(b, /*negative=*/false)) return keep(a);
  } else if (n->op == Op::Mul) {  // x*1 -> x, 1*x -> x
    if (is_full_of(b, 1)) return keep(a);
    if (is_full_of(a, 1)) return keep(b);
  } else if (n->op == Op::Div) {  // x/1 -> x
    if (is_full_of(b, 1)) return keep(a);
  } else if (n->op == Op::Neg) {  // neg(neg x) -> x
    if (a->op == Op::Neg) return keep(a->inputs[0]);
  } else if (n->op == Op::Cast) {  // cast(x, to=dtype(x)) -> x
    return keep(a);
  } else if (n->op == Op::Where) {  // where(full c, x, y) -> x or y
    if (is_full(a)) return keep(a->attrs.f(ir::AttrKey::value) != 0 ? b : n->inputs[2]);
  }
  return n;
}

}  // namespace

Outputs fold_literals(ir::Graph& g, const Outputs& outputs) {
  return rewrite_bottom_up(g, outputs, [](ir::Graph& gr, const Node* n) {
    if (!ir::is_elementwise(n->op)) return n;
    const Node* folded = fold_all_literal(gr, n);
    return folded != n ? folded : fold_identity(n);
  });
}

Outputs eliminate_common_subexpressions(ir::Graph& g, const Outputs& outputs) {
  // rewrite_bottom_up re-interns every node whose inputs were merged; interning a node with the
  // same parts returns the existing one, which is the elimination itself.
  return rewrite_bottom_up(g, outputs, [](ir::Graph& gr, const Node* n) {
    return gr.make(n->op, n->dtype, n->shape, n->inputs, n->attrs);
  });
}

std::vector<const Node*> live_nodes(const Outputs& outputs) {
  return ir::topo_order(outputs);
}

Expected<Outputs> optimize_steps(ir::Graph& g, const Outputs& outputs,
                                 const OptimizeOptions& options) {
  // Each round only shrinks the graph, so a fixed point comes quickly; the cap guards the
  // invariant rather than a real graph.
  constexpr int kMaxRounds = 32;
  using Step = Outputs (*)(ir::Graph&, const Outputs&);
  const std::pair<std::string_view, Step> folds[] = {{"fold_literals", fold_literals},
                                                     {"fold_views", fold_views}};
  Outputs cur = outputs;
  auto run = [&](std::string_view name, Step step, Outputs& next) -> Expected<void> {
    next = step(g, next);
    return options.after_step ? options.after_step(name, next) : Expected<void>{};
  };
  for (int round = 0; round < kMaxRounds; ++round) {
    Outputs next = cur;
    if (options.fold)
      for (const auto& [name, step] : folds)
        if (auto ok = run(name, step, next); !ok) return std::unexpected(ok.error());
    if (auto ok = run("cse", eliminate_common_subexpressions, next); !ok)
      return std::unexpected(ok.error());
    if (next == cur) break;
    cur = std::move(next);
  }
  return cur == outputs ? outputs : cur;
}

Outputs optimize(ir::Graph& g, const Outputs& outputs, const OptimizeOptions& options) {
  OptimizeOptions plain = options;
  plain.after_step = nullptr;
  return *optimize_steps(g, outputs, plain);
}

}  // namespace kiln::passes
