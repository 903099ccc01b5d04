// Pooled CUDA device memory with stream-ordered reuse (see cuda_memory_pool.h for the scheme).
#include "runtime/cuda/cuda_memory_pool.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

namespace kiln::runtime::cuda {

CudaMemory::~CudaMemory() {
  pool_->release(pointer_, capacity_, users_);
}

void CudaMemory::used_by(const std::shared_ptr<CudaStreamHandle>& stream) {
  std::lock_guard lock(mutex_);
  for (const auto& user : users_)
    if (!user.owner_before(stream) && !stream.owner_before(user)) return;  // already noted
  users_.emplace_back(stream);
}

size_t CudaMemoryPool::size_class(size_t bytes) {
  constexpr size_t kMinimum = 512;
  constexpr size_t kLargest = size_t{64} << 20;
  constexpr size_t kLargeStep = size_t{2} << 20;
  if (bytes <= kMinimum) return kMinimum;
  if (bytes <= kLargest) return std::bit_ceil(bytes);
  return (bytes + kLargeStep - 1) / kLargeStep * kLargeStep;
}

CudaMemoryPool::~CudaMemoryPool() {
  free_cached();
}

size_t CudaMemoryPool::cached_bytes() const {
  std::lock_guard lock(mutex_);
  return cached_bytes_;
}

void CudaMemoryPool::destroy_events(const std::vector<CUevent>& events) const {
  for (CUevent event : events) context_->driver().cuEventDestroy(event);
}

void CudaMemoryPool::release(CUdeviceptr pointer, size_t capacity,
                             const std::vector<std::weak_ptr<CudaStreamHandle>>& users) {
  const CudaDriver& d = context_->driver();
  Block block{pointer, {}};
  if (!context_->make_current()) return;  // a lost context: the block is gone with it
  for (const auto& weak : users) {
    std::shared_ptr<CudaStreamHandle> stream = weak.lock();
    if (!stream) continue;  // destroyed streams have synchronized
    CUevent event = nullptr;
    if (d.cuEventCreate(&event, kEventDisableTiming) == kCudaSuccess &&
        d.cuEventRecord(event, stream->get()) == kCudaSuccess) {
      block.pending.push_back(event);
      continue;
    }
    // No event to order by: wait here instead, so the block is never reused too early.
    if (event) d.cuEventDestroy(event);
    d.cuStreamSynchronize(stream->get());
  }
  std::lock_guard lock(mutex_);
  free_[capacity].push_back(std::move(block));
  cached_bytes_ += capacity;
}

CUdeviceptr CudaMemoryPool::take_ready(size_t capacity) {
  const CudaDriver& d = context_->driver();
  std::lock_guard lock(mutex_);
  auto list = free_.find(capacity);
  if (list == free_.end()) return 0;
  std::vector<Block>& blocks = list->second;
  for (auto it = blocks.begin(); it != blocks.end(); ++it) {
    const bool ready = std::all_of(it->pending.begin(), it->pending.end(), [&](CUevent event) {
      return d.cuEventQuery(event) == kCudaSuccess;
    });
    if (!ready) continue;
    const CUdeviceptr pointer = it->pointer;
    destroy_events(it->pending);
    blocks.erase(it);
    cached_bytes_ -= capacity;
    return pointer;
  }
  return 0;
}

void CudaMemoryPool::free_cached() {
  std::map<size_t, std::vector<Block>> cached;
  {
    std::lock_guard lock(mutex_);
    cached.swap(free_);
    cached_bytes_ = 0;
  }
  if (cached.empty() || !context_->make_current()) return;
  const CudaDriver& d = context_->driver();
  for (auto& [capacity, blocks] : cached) {
    for (Block& block : blocks) {
      for (CUevent event : block.pending) d.cuEventSynchronize(event);
      destroy_events(block.pending);
      d.cuMemFree(block.pointer);
    }
  }
}

Expected<std::shared_ptr<DeviceMemory>> CudaMemoryPool::allocate(size_t bytes) {
  const size_t capacity = size_class(bytes);
  if (auto ok = context_->make_current(); !ok) return std::unexpected(ok.error());
  CUdeviceptr pointer = take_ready(capacity);
  if (pointer == 0) {
    const CudaDriver& d = context_->driver();
    CUresult result = d.cuMemAlloc(&pointer, capacity);
    if (result == kCudaErrorOutOfMemory) {
      free_cached();
      result = d.cuMemAlloc(&pointer, capacity);
    }
    if (auto ok = d.check(result, fmt::format("cuMemAlloc of {} bytes (for a {}-byte buffer) on "
                                              "device {}",
                                              capacity, bytes, context_->ordinal()));
        !ok)
      return std::unexpected(ok.error());
  }
  return std::shared_ptr<DeviceMemory>(
      std::make_shared<CudaMemory>(shared_from_this(), pointer, capacity, bytes));
}

}  // namespace kiln::runtime::cuda
