// Looking into a store: miss explanations, verification of every stored digest, and bundles
// (standalone cache files copied in and out through ATTACH).
#include <sqlite3.h>

#include <filesystem>

#include <fmt/format.h>

#include "cache/file_system.h"
#include "cache/key_parts.h"
#include "cache/store_impl.h"

namespace kiln::cache {
namespace fs = std::filesystem;

namespace {

// What the SQLite file `file` is: a kiln cache (ours), an empty database (fresh), or something
// else (bad, with the reason), looked at read-only.
Inspection inspect_file(const std::string& file, int deadline_ms) {
  std::string uri = read_only_uri(file);
  sql::Db db;
  int rc = db.open(uri, true, false, true);
  return rc == SQLITE_OK ? inspect(db, 0, deadline_ms)
                         : Inspection{Inspection::bad, sql::describe(rc)};
}

// Whether the kiln cache `file` is a bundle that export wrote (its meta table says so): export
// replaces only such a file, never a cache that kiln runs keep (another project's, the global one).
bool written_by_export(const std::string& file) {
  std::string uri = read_only_uri(file);
  sql::Db db;
  if (db.open(uri, true, false, true) != SQLITE_OK) return false;
  int rc = SQLITE_OK;
  auto rows = sql::column(db, "SELECT value FROM meta WHERE name = 'bundle'", &rc);
  return rc == SQLITE_OK && rows == std::vector<std::string>{"export"};
}

// Why `file` cannot be read as a bundle: missing, a directory or device, or not a regular file.
std::string unreadable_bundle(const std::string& file) {
  std::error_code ec;
  const fs::file_status st = fs::status(file, ec);
  if (!fs::exists(st)) return fmt::format("no such file: {}", file);
  if (fs::is_directory(st)) return fmt::format("{} is a directory, not a kiln cache bundle", file);
  if (!fs::is_regular_file(st))
    return fmt::format("{} is not a regular file, so no kiln cache bundle", file);
  return "";
}

}  // namespace

Explanation Store::explain(Table t, const KeyParts& key) {
  Impl& s = *impl_;
  std::lock_guard lock(s.mutex);
  Explanation out;
  if (!s.db || key.parts.empty()) return out;
  std::string digest = key.digest();
  {
    // The exact entry, when it is there but damaged, is a miss for that reason.
    sql::Stmt exact(s.db, fmt::format("SELECT key, parts, value, source, metadata, checksum FROM {}"
                                      " WHERE key = ?",
                                      table_name(t)));
    exact.bind(1, digest);
    if (exact.step() == SQLITE_ROW &&
        entry_seal(exact.text(0), exact.text(1), exact.blob(2), exact.text(3), exact.text(4)) !=
            exact.text(5)) {
      out.closest_key = digest;
      out.damaged = true;
      return out;
    }
  }
  sql::Stmt st(s.db, fmt::format("SELECT key, parts FROM {} WHERE identity = ? ORDER BY key",
                                 table_name(t)));
  st.bind(1, identity_digest(key));
  std::optional<size_t> fewest;
  while (st.step() == SQLITE_ROW) {
    auto stored = parts_from_json(st.text(1));
    if (!stored) continue;
    auto differing = differing_parts(*stored, key.parts);
    if (st.text(0) == digest && differing.empty()) {
      out.hit = true;
      out.closest_key = digest;
      out.differing.clear();
      return out;
    }
    if (!fewest || differing.size() < *fewest) {
      fewest = differing.size();
      out.closest_key = st.text(0);
      out.differing = std::move(differing);
    }
  }
  return out;
}

Expected<void> Store::verify(const EntryCheck& check) {
  Impl& s = *impl_;
  std::lock_guard lock(s.mutex);
  if (!s.db) {
    if (s.problem.empty()) return {};  // no file: nothing stored, nothing wrong
    return make_error(fmt::format("cache {} is unusable: {}", s.path, s.problem));
  }
  int rc = 0;
  auto rows = sql::column(s.db, "PRAGMA integrity_check", &rc);
  if (rc != SQLITE_OK)
    return make_error(
        fmt::format("cache {}: integrity check failed: {}", s.path, sql::describe(rc)));
  std::vector<std::string> problems;
  if (rows != std::vector<std::string>{"ok"})
    for (const auto& row : rows) problems.push_back("integrity check: " + row);
  for (Table t : kAllTables) {
    sql::Stmt st(s.db, fmt::format("SELECT key, identity, parts, value, source, metadata, checksum"
                                   " FROM {} ORDER BY tick",
                                   table_name(t)));
    while ((rc = st.step()) == SQLITE_ROW) {
      Entry e;
      e.table = t;
      e.key = st.text(0);
      e.value = st.blob(3);
      e.source = st.text(4);
      e.metadata = st.text(5);
      auto parts = parts_from_json(st.text(2));
      std::string where = fmt::format("{} entry {}", table_name(t), e.key);
      if (!parts || parts->empty())
        problems.push_back(where + ": its key parts cannot be read");
      else if (KeyParts{*parts}.digest() != e.key)
        problems.push_back(where + ": the key is not the digest of its parts");
      else if (identity_digest(KeyParts{*parts}) != st.text(1))
        problems.push_back(where + ": the identity is not the digest of its first part");
      else if (entry_seal(e.key, st.text(2), e.value, e.source, e.metadata) != st.text(6))
        problems.push_back(where + ": its contents do not match its checksum");
      else if (check) {
        e.parts = std::move(*parts);
        if (std::string why = check(e); !why.empty()) problems.push_back(where + ": " + why);
      }
    }
    if (rc != SQLITE_DONE)
      problems.push_back(fmt::format("reading {}: {}", table_name(t), sql::describe(rc)));
  }
  if (problems.empty()) return {};
  std::string message = fmt::format("cache {}: {} problem{}", s.path, problems.size(),
                                    problems.size() == 1 ? "" : "s");
  for (const std::string& p : problems) message += "\n  " + p;
  return make_error(message);
}

int64_t Store::Impl::copy_from(const std::string& src_uri, bool replace,
                               const std::vector<std::string>* keys) {
  sql::Stmt attach(db, "ATTACH DATABASE ? AS src");
  attach.bind(1, src_uri);
  if (int rc = attach.step(); rc != SQLITE_DONE) return -rc;
  // The wanted keys live in a temporary table of this connection, so one statement per table
  // copies them whatever their number.
  const std::string filter = keys ? " WHERE key IN (SELECT key FROM temp.wanted)" : "";
  int64_t added = 0;
  int rc = db.transaction(
      [&] {
        added = 0;
        if (keys) {
          if (int r = db.exec("CREATE TEMP TABLE IF NOT EXISTS wanted (key TEXT PRIMARY KEY);"
                              "DELETE FROM temp.wanted");
              r != SQLITE_OK)
            return r;
          sql::Stmt add(db, "INSERT OR IGNORE INTO temp.wanted (key) VALUES (?)");
          for (const std::string& k : *keys) {
            add.bind(1, k);
            if (int r = add.step(); r != SQLITE_DONE) return r;
            add.reset();
          }
        }
        for (Table t : kAllTables) {
          // Kept entries that fail their seal give way to the copied ones (an import that kept
          // them reported "imported 0 entries" and left every damaged one as it was).
          if (!replace) {
            std::vector<std::string> damaged;
            sql::Stmt mine(db,
                           fmt::format("SELECT key, parts, value, source, metadata, checksum "
                                       "FROM main.{0} WHERE key IN (SELECT key FROM src.{0}{1})",
                                       table_name(t), filter));
            while (mine.step() == SQLITE_ROW)
              if (entry_seal(mine.text(0), mine.text(1), mine.blob(2), mine.text(3),
                             mine.text(4)) != mine.text(5))
                damaged.push_back(mine.text(0));
            sql::Stmt drop(db, fmt::format("DELETE FROM main.{} WHERE key = ?", table_name(t)));
            for (const std::string& k : damaged) {
              drop.bind(1, k);
              if (int r = drop.step(); r != SQLITE_DONE) return r;
              drop.reset();
            }
          }
          // Copied entries count as used before every local one (their ticks go first).
          std::string copy = fmt::format(
              "INSERT OR {0} INTO main.{1} ({2}) SELECT key, identity, parts, value, source, "
              "metadata, size, created, last_used, tick - {4}, hits, checksum"
              " FROM src.{1}{3} ORDER BY tick",
              replace ? "REPLACE" : "IGNORE", table_name(t), kColumns, filter, next_tick("src"));
          if (int r = db.exec(copy); r != SQLITE_OK) return r;
          added += sqlite3_changes(db.get());
        }
        return SQLITE_OK;
      },
      deadline_ms());
  if (keys) db.exec("DROP TABLE IF EXISTS temp.wanted");
  db.exec("DETACH DATABASE src");
  return rc == SQLITE_OK ? added : -rc;
}

Expected<int64_t> Store::export_bundle(const std::string& file,
                                       const std::vector<std::string>* digests) {
  Impl& s = *impl_;
  std::lock_guard lock(s.mutex);
  if (!s.problem.empty())
    return make_error(fmt::format("cache {} is unusable: {}", s.path, s.problem));
  std::error_code ec;
  if (fs::exists(file) && fs::equivalent(file, s.path, ec))
    return make_error(fmt::format("export: {} is the cache itself; expected another file", file));
  // Only an earlier bundle (a kiln cache) or an empty file is replaced: anything else a user has
  // at that path is kept.
  if (fs::exists(fs::symlink_status(file, ec)) && fs::file_size(file, ec) != 0) {
    if (std::string why = unreadable_bundle(file); !why.empty())
      return make_error(fmt::format("export: {}; nothing was written", why));
    const Inspection found = inspect_file(file, s.deadline_ms());
    if (found.kind != Inspection::ours)
      return make_error(fmt::format(
          "export: {} exists and is not a kiln cache bundle ({}); nothing was written: remove it "
          "or choose another path",
          file, found.kind == Inspection::fresh ? "an empty database" : found.reason));
    if (!written_by_export(file))
      return make_error(fmt::format(
          "export: {} is a kiln cache, not a bundle that export wrote; nothing was written: remove "
          "it or choose another path",
          file));
  }
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(file + suffix, ec);
  auto bundle = Store::open(file, StoreOptions{.warn = s.options.warn});
  if (!bundle) return std::unexpected(bundle.error());
  Impl& b = *(*bundle)->impl_;
  if (!b.db) return make_error(fmt::format("export: cannot create {}", file));
  int64_t count = 0;
  if (s.db) {
    count = b.copy_from(read_only_uri(s.path), /*replace=*/true, digests);
    if (count < 0)
      return make_error(fmt::format("export to {}: {} ({})", file,
                                    sql::describe(static_cast<int>(-count)), b.db.message()));
  }
  // Marked as export's, so that a later export may replace it (and no other cache).
  b.db.exec("INSERT OR REPLACE INTO meta VALUES ('bundle', 'export')");
  // A bundle is one self-contained file: no WAL to ship beside it.
  b.db.exec("PRAGMA journal_mode=DELETE");
  return count;
}

Expected<int64_t> Store::import_bundle(const std::string& file) {
  Impl& s = *impl_;
  std::lock_guard lock(s.mutex);
  if (s.options.read_only)
    return make_error(
        fmt::format("import: cache {} is read-only; expected a writable cache", s.path));
  if (!s.db) return make_error(fmt::format("import: cache {} is not available", s.path));
  if (std::string why = unreadable_bundle(file); !why.empty())
    return make_error(fmt::format("import: {}", why));
  std::error_code ec;
  if (fs::equivalent(file, s.path, ec))
    return make_error(fmt::format("import: {} is the cache itself; expected a bundle", file));
  std::string uri = read_only_uri(file);
  {
    Inspection found = inspect_file(file, s.deadline_ms());
    if (found.kind != Inspection::ours)
      return make_error(
          fmt::format("import: {} is not a kiln cache bundle ({})", file,
                      found.kind == Inspection::fresh ? "empty database" : found.reason));
    // Every entry against its seal and its key, as `kiln cache verify` checks them: a bundle
    // damaged in transit is refused whole rather than copied in as entries that then miss.
    auto bundle =
        Store::open(file, StoreOptions{.read_only = true, .warn = [](const std::string&) {}});
    if (!bundle) return std::unexpected(bundle.error());
    if (auto sound = (*bundle)->verify(); !sound)
      return make_error(fmt::format("import: {} is damaged; nothing was imported: {}", file,
                                    sound.error().message));
  }
  int64_t added = s.copy_from(uri, /*replace=*/false);
  if (added < 0)
    return make_error(fmt::format("import from {}: {} ({})", file,
                                  sql::describe(static_cast<int>(-added)), s.db.message()));
  if (s.options.max_size > 0) s.evict(s.options.max_size);
  return added;
}

}  // namespace kiln::cache
