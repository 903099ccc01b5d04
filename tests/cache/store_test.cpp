// The cache store's entries: round trips per table, use counts, miss explanations, LRU
// eviction, bundles, key digests, scope paths and sizes.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "cache/size.h"
#include "tests/cache/temp_dir.h"

namespace kiln::cache {
namespace {

using testing::entry;
using testing::kernel_key;
using testing::value_text;

class StoreTest : public testing::TempDirTest {
 protected:
  std::unique_ptr<Store> open(StoreOptions options = {}) {
    options.warn = [this](const std::string& w) { warnings_.push_back(w); };
    auto store = Store::open(path("cache.sqlite"), options);
    EXPECT_TRUE(store.has_value());
    return std::move(*store);
  }
  std::vector<std::string> warnings_;
};

TEST_F(StoreTest, RoundTripEveryTable) {
  auto store = open();
  for (Table t : kAllTables) {
    KeyParts key{{{"what", std::string("thing in ") + table_name(t)}, {"schema", "1"}}};
    std::string value = std::string("\0binary\xff", 8) + table_name(t);
    ASSERT_TRUE(store->put(t, key, entry(value, "source text", "{\"a\":1}")));
    auto got = store->get(t, key);
    ASSERT_TRUE(got.has_value()) << table_name(t);
    EXPECT_EQ(value_text(*got), value);
    EXPECT_EQ(got->source, "source text");
    EXPECT_EQ(got->metadata, "{\"a\":1}");
    EXPECT_EQ(got->key, key.digest());
    EXPECT_EQ(got->size, static_cast<int64_t>(value.size() + 11 + 7));
    // Tables are separate: the same key misses in the others.
    for (Table other : kAllTables)
      if (other != t) {
        EXPECT_FALSE(store->get(other, key).has_value());
      }
  }
  Stats s = store->stats();
  EXPECT_EQ(s.kernels, 1);
  EXPECT_EQ(s.plans, 1);
  EXPECT_EQ(s.autotune, 1);
  EXPECT_EQ(s.schema_version, 2);
  EXPECT_EQ(s.journal_mode, "wal");
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(StoreTest, EntriesSurviveReopening) {
  open()->put(Table::kernels, kernel_key("k1"), entry("object code"));
  auto again = open();
  auto got = again->get(Table::kernels, kernel_key("k1"));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(value_text(*got), "object code");
  EXPECT_FALSE(again->get(Table::kernels, kernel_key("k2")).has_value());
}

TEST_F(StoreTest, HitsBumpUseCountAndLastUsed) {
  auto store = open();
  ASSERT_TRUE(store->put(Table::kernels, kernel_key("k"), entry("v")));
  auto listed = store->list(Table::kernels);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].hits, 0);
  EXPECT_GT(listed[0].created, 1700000000);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(store->get(Table::kernels, kernel_key("k")));
  auto shown = store->show(kernel_key("k").digest());
  ASSERT_TRUE(shown.has_value());
  EXPECT_EQ(shown->hits, 3);
  EXPECT_GE(shown->last_used, listed[0].created);
  EXPECT_EQ(shown->parts, kernel_key("k").parts);
  EXPECT_EQ(store->stats().hits, 3);
}

TEST_F(StoreTest, ExplainShowsWhereLongPartsDiffer) {
  // Real feature strings are ~900 bytes; the flag that changed sits deep inside.
  std::string stored, wanted;
  for (int i = 0; i < 60; ++i) stored += "+feature" + std::to_string(i) + ",";
  wanted = stored;
  size_t at = stored.find("+feature41");
  wanted.replace(at, 1, "-");
  auto store = open();
  ASSERT_TRUE(store->put(Table::kernels, kernel_key("k", stored), entry("v")));
  std::string text = store->explain(Table::kernels, kernel_key("k", wanted)).text();
  EXPECT_NE(text.find("+feature41"), std::string::npos) << text;
  EXPECT_NE(text.find("-feature41"), std::string::npos) << text;
  EXPECT_NE(text.find(", from byte "), std::string::npos) << text;
}

TEST_F(StoreTest, ExplainNamesTheDifferingParts) {
  auto store = open();
  ASSERT_TRUE(store->put(Table::kernels, kernel_key("k", "+avx2", "19.1.7"), entry("v")));
  ASSERT_TRUE(store->put(Table::kernels, kernel_key("k", "+avx512f", "18.1.0"), entry("v")));

  Explanation hit = store->explain(Table::kernels, kernel_key("k"));
  EXPECT_TRUE(hit.hit);

  Explanation features = store->explain(Table::kernels, kernel_key("k", "+avx512f"));
  EXPECT_FALSE(features.hit);
  EXPECT_EQ(features.closest_key, kernel_key("k").digest());  // 1 part differs, not 2
  ASSERT_EQ(features.differing.size(), 1u);
  EXPECT_EQ(features.differing[0], std::make_tuple(std::string("features"), std::string("+avx2"),
                                                   std::string("+avx512f")));
  EXPECT_NE(features.text().find("features: stored \"+avx2\", wanted \"+avx512f\""),
            std::string::npos)
      << features.text();

  KeyParts codegen = kernel_key("k");
  codegen.parts[6].second = "kiln-cpu-4";
  Explanation c = store->explain(Table::kernels, codegen);
  ASSERT_EQ(c.differing.size(), 1u);
  EXPECT_EQ(std::get<0>(c.differing[0]), "codegen");

  Explanation llvm = store->explain(Table::kernels, kernel_key("k", "+avx512f", "19.1.7"));
  ASSERT_EQ(llvm.differing.size(), 1u);
  EXPECT_EQ(std::get<0>(llvm.differing[0]), "features");

  Explanation none = store->explain(Table::kernels, kernel_key("other kernel"));
  EXPECT_FALSE(none.hit);
  EXPECT_TRUE(none.closest_key.empty());
  EXPECT_NE(none.text().find("no stored entry"), std::string::npos);
  // Explanations look only in the table asked for.
  EXPECT_TRUE(store->explain(Table::plans, kernel_key("k")).closest_key.empty());
}

TEST_F(StoreTest, EvictsLeastRecentlyUsedKernelsUnderTheCap) {
  StoreOptions capped;
  capped.max_size = 300;
  auto store = open(capped);
  std::string hundred(100, 'x');
  for (const char* k : {"a", "b", "c"})
    ASSERT_TRUE(store->put(Table::kernels, kernel_key(k), entry(hundred, "", "")));
  ASSERT_TRUE(store->get(Table::kernels, kernel_key("a")));  // a is now more recent than b
  ASSERT_TRUE(store->put(Table::kernels, kernel_key("d"), entry(hundred, "", "")));
  EXPECT_TRUE(store->get(Table::kernels, kernel_key("a")));
  EXPECT_FALSE(store->get(Table::kernels, kernel_key("b")));
  EXPECT_TRUE(store->get(Table::kernels, kernel_key("c")));
  EXPECT_TRUE(store->get(Table::kernels, kernel_key("d")));
  EXPECT_EQ(store->stats().kernels, 3);

}

// The cap of kiln.toml counts every table: a plan or a decision used long ago goes before a
// kernel used just now.
TEST_F(StoreTest, TheCapEvictsTheLeastRecentlyUsedEntryOfAnyTable) {
  StoreOptions capped;
  capped.max_size = 300;
  auto store = open(capped);
  std::string hundred(100, 'x');
  const KeyParts plan{{{"graph", "g"}}}, decision{{{"kernel", "k"}, {"level", "fast"}}};
  ASSERT_TRUE(store->put(Table::plans, plan, entry(hundred, "", "")));
  ASSERT_TRUE(store->put(Table::autotune, decision, entry(hundred, "", "")));
  ASSERT_TRUE(store->put(Table::kernels, kernel_key("a"), entry(hundred, "", "")));
  ASSERT_TRUE(store->get(Table::plans, plan));  // the plan is now more recent than the decision
  ASSERT_TRUE(store->put(Table::kernels, kernel_key("b"), entry(hundred, "", "")));
  EXPECT_FALSE(store->get(Table::autotune, decision));
  EXPECT_TRUE(store->get(Table::plans, plan));
  EXPECT_TRUE(store->get(Table::kernels, kernel_key("a")));
  EXPECT_TRUE(store->get(Table::kernels, kernel_key("b")));
}

// prune leaves the file itself (with its WAL) under the size asked for, evicting from every
// table, least recently used first, and reports the size after the WAL is folded back.
TEST_F(StoreTest, PruneLeavesTheFileUnderTheSizeAskedFor) {
  auto store = open();
  const std::string blob(50 << 10, 'p');
  std::vector<std::pair<Table, KeyParts>> keys;
  for (int i = 0; i < 60; ++i) {
    const Table t = kAllTables[i % 3];
    keys.emplace_back(t, KeyParts{{{"what", "entry " + std::to_string(i)}}});
    ASSERT_TRUE(store->put(t, keys.back().second, entry(blob + std::to_string(i), "", "")));
  }
  ASSERT_GT(store->stats().bytes, 3 << 20);
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(store->get(keys[i].first, keys[i].second));  // used last
  auto pruned = store->prune(1 << 20);
  ASSERT_TRUE(pruned.has_value()) << pruned.error().message;
  EXPECT_LE(pruned->bytes, 1 << 20);
  EXPECT_EQ(pruned->bytes, store->stats().bytes);
  EXPECT_GT(pruned->freed, 2 << 20);
  std::error_code ec;
  EXPECT_LE(static_cast<int64_t>(std::filesystem::file_size(path("cache.sqlite"))) +
                static_cast<int64_t>(std::filesystem::file_size(path("cache.sqlite-wal"), ec)),
            1 << 20);
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(store->get(keys[i].first, keys[i].second)) << i;
  for (int i = 6; i < 40; ++i) EXPECT_FALSE(store->get(keys[i].first, keys[i].second)) << i;
  const Stats left = store->stats();
  EXPECT_GE(left.kernels, 2);
  EXPECT_GE(left.plans, 2);
  EXPECT_GE(left.autotune, 2);
  // A size an empty cache file does not fit in is an error, not a success.
  auto impossible = store->prune(1);
  ASSERT_FALSE(impossible.has_value());
  EXPECT_NE(impossible.error().message.find("with every entry evicted"), std::string::npos)
      << impossible.error().message;
}

TEST_F(StoreTest, ExportImportRoundTrip) {
  auto store = open();
  ASSERT_TRUE(store->put(Table::kernels, kernel_key("k1"), entry("one", "src1")));
  ASSERT_TRUE(store->put(Table::kernels, kernel_key("k2"), entry("two")));
  ASSERT_TRUE(store->put(Table::plans, KeyParts{{{"graph", "g"}}}, entry("plan")));
  auto exported = store->export_bundle(path("bundle.sqlite"));
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  EXPECT_EQ(*exported, 3);
  EXPECT_FALSE(std::filesystem::exists(path("bundle.sqlite-wal")));

  auto other = Store::open(path("other.sqlite"));
  ASSERT_TRUE(other.has_value());
  ASSERT_TRUE((*other)->put(Table::kernels, kernel_key("k1"), entry("local one")));
  auto imported = (*other)->import_bundle(path("bundle.sqlite"));
  ASSERT_TRUE(imported.has_value()) << imported.error().message;
  EXPECT_EQ(*imported, 2);  // k1 already there: the local entry is kept
  EXPECT_EQ(value_text(*(*other)->get(Table::kernels, kernel_key("k1"))), "local one");
  auto k2 = (*other)->get(Table::kernels, kernel_key("k2"));
  ASSERT_TRUE(k2.has_value());
  EXPECT_EQ(value_text(*k2), "two");
  EXPECT_EQ(value_text(*(*other)->get(Table::plans, KeyParts{{{"graph", "g"}}})), "plan");
  EXPECT_TRUE((*other)->verify().has_value());

  auto not_bundle = (*other)->import_bundle(path("missing.sqlite"));
  ASSERT_FALSE(not_bundle.has_value());
  EXPECT_NE(not_bundle.error().message.find("no such file"), std::string::npos);
  std::ofstream(path("text.sqlite")) << "not a database at all, just some text that is long enough";
  auto garbage = (*other)->import_bundle(path("text.sqlite"));
  ASSERT_FALSE(garbage.has_value());
  EXPECT_NE(garbage.error().message.find("not a kiln cache bundle"), std::string::npos);
}

TEST_F(StoreTest, ClearRemovesEverything) {
  auto store = open();
  ASSERT_TRUE(store->put(Table::kernels, kernel_key("k"), entry("v")));
  ASSERT_TRUE(store->put(Table::autotune, kernel_key("k"), entry("best")));
  ASSERT_TRUE(store->clear().has_value());
  EXPECT_EQ(store->stats().kernels, 0);
  EXPECT_EQ(store->stats().autotune, 0);
  EXPECT_FALSE(store->get(Table::kernels, kernel_key("k")));
}

TEST(KeyPartsTest, DigestIsStableAndSeparatesParts) {
  KeyParts a{{{"kernel", "ab"}, {"llvm", "c"}}};
  KeyParts b{{{"kernel", "a"}, {"llvm", "bc"}}};
  KeyParts c{{{"kernel", "ab"}, {"llvm", "c"}}};
  EXPECT_EQ(a.digest().size(), 32u);
  EXPECT_EQ(a.digest(), c.digest());
  EXPECT_NE(a.digest(), b.digest());  // length prefixes keep the boundaries
  EXPECT_NE(a.digest(), (KeyParts{{{"kernel", "ab"}, {"llvm", "c"}, {"x", ""}}}.digest()));
  EXPECT_EQ(a.digest().find_first_not_of("0123456789abcdef"), std::string::npos);
}

class ScopeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"XDG_CACHE_HOME", "HOME"})
      if (const char* v = std::getenv(name)) saved_.emplace_back(name, v);
  }
  void TearDown() override {
    ::unsetenv("XDG_CACHE_HOME");
    for (const auto& [name, value] : saved_) ::setenv(name.c_str(), value.c_str(), 1);
  }
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(ScopeTest, GlobalHonoursXdgCacheHomeThenHome) {
  EXPECT_EQ(global_scope_path("/tmp/xdg-here", "/home/someone"), "/tmp/xdg-here/kiln/cache.sqlite");
  EXPECT_EQ(global_scope_path("relative/ignored", "/home/someone"), "/home/someone/.cache/kiln/cache.sqlite");
  EXPECT_EQ(global_scope_path("", "/home/someone"), "/home/someone/.cache/kiln/cache.sqlite");
}

