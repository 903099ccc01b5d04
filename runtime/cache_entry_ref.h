// The persistent-cache entries a run of a graph reads on a device (`kiln warm --check`, and the
// bundles of `kiln cache export --for`), each with whether the device's cache holds it.
#pragma once

#include <string>
#include <vector>

#include "cache/store.h"

namespace kiln::runtime {

struct CacheEntryRef {
  cache::Table table = cache::Table::kernels;
  std::string digest;
  // "plan <digest>", "kernel <name> <digest>" or "autotune <name> <digest>".
  std::string what;
  bool present = false;
};

// The `what` of each entry that is not present, in order: what a run would miss.
inline std::vector<std::string> missing_entries(const std::vector<CacheEntryRef>& entries) {
  std::vector<std::string> missing;
  for (const CacheEntryRef& e : entries)
    if (!e.present) missing.push_back(e.what);
  return missing;
}

}  // namespace kiln::runtime
