// The optimizers of ONNX's training domain (ai.onnx.preview.training): Adagrad and Momentum
// (standard and Nesterov), each an elementwise update of any number of tensors, written as ONNX's
// operator definitions state them. Not Adam yet: the suite's test_adam_multiple expects the
// output of epsilon 1e-2 from a node that sets none (the default is 1e-6), and the runner has no
// way yet to record a case whose expectation contradicts its model.
#include <fmt/format.h>

#include "onnx/import_context.h"

namespace kiln::onnx {

namespace {

using ir::Node;
using ir::Op;

constexpr const char* kDomain = "ai.onnx.preview.training:";

// R (a float scalar), T (an int64 scalar), then `groups` lists of n tensors each: n from the
// input count. Returns R, T as R's dtype, and the lists.
struct Update {
  const Node* r;
  const Node* t;
  std::vector<std::vector<const Node*>> lists;
};

Expected<Update> update_inputs(Context& c, size_t groups) {
  if (c.num_inputs() < 2 + groups || (c.num_inputs() - 2) % groups)
    return c.fail(fmt::format("{} inputs: expected R, T and {} lists of equal length", c.num_inputs(), groups));
  const size_t n = (c.num_inputs() - 2) / groups;
  Update u;
  KILN_ONNX_TRY(u.r, c.x(0));
  KILN_ONNX_TRY(const Node* t, c.x(1));
  if (!ir::is_float(u.r->dtype) || ir::shape_numel(u.r->shape) != 1) return c.fail("R must be a float scalar");
  if (!ir::is_int(t->dtype) || ir::shape_numel(t->shape) != 1) return c.fail("T must be an integer scalar");
  KILN_ONNX_TRY(u.r, c.check(c.b().reshape(u.r, std::vector<int64_t>{})));
  KILN_ONNX_TRY(t, c.check(c.b().reshape(t, std::vector<int64_t>{})));
  KILN_ONNX_TRY(u.t, c.check(c.b().cast(t, u.r->dtype)));
  for (size_t g = 0; g < groups; ++g) {
    u.lists.emplace_back();
    for (size_t i = 0; i < n; ++i) {
      KILN_ONNX_TRY(const Node* x, c.x(2 + g * n + i));
      if (g > 0 && x->shape != u.lists[0][i]->shape)
        return c.fail(fmt::format("input {} has shape {}, its tensor {}", 2 + g * n + i, ir::shape_str(x->shape),
                                  ir::shape_str(u.lists[0][i]->shape)));
      u.lists.back().push_back(x);
    }
  }
  return u;
}

// norm_coefficient * X + G
Expected<const Node*> regularized(Context& c, const Node* x, const Node* g, double norm) {
  Expr e{c};
  KILN_ONNX_TRY(const Node* nx, e.bin(Op::Mul, x, norm));
  return e.bin(Op::Add, nx, g);
}

Outs adagrad(Context& c) {
  const double decay = c.attr_f("decay_factor", 0), eps = c.attr_f("epsilon", 1e-6f), norm = c.attr_f("norm_coefficient", 0);
  KILN_ONNX_TRY(Update u, update_inputs(c, 3));
  Expr e{c};
  // r = R / (1 + T * decay_factor)
  KILN_ONNX_TRY(const Node* d, e.bin(Op::Mul, u.t, decay));
  KILN_ONNX_TRY(d, e.bin(Op::Add, d, 1.0));
  KILN_ONNX_TRY(const Node* r, e.bin(Op::Div, u.r, d));
  std::vector<Value> xs, hs;
  for (size_t i = 0; i < u.lists[0].size(); ++i) {
    const Node *x = u.lists[0][i], *g = u.lists[1][i], *h = u.lists[2][i];
    KILN_ONNX_TRY(const Node* gr, regularized(c, x, g, norm));
    KILN_ONNX_TRY(const Node* g2, e.bin(Op::Mul, gr, gr));
    KILN_ONNX_TRY(const Node* h_new, e.bin(Op::Add, h, g2));
    KILN_ONNX_TRY(const Node* adaptive, e.un(Op::Sqrt, h_new));
    KILN_ONNX_TRY(adaptive, e.bin(Op::Add, adaptive, eps));
    KILN_ONNX_TRY(const Node* step, e.bin(Op::Mul, r, gr));
    KILN_ONNX_TRY(step, e.bin(Op::Div, step, adaptive));
    KILN_ONNX_TRY(const Node* x_new, e.bin(Op::Sub, x, step));
    xs.push_back(c.out(x_new));
    hs.push_back(c.out(h_new));
  }
  xs.insert(xs.end(), hs.begin(), hs.end());
  return xs;
}

Outs momentum(Context& c) {
  const double alpha = c.attr_f("alpha", 0), beta = c.attr_f("beta", 0), norm = c.attr_f("norm_coefficient", 0);
  const std::string mode = c.attr_s("mode").value_or("standard");
  if (mode != "standard" && mode != "nesterov") return c.fail(fmt::format("mode '{}'", mode));
  KILN_ONNX_TRY(Update u, update_inputs(c, 3));
  Expr e{c};
  ir::Builder& B = c.b();
  // beta_adjusted = T > 0 ? beta : 1
  KILN_ONNX_TRY(const Node* started, e.bin(Op::Gt, u.t, 0.0));
  KILN_ONNX_TRY(const Node* b, e.k(beta, u.r->dtype));
  KILN_ONNX_TRY(const Node* one_, e.k(1, u.r->dtype));
  KILN_ONNX_TRY(const Node* beta_adj, c.check(B.where(started, b, one_)));
  std::vector<Value> xs, vs;
  for (size_t i = 0; i < u.lists[0].size(); ++i) {
    const Node *x = u.lists[0][i], *g = u.lists[1][i], *v = u.lists[2][i];
    KILN_ONNX_TRY(const Node* gr, regularized(c, x, g, norm));
    KILN_ONNX_TRY(const Node* av, e.bin(Op::Mul, v, alpha));
    KILN_ONNX_TRY(const Node* bg, e.bin(Op::Mul, gr, beta_adj));
    KILN_ONNX_TRY(const Node* v_new, e.bin(Op::Add, av, bg));
    const Node* dir = v_new;
    if (mode == "nesterov") {  // G_regularized + alpha * V_new
      KILN_ONNX_TRY(const Node* av_new, e.bin(Op::Mul, v_new, alpha));
      KILN_ONNX_TRY(dir, e.bin(Op::Add, gr, av_new));
    }
    KILN_ONNX_TRY(const Node* step, e.bin(Op::Mul, u.r, dir));
    KILN_ONNX_TRY(const Node* x_new, e.bin(Op::Sub, x, step));
    xs.push_back(c.out(x_new));
    vs.push_back(c.out(v_new));
  }
  xs.insert(xs.end(), vs.begin(), vs.end());
  return xs;
}


}  // namespace

void add_training_ops(OpTable& t) {
  t[std::string(kDomain) + "Adagrad"] = adagrad;
  t[std::string(kDomain) + "Momentum"] = momentum;
}

}  // namespace kiln::onnx