TEST_F(ScopeTest, LocalAndTargetScopes) {
  EXPECT_EQ(local_scope_path("/work/proj"), "/work/proj/.kiln/cache.sqlite");
  auto target = std::filesystem::path(target_scope_path("", "/home/someone"));
  EXPECT_EQ(target.filename(), "kiln-cache.sqlite");
  EXPECT_EQ(target.parent_path(), std::filesystem::read_symlink("/proc/self/exe").parent_path());
}

// An installed app (its directory not writable by its user): the file it ships beside itself,
// else the global scope. Checked as an unprivileged user (root may write anywhere): a child
// process that drops to nobody when the test runs as root.
TEST_F(StoreTest, TargetScopeOfAnAppInAnUnwritableDirectory) {
  const std::filesystem::path app = dir_ / "app", shipped = dir_ / "shipped";
  std::filesystem::create_directories(app);
  std::filesystem::create_directories(shipped);
  std::ofstream(shipped / "kiln-cache.sqlite") << "";
  const std::filesystem::path writable = dir_ / "writable";
  std::filesystem::create_directories(writable);
  // Nobody but root may write in app/ and shipped/ (r-x for all); anyone may reach them.
  namespace fs = std::filesystem;
  const fs::perms read_only = fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                              fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec;
  fs::permissions(dir_, read_only | fs::perms::owner_write);
  fs::permissions(app, read_only);
  fs::permissions(shipped, read_only);
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(pipe_fds[0]);
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(2);
    const std::string got = target_scope_path_in(app.string(), "", "/home/nobody") + "\n" +
                            target_scope_path_in(shipped.string(), "", "/home/nobody") + "\n";
    ssize_t wrote = ::write(pipe_fds[1], got.data(), got.size());
    ::_exit(wrote == static_cast<ssize_t>(got.size()) ? 0 : 3);
  }
  ::close(pipe_fds[1]);
  std::string out;
  char buf[512];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  EXPECT_EQ(out, "/home/nobody/.cache/kiln/cache.sqlite\n" + (shipped / "kiln-cache.sqlite").string() + "\n");
  // Where the app may write, beside it.
  EXPECT_EQ(target_scope_path_in(writable.string(), "", "/home/nobody"),
            (writable / "kiln-cache.sqlite").string());
}

