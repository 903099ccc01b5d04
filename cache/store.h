// The kernel cache store: one SQLite database per scope (DESIGN.md §8), holding compiled kernels,
// fusion plans and autotune decisions under keys whose parts are stored so that a miss can be
// explained. Knows nothing else of kiln: values are opaque bytes and strings.
//
// Safety contract: WAL journal (rollback journal when the file is on a network file system),
// busy timeout, one short transaction per write; a corrupt, truncated or foreign file is moved
// aside (renamed to PATH.corrupt-<time>) with one warning and rebuilt; read-only stores serve hits
// and never write; a size cap evicts least-recently-used kernels. No method throws or aborts on a
// bad file or a locked database: failures degrade to misses and warnings (StoreOptions::warn).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "kiln/error.h"

namespace kiln::cache {

// The parts of a key, in a fixed order, e.g. {"kernel", <canonical kernel IR>}, {"tune", ...},
// {"target", "cpu"}, {"cpu", "sapphirerapids"}, {"features", "+avx2,..."}, {"llvm", "19.1.7"},
// {"codegen", "kiln-cpu-3"}, {"schema", "1"}. The digest (xxHash3 128-bit, hex) is the lookup key.
struct KeyParts {
  std::vector<std::pair<std::string, std::string>> parts;
  std::string digest() const;
  // The part identifying *what* is cached (the first part: kernel text, graph structure); misses
  // are explained against stored entries with the same identity.
  const std::pair<std::string, std::string>& identity() const { return parts.front(); }
};

enum class Table { kernels, plans, autotune };
const char* table_name(Table t);  // "kernels", "plans", "autotune"
std::optional<Table> parse_table(std::string_view name);
inline constexpr Table kAllTables[] = {Table::kernels, Table::plans, Table::autotune};

struct Entry {
  std::string key;             // digest
  std::vector<uint8_t> value;  // the artifact: object code, a serialized plan, a decision
  std::string source;          // generated source (LLVM IR) or a readable form; may be empty
  std::string metadata;        // JSON text
  int64_t size = 0;            // bytes of value + source + metadata
  int64_t created = 0, last_used = 0;  // unix seconds
  int64_t hits = 0;
  // Filled by show() and list() (ignored by put()): the stored key parts and the entry's table.
  std::vector<std::pair<std::string, std::string>> parts;
  Table table = Table::kernels;
};

struct StoreOptions {
  bool read_only = false;
  int64_t max_size = 0;  // bytes; 0 = no cap. Enforced after each put (LRU eviction).
  int busy_timeout_ms = 5000;
  std::function<void(const std::string&)> warn = nullptr;  // null: warnings go to stderr
};
// An unusable file (damaged, another schema, not a database) is moved aside to PATH.corrupt-TIME
// and a new cache started in its place when kiln named the path (is_scope_path) or the file is
// recognizably a kiln cache; any other file is left as it is, and the store runs without one.

struct Stats {
  std::string path;
  int64_t kernels = 0, plans = 0, autotune = 0;
  int64_t bytes = 0;  // file size
  int64_t hits = 0;   // sum of hit counts
  int schema_version = 0;
  bool read_only = false;
  std::string journal_mode;  // "wal", "delete" (network file system), "" when there is no file
  std::string problem;       // why the file is unusable (read-only stores cannot rebuild it)
};

// What prune did: the bytes of the entries it evicted, and the file's size afterwards (after the
// WAL is folded back into it).
struct Pruned {
  int64_t freed = 0;
  int64_t bytes = 0;
};

// A check of one entry's contents by its reader (the runtime knows what a plan or a kernel must
// hold): "" when the entry is sound, else what is wrong with it.
using EntryCheck = std::function<std::string(const Entry&)>;

// Why a lookup missed: the entry is damaged, "no entry with this identity" or, for the closest
// stored entry with the same identity, each part that differs with both values.
struct Explanation {
  bool hit = false;
  bool damaged = false;  // the entry is stored under this key, but fails its checksum
  std::string closest_key;
  std::vector<std::tuple<std::string, std::string, std::string>> differing;  // part, stored, wanted
  std::string text() const;
};

class Store {
 public:
  // Opens (creating directories and the file as needed, unless read-only). Returns an error only
  // for arguments that cannot work at all (an empty path); a bad file is moved aside and rebuilt.
  static Expected<std::unique_ptr<Store>> open(const std::string& path, StoreOptions options = {});
  ~Store();

