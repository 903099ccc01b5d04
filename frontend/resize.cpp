// kiln::resize: one resize row (kiln/ops.def, ir/resize_taps.h) per axis that moves, the last axis
// first, as the ONNX importer's Resize builds it.
#include <fmt/format.h>

#include "ir/builder_support.h"
#include "ir/resize_taps.h"
#include "tensor_impl.h"

namespace kiln {

using detail::TensorImpl;

Tensor resize(const Tensor& x, std::vector<int64_t> sizes, std::string_view mode,
              std::string_view coordinate_transformation_mode, std::string_view nearest_mode) {
  struct Spec {
    std::vector<int64_t> sizes;
    std::string mode, coord, nearest;
  };
  Spec spec{std::move(sizes), std::string(mode), std::string(coordinate_transformation_mode),
            std::string(nearest_mode)};
  return TensorImpl::apply({&x}, [spec](ir::Builder& b, const detail::Nodes& n) -> ir::NodeResult {
    const ir::Node* y = n[0];
    KILN_IR_TRY(const ir::ResizeMode m, ir::parse_resize_mode(spec.mode));
    KILN_IR_TRY(const ir::ResizeCoord coord, ir::parse_resize_coord(spec.coord));
    KILN_IR_TRY(const ir::ResizeNearest nearest, ir::parse_resize_nearest(spec.nearest));
    const Shape& shape = y->shape;
    if (spec.sizes.size() != shape.size())
      return make_error(fmt::format("resize: {} sizes for x of shape {}", spec.sizes.size(),
                                    ir::shape_str(shape)));
    for (size_t d = shape.size(); d-- > 0;) {
      ir::ResizeAxis a;
      a.mode = m;
      a.coord = coord;
      a.nearest = nearest;
      a.in = shape[d];
      a.out = spec.sizes[d];
      a.scale = a.in > 0 ? double(a.out) / double(a.in) : 1.0;
      if (ir::resize_is_identity(a)) continue;
      KILN_IR_TRY(y, b.resize(y, static_cast<int64_t>(d), a));
    }
    return y;
  });
}

}  // namespace kiln
