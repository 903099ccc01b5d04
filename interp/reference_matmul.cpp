// Reference semantics of matmul: numpy.matmul on rank >= 2 operands with broadcast batch dims.
#include "interp/reference_ops.h"

namespace kiln::interp::reference {

namespace {

ir::Shape batch_of(const ir::Shape& s) {
  return ir::Shape(s.begin(), s.end() - 2);
}

// Integer dot products wrap (exact int64 arithmetic); bool ones are "any a && b" like numpy.
double dot(const double* a, int64_t a_step, const double* b, int64_t b_step, int64_t k,
           ir::DType dtype) {
  if (ir::is_int(dtype) || dtype == ir::DType::boolean) {
    uint64_t acc = 0;
    for (int64_t i = 0; i < k; ++i)
      acc += static_cast<uint64_t>(to_int64(a[i * a_step])) *
             static_cast<uint64_t>(to_int64(b[i * b_step]));
    return wrap_integer(static_cast<int64_t>(acc), dtype);
  }
  double acc = 0;
  for (int64_t i = 0; i < k; ++i) acc += a[i * a_step] * b[i * b_step];
  return acc;
}

}  // namespace

Value eval_matmul(const ir::Node& n, const Value& a, const Value& b) {
  KILN_CHECK(a.shape.size() >= 2 && b.shape.size() >= 2 && n.shape.size() >= 2)
      << "matmul of " << ir::shape_str(a.shape) << " and " << ir::shape_str(b.shape);
  const int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back(), nn = b.shape.back();
  KILN_CHECK(b.shape[b.shape.size() - 2] == k && n.shape[n.shape.size() - 2] == m &&
             n.shape.back() == nn)
      << "matmul of " << ir::shape_str(a.shape) << " and " << ir::shape_str(b.shape) << " into "
      << ir::shape_str(n.shape);
  const ir::Shape out_batch = batch_of(n.shape);
  // Batch strides count whole matrices; broadcast batch axes have stride 0.
  const std::vector<int64_t> a_batch = broadcast_strides(batch_of(a.shape), out_batch);
  const std::vector<int64_t> b_batch = broadcast_strides(batch_of(b.shape), out_batch);
  Value out = make_value(n.dtype, n.shape);
  int64_t batch = 0;
  for_each_index(out_batch, [&](const std::vector<int64_t>& index) {
    const double* am = a.data.data() + offset_of(index, a_batch) * m * k;
    const double* bm = b.data.data() + offset_of(index, b_batch) * k * nn;
    double* om = out.data.data() + batch++ * m * nn;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < nn; ++j)
        om[i * nn + j] = normalize(dot(am + i * k, 1, bm + j, nn, k, a.dtype), n.dtype);
  });
  return out;
}

}  // namespace kiln::interp::reference
