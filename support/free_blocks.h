// The free blocks a memory pool keeps for reuse (the cpu's host blocks, CUDA and Vulkan device
// buffers), bounded by what the program uses: at most twice the most bytes it has had live at once
// (a plan's first run holds all of its intermediates at once, so that covers what one run cycles
// through; twice, for a loop that alternates two such plans), at least `min_bytes` and at most
// `max_bytes`. Past that the blocks released longest ago go back to the system. A server whose
// batch size kept growing never reused a block (each request larger than any freed one) and kept
// every one it had freed: 4 GiB of host memory, or device memory until the device was full.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace kiln::support {

inline constexpr size_t kMinCachedBytes = size_t{64} << 20;
inline constexpr size_t kMaxCachedBytes = size_t{4} << 30;

// Not synchronized: the pool holds its lock around every call, and frees what `release`,
// `take_all` hand back (a block of the system's: memory, a device buffer) as it needs to, after
// letting the lock go where freeing may wait (a device's pending work).
template <typename Block>
class FreeBlocks {
 public:
  struct Sized {
    size_t capacity;
    Block block;
  };

  explicit FreeBlocks(size_t min_bytes = kMinCachedBytes, size_t max_bytes = kMaxCachedBytes)
      : min_bytes_(min_bytes), max_bytes_(std::max(min_bytes, max_bytes)) {}

  // Of the cached blocks of the smallest capacity in [lo, hi], the one released last that
  // `usable(block)` accepts (the most likely to be still in a cache; the oldest would cycle a
  // loop's result through every cached block of its size): taken out and counted live.
  template <typename Usable>
  std::optional<Sized> take(size_t lo, size_t hi, Usable&& usable) {
    auto first = free_.lower_bound(lo);
    if (first == free_.end() || first->first > hi) return std::nullopt;
    auto [begin, end] = free_.equal_range(first->first);
    for (auto it = end; it != begin;) {
      --it;
      if (!usable(it->second.block)) continue;
      Sized taken{it->first, std::move(it->second.block)};
      cached_bytes_ -= it->first;
      released_.erase(it->second.order);
      free_.erase(it);
      note_live(taken.capacity);
      return taken;
    }
    return std::nullopt;
  }
  std::optional<Sized> take(size_t lo, size_t hi) {
    return take(lo, hi, [](const Block&) { return true; });
  }

  // A block the pool took from the system and handed out.
  void note_fresh(size_t capacity) { note_live(capacity); }

  // A block handed out comes back. Returns what the pool is to free now: the blocks released
  // longest ago that no longer fit under the limit, or this block itself when it alone exceeds it.
  std::vector<Sized> release(size_t capacity, Block block) {
    live_bytes_ -= std::min(live_bytes_, capacity);
    std::vector<Sized> dropped;
    const size_t limit = this->limit();
    if (capacity > limit) {
      dropped.push_back(Sized{capacity, std::move(block)});
      return dropped;
    }
    while (cached_bytes_ + capacity > limit) {
      auto oldest = released_.begin()->second;
      dropped.push_back(Sized{oldest->first, std::move(oldest->second.block)});
      cached_bytes_ -= oldest->first;
      released_.erase(released_.begin());
      free_.erase(oldest);
    }
    const uint64_t order = next_order_++;
    released_.emplace(order, free_.emplace(capacity, Cached{std::move(block), order}));
    cached_bytes_ += capacity;
    return dropped;
  }

  // Every cached block, to be freed (out of memory, or the pool's end).
  std::vector<Sized> take_all() {
    std::vector<Sized> all;
    all.reserve(free_.size());
    for (auto& [capacity, cached] : free_) all.push_back(Sized{capacity, std::move(cached.block)});
    free_.clear();
    released_.clear();
    cached_bytes_ = 0;
    return all;
  }

  size_t cached_bytes() const { return cached_bytes_; }
  size_t live_bytes() const { return live_bytes_; }
  size_t peak_live_bytes() const { return peak_live_bytes_; }
  // The most bytes of free blocks kept now.
  size_t limit() const { return std::min(max_bytes_, std::max(min_bytes_, 2 * peak_live_bytes_)); }

 private:
  struct Cached {
    Block block;
    uint64_t order;  // its key in released_
  };
  void note_live(size_t capacity) {
    live_bytes_ += capacity;
    peak_live_bytes_ = std::max(peak_live_bytes_, live_bytes_);
  }

  size_t min_bytes_;
  size_t max_bytes_;
  std::multimap<size_t, Cached> free_;  // by capacity, each capacity's in the order released
  // The cached blocks in the order they were released (the oldest first).
  std::map<uint64_t, typename std::multimap<size_t, Cached>::iterator> released_;
  uint64_t next_order_ = 0;
  size_t cached_bytes_ = 0;
  size_t live_bytes_ = 0;  // blocks handed out and not yet released
  size_t peak_live_bytes_ = 0;
};

}  // namespace kiln::support
