#include "support/write_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace kiln {

Expected<void> write_file(const std::string& path, std::string_view bytes) {
  const auto failed = [&](int err) {
    return make_error("cannot write '" + path + "': " + std::strerror(err));
  };
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return failed(errno);
  const size_t written = bytes.empty() ? 0 : std::fwrite(bytes.data(), 1, bytes.size(), f);
  const int write_errno = written == bytes.size() ? 0 : (errno ? errno : EIO);
  const int close_failed = std::fclose(f);  // a full disk may show only here
  if (write_errno) return failed(write_errno);
  if (close_failed) return failed(errno ? errno : EIO);
  return {};
}

}  // namespace kiln
