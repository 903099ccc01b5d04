#include "support/host_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <utility>

namespace kiln::support {

namespace {
// Blocks of at least this many bytes are mapped on their own, 2 MiB-aligned, with huge pages
// advised (MADV_HUGEPAGE): touching a fresh 64 MiB output then takes 32 page faults, not 16384,
// which was most of what a plan's first run cost beyond its steady state. Their capacity is a
// whole number of 4 KiB pages; a capacity this large always means a mapped block.
constexpr size_t kHugeThreshold = size_t{4} << 20;
// Blocks of at least this many bytes (glibc's own default mmap threshold) are mapped too, without
// the huge-page alignment, so that freeing one returns its pages to the system. Left to malloc,
// whose mmap threshold rises to the largest block freed so far, they came from the heap, and a
// server whose batch size kept growing left each freed block as a hole no later block fit: its
// resident memory grew with the sum of every size it had served (8 GB after 3000 sizes of an MLP).
constexpr size_t kMapThreshold = size_t{128} << 10;
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kPage = 4096;

// `capacity` bytes (a multiple of kPage) starting on a 2 MiB boundary, huge pages advised where
// the OS offers them (transparent_hugepage "madvise" or "always"); null when the system has no
// room.
std::byte* map_block(size_t capacity) {
  if (capacity < kHugeThreshold) {
    void* p = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : static_cast<std::byte*>(p);
  }
  const size_t span = capacity + kHugePage;
  void* p = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (start + kHugePage - 1) & ~(kHugePage - 1);
  if (aligned > start) munmap(p, aligned - start);
  if (const size_t tail = start + span - (aligned + capacity); tail > 0)
    munmap(reinterpret_cast<void*>(aligned + capacity), tail);
  auto* block = reinterpret_cast<std::byte*>(aligned);
  madvise(block, capacity, MADV_HUGEPAGE);  // advice only: without it the block has 4 KiB pages
  return block;
}
}  // namespace

size_t host_block_capacity(size_t bytes) {
  size_t n = std::max<size_t>(bytes, kHostAlign);
  if (n >= kMapThreshold) return (n + kPage - 1) / kPage * kPage;
  return (n + kHostAlign - 1) / kHostAlign * kHostAlign;
}

bool host_block_is_mapped(size_t capacity) { return capacity >= kMapThreshold; }

std::byte* allocate_host_block(size_t capacity) {
  return host_block_is_mapped(capacity)
             ? map_block(capacity)
             : static_cast<std::byte*>(std::aligned_alloc(kHostAlign, capacity));
}

void free_host_block(std::byte* data, size_t capacity) {
  if (!data) return;
  if (host_block_is_mapped(capacity)) munmap(data, capacity);
  else std::free(data);
}

void advise_huge_pages(void* data, size_t bytes) {
  if (bytes < kHugeThreshold) return;
  const auto start = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (start + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t last = (start + bytes) & ~(kHugePage - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

HostBlock::HostBlock(size_t bytes) : capacity_(host_block_capacity(bytes)) {
  data_ = allocate_host_block(capacity_);
  if (data_) size_ = bytes;
  else capacity_ = 0;
}

HostBlock::~HostBlock() { free_host_block(data_, capacity_); }

HostBlock::HostBlock(HostBlock&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      capacity_(std::exchange(other.capacity_, 0)) {}

HostBlock& HostBlock::operator=(HostBlock&& other) noexcept {
  if (this != &other) {
    free_host_block(data_, capacity_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

}  // namespace kiln::support
