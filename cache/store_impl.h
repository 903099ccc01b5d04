// The state behind cache::Store, shared by the files that implement it (opening and recovery,
// entries, checks and bundles).
#pragma once

#include <algorithm>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "cache/sqlite_db.h"
#include "cache/store.h"

namespace kiln::cache {

// 2: every entry carries its seal (`checksum`, cache::entry_seal), and use ticks count across tables.
inline constexpr int kSchemaVersion = 2;
inline constexpr int kApplicationId = 0x4b494c4e;  // "KILN": marks a file as a kiln cache

// The columns of every entry table, in the order the bundle copies use.
inline constexpr const char* kColumns =
    "key, identity, parts, value, source, metadata, size, created, last_used, tick, hits, checksum";

// The next use tick: one count over all tables, so that eviction orders kernels, plans and
// decisions by their last use together. `db` names the schema ("main", "src").
std::string next_tick(const char* db = "main");

struct Store::Impl {
  std::string path;
  StoreOptions options;
  sql::Db db;                // not open: no usable file (read-only and missing or unusable)
  std::string journal_mode;  // as SQLite reports it
  std::string problem;       // read-only: why the file is not used
  bool warned_failure = false;
  mutable std::unordered_set<std::string> warned_damaged;  // keys warned about (once each)
  uint64_t device = 0, inode = 0;  // the file opened (a recovery moves only that one aside)
  // A transaction is several calls on one connection: threads sharing a Store take turns.
  std::mutex mutex;

  void warn(const std::string& message) const;
  // One warning per store for failures after opening (busy, I/O), which would otherwise repeat.
  void warn_failure(const std::string& what, int rc);
  int deadline_ms() const { return std::max(1000, 2 * options.busy_timeout_ms); }

  // Deletes least-recently-used entries of every table while all entries total more than
  // `max_size` bytes; returns the bytes of the entries deleted, or a negative SQLite result code.
  int64_t evict(int64_t max_size);
  // A failed statement: a corrupt file is moved aside and rebuilt (recover), anything else
  // warns once. Returns true when the store now holds a new, empty file.
  bool failed(const std::string& what, int rc);
  // Moves the open file aside and starts a new one, unless another process did so already;
  // warns with what was lost. True when a usable file is open afterwards.
  bool recover(const std::string& reason);
  // An error unless the store can be written (not read-only, a file open).
  Expected<void> writable(const std::string& action) const;
  // VACUUM, then (WAL) a truncating checkpoint, so that the file is the size of what it holds.
  Expected<void> compact(const std::string& action);
  // A damaged entry read: warned about (once per key), and a miss.
  void damaged(Table t, const std::string& key, const std::string& why) const;
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
