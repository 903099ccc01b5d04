// The SQLite wrapper: result-code handling and the busy retry that the busy handler alone does
// not cover (journal-mode switches, schema creation, BEGIN IMMEDIATE races on a new file).
#include "cache/sqlite_db.h"

#include <sqlite3.h>

#include <chrono>
#include <random>
#include <thread>

namespace kiln::cache::sql {
namespace {

using Clock = std::chrono::steady_clock;

// Sleeps a short random time so that processes retrying at once spread out.
void backoff(int attempt) {
  thread_local std::minstd_rand rng(std::random_device{}());
  int cap = std::min(50, 2 << std::min(attempt, 5));
  std::this_thread::sleep_for(std::chrono::milliseconds(1 + rng() % cap));
}

template <class F>
int retry(F f, int deadline_ms) {
  auto deadline = Clock::now() + std::chrono::milliseconds(deadline_ms);
  for (int attempt = 0;; ++attempt) {
    int rc = f();
    if (!is_busy(rc) || Clock::now() > deadline) return rc;
    backoff(attempt);
  }
}

int busy_handler(void* timeout_ms, int count) {
  // Each call sleeps about 1.5 ms, so `count` calls have waited about 1.5 * count ms.
  if (count * 3 / 2 >= *static_cast<int*>(timeout_ms)) return 0;
  thread_local std::minstd_rand rng(std::random_device{}());
  std::this_thread::sleep_for(std::chrono::microseconds(500 + rng() % 2000));
  return 1;
}

}  // namespace

void Db::set_busy_timeout(int ms) {
  busy_timeout_ms_ = ms;
  if (db_) sqlite3_busy_handler(db_, ms > 0 ? busy_handler : nullptr, &busy_timeout_ms_);
}

int Db::open(const std::string& filename, bool read_only, bool create, bool uri) {
  close();
  int flags = read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
  if (create && !read_only) flags |= SQLITE_OPEN_CREATE;
  if (uri) flags |= SQLITE_OPEN_URI;
  int rc = sqlite3_open_v2(filename.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) close();
  return rc;
}

void Db::close() {
  if (db_) sqlite3_close_v2(db_);
  db_ = nullptr;
}

std::string Db::message() const {
  return db_ ? sqlite3_errmsg(db_) : "not open";
}

int Db::exec(const std::string& sql) {
  if (!db_) return SQLITE_MISUSE;
  return sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
}

int Db::exec_retry(const std::string& sql, int deadline_ms) {
  return retry([&] { return exec(sql); }, deadline_ms);
}

int Db::transaction(const std::function<int()>& body, int deadline_ms) {
  return retry(
      [&] {
        int rc = exec("BEGIN IMMEDIATE");
        if (rc != SQLITE_OK) return rc;
        rc = body();
        // A rollback-journal COMMIT can be busy while readers finish; the transaction stays open.
        if (rc == SQLITE_OK) rc = retry([&] { return exec("COMMIT"); }, deadline_ms);
        if (rc != SQLITE_OK && !sqlite3_get_autocommit(db_)) exec("ROLLBACK");
        return rc;
      },
      deadline_ms);
}

Stmt::Stmt(const Db& db, const std::string& sql) {
  prepare_rc_ = db ? sqlite3_prepare_v2(db.get(), sql.c_str(), -1, &st_, nullptr) : SQLITE_MISUSE;
}

Stmt::~Stmt() {
  sqlite3_finalize(st_);
}

Stmt& Stmt::bind(int i, const std::string& v) {
  if (st_) sqlite3_bind_text(st_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}

Stmt& Stmt::bind(int i, int64_t v) {
  if (st_) sqlite3_bind_int64(st_, i, v);
  return *this;
}

Stmt& Stmt::bind_blob(int i, const std::vector<uint8_t>& v) {
  // A zero-length blob, not NULL, so that NOT NULL columns accept empty values.
  if (st_)
    sqlite3_bind_blob(st_, i, v.empty() ? "" : static_cast<const void*>(v.data()),
                      static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}

int Stmt::step() {
  return st_ ? sqlite3_step(st_) : SQLITE_MISUSE;
}

void Stmt::reset() {
  if (st_) sqlite3_reset(st_);
}

std::string Stmt::text(int col) const {
  auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st_, col));
  return p ? std::string(p, sqlite3_column_bytes(st_, col)) : std::string();
}

int64_t Stmt::int64(int col) const {
  return sqlite3_column_int64(st_, col);
}

std::vector<uint8_t> Stmt::blob(int col) const {
  auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(st_, col));
  return p ? std::vector<uint8_t>(p, p + sqlite3_column_bytes(st_, col)) : std::vector<uint8_t>();
}

bool is_busy(int rc) {
  int primary = rc & 0xff;
  return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
}

bool is_corrupt(int rc) {
  int primary = rc & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB;
}

bool is_full(int rc) {
  return (rc & 0xff) == SQLITE_FULL;
}

std::string describe(int rc) {
  return sqlite3_errstr(rc);
}

std::vector<std::string> column(const Db& db, const std::string& sql, int* rc) {
  Stmt st(db, sql);
  std::vector<std::string> rows;
  *rc = st.prepare_rc();
  if (*rc != SQLITE_OK) return rows;
  while ((*rc = st.step()) == SQLITE_ROW) rows.push_back(st.text(0));
  if (*rc == SQLITE_DONE) *rc = SQLITE_OK;
  return rows;
}

}  // namespace kiln::cache::sql
