// `kiln run` across processes with a persistent cache: the second process compiles nothing;
// 16 processes started at once on an empty cache all succeed and the cache verifies.
#include <gtest/gtest.h>

#include "tests/cli/matmul_chain_dir.h"
#include "tests/support/shell.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/npy.h"

namespace fs = std::filesystem;

namespace {

using Result = kiln::testing::CommandResult;

Result sh(const std::string& cmd) {
  return kiln::testing::run_shell(cmd + " 2>&1");
}

// A size symbol on an inner axis: a softmax and a mean along it.
constexpr const char* kInnerGraph =
    "kiln.graph v1\n"
    "input %x : f32[4,?n=10]\n"
    "%y = softmax(%x, axis=1)\n"
    "%m = mean(%x, axes=[1])\n"
    "output %y\n"
    "output %m\n";

// On the cpu: five kernels, three distinct (the softmax is fused into the last matmul's epilogue).
class PersistentRun : public kiln::testing::MatmulChainDir {
 protected:
  void SetUp() override { make_dir("kiln_prun_"); }
  std::string kiln(const std::string& args) {
    return "KILN_COMPILATION_CACHE=file=" + (dir_ / "cache.sqlite").string() + " " + KILN_BINARY +
           " " + args;
  }
};

TEST_F(PersistentRun, SecondProcessCompilesNothing) {
  Result cold = sh(kiln("run " + graph_ + " --random-inputs --stats --out " + (dir_ / "a").string()));
  ASSERT_EQ(cold.code, 0) << cold.out;
  EXPECT_NE(cold.out.find("kernels: 5 launched, 3 compiled"), std::string::npos) << cold.out;
  Result warm = sh(kiln("run " + graph_ + " --random-inputs --stats --out " + (dir_ / "b").string()));
  ASSERT_EQ(warm.code, 0) << warm.out;
  EXPECT_NE(warm.out.find("kernels: 5 launched, 0 compiled"), std::string::npos) << warm.out;
  EXPECT_NE(warm.out.find("cache: plan from disk, 3 kernel hits, 0 misses"), std::string::npos)
      << warm.out;
  auto a = kiln::tools::read_npy((dir_ / "a" / "y.npy").string());
  auto b = kiln::tools::read_npy((dir_ / "b" / "y.npy").string());
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->bytes, b->bytes);
}

