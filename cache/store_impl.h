// The state behind cache::Store, shared by the files that implement it (opening and recovery,
// entries, checks and bundles).
#pragma once

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "cache/sqlite_db.h"
#include "cache/store.h"

namespace kiln::cache {

inline constexpr int kSchemaVersion = 1;
inline constexpr int kApplicationId = 0x4b494c4e;  // "KILN": marks a file as a kiln cache

// The columns of every entry table, in the order the bundle copies use.
inline constexpr const char* kColumns =
    "key, identity, parts, value, source, metadata, size, created, last_used, tick, hits";

struct Store::Impl {
  std::string path;
  StoreOptions options;
  sql::Db db;                // not open: no usable file (read-only and missing or unusable)
  std::string journal_mode;  // as SQLite reports it
  std::string problem;       // read-only: why the file is not used
  bool warned_failure = false;
  // A transaction is several calls on one connection: threads sharing a Store take turns.
  std::mutex mutex;

  void warn(const std::string& message) const;
  // One warning per store for failures after opening (busy, I/O), which would otherwise repeat.
  void warn_failure(const std::string& what, int rc);
  int deadline_ms() const { return std::max(1000, 2 * options.busy_timeout_ms); }

  // Deletes least-recently-used kernels while all entries total more than `max_size` bytes.
  int64_t evict(int64_t max_size);
  // Copies every entry of the database at `src_uri` into this one (INSERT OR IGNORE/REPLACE),
  // or only those whose key is in `keys` when it is not null; returns the number of rows added,
  // or a negative SQLite result code.
  int64_t copy_from(const std::string& src_uri, bool replace,
                    const std::vector<std::string>* keys = nullptr);
};

// The state of a database file as found.
struct Inspection {
  // bad: corrupt, truncated or foreign (to be moved aside); unavailable: locked past the
  // deadline or unreadable (left alone).
  enum Kind { fresh, ours, bad, unavailable } kind = fresh;
  std::string reason;  // for bad and unavailable
};
Inspection inspect(sql::Db& db, int64_t file_size, int deadline_ms);

// Creates the tables (idempotent) and marks the file with the application id.
int create_schema(sql::Db& db, int deadline_ms);

int64_t now_seconds();

}  // namespace kiln::cache
