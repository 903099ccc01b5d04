// `kiln cache` as a user runs it: the real binary on cache files filled through the store API.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "tests/cache/temp_dir.h"
#include "tests/support/shell.h"

namespace kiln::cache {
namespace {

using testing::entry;
using testing::kernel_key;

using Result = kiln::testing::CommandResult;

Result run_kiln(const std::string& args, const std::string& prefix = "") {
  std::string cmd = prefix + std::string(KILN_BINARY) + " " + args + " 2>&1";
  return kiln::testing::run_shell(cmd);
}

int count_lines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

class CacheCli : public testing::TempDirTest {
 protected:
  // Two kernels (the big one least recently used) and a plan.
  std::string filled() {
    std::string file = path("cache.sqlite");
    auto store = Store::open(file);
    EXPECT_TRUE(store.has_value());
    EXPECT_TRUE(
        (*store)->put(Table::kernels, kernel_key("kernel two"), entry(std::string(5000, 'x'))));
    EXPECT_TRUE((*store)->put(Table::kernels, kernel_key("kernel one"),
                              entry("obj1", "define void @k1()")));
    EXPECT_TRUE(
        (*store)->put(Table::plans, KeyParts{{{"graph", "g"}, {"fuser", "beam"}}}, entry("plan")));
    return file;
  }
};

TEST_F(CacheCli, StatsListShowVerify) {
  std::string file = filled();
  std::string scope = " --cache file=" + file;
  Result stats = run_kiln("cache stats" + scope);
  ASSERT_EQ(stats.code, 0) << stats.out;
  EXPECT_NE(stats.out.find("entries: 2 kernels, 1 plans, 0 autotune"), std::string::npos)
      << stats.out;
  EXPECT_NE(stats.out.find("journal wal, schema 2"), std::string::npos) << stats.out;

  Result list = run_kiln("cache list" + scope);
  ASSERT_EQ(list.code, 0) << list.out;
  EXPECT_EQ(count_lines(list.out), 3) << list.out;
  EXPECT_NE(list.out.find("kernels  " + kernel_key("kernel one").digest()), std::string::npos)
      << list.out;
  EXPECT_NE(list.out.find("plans"), std::string::npos);

  Result show = run_kiln("cache show " + kernel_key("kernel one").digest() + scope);
  ASSERT_EQ(show.code, 0) << show.out;
  EXPECT_NE(show.out.find("table: kernels"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("  features: +avx2"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("define void @k1()"), std::string::npos) << show.out;

  // The entries are sound to the store but hold nothing kiln can run: verify names each by key.
  Result verify = run_kiln("cache verify" + scope);
  EXPECT_EQ(verify.code, 1) << verify.out;
  EXPECT_NE(verify.out.find("3 problems"), std::string::npos) << verify.out;
  EXPECT_NE(verify.out.find("kernels entry " + kernel_key("kernel one").digest() +
                            ": its metadata is not a cpu kernel's"),
            std::string::npos)
      << verify.out;
  EXPECT_NE(verify.out.find("its plan record is unusable"), std::string::npos) << verify.out;
}

// A cache kiln itself filled verifies clean; a plan record that no longer fits its graph (sealed
// again, as a bug or a hand edit would) is refused by a run, named by key, and rebuilt.
TEST_F(CacheCli, VerifyPassesOnWhatKilnStoredAndARunRefusesAPlanThatDoesNotFit) {
  const std::string file = path("cache.sqlite");
  const std::string env = "KILN_COMPILATION_CACHE=file=" + file + " ";
  const std::string graph = std::string(KILN_SOURCE_DIR) + "/examples/mlp.kg";
  Result first = run_kiln("run " + graph + " --random-inputs --stats", env);
  ASSERT_EQ(first.code, 0) << first.out;
  Result verify = run_kiln("cache verify --cache file=" + file);
  ASSERT_EQ(verify.code, 0) << verify.out;
  EXPECT_NE(verify.out.find("ok: " + file), std::string::npos) << verify.out;

  std::string plan_key;
  {
    auto store = Store::open(file);
    ASSERT_TRUE(store.has_value());
    std::vector<Entry> plans = (*store)->list(Table::plans);
    ASSERT_EQ(plans.size(), 1u);
    plan_key = plans[0].key;
    std::optional<Entry> e = (*store)->show(plan_key);
    ASSERT_TRUE(e.has_value());
    // The key names the fuser's version (passes::kFuserVersion): a plan an older fuser made is
    // not reused by a kiln whose fuser partitions the graph otherwise.
    auto fuser = std::find_if(e->parts.begin(), e->parts.end(),
                              [](const auto& part) { return part.first == "fuser"; });
    ASSERT_NE(fuser, e->parts.end());
    EXPECT_EQ(fuser->second.rfind("beam fuser-", 0), 0u) << fuser->second;
    auto record = nlohmann::json::from_cbor(e->value);
    // The output becomes the bias %b1 (f32[1024]), an input slot of another shape.
    int b1 = -1;
    for (size_t i = 0; i < record["slots"].size(); ++i)
      if (record["slots"][i]["shape"] == nlohmann::json::array({1024})) b1 = static_cast<int>(i);
    ASSERT_GE(b1, 0) << record.dump();
    record["outputs"] = nlohmann::json::array({b1});
    e->value = nlohmann::json::to_cbor(record);
    ASSERT_TRUE((*store)->put(Table::plans, KeyParts{e->parts}, *e));
  }
  // The record alone is consistent (an input may be an output): the graph that asks for it is not.
  Result again = run_kiln("run " + graph + " --random-inputs --stats", env);
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_NE(again.out.find("plans entry " + plan_key + " is unusable"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("plan built"), std::string::npos) << again.out;
  EXPECT_EQ(run_kiln("cache verify --cache file=" + file).code, 0);
}

TEST_F(CacheCli, ExplainNamesTheDifferingPart) {
  std::string file = filled();
  std::ofstream(path("key.json"))
      << R"([["kernel","kernel one"],["tune","vec=8"],["target","cpu"],["cpu","znver4"],)"
      << R"(["features","+avx512f"],["llvm","19.1.7"],["codegen","kiln-cpu-3"],["schema","1"]])";
  Result r = run_kiln("cache explain --key-parts " + path("key.json") + " --cache file=" + file);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("differs in 1 part:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("features: stored \"+avx2\", wanted \"+avx512f\""), std::string::npos)
      << r.out;

  Result plans = run_kiln("cache explain --table plans --key-parts " + path("key.json") +
                          " --cache file=" + file);
  EXPECT_NE(plans.out.find("no stored entry"), std::string::npos) << plans.out;

  std::ofstream(path("bad.json")) << R"({"kernel": "x"})";
  Result bad = run_kiln("cache explain --key-parts " + path("bad.json") + " --cache file=" + file);
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.out, "kiln: error: --key-parts " + path("bad.json") +
                         ": expected a non-empty JSON array of [name, value] string pairs\n");
}

TEST_F(CacheCli, PruneExportImportClear) {
  std::string file = filled();
  std::string scope = " --cache file=" + file;
  // An empty cache file takes 60 KiB: a size below that cannot be met, and prune says so.
  Result impossible = run_kiln("cache prune --max-size 1KiB" + scope);
  EXPECT_EQ(impossible.code, 1) << impossible.out;
  EXPECT_NE(impossible.out.find("kiln: error: cannot prune cache " + file + " to 1024 bytes"),
            std::string::npos)
      << impossible.out;
  Result prune = run_kiln("cache prune --max-size 62KiB" + scope);
  ASSERT_EQ(prune.code, 0) << prune.out;
  EXPECT_NE(prune.out.find("(5002 bytes)"), std::string::npos) << prune.out;  // "kernel two" went
  EXPECT_NE(prune.out.find("is now 60.0 KiB (61440 bytes)"), std::string::npos) << prune.out;
  EXPECT_EQ(count_lines(run_kiln("cache list" + scope).out), 2);

  Result exported = run_kiln("cache export " + path("bundle.sqlite") + scope);
  ASSERT_EQ(exported.code, 0) << exported.out;
  EXPECT_EQ(exported.out, "exported 2 entries to " + path("bundle.sqlite") + "\n");
  Result imported =
      run_kiln("cache import " + path("bundle.sqlite") + " --cache file=" + path("other.sqlite"));
  ASSERT_EQ(imported.code, 0) << imported.out;
  EXPECT_EQ(imported.out, "imported 2 entries from " + path("bundle.sqlite") + "\n");
  auto other = Store::open(path("other.sqlite"), {.read_only = true});
  EXPECT_TRUE((*other)->get(Table::kernels, kernel_key("kernel one")).has_value());

  ASSERT_EQ(run_kiln("cache clear" + scope).code, 0);
  EXPECT_NE(run_kiln("cache stats" + scope).out.find("entries: 0 kernels, 0 plans"),
            std::string::npos);
}

TEST_F(CacheCli, VerifyFailsOnACorruptFileAndLeavesItAlone) {
  std::string file = path("cache.sqlite");
  std::string garbage(9000, '\x33');
  std::ofstream(file, std::ios::binary) << garbage;
  Result r = run_kiln("cache verify --cache file=" + file);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("kiln: error: cache " + file + " is unusable"), std::string::npos) << r.out;
  EXPECT_EQ(testing::read_bytes(file), garbage);
}

TEST_F(CacheCli, ErrorsAreOneLine) {
  std::string scope = " --cache file=" + path("c.sqlite");
  Result bad_scope = run_kiln("cache stats --cache nowhere");
  EXPECT_EQ(bad_scope.code, 1);
  EXPECT_EQ(
      bad_scope.out,
      "kiln: error: --cache: 'nowhere' is not a cache scope; expected local, target, global or "
      "file=PATH\n");
  Result bad_size = run_kiln("cache prune --max-size 12parsecs" + scope);
  EXPECT_EQ(bad_size.code, 1);
  EXPECT_EQ(count_lines(bad_size.out), 1);
  EXPECT_NE(bad_size.out.find("bad size '12parsecs'"), std::string::npos) << bad_size.out;
  Result no_key = run_kiln("cache show" + scope);
  EXPECT_EQ(no_key.out, "kiln: error: cache show: expected a KEY\n");
  Result missing = run_kiln("cache show 0123" + scope);
  EXPECT_EQ(missing.code, 1);
  EXPECT_EQ(missing.out, "kiln: error: no entry with key 0123 in cache " + path("c.sqlite") + "\n");
  Result action = run_kiln("cache frobnicate" + scope);
  EXPECT_EQ(action.code, 1);
  EXPECT_EQ(count_lines(action.out), 1) << action.out;
  EXPECT_FALSE(std::filesystem::exists(path("c.sqlite")));  // looking never creates a cache
}

TEST_F(CacheCli, GlobalAndLocalScopes) {
  Result global = run_kiln("cache clear --cache global", "XDG_CACHE_HOME=" + path("xdg") + " ");
  ASSERT_EQ(global.code, 0) << global.out;
  EXPECT_EQ(global.out, "cleared " + path("xdg/kiln/cache.sqlite") + "\n");
  EXPECT_TRUE(std::filesystem::exists(path("xdg/kiln/cache.sqlite")));

  std::filesystem::create_directories(dir_ / "proj" / "src");
  std::ofstream(dir_ / "proj" / "kiln.toml") << "";
  Result local = run_kiln("cache clear --cache local", "cd " + path("proj/src") + " && ");
  ASSERT_EQ(local.code, 0) << local.out;
  EXPECT_EQ(local.out, "cleared " + path("proj/.kiln/cache.sqlite") + "\n");
}

// Without --cache, kiln cache looks at the cache kiln run uses: kiln.toml's compilation.cache,
// KILN_COMPILATION_CACHE over it; with none configured, it says so.
TEST_F(CacheCli, TheDefaultCacheIsTheOneKilnRunUses) {
  const std::string file = path("run.sqlite");
  const std::string graph = std::string(KILN_SOURCE_DIR) + "/examples/small_ops.kg";
  ASSERT_EQ(run_kiln("run " + graph + " --random-inputs", "KILN_COMPILATION_CACHE=file=" + file + " ").code, 0);
  Result stats = run_kiln("cache stats", "KILN_COMPILATION_CACHE=file=" + file + " ");
  ASSERT_EQ(stats.code, 0) << stats.out;
  EXPECT_NE(stats.out.find("cache: " + file), std::string::npos) << stats.out;
  EXPECT_NE(stats.out.find("1 plans"), std::string::npos) << stats.out;
  // The test tree's kiln.toml says compilation.cache = "none".
  Result none = run_kiln("cache stats");
  EXPECT_EQ(none.code, 1) << none.out;
  EXPECT_NE(none.out.find("no cache: compilation.cache is none"), std::string::npos) << none.out;
}

}  // namespace
}  // namespace kiln::cache
