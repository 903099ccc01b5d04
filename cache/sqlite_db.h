// A narrow RAII wrapper over the SQLite C API (connections, statements, retried transactions),
// so that the rest of cache/ never sees raw sqlite3 handles or error codes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace kiln::cache::sql {

// An open connection; closes on destruction.
class Db {
 public:
  Db() = default;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  ~Db() { close(); }

  // Opens `filename` (a URI when `uri`), returning the SQLite result code.
  int open(const std::string& filename, bool read_only, bool create, bool uri);
  void close();
  sqlite3* get() const { return db_; }
  explicit operator bool() const { return db_ != nullptr; }
  std::string message() const;  // the last error message of this connection
  // Waits up to `ms` for locks held by other connections, polling every millisecond or two
  // (SQLite's own handler backs off to 100 ms sleeps, which starves many small writers).
  void set_busy_timeout(int ms);

  // Runs `sql` (one or more statements without results).
  int exec(const std::string& sql);
  // exec() retried while the database is busy or locked, up to `deadline_ms`.
  int exec_retry(const std::string& sql, int deadline_ms);
  // BEGIN IMMEDIATE; body; COMMIT — retried as a whole while busy. The body returns a result
  // code; anything but SQLITE_OK rolls back and is returned.
  int transaction(const std::function<int()>& body, int deadline_ms);

 private:
  sqlite3* db_ = nullptr;
  int busy_timeout_ms_ = 0;
};

// A prepared statement; finalizes on destruction.
class Stmt {
 public:
  Stmt(const Db& db, const std::string& sql);
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt();

  int prepare_rc() const { return prepare_rc_; }
  Stmt& bind(int i, const std::string& v);
  Stmt& bind(int i, int64_t v);
  Stmt& bind_blob(int i, const std::vector<uint8_t>& v);
  int step();  // SQLITE_ROW, SQLITE_DONE or an error code (SQLITE_MISUSE when not prepared)
  void reset();

  std::string text(int col) const;
  int64_t int64(int col) const;
  std::vector<uint8_t> blob(int col) const;

 private:
  sqlite3_stmt* st_ = nullptr;
  int prepare_rc_ = 0;
};

bool is_busy(int rc);          // SQLITE_BUSY or SQLITE_LOCKED (any extended code)
bool is_corrupt(int rc);       // SQLITE_CORRUPT or SQLITE_NOTADB (any extended code)
bool is_full(int rc);          // SQLITE_FULL: the disk (or a quota) is full
std::string describe(int rc);  // sqlite3_errstr

// Runs a single-column query and returns its rows as text ({} on error, with *rc set).
std::vector<std::string> column(const Db& db, const std::string& sql, int* rc);

}  // namespace kiln::cache::sql
