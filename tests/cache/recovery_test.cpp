// The store on bad ground: read-only use, missing files, garbage, truncated and foreign files,
// and file-system detection.
#include <sqlite3.h>
#include <sys/stat.h>

#include <fstream>
#include <iterator>
#include <set>

#include <fmt/format.h>

#include "cache/file_system.h"
#include "tests/cache/temp_dir.h"

namespace kiln::cache {
namespace {

namespace fs = std::filesystem;
using testing::entry;
using testing::kernel_key;
using testing::read_bytes;
using testing::value_text;

// Runs `sql` on the SQLite file `file` as another program would (a user's tool, a damage).
int run_sql(const std::string& file, const std::string& sql) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open(file.c_str(), &db);
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
  sqlite3_close(db);
  return rc;
}

class RecoveryTest : public testing::TempDirTest {
 protected:
  std::unique_ptr<Store> open(const std::string& file, bool read_only = false) {
    StoreOptions options;
    options.read_only = read_only;
    options.warn = [this](const std::string& w) { warnings_.push_back(w); };
    auto store = Store::open(file, options);
    EXPECT_TRUE(store.has_value());
    return std::move(*store);
  }
  std::vector<fs::path> moved_aside(const std::string& file) const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir_))
      if (const std::string name = e.path().filename().string();
          name.starts_with(fs::path(file).filename().string() + ".corrupt-") &&
          !name.ends_with("-wal") && !name.ends_with("-shm"))
        out.push_back(e.path());
    return out;
  }
  // The store must warn once, move the file aside with its bytes intact, and work afterwards.
  void expect_rebuilt(const std::string& file, const std::string& original_bytes) {
    auto store = open(file);
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_NE(warnings_[0].find("moved it aside"), std::string::npos) << warnings_[0];
    auto aside = moved_aside(file);
    ASSERT_EQ(aside.size(), 1u);
    EXPECT_EQ(read_bytes(aside[0].string()), original_bytes);
    EXPECT_EQ(store->stats().kernels, 0);
    ASSERT_TRUE(store->put(Table::kernels, kernel_key("k"), entry("fresh")));
    EXPECT_EQ(value_text(*store->get(Table::kernels, kernel_key("k"))), "fresh");
    EXPECT_TRUE(store->verify().has_value());
    store.reset();
    open(file);  // the rebuilt file opens cleanly
    EXPECT_EQ(warnings_.size(), 1u);
  }
  std::vector<std::string> warnings_;
};

TEST_F(RecoveryTest, ReadOnlyServesHitsAndWritesNothing) {
  std::string file = path("cache.sqlite");
  open(file)->put(Table::kernels, kernel_key("k"), entry("object"));
  std::string bytes = read_bytes(file);
  auto mtime = fs::last_write_time(file);
  std::set<fs::path> before{fs::directory_iterator(dir_), fs::directory_iterator()};
  {
    auto store = open(file, /*read_only=*/true);
    EXPECT_TRUE(store->read_only());
    for (int i = 0; i < 3; ++i) {
      auto got = store->get(Table::kernels, kernel_key("k"));
      ASSERT_TRUE(got.has_value());
      EXPECT_EQ(value_text(*got), "object");
    }
    EXPECT_FALSE(store->put(Table::kernels, kernel_key("new"), entry("x")));
    auto cleared = store->clear();
    ASSERT_FALSE(cleared.has_value());
    EXPECT_NE(cleared.error().message.find("read-only"), std::string::npos) << cleared.error().message;
    EXPECT_FALSE(store->prune(1).has_value());
    EXPECT_FALSE(store->import_bundle(file).has_value());
    EXPECT_EQ(store->show(kernel_key("k").digest())->hits, 0);  // hits are not counted
    EXPECT_EQ(store->stats().kernels, 1);
  }
  EXPECT_EQ(read_bytes(file), bytes);
  EXPECT_EQ(fs::last_write_time(file), mtime);
  // SQLite may leave its -wal/-shm coordination files beside a WAL database; nothing else.
  for (const auto& e : fs::directory_iterator(dir_)) {
    std::string name = e.path().filename().string();
    EXPECT_TRUE(before.count(e.path()) || name == "cache.sqlite-wal" || name == "cache.sqlite-shm")
        << name;
  }
  EXPECT_TRUE(warnings_.empty());
}