// A graph whose size symbol is on an inner axis: each `kiln run` at a size compiles the kernels
// with that size taken at run time (it lowers the graph at n + 1 first, nothing compiled), so a
// process at another size compiles nothing; `kiln dump` shows those kernels' run-time sizes.
TEST_F(PersistentRun, AnInnerSizeSymbolsKernelsServeTheNextProcessAtAnotherSize) {
  const std::string graph = (dir_ / "inner.kg").string();
  std::ofstream(graph) << kInnerGraph;
  const std::string run = "run " + graph + " --random-inputs --no-autotune --stats";
  Result first = sh(kiln(run));
  ASSERT_EQ(first.code, 0) << first.out;
  EXPECT_NE(first.out.find("kernels: 2 launched, 2 compiled"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("(first met at size.0 = 11, where the graph was read larger to find its sizes)"), std::string::npos) << first.out;
  for (const char* n : {"11", "3", "500"}) {
    Result other = sh(kiln(run + " --dim n=" + n));
    ASSERT_EQ(other.code, 0) << other.out;
    EXPECT_NE(other.out.find("kernels: 2 launched, 0 compiled"), std::string::npos)
        << "n=" << n << ": " << other.out;
  }
  Result dump = sh(std::string(KILN_BINARY) + " dump " + graph + " --stage kernels");
  ASSERT_EQ(dump.code, 0) << dump.out;
  EXPECT_NE(dump.out.find("domain [4,size.0]  sizes 1  # = 10"), std::string::npos) << dump.out;
  // Each slot named by the size symbol it holds: the softmax's row length, the mean's n and 1/n.
  EXPECT_NE(dump.out.find("# k0: %t1 %t2 %t3 %t4 %y\n# size.0 is ?n\nkernel k0"), std::string::npos)
      << dump.out;
  EXPECT_NE(dump.out.find("# k1: %t6 %m\n# size.0 is ?n, size.1 is 1/?n\nkernel k1"),
            std::string::npos)
      << dump.out;
}

// `kiln warm` of a graph whose size symbol is on an inner axis stores the kernels a run makes (their
// size taken at run time from the first size on, as `kiln run` lowers them) and, from three sizes,
// the graph's symbolic plan: a run at any other size compiles and plans nothing.
TEST_F(PersistentRun, AWarmedInnerSizeSymbolServesARunAtAnotherSizeFromItsSymbolicPlan) {
  const std::string graph = (dir_ / "inner.kg").string();
  std::ofstream(graph) << kInnerGraph;
  const std::string cache = (dir_ / "shipped.sqlite").string();
  Result warm = sh(std::string(KILN_BINARY) + " warm " + graph + " --no-autotune --cache file=" + cache);
  ASSERT_EQ(warm.code, 0) << warm.out;
  EXPECT_NE(warm.out.find("1 graph warmed for cpu, 2 kernels compiled, 1 symbolic plan"),
            std::string::npos)
      << warm.out;
  // The shipped file holds the kernels, the plans and the measured rates (which plan keys name).
  const std::string env =
      "KILN_COMPILATION_CACHE=file=" + cache + " KILN_AUTOTUNE_CACHE=file=" + cache + " ";
  for (const char* n : {"7", "300"}) {
    Result run = sh(env + KILN_BINARY + " run " + graph + " --random-inputs --no-autotune --stats --dim n=" + n);
    ASSERT_EQ(run.code, 0) << run.out;
    EXPECT_NE(run.out.find("kernels: 2 launched, 0 compiled"), std::string::npos)
        << "n=" << n << ": " << run.out;
    EXPECT_NE(run.out.find("cache: plan instantiated from its symbolic plan, 2 kernel hits, 0 misses"),
              std::string::npos)
        << "n=" << n << ": " << run.out;
  }
}

// The fuser groups softmax(x) - mean(x) over [4, 10] otherwise than over [4, 11] and on: the
// first size's plan fits no other, so warm goes on to sizes whose plans make the symbolic plan.
TEST_F(PersistentRun, AWarmOfAGraphPlannedOtherwiseAtItsFirstSizeStillStoresItsSymbolicPlan) {
  const std::string graph = (dir_ / "soft.kg").string();
  std::ofstream(graph) << "kiln.graph v1\n"
                          "input %x : f32[4,?n=10]\n"
                          "%s = softmax(%x, axis=-1)\n"
                          "%m = mean(%x, axes=[1], keepdim=true)\n"
                          "%y = sub(%s, %m)\n"
                          "output %y\n"
                          "output %m\n";
  const std::string cache = (dir_ / "shipped.sqlite").string();
  Result warm = sh(std::string(KILN_BINARY) + " warm " + graph + " --no-autotune --cache file=" + cache);
  ASSERT_EQ(warm.code, 0) << warm.out;
  EXPECT_NE(warm.out.find(", 1 symbolic plan"), std::string::npos) << warm.out;
  Result run = sh("KILN_COMPILATION_CACHE=file=" + cache + " KILN_AUTOTUNE_CACHE=file=" + cache + " " +
                  KILN_BINARY + " run " + graph + " --random-inputs --no-autotune --stats --dim n=7");
  ASSERT_EQ(run.code, 0) << run.out;
  EXPECT_NE(run.out.find("cache: plan instantiated from its symbolic plan"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("0 compiled"), std::string::npos) << run.out;
}

// A kernel the cpu runs at fixed inner sizes only (x * w summed over ?n and read back per point is
// a matrix product to its recognizer) compiles at each inner size, and --stats says why.
TEST_F(PersistentRun, AKernelOfFixedInnerSizesSaysWhyItCompilesAgain) {
  const std::string graph = (dir_ / "xw.kg").string();
  std::ofstream(graph) << "kiln.graph v1\n"
                          "input %x : f32[4,?n=10]\n"
                          "input %w : f32[?n]\n"
                          "%a = mul(%x, %w)\n"
                          "%s = sum(%a, axes=[1], keepdim=true)\n"
                          "%y = sub(%a, %s)\n"
                          "output %y\n";
  Result run = sh(kiln("run " + graph + " --random-inputs --no-autotune --stats --dim n=9"));
  ASSERT_EQ(run.code, 0) << run.out;
  EXPECT_NE(run.out.find("recompile: k0: size.0 = 9 (met at size.0 = 10, where the graph was read "
                         "larger to find its sizes): dynamic along its outer axis, code of its own "
                         "at each inner size (cpu runs this kernel at fixed inner sizes only)"),
            std::string::npos)
      << run.out;
}

// Under the automatic policy with autotuning, whether a kernel takes its sizes at run time is timed
// once: the ratio goes in the cache, and the next process (at another size) takes the same choice
// from there rather than timing again (and perhaps choosing otherwise: kernels no process stored).
TEST_F(PersistentRun, AKernelsRunTimeSizesAreTimedOnceForEveryProcess) {
  const std::string graph = (dir_ / "inner.kg").string();
  std::ofstream(graph) << "kiln.graph v1\n"
                          "input %x : f32[4,?n=10]\n"
                          "%m = mean(%x, axes=[1])\n"
                          "output %m\n";
  const std::string cache = (dir_ / "cache.sqlite").string();
  const std::string env = "KILN_AUTOTUNE_CACHE=file=" + cache + " ";
  Result first = sh(env + kiln("run " + graph + " --random-inputs --autotune --stats"));
  ASSERT_EQ(first.code, 0) << first.out;
  ASSERT_NE(first.out.find("recompile: k0: size.0 = 10"), std::string::npos) << first.out;
  EXPECT_EQ(first.out.find("as stored in the cache"), std::string::npos) << first.out;
  for (const char* n : {"20", "5"}) {
    Result other = sh(env + kiln("run " + graph + " --random-inputs --autotune --stats --dim n=" + n));
    ASSERT_EQ(other.code, 0) << other.out;
    EXPECT_NE(other.out.find("as stored in the cache)"), std::string::npos)
        << "n=" << n << ": " << other.out;
  }
  Result verify = sh(std::string(KILN_BINARY) + " cache verify --cache file=" + cache);
  EXPECT_EQ(verify.code, 0) << verify.out;
}

// compilation.cpu_target is part of every key: kernels built for the host are not reused for the
// x86-64-v3 baseline (and the reverse), and each target warms its own entries.
TEST_F(PersistentRun, EachCpuTargetHasItsOwnKernels) {
  const std::string run = "run " + graph_ + " --random-inputs --stats";
  // Named, not inherited: the suite may run with another target forced in the environment.
  Result native = sh("KILN_COMPILATION_CPU_TARGET=native " + kiln(run + " --out " + (dir_ / "a").string()));
  ASSERT_EQ(native.code, 0) << native.out;
  EXPECT_NE(native.out.find("kernels: 5 launched, 3 compiled"), std::string::npos) << native.out;
  Result v3 = sh("KILN_COMPILATION_CPU_TARGET=x86-64-v3 " +
                 kiln(run + " --out " + (dir_ / "b").string()));
  ASSERT_EQ(v3.code, 0) << v3.out;
  EXPECT_NE(v3.out.find("kernels: 5 launched, 3 compiled"), std::string::npos) << v3.out;
  Result v3_warm = sh("KILN_COMPILATION_CPU_TARGET=x86-64-v3 " + kiln(run));
  ASSERT_EQ(v3_warm.code, 0) << v3_warm.out;
  EXPECT_NE(v3_warm.out.find("cache: plan from disk, 3 kernel hits, 0 misses"), std::string::npos)
      << v3_warm.out;
  Result bad = sh("KILN_COMPILATION_CPU_TARGET=pentium-9000 " + kiln(run));
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("env KILN_COMPILATION_CPU_TARGET: error: compilation.cpu_target: unknown "
                         "CPU 'pentium-9000'"),
            std::string::npos)
      << bad.out;
  auto a = kiln::tools::read_npy((dir_ / "a" / "y.npy").string());
  auto b = kiln::tools::read_npy((dir_ / "b" / "y.npy").string());
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->bytes.size(), b->bytes.size());
}

