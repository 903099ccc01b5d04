// Cache entries: lookups that bump their use, writes in one short transaction each, listing,
// statistics, and least-recently-used eviction.
#include "cache/store.h"

#include <sqlite3.h>

#include <filesystem>

#include <fmt/format.h>

#include "cache/key_parts.h"
#include "cache/store_impl.h"

namespace kiln::cache {
namespace {

// Reads the columns every query below selects after the key: parts, source, metadata, size,
// created, last_used, hits (value where asked for).
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

std::string select_entry(Table t, bool with_value, const std::string& where) {
  return fmt::format("SELECT key, parts, {}, metadata, size, created, last_used, hits{} FROM {} {}",
                     with_value ? "source" : "''", with_value ? ", value" : "", table_name(t),
                     where);
}

int64_t scalar(const sql::Db& db, const std::string& query) {
  sql::Stmt st(db, query);
  return st.step() == SQLITE_ROW ? st.int64(0) : 0;
}

}  // namespace

std::optional<Entry> Store::get(Table t, const KeyParts& key) {
  Impl& s = *impl_;
  std::lock_guard lock(s.mutex);
  if (!s.db) return std::nullopt;
  std::string digest = key.digest();
  sql::Stmt st(s.db, select_entry(t, true, "WHERE key = ?"));
  st.bind(1, digest);
  int rc = st.step();
  if (rc != SQLITE_ROW) {
    if (rc != SQLITE_DONE) s.warn_failure("lookup", rc);
    return std::nullopt;
  }
  Entry e = read_entry(st, t, true);
  // End the read: a write from a connection still holding an older WAL snapshot stays busy.
  st.reset();
  if (e.parts != key.parts) return std::nullopt;  // a digest collision: not this entry
  if (s.options.read_only) return e;
  int64_t now = now_seconds();
  std::string bump = fmt::format(
      "UPDATE {0} SET last_used = ?, hits = hits + 1,"
      " tick = (SELECT coalesce(max(tick), 0) + 1 FROM {0}) WHERE key = ?",
      table_name(t));
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
  int64_t size =
      static_cast<int64_t>(entry.value.size() + entry.source.size() + entry.metadata.size());
  int64_t now = now_seconds();
  std::string insert = fmt::format(
      "INSERT OR REPLACE INTO {0} ({1}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?,"
      " (SELECT coalesce(max(tick), 0) + 1 FROM {0}), 0)",
      table_name(t), kColumns);
  int rc = s.db.transaction(
      [&] {
        sql::Stmt st(s.db, insert);
        st.bind(1, key.digest()).bind(2, identity_digest(key)).bind(3, *parts);
        st.bind_blob(4, entry.value).bind(5, entry.source).bind(6, entry.metadata);
        st.bind(7, size).bind(8, now).bind(9, now);
        int r = st.step();
        return r == SQLITE_DONE ? SQLITE_OK : r;
      },
      s.deadline_ms());
  if (rc != SQLITE_OK) {
    s.warn_failure("storing an entry", rc);
    return false;
  }
  if (s.options.max_size > 0) s.evict(s.options.max_size);
  return true;
}

int64_t Store::Impl::evict(int64_t max_size) {
  int64_t freed = 0;
  int rc = db.transaction(
      [&] {
        freed = 0;
        int64_t total = 0;
        for (Table t : kAllTables)
          total += scalar(db, fmt::format("SELECT coalesce(sum(size), 0) FROM {}", table_name(t)));
        if (total <= max_size) return SQLITE_OK;
        // Collect first: deleting under an open cursor of the same table is best avoided.
        std::vector<std::pair<std::string, int64_t>> victims;
        sql::Stmt oldest(db, "SELECT key, size FROM kernels ORDER BY tick");
        for (int64_t left = total; left > max_size && oldest.step() == SQLITE_ROW;) {
          victims.emplace_back(oldest.text(0), oldest.int64(1));
          left -= oldest.int64(1);
        }
        sql::Stmt remove(db, "DELETE FROM kernels WHERE key = ?");
        for (const auto& [key, size] : victims) {
          remove.bind(1, key);
          if (int r = remove.step(); r != SQLITE_DONE) return r;
          remove.reset();
          freed += size;
        }
        return SQLITE_OK;
      },
      deadline_ms());
  if (rc != SQLITE_OK) {
    warn_failure("evicting entries", rc);
    return 0;
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
    if (st.step() == SQLITE_ROW) return read_entry(st, t, true);
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
  if (rc != SQLITE_DONE) s.warn_failure("listing entries", rc);
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
  std::error_code ec;
  for (const char* suffix : {"", "-wal"}) {
    auto size = std::filesystem::file_size(s.path + suffix, ec);
    if (!ec) out.bytes += static_cast<int64_t>(size);
  }
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

int64_t Store::prune(int64_t max_size) {
  Impl& s = *impl_;
  std::lock_guard lock(s.mutex);
  if (!s.db || s.options.read_only) return 0;
  int64_t freed = s.evict(max_size);
  // Give the freed pages back to the file system; a busy database keeps them for later.
  if (freed > 0) s.db.exec("VACUUM");
  return freed;
}

void Store::clear() {
  Impl& s = *impl_;
  std::lock_guard lock(s.mutex);
  if (!s.db || s.options.read_only) return;
  int rc = s.db.transaction(
      [&] { return s.db.exec("DELETE FROM kernels; DELETE FROM plans; DELETE FROM autotune;"); },
      s.deadline_ms());
  if (rc != SQLITE_OK) return s.warn_failure("clearing", rc);
  s.db.exec("VACUUM");
}

}  // namespace kiln::cache
