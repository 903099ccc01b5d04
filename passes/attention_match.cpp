// Attention recognized in the graph: the softmax's five nodes over the last axis, the logits'
// elementwise chain down to one matmul of the logits' shape, and the chain's other operands.
#include "passes/attention_match.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace kiln::passes {

namespace {

using ir::AttrKey;
using ir::Node;
using ir::Op;

bool last_axis_keepdim(const Node* r, Op op) {
  if (r->op != op || !r->attrs.b(AttrKey::keepdim)) return false;
  const std::vector<int64_t>& axes = r->attrs.ints(AttrKey::axes);
  return axes.size() == 1 && axes[0] == static_cast<int64_t>(r->inputs[0]->shape.size()) - 1;
}

bool is_neg_inf(const Node* n) {
  if (n->op != Op::Full || n->numel() != 1) return false;
  const double v = n->attrs.f(AttrKey::value);
  return std::isinf(v) && v < 0;
}

// Whether `n` is computed from sources (aranges, constants) and movement ops only.
bool from_sources(const Node* n) {
  std::vector<const Node*> stack{n};
  std::unordered_set<const Node*> seen;
  while (!stack.empty()) {
    const Node* m = stack.back();
    stack.pop_back();
    if (!seen.insert(m).second) continue;
    const ir::OpKind kind = ir::op_kind(m->op);
    if (kind != ir::OpKind::Source && kind != ir::OpKind::Movement &&
        kind != ir::OpKind::Elementwise)
      return false;
    for (const Node* in : m->inputs) stack.push_back(in);
  }
  return true;
}

class Matcher {
 public:
  explicit Matcher(const std::function<bool(const Node*)>& inside) : inside_(inside) {}

  std::optional<AttentionMatch> run(const Node* out) {
    if (out->op != Op::Matmul || out->dtype != ir::DType::f32 || out->shape.size() < 2)
      return std::nullopt;
    const Node* p = out->inputs[0];
    if (p->op != Op::Div || !core(p)) return std::nullopt;
    const Node *e = p->inputs[0], *s = p->inputs[1];
    if (e->op != Op::Exp || !core(e) || !last_axis_keepdim(s, Op::Sum) || s->inputs[0] != e ||
        !core(s))
      return std::nullopt;
    const Node* d = e->inputs[0];
    if (d->op != Op::Sub || !core(d)) return std::nullopt;
    const Node *x = d->inputs[0], *mx = d->inputs[1];
    if (!last_axis_keepdim(mx, Op::ReduceMax) || mx->inputs[0] != x || !core(mx))
      return std::nullopt;
    if (x->shape != p->shape || e->shape != p->shape || d->shape != p->shape) return std::nullopt;
    logits_ = x->shape;
    if (!logit(x) || raw_ == nullptr || ambiguous_) return std::nullopt;
    for (const Node* n : interior_)
      if (n->dtype != ir::DType::f32 && n->dtype != ir::DType::boolean &&
          ir::op_kind(n->op) != ir::OpKind::Source && !ir::is_movement(n->op))
        return std::nullopt;

    AttentionMatch m;
    m.out = out;
    m.scores = raw_;
    m.interior.assign(interior_.begin(), interior_.end());
    std::sort(m.interior.begin(), m.interior.end(),
              [](const Node* a, const Node* b) { return a->id < b->id; });
    m.causal = causal_;
    const ir::Shape& os = out->shape;
    for (size_t a = 0; a + 2 < os.size(); ++a) m.batch *= os[a];
    m.queries = logits_[logits_.size() - 2];
    m.keys = logits_.back();
    m.head_dim = raw_->inputs[0]->shape.back();
    m.value_dim = os.back();
    return m;
  }

 private:
  bool core(const Node* n) {
    if (!inside_(n)) return false;
    interior_.insert(n);
    return true;
  }

  // A node of the logits' chain (the logits' shape, elementwise, `inside`) or one of its operands.
  bool logit(const Node* n) {
    if (interior_.contains(n)) return true;
    if (!inside_(n) || !ir::is_elementwise(n->op) || n->shape != logits_) return false;
    interior_.insert(n);
    if (n->op == Op::Where && is_neg_inf(n->inputs[2]) && from_sources(n->inputs[0]))
      causal_ = true;
    for (const Node* in : n->inputs) {
      if (in->op == Op::Matmul && in->shape == logits_ && in->dtype == ir::DType::f32) {
        if (raw_ != nullptr && raw_ != in) ambiguous_ = true;
        if (!inside_(in)) return false;
        raw_ = in;
        interior_.insert(in);
      } else if (ir::is_elementwise(in->op) && in->shape == logits_ && inside_(in)) {
        if (!logit(in)) return false;
      } else {
        operand(in);
      }
    }
    return true;
  }

  // An operand of the chain that is not on it: computed in the kernel where it is elementwise,
  // movement or a source and `inside` allows it (with its own operands), read from a buffer
  // otherwise.
  void operand(const Node* n) {
    if (interior_.contains(n)) return;
    const ir::OpKind kind = ir::op_kind(n->op);
    const bool cheap = kind == ir::OpKind::Elementwise || kind == ir::OpKind::Movement ||
                       kind == ir::OpKind::Source;
    if (!cheap || !inside_(n)) return;
    interior_.insert(n);
    for (const Node* in : n->inputs) operand(in);
  }

  const std::function<bool(const Node*)>& inside_;
  std::unordered_set<const Node*> interior_;
  ir::Shape logits_;
  const Node* raw_ = nullptr;
  bool ambiguous_ = false;
  bool causal_ = false;
};

}  // namespace

std::optional<AttentionMatch> match_attention(const ir::Node* out,
                                              const std::function<bool(const ir::Node*)>& inside) {
  return Matcher(inside).run(out);
}

AttentionWork attention_work(const AttentionMatch& m) {
  // A causal mask leaves a triangle: half the scores, plus the diagonal tiles' masked half
  // (key tiles of 64, kernels' kAttentionKeyTile).
  double frac = 1;
  if (m.causal && m.keys > 0) frac = std::min(1.0, 0.5 + 32.0 / static_cast<double>(m.keys));
  const double scores = static_cast<double>(m.batch) * static_cast<double>(m.queries) *
                        static_cast<double>(m.keys) * frac;
  AttentionWork w;
  w.contraction_flops = 2 * scores * static_cast<double>(m.head_dim + m.value_dim);
  w.exps = scores;
  w.logits = scores;
  return w;
}

}  // namespace kiln::passes