TEST_F(PersistentRun, SixteenProcessesAtOnceOnAnEmptyCache) {
  std::vector<pid_t> pids;
  for (int i = 0; i < 16; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      std::string out = (dir_ / ("o" + std::to_string(i))).string();
      Result r = sh(kiln("run " + graph_ + " --random-inputs --seed 3 --out " + out));
      _exit(r.code);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  auto first = kiln::tools::read_npy((dir_ / "o0" / "y.npy").string());
  ASSERT_TRUE(first.has_value());
  for (int i = 1; i < 16; ++i) {
    auto other = kiln::tools::read_npy((dir_ / ("o" + std::to_string(i)) / "y.npy").string());
    ASSERT_TRUE(other.has_value()) << i;
    EXPECT_EQ(other->bytes, first->bytes) << i;
  }
  Result verify = sh(std::string(KILN_BINARY) + " cache verify --cache file=" +
                     (dir_ / "cache.sqlite").string());
  EXPECT_EQ(verify.code, 0) << verify.out;
}

// --autotune: the first process tunes every distinct kernel and keeps the decisions; a second
// process tunes nothing, compiles nothing, and gives the same results. `kiln warm --check` then
// passes for the graph, and `kiln cache show` prints a decision with every candidate.
TEST_F(PersistentRun, AutotuneDecisionsAreKeptForTheNextProcess) {
  ::setenv("KILN_AUTOTUNE_CACHE", ("file=" + (dir_ / "cache.sqlite").string()).c_str(), 1);
  std::string json1 = (dir_ / "s1.json").string(), json2 = (dir_ / "s2.json").string();
  Result cold = sh(kiln("run " + graph_ + " --random-inputs --autotune --stats-json " + json1 +
                        " --out " + (dir_ / "a").string()));
  ASSERT_EQ(cold.code, 0) << cold.out;
  Result warm = sh(kiln("run " + graph_ + " --random-inputs --autotune --stats --stats-json " +
                        json2 + " --out " + (dir_ / "b").string()));
  ASSERT_EQ(warm.code, 0) << warm.out;
  auto read = [](const std::string& path) {
    std::stringstream s;
    s << std::ifstream(path).rdbuf();
    return s.str();
  };
  EXPECT_NE(read(json1).find("\"tuned\": 3"), std::string::npos) << read(json1);
  EXPECT_NE(read(json2).find("\"tuned\": 0"), std::string::npos) << read(json2);
  EXPECT_NE(warm.out.find("kernels: 5 launched, 0 compiled"), std::string::npos) << warm.out;
  auto a = kiln::tools::read_npy((dir_ / "a" / "y.npy").string());
  auto b = kiln::tools::read_npy((dir_ / "b" / "y.npy").string());
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->bytes, b->bytes);
  Result list = sh(kiln("cache list --cache file=" + (dir_ / "cache.sqlite").string()));
  ASSERT_EQ(list.code, 0) << list.out;
  size_t at = list.out.find("autotune ");
  ASSERT_NE(at, std::string::npos) << list.out;
  std::string key = list.out.substr(at + 9);
  key = key.substr(key.find_first_not_of(' '), 32);
  Result show = sh(kiln("cache show " + key + " --cache file=" + (dir_ / "cache.sqlite").string()));
  ASSERT_EQ(show.code, 0) << show.out;
  EXPECT_NE(show.out.find("vector_width="), std::string::npos) << show.out;
  ::unsetenv("KILN_AUTOTUNE_CACHE");
}

