// kiln::resize: a composite over gather and elementwise ops; the taps (indices and weights) of
// each resized axis come from ir/resize_taps.h, as the ONNX importer's Resize does.
#include <fmt/format.h>

#include "ir/resize_taps.h"
#include "tensor_impl.h"

namespace kiln {

using detail::TensorImpl;

namespace {
// A weight or mask column for `axis`: shape [n, 1, ..., 1], broadcast along the later axes.
Shape along(int64_t n, size_t axis, size_t rank) {
  Shape s(rank - axis, 1);
  s[0] = n;
  return s;
}
}  // namespace

Tensor resize(const Tensor& x, std::vector<int64_t> sizes, std::string_view mode,
              std::string_view coordinate_transformation_mode, std::string_view nearest_mode) {
  const std::shared_ptr<TensorImpl>& impl = TensorImpl::impl_of(x);
  if (!impl || impl->error) return gather(x, x, 0);  // reports the bad operand as every op does
  auto fail = [&](std::string message) {
    return TensorImpl::make_error(impl->dev, Error{std::move(message)});
  };
  auto m = ir::parse_resize_mode(mode);
  if (!m) return fail(m.error().message);
  auto coord = ir::parse_resize_coord(coordinate_transformation_mode);
  if (!coord) return fail(coord.error().message);
  auto nearest = ir::parse_resize_nearest(nearest_mode);
  if (!nearest) return fail(nearest.error().message);
  const Shape& shape = impl->shape;
  if (sizes.size() != shape.size())
    return fail(
        fmt::format("resize: {} sizes for x of shape {}", sizes.size(), ir::shape_str(shape)));
  if (*m != ir::ResizeMode::Nearest && !ir::is_float(impl->dtype))
    return fail(
        fmt::format("resize: mode {} needs a float x, not {}", mode, ir::dtype_name(impl->dtype)));
  const Device dev = TensorImpl::device_of(impl->dev);
  Tensor y = x, inside;
  bool cropped = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    ir::ResizeAxis a;
    a.mode = *m;
    a.coord = *coord;
    a.nearest = *nearest;
    a.in = shape[d];
    a.out = sizes[d];
    a.scale = a.in > 0 ? double(a.out) / double(a.in) : 1.0;
    Expected<ir::ResizeTaps> taps = ir::resize_taps(a);
    if (!taps) return fail(taps.error().message);
    if (taps->identity(a.in)) continue;
    const int64_t out = taps->out;
    Tensor acc;
    for (int64_t t = 0; t < std::max<int64_t>(taps->taps, 1); ++t) {
      std::vector<int64_t> idx(static_cast<size_t>(out), 0);
      if (t < taps->taps) std::copy_n(taps->index.begin() + t * out, out, idx.begin());
      Tensor g =
          gather(y, Tensor::from_host(dev, std::span<const int64_t>(idx), {out}), int64_t(d));
      if (!taps->weight.empty()) {
        HostTensor w = HostTensor::zeros(impl->dtype, along(out, d, shape.size()));
        for (int64_t k = 0; k < out; ++k) w.set(k, taps->weight[t * out + k]);
        g = g * Tensor::from_host(dev, w);
      }
      acc = t == 0 ? g : acc + g;
    }
    y = acc;
    if (!taps->inside.empty()) {
      std::vector<bool> in(taps->inside.begin(), taps->inside.end());
      Tensor mask = Tensor::from_host_bool(dev, in, along(out, d, shape.size()));
      inside = cropped ? logical_and(inside, mask) : mask;
      cropped = true;
    }
  }
  // tf_crop_and_resize over whole axes stays inside but for rounding; outside reads 0.
  if (cropped) y = where(inside, y, Tensor::full(dev, {}, 0.0, impl->dtype));
  return y;
}

}  // namespace kiln
