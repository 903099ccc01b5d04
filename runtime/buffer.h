// Device buffers and the pooled allocator that recycles them (fresh pages cost ~2x on writes).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "ir/dtype.h"
#include "ir/host_tensor.h"
#include "ir/shape.h"

namespace kiln::runtime {

class BufferPool;

// A dense C-ordered tensor in host-addressable memory. Returned to its pool when destroyed.
class Buffer {
 public:
  Buffer(ir::DType dtype, ir::Shape shape, std::byte* data, size_t capacity,
         std::shared_ptr<BufferPool> pool);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  ir::DType dtype() const { return dtype_; }
  const ir::Shape& shape() const { return shape_; }
  int64_t numel() const { return ir::shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * ir::dtype_size(dtype_); }
  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }

  ir::HostTensor to_host() const;

 private:
  ir::DType dtype_;
  ir::Shape shape_;
  std::byte* data_;
  size_t capacity_;
  std::shared_ptr<BufferPool> pool_;
};

// Size-bucketed free lists of 64-byte-aligned blocks. Thread-safe.
class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  static std::shared_ptr<BufferPool> create();
  ~BufferPool();
  std::shared_ptr<Buffer> allocate(ir::DType dtype, const ir::Shape& shape);
  std::shared_ptr<Buffer> from_host(const ir::HostTensor& t);
  void release(std::byte* data, size_t capacity);
  size_t cached_bytes() const;
  // Called (outside the pool's lock) with the size of each block taken from the system rather
  // than reused: what the memory logger reports.
  void set_fresh_allocation_observer(std::function<void(size_t)> observer);

 private:
  BufferPool() = default;
  mutable std::mutex mu_;
  std::multimap<size_t, std::byte*> free_;  // capacity -> block
  size_t cached_bytes_ = 0;
  std::function<void(size_t)> on_fresh_;
};

}  // namespace kiln::runtime