// `kiln warm` of a graph with a size symbol stores its symbolic plan (its sizes and a second size
// of ?b make it); a new process runs another batch size from it, building and compiling nothing,
// with the results of the reference device; `kiln cache export --for` bundles the symbolic plan
// with the plans and kernels, and a cache holding only the bundle serves that size too.
TEST_F(PersistentRun, AWarmedSymbolicPlanServesEveryBatchSize) {
  const std::string kg = (dir_ / "mlp.kg").string();
  std::ofstream(kg) << "kiln.graph v1\ninput %x : f32[?b=16,48]\ninput %w : f32[48,32]\n"
                       "%h = matmul(%x, %w)\n%y = tanh(%h)\n%z = mul(%y, %y)\noutput %z\n";
  const std::string cache = "file=" + (dir_ / "cache.sqlite").string();
  // The reference rates: the fuser (a part of the plan keys) is the same in every process.
  const std::string env = "KILN_CPU_RATES=reference KILN_AUTOTUNE_CACHE=" + cache + " ";
  Result warmed = sh(env + kiln("warm " + kg + " --no-autotune --cache " + cache));
  ASSERT_EQ(warmed.code, 0) << warmed.out;
  EXPECT_NE(warmed.out.find("1 graph warmed for cpu, 1 kernel compiled, 1 symbolic plan"),
            std::string::npos)
      << warmed.out;
  const auto run = [&](const std::string& cache_spec, int64_t b, const std::string& device,
                       const std::string& out) {
    return sh("KILN_CPU_RATES=reference KILN_AUTOTUNE_CACHE=" + cache_spec +
              " KILN_COMPILATION_CACHE=" + cache_spec + " " + KILN_BINARY + " run " + kg +
              " --no-autotune --random-inputs --seed 3 --stats --dim b=" + std::to_string(b) +
              " --device " + device + " --out " + (dir_ / out).string());
  };
  const auto same = [&](const std::string& a, const std::string& b) {
    auto x = kiln::tools::read_npy((dir_ / a / "z.npy").string());
    auto y = kiln::tools::read_npy((dir_ / b / "z.npy").string());
    ASSERT_TRUE(x && y);
    ASSERT_EQ(x->shape, y->shape);
    for (int64_t i = 0; i < x->numel(); ++i)
      EXPECT_NEAR(x->get(i), y->get(i), 1e-5) << a << " " << i;
  };
  for (int64_t b : {37, 2, 200}) {
    Result r = run(cache, b, "cpu", "cpu" + std::to_string(b));
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("kernels: 1 launched, 0 compiled"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("cache: plan instantiated from its symbolic plan"), std::string::npos)
        << r.out;
    ASSERT_EQ(run("none", b, "reference", "ref" + std::to_string(b)).code, 0);
    same("cpu" + std::to_string(b), "ref" + std::to_string(b));
  }
  const std::string bundle = (dir_ / "bundle.sqlite").string();
  Result exported =
      sh(env + kiln("cache export " + bundle + " --for " + kg + " --no-autotune --cache " + cache));
  ASSERT_EQ(exported.code, 0) << exported.out;
  EXPECT_NE(exported.out.find("(2 plans, 1 kernel, "), std::string::npos) << exported.out;
  const std::string fresh = "file=" + (dir_ / "fresh.sqlite").string();
  ASSERT_EQ(sh(kiln("cache import " + bundle + " --cache " + fresh)).code, 0);
  Result served = run(fresh, 91, "cpu", "fresh");
  ASSERT_EQ(served.code, 0) << served.out;
  EXPECT_NE(served.out.find("cache: plan instantiated from its symbolic plan"), std::string::npos)
      << served.out;
  EXPECT_NE(served.out.find("0 compiled"), std::string::npos) << served.out;
  Result verify = sh(kiln("cache verify --cache " + cache));
  EXPECT_EQ(verify.code, 0) << verify.out;
}

