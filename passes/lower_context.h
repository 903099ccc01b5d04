// Internal to lowering: the emission context shared by the value and the movement-op lowerings.
#pragma once

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

class LowerContext {
 public:
  LowerContext(kir::ExprArena& arena, std::vector<int64_t> domain,
               std::unordered_map<const ir::Node*, int32_t> buffers)
      : ib_(arena, std::move(domain)), buffers_(std::move(buffers)) {}

  IndexBuilder& ib() { return ib_; }
  kir::ExprArena& arena() { return ib_.arena(); }
  // The value of node `n` at element `idx`, memoized on (node, index).
  const kir::Expr* emit(const ir::Node* n, const Index& idx);
  // The first error met while emitting (empty when none); emission goes on with a placeholder.
  const std::string& error() const { return error_; }
  void fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
  }

 private:
  const kir::Expr* emit_uncached(const ir::Node* n, const Index& idx);
  const kir::Expr* emit_elementwise(const ir::Node* n, const Index& idx);
  const kir::Expr* emit_reduce(const ir::Node* n, const Index& idx);
  const kir::Expr* emit_arg_reduce(const ir::Node* n, const Index& idx);
  const kir::Expr* emit_matmul(const ir::Node* n, const Index& idx);
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
};

// C-order linear index of `idx` in `shape`, and its inverse (index simplification drops the
// arithmetic of trivial reshapes).
const kir::Expr* linearize(IndexBuilder& ib, const Index& idx, const ir::Shape& shape);
Index delinearize(IndexBuilder& ib, const kir::Expr* flat, const ir::Shape& shape);
// The index of an operand of shape `from` that broadcasts (numpy, right-aligned) to `idx`.
Index broadcast_index(IndexBuilder& ib, const Index& idx, const ir::Shape& from);

// A movement op as index remapping (with guarded selects for pad and concat).
const kir::Expr* emit_movement(LowerContext& cx, const ir::Node* n, const Index& idx);

}  // namespace kiln::passes
