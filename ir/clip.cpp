// clip as max then min: a primitive row of its own would add nothing the two do not already say
// (NaN propagation, integer dtypes, lo > hi), and the fuser makes them one kernel anyway.
#include "ir/clip.h"

#include "ir/builder_support.h"

namespace kiln::ir {

NodeResult clip(Builder& b, const Node* x, const Node* lo, const Node* hi) {
  if (x->dtype == DType::boolean)
    return detail::op_error("clip", "needs a numeric dtype, got bool");
  for (const Node* bound : {lo, hi})
    if (bound && bound->dtype != x->dtype)
      return detail::op_error("clip", "bound {}{} does not have x's dtype {}",
                              dtype_name(bound->dtype), shape_str(bound->shape),
                              dtype_name(x->dtype));
  const Node* y = x;
  if (lo) {
    KILN_IR_TRY(y, b.binary(Op::Max, y, lo));
  }
  if (hi) {
    KILN_IR_TRY(y, b.binary(Op::Min, y, hi));
  }
  return y;
}

}  // namespace kiln::ir
