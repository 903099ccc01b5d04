// Host memory as kiln's buffers get it: blocks of 128 KiB and more mapped on their own (freeing
// one returns its pages to the system), from 4 MiB 2 MiB-aligned with huge pages advised; small
// ones 64-byte aligned from the heap. The runtime's buffer pool takes
// its blocks from here, and so does the autotuner for the buffers it times candidates on: a
// kernel timed on 4 KiB pages is not the kernel that runs (layernorm over 64 MiB on 2 Xeon
// threads: 1.25 ms on huge pages, 1.7-1.8 on 4 KiB ones, enough to pick a slower schedule).
#pragma once

#include <cstddef>

namespace kiln::support {

// Every block is aligned to at least this.
inline constexpr size_t kHostAlign = 64;

// The capacity allocate_host_block hands out for a request of `bytes`: at least kHostAlign, a
// whole number of 4 KiB pages for a mapped block.
size_t host_block_capacity(size_t bytes);
// Whether a block of `capacity` (from host_block_capacity) is mapped on its own.
bool host_block_is_mapped(size_t capacity);
// A block of `capacity` bytes (from host_block_capacity); null when the system has no room.
std::byte* allocate_host_block(size_t capacity);
void free_host_block(std::byte* data, size_t capacity);

// Advises huge pages for the whole 2 MiB pages of [data, data + bytes), memory from elsewhere (a
// std::vector's) not yet touched, where it is as large as a block that gets them: on 4 KiB pages a
// fresh 256 MiB took a second of page faults to fill on a virtual machine (the autotuner's copies
// of ew_chain's buffers). Advice only, and nothing for smaller ranges.
void advise_huge_pages(void* data, size_t bytes);

// One block, freed when it goes.
class HostBlock {
 public:
  HostBlock() = default;
  // Null data() (and size 0) when the system has no room for `bytes`.
  explicit HostBlock(size_t bytes);
  ~HostBlock();
  HostBlock(HostBlock&& other) noexcept;
  HostBlock& operator=(HostBlock&& other) noexcept;
  HostBlock(const HostBlock&) = delete;
  HostBlock& operator=(const HostBlock&) = delete;

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace kiln::support
