// Scalar kernel-IR expressions at an insertion point: constants, bound variables, loads and ALU
// ops, memoized until the caller moves on.
#include "codegen/cpu/expr_emitter.h"

#include <fmt/format.h>

#include <llvm/IR/IRBuilder.h>

#include "codegen/cpu/alu_lowering.h"
#include "codegen/cpu/dtype_lowering.h"
#include "ir/post_order.h"

namespace kiln::codegen::cpu {

using kir::Expr;
using kir::ExprKind;
using llvm::Value;

kiln::Error ExprEmitter::error(const std::string& what) const {
  return kiln::Error{fmt::format("cpu backend: kernel '{}': {}", k_.name, what)};
}

// Operands first, on an explicit stack (ir/post_order.h): emit_one recurses one level deep.
Expected<Value*> ExprEmitter::emit(const Expr* root) {
  auto operands = [](const Expr* e, std::vector<const Expr*>& out) {
    out.clear();
    if (e->kind == ExprKind::Load || e->kind == ExprKind::Alu) out.assign(e->args.begin(), e->args.end());
  };
  return ir::post_order(
      root, operands, [&](const Expr* e) { return memo_.count(e) > 0; },
      [&](const Expr* e) { return emit_one(e); });
}

Expected<Value*> ExprEmitter::emit_one(const Expr* e) {
  if (auto it = memo_.find(e); it != memo_.end()) return it->second;
  Value* v = nullptr;
  switch (e->kind) {
    case ExprKind::Const:
      v = register_constant(b_.getContext(), e->dtype, e->fval, e->ival);
      break;
    case ExprKind::Size:  // bound by the emitters that take run-time sizes (attention's keys)
      if (e->ival < 0 || static_cast<size_t>(e->ival) >= sizes_.size())
        return std::unexpected(
            error(fmt::format("run-time size slot {} is not bound here", e->ival)));
      return sizes_[static_cast<size_t>(e->ival)];
    case ExprKind::Var: {
      auto it = vars_.find(e->var);
      if (it == vars_.end())
        return std::unexpected(error(fmt::format("loop variable v{} is not bound here", e->var)));
      v = it->second;
      break;
    }
    case ExprKind::Load: {
      Expected<Value*> index = emit(e->args[0]);
      if (!index) return index;
      llvm::Type* mt = memory_type(b_.getContext(), e->dtype);
      Value* p = b_.CreateInBoundsGEP(mt, buffers_.at(e->buf), *index);
      v = from_memory(b_, b_.CreateLoad(mt, p), e->dtype);
      break;
    }
    case ExprKind::Alu: {
      std::vector<Value*> args;
      for (const Expr* a : e->args) {
        Expected<Value*> av = emit(a);
        if (!av) return av;
        args.push_back(*av);
      }
      Expected<Value*> r = emit_alu(b_, *e, args);
      if (!r) return std::unexpected(error(r.error().message));
      v = *r;
      break;
    }
    case ExprKind::Reduce:
      return std::unexpected(error("a reduction that is not bound by the caller"));
    case ExprKind::Scan:
      return std::unexpected(error("a scan that is not bound by the caller"));
  }
  memo_[e] = v;
  return v;
}

}  // namespace kiln::codegen::cpu
