// Checked construction of the indexed reads gather and gather_elements and of the indexed write
// scatter_elements, in the canonical attribute form of ir/builder.h's node attribute contract.
#include "ir/builder.h"
#include "ir/builder_support.h"

namespace kiln::ir {

namespace {

using detail::op_error;

Expected<void> check_index_dtype(std::string_view op, const Node* idx) {
  if (idx->dtype == DType::i32 || idx->dtype == DType::i64) return {};
  return op_error(op, "indices must be i32 or i64, got {}{}", dtype_name(idx->dtype),
                  shape_str(idx->shape));
}

// An axis of length 0 has no element an index could read: only an empty result is possible.
Expected<void> check_readable(std::string_view op, const Node* x, int64_t axis, const Shape& out) {
  if (x->shape[static_cast<size_t>(axis)] != 0 || shape_numel(out) == 0) return {};
  return op_error(op, "axis {} of {} is empty, so the indices of shape {} have nothing to read",
                  axis, shape_str(x->shape), shape_str(out));
}

}  // namespace

NodeResult Builder::gather(const Node* x, const Node* idx, int64_t axis) {
  KILN_IR_OK(check_index_dtype("gather", idx));
  KILN_IR_TRY(int64_t a, detail::normalize_one_axis("gather", axis, x->shape));
  auto k = static_cast<size_t>(a);
  Shape out(x->shape.begin(), x->shape.begin() + static_cast<std::ptrdiff_t>(k));
  out.insert(out.end(), idx->shape.begin(), idx->shape.end());
  out.insert(out.end(), x->shape.begin() + static_cast<std::ptrdiff_t>(k) + 1, x->shape.end());
  KILN_IR_OK(detail::check_numel("gather", out));
  KILN_IR_OK(check_readable("gather", x, a, out));
  return g_.make(Op::Gather, x->dtype, std::move(out), {x, idx}, Attrs{{AttrKey::axis, a}});
}

NodeResult Builder::gather_elements(const Node* x, const Node* idx, int64_t axis) {
  KILN_IR_OK(check_index_dtype("gather_elements", idx));
  if (idx->shape.size() != x->shape.size())
    return op_error("gather_elements", "indices {} and data {} differ in rank",
                    shape_str(idx->shape), shape_str(x->shape));
  KILN_IR_TRY(int64_t a, detail::normalize_one_axis("gather_elements", axis, x->shape));
  for (size_t d = 0; d < x->shape.size(); ++d)
    if (static_cast<int64_t>(d) != a && idx->shape[d] > x->shape[d])
      return op_error("gather_elements",
                      "indices {} are longer than data {} on axis {} (only axis {} may differ)",
                      shape_str(idx->shape), shape_str(x->shape), d, a);
  KILN_IR_OK(check_readable("gather_elements", x, a, idx->shape));
  return g_.make(Op::GatherElements, x->dtype, idx->shape, {x, idx}, Attrs{{AttrKey::axis, a}});
}

NodeResult Builder::scatter_elements(const Node* x, const Node* idx, const Node* upd, int64_t axis,
                                     std::string_view reduction) {
  constexpr std::string_view op = "scatter_elements";
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" &&
      reduction != "min")
    return op_error(op, "reduction must be none, add, mul, max or min, got '{}'", reduction);
  KILN_IR_OK(check_index_dtype(op, idx));
  if (reduction != "none" && x->dtype == DType::boolean)
    return op_error(op, "reduction {} needs a numeric dtype, got bool", reduction);
  if (upd->dtype != x->dtype)
    return op_error(op, "updates {}{} and data {}{} differ in dtype", dtype_name(upd->dtype),
                    shape_str(upd->shape), dtype_name(x->dtype), shape_str(x->shape));
  if (upd->shape != idx->shape)
    return op_error(op, "updates {} and indices {} differ in shape", shape_str(upd->shape),
                    shape_str(idx->shape));
  if (x->shape.empty())
    return op_error(op, "needs data of rank >= 1, got the scalar {}{}", dtype_name(x->dtype),
                    shape_str(x->shape));
  if (idx->shape.size() != x->shape.size())
    return op_error(op, "indices {} and data {} differ in rank", shape_str(idx->shape),
                    shape_str(x->shape));
  KILN_IR_TRY(int64_t a, detail::normalize_one_axis(op, axis, x->shape));
  for (size_t d = 0; d < x->shape.size(); ++d)
    if (static_cast<int64_t>(d) != a && idx->shape[d] > x->shape[d])
      return op_error(op, "indices {} are longer than data {} on axis {} (only axis {} may differ)",
                      shape_str(idx->shape), shape_str(x->shape), d, a);
  return g_.make(Op::ScatterElements, x->dtype, x->shape, {x, idx, upd},
                 Attrs{{AttrKey::axis, a}, {AttrKey::reduction, std::string(reduction)}});
}

}  // namespace kiln::ir
