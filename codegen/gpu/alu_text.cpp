// Kernel-IR ALU ops, casts and reduction steps as source text on register values, with the
// semantics of codegen/cpu/alu_lowering.cpp (wrapping integers, numpy floor division, NaN rules).
#include <fmt/format.h>

#include <limits>

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

std::string float_unary(DialectText& d, Alu op, DType t, const std::string& x) {
  const std::string one = d.float_lit(t, 1.0), zero = d.float_lit(t, 0.0);
  switch (op) {
    case Alu::Neg: return fmt::format("(-{})", x);
    case Alu::Abs: return d.math("abs", t, x);
    case Alu::Exp: return d.math("exp", t, x);
    case Alu::Log: return d.math("log", t, x);
    case Alu::Sqrt: return d.math("sqrt", t, x);
    case Alu::Rsqrt: return fmt::format("({} / {})", one, d.math("sqrt", t, x));
    case Alu::Recip: return fmt::format("({} / {})", one, x);
    case Alu::Sin: return d.math("sin", t, x);
    case Alu::Cos: return d.math("cos", t, x);
    case Alu::Tanh: return d.math("tanh", t, x);
    case Alu::Erf: return d.math("erf", t, x);
    case Alu::Sigmoid: return fmt::format("{}({})", d.helper("sigmoid", t), x);
    case Alu::Gelu: return fmt::format("{}({})", d.helper("gelu", t), x);
    case Alu::Relu: return fmt::format("(({0} > {1} || {2}) ? {0} : {1})", x, zero, d.is_nan(x));
    case Alu::Floor: return d.math("floor", t, x);
    case Alu::Ceil: return d.math("ceil", t, x);
    case Alu::Sign:
      return fmt::format("({0} > {1} ? {2} : ({0} < {1} ? -{2} : {0}))", x, zero, one);
    default: return "";
  }
}

std::string int_unary(DialectText& d, Alu op, DType t, DTypeClass cls, const std::string& x) {
  const std::string z = d.int_lit(t, 0);
  const bool s = cls == DTypeClass::signed_int;
  switch (op) {
    case Alu::Neg: return int_arith(d, t, "-", z, x);
    case Alu::Abs: return s ? fmt::format("({0} < {1} ? {2} : {0})", x, z, int_arith(d, t, "-", z, x)) : x;
    case Alu::Relu: return s ? fmt::format("({0} > {1} ? {0} : {1})", x, z) : x;
    case Alu::Sign:
      if (!s) return fmt::format("({} != {} ? {} : {})", x, z, d.int_lit(t, 1), z);
      return fmt::format("({0} > {1} ? {2} : ({0} < {1} ? {3} : {1}))", x, z, d.int_lit(t, 1),
                         d.int_lit(t, -1));
    default: return "";
  }
}

std::string compare(Alu op, DTypeClass cls, std::string a, std::string b) {
  if (cls == DTypeClass::boolean && op != Alu::Eq && op != Alu::Ne) {
    a = fmt::format("({} ? 1 : 0)", a);
    b = fmt::format("({} ? 1 : 0)", b);
  }
  switch (op) {
    case Alu::Eq: return fmt::format("({} == {})", a, b);
    case Alu::Ne: return fmt::format("(!({} == {}))", a, b);  // true on NaN
    case Alu::Lt: return fmt::format("({} < {})", a, b);
    case Alu::Le: return fmt::format("({} <= {})", a, b);
    case Alu::Gt: return fmt::format("({} > {})", a, b);
    default: return fmt::format("({} >= {})", a, b);
  }
}