// The index names of `file`'s tables.
std::set<std::string> index_names(const std::string& file) {
  sqlite3* db = nullptr;
  sqlite3_open(file.c_str(), &db);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL",
                     -1, &st, nullptr);
  std::set<std::string> names;
  while (sqlite3_step(st) == SQLITE_ROW)
    names.insert(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return names;
}

TEST_F(RecoveryTest, AnOlderCacheGetsTheEvictionIndexOnceAndKeepsItsEntries) {
  std::string file = path("cache.sqlite");
  open(file)->put(Table::kernels, kernel_key("k"), entry("object"));
  const std::set<std::string> current = index_names(file);
  EXPECT_TRUE(current.count("kernels_lru") && !current.count("kernels_tick"));
  // The indexes a cache written before the eviction index had.
  std::string older;
  for (Table t : kAllTables)
    older += fmt::format("DROP INDEX {0}_lru; CREATE INDEX {0}_tick ON {0} (tick);", table_name(t));
  ASSERT_EQ(run_sql(file, older), SQLITE_OK);
  {
    auto store = open(file);
    EXPECT_EQ(value_text(*store->get(Table::kernels, kernel_key("k"))), "object");
  }
  EXPECT_EQ(index_names(file), current);
  EXPECT_TRUE(warnings_.empty());

  // A current cache opens without a write: another process's write transaction does not hold
  // the open up (before, each open took the write lock to add the index if it was missing).
  sqlite3* writer = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &writer), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(writer, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  StoreOptions options;
  options.busy_timeout_ms = 50;
  options.warn = [this](const std::string& w) { warnings_.push_back(w); };
  auto store = Store::open(file, options);
  ASSERT_TRUE(store.has_value());
  EXPECT_EQ(value_text(*(*store)->get(Table::kernels, kernel_key("k"))), "object");
  EXPECT_TRUE(warnings_.empty()) << warnings_.front();
  sqlite3_exec(writer, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(writer);
}

TEST_F(RecoveryTest, ReadOnlyNeverCreatesAMissingFile) {
  std::string file = path("sub/dir/cache.sqlite");
  auto store = open(file, /*read_only=*/true);
  EXPECT_FALSE(store->get(Table::kernels, kernel_key("k")).has_value());
  EXPECT_FALSE(store->put(Table::kernels, kernel_key("k"), entry("v")));
  EXPECT_TRUE(store->explain(Table::kernels, kernel_key("k")).closest_key.empty());
  EXPECT_TRUE(store->verify().has_value());
  EXPECT_EQ(store->stats().kernels, 0);
  EXPECT_FALSE(fs::exists(path("sub")));
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(RecoveryTest, ReadOnlyInAnUnwritableDirectory) {
  if (::geteuid() == 0) GTEST_SKIP() << "root can write anywhere";
  fs::create_directories(path("shipped"));
  std::string file = path("shipped/cache.sqlite");
  open(file)->put(Table::kernels, kernel_key("k"), entry("shipped object"));
  fs::permissions(path("shipped"), fs::perms::owner_read | fs::perms::owner_exec);
  auto store = open(file, /*read_only=*/true);
  auto got = store->get(Table::kernels, kernel_key("k"));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(value_text(*got), "shipped object");
  EXPECT_TRUE(warnings_.empty());
}

// A WAL-mode cache shipped where this process may not write (the target scope's file beside an
// installed program) is read when opened for writing too: SQLite fell back to reading it, then
// failed ("attempt to write a readonly database") and kiln ran without it. At a path of the
// user's the warning says nothing new is stored.
TEST_F(RecoveryTest, AFileThisProcessMayNotWriteIsReadWhereItIs) {
  if (::geteuid() == 0) GTEST_SKIP() << "root can write anywhere";
  for (const char* name : {"kiln-cache.sqlite", "mine.sqlite"}) {
    SCOPED_TRACE(name);
    const std::string dir = path(std::string("shipped-") + name), file = dir + "/" + name;
    fs::create_directories(dir);
    {
      auto store = open(file);
      ASSERT_TRUE(store->put(Table::kernels, kernel_key("k"), entry("shipped object")));
      ASSERT_EQ(store->stats().journal_mode, "wal");
    }
    fs::permissions(file, fs::perms::owner_read);
    fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
    warnings_.clear();
    auto store = open(file);  // not asked read-only
    EXPECT_TRUE(store->read_only());
    auto got = store->get(Table::kernels, kernel_key("k"));
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(value_text(*got), "shipped object");
    EXPECT_FALSE(store->put(Table::kernels, kernel_key("k2"), entry("new")));
    if (std::string(name) == "kiln-cache.sqlite") {
      EXPECT_TRUE(warnings_.empty());
    } else {
      ASSERT_EQ(warnings_.size(), 1u);
      EXPECT_NE(warnings_[0].find("cannot be written by this process; it is read, and nothing new "
                                  "is stored in it"),
                std::string::npos)
          << warnings_[0];
    }
  }
}

TEST_F(RecoveryTest, ReadOnlyIgnoresACorruptFileWithoutTouchingIt) {
  std::string file = path("cache.sqlite");
  std::string garbage(8192, '\x5a');
  std::ofstream(file, std::ios::binary) << garbage;
  auto store = open(file, /*read_only=*/true);
  EXPECT_EQ(warnings_.size(), 1u);
  EXPECT_FALSE(store->get(Table::kernels, kernel_key("k")).has_value());
  EXPECT_FALSE(store->verify().has_value());
  EXPECT_EQ(read_bytes(file), garbage);
  EXPECT_TRUE(moved_aside(file).empty());
}

// Where a scope keeps its file (kiln named the path), garbage was a cache: it is moved aside.
TEST_F(RecoveryTest, GarbageFileIsMovedAsideAndRebuilt) {
  std::string file = path("kiln-cache.sqlite");
  std::string garbage;
  for (int i = 0; i < 10000; ++i) garbage += static_cast<char>((i * 7919) % 251);
  std::ofstream(file, std::ios::binary) << garbage;
  expect_rebuilt(file, garbage);
}

// A file= path may name a user's own file (a cache path set to /etc/passwd by mistake renamed it
// and put a database in its place): a file that is not recognizably a kiln cache is left where
// and as it is, the store runs without a file, and the warning says what to do.
TEST_F(RecoveryTest, AFileThatIsNoKilnCacheAtAPathKilnDidNotNameIsLeftAlone) {
  const std::string text = path("notes.txt"), foreign = path("photos.db");
  std::ofstream(text, std::ios::binary) << "a user's notes, not a cache\n";
  ASSERT_EQ(run_sql(foreign, "CREATE TABLE photos (id INTEGER, data BLOB);"), SQLITE_OK);
  for (const std::string& file : {text, foreign}) {
    SCOPED_TRACE(file);
    warnings_.clear();
    const std::string before = read_bytes(file);
    auto store = open(file);
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_NE(warnings_[0].find("is not a kiln cache"), std::string::npos) << warnings_[0];
    EXPECT_NE(warnings_[0].find("it is left as it is and kiln runs without a cache (remove it, or "
                                "choose another path)"),
              std::string::npos)
        << warnings_[0];
    EXPECT_FALSE(store->put(Table::kernels, kernel_key("k"), entry("v")));
    EXPECT_FALSE(store->get(Table::kernels, kernel_key("k")).has_value());
    store.reset();
    EXPECT_EQ(read_bytes(file), before);
    EXPECT_TRUE(moved_aside(file).empty());
  }
  // A damaged kiln cache at such a path is still recognized by its header and moved aside.
  const std::string cache = path("mine.sqlite");
  {
    auto store = open(cache);
    for (int i = 0; i < 20; ++i)
      ASSERT_TRUE(store->put(Table::kernels, kernel_key("k" + std::to_string(i)),
                             entry(std::string(3000, 'o'))));
  }
  fs::resize_file(cache, fs::file_size(cache) - 100);
  warnings_.clear();
  expect_rebuilt(cache, read_bytes(cache));
}

TEST_F(RecoveryTest, TruncatedFileIsMovedAsideAndRebuilt) {
  std::string file = path("cache.sqlite");
  {
    auto store = open(file);
    for (int i = 0; i < 40; ++i)
      ASSERT_TRUE(store->put(Table::kernels, kernel_key("k" + std::to_string(i)),
                             entry(std::string(3000, static_cast<char>('a' + i % 26)))));
  }
  auto size = fs::file_size(file);
  ASSERT_GT(size, 8 * 4096u);
  fs::resize_file(file, size / 2 + 1234);  // mid-page
  std::string truncated = read_bytes(file);
  expect_rebuilt(file, truncated);
}

TEST_F(RecoveryTest, ForeignDatabaseIsMovedAsideAndRebuilt) {
  std::string file = path("kiln-cache.sqlite");
  ASSERT_EQ(run_sql(file,
                    "CREATE TABLE photos (id INTEGER, data BLOB);"
                    "INSERT INTO photos VALUES (1, x'00ff');"),
            SQLITE_OK);
  expect_rebuilt(file, read_bytes(file));
  EXPECT_NE(warnings_[0].find("not a kiln cache"), std::string::npos) << warnings_[0];
}

TEST_F(RecoveryTest, WrongSchemaVersionIsMovedAsideAndRebuilt) {
  std::string file = path("cache.sqlite");
  open(file)->put(Table::kernels, kernel_key("k"), entry("v"));
  ASSERT_EQ(run_sql(file, "UPDATE meta SET value = '99' WHERE name = 'schema_version'"), SQLITE_OK);
  expect_rebuilt(file, read_bytes(file));
  EXPECT_NE(warnings_[0].find("schema version 99"), std::string::npos) << warnings_[0];
}

TEST_F(RecoveryTest, AMissingTableIsMovedAsideAndRebuilt) {
  std::string file = path("cache.sqlite");
  open(file)->put(Table::kernels, kernel_key("k"), entry("v"));
  ASSERT_EQ(run_sql(file, "DROP TABLE plans"), SQLITE_OK);
  expect_rebuilt(file, read_bytes(file));
  EXPECT_NE(warnings_[0].find("the plans table is missing"), std::string::npos) << warnings_[0];
}

TEST_F(RecoveryTest, VerifyFindsAKeyThatDoesNotMatchItsParts) {
  std::string file = path("cache.sqlite");
  open(file)->put(Table::kernels, kernel_key("k"), entry("v"));
  ASSERT_EQ(run_sql(file, "UPDATE kernels SET parts = '[[\"kernel\",\"tampered\"]]'"), SQLITE_OK);
  auto result = open(file)->verify();
  ASSERT_FALSE(result.has_value());
  EXPECT_NE(result.error().message.find("the key is not the digest of its parts"),
            std::string::npos)
      << result.error().message;
}

// A file cut short by less than a page passes quick_check (SQLite reads the missing tail as
// zeros), then fails every later write: it is caught on open and rebuilt, at any cut.
TEST_F(RecoveryTest, AFileCutShortByPartOfAPageIsMovedAsideOnOpen) {
  for (int64_t cut : {1, 100, 2048, 4095}) {
    SCOPED_TRACE(cut);
    std::string file = path("cut" + std::to_string(cut) + ".sqlite");
    {
      auto store = open(file);
      for (int i = 0; i < 20; ++i)
        ASSERT_TRUE(store->put(Table::kernels, kernel_key("k" + std::to_string(i)), entry(std::string(3000, 'o'))));
    }
    ASSERT_FALSE(fs::exists(file + "-wal"));
    const std::string whole = read_bytes(file);
    fs::resize_file(file, whole.size() - cut);
    warnings_.clear();
    expect_rebuilt(file, whole.substr(0, whole.size() - cut));
    EXPECT_NE(warnings_[0].find("truncated"), std::string::npos) << warnings_[0];
  }
}

// Whole pages missing from the end (the header still counts them) are caught the same way.
TEST_F(RecoveryTest, AFileMissingWholePagesIsMovedAsideOnOpen) {
  std::string file = path("cache.sqlite");
  {
    auto store = open(file);
    for (int i = 0; i < 20; ++i)
      ASSERT_TRUE(store->put(Table::kernels, kernel_key("k" + std::to_string(i)), entry(std::string(3000, 'o'))));
  }
  const std::string whole = read_bytes(file);
  fs::resize_file(file, whole.size() - 3 * 4096);
  expect_rebuilt(file, whole.substr(0, whole.size() - 3 * 4096));
  EXPECT_NE(warnings_[0].find("truncated"), std::string::npos) << warnings_[0];
  EXPECT_NE(warnings_[0].find("of its"), std::string::npos) << warnings_[0];
}

// A flipped byte inside an entry (value, source, metadata) fails its seal: a miss with a warning
// naming the entry, explained as damaged, reported by verify; storing it again mends it.
TEST_F(RecoveryTest, ADamagedEntryIsAMissWithAWarning) {
  std::string file = path("cache.sqlite");
  for (const char* column : {"value", "source", "metadata"}) {
    SCOPED_TRACE(column);
    {
      auto store = open(file);
      ASSERT_TRUE(store->put(Table::kernels, kernel_key("k"), entry("object code", "source", R"({"outer":4})")));
    }
    const std::string flip = std::string(column) == "value"    ? "UPDATE kernels SET value = CAST('object codE' AS BLOB)"
                             : std::string(column) == "source" ? "UPDATE kernels SET source = 'sourcE'"
                                                               : R"(UPDATE kernels SET metadata = '{"outer":0}')";
    ASSERT_EQ(run_sql(file, flip), SQLITE_OK);
    warnings_.clear();
    auto store = open(file);
    EXPECT_FALSE(store->get(Table::kernels, kernel_key("k")).has_value());
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_NE(warnings_[0].find("kernels entry " + kernel_key("k").digest() + " is damaged"), std::string::npos)
        << warnings_[0];
    EXPECT_FALSE(store->show(kernel_key("k").digest()).has_value());
    Explanation why = store->explain(Table::kernels, kernel_key("k"));
    EXPECT_FALSE(why.hit);
    EXPECT_NE(why.text().find("is damaged"), std::string::npos) << why.text();
    auto verified = store->verify();
    ASSERT_FALSE(verified.has_value());
    EXPECT_NE(verified.error().message.find("kernels entry " + kernel_key("k").digest() +
                                            ": its contents do not match its checksum"),
              std::string::npos)
        << verified.error().message;
  }
}

// Over 64 MiB the startup check is skipped: a damaged page is found by the first statement that
// reads it, and the file is moved aside then (not on every later run), saying what was lost.
TEST_F(RecoveryTest, ADamagedPageInALargeFileIsMovedAsideAtTheFirstFailedStatement) {
  std::string file = path("cache.sqlite");
  int64_t root = 0;
  {
    auto store = open(file);
    ASSERT_TRUE(store->put(Table::autotune, KeyParts{{{"pad", "65 MiB"}}}, entry(std::string(65 << 20, 'p'))));
    for (int i = 0; i < 10; ++i)
      ASSERT_TRUE(store->put(Table::kernels, kernel_key("k" + std::to_string(i)), entry("object")));
  }
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, "SELECT rootpage FROM sqlite_master WHERE name = 'kernels'", -1, &st, nullptr);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    root = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
  }
  ASSERT_GT(static_cast<int64_t>(fs::file_size(file)), 64 << 20);
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp((root - 1) * 4096);
    const std::string zeros(4096, '\0');
    f.write(zeros.data(), zeros.size());
  }
  auto store = open(file);
  EXPECT_TRUE(warnings_.empty());  // too large for the startup check
  EXPECT_FALSE(store->get(Table::kernels, kernel_key("k3")).has_value());
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("is damaged"), std::string::npos) << warnings_[0];
  EXPECT_NE(warnings_[0].find("moved it aside"), std::string::npos) << warnings_[0];
  EXPECT_NE(warnings_[0].find("lost:"), std::string::npos) << warnings_[0];
  EXPECT_EQ(moved_aside(file).size(), 1u);
  ASSERT_TRUE(store->put(Table::kernels, kernel_key("k3"), entry("again")));
  EXPECT_EQ(value_text(*store->get(Table::kernels, kernel_key("k3"))), "again");
  store.reset();
  warnings_.clear();
  auto next = open(file);  // the next run finds a sound file
  EXPECT_EQ(value_text(*next->get(Table::kernels, kernel_key("k3"))), "again");
  EXPECT_TRUE(warnings_.empty());
}

