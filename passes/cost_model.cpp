// The fusion cost model: the estimated time of one fused group on a device with given rates.
//
//   seconds = bytes / bandwidth + launches * launch_overhead + flops / compute_rate
//
// - bytes: every input buffer once (a kernel streams each buffer it reads; repeated reads of the
//   same buffer are assumed to hit cache) plus every output once. A buffer read only as the
//   table of gathers counts the elements they gather (an embedding row, not the table).
// - launches: 1 per group.
// - A group of fewer than kOneCoreWorkOps operations runs on one core: its work is priced at
//   the serial compute rate's share of the all-core rates, where the device measured one.
// - flops: the scalar work the kernel actually executes. Each computed node n costs
//   node_flops(n) (per-element unit cost times elements; reductions and matmuls count their
//   bodies) times its evaluation factor f(n). Outputs have f = 1. A node read by an inlined
//   consumer c gets f(n) = max over its readers of f(c) * extra(c -> n), where extra (see
//   passes/fusion_reads.h) counts what the code generator's hoisting leaves: a value is evaluated
//   once per iteration of the loops down to the deepest loop it depends on. A row reduction
//   [R,1] read inside an [R,C] kernel depends on the row loop only: extra 1. A column reduction
//   [1,C] read there depends on the inner loop, so it is recomputed for every row: extra R, and
//   its R-long reduction body runs R*R*C times in total.
// - A value read in several loop nests (the kernel's, and each reduction's loop) is evaluated in
//   each. The formula counts that for matmuls (the contraction is re-run: attention scores fused
//   into softmax cost three matmuls) but counts an elementwise value once, so softmax's exp, read
//   by the sum's loop and by the output loop, is priced once: fusing a whole row softmax or
//   layernorm into one kernel is what the model is calibrated to choose. A matmul run in more than
//   one loop nest is no longer a matmul kernel's: each run is priced as a loose contraction
//   (kLooseContractionShare of the compute rate), not at the matmul rate.
#include "passes/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "passes/attention_match.h"
#include "passes/fusion_reads.h"

