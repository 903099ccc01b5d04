// Buffer and BufferPool.
#include "runtime/buffer.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <new>
#include <optional>

#include <fmt/format.h>

#include "kiln/error.h"
#include "support/host_memory.h"

namespace kiln::runtime {

namespace {
// No single buffer beyond 2^47 bytes (128 TiB, x86-64's user address space): larger requests
// are errors at once, and support::host_block_capacity never overflows.
constexpr size_t kMaxAllocation = size_t{1} << 47;

}  // namespace

Buffer::Buffer(ir::DType dtype, ir::Shape shape, std::byte* data, size_t capacity,
               std::shared_ptr<BufferPool> pool, bool persistent)
    : dtype_(dtype), shape_(std::move(shape)), data_(data), capacity_(capacity),
      pool_(std::move(pool)), persistent_(persistent) {}

std::shared_ptr<Buffer> Buffer::external(ir::DType dtype, ir::Shape shape, std::byte* data,
                                         std::function<void()> release) {
  auto b = std::make_shared<Buffer>(dtype, std::move(shape), data, 0, nullptr, false);
  b->capacity_ = b->nbytes();
  b->release_ = std::move(release);
  return b;
}

Buffer::~Buffer() {
  if (pool_) pool_->release(data_, capacity_, persistent_);
  else if (release_) release_();
}

ir::HostTensor Buffer::to_host() const {
  ir::HostTensor t{dtype_, shape_, std::vector<std::byte>(nbytes())};
  if (!t.bytes.empty()) std::memcpy(t.bytes.data(), data_, t.bytes.size());
  return t;
}

std::shared_ptr<BufferPool> BufferPool::create(PersistentMemory mode, std::string device) {
  return std::shared_ptr<BufferPool>(new BufferPool(mode, std::move(device)));
}

BufferPool::~BufferPool() {
  for (auto& [cap, data] : free_.take_all()) support::free_host_block(data, cap);
}

namespace {

// The bytes of a dtype[shape] tensor; nullopt when the count does not fit in size_t.
std::optional<size_t> tensor_bytes(ir::DType dtype, const ir::Shape& shape) {
  size_t n = ir::dtype_size(dtype);
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, static_cast<size_t>(d), &n)) return std::nullopt;
  return n;
}

kiln::Error out_of_memory(const std::string& device, std::string_view what, ir::DType dtype,
                          const ir::Shape& shape, std::optional<size_t> bytes) {
  const std::string size =
      bytes ? fmt::format("{} bytes", *bytes) : std::string("more bytes than an address space holds");
  return kiln::Error{fmt::format("out of memory on device '{}': cannot allocate {} for {} ({}{})",
                                 device, size, what, ir::dtype_name(dtype), ir::shape_str(shape))};
}

}  // namespace

void BufferPool::trim() {
  std::vector<support::FreeBlocks<std::byte*>::Sized> blocks;
  {
    std::lock_guard lock(mu_);
    blocks = free_.take_all();
  }
  for (auto& [cap, data] : blocks) support::free_host_block(data, cap);
}

std::byte* BufferPool::system_alloc(size_t capacity) {
  auto take = [capacity] {
    return support::allocate_host_block(capacity);
  };
  if (std::byte* data = take()) return data;
  trim();
  return take();
}

Expected<std::shared_ptr<Buffer>> BufferPool::allocate(ir::DType dtype, const ir::Shape& shape,
                                                       std::string_view what) {
  const std::optional<size_t> bytes = tensor_bytes(dtype, shape);
  if (!bytes || *bytes > kMaxAllocation)
    return std::unexpected(out_of_memory(device_, what, dtype, shape, bytes));
  size_t cap = support::host_block_capacity(*bytes);
  std::byte* data = nullptr;
  {
    std::lock_guard lock(mu_);
    // Reuse a block of exactly this capacity, or one at most 1/8 larger.
    if (auto cached = free_.take(cap, cap + cap / 8)) {
      cap = cached->capacity;
      data = cached->block;
    }
  }
  if (!data) {
    data = system_alloc(cap);
    if (!data) return std::unexpected(out_of_memory(device_, what, dtype, shape, bytes));
    if (on_fresh_) on_fresh_(cap);
    std::lock_guard lock(mu_);
    free_.note_fresh(cap);
  }
  return std::make_shared<Buffer>(dtype, shape, data, cap, shared_from_this());
}

Expected<std::shared_ptr<Buffer>> BufferPool::allocate_persistent(ir::DType dtype,
                                                                  const ir::Shape& shape,
                                                                  std::string_view what) {
  const std::optional<size_t> bytes = tensor_bytes(dtype, shape);
  if (!bytes || *bytes > kMaxAllocation)
    return std::unexpected(out_of_memory(device_, what, dtype, shape, bytes));
  const size_t cap = support::host_block_capacity(*bytes);
  std::byte* data = system_alloc(cap);
  if (!data) return std::unexpected(out_of_memory(device_, what, dtype, shape, bytes));
  {
    std::lock_guard lock(mu_);
    persistent_bytes_ += cap;
  }
  if (on_fresh_) on_fresh_(cap);
  return std::make_shared<Buffer>(dtype, shape, data, cap, shared_from_this(), /*persistent=*/true);
}

Expected<std::shared_ptr<Buffer>> BufferPool::allocate_result(ir::DType dtype,
                                                              const ir::Shape& shape,
                                                              std::string_view what) {
  return mode_ == PersistentMemory::enforced ? allocate_persistent(dtype, shape, what)
                                             : allocate(dtype, shape, what);
}

Expected<std::shared_ptr<Buffer>> BufferPool::from_host(const ir::HostTensor& t,
                                                        std::string_view what) {
  auto b = mode_ == PersistentMemory::disabled ? allocate(t.dtype, t.shape, what)
                                               : allocate_persistent(t.dtype, t.shape, what);
  if (!b) return b;
  KILN_CHECK(t.bytes.size() == (*b)->nbytes()) << "host tensor byte size";
  if (!t.bytes.empty()) std::memcpy((*b)->data(), t.bytes.data(), t.bytes.size());
  return b;
}

void BufferPool::release(std::byte* data, size_t capacity, bool persistent) {
  std::lock_guard lock(mu_);
  if (persistent) {
    persistent_bytes_ -= capacity;
    support::free_host_block(data, capacity);
    return;
  }
  for (auto& [cap, dropped] : free_.release(capacity, data)) support::free_host_block(dropped, cap);
}

size_t BufferPool::peak_live_bytes() const {
  std::lock_guard lock(mu_);
  return free_.peak_live_bytes();
}

void BufferPool::set_fresh_allocation_observer(std::function<void(size_t)> observer) {
  std::lock_guard lock(mu_);
  on_fresh_ = std::move(observer);
}

size_t BufferPool::cached_bytes() const {
  std::lock_guard lock(mu_);
  return free_.cached_bytes();
}

size_t BufferPool::persistent_bytes() const {
  std::lock_guard lock(mu_);
  return persistent_bytes_;
}

}  // namespace kiln::runtime
