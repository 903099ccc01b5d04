// Kernel-IR ALU ops, casts and reduction steps as source text on register values, with the
// semantics of codegen/cpu/alu_lowering.cpp (wrapping integers, numpy floor division, NaN rules).
#include <fmt/format.h>

#include <limits>
#include <string_view>

#include "codegen/gpu/c_expr_emitter.h"

namespace kiln::codegen::gpu {

using kir::Alu;
using kir::ReduceOp;

namespace {

using ir::DTypeClass;

kiln::Error unsupported(const kir::Expr& e, DType t) {
  return kiln::Error{fmt::format("gpu codegen: alu op '{}' on {} is not supported",
                                 kir::alu_name(e.alu), ir::dtype_name(t))};
}

// A register value of integer dtype t brought back into t's range (i8 / u8 live in 32 bits).
std::string wrap(DialectText& d, DType t, const std::string& x) {
  if (t == DType::i8)
    return d.cuda() ? fmt::format("((int)(signed char)({}))", x) : fmt::format("bitfieldExtract({}, 0, 8)", x);
  if (t == DType::u8) return fmt::format("(({}) & 255u)", x);
  return x;
}

// a OP b with wrap-around on integers (CUDA: through unsigned, signed overflow is UB there;
// narrow i64 index math provably does not overflow and stays signed, which optimizes better).
std::string int_arith(DialectText& d, DType t, const char* op, const std::string& a,
                      const std::string& b) {
  if (d.cuda() && (t == DType::i32 || (t == DType::i64 && !d.narrow()))) {
    const std::string u = d.reg_type(t) == "int" ? "unsigned int" : "unsigned long long";
    return d.cast(d.reg_type(t), fmt::format("{} {} {}", d.cast(u, a), op, d.cast(u, b)));
  }
  return wrap(d, t, fmt::format("({} {} {})", a, op, b));
}

// a OP b; bools order as 0 < 1 (equality compares them directly).
std::string compare(DTypeClass cls, std::string_view op, std::string a, std::string b) {
  if (cls == DTypeClass::boolean && op != "==") {
    a = fmt::format("({} ? 1 : 0)", a);
    b = fmt::format("({} ? 1 : 0)", b);
  }
  return fmt::format("({} {} {})", a, op, b);
}

// `op` on the registers x of dtype t, "" where the op does not apply to t. Cast converts to `to`;
// `const_divisor`: x[1] is a positive constant (IDiv, Mod).
std::string op_text(DialectText& d, Alu op, DType t, DType to, const std::vector<std::string>& x,
                    bool const_divisor) {
  const DTypeClass cls = ir::dtype_class(t);
  const bool flt = cls == DTypeClass::floating, is_bool = cls == DTypeClass::boolean;
  const bool is_int = !flt && !is_bool, sgn = cls == DTypeClass::signed_int;
  const std::string zero = d.zero(t), one = flt ? d.float_lit(t, 1.0) : d.int_lit(t, 1);
  const auto float_math = [&](const char* f) { return flt ? d.math(f, t, x[0]) : ""; };
  // An odd function keeps the sign of a zero, f(-0) = -0, as libm's does (lavapipe's tanh and
  // kiln's f64 GLSL helpers gave +0).
  const auto odd_math = [&](const char* f) {
    return flt ? fmt::format("({0} == {1} ? {0} : {2})", x[0], zero, d.math(f, t, x[0])) : "";
  };
  const auto arith = [&](const char* o) {  // + - * (no bool form)
    if (flt) return fmt::format("({} {} {})", x[0], o, x[1]);
    return is_int ? int_arith(d, t, o, x[0], x[1]) : "";
  };
  switch (op) {
    case Alu::Neg:
      if (flt) return fmt::format("(-{})", x[0]);
      return is_int ? int_arith(d, t, "-", zero, x[0]) : "";
    case Alu::Abs:
      if (flt) return d.math("abs", t, x[0]);
      if (sgn) {
        return fmt::format("({0} < {1} ? {2} : {0})", x[0], zero, int_arith(d, t, "-", zero, x[0]));
      }
      return is_int ? x[0] : "";
    case Alu::Exp: return float_math("exp");
    case Alu::Log: return float_math("log");
    case Alu::Sqrt: return float_math("sqrt");
    case Alu::Rsqrt: return flt ? fmt::format("({} / {})", one, d.math("sqrt", t, x[0])) : "";
    case Alu::Recip: return flt ? fmt::format("({} / {})", one, x[0]) : "";
    case Alu::Sin: return odd_math("sin");
    case Alu::Cos: return float_math("cos");
    case Alu::Tanh: return odd_math("tanh");
    case Alu::Sigmoid: return flt ? fmt::format("{}({})", d.helper("sigmoid", t), x[0]) : "";
    case Alu::Relu:
      if (flt) return fmt::format("(({0} > {1} || {2}) ? {0} : {1})", x[0], zero, d.is_nan(x[0]));
      if (sgn) return fmt::format("({0} > {1} ? {0} : {1})", x[0], zero);
      return is_int ? x[0] : "";
    case Alu::Gelu: return flt ? fmt::format("{}({})", d.helper("gelu", t), x[0]) : "";
    case Alu::Erf: return odd_math("erf");
    case Alu::Floor: return float_math("floor");
    case Alu::Ceil: return float_math("ceil");
    case Alu::Sign:
      // NaN maps to itself and both zeros to +0, as numpy.sign does.
      if (flt)
        return fmt::format("({0} > {1} ? {2} : ({0} < {1} ? -{2} : ({0} == {1} ? {1} : {0})))",
                           x[0], zero, one);
      if (sgn) {
        return fmt::format("({0} > {1} ? {2} : ({0} < {1} ? {3} : {1}))", x[0], zero, one,
                           d.int_lit(t, -1));
      }
      return is_int ? fmt::format("({} != {} ? {} : {})", x[0], zero, one, zero) : "";
    case Alu::Not: return is_bool ? fmt::format("(!{})", x[0]) : "";
    case Alu::Cast: return cast_text(d, x[0], t, to);
    case Alu::Add: return arith("+");
    case Alu::Sub: return arith("-");
    case Alu::Mul: return arith("*");
    case Alu::Div:
      if (flt) return fmt::format("({} / {})", x[0], x[1]);
      if (cls == DTypeClass::unsigned_int)
        return fmt::format("({1} == {2} ? {2} : {0} / {1})", x[0], x[1], zero);
      return sgn ? wrap(d, t, fmt::format("{}({}, {})", d.helper("floordiv", t), x[0], x[1])) : "";
    case Alu::Pow: return flt ? d.math("pow", t, x[0], x[1]) : "";
    case Alu::Max:
      if (flt) return fmt::format("{}({}, {})", d.helper("fmax", t), x[0], x[1]);
      if (is_bool) return fmt::format("({} || {})", x[0], x[1]);
      return fmt::format("({0} > {1} ? {0} : {1})", x[0], x[1]);
    case Alu::Min:
      if (flt) return fmt::format("{}({}, {})", d.helper("fmin", t), x[0], x[1]);
      if (is_bool) return fmt::format("({} && {})", x[0], x[1]);
      return fmt::format("({0} < {1} ? {0} : {1})", x[0], x[1]);
    case Alu::Clip: {  // max then min, with their NaN rules
      if (is_bool) return "";
      if (flt)
        return fmt::format("{}({}({}, {}), {})", d.helper("fmin", t), d.helper("fmax", t), x[0],
                           x[1], x[2]);
      const std::string lo = fmt::format("({0} > {1} ? {0} : {1})", x[0], x[1]);
      return fmt::format("({0} < {1} ? {0} : {1})", lo, x[2]);
    }
    case Alu::Eq: return compare(cls, "==", x[0], x[1]);
    case Alu::Ne: return fmt::format("(!{})", compare(cls, "==", x[0], x[1]));  // true on NaN
    case Alu::Lt: return compare(cls, "<", x[0], x[1]);
    case Alu::Le: return compare(cls, "<=", x[0], x[1]);
    case Alu::Gt: return compare(cls, ">", x[0], x[1]);
    case Alu::Ge: return compare(cls, ">=", x[0], x[1]);
    case Alu::And:
      if (is_bool) return fmt::format("({} && {})", x[0], x[1]);
      return is_int ? fmt::format("({} & {})", x[0], x[1]) : "";
    case Alu::Or:
      if (is_bool) return fmt::format("({} || {})", x[0], x[1]);
      return is_int ? fmt::format("({} | {})", x[0], x[1]) : "";
    case Alu::Where: {
      const std::string c = is_bool ? x[0] : cast_text(d, x[0], t, DType::boolean);
      return fmt::format("({} ? {} : {})", c, x[1], x[2]);
    }
    case Alu::IDiv:
    case Alu::Mod: {
      if (!is_int) return "";
      const char* o = op == Alu::IDiv ? "/" : "%";
      if (const_divisor) return fmt::format("({} {} {})", x[0], o, x[1]);
      return fmt::format("({0} {1} ({2} == {3} ? {4} : {2}))", x[0], o, x[1], zero, one);
    }
  }
  return "";
}

}  // namespace

std::string cast_text(DialectText& d, const std::string& v, DType from, DType to) {
  if (from == to) return v;
  const DTypeClass f = ir::dtype_class(from);
  if (to == DType::boolean) return fmt::format("(!({} == {}))", v, d.zero(from));
  if (f == DTypeClass::boolean) {
    const std::string one = ir::is_float(to) ? d.float_lit(to, 1.0) : d.int_lit(to, 1);
    return fmt::format("({} ? {} : {})", v, one, d.zero(to));
  }
  if (ir::is_float(to)) {  // from a float or an integer register: convert, then round
    return d.round_to_storage(to, d.cast(d.reg_type(to), v));
  }
  // From a float: saturate to i32 (i64), then wrap like a C cast from the wider int.
  if (f == DTypeClass::floating) {
    const std::string wide = d.cast(
        d.reg_type(to), fmt::format("{}({})", d.helper(to == DType::i64 ? "f2i64" : "f2i32", from), v));
    if (to == DType::i8 || to == DType::u8) return wrap(d, to, d.cast(d.reg_type(to), wide));
    return wide;
  }
  // integer -> integer: sign- or zero-extend from `from`, truncate to `to`
  return wrap(d, to, d.cast(d.reg_type(to), v));
}

Expected<std::string> alu_text(DialectText& d, const kir::Expr& e,
                               const std::vector<std::string>& args) {
  const DType operand = e.args[0]->dtype;
  const bool const_divisor =
      e.args.size() > 1 && e.args[1]->kind == kir::ExprKind::Const && e.args[1]->ival > 0;
  std::string r = op_text(d, e.alu, operand, e.dtype, args, const_divisor);
  if (r.empty()) return std::unexpected(unsupported(e, operand));
  return r;
}

Expected<std::string> reduce_init_text(DialectText& d, ReduceOp op, DType body) {
  const bool is_float = ir::is_float(body);
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Prod: {
      if (body == DType::boolean) break;
      const int v = op == ReduceOp::Sum ? 0 : 1;
      return is_float ? d.float_lit(body, v) : d.int_lit(body, v);
    }
    case ReduceOp::Max:
    case ReduceOp::ArgMax:
    case ReduceOp::Min:
    case ReduceOp::ArgMin: {
      const bool lowest = op == ReduceOp::Max || op == ReduceOp::ArgMax;
      switch (body) {
        case DType::f32:
        case DType::f64:
        case DType::f16:
        case DType::bf16: return d.float_lit(body, lowest ? -INFINITY : INFINITY);
        case DType::boolean: return d.int_lit(body, lowest ? 0 : 1);
        case DType::u8: return d.int_lit(body, lowest ? 0 : 255);
        case DType::i8: return d.int_lit(body, lowest ? -128 : 127);
        case DType::i32: return d.int_lit(body, lowest ? INT32_MIN : INT32_MAX);
        case DType::i64: return d.int_lit(body, lowest ? INT64_MIN : INT64_MAX);
      }
      break;
    }
  }
  return std::unexpected(kiln::Error{fmt::format("gpu codegen: reduce.{} on {} is not supported",
                                                 kir::reduce_op_name(op), ir::dtype_name(body))});
}

std::string reduce_step_text(DialectText& d, ReduceOp op, DType body, const std::string& acc,
                             const std::string& v) {
  Alu alu = Alu::Min;
  switch (op) {
    case ReduceOp::Sum: alu = Alu::Add; break;
    case ReduceOp::Prod: alu = Alu::Mul; break;
    case ReduceOp::Max: alu = Alu::Max; break;
    case ReduceOp::Min:
    case ReduceOp::ArgMax:  // the arg reductions take arg_take_text, not a step
    case ReduceOp::ArgMin: alu = Alu::Min; break;
  }
  return op_text(d, alu, body, body, {acc, v}, false);
}

std::string arg_take_text(DialectText& d, ReduceOp op, DType body, const std::string& v,
                          const std::string& acc) {
  const bool max = op == ReduceOp::ArgMax;
  if (body == DType::boolean) return max ? fmt::format("({} && !{})", v, acc) : fmt::format("(!{} && {})", v, acc);
  const std::string better = fmt::format("({} {} {})", v, max ? ">" : "<", acc);
  if (!ir::is_float(body)) return better;
  return fmt::format("({} || ({} && !{}))", better, d.is_nan(v), d.is_nan(acc));
}

}  // namespace kiln::codegen::gpu
