// KILN_DUMP=<dir> with the real `kiln run`: the files it writes, and that the reproducer re-runs.
#include <gtest/gtest.h>

#include <regex>

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

TEST_F(KilnDumpEnv, UnsetOrEmptyWritesNothing) {
  Result r = run_kiln("run " + write("g.kg", kGraph) + " --random-inputs", "cd " + dir_.string() + " && KILN_DUMP=");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_FALSE(fs::exists(dir_ / "graph-0001.kg"));
}

}  // namespace
}  // namespace kiln::dump_test
