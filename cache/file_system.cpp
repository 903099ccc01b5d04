// File-system probes for the cache store (Linux statfs magic numbers).
#include "cache/file_system.h"

#include <sys/statfs.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

namespace kiln::cache {

bool is_network_fs_type(long f_type) {
  switch (static_cast<unsigned long>(f_type) & 0xffffffffUL) {
    case 0x6969UL:      // NFS
    case 0x517bUL:      // SMB
    case 0xff534d42UL:  // CIFS
    case 0xfe534d42UL:  // SMB2
    case 0x65735546UL:  // FUSE (sshfs, s3fs, ...)
    case 0x5346414fUL:  // AFS
    case 0x73757245UL:  // CODA
    case 0x564cUL:      // NCP
    case 0x01021997UL:  // 9P
    case 0x00c36400UL:  // CEPH
    case 0x0bd00bd0UL:  // Lustre
      return true;
    default:
      return false;
  }
}

bool is_network_fs(const std::string& directory) {
  struct statfs info {};
  if (::statfs(directory.c_str(), &info) != 0) return false;
  return is_network_fs_type(static_cast<long>(info.f_type));
}

bool directory_writable(const std::string& directory) {
  return ::access(directory.c_str(), W_OK) == 0;
}

std::string sqlite_uri(const std::string& path, const std::string& query) {
  std::string absolute = std::filesystem::absolute(path).lexically_normal().string();
  std::string uri = "file:";
  for (unsigned char c : absolute) {
    if (c == '%' || c == '?' || c == '#' || c < 0x21 || c >= 0x7f) {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      uri += buf;
    } else {
      uri += static_cast<char>(c);
    }
  }
  return query.empty() ? uri : uri + "?" + query;
}

std::string read_only_uri(const std::string& path) {
  return sqlite_uri(path,
                    directory_writable(parent_directory(path)) ? "mode=ro" : "mode=ro&immutable=1");
}

std::string parent_directory(const std::string& path) {
  auto parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

}  // namespace kiln::cache