// A cache.max_size that cannot hold what a warm-up compiled: an error saying so, not "warmed"
// with the entries evicted again as they went in (a run then compiled them all).
TEST_F(PersistentRun, WarmingPastTheCacheSizeCapIsAnError) {
  const fs::path graphs = dir_ / "graphs";
  fs::create_directories(graphs);
  for (const char* op : {"exp", "tanh", "sigmoid", "sqrt"})
    std::ofstream(graphs / (std::string(op) + ".kg"))
        << "kiln.graph v1\ninput %x : f32[8," << std::string(op).size() << "]\n%y = " << op
        << "(%x)\n%z = sum(%y, axes=[1])\noutput %z\n";
  const std::string cache = "file=" + (dir_ / "capped.sqlite").string();
  Result capped = sh("KILN_CACHE_MAX_SIZE=64KiB " +
                     kiln("warm " + graphs.string() + " --no-autotune --cache " + cache));
  EXPECT_EQ(capped.code, 1) << capped.out;
  EXPECT_NE(capped.out.find("kiln: error: warm: cache.max_size (65536 bytes) cannot hold what was "
                            "warmed"),
            std::string::npos)
      << capped.out;
  EXPECT_EQ(capped.out.find("warmed for cpu"), std::string::npos) << capped.out;
  // (A graph named again, beside the directory that holds it, is one graph.)
  Result roomy = sh("KILN_CACHE_MAX_SIZE=64MiB " +
                    kiln("warm " + graphs.string() + " " + (graphs / "exp.kg").string() +
                         " --no-autotune --cache " + cache));
  EXPECT_EQ(roomy.code, 0) << roomy.out;
  EXPECT_NE(roomy.out.find("4 graphs warmed for cpu"), std::string::npos) << roomy.out;
}

