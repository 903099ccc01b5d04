// analyze_kernel: the shared analyses in one record; its verifier and its text.
#include "ir/kernel_facts.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace kiln::kir {

namespace {

// print_kernel's names: $N for computed expressions in print order, vN for variables.
class ExprNames {
 public:
  explicit ExprNames(const Kernel& k) {
    int next = 0;
    for (const Expr* e : kernel_exprs(k)) {
      if (e->kind == ExprKind::Const) constants_.insert(e);
      if (e->kind != ExprKind::Const && e->kind != ExprKind::Var) names_[e] = fmt::format("${}", next++);
    }
  }
  std::string operator()(const Expr* e) const {
    if (e->kind == ExprKind::Var) return fmt::format("v{}", e->var);
    auto it = names_.find(e);
    return it != names_.end() ? it->second : "(not in the kernel)";
  }
  // A constant has no name but is the kernel's all the same (a matmul's operand may be one: a
  // product with a slice of padding, all 0.5).
  bool contains(const Expr* e) const {
    return e->kind == ExprKind::Var || names_.contains(e) || constants_.contains(e);
  }

 private:
  std::unordered_map<const Expr*, std::string> names_;
  std::unordered_set<const Expr*> constants_;
};

bool same_matmul(const std::optional<MatmulPattern>& a, const std::optional<MatmulPattern>& b) {
  if (a.has_value() != b.has_value()) return false;
  if (!a) return true;
  return a->reduce == b->reduce && a->a == b->a && a->b == b->b && a->k_var == b->k_var &&
         a->k_extent == b->k_extent && a->i_var == b->i_var && a->j_var == b->j_var;
}

bool same_attention(const std::optional<AttentionPattern>& a,
                    const std::optional<AttentionPattern>& b) {
  if (a.has_value() != b.has_value()) return false;
  if (!a) return true;
  return a->reduce == b->reduce && a->probs == b->probs && a->value == b->value &&
         a->logits == b->logits && a->scores == b->scores && a->query == b->query &&
         a->key == b->key && a->i_var == b->i_var && a->e_var == b->e_var && a->j_var == b->j_var &&
         a->d_var == b->d_var && a->keys == b->keys && a->head_dim == b->head_dim &&
         a->causal_offset == b->causal_offset && a->key_mask == b->key_mask;
}

bool same_reuse(const std::vector<RowReuse>& a, const std::vector<RowReuse>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].reduce != b[i].reduce || a[i].body_value != b[i].body_value ||
        a[i].point_value != b[i].point_value)
      return false;
  return true;
}

// "[0,600) [600,1024)": the pieces between consecutive cuts.
std::string pieces_text(const std::vector<int64_t>& bounds) {
  std::vector<std::string> pieces;
  for (size_t i = 0; i + 1 < bounds.size(); ++i)
    pieces.push_back(fmt::format("[{},{})", bounds[i], bounds[i + 1]));
  return fmt::format("{}", fmt::join(pieces, " "));
}

bool same_split(const LoopSplit& a, const LoopSplit& b) {
  if (a.bounds != b.bounds || a.wraps.size() != b.wraps.size() || a.steps != b.steps) return false;
  for (const auto& [e, w] : a.wraps) {
    auto it = b.wraps.find(e);
    if (it == b.wraps.end() || it->second.c != w.c || it->second.n != w.n) return false;
  }
  return true;
}

}  // namespace

KernelFacts analyze_kernel(const Kernel& kernel) {
  KernelFacts f;
  f.free_vars = FreeVars(kernel);
  f.matmul = recognize_matmul(kernel, f.free_vars);
  f.attention = recognize_attention(kernel, f.free_vars);
  f.row_reuse = find_row_reuse(kernel);
  f.loop_split = split_innermost(kernel);
  for (const Expr* e : kernel_exprs(kernel))
    if (e->kind == ExprKind::Reduce)
      if (LoopSplit s = split_reduction(e); !s.steps.empty())
        f.reduce_splits.push_back({e, std::move(s)});
  return f;
}

