// Device buffers and the pooled allocator that recycles them (fresh pages cost ~2x on writes),
// with persistent memory (kiln.toml memory.persistent_memory, DESIGN.md §7) kept apart.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/error.h"
#include "kiln/host_tensor.h"
#include "kiln/shape.h"
#include "support/free_blocks.h"

namespace kiln::runtime {

class BufferPool;

// memory.persistent_memory. Persistent buffers hold long-lived data (weights, user tensors):
// exact-size blocks outside the recycling free lists, returned to the system when freed, and
// GPU devices keep their device copy from one realize to the next.
//   enabled:  buffers made from host data (BufferPool::from_host) are persistent;
//   disabled: every buffer comes from the recycling pool; GPU inputs are uploaded on each realize;
//   enforced: as enabled, and so are the results a realize returns (BufferPool::allocate_result),
//             so results fed back as inputs (state, caches) also keep their device copy.
enum class PersistentMemory { enabled, disabled, enforced };

// A dense C-ordered tensor in host-addressable memory. Returned to its pool when destroyed.
class Buffer {
 public:
  Buffer(ir::DType dtype, ir::Shape shape, std::byte* data, size_t capacity,
         std::shared_ptr<BufferPool> pool, bool persistent = false);
  // Memory kiln does not own (a DLPack import): `release` runs when the buffer is destroyed. Not
  // persistent: its owner may change it between realizes, so GPU devices copy it in every time.
  static std::shared_ptr<Buffer> external(ir::DType dtype, ir::Shape shape, std::byte* data,
                                          std::function<void()> release);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  ir::DType dtype() const { return dtype_; }
  const ir::Shape& shape() const { return shape_; }
  int64_t numel() const { return ir::shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * ir::dtype_size(dtype_); }
  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  // From the persistent pool: contents are not changed after creation by kiln, so devices may
  // keep a copy of them (PersistentMemory).
  bool persistent() const { return persistent_; }
  // Memory kiln does not own (Buffer::external): never written by kiln.
  bool external() const { return pool_ == nullptr; }

  ir::HostTensor to_host() const;

 private:
  ir::DType dtype_;
  ir::Shape shape_;
  std::byte* data_;
  size_t capacity_;
  std::shared_ptr<BufferPool> pool_;  // null for external memory
  bool persistent_;
  std::function<void()> release_;  // external memory: hands it back to its owner
};

// Size-bucketed free lists of 64-byte-aligned blocks. Thread-safe. Blocks of 128 KiB and more are
// mapped on their own (support/host_memory.h), so a block the pool lets go returns its pages to
// the system; from 4 MiB with huge pages advised, so a fresh large output faults in 2 MiB at a
// time. The free blocks kept are bounded by twice the most the program has had live at once
// (support/free_blocks.h): a loop gets its blocks back run after run, and a server whose sizes
// keep changing does not keep every size it has served.
//
// An allocation the system cannot meet (DESIGN.md §7) first returns the pool's cached free blocks
// to the system and tries again; if that fails too it is an error naming what it was for (`what`,
// e.g. "%y"), the dtype and shape, the bytes asked for and the device: "out of memory on device
// 'cpu': cannot allocate 400000000000 bytes for %y (f32[100000000000])". Nothing is left half
// made, so the pool and its device stay usable.
class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  static std::shared_ptr<BufferPool> create(PersistentMemory mode = PersistentMemory::enabled,
                                            std::string device = "cpu");
  ~BufferPool();
  PersistentMemory persistent_mode() const { return mode_; }
  const std::string& device() const { return device_; }
  // An intermediate: from the recycling free lists.
  Expected<std::shared_ptr<Buffer>> allocate(ir::DType dtype, const ir::Shape& shape,
                                             std::string_view what = "a buffer");
  // A buffer a realize returns: persistent under PersistentMemory::enforced.
  Expected<std::shared_ptr<Buffer>> allocate_result(ir::DType dtype, const ir::Shape& shape,
                                                    std::string_view what = "a result");
  // A copy of host data: persistent unless PersistentMemory::disabled.
  Expected<std::shared_ptr<Buffer>> from_host(const ir::HostTensor& t,
                                              std::string_view what = "an input");
  void release(std::byte* data, size_t capacity, bool persistent);
  size_t cached_bytes() const;      // free blocks kept for reuse
  // The most recycling-pool bytes live at once so far: the free blocks kept are at most twice this
  // (and at least 64 MiB, at most 4 GiB), the ones released longest ago returned first.
  size_t peak_live_bytes() const;
  size_t persistent_bytes() const;  // live persistent buffers
  // Called (outside the pool's lock) with the size of each block taken from the system rather
  // than reused: what the memory logger reports.
  void set_fresh_allocation_observer(std::function<void(size_t)> observer);

 private:
  BufferPool(PersistentMemory mode, std::string device) : mode_(mode), device_(std::move(device)) {}
  Expected<std::shared_ptr<Buffer>> allocate_persistent(ir::DType dtype, const ir::Shape& shape,
                                                        std::string_view what);
  // support::allocate_host_block (aligned_alloc, or a mapping of its own from 128 KiB); once more
  // after trim() when it fails; null when both fail.
  std::byte* system_alloc(size_t capacity);
  void trim();  // returns every cached free block to the system
  PersistentMemory mode_;
  std::string device_;
  mutable std::mutex mu_;
  support::FreeBlocks<std::byte*> free_;  // the recycling blocks (not the persistent ones)
  size_t persistent_bytes_ = 0;
  std::function<void(size_t)> on_fresh_;
};

}  // namespace kiln::runtime