// A failure that is not damage (a write to a file made read-only under the store) says what
// failed without SQLite's "not an error".
TEST_F(RecoveryTest, AFailedWriteSaysWhatFailed) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes read-only files";
  std::string file = path("cache.sqlite");
  auto store = open(file);
  ASSERT_TRUE(store->put(Table::kernels, kernel_key("k"), entry("v")));
  store.reset();
  fs::permissions(file, fs::perms::owner_read);
  store = open(file);  // a file this process cannot write is read (the store is read-only)
  ASSERT_FALSE(warnings_.empty());
  EXPECT_NE(warnings_.back().find("cannot be written by this process"), std::string::npos)
      << warnings_.back();
  EXPECT_EQ(warnings_.back().find("not an error"), std::string::npos) << warnings_.back();
  EXPECT_FALSE(store->put(Table::kernels, kernel_key("k2"), entry("v")));
  EXPECT_TRUE(store->get(Table::kernels, kernel_key("k")).has_value());
  auto cleared = store->clear();
  ASSERT_FALSE(cleared.has_value());
  EXPECT_NE(cleared.error().message.find("cannot clear cache " + file), std::string::npos)
      << cleared.error().message;
  auto pruned = store->prune(1 << 30);
  ASSERT_FALSE(pruned.has_value());
  EXPECT_NE(pruned.error().message.find("cannot prune cache " + file), std::string::npos)
      << pruned.error().message;
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
}

