// A map that keeps the entries used last, at most a given number: the plans, graph readings and
// compiled kernels of a program that meets new sizes on most calls (a server), which kept one of
// each for every size it had ever served.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>

namespace kiln::support {

// A value and the map's clock when it was last found or put.
template <typename T>
struct Recent {
  T value;
  uint64_t used = 0;
};

// `Map` maps a key to Recent<T> (std::unordered_map or std::map). Not synchronized: its owner
// holds a lock around every call, and destroys what `put` evicted after letting it go (an
// evicted plan or kernel may free JIT code or device memory, which must not hold up other calls).
template <typename Key, typename T, typename Map = std::unordered_map<Key, Recent<T>>>
class RecentlyUsed {
 public:
  explicit RecentlyUsed(size_t max) : max_(std::max<size_t>(max, 1)) {}

  // The value under `key`, marked used now; null if none.
  template <typename K>
  T* find(const K& key) {
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    it->second.used = ++clock_;
    return &it->second.value;
  }

  // Puts `value` under `key` unless one is there already (two callers that made it at once keep
  // the first), and then keeps the `max` entries used last: the one used longest ago goes into
  // `evicted` (declared before the owner's lock, so that it is destroyed after it). Returns the
  // value under the key now.
  template <typename K>
  T& put(K&& key, T value, std::optional<T>& evicted) {
    auto [it, fresh] = map_.try_emplace(std::forward<K>(key), Recent<T>{std::move(value), 0});
    it->second.used = ++clock_;
    if (fresh && map_.size() > max_) {
      auto oldest =
          std::ranges::min_element(map_, {}, [](const auto& entry) { return entry.second.used; });
      evicted = std::move(oldest->second.value);
      map_.erase(oldest);  // never `it`: that one was used last
    }
    return it->second.value;
  }

  // Whether `key` has a value, without marking it used.
  template <typename K>
  bool contains(const K& key) const {
    return map_.find(key) != map_.end();
  }
  size_t size() const { return map_.size(); }
  size_t max() const { return max_; }
  void clear() { map_.clear(); }

 private:
  Map map_;
  uint64_t clock_ = 0;
  size_t max_;
};

}  // namespace kiln::support
