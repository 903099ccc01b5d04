// What `kiln cache verify` asks of every entry beyond its seal: that it holds what its reader
// needs (a plan record that decodes to a consistent wiring, a cpu or GPU kernel's metadata, a
// decision or a rate measurement that parses), so that a bad entry is reported by key before a
// run meets it.
#pragma once

#include <string>

#include "cache/store.h"

namespace kiln::runtime {

// "" when `entry` (of any table, any target) is sound; else what is wrong with it.
std::string cache_entry_problem(const cache::Entry& entry);

}  // namespace kiln::runtime
