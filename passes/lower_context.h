// Internal to lowering: the emission context shared by the value and the movement-op lowerings.
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "ir/kernel_ir.h"
#include "passes/index_simplify.h"

namespace kiln::passes {

// One i64 index expression per axis of a node's shape.
using Index = std::vector<const kir::Expr*>;

// How one (node, index) lowers: the values it needs, each a node at an index, and how its own
// value is built from them. NodeLowering runs these on an explicit stack, so a graph of any depth
// lowers in constant native stack.
struct NodeLowering {
  std::vector<std::pair<const ir::Node*, Index>> needs;
  std::function<const kir::Expr*(const std::vector<const kir::Expr*>& values)> build;
};
// A lowering that needs nothing.
inline NodeLowering lowered(const kir::Expr* e) {
  return NodeLowering{{}, [e](const std::vector<const kir::Expr*>&) { return e; }};
}
// A lowering whose value is the value of `x` at `idx`.
inline NodeLowering forward(const ir::Node* x, Index idx) {
  NodeLowering l;
  l.needs.emplace_back(x, std::move(idx));
  l.build = [](const std::vector<const kir::Expr*>& v) { return v[0]; };
  return l;
}

class LowerContext {
 public:
  LowerContext(kir::ExprArena& arena, std::vector<int64_t> domain,
               std::unordered_map<const ir::Node*, int32_t> buffers)
      : ib_(arena, std::move(domain)), buffers_(std::move(buffers)) {}

  IndexBuilder& ib() { return ib_; }
  kir::ExprArena& arena() { return ib_.arena(); }
  // The value of node `n` at element `idx`, memoized on (node, index).
  const kir::Expr* emit(const ir::Node* n, const Index& idx);
  // The value of `n` at `idx` if it is already known, else nullptr.
  const kir::Expr* known(const ir::Node* n, const Index& idx);
  // The first error met while emitting (empty when none); emission goes on with a placeholder.
  const std::string& error() const { return error_; }
  // A kernel with a scan: the scan runs along domain variable `var` (the innermost), and the
  // scanned axis of the output is read at `axis_index` (var, or extent-1-var for a reverse scan).
  void set_scan_loop(int32_t var, const kir::Expr* axis_index) {
    scan_var_ = var;
    scan_axis_index_ = axis_index;
  }
  void fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
  }

 private:
  NodeLowering plan(const ir::Node* n, const Index& idx);
  NodeLowering plan_elementwise(const ir::Node* n, const Index& idx);
  NodeLowering plan_reduce(const ir::Node* n, const Index& idx);
  NodeLowering plan_arg_reduce(const ir::Node* n, const Index& idx);
  NodeLowering plan_matmul(const ir::Node* n, const Index& idx);
  NodeLowering plan_scan(const ir::Node* n, const Index& idx);
  NodeLowering plan_topk_indices(const ir::Node* n, const Index& idx);
  const kir::Expr* emit_source(const ir::Node* n, const Index& idx);

  IndexBuilder ib_;
  std::unordered_map<const ir::Node*, int32_t> buffers_;  // node -> parameter it is read from
  struct MemoHash {
    size_t operator()(const std::pair<const ir::Node*, Index>& key) const {
      uint64_t h = key.first->hash;
      for (const kir::Expr* e : key.second) h = (h ^ e->hash) * 0x100000001b3ULL;
      return h;
    }
  };
  // Lookup only: nothing is ever emitted in the order of this map.
  std::unordered_map<std::pair<const ir::Node*, Index>, const kir::Expr*, MemoHash> memo_;
  std::string error_;
  int32_t scan_var_ = -1;
  const kir::Expr* scan_axis_index_ = nullptr;
};

// C-order linear index of `idx` in `shape`, and its inverse (index simplification drops the
// arithmetic of trivial reshapes).
const kir::Expr* linearize(IndexBuilder& ib, const Index& idx, const ir::Shape& shape);
Index delinearize(IndexBuilder& ib, const kir::Expr* flat, const ir::Shape& shape);
// The index of an operand of shape `from` that broadcasts (numpy, right-aligned) to `idx`.
Index broadcast_index(IndexBuilder& ib, const Index& idx, const ir::Shape& from);

// A movement op as index remapping (with guarded selects for pad and concat).
NodeLowering plan_movement(LowerContext& cx, const ir::Node* n, const Index& idx);
// The resize row (passes/lower_resize.cpp).
NodeLowering plan_resize(LowerContext& cx, const ir::Node* n, const Index& idx);

}  // namespace kiln::passes