TEST(FileSystemTest, NetworkFileSystemsAreRecognized) {
  EXPECT_TRUE(is_network_fs_type(0x6969));       // NFS
  EXPECT_TRUE(is_network_fs_type(0xff534d42));   // CIFS
  EXPECT_TRUE(is_network_fs_type(0xfe534d42));   // SMB2
  EXPECT_TRUE(is_network_fs_type(0x65735546));   // FUSE
  EXPECT_FALSE(is_network_fs_type(0xef53));      // ext4
  EXPECT_FALSE(is_network_fs_type(0x01021994));  // tmpfs
  EXPECT_FALSE(is_network_fs(std::filesystem::temp_directory_path().string()) &&
               is_network_fs("/proc"));
}

TEST(FileSystemTest, UrisEscapeReservedCharacters) {
  EXPECT_EQ(sqlite_uri("/a b/c?d#e%f", "mode=ro"), "file:/a%20b/c%3Fd%23e%25f?mode=ro");
}

// An export replaces only an earlier bundle or an empty file: a user's file or directory at that
// path is kept. An import refuses what is no bundle (saying what it is), the cache itself, and a
// bundle with a damaged entry, importing nothing of it.
// Importing a sound bundle repairs the entries it holds that the cache has damaged (import keeps
// the cache's own entries otherwise): before, "imported 0 entries" and verify still failed.
TEST_F(RecoveryTest, AnImportReplacesDamagedEntriesOfItsKeys) {
  const std::string good = path("good.sqlite"), bundle = path("bundle.sqlite"),
                    mine = path("mine.sqlite");
  {
    auto source = open(good);
    ASSERT_TRUE(source->put(Table::kernels, kernel_key("k"), entry("object code")));
    ASSERT_TRUE(source->put(Table::kernels, kernel_key("other"), entry("other code")));
    ASSERT_EQ(source->export_bundle(bundle).value_or(-1), 2);
  }
  {
    auto cache = open(mine);
    ASSERT_TRUE(cache->put(Table::kernels, kernel_key("k"), entry("object code")));
    ASSERT_TRUE(cache->put(Table::kernels, kernel_key("kept"), entry("kept code")));
  }
  ASSERT_EQ(run_sql(mine,
                    "UPDATE kernels SET value = CAST('object codE' AS BLOB) WHERE value = "
                    "CAST('object code' AS BLOB)"),
            SQLITE_OK);
  auto cache = open(mine);
  ASSERT_FALSE(cache->verify().has_value());
  EXPECT_EQ(cache->import_bundle(bundle).value_or(-1), 2);  // the damaged one and the new one
  EXPECT_TRUE(cache->verify().has_value());
  EXPECT_EQ(value_text(*cache->get(Table::kernels, kernel_key("k"))), "object code");
  EXPECT_EQ(value_text(*cache->get(Table::kernels, kernel_key("kept"))), "kept code");
  EXPECT_EQ(cache->import_bundle(bundle).value_or(-1), 0);  // sound entries are kept as they are
}

