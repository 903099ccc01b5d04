// Writing a whole file, with the reason of a failure (the OS's: "Is a directory", "Permission
// denied", "No space left on device") in the error, for every tool and dump that writes one.
#pragma once

#include <string>
#include <string_view>

#include "kiln/error.h"

namespace kiln {

// Replaces `path` with `bytes`; an error says "cannot write 'PATH': REASON".
Expected<void> write_file(const std::string& path, std::string_view bytes);

}  // namespace kiln
