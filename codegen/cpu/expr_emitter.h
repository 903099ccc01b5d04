// Scalar kernel-IR expressions emitted at an IRBuilder's insertion point with caller-bound loop
// variables (and caller-bound values for whole subexpressions), for emitters that build their
// own loop structure, such as the matmul emitter.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "ir/kernel_ir.h"
#include "kiln/error.h"

namespace llvm {
class IRBuilderBase;
class Value;
}  // namespace llvm

namespace kiln::codegen::cpu {

class ExprEmitter {
 public:
  // `buffers[i]` is parameter i's base pointer; `kernel` names the buffers' dtypes.
  ExprEmitter(llvm::IRBuilderBase& b, const kir::Kernel& kernel, std::vector<llvm::Value*> buffers)
      : b_(b), k_(kernel), buffers_(std::move(buffers)) {}

  void bind_var(int32_t var, llvm::Value* v) { vars_[var] = v; }
  // Run-time size slot i's value this launch (load_size_values), for the Size expressions of a
  // kernel with run-time sizes.
  void bind_sizes(std::vector<llvm::Value*> sizes) { sizes_ = std::move(sizes); }
  // `e` evaluates to `v` wherever it appears (until forget()): how a reduction computed by the
  // caller enters its epilogue.
  void bind_expr(const kir::Expr* e, llvm::Value* v) { memo_[e] = v; }
  // Drops every memoized value: call when the insertion point moves to a block that the
  // previously emitted values may not dominate.
  void forget() { memo_.clear(); }

  // Emits `e` (no Reduce inside, unless bound) at the current insertion point.
  Expected<llvm::Value*> emit(const kir::Expr* e);

 private:
  Expected<llvm::Value*> emit_one(const kir::Expr* e);
  kiln::Error error(const std::string& what) const;

  llvm::IRBuilderBase& b_;
  const kir::Kernel& k_;
  std::vector<llvm::Value*> buffers_;
  std::vector<llvm::Value*> sizes_;
  std::unordered_map<int32_t, llvm::Value*> vars_;
  std::unordered_map<const kir::Expr*, llvm::Value*> memo_;
};

}  // namespace kiln::codegen::cpu