TEST_F(PersistentRun, WarmingADirectoryAtDimsSizesTheGraphsThatHaveTheSymbol) {
  const fs::path graphs = dir_ / "graphs";
  fs::create_directories(graphs);
  std::ofstream(graphs / "mlp.kg")
      << "kiln.graph v1\ninput %x : f32[?b=16,48]\ninput %w : f32[48,32]\n"
         "%h = matmul(%x, %w)\n%y = tanh(%h)\noutput %y\n";
  std::ofstream(graphs / "static.kg")
      << "kiln.graph v1\ninput %x : f32[8,8]\n%y = exp(%x)\noutput %y\n";
  std::ofstream(graphs / "rows.kg")
      << "kiln.graph v1\ninput %x : f32[?s=8,4]\n%y = exp(%x)\noutput %y\n";
  const std::string cache = "file=" + (dir_ / "cache.sqlite").string();
  // The graphs without ?b are warmed as without --dim (rows.kg at two sizes of ?s: its symbolic
  // plan), not refused for lacking ?b.
  Result warmed =
      sh(kiln("warm " + graphs.string() + " --dim b=4..8 --no-autotune --cache " + cache));
  ASSERT_EQ(warmed.code, 0) << warmed.out;
  EXPECT_NE(warmed.out.find("3 graphs warmed for cpu"), std::string::npos) << warmed.out;
  EXPECT_NE(warmed.out.find("2 symbolic plans"), std::string::npos) << warmed.out;
  for (const std::string run : {"mlp.kg --dim b=6", "rows.kg --dim s=5"}) {
    Result served =
        sh(kiln("run " + (graphs / run).string() + " --no-autotune --random-inputs --stats"));
    ASSERT_EQ(served.code, 0) << served.out;
    EXPECT_NE(served.out.find("0 compiled"), std::string::npos) << run << "\n" << served.out;
  }
  // A --dim that no graph has sizes nothing: an error naming the symbols there are.
  Result typo = sh(kiln("warm " + graphs.string() + " --dim bb=4 --no-autotune --cache " + cache));
  EXPECT_EQ(typo.code, 1) << typo.out;
  EXPECT_NE(typo.out.find("kiln: error: --dim bb: none of the 3 graphs has a size symbol '?bb' "
                          "(their symbols: b, s)"),
            std::string::npos)
      << typo.out;
  // A cache warm may not write (cache.read_only) or cannot open is refused before anything is
  // compiled, the file left as it was.
  const std::string before =
      kiln::testing::run_shell("md5sum < " + (dir_ / "cache.sqlite").string()).out;
  Result ro = sh("KILN_CACHE_READ_ONLY=true " + kiln("warm " + (graphs / "static.kg").string() +
                                                     " --no-autotune --cache " + cache));
  EXPECT_EQ(ro.code, 1) << ro.out;
  EXPECT_NE(ro.out.find("is read-only (cache.read_only is true in kiln.toml or "
                        "KILN_CACHE_READ_ONLY); nothing was warmed"),
            std::string::npos)
      << ro.out;
  EXPECT_EQ(kiln::testing::run_shell("md5sum < " + (dir_ / "cache.sqlite").string()).out, before);
  fs::create_directories(dir_ / "locked");
  std::ofstream(dir_ / "locked" / "not_a_dir") << "a file where the cache's directory would be";
  Result unopenable =
      sh(kiln("warm " + (graphs / "static.kg").string() + " --no-autotune --cache file=" +
              (dir_ / "locked" / "not_a_dir" / "c.sqlite").string()));
  EXPECT_EQ(unopenable.code, 1) << unopenable.out;
  EXPECT_NE(unopenable.out.find("warm: cannot write the cache"), std::string::npos)
      << unopenable.out;
  EXPECT_NE(unopenable.out.find("nothing was warmed"), std::string::npos) << unopenable.out;
  // One graph must have it.
  Result one = sh(kiln("warm " + (graphs / "static.kg").string() +
                       " --dim b=4 --no-autotune --cache " + cache));
  EXPECT_EQ(one.code, 1) << one.out;
  EXPECT_NE(one.out.find("static.kg has no size symbol '?b'"), std::string::npos) << one.out;
  // A located error is printed as `kiln run` prints it, with one "error:".
  const std::string bad = (dir_ / "bad.kg").string();
  std::ofstream(bad) << "kiln.graph v1\ninput %x : f32[4]\n%y = nosuchop(%x)\noutput %y\n";
  Result located = sh(kiln("warm " + bad + " --no-autotune --cache " + cache));
  EXPECT_EQ(located.code, 1) << located.out;
  EXPECT_NE(located.out.find(bad + ":3:"), std::string::npos) << located.out;
  EXPECT_EQ(located.out.find("kiln: error: " + bad), std::string::npos) << located.out;
}

}  // namespace
