// KILN_DUMP=<dir> with the real `kiln run`: the files it writes, and that the reproducer re-runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tests/dump/run_kiln.h"

namespace kiln::dump_test {
namespace {

namespace fs = std::filesystem;

const char* kGraph =
    "kiln.graph v1\n"
    "input %x : f32[16,8]\n"
    "input %w : f32[8,4]\n"
    "%h = matmul(%x, %w)\n"
    "%m = max(%h, axes=[1], keepdim=true)\n"
    "%y = sub(%h, %m)\n"
    "output %y\n";

std::string launched(const std::string& stats) {
  std::smatch m;
  return std::regex_search(stats, m, std::regex(R"(kernels: (\d+) launched)")) ? m[1].str() : "?";
}

class KilnDumpEnv : public ScratchDir {};

TEST_F(KilnDumpEnv, RunWritesReproducerAndDumpsThatRunAgain) {
  fs::path out = dir_ / "dumps";
  Result r = run_kiln("run " + write("g.kg", kGraph) + " --random-inputs --stats", "KILN_DUMP=" + out.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  for (const char* suffix : {".kg", ".optimized.kg", ".groups.txt", ".kernels.txt", ".source.ll"})
    EXPECT_TRUE(fs::exists(out / (std::string("graph-0001") + suffix))) << suffix;
  EXPECT_FALSE(fs::exists(out / "graph-0002.kg")) << "one plan was built";
  std::string groups = read_text(out / "graph-0001.groups.txt");
  EXPECT_NE(groups.find("\nwhy ("), std::string::npos) << groups;
  EXPECT_NE(groups.find("= matmul(%x, %w) : f32[16,4]"), std::string::npos) << groups;
  EXPECT_NE(read_text(out / "graph-0001.source.ll").find("define "), std::string::npos);

  std::string repro = (out / "graph-0001.kg").string();
  EXPECT_EQ(read_text(repro).rfind("kiln.graph v1\ninput %x : f32[16,8]\ninput %w : f32[8,4]\n", 0), 0u)
      << read_text(repro);
  Result again = run_kiln("run " + repro + " --random-inputs --stats");
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(launched(again.out), launched(r.out)) << r.out << "\n---\n" << again.out;
  EXPECT_EQ(run_kiln("dump " + repro + " --stage groups").code, 0);
}

// The IR after every step, numbered in running order: the lowering script's steps, then compile
// and slots; the last graph step is the optimized graph, `fuse` the groups, `lower` the kernels.
TEST_F(KilnDumpEnv, RunWritesTheIrAfterEveryStep) {
  fs::path out = dir_ / "steps";
  Result r = run_kiln("run " KILN_SOURCE_DIR "/examples/attention.kg --random-inputs",
                      "KILN_DUMP=" + out.string());
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(out / "graph-0001.steps"))
    files.push_back(e.path().filename());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 7u);
  std::vector<std::string> steps;
  for (size_t i = 0; i < files.size(); ++i) {
    EXPECT_EQ(files[i].substr(0, 3), fmt::format("{:02}-", i + 1)) << files[i];
    steps.push_back(files[i].substr(3));
  }
  std::vector<std::string> graph_steps(steps.begin(), steps.end() - 6);
  ASSERT_EQ(graph_steps.size() % 3, 0u) << fmt::format("{}", fmt::join(steps, " "));
  for (size_t i = 0; i < graph_steps.size(); ++i)
    EXPECT_EQ(graph_steps[i],
              (std::vector<std::string>{"fold_literals.kg", "fold_views.kg", "cse.kg"}[i % 3]));
  EXPECT_EQ(std::vector<std::string>(steps.end() - 6, steps.end()),
            (std::vector<std::string>{"split_concats.kg", "fuse.txt", "lower.txt", "analyze.txt",
                                      "compile.ll", "slots.txt"}));
  fs::path dir = out / "graph-0001.steps";
  EXPECT_EQ(read_text(dir / files[files.size() - 6]), read_text(out / "graph-0001.optimized.kg"));
  EXPECT_EQ(read_text(dir / files[files.size() - 5]), read_text(out / "graph-0001.groups.txt"));
  EXPECT_EQ(read_text(dir / files[files.size() - 4]), read_text(out / "graph-0001.kernels.txt"));
  // What codegen was given for attention's one kernel: the attention pattern, causal.
  const std::string facts = read_text(dir / files[files.size() - 3]);
  EXPECT_NE(facts.find("attention: $"), std::string::npos) << facts;
  EXPECT_NE(facts.find("causal: keys j <= i + 0"), std::string::npos) << facts;
  EXPECT_EQ(read_text(dir / files[files.size() - 2]), read_text(out / "graph-0001.source.ll"));
  std::string slots = read_text(dir / files.back());
  EXPECT_NE(slots.find("s0: f32[2,8,1024,64] input 0"), std::string::npos) << slots;
  EXPECT_NE(slots.find("\noutputs: s"), std::string::npos) << slots;
  // Each graph step's IR is a graph kiln runs.
  Result first = run_kiln("run " + (dir / files[0]).string() + " --random-inputs");
  EXPECT_EQ(first.code, 0) << first.err;
}

TEST_F(KilnDumpEnv, SecondProcessTakesTheNextNumber) {
  std::string g = write("g.kg", kGraph);
  std::string env = "KILN_DUMP=" + (dir_ / "d").string();
  ASSERT_EQ(run_kiln("dump " + g + " --stage kernels", env).code, 0);
  ASSERT_EQ(run_kiln("dump " + g + " --stage kernels", env).code, 0);
  EXPECT_TRUE(fs::exists(dir_ / "d" / "graph-0002.kg"));
  EXPECT_EQ(read_text(dir_ / "d" / "graph-0001.kg"), read_text(dir_ / "d" / "graph-0002.kg"));
  EXPECT_FALSE(fs::exists(dir_ / "d" / "graph-0001.source.ll")) << "kernels stage does not compile";
}

TEST_F(KilnDumpEnv, UnwritableDirectoryIsOnlyAWarning) {
  std::string file = write("not_a_dir", "x");
  Result r = run_kiln("run " + write("g.kg", kGraph) + " --random-inputs", "KILN_DUMP=" + file + "/sub");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.rfind("kiln: warning: KILN_DUMP: cannot create '" + file + "/sub'", 0), 0u) << r.err;
  EXPECT_NE(r.out.find("%y : f32[16,4]"), std::string::npos) << r.out;
}

// Run from the scratch directory, where the suite's kiln.toml is not found: --no-autotune, or a
// first tuning would log its decisions on stderr.
TEST_F(KilnDumpEnv, UnsetOrEmptyWritesNothing) {
  Result r = run_kiln("run " + write("g.kg", kGraph) + " --random-inputs --no-autotune",
                      "cd " + dir_.string() + " && KILN_DUMP=");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_FALSE(fs::exists(dir_ / "graph-0001.kg"));
}

}  // namespace
}  // namespace kiln::dump_test
