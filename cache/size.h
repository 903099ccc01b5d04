// Byte sizes as people write them in kiln.toml and on the command line: 1000000, 512MiB, 2GiB,
// 10MB (decimal), 64k.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/error.h"

namespace kiln::cache {

Expected<int64_t> parse_size(std::string_view text);
std::string format_size(int64_t bytes);  // "1.5 MiB", "512 B"

}  // namespace kiln::cache
