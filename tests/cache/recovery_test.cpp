// The store on bad ground: read-only use, missing files, garbage, truncated and foreign files,
// and file-system detection.
#include <sqlite3.h>
#include <sys/stat.h>

#include <set>

#include "cache/file_system.h"
#include "tests/cache/temp_dir.h"

namespace kiln::cache {
namespace {

namespace fs = std::filesystem;
using testing::entry;
using testing::kernel_key;
using testing::read_bytes;
using testing::value_text;

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
      if (e.path().filename().string().starts_with(fs::path(file).filename().string() +
                                                   ".corrupt-"))
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
    store->clear();
    EXPECT_EQ(store->prune(1), 0);
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

TEST_F(RecoveryTest, GarbageFileIsMovedAsideAndRebuilt) {
  std::string file = path("cache.sqlite");
  std::string garbage;
  for (int i = 0; i < 10000; ++i) garbage += static_cast<char>((i * 7919) % 251);
  std::ofstream(file, std::ios::binary) << garbage;
  expect_rebuilt(file, garbage);
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
  std::string file = path("cache.sqlite");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TABLE photos (id INTEGER, data BLOB);"
                         "INSERT INTO photos VALUES (1, x'00ff');",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  expect_rebuilt(file, read_bytes(file));
  EXPECT_NE(warnings_[0].find("not a kiln cache"), std::string::npos) << warnings_[0];
}

TEST_F(RecoveryTest, WrongSchemaVersionIsMovedAsideAndRebuilt) {
  std::string file = path("cache.sqlite");
  open(file)->put(Table::kernels, kernel_key("k"), entry("v"));
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE meta SET value = '99' WHERE name = 'schema_version'", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  expect_rebuilt(file, read_bytes(file));
  EXPECT_NE(warnings_[0].find("schema version 99"), std::string::npos) << warnings_[0];
}

TEST_F(RecoveryTest, VerifyFindsAKeyThatDoesNotMatchItsParts) {
  std::string file = path("cache.sqlite");
  open(file)->put(Table::kernels, kernel_key("k"), entry("v"));
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE kernels SET parts = '[[\"kernel\",\"tampered\"]]'", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto result = open(file)->verify();
  ASSERT_FALSE(result.has_value());
  EXPECT_NE(result.error().message.find("the key is not the digest of its parts"),
            std::string::npos)
      << result.error().message;
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

}  // namespace
}  // namespace kiln::cache
