// Cache entries: lookups that bump their use, writes in one short transaction each, listing,
// statistics, and least-recently-used eviction.
#include "cache/store.h"

#include <sqlite3.h>
#include <sys/statvfs.h>

#include <filesystem>

#include <fmt/format.h>

#include "cache/file_system.h"
#include "cache/key_parts.h"
#include "cache/store_impl.h"

namespace kiln::cache {
namespace {

// The columns every query below selects: key, parts, source, metadata, size, created, last_used,
// hits, and where asked for value and checksum.
std::string select_entry(Table t, bool with_value, const std::string& where) {
  return fmt::format("SELECT key, parts, {}, metadata, size, created, last_used, hits{} FROM {} {}",
                     with_value ? "source" : "''", with_value ? ", value, checksum" : "", table_name(t),
                     where);
}

Entry read_entry(const sql::Stmt& st, Table t, bool with_value) {
  Entry e;
  e.table = t;
  e.key = st.text(0);
  e.parts = parts_from_json(st.text(1)).value_or(PartList{});
  e.source = st.text(2);
  e.metadata = st.text(3);
  e.size = st.int64(4);
  e.created = st.int64(5);
  e.last_used = st.int64(6);
  e.hits = st.int64(7);
  if (with_value) e.value = st.blob(8);
  return e;
}

// Whether the row read with its value matches its seal.
bool sealed(const sql::Stmt& st, const Entry& e) {
  return entry_seal(e.key, st.text(1), e.value, e.source, e.metadata) == st.text(9);
}

int64_t scalar(const sql::Db& db, const std::string& query, int* rc = nullptr) {
  sql::Stmt st(db, query);
  int r = st.step();
  if (rc) *rc = r == SQLITE_ROW ? SQLITE_OK : r;
  return r == SQLITE_ROW ? st.int64(0) : 0;
}

int64_t file_bytes(const std::string& path) {
  int64_t bytes = 0;
  std::error_code ec;
  for (const char* suffix : {"", "-wal"}) {
    auto size = std::filesystem::file_size(path + suffix, ec);
    if (!ec) bytes += static_cast<int64_t>(size);
  }
  return bytes;
}

}  // namespace

std::string next_tick(const char* db) {
  std::string maxima;
  for (Table t : kAllTables)
    maxima += fmt::format("{}SELECT max(tick) AS t FROM {}.{}", maxima.empty() ? "" : " UNION ALL ",
                          db, table_name(t));
  return fmt::format("(SELECT coalesce(max(t), 0) + 1 FROM ({}))", maxima);
}

std::optional<Entry> Store::get(Table t, const KeyParts& key) {
  Impl& s = *impl_;
  std::lock_guard lock(s.mutex);
  if (!s.db) return std::nullopt;
  std::string digest = key.digest();
  sql::Stmt st(s.db, select_entry(t, true, "WHERE key = ?"));
  st.bind(1, digest);
  int rc = st.step();
  if (rc != SQLITE_ROW) {
    st.reset();
    if (rc != SQLITE_DONE) s.failed("a lookup", rc);
    return std::nullopt;
  }
  Entry e = read_entry(st, t, true);
  const bool intact = sealed(st, e);
  // End the read: a write from a connection still holding an older WAL snapshot stays busy.
  st.reset();
  if (!intact) {
    s.damaged(t, digest, "its contents do not match its checksum");
    return std::nullopt;
  }
  if (e.parts != key.parts) return std::nullopt;  // a digest collision: not this entry
  if (s.options.read_only) return e;
  int64_t now = now_seconds();
  std::string bump = fmt::format("UPDATE {} SET last_used = ?, hits = hits + 1, tick = {} WHERE key = ?",
                                 table_name(t), next_tick());
  // Losing a use count to a busy database costs nothing: the short deadline keeps hits fast.
  s.db.transaction(
      [&] {
        sql::Stmt up(s.db, bump);
        up.bind(1, now).bind(2, digest);
        int r = up.step();
        return r == SQLITE_DONE ? SQLITE_OK : r;
      },
      s.options.busy_timeout_ms);
  e.last_used = now;
  e.hits += 1;
  return e;
}

bool Store::put(Table t, const KeyParts& key, const Entry& entry) {
  Impl& s = *impl_;
  std::lock_guard lock(s.mutex);
  if (!s.db || s.options.read_only) return false;
  if (key.parts.empty()) {
    s.warn(fmt::format("cache {}: a key without parts; entry not stored", s.path));
    return false;
  }
  auto parts = parts_to_json(key.parts);
  if (!parts) {
    s.warn(fmt::format("cache {}: a key part is not valid UTF-8 text; entry not stored", s.path));
    return false;
  }
  const std::string digest = key.digest();
  const std::string seal = entry_seal(digest, *parts, entry.value, entry.source, entry.metadata);
  int64_t size =
      static_cast<int64_t>(entry.value.size() + entry.source.size() + entry.metadata.size());
  int64_t now = now_seconds();
  std::string insert =
      fmt::format("INSERT OR REPLACE INTO {} ({}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, {}, 0, ?)",
                  table_name(t), kColumns, next_tick());
  const auto write = [&] {
    return s.db.transaction(
        [&] {
          sql::Stmt st(s.db, insert);
          st.bind(1, digest).bind(2, identity_digest(key)).bind(3, *parts);
          st.bind_blob(4, entry.value).bind(5, entry.source).bind(6, entry.metadata);
          st.bind(7, size).bind(8, now).bind(9, now).bind(10, seal);
          int r = st.step();
          return r == SQLITE_DONE ? SQLITE_OK : r;
        },
        s.deadline_ms());
  };
  int rc = write();
  // A damaged file is replaced by a new one: the entry goes there.
  if (rc != SQLITE_OK && s.failed("storing an entry", rc)) rc = write();
  if (rc != SQLITE_OK) return false;
  if (s.options.max_size > 0) s.evict(s.options.max_size);
  return true;
}

int64_t Store::Impl::evict(int64_t max_size) {
  int64_t freed = 0;
  int rc = db.transaction(
      [&] {
        freed = 0;
        int64_t total = 0;
        for (Table t : kAllTables) {
          int r = SQLITE_OK;
          total += scalar(db, fmt::format("SELECT coalesce(sum(size), 0) FROM {}", table_name(t)), &r);
          if (r != SQLITE_OK) return r;
        }
        if (total <= max_size) return SQLITE_OK;
        // Least recently used first, whatever the table: collect, then delete (not under a cursor).
        std::string oldest_first;
        for (Table t : kAllTables)
          oldest_first += fmt::format("{}SELECT '{}', key, size, tick FROM {}",
                                      oldest_first.empty() ? "" : " UNION ALL ", table_name(t),
                                      table_name(t));
        std::vector<std::tuple<std::string, std::string, int64_t>> victims;
        sql::Stmt oldest(db, oldest_first + " ORDER BY tick");
        int r = SQLITE_ROW;
        for (int64_t left = total; left > max_size && (r = oldest.step()) == SQLITE_ROW;) {
          victims.emplace_back(oldest.text(0), oldest.text(1), oldest.int64(2));
          left -= oldest.int64(2);
        }
        if (r != SQLITE_ROW && r != SQLITE_DONE) return r;
        oldest.reset();
        for (const auto& [table, key, size] : victims) {
          sql::Stmt remove(db, fmt::format("DELETE FROM {} WHERE key = ?", table));
          remove.bind(1, key);
          if (int d = remove.step(); d != SQLITE_DONE) return d;
          freed += size;
        }
        return SQLITE_OK;
      },
      deadline_ms());
  if (rc != SQLITE_OK) {
    failed("evicting entries", rc);
    return -rc;
  }
  return freed;
}

std::optional<Entry> Store::show(const std::string& digest) {
  Impl& s = *impl_;
  std::lock_guard lock(s.mutex);
  if (!s.db) return std::nullopt;
  for (Table t : kAllTables) {
    sql::Stmt st(s.db, select_entry(t, true, "WHERE key = ?"));
    st.bind(1, digest);
    int rc = st.step();
    if (rc == SQLITE_ROW) {
      Entry e = read_entry(st, t, true);
      if (sealed(st, e)) return e;
      st.reset();
      s.damaged(t, digest, "its contents do not match its checksum");
      return std::nullopt;
    }
    if (rc != SQLITE_DONE) {
      st.reset();
      s.failed("a lookup", rc);
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::vector<Entry> Store::list(Table t) {
  Impl& s = *impl_;
  std::lock_guard lock(s.mutex);
  std::vector<Entry> out;
  if (!s.db) return out;
  sql::Stmt st(s.db, select_entry(t, false, "ORDER BY tick"));
  int rc;
  while ((rc = st.step()) == SQLITE_ROW) out.push_back(read_entry(st, t, false));
  st.reset();
  if (rc != SQLITE_DONE) s.failed("listing entries", rc);
  return out;
}

Stats Store::stats() {
  Impl& s = *impl_;
  std::lock_guard lock(s.mutex);
  Stats out;
  out.path = s.path;
  out.read_only = s.options.read_only;
  out.problem = s.problem;
  out.journal_mode = s.journal_mode;
  out.bytes = file_bytes(s.path);
  if (!s.db) return out;
  out.kernels = scalar(s.db, "SELECT count(*) FROM kernels");
  out.plans = scalar(s.db, "SELECT count(*) FROM plans");
  out.autotune = scalar(s.db, "SELECT count(*) FROM autotune");
  for (Table t : kAllTables)
    out.hits += scalar(s.db, fmt::format("SELECT coalesce(sum(hits), 0) FROM {}", table_name(t)));
  out.schema_version =
      static_cast<int>(scalar(s.db, "SELECT value FROM meta WHERE name = 'schema_version'"));
  return out;
}

Expected<void> Store::Impl::writable(const std::string& action) const {
  if (options.read_only)
    return make_error(
        fmt::format("cannot {} cache {}: it is opened read-only (asked so, or a file this process "
                    "cannot write)",
                    action, path));
  if (!db) {
    // SQLite reports a full disk met while opening (creating the WAL's index) as an I/O error.
    struct statvfs fs {};
    const bool full = ::statvfs(parent_directory(path).c_str(), &fs) == 0 && fs.f_bavail == 0;
    return make_error(fmt::format("cannot {} cache {}: {}{}", action, path,
                                  problem.empty() ? "the file could not be opened" : problem,
                                  full ? " (its file system is full)" : ""));
  }
  return {};
}

Expected<void> Store::Impl::compact(const std::string& action) {
  // VACUUM writes the new file through the WAL; the checkpoint copies it back and truncates the
  // WAL, so that the size on disk is the size of what is left.
  const auto run = [&](const char* sql) -> Expected<void> {
    if (int rc = db.exec_retry(sql, deadline_ms()); rc != SQLITE_OK)
      return make_error(fmt::format("cannot {} cache {}: {} failed: {}", action, path, sql,
                                    sql::describe(rc)));
    return {};
  };
  if (auto v = run("VACUUM"); !v) return v;
  if (journal_mode != "wal") return {};
  int rc = 0;
  auto busy = sql::column(db, "PRAGMA wal_checkpoint(TRUNCATE)", &rc);
  if (rc != SQLITE_OK)
    return make_error(fmt::format("cannot {} cache {}: the WAL checkpoint failed: {}", action, path,
                                  sql::describe(rc)));
  if (!busy.empty() && busy.front() != "0")
    return make_error(fmt::format(
        "cannot {} cache {}: another process is reading it, so its WAL could not be folded back; "
        "try again when it is idle",
        action, path));
  return {};
}

Expected<Pruned> Store::prune(int64_t max_size) {
  Impl& s = *impl_;
  std::lock_guard lock(s.mutex);
  if (auto w = s.writable("prune"); !w) return std::unexpected(w.error());
  // A size below what the file takes with no entry at all (one page per table and index, and the
  // schema's) cannot be met: said before anything is evicted.
  const int64_t page_size = scalar(s.db, "PRAGMA page_size");
  const int64_t empty = page_size * (1 + scalar(s.db, "SELECT count(*) FROM sqlite_master WHERE rootpage > 0"));
  if (max_size < empty)
    return make_error(fmt::format("cannot prune cache {} to {} bytes: with every entry evicted it "
                                  "would still take {} bytes",
                                  s.path, max_size, empty));
  Pruned out;
  // The entries' sizes leave out the file's own overhead (pages, indexes, free space): evict to a
  // smaller budget until the file itself fits, or nothing is left to evict.
  int64_t budget = max_size;
  for (int round = 0;; ++round) {
    const int64_t freed = s.evict(budget);
    if (freed < 0)
      return make_error(fmt::format("cannot prune cache {}: {}", s.path,
                                    sql::describe(static_cast<int>(-freed))));
    out.freed += freed;
    if (auto c = s.compact("prune"); !c) return std::unexpected(c.error());
    out.bytes = file_bytes(s.path);
    int64_t stored = 0;
    for (Table t : kAllTables)
      stored += scalar(s.db, fmt::format("SELECT coalesce(sum(size), 0) FROM {}", table_name(t)));
    if (out.bytes <= max_size) return out;
    if (stored == 0 || round == 16)
      return make_error(fmt::format(
          "cannot prune cache {} to {} bytes: {} it still takes {} bytes", s.path, max_size,
          stored == 0 ? "with every entry evicted" : "after 16 rounds of eviction", out.bytes));
    const int64_t overhead = out.bytes - stored;
    budget = std::min(stored - 1, std::max<int64_t>(0, max_size - overhead));
  }
}

Expected<void> Store::clear() {
  Impl& s = *impl_;
  std::lock_guard lock(s.mutex);
  if (auto w = s.writable("clear"); !w) return w;
  int rc = s.db.transaction(
      [&] { return s.db.exec("DELETE FROM kernels; DELETE FROM plans; DELETE FROM autotune;"); },
      s.deadline_ms());
  if (rc != SQLITE_OK)
    return make_error(fmt::format("cannot clear cache {}: {}{}", s.path, sql::describe(rc),
                                  sql::is_full(rc) ? " (free space on its file system, or delete the file)"
                                                   : ""));
  if (auto c = s.compact("shrink"); !c)
    return make_error(fmt::format("deleted every entry of cache {}, but {}", s.path, c.error().message));
  return {};
}

void Store::warn(const std::string& message) const {
  impl_->warn(message);
}

}  // namespace kiln::cache
