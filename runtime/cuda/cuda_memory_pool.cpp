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
  return free_.cached_bytes();
}

size_t CudaMemoryPool::peak_live_bytes() const {
  std::lock_guard lock(mutex_);
  return free_.peak_live_bytes();
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
  std::vector<support::FreeBlocks<Block>::Sized> dropped;
  {
    std::lock_guard lock(mutex_);
    dropped = free_.release(capacity, std::move(block));
  }
  free_blocks(std::move(dropped));  // the context is current
}

CUdeviceptr CudaMemoryPool::take_ready(size_t capacity) {
  const CudaDriver& d = context_->driver();
  std::lock_guard lock(mutex_);
  auto taken = free_.take(capacity, capacity, [&](const Block& block) {
    return std::all_of(block.pending.begin(), block.pending.end(),
                       [&](CUevent event) { return d.cuEventQuery(event) == kCudaSuccess; });
  });
  if (!taken) return 0;
  destroy_events(taken->block.pending);
  return taken->block.pointer;
}

void CudaMemoryPool::free_cached() {
  std::vector<support::FreeBlocks<Block>::Sized> cached;
  {
    std::lock_guard lock(mutex_);
    cached = free_.take_all();
  }
  if (cached.empty() || !context_->make_current()) return;
  free_blocks(std::move(cached));
}

void CudaMemoryPool::free_blocks(std::vector<support::FreeBlocks<Block>::Sized> blocks) const {
  const CudaDriver& d = context_->driver();
  for (auto& [capacity, block] : blocks) {
    for (CUevent event : block.pending) d.cuEventSynchronize(event);
    destroy_events(block.pending);
    d.cuMemFree(block.pointer);
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
    std::lock_guard lock(mutex_);
    free_.note_fresh(capacity);
  }
  return std::shared_ptr<DeviceMemory>(
      std::make_shared<CudaMemory>(shared_from_this(), pointer, capacity, bytes));
}

}  // namespace kiln::runtime::cuda
