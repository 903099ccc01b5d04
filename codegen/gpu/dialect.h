// The per-dialect vocabulary of GPU source text (CUDA C vs GLSL 450): register and memory types,
// literals, casts, memory conversions, math intrinsics, thread ids, barriers, buffer and shared
// declarations. Everything else about emission is shared (codegen/gpu/c_expr_emitter.h).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "codegen/gpu/gpu_source.h"
#include "kiln/dtype.h"
#include "ir/kernel_ir.h"

namespace kiln::codegen::gpu {

using ir::DType;

// GLSL double exp log sincos tanh erf pow (kiln_<name>_f64), "" for other names.
std::string glsl_f64_math(const std::string& name);
// The loop passes one call of glsl_f64_math(name) runs at most, its loops' iterations and their
// failed tests together (CExprEmitter::loop_iterations).
int64_t glsl_f64_math_loop_iterations(const std::string& name);

// An array of the scratch buffer (GpuSource::scratch_bytes): `count` elements of `type`.
struct ScratchArray {
  std::string name;
  std::string type;
  int64_t count = 0;
  int elem_bytes = 4;
};

// Registers: f16/bf16 compute in float (like the cpu backend), i8 in a sign-extended int, u8 in
// a uint holding 0..255, bool in bool, i64 in a 64-bit int.
class DialectText {
 public:
  // `narrow`: i64 registers (indices, loop variables) are 32-bit ints (codegen/gpu/index_width.h);
  // i64 buffers keep 64-bit elements.
  explicit DialectText(Dialect d, bool narrow = false) : d_(d), narrow_(narrow) {}
  Dialect dialect() const { return d_; }
  bool cuda() const { return d_ == Dialect::cuda; }
  bool narrow() const { return narrow_; }

  std::string reg_type(DType t) const;
  std::string mem_type(DType t) const;
  std::string i64_type() const { return narrow_ ? "int" : wide_i64_type(); }
  std::string wide_i64_type() const { return cuda() ? "long long" : "int64_t"; }
  std::string cast(const std::string& type, const std::string& x) const;

  // A literal of t's register type; floats of f16/bf16 are rounded to their precision first.
  std::string float_lit(DType t, double v) const;
  std::string int_lit(DType t, int64_t v) const;
  std::string i64_lit(int64_t v) const { return int_lit(DType::i64, v); }
  std::string zero(DType t) const;
  std::string is_nan(const std::string& x) const;

  // Memory element <-> register value.
  std::string from_memory(DType t, const std::string& elem);
  std::string to_memory(DType t, const std::string& v);
  // Rounds a float register to f16/bf16 precision (identity for other dtypes).
  std::string round_to_storage(DType t, const std::string& v);

  // Math intrinsic `name` (exp log sqrt sin cos floor ceil abs tanh erf pow) on a float register.
  std::string math(const std::string& name, DType t, const std::string& x,
                   const std::string& y = "");
  // A helper function of the prelude (defined once, on first use): returns its name, for one
  // call written in the text.
  std::string helper(const std::string& name, DType t);
  // The loop passes of the helper calls written since the last take (each call's loops and
  // the helpers it calls), for the scope the text goes in (CExprEmitter::loop_iterations).
  int64_t take_helper_loop_iterations() { return std::exchange(pending_loop_iterations_, 0); }
  // Defines the prelude text `def` (loop-free device functions) under `key`, once.
  void define_helper(const std::string& key, const std::string& def);

  std::string buffer_ref(int buf) const;  // the element array of parameter `buf`
  // Four-wide vectors of 4-byte elements (f32, i32; memory and register types agree): the type,
  // a constructor from four register values, and parameter `buf`'s elements seen as vectors
  // (index = element index / 4; GLSL declares a second view of the same binding).
  static bool has_vec4(DType t) { return t == DType::f32 || t == DType::i32; }
  std::string vec4_type(DType t) const;
  std::string vec4_make(DType t, const std::string& x, const std::string& y, const std::string& z,
                        const std::string& w) const;
  std::string vec4_ref(const kir::Kernel& k, int buf);
  // The scratch buffer of split row reductions (codegen/gpu/row_reduce_writer.cpp): one binding
  // after the parameters (and the error slot), laid out as the arrays given, the first one (the
  // counters, zeroed by the runtime) first, then 8-byte arrays, then 4-byte ones.
  void set_scratch(std::vector<ScratchArray> arrays);
  int64_t scratch_size() const;        // bytes; 0 without scratch
  int64_t scratch_zero_bytes() const;  // the counters' bytes at the start
  std::string scratch_type(DType t) const { return t == DType::boolean ? "uint" : reg_type(t); }
  int scratch_bytes(DType t) const { return t == DType::f64 || (t == DType::i64 && !narrow_) ? 8 : 4; }
  std::string to_scratch(DType t, const std::string& v) const;
  std::string from_scratch(DType t, const std::string& v) const;
  std::string scratch_ref(const std::string& name) const;
  // A read of another workgroup's write: past incoherent caches (CUDA __ldcg; GLSL coherent).
  std::string scratch_load(const std::string& name, const std::string& index) const;
  std::string buffer_fence() const;
  std::string atomic_add_one(const std::string& array, const std::string& index) const;

  // A dynamic kernel (gpu_source.h): its outer extent is the run-time argument kiln_extent (CUDA).
  void set_dynamic_outer(bool on) { dynamic_outer_ = on; }
  bool dynamic_outer() const { return dynamic_outer_; }
  // `n` workgroup tasks, points or rows, `per_outer` of them per point of the outer axis: the
  // literal n, or in a dynamic kernel the run-time outer extent times per_outer.
  std::string tasks(int64_t n, int64_t per_outer) const;
  // The run-time outer extent of a dynamic kernel, as an i64 register value.
  std::string outer_extent() const;

  std::string local_id() const;
  std::string group_id() const;
  std::string num_groups() const;
  std::string barrier() const;
  std::string shared_decl(const std::string& type, const std::string& name, int64_t n) const;

  // The whole translation unit around `body` (the entry's statements).
  std::string translation_unit(const kir::Kernel& k, CheckMode check, const std::string& entry,
                               int group_size, const std::string& shared,
                               const std::string& body) const;

  void note_dtype(DType t) { used_.insert(t); }

 private:
  std::string helper_text(const std::string& name, DType t);
  std::string conversion_helper(const std::string& name, DType t);
  std::string math_helper(const std::string& name, DType t);
  std::string bits_to_float(const std::string& u) const;
  std::string float_to_bits(const std::string& f) const;

  Dialect d_;
  bool narrow_;
  std::set<DType> used_;
  std::set<int> vec4_views_;
  std::vector<ScratchArray> scratch_;  // GLSL: parameters also declared as vec4 arrays
  std::map<std::string, std::string> helpers_;  // name -> definition, in name order
  std::vector<std::string> helper_order_;      // definitions in first-use order (dependencies)
  std::map<std::string, int64_t> helper_loop_iterations_;  // name -> passes per call
  int64_t pending_loop_iterations_ = 0;
  bool dynamic_outer_ = false;
};

}  // namespace kiln::codegen::gpu