  // Every entry read with its value is checked against its seal (cache::entry_seal): a damaged
  // entry is a miss, with a warning. A statement that finds the file corrupt moves it aside and
  // starts a new one (with a warning saying what was lost).
  std::optional<Entry> get(Table t, const KeyParts& key);  // a hit bumps last_used and hits
  bool put(Table t, const KeyParts& key, const Entry& e);  // false: not stored (read-only, error)
  Explanation explain(Table t, const KeyParts& key);
  std::optional<Entry> show(const std::string& digest);  // any table
  std::vector<Entry> list(Table t);                      // without values
  Stats stats();
  // Evicts least-recently-used entries of every table until the file (with its WAL) takes at
  // most `max_size` bytes; an error says why it could not (read-only, disk full, busy readers).
  Expected<Pruned> prune(int64_t max_size);
  // The integrity check, every key against its parts, every entry against its seal, and
  // `check` (when given) on every intact entry; the error lists each problem by table and key.
  Expected<void> verify(const EntryCheck& check = nullptr);
  // A standalone SQLite file holding every entry, or (with `digests`) only the entries of any
  // table whose digest is listed (digests not stored are skipped); returns the entries written.
  Expected<int64_t> export_bundle(const std::string& file,
                                  const std::vector<std::string>* digests = nullptr);
  Expected<int64_t> import_bundle(const std::string& file);  // entries added
  Expected<void> clear();  // every entry deleted and the file shrunk, or an error saying why not
  const std::string& path() const;
  void warn(const std::string& message) const;  // through StoreOptions::warn (else stderr)
  bool read_only() const;

  struct Impl;  // internal: cache/store_impl.h

 private:
  Store();
  std::unique_ptr<Impl> impl_;
};

// DESIGN.md §8 scope locations.
//   local:  <project root>/.kiln/cache.sqlite (project root = the directory holding kiln.toml,
//           else the working directory)
//   target: kiln-cache.sqlite beside the running executable (/proc/self/exe); for an installed
//           app whose directory this user cannot write (/usr/bin) and that ships no such file
//           there, the global scope's file
//   global: $XDG_CACHE_HOME/kiln/cache.sqlite, else ~/.cache/kiln/cache.sqlite
std::string local_scope_path(const std::string& project_root);
// The directory holding kiln.toml, searched upward from `start`; else `start` itself.
std::string find_project_root(const std::string& start);
// `xdg_cache_home` and `home` are $XDG_CACHE_HOME and $HOME as the edge read them ("" when unset;
// a relative XDG_CACHE_HOME is ignored, as the XDG spec says; without HOME, the passwd entry's).
std::string target_scope_path(std::string_view xdg_cache_home, std::string_view home);
// target_scope_path for an executable in `exe_dir`.
std::string target_scope_path_in(const std::string& exe_dir, std::string_view xdg_cache_home,
                                 std::string_view home);
std::string global_scope_path(std::string_view xdg_cache_home, std::string_view home);
// Whether `path` is where a scope keeps its file (kiln-cache.sqlite, or cache.sqlite in a
// directory named kiln or .kiln): kiln named it, so a file there that is no usable cache was one
// (damaged), and opening it for writing moves it aside. Any other path (file=PATH) may hold a
// user's file: only one that is recognizably a kiln cache (SQLite's header with kiln's
// application_id) is moved aside; another is left as it is, and the store runs without it.
bool is_scope_path(const std::string& path);

}  // namespace kiln::cache
