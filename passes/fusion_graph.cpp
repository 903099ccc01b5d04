// The beam fuser's static view of the live graph: roles, reads and forced buffers.
#include "passes/fusion_graph.h"

#include <set>
#include <unordered_map>
#include <unordered_set>

#include "passes/fusion_reads.h"

namespace kiln::passes {

namespace {

// `written`: graph outputs and the inner concats of wide concats (is_written_concat_piece).
Role role_of(const ir::Node* n, const std::unordered_set<const ir::Node*>& written) {
  if (n->op == ir::Op::Input) return Role::Input;
  ir::OpKind kind = ir::op_kind(n->op);
  bool view_or_source = ir::is_view(n->op) || kind == ir::OpKind::Source;
  return view_or_source && !written.contains(n) ? Role::Inlined : Role::Placed;
}

// Whether `n` is a function of sources only (aranges and constants through elementwise ops and
// views): every group that reads it can compute it, as lowering does for a source. A causal mask
// is one; the graph interns it, so that the attentions of every layer share one node.
bool of_sources_only(const ir::Node* n, std::unordered_map<const ir::Node*, bool>& memo) {
  auto computes = [](const ir::Node* m) {
    return ir::op_kind(m->op) == ir::OpKind::Elementwise || ir::is_view(m->op);
  };
  // Post-order on an explicit stack: a long chain must not exhaust the call stack.
  std::vector<std::pair<const ir::Node*, bool>> stack{{n, false}};
  while (!stack.empty()) {
    auto [m, expanded] = stack.back();
    stack.pop_back();
    if (memo.contains(m)) continue;
    if (!computes(m)) {
      memo.emplace(m, ir::op_kind(m->op) == ir::OpKind::Source);
    } else if (!expanded) {
      stack.push_back({m, true});
      for (const ir::Node* in : m->inputs)
        if (!memo.contains(in)) stack.push_back({in, false});
    } else {
      bool pure = true;
      for (const ir::Node* in : m->inputs) pure = pure && memo.at(in);
      memo.emplace(m, pure);
    }
  }
  return memo.at(n);
}

// The attention whose output is `out`, with an interior whose nodes have no reader outside the
// match (and are not graph outputs or inputs): the fuser computes them in out's group only. An
// interior node that is a function of sources only may have other readers: it is inlined into
// each of them (a mask shared by several attentions stays a comparison in each kernel, where
// the backends see that it is causal).
std::optional<AttentionMatch> attention_at(
    const ir::Node* out, const std::unordered_set<const ir::Node*>& outputs,
    const std::unordered_map<const ir::Node*, std::vector<const ir::Node*>>& users,
    std::unordered_map<const ir::Node*, bool>& pure) {
  std::unordered_set<const ir::Node*> banned;
  for (;;) {
    auto inside = [&](const ir::Node* n) {
      return n->op != ir::Op::Input && !outputs.contains(n) && !banned.contains(n);
    };
    std::optional<AttentionMatch> m = match_attention(out, inside);
    if (!m) return std::nullopt;
    std::unordered_set<const ir::Node*> members(m->interior.begin(), m->interior.end());
    members.insert(out);
    bool ok = true;
    for (const ir::Node* n : m->interior) {
      if (of_sources_only(n, pure)) continue;
      auto it = users.find(n);
      if (it == users.end()) continue;
      for (const ir::Node* u : it->second)
        if (!members.contains(u)) {
          banned.insert(n);
          ok = false;
        }
    }
    if (ok) return m;
  }
}

}  // namespace

FusionGraph::FusionGraph(const Outputs& outputs) {
  std::unordered_set<const ir::Node*> outs(outputs.begin(), outputs.end());
  std::vector<const ir::Node*> live = ir::topo_order(outputs);
  std::unordered_set<const ir::Node*> written = outs;
  add_written_concat_pieces(live, written);
  nodes_.reserve(live.size());
  for (const ir::Node* n : live) {
    index_.emplace(n, static_cast<int32_t>(nodes_.size()));
    FusionNode fn;
    fn.node = n;
    fn.role = role_of(n, written);
    nodes_.push_back(std::move(fn));
  }
  // Attention outputs (passes/attention_match.h): their interiors are computed in their group.
  std::unordered_map<const ir::Node*, std::vector<const ir::Node*>> users;
  for (const ir::Node* n : live)
    for (const ir::Node* in : n->inputs) users[in].push_back(n);
  std::unordered_set<const ir::Node*> interior;
  std::unordered_map<const ir::Node*, bool> pure;
  for (FusionNode& fn : nodes_) {
    if (fn.role != Role::Placed || fn.node->op != ir::Op::Matmul || interior.contains(fn.node))
      continue;
    fn.attention = attention_at(fn.node, outs, users, pure);
    if (!fn.attention) continue;
    for (const ir::Node* n : fn.attention->interior) {
      interior.insert(n);
      nodes_[static_cast<size_t>(index_.at(n))].role = Role::Inlined;
    }
  }
  auto stop = [&](const ir::Node* m) { return nodes_[index_.at(m)].role != Role::Inlined; };
  // Inside an attention's interior, the walk stops at computed nodes (they are read in the
  // kernel, not from buffers) and goes through views and sources as everywhere.
  auto stop_inside = [&](const ir::Node* m) {
    if (!interior.contains(m)) return stop(m);
    return !ir::is_view(m->op) && ir::op_kind(m->op) != ir::OpKind::Source;
  };
  // The distinct views through which each placed value is read, by view id (ordered).
  std::vector<std::set<uint32_t>> views(nodes_.size());
  for (FusionNode& fn : nodes_) {
    fn.flops = node_flops(fn.node);
    fn.bytes = node_bytes(fn.node);
    if (fn.role != Role::Placed) continue;
    fn.forced = written.contains(fn.node);
    // A placed movement op (a graph output) is itself the view its operands are read through.
    bool is_view = ir::is_view(fn.node->op);
    if (fn.attention) {
      // Written to a buffer of its own shape: a reader's view (the heads moved back beside the
      // model axis) would otherwise become the kernel's domain, and the kernel would no longer
      // be one (batch, query row, value column) loop nest the backends recognize.
      fn.forced = true;
      // The match's buffer reads, each once; a matmul reads its operands many times, so each is
      // written to a buffer whatever the partition (as for any matmul).
      std::vector<const ir::Node*> readers = fn.attention->interior;
      readers.push_back(fn.node);
      std::set<int32_t> added;
      for (const ir::Node* reader : readers) {
        if (ir::is_view(reader->op) || ir::op_kind(reader->op) == ir::OpKind::Source) continue;
        for (const ValueRead& r : collect_reads(reader, stop_inside)) {
          if (interior.contains(r.base)) continue;
          int32_t b = index_.at(r.base);
          if (!added.insert(b).second) continue;
          fn.reads.push_back({b, r.reader, 1.0, r.view == r.base});
          FusionNode& base = nodes_[static_cast<size_t>(b)];
          if (base.role == Role::Placed && ir::op_kind(base.node->op) != ir::OpKind::Source)
            base.forced = true;
        }
      }
      continue;
    }
    for (const ValueRead& r : collect_reads(fn.node, stop)) {
      int32_t b = index_.at(r.base);
      fn.reads.push_back({b, r.reader, r.extra, !is_view && r.view == r.base});
      FusionNode& base = nodes_[static_cast<size_t>(b)];
      if (base.role != Role::Placed || ir::op_kind(base.node->op) == ir::OpKind::Source) continue;
      views[static_cast<size_t>(b)].insert(is_view ? fn.node->id : r.view->id);
      if (fn.node->op == ir::Op::Matmul) base.forced = true;
    }
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (views[i].size() < 2) continue;
    nodes_[i].multi_view = true;
    nodes_[i].forced = true;
  }
  // A scan is read from a buffer. Its kernel copies the elementwise producers it reads
  // (fuse-on-read) but holds no reduction, matmul, scatter or other scan (kernel_ir.h), so those
  // it reads through such producers are read from buffers too. Forced, each makes its group take
  // its shape when it is placed. Left to the search, one could join a group whose outputs have
  // another shape, where it can never be written, and the scan would find no placement.
  const auto scan_reads_from_a_buffer = [](const ir::Node* n) {
    return ir::op_kind(n->op) == ir::OpKind::Scan || ir::is_reduce(n->op) ||
           n->op == ir::Op::Matmul || n->op == ir::Op::ScatterElements;
  };
  for (FusionNode& scan : nodes_) {
    if (scan.role != Role::Placed || ir::op_kind(scan.node->op) != ir::OpKind::Scan) continue;
    scan.forced = true;
    std::vector<int32_t> stack;
    std::set<int32_t> seen;
    for (const FusionRead& r : scan.reads) stack.push_back(r.base);
    while (!stack.empty()) {
      const int32_t b = stack.back();
      stack.pop_back();
      FusionNode& base = nodes_[static_cast<size_t>(b)];
      if (!seen.insert(b).second || base.role != Role::Placed) continue;
      if (scan_reads_from_a_buffer(base.node)) {
        base.forced = true;
        continue;
      }
      for (const FusionRead& r : base.reads) stack.push_back(r.base);
    }
  }
}

}  // namespace kiln::passes
