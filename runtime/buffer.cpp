// Buffer and BufferPool.
#include "runtime/buffer.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "ir/error.h"

namespace kiln::runtime {

namespace {
constexpr size_t kAlign = 64;
// Cached free blocks beyond this are returned to the system.
constexpr size_t kMaxCachedBytes = size_t{4} << 30;

size_t round_capacity(size_t bytes) {
  size_t n = std::max<size_t>(bytes, kAlign);
  return (n + kAlign - 1) / kAlign * kAlign;
}
}  // namespace

Buffer::Buffer(ir::DType dtype, ir::Shape shape, std::byte* data, size_t capacity,
               std::shared_ptr<BufferPool> pool, bool persistent)
    : dtype_(dtype), shape_(std::move(shape)), data_(data), capacity_(capacity),
      pool_(std::move(pool)), persistent_(persistent) {}

Buffer::~Buffer() { pool_->release(data_, capacity_, persistent_); }

ir::HostTensor Buffer::to_host() const {
  ir::HostTensor t{dtype_, shape_, std::vector<std::byte>(nbytes())};
  if (!t.bytes.empty()) std::memcpy(t.bytes.data(), data_, t.bytes.size());
  return t;
}

std::shared_ptr<BufferPool> BufferPool::create(PersistentMemory mode) {
  return std::shared_ptr<BufferPool>(new BufferPool(mode));
}

BufferPool::~BufferPool() {
  for (auto& [cap, p] : free_) std::free(p);
}

std::shared_ptr<Buffer> BufferPool::allocate(ir::DType dtype, const ir::Shape& shape) {
  size_t bytes = static_cast<size_t>(ir::shape_numel(shape)) * ir::dtype_size(dtype);
  size_t cap = round_capacity(bytes);
  std::byte* data = nullptr;
  {
    std::lock_guard lock(mu_);
    // Reuse a block of exactly this capacity, or one at most 1/8 larger.
    auto it = free_.lower_bound(cap);
    if (it != free_.end() && it->first <= cap + cap / 8) {
      cap = it->first;
      data = it->second;
      cached_bytes_ -= cap;
      free_.erase(it);
    }
  }
  if (!data) {
    data = static_cast<std::byte*>(std::aligned_alloc(kAlign, cap));
    if (!data) throw std::bad_alloc();
    if (on_fresh_) on_fresh_(cap);
  }
  return std::make_shared<Buffer>(dtype, shape, data, cap, shared_from_this());
}

std::shared_ptr<Buffer> BufferPool::allocate_persistent(ir::DType dtype, const ir::Shape& shape) {
  size_t cap = round_capacity(static_cast<size_t>(ir::shape_numel(shape)) * ir::dtype_size(dtype));
  auto* data = static_cast<std::byte*>(std::aligned_alloc(kAlign, cap));
  if (!data) throw std::bad_alloc();
  {
    std::lock_guard lock(mu_);
    persistent_bytes_ += cap;
  }
  if (on_fresh_) on_fresh_(cap);
  return std::make_shared<Buffer>(dtype, shape, data, cap, shared_from_this(), /*persistent=*/true);
}

std::shared_ptr<Buffer> BufferPool::allocate_result(ir::DType dtype, const ir::Shape& shape) {
  return mode_ == PersistentMemory::enforced ? allocate_persistent(dtype, shape)
                                             : allocate(dtype, shape);
}

std::shared_ptr<Buffer> BufferPool::from_host(const ir::HostTensor& t) {
  auto b = mode_ == PersistentMemory::disabled ? allocate(t.dtype, t.shape)
                                               : allocate_persistent(t.dtype, t.shape);
  KILN_CHECK(t.bytes.size() == b->nbytes()) << "host tensor byte size";
  if (!t.bytes.empty()) std::memcpy(b->data(), t.bytes.data(), t.bytes.size());
  return b;
}

void BufferPool::release(std::byte* data, size_t capacity, bool persistent) {
  std::lock_guard lock(mu_);
  if (persistent) {
    persistent_bytes_ -= capacity;
    std::free(data);
    return;
  }
  if (cached_bytes_ + capacity > kMaxCachedBytes) {
    std::free(data);
    return;
  }
  free_.emplace(capacity, data);
  cached_bytes_ += capacity;
}

void BufferPool::set_fresh_allocation_observer(std::function<void(size_t)> observer) {
  std::lock_guard lock(mu_);
  on_fresh_ = std::move(observer);
}

size_t BufferPool::cached_bytes() const {
  std::lock_guard lock(mu_);
  return cached_bytes_;
}

size_t BufferPool::persistent_bytes() const {
  std::lock_guard lock(mu_);
  return persistent_bytes_;
}

}  // namespace kiln::runtime
