// DLPack exchange (Tensor::from_dlpack, Tensor::to_dlpack): kiln's host buffers handed out and
// taken in without a copy where the layout allows.
#include <dlpack/dlpack.h>

#include <cstring>
#include <optional>
#include <span>
#include <utility>

#include <fmt/ranges.h>

#include "tensor_impl.h"

namespace kiln {

using detail::TensorImpl;

namespace {

// DLPack 0.8's kDLBool (Debian's dlpack 0.6 predates it): numpy >= 1.25 and torch use it.
constexpr uint8_t kDLBoolCode = 6;

std::optional<DType> from_dl(DLDataType t) {
  if (t.lanes != 1) return std::nullopt;
  switch (t.code) {
    case kDLFloat:
      if (t.bits == 32) return DType::f32;
      if (t.bits == 64) return DType::f64;
      if (t.bits == 16) return DType::f16;
      return std::nullopt;
    case kDLBfloat: return t.bits == 16 ? std::optional(DType::bf16) : std::nullopt;
    case kDLInt:
      if (t.bits == 32) return DType::i32;
      if (t.bits == 64) return DType::i64;
      if (t.bits == 8) return DType::i8;
      return std::nullopt;
    case kDLUInt: return t.bits == 8 ? std::optional(DType::u8) : std::nullopt;
    default: return t.code == kDLBoolCode && t.bits == 8 ? std::optional(DType::boolean) : std::nullopt;
  }
}

DLDataType to_dl(DType t) {
  const auto bits = static_cast<uint8_t>(8 * ir::dtype_size(t));
  switch (t) {
    case DType::f32:
    case DType::f64:
    case DType::f16: return {kDLFloat, bits, 1};
    case DType::bf16: return {kDLBfloat, bits, 1};
    case DType::i32:
    case DType::i64:
    case DType::i8: return {kDLInt, bits, 1};
    case DType::u8: return {kDLUInt, bits, 1};
    case DType::boolean: return {kDLBoolCode, bits, 1};
  }
  return {kDLFloat, 32, 1};
}

std::string describe(DLDataType t) {
  return fmt::format("code {} bits {} lanes {}", static_cast<int>(t.code), static_cast<int>(t.bits),
                     t.lanes);
}

// What an exported tensor owns: the buffer (kept alive) and the shape DLPack points at.
struct Export {
  DLManagedTensor managed{};
  std::shared_ptr<runtime::Buffer> buffer;
  std::vector<int64_t> shape;
};

}  // namespace

Tensor Tensor::from_dlpack(const Device& dev, DLManagedTensor* managed) {
  if (!dev.state_) return TensorImpl::make_error(nullptr, Error{"from_dlpack: device is not open"});
  if (!managed) return TensorImpl::make_error(dev.state_, Error{"from_dlpack: the tensor is null"});
  const DLTensor& t = managed->dl_tensor;
  auto fail = [&](std::string why) {
    return TensorImpl::make_error(dev.state_, Error{"from_dlpack: " + std::move(why)});
  };
  if (t.device.device_type != kDLCPU)
    return fail(fmt::format("the tensor is on DLPack device type {}; kiln takes CPU memory (kDLCPU, "
                            "1): copy it to the host first",
                            static_cast<int>(t.device.device_type)));
  const std::optional<DType> dtype = from_dl(t.dtype);
  if (!dtype) return fail(fmt::format("no kiln dtype is DLPack's {}", describe(t.dtype)));
  if (t.ndim < 0) return fail(fmt::format("ndim {} is negative", t.ndim));
  if (t.ndim > 0 && !t.shape) return fail("the shape is null");
  Shape shape(t.shape, t.shape + t.ndim);
  if (auto problem = ir::shape_size_problem(shape))
    return fail(fmt::format("shape {} {}", ir::shape_brief(shape), *problem));
  const int64_t numel = ir::shape_numel(shape);
  const auto size = static_cast<int64_t>(ir::dtype_size(*dtype));
  auto* base = static_cast<std::byte*>(t.data) + t.byte_offset;
  if (numel > 0 && !t.data) return fail("the data pointer is null");
  // The bytes the strides reach from the first element: past 2^56 (more than any x86-64 address
  // space) they cannot describe memory, and their products would wrap a 64-bit offset.
  if (t.strides && numel > 0) {
    __int128 reach = 0;
    for (size_t i = 0; i < shape.size(); ++i) {
      const __int128 stride = t.strides[i];
      reach += (stride < 0 ? -stride : stride) * (shape[i] - 1) * size;
    }
    if (reach >= (__int128{1} << 56))
      return fail(fmt::format("strides [{}] of shape {} reach past any address space",
                              fmt::join(std::span(t.strides, static_cast<size_t>(t.ndim)), ","),
                              ir::shape_str(shape)));
  }
  // Row-major compact: strides null, or each equal to the product of the extents after it
  // (an axis of extent 1 may have any stride).
  bool compact = true;
  if (t.strides) {
    int64_t expect = 1;
    for (int64_t i = t.ndim - 1; i >= 0; --i) {
      if (shape[static_cast<size_t>(i)] != 1 && t.strides[i] != expect) compact = false;
      expect *= shape[static_cast<size_t>(i)];
    }
  }
  const bool aligned = reinterpret_cast<uintptr_t>(base) % static_cast<uintptr_t>(size) == 0;
  if (compact && aligned) {
    auto buffer = runtime::Buffer::external(*dtype, shape, base, [managed] {
      if (managed->deleter) managed->deleter(managed);
    });
    return TensorImpl::make_leaf(dev.state_, std::move(buffer));
  }
  // Strided or misaligned: gathered element by element into a kiln buffer.
  HostTensor h{*dtype, shape, std::vector<std::byte>(static_cast<size_t>(numel * size))};
  const std::vector<int64_t> strides =
      t.strides ? std::vector<int64_t>(t.strides, t.strides + t.ndim) : ir::contiguous_strides(shape);
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t n = 0; n < numel; ++n) {
    int64_t offset = 0;
    for (size_t i = 0; i < shape.size(); ++i) offset += index[i] * strides[i];
    std::memcpy(h.bytes.data() + n * size, base + offset * size, static_cast<size_t>(size));
    for (size_t i = shape.size(); i-- > 0;) {
      if (++index[i] < shape[i]) break;
      index[i] = 0;
    }
  }
  if (managed->deleter) managed->deleter(managed);
  return from_host(dev, h);
}

Expected<DLManagedTensor*> Tensor::to_dlpack() {
  if (auto r = realize(); !r) return std::unexpected(r.error());
  auto e = std::make_unique<Export>();
  e->buffer = impl_->realized_buffer();
  e->shape = e->buffer->shape();
  DLTensor& t = e->managed.dl_tensor;
  t.data = e->buffer->data();
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(e->shape.size());
  t.dtype = to_dl(e->buffer->dtype());
  t.shape = e->shape.data();
  t.strides = nullptr;
  t.byte_offset = 0;
  e->managed.manager_ctx = e.get();
  e->managed.deleter = [](DLManagedTensor* self) { delete static_cast<Export*>(self->manager_ctx); };
  return &e.release()->managed;
}

}  // namespace kiln
