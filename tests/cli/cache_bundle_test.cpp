// `kiln cache export FILE --for PATH...`: a bundle of exactly the cache entries a recorded
// workload reads (not the rest of the cache), refused with every missing entry listed, imported
// into an empty cache that then serves the workload without compiling; cpu, vulkan and cuda.
#include <gtest/gtest.h>

#include "tests/cache/temp_dir.h"
#include "tests/support/shell.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "cache/store.h"

namespace fs = std::filesystem;

namespace {

using Result = kiln::testing::CommandResult;
using Digests = std::set<std::string>;

// Runs kiln in the build tree (whose kiln.toml turns every persistent cache off unless named).
Result kiln(const std::string& args, const std::string& env = "") {
  return kiln::testing::run_shell(env + " " + KILN_BINARY + " " + args + " 2>&1");
}

std::string example(const std::string& name) {
  return std::string(KILN_SOURCE_DIR) + "/examples/" + name;
}

// The digests of `miss ...` lines (their last word).
Digests missed_digests(const std::string& out) {
  Digests d;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("miss ")) d.insert(line.substr(line.rfind(' ') + 1));
  return d;
}

int count_lines(const std::string& text, const std::string& prefix) {
  int n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += line.starts_with(prefix) ? 1 : 0;
  return n;
}

Digests stored_digests(const std::string& file) {
  auto store = kiln::cache::Store::open(file, {.read_only = true});
  EXPECT_TRUE(store.has_value());
  Digests d;
  if (!store) return d;
  for (kiln::cache::Table t : kiln::cache::kAllTables)
    for (const kiln::cache::Entry& e : (*store)->list(t)) d.insert(e.key);
  return d;
}

std::string read_file(const std::string& path) {
  std::stringstream s;
  s << std::ifstream(path).rdbuf();
  return s.str();
}

class CacheBundle : public kiln::cache::testing::TempDirTest {
 protected:
  // Records a workload of two examples (small_ops: 1 kernel; life: 100 steps of 2 kernels) the
  // way a deployment records one: KILN_RECORD while running.
  void SetUp() override {
    TempDirTest::SetUp();
    record_ = path("record");
    for (const char* g : {"small_ops.kg", "life.kg"}) {
      Result r = kiln("run " + example(g) + " --random-inputs", "KILN_RECORD=" + record_);
      ASSERT_EQ(r.code, 0) << r.out;
    }
    graphs_.clear();
    for (const auto& e : fs::directory_iterator(record_)) graphs_.push_back(e.path().string());
    std::sort(graphs_.begin(), graphs_.end());
    ASSERT_EQ(graphs_.size(), 2u);
  }
  std::string cache(const std::string& name) const { return " --cache file=" + path(name); }
  // What a run of `paths` reads on `target`: the misses `kiln warm --check` lists on an empty
  // cache.
  Digests needed(const std::string& paths, const std::string& target = "") {
    Result r = kiln("warm --check " + paths + target + cache("empty.sqlite"));
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_FALSE(fs::exists(path("empty.sqlite")));
    return missed_digests(r.out);
  }
  std::string record_;
  std::vector<std::string> graphs_;
};