namespace kiln::passes {

std::string DeviceRates::str() const {
  std::string s = fmt::format("bandwidth {:g} B/s, launch overhead {:g} s, compute {:g} op/s",
                              bandwidth, launch_overhead, compute_rate);
  if (serial_compute_rate > 0) s += fmt::format(", one core {:g} op/s", serial_compute_rate);
  if (matmul_rate > 0) s += fmt::format(", matmul {:g} flop/s", matmul_rate);
  for (const auto& [op, sec] : op_seconds)
    s += fmt::format(", {} {:.3g} ns/element", ir::op_name(op), sec * 1e9);
  if (cache_bandwidth > 0) s += fmt::format(", cache bandwidth {:g} B/s", cache_bandwidth);
  return s;
}

WorkKind work_kind(const ir::Node* n) {
  if (n->op == ir::Op::Matmul) return WorkKind::matmul;
  if (ir::op_kind(n->op) == ir::OpKind::Elementwise && ir::op_cost(n->op) >= 4) return WorkKind::costly;
  return WorkKind::simple;
}

double CostModel::work_seconds(const ir::Node* n, double flops) const {
  switch (work_kind(n)) {
    case WorkKind::matmul:
      if (rates_.matmul_rate > 0) return flops / rates_.matmul_rate;
      break;
    case WorkKind::costly:
      // node_flops counts op_cost per element evaluated.
      if (auto it = rates_.op_seconds.find(n->op); it != rates_.op_seconds.end())
        return flops / ir::op_cost(n->op) * it->second;
      break;
    case WorkKind::simple:
      break;
  }
  return flops / rates_.compute_rate;
}

double CostModel::attention_seconds(const AttentionMatch& m) const {
  const AttentionWork w = attention_work(m);
  const double mm_rate = rates_.matmul_rate > 0 ? rates_.matmul_rate : rates_.compute_rate;
  auto exp_it = rates_.op_seconds.find(ir::Op::Exp);
  const double exp_seconds = exp_it != rates_.op_seconds.end()
                                 ? exp_it->second
                                 : ir::op_cost(ir::Op::Exp) / rates_.compute_rate;
  // The contractions run on small tiles (a key tile against a block of query rows) at a share of
  // the matmul rate; each score is also scaled, masked, compared and summed (a few simple ops).
  return w.contraction_flops / (mm_rate * kAttentionMatmulShare) + w.exps * exp_seconds +
         w.logits * kAttentionOpsPerScore / rates_.compute_rate;
}

namespace {

using ReadMap = std::unordered_map<const ir::Node*, std::vector<ValueRead>>;  // lookup only

bool has_loop_body(const ir::Node* n) {
  return ir::is_reduce(n->op) || n->op == ir::Op::Matmul;
}

// Adds one to `count[m]` for every matmul m that the loop nest reading `roots` evaluates: the
// walk goes through inlined values and stops at matmuls and at reductions (their operands are
// evaluated in the reduction's own loop, a context of its own).
void count_matmul_context(const std::vector<const ir::Node*>& roots, const ReadMap& reads,
                          std::unordered_map<const ir::Node*, int>& count) {
  std::unordered_set<const ir::Node*> seen;
  std::vector<const ir::Node*> stack;
  for (const ir::Node* r : roots) {
    auto it = reads.find(r);
    if (it == reads.end()) continue;
    for (const ValueRead& v : it->second) stack.push_back(v.base);
  }
  while (!stack.empty()) {
    const ir::Node* n = stack.back();
    stack.pop_back();
    if (!reads.contains(n) || !seen.insert(n).second) continue;  // a buffer, or done
    if (n->op == ir::Op::Matmul) ++count[n];
    if (has_loop_body(n)) continue;
    for (const ValueRead& v : reads.at(n)) stack.push_back(v.base);
  }
}

}  // namespace

double CostModel::executed_flops(const FusedGroup& group, double* work) const {
  std::unordered_set<const ir::Node*> buffers(group.inputs.begin(), group.inputs.end());
  std::unordered_set<const ir::Node*> outputs(group.outputs.begin(), group.outputs.end());
  auto inlined_view = [&](const ir::Node* n) {
    ir::OpKind kind = ir::op_kind(n->op);
    return !buffers.contains(n) && (ir::is_view(n->op) || kind == ir::OpKind::Source);
  };
  auto stop = [&](const ir::Node* n) { return !inlined_view(n); };
  std::vector<const ir::Node*> order = group.nodes;  // readers before the values they read
  std::sort(order.begin(), order.end(),
            [](const ir::Node* a, const ir::Node* b) { return a->id > b->id; });
  ReadMap reads;
  std::unordered_map<const ir::Node*, double> factor;  // lookup only
  for (const ir::Node* o : group.outputs) factor[o] = 1;
  // Attentions computed here whole run as one flash-style loop nest: priced by
  // attention_seconds, their interiors not node by node.
  std::unordered_set<const ir::Node*> computed(group.nodes.begin(), group.nodes.end());
  auto in_group = [&](const ir::Node* n) { return computed.contains(n) && !buffers.contains(n); };
  std::unordered_set<const ir::Node*> covered;
  double attention_flops = 0;
  for (const ir::Node* n : group.nodes) {
    if (n->op != ir::Op::Matmul || covered.contains(n)) continue;
    std::optional<AttentionMatch> m = match_attention(n, in_group);
    if (!m) continue;
    covered.insert(m->interior.begin(), m->interior.end());
    const AttentionWork w = attention_work(*m);
    attention_flops += w.contraction_flops + w.exps * ir::op_cost(ir::Op::Exp) + w.logits;
    if (work) *work += attention_seconds(*m);
    covered.insert(n);
  }
  std::vector<const ir::Node*> evaluated;  // in `order`
  for (const ir::Node* n : order) {
    auto it = factor.find(n);
    if (it == factor.end()) continue;  // reached only as an inlined view, or dead
    if (inlined_view(n) && !outputs.contains(n)) continue;
    if (covered.contains(n)) continue;
    evaluated.push_back(n);
    std::vector<ValueRead>& mine = reads[n] = collect_reads(n, stop);
    for (const ValueRead& r : mine) {
      if (buffers.contains(r.base) || r.base->op == ir::Op::Input) continue;
      double& g = factor[r.base];
      g = std::max(g, it->second * r.extra);
    }
  }
  // A matmul is evaluated once per loop nest that reads it (the kernel's own, each reduction's):
  // attention's scores inlined into softmax are contracted three times. Other values read in
  // several loop nests are counted once (see the header comment).
  std::unordered_map<const ir::Node*, int> contexts;
  bool any_matmul = std::any_of(evaluated.begin(), evaluated.end(),
                                [](const ir::Node* n) { return n->op == ir::Op::Matmul; });
  std::vector<const ir::Node*> domain_roots;
  for (const ir::Node* o : group.outputs) {
    if (o->op == ir::Op::Matmul) ++contexts[o];
    if (!has_loop_body(o)) domain_roots.push_back(o);
  }
  if (any_matmul) {
    count_matmul_context(domain_roots, reads, contexts);
    for (const ir::Node* n : evaluated)
      if (has_loop_body(n)) count_matmul_context({n}, reads, contexts);
  }
  double flops = attention_flops;
  for (const ir::Node* n : evaluated) {
    auto c = contexts.find(n);
    const int runs = c == contexts.end() ? 1 : std::max(1, c->second);
    const double f = node_flops(n) * factor.at(n) * runs;
    flops += f;
    // A matmul that a reduction's loop runs again is no matmul loop nest: every run is loose.
    if (work) *work += n->op == ir::Op::Matmul && runs > 1 ? loose_contraction_seconds(f) : work_seconds(n, f);
  }
  return flops;
}

namespace {

// The bytes a group reads of its input buffer `b`: all of it, unless the group reads it only as
// the table of gathers, which read as many of its elements as they give (an embedding lookup of
// one row reads the row, not the table).
double bytes_read(const FusedGroup& group, const ir::Node* b) {
  double gathered = 0;
  for (const ir::Node* n : group.nodes)
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      if (n->inputs[i] != b) continue;
      if (n->op != ir::Op::Gather || i != 0) return node_bytes(b);
      gathered += static_cast<double>(n->numel()) * ir::dtype_size(b->dtype);
    }
  return gathered > 0 ? std::min(gathered, node_bytes(b)) : node_bytes(b);
}

}  // namespace

GroupCost CostModel::estimate(const FusedGroup& group) const {
  GroupCost c;
  double memory = 0;
  for (const std::vector<const ir::Node*>* buffers : {&group.inputs, &group.outputs})
    for (const ir::Node* b : *buffers) {
      const double bytes = buffers == &group.inputs ? bytes_read(group, b) : node_bytes(b);
      c.bytes += bytes;
      memory += buffer_seconds(b, bytes);
    }
  c.launches = 1;
  double work = 0;
  c.flops = executed_flops(group, &work);
  // Too little work to wake a second core: all of it runs on the one that launches it.
  if (rates_.serial_compute_rate > 0 && c.flops < kOneCoreWorkOps)
    work *= rates_.compute_rate / rates_.serial_compute_rate;
  c.seconds = memory + launch_seconds(c.launches) + work;
  return c;
}

}  // namespace kiln::passes