TEST_F(StoreTest, ProjectRootIsWhereKilnTomlIs) {
  std::filesystem::create_directories(dir_ / "proj" / "src" / "deep");
  std::ofstream(dir_ / "proj" / "kiln.toml") << "[fusion]\n";
  EXPECT_EQ(find_project_root((dir_ / "proj" / "src" / "deep").string()), (dir_ / "proj").string());
  std::filesystem::create_directories(dir_ / "loose");
  EXPECT_EQ(find_project_root((dir_ / "loose").string()), (dir_ / "loose").string());
}

TEST(SizeTest, ParsesUnits) {
  EXPECT_EQ(*parse_size("1000000"), 1000000);
  EXPECT_EQ(*parse_size("512MiB"), 512LL << 20);
  EXPECT_EQ(*parse_size("2GiB"), 2LL << 30);
  EXPECT_EQ(*parse_size("10MB"), 10000000);
  EXPECT_EQ(*parse_size("64k"), 65536);
  EXPECT_FALSE(parse_size("").has_value());
  EXPECT_FALSE(parse_size("12 parsecs").has_value());
  EXPECT_FALSE(parse_size("-5").has_value());
  EXPECT_FALSE(parse_size("99999999999TiB").has_value());
  EXPECT_NE(parse_size("lots").error().message.find("expected a whole number"), std::string::npos);
  EXPECT_EQ(format_size(512), "512 B");
  EXPECT_EQ(format_size(3 << 20), "3.0 MiB");
}

}  // namespace
}  // namespace kiln::cache