TEST_F(RecoveryTest, BundlesReplaceOnlyBundlesAndADamagedOneIsNotImported) {
  auto store = open(path("cache.sqlite"));
  ASSERT_TRUE(store->put(Table::kernels, kernel_key("k"), entry("object code", "source")));
  ASSERT_TRUE(store->put(Table::plans, KeyParts{{{"graph", "g"}}}, entry("plan")));
  const std::string text = path("notes.txt");
  std::ofstream(text) << "a user's notes";
  auto over_text = store->export_bundle(text);
  ASSERT_FALSE(over_text.has_value());
  EXPECT_NE(
      over_text.error().message.find("export: " + text + " exists and is not a kiln cache bundle"),
      std::string::npos)
      << over_text.error().message;
  std::ifstream kept(text);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), "a user's notes");
  const std::string dir = path("a_dir");
  std::filesystem::create_directory(dir);
  auto over_dir = store->export_bundle(dir);
  ASSERT_FALSE(over_dir.has_value());
  EXPECT_NE(over_dir.error().message.find(dir + " is a directory"), std::string::npos)
      << over_dir.error().message;
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  // An earlier bundle and an empty file are replaced.
  const std::string bundle = path("bundle.sqlite");
  ASSERT_EQ(store->export_bundle(bundle).value_or(-1), 2);
  ASSERT_EQ(store->export_bundle(bundle).value_or(-1), 2);
  std::ofstream(path("empty.sqlite")).flush();
  ASSERT_EQ(store->export_bundle(path("empty.sqlite")).value_or(-1), 2);
  // Another cache that runs keep (another project's, the global one) is no bundle: export
  // replaced it, 181 entries lost for 14 written.
  {
    auto kept_cache = open(path("kept.sqlite"));
    ASSERT_TRUE(kept_cache->put(Table::kernels, kernel_key("mine"), entry("kept")));
  }
  auto over_cache = store->export_bundle(path("kept.sqlite"));
  ASSERT_FALSE(over_cache.has_value());
  EXPECT_NE(over_cache.error().message.find("export: " + path("kept.sqlite") +
                                            " is a kiln cache, not a bundle that export wrote; "
                                            "nothing was written"),
            std::string::npos)
      << over_cache.error().message;
  EXPECT_EQ(value_text(*open(path("kept.sqlite"))->get(Table::kernels, kernel_key("mine"))),
            "kept");
  // A cache that imported a bundle is still no bundle.
  {
    auto importer = open(path("importer.sqlite"));
    ASSERT_EQ(importer->import_bundle(bundle).value_or(-1), 2);
  }
  EXPECT_FALSE(store->export_bundle(path("importer.sqlite")).has_value());

  auto other = open(path("other.sqlite"));
  const std::pair<std::string, std::string> refused[] = {
      {dir, dir + " is a directory, not a kiln cache bundle"},
      {"/dev/null", "/dev/null is not a regular file"},
      {path("other.sqlite"), "is the cache itself"},
  };
  for (const auto& [file, message] : refused) {
    auto r = other->import_bundle(file);
    ASSERT_FALSE(r.has_value()) << file;
    EXPECT_NE(r.error().message.find(message), std::string::npos) << r.error().message;
  }
  ASSERT_EQ(run_sql(bundle, "UPDATE kernels SET value = CAST('object codE' AS BLOB)"), SQLITE_OK);
  auto damaged = other->import_bundle(bundle);
  ASSERT_FALSE(damaged.has_value());
  EXPECT_NE(damaged.error().message.find("import: " + bundle + " is damaged; nothing was imported"),
            std::string::npos)
      << damaged.error().message;
  EXPECT_EQ(other->stats().kernels + other->stats().plans, 0);
  // The sound one is imported whole.
  ASSERT_EQ(other->import_bundle(path("empty.sqlite")).value_or(-1), 2);
}

}  // namespace
}  // namespace kiln::cache
