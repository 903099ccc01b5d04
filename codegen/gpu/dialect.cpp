// The per-dialect vocabulary of GPU source text: types, literals, conversions, intrinsics, ids.
#include "codegen/gpu/dialect.h"

#include <fmt/format.h>

#include <algorithm>

#include <cmath>
#include <cstring>
#include <limits>

#include "kiln/error.h"

namespace kiln::codegen::gpu {

namespace {

uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Host-side round-to-nearest-even to f16 / bf16 precision (constants), like APFloat does.
float round_f16(float f) {
  if (std::isnan(f) || std::isinf(f)) return f;
  const float a = std::fabs(f);
  if (a >= 65520.0f) return std::copysign(std::numeric_limits<float>::infinity(), f);
  int e;
  std::frexp(a, &e);                   // a in [2^(e-1), 2^e)
  const int ulp_exp = std::max(e - 11, -24);  // 10 mantissa bits; subnormal unit 2^-24
  const float scaled = std::ldexp(a, -ulp_exp);
  return std::copysign(std::ldexp(std::nearbyint(scaled), ulp_exp), f);
}
float round_bf16(float f) {
  if (std::isnan(f)) return f;
  uint32_t u = f32_bits(f);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  return bits_f32(u);
}

}  // namespace

std::string DialectText::reg_type(DType t) const {
  switch (t) {
    case DType::f32:
    case DType::f16:
    case DType::bf16:
      return "float";
    case DType::f64:
      return "double";
    case DType::i32:
    case DType::i8:
      return "int";
    case DType::i64:
      return i64_type();
    case DType::u8:
      return cuda() ? "unsigned int" : "uint";
    case DType::boolean:
      return "bool";
  }
  return "?";
}

std::string DialectText::mem_type(DType t) const {
  switch (t) {
    case DType::f16:
    case DType::bf16:
      return cuda() ? "unsigned short" : "uint16_t";
    case DType::i8:
      return cuda() ? "signed char" : "int8_t";
    case DType::u8:
    case DType::boolean:
      return cuda() ? "unsigned char" : "uint8_t";
    case DType::i64:
      return wide_i64_type();
    case DType::f32:  // memory holds the register type
    case DType::f64:
    case DType::i32:
      break;
  }
  return reg_type(t);
}

std::string DialectText::cast(const std::string& type, const std::string& x) const {
  return cuda() ? fmt::format("(({})({}))", type, x) : fmt::format("{}({})", type, x);
}

std::string DialectText::float_lit(DType t, double v) const {
  if (t == DType::f16) v = round_f16(static_cast<float>(v));
  if (t == DType::bf16) v = round_bf16(static_cast<float>(v));
  if (t != DType::f64) {
    const float f = static_cast<float>(v);
    if (!std::isfinite(f)) {
      const uint32_t u = f32_bits(f);
      return cuda() ? fmt::format("__int_as_float(0x{:08x})", u)
                    : fmt::format("uintBitsToFloat(0x{:08x}u)", u);
    }
    std::string s = fmt::format("{:.9g}", f);
    if (s.find_first_of(".e") == std::string::npos) s += ".0";
    return cuda() ? s + "f" : s;
  }
  if (!std::isfinite(v)) {
    uint64_t u;
    std::memcpy(&u, &v, 8);
    return cuda() ? fmt::format("__longlong_as_double(0x{:016x}LL)", u)
                  : fmt::format("packDouble2x32(uvec2(0x{:08x}u, 0x{:08x}u))",
                                static_cast<uint32_t>(u), static_cast<uint32_t>(u >> 32));
  }
  std::string s = fmt::format("{:.17g}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return cuda() ? s : s + "LF";
}

std::string DialectText::int_lit(DType t, int64_t v) const {
  switch (t) {
    case DType::boolean:
      return v != 0 ? "true" : "false";
    case DType::u8:
      return fmt::format("{}u", static_cast<uint64_t>(v) & 0xffu);
    case DType::i8:
      return fmt::format("({})", static_cast<int8_t>(v));
    case DType::i32: {
      const auto x = static_cast<int32_t>(v);
      if (x == std::numeric_limits<int32_t>::min()) return "(-2147483647 - 1)";
      return fmt::format("({})", x);
    }
    case DType::i64: {
      if (narrow_) return int_lit(DType::i32, v);
      const char* suf = cuda() ? "LL" : "L";
      if (v == std::numeric_limits<int64_t>::min())
        return fmt::format("(-9223372036854775807{} - 1{})", suf, suf);
      return fmt::format("({}{})", v, suf);
    }
    case DType::f32:  // the integer value as a float literal
    case DType::f64:
    case DType::f16:
    case DType::bf16:
      break;
  }
  return float_lit(t, static_cast<double>(v));
}

std::string DialectText::zero(DType t) const {
  return ir::is_float(t) ? float_lit(t, 0.0) : int_lit(t, 0);
}

std::string DialectText::is_nan(const std::string& x) const {
  return cuda() ? fmt::format("({0} != {0})", x) : fmt::format("isnan({})", x);
}

std::string DialectText::bits_to_float(const std::string& u) const {
  return cuda() ? fmt::format("__uint_as_float({})", u) : fmt::format("uintBitsToFloat({})", u);
}
std::string DialectText::float_to_bits(const std::string& f) const {
  return cuda() ? fmt::format("__float_as_uint({})", f) : fmt::format("floatBitsToUint({})", f);
}

std::string DialectText::from_memory(DType t, const std::string& elem) {
  note_dtype(t);
  switch (t) {
    case DType::f16:
      if (cuda()) return fmt::format("{}({})", helper("h2f", t), elem);
      return fmt::format("unpackHalf2x16(uint({})).x", elem);
    case DType::bf16:
      return bits_to_float(fmt::format("({} << 16)", cast(reg_type(DType::u8), elem)));
    case DType::i8:
      return cast("int", elem);
    case DType::u8:
      return cast(reg_type(DType::u8), elem);
    case DType::boolean:
      return fmt::format("({} != {})", cast(reg_type(DType::u8), elem), int_lit(DType::u8, 0));
    case DType::i64:
      return narrow_ ? cast(reg_type(t), elem) : elem;
    case DType::f32:  // memory and register types agree
    case DType::f64:
    case DType::i32:
      break;
  }
  return elem;
}

std::string DialectText::to_memory(DType t, const std::string& v) {
  note_dtype(t);
  switch (t) {
    case DType::f16:
      return cast(mem_type(t), fmt::format("{}({})", helper("f2h", t), v));
    case DType::bf16:
      return cast(mem_type(t), fmt::format("{}({})", helper("f2bf", t), v));
    case DType::i8:
    case DType::u8:
      return cast(mem_type(t), v);
    case DType::boolean:
      return cast(mem_type(t), fmt::format("({} ? 1u : 0u)", v));
    case DType::i64:
      return narrow_ ? cast(mem_type(t), v) : v;
    case DType::f32:  // memory and register types agree
    case DType::f64:
    case DType::i32:
      break;
  }
  return v;
}

// Through the 16-bit pattern in a 32-bit register: GLSL's 16-bit types need the 16-bit storage
// extensions, which a kernel without 16-bit buffers does not enable.
std::string DialectText::round_to_storage(DType t, const std::string& v) {
  if (t != DType::f16 && t != DType::bf16) return v;
  if (cuda()) return from_memory(t, to_memory(t, v));
  const std::string bits = fmt::format("{}({})", helper(t == DType::f16 ? "f2h" : "f2bf", t), v);
  if (t == DType::f16) return fmt::format("unpackHalf2x16({}).x", bits);
  return bits_to_float(fmt::format("({} << 16)", bits));
}

std::string DialectText::math(const std::string& name, DType t, const std::string& x,
                              const std::string& y) {
  const bool f64 = t == DType::f64;
  if (cuda()) {
    const std::string fn = name == "abs" ? "fabs" : name;
    const std::string suffix = f64 ? "" : "f";
    if (name == "pow") return fmt::format("{}{}({}, {})", fn, suffix, x, y);
    return fmt::format("{}{}({})", fn, suffix, x);
  }
  // GLSL has no double transcendentals (codegen/gpu/glsl_f64_math.cpp), and its tanh, pow and
  // erf get helpers with libm's special cases.
  if (name == "sin" || name == "cos")  // exact reductions of large arguments
    return fmt::format("{}({}, {})", helper("sincos", f64 ? t : DType::f32), x,
                       name == "sin" ? 0 : 1);
  if (f64 && !glsl_f64_math(name).empty()) {
    const std::string h = helper(name, t);
    return name == "pow" ? fmt::format("{}({}, {})", h, x, y) : fmt::format("{}({})", h, x);
  }
  if (name == "tanh" || name == "erf" || name == "pow" || name == "log") {
    const std::string h = helper(name, DType::f32);
    return name == "pow" ? fmt::format("{}({}, {})", h, x, y) : fmt::format("{}({})", h, x);
  }
  return fmt::format("{}({})", name, x);
}

std::string DialectText::helper(const std::string& name, DType t) {
  if (t == DType::f16 || t == DType::bf16) t = DType::f32;  // they compute in float registers
  const std::string key = fmt::format("kiln_{}_{}", name, ir::dtype_name(t));
  if (!helpers_.contains(key)) {
    // The calls in its definition count for each call of it, not for the text being written.
    const int64_t outer = std::exchange(pending_loop_iterations_, 0);
    std::string def = helper_text(name, t);  // may register the helpers it calls first
    const int64_t own = !cuda() && t == DType::f64 ? glsl_f64_math_loop_iterations(name) : 0;
    helper_loop_iterations_[key] = own + std::exchange(pending_loop_iterations_, outer);
    helpers_[key] = def;
    helper_order_.push_back(def);
  }
  pending_loop_iterations_ += helper_loop_iterations_.at(key);
  return key;
}

void DialectText::define_helper(const std::string& key, const std::string& def) {
  if (helpers_.contains(key)) return;
  helper_loop_iterations_[key] = 0;
  helpers_[key] = def;
  helper_order_.push_back(def);
}

std::string DialectText::buffer_ref(int buf) const {
  return cuda() ? fmt::format("p{}", buf) : fmt::format("b{}.d", buf);
}
std::string DialectText::vec4_type(DType t) const {
  if (t == DType::i32) return cuda() ? "int4" : "ivec4";
  return cuda() ? "float4" : "vec4";
}

std::string DialectText::vec4_make(DType t, const std::string& x, const std::string& y,
                                   const std::string& z, const std::string& w) const {
  const std::string make = cuda() ? (t == DType::i32 ? "make_int4" : "make_float4") : vec4_type(t);
  return fmt::format("{}({}, {}, {}, {})", make, x, y, z, w);
}

std::string DialectText::vec4_ref(const kir::Kernel& k, int buf) {
  const DType t = k.params[buf].dtype;
  if (cuda())
    return fmt::format("(({}{}*)p{})", k.params[buf].output ? "" : "const ", vec4_type(t), buf);
  vec4_views_.insert(buf);
  return fmt::format("b{}v.d", buf);
}

void DialectText::set_scratch(std::vector<ScratchArray> arrays) {
  if (!arrays.empty()) arrays[0].count += arrays[0].count % 2;  // the 8-byte arrays stay aligned
  if (arrays.size() > 1)
    std::stable_sort(arrays.begin() + 1, arrays.end(),
                     [](const ScratchArray& a, const ScratchArray& b) { return a.elem_bytes > b.elem_bytes; });
  scratch_ = std::move(arrays);
}

int64_t DialectText::scratch_size() const {
  int64_t n = 0;
  for (const ScratchArray& a : scratch_) n += a.count * a.elem_bytes;
  return n;
}

int64_t DialectText::scratch_zero_bytes() const {
  return scratch_.empty() ? 0 : scratch_[0].count * scratch_[0].elem_bytes;
}

std::string DialectText::to_scratch(DType t, const std::string& v) const {
  return t == DType::boolean ? fmt::format("({} ? 1u : 0u)", v) : v;
}

std::string DialectText::from_scratch(DType t, const std::string& v) const {
  return t == DType::boolean ? fmt::format("({} != 0u)", v) : v;
}

std::string DialectText::scratch_ref(const std::string& name) const {
  return cuda() ? "kiln_" + name : "kiln_sc." + name;
}

std::string DialectText::scratch_load(const std::string& name, const std::string& index) const {
  return cuda() ? fmt::format("__ldcg(&kiln_{}[{}])", name, index) : fmt::format("kiln_sc.{}[{}]", name, index);
}

std::string DialectText::buffer_fence() const { return cuda() ? "__threadfence();" : "memoryBarrierBuffer();"; }

std::string DialectText::atomic_add_one(const std::string& array, const std::string& index) const {
  return cuda() ? fmt::format("atomicAdd(&{}[{}], 1u)", array, index) : fmt::format("atomicAdd({}[{}], 1u)", array, index);
}

std::string DialectText::local_id() const {
  return cast(i64_type(), cuda() ? "threadIdx.x" : "gl_LocalInvocationID.x");
}
std::string DialectText::tasks(int64_t n, int64_t per_outer) const {
  if (!dynamic_outer_) return i64_lit(n);
  const std::string outer = outer_extent();
  return per_outer == 1 ? outer : fmt::format("({} * {})", outer, i64_lit(per_outer));
}

std::string DialectText::outer_extent() const {
  return cast(i64_type(), cuda() ? "kiln_extent" : "kiln_sizes.outer");
}

std::string DialectText::group_id() const {
  return cast(i64_type(), cuda() ? "blockIdx.x" : "gl_WorkGroupID.x");
}
std::string DialectText::num_groups() const {
  return cast(i64_type(), cuda() ? "gridDim.x" : "gl_NumWorkGroups.x");
}
std::string DialectText::barrier() const {
  return cuda() ? "__syncthreads();" : "memoryBarrierShared(); barrier();";
}
std::string DialectText::shared_decl(const std::string& type, const std::string& name,
                                     int64_t n) const {
  return fmt::format("{}{} {}[{}];\n", cuda() ? "  __shared__ " : "shared ", type, name, n);
}

}  // namespace kiln::codegen::gpu
