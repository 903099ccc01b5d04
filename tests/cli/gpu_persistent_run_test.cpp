// `kiln run --device vulkan:0` across processes with a persistent cache: the second process loads
// the plan and its kernels from disk and compiles nothing; a damaged plan record or kernel entry
// costs a rebuild, never the run. Skips where vulkan:0 (Mesa's lavapipe in CI) is absent.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/cli/matmul_chain_dir.h"
#include "tests/support/shell.h"
#include "tools/npy.h"

namespace fs = std::filesystem;

namespace {

using Result = kiln::testing::CommandResult;

Result sh(const std::string& cmd) { return kiln::testing::run_shell(cmd + " 2>&1"); }

class GpuPersistentRun : public kiln::testing::MatmulChainDir {
 protected:
  void SetUp() override {
    Result devices = sh(std::string(KILN_BINARY) + " devices");
    if (devices.out.find("vulkan:0  present") == std::string::npos)
      GTEST_SKIP() << "no vulkan:0: " << devices.out;
    make_dir("kiln_gpu_prun_");
  }
  Result run(const std::string& out) {
    return sh("KILN_COMPILATION_CACHE=file=" + cache() + " " + KILN_BINARY + " run " + graph_ +
              " --device vulkan:0 --random-inputs --stats --out " + (dir_ / out).string());
  }
  std::string cache() const { return (dir_ / "cache.sqlite").string(); }
  std::vector<std::byte> output(const std::string& out) const {
    auto y = kiln::tools::read_npy((dir_ / out / "y.npy").string());
    EXPECT_TRUE(y.has_value()) << out;
    return y ? y->bytes : std::vector<std::byte>{};
  }
  // Runs `sql` on the cache file, as a disk fault or a foreign writer would change it.
  void damage(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(cache().c_str(), &db), SQLITE_OK);
    char* error = nullptr;
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
        << (error ? error : "");
    EXPECT_GT(sqlite3_changes(db), 0) << sql;
    sqlite3_free(error);
    sqlite3_close(db);
  }
  // The "N launched" of a run's `kernels:` line.
  static std::string launched(const std::string& out) {
    size_t at = out.find("kernels: ");
    return at == std::string::npos ? "" : out.substr(at + 9, out.find(' ', at + 9) - at - 9);
  }
};

TEST_F(GpuPersistentRun, SecondProcessLoadsThePlanFromDisk) {
  Result cold = run("a");
  ASSERT_EQ(cold.code, 0) << cold.out;
  EXPECT_NE(cold.out.find("cache: plan built, 0 kernel hits, "), std::string::npos) << cold.out;
  EXPECT_EQ(cold.out.find(" 0 compiled"), std::string::npos) << cold.out;
  Result warm = run("b");
  ASSERT_EQ(warm.code, 0) << warm.out;
  EXPECT_NE(warm.out.find("kernels: " + launched(cold.out) + " launched, 0 compiled"),
            std::string::npos)
      << warm.out;
  EXPECT_NE(warm.out.find("cache: plan from disk, "), std::string::npos) << warm.out;
  EXPECT_NE(warm.out.find(" kernel hits, 0 misses"), std::string::npos) << warm.out;
  EXPECT_EQ(output("a"), output("b"));  // byte for byte
  // The plan is listed among what a run reads, and present.
  Result check = sh(std::string(KILN_BINARY) + " warm --check --target vulkan " + graph_ +
                    " --cache file=" + cache());
  EXPECT_EQ(check.code, 0) << check.out;
  EXPECT_NE(check.out.find("1 graphs checked, 0 missing"), std::string::npos) << check.out;
}

TEST_F(GpuPersistentRun, DamagedPlanRecordIsRebuilt) {
  Result cold = run("a");
  ASSERT_EQ(cold.code, 0) << cold.out;
  damage("UPDATE plans SET value = randomblob(length(value))");
  Result rebuilt = run("b");
  ASSERT_EQ(rebuilt.code, 0) << rebuilt.out;
  // The kernels are still in the cache: a rebuilt plan loads them.
  EXPECT_NE(rebuilt.out.find("cache: plan built, "), std::string::npos) << rebuilt.out;
  EXPECT_NE(rebuilt.out.find(" kernel hits, 0 misses"), std::string::npos) << rebuilt.out;
  EXPECT_NE(rebuilt.out.find(" launched, 0 compiled"), std::string::npos) << rebuilt.out;
  EXPECT_EQ(output("a"), output("b"));
  // The rebuilt record replaced the damaged one.
  Result warm = run("c");
  ASSERT_EQ(warm.code, 0) << warm.out;
  EXPECT_NE(warm.out.find("cache: plan from disk, "), std::string::npos) << warm.out;
  EXPECT_EQ(output("a"), output("c"));
}

