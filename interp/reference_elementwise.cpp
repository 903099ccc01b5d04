// Reference semantics of the elementwise ops: ir/scalar_semantics.h on every element, with
// numpy broadcasting.
#include <span>

#include "interp/reference_ops.h"
#include "ir/scalar_semantics.h"

namespace kiln::interp::reference {

namespace {

using ir::DType;
using ir::Op;

// A cast to a float type rounds to it, so that cast(cast(x, f16), f32) sees f16 precision as
// every backend does; a float to an integer saturates (ir::float_to_int), an integer to a
// narrower one wraps, and a cast to bool tests against zero.
double cast(double x, DType from, DType to) {
  if (ir::is_float(to)) return round_to_float(x, to);
  if (ir::is_float(from)) return static_cast<double>(ir::float_to_int(x, to));
  return normalize(x, to);
}

double apply(const ir::Node& n, const Args& args, const double* operands) {
  if (n.op == Op::Cast) return cast(operands[0], args[0]->dtype, n.attrs.dt(ir::AttrKey::to));
  return ir::eval_elementwise(n.op, args[0]->dtype, std::span(operands, args.size()));
}

// Whether `n` computes on integers exactly (a double holds them up to 2^53 only): an op with an
// integer meaning (ir::eval_elementwise_int) whose value operands are i64 (where's condition and
// the operands of logic are bools), or a cast from or to i64.
bool on_exact_integers(const ir::Node& n, const Args& args) {
  if (n.op == Op::Cast) return n.dtype == DType::i64 || args[0]->dtype == DType::i64;
  const size_t first = n.op == Op::Where ? 1 : 0;
  if (args.size() <= first || args[first]->dtype != DType::i64) return false;
  if (n.dtype != DType::i64 && n.dtype != DType::boolean) return false;
  return ir::has_int_meaning(n.op);
}

// A cast on an exact integer: to i64 unchanged, to a float rounded from the integer, to a
// narrower integer or bool wrapped as the targets do.
double cast_int(int64_t x, DType to) {
  if (ir::is_float(to)) return round_to_float(static_cast<double>(x), to);
  return wrap_integer(x, to);
}

}  // namespace

Value eval_elementwise(const ir::Node& n, const Args& args) {
  KILN_CHECK(static_cast<int>(args.size()) == ir::op_arity(n.op))
      << ir::op_enum_name(n.op) << " with " << args.size() << " inputs";
  std::vector<std::vector<int64_t>> strides;
  for (const Value* a : args) strides.push_back(broadcast_strides(a->shape, n.shape));
  Value out = make_value(n.dtype, n.shape);
  int64_t flat = 0;
  if (on_exact_integers(n, args)) {
    const bool exact_out = make_exact(out);
    const bool float_in = ir::is_float(args[0]->dtype);
    int64_t ints[3] = {0, 0, 0};
    for_each_index(n.shape, [&](const std::vector<int64_t>& index) {
      int64_t r = 0;
      if (n.op == Op::Cast && float_in) {  // float to i64: truncated and saturated
        r = ir::float_to_int(args[0]->data[offset_of(index, strides[0])], n.dtype);
      } else {
        for (size_t i = 0; i < args.size(); ++i)
          ints[i] = int_at(*args[i], offset_of(index, strides[i]));
        if (n.op == Op::Cast) {
          if (!exact_out) {
            out.data[flat++] = cast_int(ints[0], n.dtype);
            return;
          }
          r = ints[0];
        } else {
          r = *ir::eval_elementwise_int(n.op, std::span(ints, args.size()));
        }
      }
      if (exact_out)
        set_int(out, flat, r);
      else
        out.data[flat] = static_cast<double>(r);  // a bool: 0 or 1
      ++flat;
    });
    return out;
  }
  double operands[3] = {0, 0, 0};
  for_each_index(n.shape, [&](const std::vector<int64_t>& index) {
    for (size_t i = 0; i < args.size(); ++i)
      operands[i] = args[i]->data[offset_of(index, strides[i])];
    out.data[flat++] = normalize(apply(n, args, operands), n.dtype);
  });
  return out;
}

}  // namespace kiln::interp::reference
