// Opening a cache store: journal mode by file system, the schema, and the recovery of corrupt,
// truncated or foreign files (moved aside under a directory lock so that concurrent openers
// never move a file that another process has just rebuilt).
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "cache/file_system.h"
#include "cache/store_impl.h"

namespace kiln::cache {
namespace fs = std::filesystem;
namespace {

// quick_check reads every page: only worth its cost at startup for files of modest size; larger
// files still fail over to recovery on the SQLITE_CORRUPT of their first query.
constexpr int64_t kQuickCheckLimit = 64LL << 20;

int64_t file_size_or_zero(const std::string& path) {
  std::error_code ec;
  auto size = fs::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(size);
}

uint32_t big_endian(const unsigned char* p, int bytes) {
  uint32_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

// Each table's entries by age with their sizes: what eviction reads after every store (the
// total size, then the oldest first) from the index alone. Read from the table itself, the size
// sits after the entry's blob, so SQLite walked every blob's overflow pages: a 215 MB cache
// (9318 kernels) took 93 ms per store to sum, 0.4 ms from this index.
std::string lru_index_sql(const std::string& table) {
  return fmt::format("CREATE INDEX IF NOT EXISTS {0}_lru ON {0} (tick, size, key);", table);
}

// Every table's.
std::string lru_index_sql() {
  std::string sql;
  for (Table t : kAllTables) sql += lru_index_sql(table_name(t));
  return sql;
}

// What a cache written by an older kiln lacks of the current indexes: the eviction index to add
// and the index on tick alone that it replaces (the eviction index leads with tick, so the old one
// only cost every store an update). "" when the file is current, so opening it writes nothing.
// The statements hold if another process upgrades the file first.
std::string index_upgrade_sql(sql::Db& db, int* rc) {
  std::vector<std::string> names =
      sql::column(db, "SELECT name FROM sqlite_master WHERE type = 'index'", rc);
  if (*rc != SQLITE_OK) return "";
  auto has = [&](const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  std::string sql;
  for (Table t : kAllTables) {
    std::string n = table_name(t);
    if (!has(n + "_lru")) sql += lru_index_sql(n);
    if (has(n + "_tick")) sql += fmt::format("DROP INDEX IF EXISTS {}_tick;", n);
  }
  return sql;
}

// Why a database file is cut short, read from its header ("" when it is whole). SQLite writes
// whole pages, so a size that is not a whole number of pages is a truncated file; and with no WAL
// beside it (nothing newer than the file), the page count in a current header must fit in it.
// SQLite itself reads the missing tail as zeros, which quick_check does not always notice.
std::string truncation(const std::string& path, int64_t file_size) {
  if (file_size == 0) return "";
  std::array<unsigned char, 100> header{};
  std::ifstream in(path, std::ios::binary);
  if (!in.read(reinterpret_cast<char*>(header.data()), header.size()))
    return fmt::format("truncated: {} bytes is shorter than a database header", file_size);
  if (std::string_view(reinterpret_cast<const char*>(header.data()), 16) !=
      std::string_view("SQLite format 3\0", 16))
    return "";  // not a database at all: inspect() says so
  uint32_t page_size = big_endian(&header[16], 2);
  if (page_size == 1) page_size = 65536;
  if (page_size < 512 || (page_size & (page_size - 1)) != 0) return "";  // inspect() says so
  if (file_size % page_size != 0)
    return fmt::format("truncated: {} bytes is not a whole number of {}-byte pages", file_size,
                       page_size);
  std::error_code ec;
  const bool wal = fs::exists(path + "-wal", ec) && fs::file_size(path + "-wal", ec) > 0;
  const uint32_t pages = big_endian(&header[28], 4);
  const bool current = big_endian(&header[92], 4) == big_endian(&header[24], 4);
  if (!wal && current && static_cast<int64_t>(pages) * page_size > file_size)
    return fmt::format("truncated: {} bytes hold {} of its {} pages", file_size,
                       file_size / page_size, pages);
  return "";
}

// Whether the file at `path` begins as a kiln cache does: SQLite's header, kiln's application_id.
bool recognizably_kiln(const std::string& path) {
  std::array<unsigned char, 72> header{};
  std::ifstream in(path, std::ios::binary);
  if (!in.read(reinterpret_cast<char*>(header.data()), header.size())) return false;
  return std::string_view(reinterpret_cast<const char*>(header.data()), 16) ==
             std::string_view("SQLite format 3\0", 16) &&
         big_endian(&header[68], 4) == static_cast<uint32_t>(kApplicationId);
}

// A failed query: only SQLite's verdict of corruption condemns the file.
Inspection failed(int rc) {
  return {sql::is_corrupt(rc) ? Inspection::bad : Inspection::unavailable, sql::describe(rc)};
}

// One pass of inspect(); busy results are retried by the caller.
Inspection inspect_once(sql::Db& db, int64_t file_size, int* rc) {
  if (file_size <= kQuickCheckLimit) {
    auto rows = sql::column(db, "PRAGMA quick_check", rc);
    if (*rc != SQLITE_OK) return failed(*rc);
    if (rows != std::vector<std::string>{"ok"}) {
      // SQLite lists every finding, one per line: the first says what is wrong, in one line
      // (after a "*** in database main ***" header, which says nothing of it).
      std::vector<std::string> lines;
      for (const std::string& row : rows)
        for (size_t at = 0; at <= row.size();) {
          const size_t end = std::min(row.find('\n', at), row.size());
          if (std::string line = row.substr(at, end - at);
              !line.empty() && !line.starts_with("*** in database"))
            lines.push_back(std::move(line));
          at = end + 1;
        }
      const std::string first = lines.empty() ? "no result" : lines.front();
      const size_t findings = std::max<size_t>(lines.size(), 1);
      return {Inspection::bad, fmt::format("quick_check: {}{}", first,
                                           findings > 1 ? fmt::format(" (and {} more findings)", findings - 1) : "")};
    }
  }
  auto app = sql::column(db, "PRAGMA application_id", rc);
  if (*rc != SQLITE_OK || app.empty()) return failed(*rc);
  auto tables = sql::column(db, "SELECT count(*) FROM sqlite_master", rc);
  if (*rc != SQLITE_OK || tables.empty()) return failed(*rc);
  if (app[0] == "0" && tables[0] == "0") return {Inspection::fresh, ""};
  if (app[0] != std::to_string(kApplicationId))
    return {Inspection::bad, fmt::format("not a kiln cache (application_id {})", app[0])};
  auto version = sql::column(db, "SELECT value FROM meta WHERE name = 'schema_version'", rc);
  if (*rc != SQLITE_OK)
    return (*rc & 0xff) == SQLITE_ERROR ? Inspection{Inspection::bad, "no meta table"}
                                        : failed(*rc);
  if (version != std::vector<std::string>{std::to_string(kSchemaVersion)})
    return {Inspection::bad, fmt::format("schema version {}, expected {}",
                                         version.empty() ? "missing" : version[0], kSchemaVersion)};
  // Every table of the schema: a file that lost one (dropped by hand, a tool's damage) would
  // fail each lookup and store in it.
  auto present = sql::column(db, "SELECT name FROM sqlite_master WHERE type = 'table'", rc);
  if (*rc != SQLITE_OK) return failed(*rc);
  for (Table t : kAllTables)
    if (std::find(present.begin(), present.end(), table_name(t)) == present.end())
      return {Inspection::bad, fmt::format("the {} table is missing", table_name(t))};
  return {Inspection::ours, ""};
}

// Holds a flock on a directory: openers inspect and set up a cache file under the shared lock,
// a recovery moves a bad file aside and builds its successor under the exclusive one, so that
// no opener sees a file half moved or half built and no two recoveries move the same file.
class DirectoryLock {
 public:
  DirectoryLock(const std::string& dir, int operation)
      : fd_(::open(dir.c_str(), O_RDONLY | O_DIRECTORY)) {
    if (fd_ >= 0) ::flock(fd_, operation);
  }
  ~DirectoryLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_;
};

std::string move_aside(const std::string& path) {
  std::string aside = fmt::format("{}.corrupt-{}", path, now_seconds());
  for (int n = 1; fs::exists(aside); ++n)
    aside = fmt::format("{}.corrupt-{}-{}", path, now_seconds(), n);
  std::error_code ec;
  fs::rename(path, aside, ec);
  for (const char* suffix : {"-wal", "-shm", "-journal"})
    if (fs::exists(path + suffix)) fs::rename(path + suffix, aside + suffix, ec);
  return aside;
}

int open_rw(Store::Impl& s) {
  int rc = s.db.open(sqlite_uri(s.path, ""), /*read_only=*/false, /*create=*/true, /*uri=*/true);
  if (rc == SQLITE_OK) s.db.set_busy_timeout(s.options.busy_timeout_ms);
  return rc;
}

std::string query_journal_mode(sql::Db& db, const std::string& pragma, int deadline_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
  for (;;) {
    int rc = 0;
    auto rows = sql::column(db, pragma, &rc);
    if (rc == SQLITE_OK && !rows.empty()) return rows.front();
    if (!sql::is_busy(rc) || std::chrono::steady_clock::now() > deadline) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// Opens s.path read-write and inspects it; a usable file gets its journal mode and (fresh) its
// schema. Returns the warning that makes the store run without the file ("" when none), and
// the inspection in `found` (bad: s.db is left open for the caller to close).
std::string set_up(Store::Impl& s, Inspection* found) {
  if (int rc = open_rw(s); rc != SQLITE_OK) {
    *found = {Inspection::unavailable, sql::describe(rc)};
    return fmt::format("cannot open cache {}: {}; running without it", s.path, found->reason);
  }
  struct stat st {};
  if (::stat(s.path.c_str(), &st) == 0) {
    s.device = st.st_dev;
    s.inode = st.st_ino;
  }
  const int64_t size = file_size_or_zero(s.path);
  if (std::string cut = truncation(s.path, size); !cut.empty()) {
    *found = {Inspection::bad, cut};
    return "";
  }
  *found = inspect(s.db, size, s.deadline_ms());
  if (found->kind == Inspection::bad) return "";
  if (found->kind == Inspection::unavailable)
    return fmt::format("cannot use cache {}: {}; running without it", s.path, found->reason);
  // WAL's shared memory does not work across machines: a rollback journal on network mounts.
  std::string mode = is_network_fs(parent_directory(s.path)) ? "DELETE" : "WAL";
  s.journal_mode = query_journal_mode(s.db, "PRAGMA journal_mode=" + mode, s.deadline_ms());
  // In WAL mode NORMAL keeps the file consistent through crashes; only a power loss can drop
  // the last commits, which for a cache costs a recompilation, not a wrong artifact.
  if (s.journal_mode == "wal") s.db.exec("PRAGMA synchronous=NORMAL");
  if (found->kind == Inspection::fresh) {
    if (int rc = create_schema(s.db, s.deadline_ms()); rc != SQLITE_OK)
      return fmt::format("cannot create cache {}: {}; running without it", s.path,
                         sql::describe(rc));
  } else {
    // A cache written before the eviction index existed gets it here, once; without it eviction
    // is slow, not wrong, so a failure (a busy writer, a full disk) is a warning.
    int rc = SQLITE_OK;
    std::string upgrade = index_upgrade_sql(s.db, &rc);
    if (rc == SQLITE_OK && !upgrade.empty())
      rc = s.db.transaction([&] { return s.db.exec(upgrade); }, s.deadline_ms());
    if (rc != SQLITE_OK)
      s.warn(fmt::format("cache {}: cannot add its eviction index: {}", s.path, sql::describe(rc)));
  }
  return "";
}

void open_writable(Store::Impl& s) {
  std::error_code ec;
  std::string dir = parent_directory(s.path);
  fs::create_directories(dir, ec);
  Inspection found;
  std::string problem;
  {
    DirectoryLock shared(dir, LOCK_SH);
    problem = set_up(s, &found);
  }
  if (problem.empty() && found.kind == Inspection::bad) {
    // Under the exclusive lock look again (another process may have rebuilt it already), move
    // the file aside and build a new one.
    s.db.close();
    DirectoryLock exclusive(dir, LOCK_EX);
    const std::string reason = found.reason;
    problem = set_up(s, &found);
    if (problem.empty() && found.kind == Inspection::bad && !is_scope_path(s.path) &&
        !recognizably_kiln(s.path)) {
      problem = fmt::format(
          "cache {} is not a kiln cache ({}); it is left as it is and kiln runs without a cache "
          "(remove it, or choose another path)",
          s.path, reason);
    } else if (problem.empty() && found.kind == Inspection::bad) {
      s.db.close();
      std::string aside = move_aside(s.path);
      s.warn(fmt::format("cache {} is unusable ({}); moved it aside to {} and started a new one",
                         s.path, reason, aside));
      problem = set_up(s, &found);
      if (problem.empty() && found.kind == Inspection::bad)
        problem = fmt::format("cannot use cache {}: {}; running without it", s.path, found.reason);
    }
  }
  if (!problem.empty()) {
    s.warn(problem);
    s.db.close();
    s.problem = found.reason.empty() ? problem : found.reason;
  }
}

void open_read_only(Store::Impl& s) {
  if (!fs::exists(s.path)) return;  // nothing to serve, and nothing may be created
  if (int rc = s.db.open(read_only_uri(s.path), true, false, true); rc != SQLITE_OK) {
    s.problem = sql::describe(rc);
  } else {
    s.db.set_busy_timeout(s.options.busy_timeout_ms);
    const int64_t size = file_size_or_zero(s.path);
    const std::string cut = truncation(s.path, size);
    Inspection found = cut.empty() ? inspect(s.db, size, s.deadline_ms()) : Inspection{Inspection::bad, cut};
    if (found.kind == Inspection::fresh) {
      s.db.close();  // an empty file: no tables to read
      return;
    }
    if (found.kind != Inspection::ours) s.problem = found.reason;
  }
  if (!s.problem.empty()) {
    s.warn(
        fmt::format("cache {} is unusable ({}); opened read-only here, it is left as it is and "
                    "ignored{}",
                    s.path, s.problem,
                    is_scope_path(s.path) || recognizably_kiln(s.path)
                        ? " (a command that writes the cache moves it aside and starts a new one)"
                        : ""));
    s.db.close();
    return;
  }
  s.journal_mode = query_journal_mode(s.db, "PRAGMA journal_mode", s.deadline_ms());
}

}  // namespace

Inspection inspect(sql::Db& db, int64_t file_size, int deadline_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
  for (;;) {
    int rc = SQLITE_OK;
    Inspection found = inspect_once(db, file_size, &rc);
    if (!sql::is_busy(rc) || std::chrono::steady_clock::now() > deadline) return found;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

int create_schema(sql::Db& db, int deadline_ms) {
  std::string sql = fmt::format(
      "PRAGMA application_id = {};"
      "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);"
      "INSERT OR IGNORE INTO meta VALUES ('schema_version', '{}');",
      kApplicationId, kSchemaVersion);
  for (Table t : kAllTables) {
    const char* n = table_name(t);
    sql += fmt::format(
        "CREATE TABLE IF NOT EXISTS {0} (key TEXT PRIMARY KEY, identity TEXT NOT NULL,"
        " parts TEXT NOT NULL, value BLOB NOT NULL, source TEXT NOT NULL, metadata TEXT NOT NULL,"
        " size INTEGER NOT NULL, created INTEGER NOT NULL, last_used INTEGER NOT NULL,"
        " tick INTEGER NOT NULL, hits INTEGER NOT NULL, checksum TEXT NOT NULL);"
        "CREATE INDEX IF NOT EXISTS {0}_identity ON {0} (identity);",
        n);
  }
  sql += lru_index_sql();
  return db.transaction([&] { return db.exec(sql); }, deadline_ms);
}

int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void Store::Impl::warn(const std::string& message) const {
  if (options.warn)
    options.warn(message);
  else
    fmt::print(stderr, "kiln: warning: {}\n", message);
}

void Store::Impl::warn_failure(const std::string& what, int rc) {
  if (warned_failure) return;
  warned_failure = true;
  // The connection's message can be newer than the failure (a rollback resets it): add it only
  // when it says more than the result code.
  std::string message = db.message(), described = sql::describe(rc);
  const bool adds = message != described && message != sql::describe(SQLITE_OK) && message != "not open";
  warn(fmt::format("cache {}: {} failed: {}{}", path, what, described,
                   adds ? fmt::format(" ({})", message) : ""));
}

bool Store::Impl::failed(const std::string& what, int rc) {
  if (sql::is_corrupt(rc) && !options.read_only)
    return recover(fmt::format("{} failed: {}", what, sql::describe(rc)));
  warn_failure(what, rc);
  return false;
}

bool Store::Impl::recover(const std::string& reason) {
  // What the file held, where it can still be counted.
  std::string lost;
  for (Table t : kAllTables) {
    int rc = 0;
    auto n = sql::column(db, fmt::format("SELECT count(*) FROM {}", table_name(t)), &rc);
    if (rc != SQLITE_OK || n.empty()) {
      lost.clear();
      break;
    }
    lost += fmt::format("{}{} {}", lost.empty() ? "" : ", ", n.front(), table_name(t));
  }
  db.close();
  const std::string dir = parent_directory(path);
  DirectoryLock exclusive(dir, LOCK_EX);
  // Another process may have moved this file aside and started a new one: that one is used.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && st.st_dev == device && st.st_ino == inode) {
    const std::string aside = move_aside(path);
    warn(fmt::format("cache {} is damaged ({}); moved it aside to {} and started a new one; lost: {}",
                     path, reason, aside,
                     lost.empty() ? "every entry (they are rebuilt as they are needed)"
                                  : lost + " entries (rebuilt as they are needed)"));
  }
  Inspection found;
  std::string problem = set_up(*this, &found);
  if (problem.empty() && found.kind == Inspection::bad)
    problem = fmt::format("cannot use cache {}: {}; running without it", path, found.reason);
  if (!problem.empty()) {
    warn(problem);
    db.close();
    return false;
  }
  return true;
}

void Store::Impl::damaged(Table t, const std::string& key, const std::string& why) const {
  if (!warned_damaged.insert(key).second) return;
  warn(fmt::format("cache {}: {} entry {} is damaged ({}); it is rebuilt", path, table_name(t), key, why));
}

Store::Store() : impl_(std::make_unique<Impl>()) {}
Store::~Store() = default;

Expected<std::unique_ptr<Store>> Store::open(const std::string& path, StoreOptions options) {
  if (path.empty()) return make_error("cache store: the path is empty; expected a file path");
  std::unique_ptr<Store> store(new Store());
  Impl& s = *store->impl_;
  s.path = path;
  s.options = std::move(options);
  if (s.options.busy_timeout_ms < 0) s.options.busy_timeout_ms = 0;
  // A file this process may not write (a cache shipped beside an installed program, a WAL-mode
  // file whose -wal and -shm cannot be made in its directory) is read where it is: opened for
  // writing, SQLite fell back to reading it and then failed ("attempt to write a readonly
  // database"), and kiln ran without it. A scope's file is meant to be read so (the target
  // scope's shipped cache); at a path of the user's, the warning says nothing new is stored.
  std::error_code ec;
  if (!s.options.read_only && fs::exists(path, ec) &&
      (::access(path.c_str(), W_OK) != 0 || !directory_writable(parent_directory(path)))) {
    s.options.read_only = true;
    if (!is_scope_path(path))
      s.warn(
          fmt::format("cache {} cannot be written by this process; it is read, and nothing new "
                      "is stored in it",
                      path));
  }
  if (s.options.read_only)
    open_read_only(s);
  else
    open_writable(s);
  return store;
}

const std::string& Store::path() const {
  return impl_->path;
}
bool Store::read_only() const {
  return impl_->options.read_only;
}

}  // namespace kiln::cache
