// Element conversions and index helpers of the reference interpreter.
#include "interp/reference_value.h"

#include "kiln/host_tensor.h"
#include "ir/scalar_semantics.h"
#include "kiln/error.h"

namespace kiln::interp::reference {

using ir::DType;

Value make_value(DType dtype, ir::Shape shape) {
  Value v{dtype, std::move(shape), {}, {}};
  v.data.assign(static_cast<size_t>(ir::shape_numel(v.shape)), 0.0);
  return v;
}

int64_t int_at(const Value& v, int64_t i) {
  return v.exact() ? v.ints[static_cast<size_t>(i)]
                   : ir::wrap_to_int64(v.data[static_cast<size_t>(i)]);
}

bool make_exact(Value& v) {
  if (v.dtype != DType::i64) return false;
  v.ints.assign(v.data.size(), 0);
  return true;
}

void set_int(Value& v, int64_t i, int64_t x) {
  v.ints[static_cast<size_t>(i)] = x;
  v.data[static_cast<size_t>(i)] = static_cast<double>(x);
}

// Kept under the interpreter's own name (reference_value.h) for its matmul and reductions.
int64_t to_int64(double v) {
  return ir::wrap_to_int64(v);
}

double wrap_integer(int64_t v, DType dtype) {
  return static_cast<double>(ir::wrap_to_dtype(v, dtype));
}

double normalize(double v, DType dtype) {
  if (ir::is_float(dtype)) return v;
  if (dtype == DType::boolean) return v != 0 ? 1.0 : 0.0;  // NaN is true, as in C
  return wrap_integer(to_int64(v), dtype);
}

double round_to_float(double v, DType dtype) {
  KILN_CHECK(ir::is_float(dtype)) << ir::dtype_name(dtype);
  if (dtype == DType::f64) return v;
  // HostTensor's storage conversion is the definition of the narrow formats' rounding.
  ir::HostTensor cell = ir::HostTensor::zeros(dtype, {});
  cell.set(0, v);
  return cell.get(0);
}

void for_each_index(const ir::Shape& shape,
                    const std::function<void(const std::vector<int64_t>&)>& fn) {
  if (ir::shape_numel(shape) == 0) return;
  std::vector<int64_t> index(shape.size(), 0);
  while (true) {
    fn(index);
    // Odometer step: bump the last axis, carrying into earlier ones; done when axis 0 carries.
    auto axis = static_cast<int64_t>(shape.size()) - 1;
    while (axis >= 0 && ++index[axis] == shape[axis]) index[axis--] = 0;
    if (axis < 0) return;
  }
}

std::vector<int64_t> broadcast_strides(const ir::Shape& in, const ir::Shape& out) {
  KILN_CHECK(in.size() <= out.size()) << ir::shape_str(in) << " vs " << ir::shape_str(out);
  const std::vector<int64_t> contiguous = ir::contiguous_strides(in);
  const size_t lead = out.size() - in.size();
  std::vector<int64_t> strides(out.size(), 0);
  for (size_t i = 0; i < in.size(); ++i) {
    KILN_CHECK(in[i] == out[lead + i] || in[i] == 1)
        << ir::shape_str(in) << " does not broadcast to " << ir::shape_str(out);
    strides[lead + i] = in[i] == 1 ? 0 : contiguous[i];
  }
  return strides;
}

int64_t offset_of(const std::vector<int64_t>& index, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (size_t i = 0; i < index.size(); ++i) off += index[i] * strides[i];
  return off;
}

}  // namespace kiln::interp::reference