TEST_F(CacheBundle, ExportForARecordedWorkloadHoldsExactlyItsEntriesAndServesIt) {
  Digests wanted = needed(record_);
  Digests unrelated = needed(example("gemv.kg"));
  ASSERT_EQ(wanted.size(), 5u);  // 2 plans, 3 distinct kernels (life's 100 steps run 2)
  ASSERT_EQ(unrelated.size(), 2u);

  Result warm = kiln("warm " + record_ + " " + example("gemv.kg") + cache("cache.sqlite"));
  ASSERT_EQ(warm.code, 0) << warm.out;
  ASSERT_EQ(stored_digests(path("cache.sqlite")).size(), 7u);

  std::string bundle = path("bundle.sqlite");
  Result exported = kiln("cache export " + bundle + " --for " + record_ + cache("cache.sqlite"));
  ASSERT_EQ(exported.code, 0) << exported.out;
  EXPECT_EQ(exported.out,
            "exported 5 entries (2 plans, 3 kernels, 0 autotune) for 2 graphs to " + bundle + "\n");
  EXPECT_EQ(stored_digests(bundle), wanted);
  for (const std::string& d : unrelated) EXPECT_EQ(stored_digests(bundle).count(d), 0u) << d;
  Result verify = kiln("cache verify" + cache("bundle.sqlite"));
  EXPECT_EQ(verify.code, 0) << verify.out;

  // A failed import into a cache that does not exist leaves none behind, nor its directory.
  Result bad = kiln("cache import " + path("bundle.sqlite.missing") + cache("new/fresh.sqlite"));
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_FALSE(std::filesystem::exists(path("new"))) << bad.out;
  Result imported = kiln("cache import " + bundle + cache("fresh.sqlite"));
  ASSERT_EQ(imported.code, 0) << imported.out;
  EXPECT_EQ(imported.out, "imported 5 entries from " + bundle + "\n");
  Result check = kiln("warm --check " + record_ + cache("fresh.sqlite"));
  EXPECT_EQ(check.code, 0) << check.out;
  EXPECT_NE(check.out.find("2 graphs checked, 0 missing"), std::string::npos) << check.out;
  for (const std::string& g : graphs_) {
    Result run = kiln("run " + g + " --random-inputs --stats",
                      "KILN_COMPILATION_CACHE=file=" + path("fresh.sqlite"));
    ASSERT_EQ(run.code, 0) << run.out;
    EXPECT_NE(run.out.find(" 0 compiled"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find("cache: plan from disk"), std::string::npos) << run.out;
  }
  // The unrelated graph is not in the bundle.
  Result other = kiln("warm --check " + example("gemv.kg") + cache("fresh.sqlite"));
  EXPECT_EQ(other.code, 1) << other.out;
  EXPECT_EQ(missed_digests(other.out), unrelated) << other.out;
}

TEST_F(CacheBundle, MissingEntriesAreListedAndNothingIsWritten) {
  // The cache holds small_ops (the same structure as its recording) but not life.
  Result warm = kiln("warm " + example("small_ops.kg") + cache("cache.sqlite"));
  ASSERT_EQ(warm.code, 0) << warm.out;
  std::string bundle = path("bundle.sqlite");
  // An older bundle there (of the small_ops cache): an export replaces a bundle, nothing else.
  ASSERT_EQ(kiln("cache export " + bundle + cache("cache.sqlite")).code, 0);
  const std::string older = read_file(bundle);
  Result r = kiln("cache export " + bundle + " --for " + record_ + cache("cache.sqlite"));
  EXPECT_EQ(r.code, 1) << r.out;
  Digests life = needed(graphs_[0]), small = needed(graphs_[1]);
  if (life.size() < small.size()) std::swap(life, small);
  ASSERT_EQ(life.size(), 3u);  // plan + 2 kernels
  EXPECT_EQ(missed_digests(r.out), life) << r.out;
  EXPECT_EQ(count_lines(r.out, "miss "), 3) << r.out;
  EXPECT_EQ(count_lines(r.out, "miss " + graphs_[0] + ": plan ") +
                count_lines(r.out, "miss " + graphs_[1] + ": plan "),
            1)
      << r.out;
  EXPECT_NE(r.out.find("kiln: error: cache " + path("cache.sqlite") +
                       " lacks 3 entries the workload reads; nothing exported (run `kiln warm "
                       "--cache file=" +
                       path("cache.sqlite") + " " + record_ + "` first)\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(read_file(bundle), older);

  // Warmed as the hint says, the export goes through.
  ASSERT_EQ(kiln("warm " + record_ + cache("cache.sqlite")).code, 0);
  Result ok = kiln("cache export " + bundle + " --for " + record_ + cache("cache.sqlite"));
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_EQ(stored_digests(bundle).size(), 5u);

  // A file of the user's at that path is not replaced.
  const std::string notes = path("notes.txt");
  std::ofstream(notes) << "not a bundle";
  Result kept = kiln("cache export " + notes + cache("cache.sqlite"));
  EXPECT_EQ(kept.code, 1) << kept.out;
  EXPECT_NE(kept.out.find("exists and is not a kiln cache bundle"), std::string::npos) << kept.out;
  EXPECT_EQ(read_file(notes), "not a bundle");
}

// GPU targets bundle plans and kernels as the cpu does; cuda compiles without a GPU.
TEST_F(CacheBundle, VulkanAndCudaTargetsListMissingKernelsThenExportThem) {
  for (std::string target : {" --target vulkan", " --target cuda --arch sm_90"}) {
    SCOPED_TRACE(target);
    // The cpu entries do not serve another target.
    ASSERT_EQ(kiln("warm " + record_ + cache("cache.sqlite")).code, 0);
    std::string bundle = path("bundle.sqlite");
    Result r =
        kiln("cache export " + bundle + " --for " + record_ + target + cache("cache.sqlite"));
    EXPECT_EQ(r.code, 1) << r.out;
    Digests wanted = needed(record_, target);
    EXPECT_EQ(wanted.size(), 5u) << r.out;  // 2 plans, 3 kernels
    EXPECT_EQ(missed_digests(r.out), wanted) << r.out;
    EXPECT_EQ(count_lines(r.out, "miss "), 5) << r.out;
    EXPECT_EQ(count_lines(r.out, "miss " + graphs_[0] + ": plan ") +
                  count_lines(r.out, "miss " + graphs_[1] + ": plan "),
              2)
        << r.out;
    EXPECT_NE(r.out.find("(run `kiln warm" + target + " --cache"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(bundle));

    Result warm = kiln("warm " + record_ + target + cache("cache.sqlite"));
    ASSERT_EQ(warm.code, 0) << warm.out;
    Result ok =
        kiln("cache export " + bundle + " --for " + record_ + target + cache("cache.sqlite"));
    ASSERT_EQ(ok.code, 0) << ok.out;
    EXPECT_EQ(ok.out, "exported 5 entries (2 plans, 3 kernels, 0 autotune) for 2 graphs to " +
                          bundle + "\n");
    EXPECT_EQ(stored_digests(bundle), wanted);
    Result imported = kiln("cache import " + bundle + cache("fresh.sqlite"));
    ASSERT_EQ(imported.code, 0) << imported.out;
    Result check = kiln("warm --check " + record_ + target + cache("fresh.sqlite"));
    EXPECT_EQ(check.code, 0) << check.out;
    fs::remove(bundle);
    fs::remove(path("fresh.sqlite"));
  }
}

// Under --autotune a run without a stored plan reads each kernel's decision, and the kernel is
// keyed by the decision's winner: with decisions kept apart from the kernels (autotune.cache),
// the decision store names exactly the tuned kernel keys the kernel store holds.
TEST_F(CacheBundle, AutotuneListsDecisionsAndKeysKernelsByTheirWinners) {
  // `kiln warm --cache` puts the decisions in that cache too, whatever autotune.cache says.
  std::string tune_env =
      "KILN_AUTOTUNE_LEVEL=minimal KILN_AUTOTUNE_CACHE=file=" + path("elsewhere.sqlite");
  Result warm = kiln("warm --autotune " + record_ + cache("kernels.sqlite"), tune_env);
  ASSERT_EQ(warm.code, 0) << warm.out;
  EXPECT_FALSE(fs::exists(path("elsewhere.sqlite")));
  std::string bundle = path("bundle.sqlite");
  // A store of the decisions alone, copied entry by entry.
  {
    auto from = kiln::cache::Store::open(path("kernels.sqlite"), {.read_only = true});
    auto to = kiln::cache::Store::open(path("decisions.sqlite"));
    ASSERT_TRUE(from.has_value() && to.has_value());
    const std::vector<kiln::cache::Entry> decisions = (*from)->list(kiln::cache::Table::autotune);
    EXPECT_EQ(decisions.size(), 3u);
    for (const kiln::cache::Entry& listed : decisions) {
      std::optional<kiln::cache::Entry> e = (*from)->show(listed.key);
      ASSERT_TRUE(e.has_value());
      ASSERT_TRUE((*to)->put(kiln::cache::Table::autotune, kiln::cache::KeyParts{e->parts}, *e));
    }
  }

  Result from_decisions = kiln(
      "cache export " + bundle + " --for " + record_ + " --autotune" + cache("decisions.sqlite"),
      "KILN_AUTOTUNE_LEVEL=minimal");
  EXPECT_EQ(from_decisions.code, 1) << from_decisions.out;
  EXPECT_EQ(count_lines(from_decisions.out, "miss "), 5)
      << from_decisions.out;  // 2 plans, 3 kernels
  EXPECT_EQ(from_decisions.out.find(": autotune "), std::string::npos) << from_decisions.out;
  Digests kernels;
  auto store = kiln::cache::Store::open(path("kernels.sqlite"), {.read_only = true});
  ASSERT_TRUE(store.has_value());
  for (const kiln::cache::Entry& e : (*store)->list(kiln::cache::Table::kernels))
    kernels.insert(e.key);
  Digests missed_kernels;
  std::istringstream in(from_decisions.out);
  for (std::string line; std::getline(in, line);)
    if (line.find(": kernel ") != std::string::npos)
      missed_kernels.insert(line.substr(line.rfind(' ') + 1));
  EXPECT_EQ(missed_kernels, kernels) << from_decisions.out;

  Result none =
      kiln("cache export " + bundle + " --for " + record_ + " --autotune" + cache("empty.sqlite"),
           "KILN_AUTOTUNE_LEVEL=minimal");
  EXPECT_EQ(none.code, 1) << none.out;
  EXPECT_EQ(count_lines(none.out, "miss "), 8) << none.out;  // and 3 decisions
  EXPECT_NE(none.out.find("(run `kiln warm --autotune --cache"), std::string::npos) << none.out;

  // The stored tuned plans link their kernels: a run reads no decision.
  Result ok =
      kiln("cache export " + bundle + " --for " + record_ + " --autotune" + cache("kernels.sqlite"),
           "KILN_AUTOTUNE_LEVEL=minimal");
  ASSERT_EQ(ok.code, 0) << ok.out;
  EXPECT_EQ(ok.out,
            "exported 5 entries (2 plans, 3 kernels, 0 autotune) for 2 graphs to " + bundle + "\n");
  // Untuned, the same workload is keyed differently (the plans name their schedule).
  Result untuned = kiln("cache export " + bundle + " --for " + record_ + cache("kernels.sqlite"));
  EXPECT_EQ(untuned.code, 1) << untuned.out;
}

TEST_F(CacheBundle, FlagErrorsAreOneLine) {
  struct Case {
    std::string args, message;
  };
  std::string b = path("b.sqlite");
  for (const Case& c : std::vector<Case>{
           {"cache stats --for " + record_, "kiln: error: cache stats: --for is only for export\n"},
           {"cache export " + b + " --target vulkan",
            "kiln: error: cache export: --target needs export --for PATH...\n"},
           {"cache export " + b + " --arch sm_80",
            "kiln: error: cache export: --arch needs export --for PATH...\n"},
           {"cache export " + b + " --for " + record_ + " --target vulkan --arch sm_80",
            "kiln: error: --arch applies to --target cuda, not vulkan\n"},
           {"cache export --for " + record_ + " " + b,
            "kiln: error: cache export: expected a FILE before --for PATH... (which takes every "
            "path after it)\n"},
           {"cache export " + b + " --cache file=" + path("c.sqlite") + " --for " + path("nowhere"),
            "kiln: error: '" + path("nowhere") + "' does not exist\n"},
       }) {
    Result r = kiln(c.args);
    EXPECT_EQ(r.code, 1) << c.args;
    EXPECT_EQ(r.out, c.message) << c.args;
    EXPECT_FALSE(fs::exists(b)) << c.args;
  }
}

// The store exports the listed digests of every table, skips digests it does not hold, and
// counts what it wrote.
TEST_F(CacheBundle, GpuAutotuneWarmsChecksAndShipsTunedPlans) {
  // vulkan:0 is lavapipe; reference rates keep the roofline's measurement out of the test.
  const std::string env = "KILN_AUTOTUNE_LEVEL=minimal KILN_GPU_RATES=reference";
  Result warm = kiln("warm --target vulkan --autotune " + record_ + cache("gpu.sqlite"), env);
  ASSERT_EQ(warm.code, 0) << warm.out;
  Result check = kiln("warm --check --target vulkan --autotune " + record_ + cache("gpu.sqlite"), env);
  EXPECT_EQ(check.code, 0) << check.out;
  // Without --autotune the same workload runs untuned plans, which were not stored, and default
  // schedules, which were compiled only where the tuner kept the default (timing decides: under
  // load it may keep all of them).
  Result decisions = kiln("cache list" + cache("gpu.sqlite"));
  ASSERT_EQ(decisions.code, 0) << decisions.out;
  bool tuned_away = false;
  int listed = 0;
  std::istringstream lines(decisions.out);
  for (std::string table, digest; lines >> table >> digest; lines.ignore(1 << 20, '\n')) {
    if (table != "autotune") continue;
    ++listed;
    Result shown = kiln("cache show " + digest + cache("gpu.sqlite"));
    ASSERT_EQ(shown.code, 0) << shown.out;
    tuned_away = tuned_away || shown.out.find(R"("winner":"vector_width=0 unroll=0")") == std::string::npos;
  }
  EXPECT_EQ(listed, 3);
  Result untuned = kiln("warm --check --target vulkan " + record_ + cache("gpu.sqlite"), env);
  EXPECT_EQ(untuned.code, 1) << untuned.out;
  EXPECT_EQ(count_lines(untuned.out, "miss " + graphs_[0] + ": plan ") +
                count_lines(untuned.out, "miss " + graphs_[1] + ": plan "),
            2)
      << untuned.out;
  EXPECT_EQ(untuned.out.find(": kernel ") != std::string::npos, tuned_away) << untuned.out;

  std::string bundle = path("gpu-bundle.sqlite");
  Result exported =
      kiln("cache export " + bundle + " --for " + record_ + " --target vulkan --autotune" + cache("gpu.sqlite"), env);
  ASSERT_EQ(exported.code, 0) << exported.out;
  // The stored tuned plans name their kernels: a run reads no decision (as on the cpu).
  EXPECT_EQ(exported.out,
            "exported 5 entries (2 plans, 3 kernels, 0 autotune) for 2 graphs to " + bundle + "\n");
  ASSERT_EQ(kiln("cache import " + bundle + cache("shipped.sqlite")).code, 0);
  // A run on the shipped cache tunes and compiles nothing.
  for (const std::string& g : graphs_) {
    Result run = kiln("run " + g + " --random-inputs --device vulkan:0 --autotune --stats",
                      env + " KILN_COMPILATION_CACHE=file=" + path("shipped.sqlite") +
                          " KILN_AUTOTUNE_CACHE=none");
    ASSERT_EQ(run.code, 0) << run.out;
    EXPECT_NE(run.out.find(" launched, 0 compiled"), std::string::npos) << run.out;
    EXPECT_EQ(run.out.find("tuned"), std::string::npos) << run.out;
  }
  // CUDA tuning measures the GPU itself: without one it is a one-line error (with one, it runs).
  Result cuda = kiln("warm --target cuda --arch sm_90 --autotune " + record_ + cache("cuda.sqlite"), env);
  if (cuda.code != 0) {
    EXPECT_TRUE(cuda.out.starts_with("kiln: error: --autotune measures kernels on the GPU itself: cuda"))
        << cuda.out;
    // Tuning asked only by kiln.toml's autotune.enabled (on by default) gives way to untuned
    // kernels for the arch, with a note: a cache for a GPU warms on a machine without one.
    Result by_config = kiln("warm --target cuda --arch sm_90 " + record_ + cache("cuda.sqlite"),
                            env + " KILN_AUTOTUNE_ENABLED=true");
    EXPECT_EQ(by_config.code, 0) << by_config.out;
    EXPECT_NE(by_config.out.find("kiln: note: no CUDA device to tune on"), std::string::npos)
        << by_config.out;
    EXPECT_NE(by_config.out.find("2 graphs warmed for cuda sm_90, 3 kernels compiled, 0 tuned"),
              std::string::npos)
        << by_config.out;
  }
}

TEST_F(CacheBundle, StoreExportsOnlyTheListedDigests) {
  using namespace kiln::cache;
  auto store = Store::open(path("cache.sqlite"));
  ASSERT_TRUE(store.has_value());
  KeyParts k1 = kiln::cache::testing::kernel_key("one"),
           k2 = kiln::cache::testing::kernel_key("two");
  KeyParts plan{{{"graph", "g"}, {"fuser", "beam"}}},
      tune{{{"kernel", "one"}, {"autotune", "minimal"}}};
  ASSERT_TRUE((*store)->put(Table::kernels, k1, kiln::cache::testing::entry("obj1")));
  ASSERT_TRUE((*store)->put(Table::kernels, k2, kiln::cache::testing::entry("obj2")));
  ASSERT_TRUE((*store)->put(Table::plans, plan, kiln::cache::testing::entry("plan")));
  ASSERT_TRUE((*store)->put(Table::autotune, tune, kiln::cache::testing::entry("decision")));
  std::vector<std::string> digests{k1.digest(), plan.digest(), tune.digest(), "0123456789abcdef"};
  auto n = (*store)->export_bundle(path("bundle.sqlite"), &digests);
  ASSERT_TRUE(n.has_value()) << n.error().message;
  EXPECT_EQ(*n, 3);
  EXPECT_EQ(stored_digests(path("bundle.sqlite")),
            (Digests{k1.digest(), plan.digest(), tune.digest()}));
  std::vector<std::string> nothing;
  auto empty = (*store)->export_bundle(path("empty.sqlite"), &nothing);
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(*empty, 0);
  auto all = (*store)->export_bundle(path("all.sqlite"));
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(*all, 4);
}

// On a terminal, `kiln warm` redraws one progress line per graph: graph i of n, the kernels
// compiled and tuned so far, the time left; elsewhere it prints only the summary.
TEST_F(CacheBundle, WarmShowsProgressOnATerminal) {
  const std::string graphs = " " + example("small_ops.kg") + " " + example("softmax.kg");
  Result tty = kiln::testing::run_shell("script -qec '" + std::string(KILN_BINARY) + " warm" +
                                        graphs + cache("tty.sqlite") + "' /dev/null 2>&1");
  ASSERT_EQ(tty.code, 0) << tty.out;
  EXPECT_TRUE(std::regex_search(
      tty.out, std::regex(R"(\] 1/2 graphs, [1-9]\d* kernels compiled, 0 tuned, [0-9.]+ s left)")))
      << tty.out;
  EXPECT_TRUE(std::regex_search(
      tty.out, std::regex(R"(\] 2/2 graphs, [1-9]\d* kernels compiled, 0 tuned, 0\.0 s left)")))
      << tty.out;
  Result plain = kiln("warm" + graphs + cache("plain.sqlite"));
  ASSERT_EQ(plain.code, 0) << plain.out;
  EXPECT_EQ(plain.out.find("graphs, "), std::string::npos) << plain.out;
  EXPECT_NE(plain.out.find(": 2 graphs warmed for cpu, "), std::string::npos) << plain.out;
}

}  // namespace
