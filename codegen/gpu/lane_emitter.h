// Four points per thread for elementwise GPU kernels (TuneParams::vector_loads = 4): each thread
// takes four consecutive values of the innermost domain variable. Expressions that depend on it
// are emitted once per lane (a reduction keeps four accumulators in one loop); loads and stores
// whose index advances by one along it from a multiple of four move as one 16-byte vector
// (float4 / vec4), the rest element by element.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "codegen/gpu/c_expr_emitter.h"
#include "ir/kernel_analysis.h"
#include "ir/kernel_ir.h"
#include "kiln/error.h"

namespace kiln::codegen::gpu {

inline constexpr int kLanes = 4;

using kir::var_coefficient;  // ir/kernel_analysis.h
// A number that divides e's value whenever `var` is a multiple of `var_multiple` and the other
// variables take any value (0 when e is always 0).
int64_t known_divisor(const kir::Expr* e, int32_t var, int64_t var_multiple);

// Whether the access of parameter `buf` at `index` moves as one vector: a 4-byte element type,
// index = f(others) + var, and f(others) a multiple of four. Stores also need the parameter to
// be written only (GLSL reads it through one view).
bool vector_load_ok(const kir::Kernel& k, const FreeVars& fv, int32_t buf, const kir::Expr* index);
bool vector_store_ok(const kir::Kernel& k, const FreeVars& fv, const kir::Store& st);

// Whether four lanes apply to an elementwise kernel: the innermost extent is a multiple of four
// and at least one load or store moves as a vector. "" when they do, else why not.
std::string lanes_blocker(const kir::Kernel& k, const FreeVars& fv);
// The heuristic (TuneParams::vector_loads = 0): four lanes where they apply and the kernel has
// at least kMinPointsForLanes points (a quarter as many threads still fill a GPU), else one.
inline constexpr int64_t kMinPointsForLanes = 65536;
int heuristic_lanes(const kir::Kernel& k, const FreeVars& fv);

class LaneEmitter {
 public:
  using Scope = CExprEmitter::Scope;
  using Lanes = std::array<std::string, kLanes>;

  // The innermost domain variable must be bound in `em` to the first lane's value (a multiple
  // of four); lane l is that value + l.
  LaneEmitter(CExprEmitter& em, const kir::Kernel& k, const FreeVars& fv);

  // Every store of the kernel, for the four lanes, into scope `s` (where the variables are bound).
  Expected<void> emit_stores(Scope* s);
  // `e` (which reads the innermost variable, bound in `s`) has the four values `lanes` in `s`:
  // a row a thread keeps in registers (codegen/gpu/row_reduce_writer.cpp).
  void bind_lanes(Scope* s, const kir::Expr* e, Lanes lanes) { memo_[{s, e}] = std::move(lanes); }

 private:
  bool varying(const kir::Expr* e) const { return fv_.uses(e, var_); }
  Expected<Lanes> lanes(const kir::Expr* e);
  Expected<Lanes> lanes_one(const kir::Expr* e);
  Expected<Lanes> lanes_uncached(const kir::Expr* e, Scope* s);
  Expected<Lanes> load_lanes(const kir::Expr* e, Scope* s);
  Expected<Lanes> reduce_lanes(const kir::Expr* e, Scope* s);
  std::string define(Scope* s, DType t, const std::string& value);
  kiln::Error error(const std::string& what) const;

  CExprEmitter& em_;
  const kir::Kernel& k_;
  const FreeVars& fv_;
  int32_t var_;
  std::map<std::pair<const Scope*, const kir::Expr*>, Lanes> memo_;
};

}  // namespace kiln::codegen::gpu