Expected<void> verify_facts(const Kernel& kernel, const KernelFacts& facts) {
  const ExprNames names(kernel);
  const auto foreign = [&](const Expr* e, const char* fact) -> Expected<void> {
    if (e && !names.contains(e))
      return make_error(fmt::format("kernel {}: its {} names an expression of another kernel",
                                    kernel.name, fact));
    return {};
  };
  if (facts.matmul)
    for (const Expr* e : {facts.matmul->reduce, facts.matmul->a, facts.matmul->b})
      if (auto ok = foreign(e, "matmul pattern"); !ok) return ok;
  if (const auto& a = facts.attention)
    for (const Expr* e : {a->reduce, a->probs, a->value, a->logits, a->scores, a->query, a->key})
      if (auto ok = foreign(e, "attention pattern"); !ok) return ok;
  for (const RowReuse& r : facts.row_reuse)
    for (const Expr* e : {r.reduce, r.body_value, r.point_value})
      if (auto ok = foreign(e, "row reuse"); !ok) return ok;
  for (const auto& [e, w] : facts.loop_split.wraps)
    if (auto ok = foreign(e, "loop cuts"); !ok) return ok;
  for (const Expr* e : facts.loop_split.steps)
    if (auto ok = foreign(e, "loop cuts"); !ok) return ok;
  for (const ReduceSplit& r : facts.reduce_splits) {
    if (auto ok = foreign(r.reduce, "reduction cuts"); !ok) return ok;
    for (const Expr* e : r.split.steps)
      if (auto ok = foreign(e, "reduction cuts"); !ok) return ok;
  }
  const KernelFacts now = analyze_kernel(kernel);
  if (!same_matmul(facts.matmul, now.matmul))
    return make_error(fmt::format("kernel {}: its matmul pattern is not the kernel's", kernel.name));
  if (!same_attention(facts.attention, now.attention))
    return make_error(
        fmt::format("kernel {}: its attention pattern is not the kernel's", kernel.name));
  if (!same_reuse(facts.row_reuse, now.row_reuse))
    return make_error(fmt::format("kernel {}: its row reuse is not the kernel's", kernel.name));
  if (!same_split(facts.loop_split, now.loop_split))
    return make_error(fmt::format("kernel {}: its loop cuts are not the kernel's", kernel.name));
  const bool same_reduce_splits = std::ranges::equal(
      facts.reduce_splits, now.reduce_splits, [](const ReduceSplit& a, const ReduceSplit& b) {
        return a.reduce == b.reduce && same_split(a.split, b.split);
      });
  if (!same_reduce_splits)
    return make_error(
        fmt::format("kernel {}: its reduction cuts are not the kernel's", kernel.name));
  return {};
}

std::string facts_text(const Kernel& kernel, const KernelFacts& facts) {
  const ExprNames name(kernel);
  std::string out;
  if (const auto& m = facts.matmul)
    out += fmt::format("matmul: {} = reduce over v{}<{}>, rows v{}, columns v{}\n", name(m->reduce),
                       m->k_var, m->k_extent, m->i_var, m->j_var);
  else
    out += "matmul: no\n";
  // Only where there is one: most kernels are not attention, and their text stays as it was.
  if (const auto& a = facts.attention) {
    out += fmt::format(
        "attention: {} = reduce over keys v{}<{}> of probabilities {}, scores {} over v{}<{}>, "
        "rows v{}, columns v{}",
        name(a->reduce), a->j_var, a->keys, name(a->probs), name(a->scores), a->d_var,
        a->head_dim, a->i_var, a->e_var);
    out += a->causal_offset ? fmt::format(", causal: keys j <= i + {}\n", *a->causal_offset)
           : a->key_mask    ? fmt::format(", key mask: {}\n", name(a->key_mask))
                            : std::string("\n");
  }
  if (facts.row_reuse.empty()) out += "row reuse: no\n";
  for (const RowReuse& r : facts.row_reuse)
    out += fmt::format("row reuse: {} kept per row of {}, read back as {}\n", name(r.body_value),
                       name(r.reduce), name(r.point_value));
  const std::vector<int64_t>& b = facts.loop_split.bounds;
  const size_t steps = facts.loop_split.steps.size();
  const std::string steps_text =
      steps == 0 ? std::string() : fmt::format(", {} step{}", steps, steps == 1 ? "" : "s");
  if (b.size() <= 2) {
    // Steps that never change arm over the axis (a clamp that never clamps) are taken as their arm.
    out += fmt::format("loop cuts: no{}\n", steps_text);
  } else {
    out += fmt::format("loop cuts: innermost axis in {} pieces {}, {} wrapping index{}{}\n",
                       b.size() - 1, pieces_text(b), facts.loop_split.wraps.size(),
                       facts.loop_split.wraps.size() == 1 ? "" : "es", steps_text);
  }
  for (const ReduceSplit& r : facts.reduce_splits) {
    const size_t pieces = r.split.bounds.size() < 2 ? 0 : r.split.bounds.size() - 1;
    out += fmt::format("reduction cuts: {} over v{}<{}> in {} piece{} {}, {} step{}\n",
                       name(r.reduce), r.reduce->rvars[0], r.reduce->rextents[0], pieces,
                       pieces == 1 ? "" : "s", pieces_text(r.split.bounds), r.split.steps.size(),
                       r.split.steps.size() == 1 ? "" : "s");
  }
  return out;
}

}  // namespace kiln::kir
