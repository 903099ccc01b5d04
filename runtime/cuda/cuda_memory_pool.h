// Pooled CUDA device memory: size-class free lists over cuMemAlloc, reused in stream order.
//
// How stream order is kept: a block remembers every stream that enqueued a copy or launch on it
// (CudaMemory::used_by). When the last reference to the block goes, the pool records one event on
// each of those streams that is still alive, after all work enqueued so far, and files the block
// under its size class with those events. allocate() hands a cached block out again only when all
// its events have completed (cuEventQuery), i.e. when every copy and launch that could still read
// or write it has finished; a destroyed stream has synchronized, so it needs no event. When
// cuMemAlloc reports out of memory, the pool waits for the cached blocks' events, frees them all
// and tries once more.
//
// The cached blocks are bounded as the cpu's are (support/free_blocks.h): at most twice the most
// bytes live at once (at least `min_cached`, 64 MiB; less in tests), the blocks released longest
// ago freed first (after their events), so that a server meeting new sizes does not fill the GPU
// with free blocks that the program's other users of the device then cannot have.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "kiln/error.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/gpu_backend.h"
#include "support/free_blocks.h"

namespace kiln::runtime::cuda {

class CudaMemoryPool;

// One block handed out by the pool; returns to it when destroyed.
class CudaMemory final : public DeviceMemory {
 public:
  CudaMemory(std::shared_ptr<CudaMemoryPool> pool, CUdeviceptr pointer, size_t capacity,
             size_t bytes)
      : pool_(std::move(pool)), pointer_(pointer), capacity_(capacity), bytes_(bytes) {}
  ~CudaMemory() override;
  size_t bytes() const override { return bytes_; }
  CUdeviceptr pointer() const { return pointer_; }
  // Notes that `stream` enqueued work on this block (thread-safe).
  void used_by(const std::shared_ptr<CudaStreamHandle>& stream);

 private:
  std::shared_ptr<CudaMemoryPool> pool_;
  CUdeviceptr pointer_;
  size_t capacity_;  // the size class actually allocated
  size_t bytes_;     // what was asked for
  std::mutex mutex_;
  std::vector<std::weak_ptr<CudaStreamHandle>> users_;
};

class CudaMemoryPool : public std::enable_shared_from_this<CudaMemoryPool> {
 public:
  explicit CudaMemoryPool(std::shared_ptr<const CudaContext> context,
                          size_t min_cached = support::kMinCachedBytes)
      : context_(std::move(context)), free_(min_cached) {}
  ~CudaMemoryPool();
  CudaMemoryPool(const CudaMemoryPool&) = delete;
  CudaMemoryPool& operator=(const CudaMemoryPool&) = delete;

  // A block of at least `bytes` (its bytes() is `bytes`); the driver's message on failure.
  Expected<std::shared_ptr<DeviceMemory>> allocate(size_t bytes);
  // Bytes held in free lists (for tests and `kiln devices`).
  size_t cached_bytes() const;
  // The most bytes live at once so far (the cache's bound is twice this).
  size_t peak_live_bytes() const;

  // The capacity allocated for a request of `bytes`: powers of two from 512 bytes up to 64 MiB,
  // then multiples of 2 MiB (so large tensors waste little).
  static size_t size_class(size_t bytes);

 private:
  friend class CudaMemory;
  struct Block {
    CUdeviceptr pointer = 0;
    std::vector<CUevent> pending;  // reuse once all have completed
  };
  // Called by ~CudaMemory: records events on `users` and files the block.
  void release(CUdeviceptr pointer, size_t capacity,
               const std::vector<std::weak_ptr<CudaStreamHandle>>& users);
  // A cached block of `capacity` whose events have all completed; 0 when there is none.
  CUdeviceptr take_ready(size_t capacity);
  // Waits for and frees every cached block (after an out-of-memory error and at destruction).
  void free_cached();
  // Waits for each block's events and frees it (the context current).
  void free_blocks(std::vector<support::FreeBlocks<Block>::Sized> blocks) const;
  void destroy_events(const std::vector<CUevent>& events) const;

  std::shared_ptr<const CudaContext> context_;
  mutable std::mutex mutex_;
  support::FreeBlocks<Block> free_;
};

}  // namespace kiln::runtime::cuda