TEST_F(GpuPersistentRun, DamagedKernelEntriesAreRecompiled) {
  Result cold = run("a");
  ASSERT_EQ(cold.code, 0) << cold.out;
  // A binary no longer matching its checksum, and metadata of an older writer.
  damage("UPDATE kernels SET value = randomblob(length(value)) WHERE rowid = (SELECT MIN(rowid) FROM kernels)");
  damage("UPDATE kernels SET metadata = '{\"entry\":\"main\"}' WHERE rowid = (SELECT MAX(rowid) FROM kernels)");
  Result rebuilt = run("b");
  ASSERT_EQ(rebuilt.code, 0) << rebuilt.out;
  EXPECT_NE(rebuilt.out.find("cache: plan built, "), std::string::npos) << rebuilt.out;
  EXPECT_NE(rebuilt.out.find(" 2 misses"), std::string::npos) << rebuilt.out;
  EXPECT_EQ(output("a"), output("b"));
  Result warm = run("c");
  ASSERT_EQ(warm.code, 0) << warm.out;
  EXPECT_NE(warm.out.find("cache: plan from disk, "), std::string::npos) << warm.out;
  EXPECT_NE(warm.out.find(" launched, 0 compiled"), std::string::npos) << warm.out;
  EXPECT_EQ(output("a"), output("c"));
}

// `kiln warm --target vulkan --dim b=1..40` warms every power-of-two bucket of ?b at two sizes:
// a GPU's dynamic kernels serve one bucket each, so a new process then runs any batch size of the
// range from its bucket's symbolic plan, compiling nothing, as does 41 (in 40's bucket, 33..64);
// 65 is in a bucket the range does not meet. A bad range is one clear error.
TEST_F(GpuPersistentRun, WarmingARangeOfSizesServesEveryBatchSizeInIt) {
  const std::string kg = (dir_ / "mlp.kg").string();
  std::ofstream(kg) << "kiln.graph v1\ninput %x : f32[?b=16,48]\ninput %w : f32[48,32]\n"
                       "%h = matmul(%x, %w)\n%y = tanh(%h)\noutput %y\n";
  const std::string env =
      "KILN_AUTOTUNE_CACHE=file=" + cache() + " KILN_COMPILATION_CACHE=file=" + cache() + " ";
  Result warmed = sh(env + KILN_BINARY + " warm " + kg +
                     " --target vulkan --no-autotune --cache file=" + cache() + " --dim b=1..40");
  ASSERT_EQ(warmed.code, 0) << warmed.out;
  EXPECT_NE(warmed.out.find("1 graph warmed for vulkan"), std::string::npos) << warmed.out;
  EXPECT_NE(warmed.out.find(", 1 symbolic plan"), std::string::npos) << warmed.out;
  const auto run_at = [&](int64_t b) {
    return sh(
        env + KILN_BINARY + " run " + kg +
        " --device vulkan:0 --no-autotune --random-inputs --stats --dim b=" + std::to_string(b));
  };
  for (int64_t b : {3, 11, 29, 40, 41}) {
    Result r = run_at(b);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find(" launched, 0 compiled"), std::string::npos) << "b=" << b << ": " << r.out;
    EXPECT_NE(r.out.find("cache: plan instantiated from its symbolic plan"), std::string::npos)
        << "b=" << b << ": " << r.out;
  }
  Result past = run_at(65);
  ASSERT_EQ(past.code, 0) << past.out;
  EXPECT_EQ(past.out.find(" launched, 0 compiled"), std::string::npos) << past.out;
  Result bad = sh(std::string(KILN_BINARY) + " warm " + kg +
                  " --target vulkan --cache file=" + cache() + " --dim b=9..3");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("--dim 'b=9..3': expected NAME=N or NAME=LO..HI"), std::string::npos)
      << bad.out;
}

}  // namespace
