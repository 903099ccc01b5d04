// What the cache needs to know about the file system it lives on: network mounts (no WAL), write
// permission (read-only opens use immutable=1 when nothing can change the file) and SQLite URIs.
#pragma once

#include <string>

namespace kiln::cache {

// statfs f_type values of network and FUSE file systems, where WAL's shared memory is unsafe.
bool is_network_fs_type(long f_type);
// Whether the directory lies on such a file system (false when it cannot be told).
bool is_network_fs(const std::string& directory);
bool directory_writable(const std::string& directory);
// "file:<percent-encoded absolute path>?<query>" for sqlite3_open_v2 with SQLITE_OPEN_URI.
std::string sqlite_uri(const std::string& path, const std::string& query);
// The URI that opens `path` read-only: with immutable=1 where its directory is not writable, so
// that SQLite reads a WAL-mode file without creating -shm beside it.
std::string read_only_uri(const std::string& path);
// The directory holding `path` ("." when it has none).
std::string parent_directory(const std::string& path);

}  // namespace kiln::cache