std::string int_binary(DialectText& d, Alu op, DType t, DTypeClass cls, const std::string& a,
                       const std::string& b, bool const_divisor) {
  const bool is_bool = cls == DTypeClass::boolean;
  const std::string z = d.int_lit(t, 0);
  switch (op) {
    case Alu::Add: return is_bool ? "" : int_arith(d, t, "+", a, b);
    case Alu::Sub: return is_bool ? "" : int_arith(d, t, "-", a, b);
    case Alu::Mul: return is_bool ? "" : int_arith(d, t, "*", a, b);
    case Alu::Div:
      if (is_bool) return "";
      if (cls == DTypeClass::unsigned_int)
        return fmt::format("({1} == {2} ? {2} : {0} / {1})", a, b, z);
      return wrap(d, t, fmt::format("{}({}, {})", d.helper("floordiv", t), a, b));
    case Alu::IDiv:
    case Alu::Mod: {
      if (is_bool) return "";
      const char* o = op == Alu::IDiv ? "/" : "%";
      if (const_divisor) return fmt::format("({} {} {})", a, o, b);
      return fmt::format("({0} {1} ({2} == {3} ? {4} : {2}))", a, o, b, z, d.int_lit(t, 1));
    }
    case Alu::Max:
      if (is_bool) return fmt::format("({} || {})", a, b);
      return fmt::format("({0} > {1} ? {0} : {1})", a, b);
    case Alu::Min:
      if (is_bool) return fmt::format("({} && {})", a, b);
      return fmt::format("({0} < {1} ? {0} : {1})", a, b);
    case Alu::And: return is_bool ? fmt::format("({} && {})", a, b) : fmt::format("({} & {})", a, b);
    case Alu::Or: return is_bool ? fmt::format("({} || {})", a, b) : fmt::format("({} | {})", a, b);
    default: return "";
  }
}

std::string float_binary(DialectText& d, Alu op, DType t, const std::string& a,
                         const std::string& b) {
  switch (op) {
    case Alu::Add: return fmt::format("({} + {})", a, b);
    case Alu::Sub: return fmt::format("({} - {})", a, b);
    case Alu::Mul: return fmt::format("({} * {})", a, b);
    case Alu::Div: return fmt::format("({} / {})", a, b);
    case Alu::Pow: return d.math("pow", t, a, b);
    case Alu::Max: return fmt::format("{}({}, {})", d.helper("fmax", t), a, b);
    case Alu::Min: return fmt::format("{}({}, {})", d.helper("fmin", t), a, b);
    default: return "";
  }
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
  const DTypeClass cls = ir::dtype_class(operand);
  std::string r;
  switch (e.alu) {
    case Alu::Cast:
      return cast_text(d, args[0], operand, e.dtype);
    case Alu::Where: {
      const std::string c = operand == DType::boolean ? args[0] : cast_text(d, args[0], operand, DType::boolean);
      return fmt::format("({} ? {} : {})", c, args[1], args[2]);
    }
    case Alu::Not:
      if (operand != DType::boolean) return std::unexpected(unsupported(e, operand));
      return fmt::format("(!{})", args[0]);
    case Alu::Eq: case Alu::Ne: case Alu::Lt: case Alu::Le: case Alu::Gt: case Alu::Ge:
      return compare(e.alu, cls, args[0], args[1]);
    default:
      break;
  }
  if (args.size() == 1) {
    if (cls == DTypeClass::floating) r = float_unary(d, e.alu, operand, args[0]);
    else if (cls != DTypeClass::boolean) r = int_unary(d, e.alu, operand, cls, args[0]);
  } else if (args.size() == 2) {
    if (cls == DTypeClass::floating) r = float_binary(d, e.alu, operand, args[0], args[1]);
    else r = int_binary(d, e.alu, operand, cls, args[0], args[1], e.args[1]->kind == kir::ExprKind::Const && e.args[1]->ival > 0);
  }
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
      if (is_float) return d.float_lit(body, lowest ? -INFINITY : INFINITY);
      switch (body) {
        case DType::boolean: return d.int_lit(body, lowest ? 0 : 1);
        case DType::u8: return d.int_lit(body, lowest ? 0 : 255);
        case DType::i8: return d.int_lit(body, lowest ? -128 : 127);
        case DType::i32: return d.int_lit(body, lowest ? INT32_MIN : INT32_MAX);
        default: return d.int_lit(body, lowest ? INT64_MIN : INT64_MAX);
      }
    }
  }
  return std::unexpected(kiln::Error{fmt::format("gpu codegen: reduce.{} on {} is not supported",
                                                 kir::reduce_op_name(op), ir::dtype_name(body))});
}

std::string reduce_step_text(DialectText& d, ReduceOp op, DType body, const std::string& acc,
                             const std::string& v) {
  const DTypeClass cls = ir::dtype_class(body);
  const Alu alu = op == ReduceOp::Sum ? Alu::Add
                  : op == ReduceOp::Prod ? Alu::Mul
                  : op == ReduceOp::Max  ? Alu::Max
                                         : Alu::Min;
  if (cls == DTypeClass::floating) return float_binary(d, alu, body, acc, v);
  return int_binary(d, alu, body, cls, acc, v, false);
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
