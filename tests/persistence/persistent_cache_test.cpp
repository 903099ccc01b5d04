// The persistent kernel and plan cache through the cpu device: a second device (a stand-in for a
// second process: its own JIT) compiles nothing; read-only caches serve hits and write nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <algorithm>
#include <fstream>
#include <mutex>

#include "cache/store.h"
#include "ir/builder.h"
#include "runtime/config.h"
#include "runtime/executor.h"
#include "runtime/logger.h"
#include "tests/support/must.h"

namespace kiln::runtime {
namespace {

namespace fs = std::filesystem;
using ir::DType;

using kiln::tests::must;

// Five matmuls in a chain (each product is the next one's operand, so five kernels, the last
// with a scale+relu epilogue); the middle ones are the same kernel: three distinct kernels.
struct ChainGraph {
  ir::Graph g;
  ir::Builder b{g};
  const ir::Node* x = g.input(DType::f32, {48, 48}, "x");
  const ir::Node* y;
  ChainGraph() {
    const ir::Node* h = x;
    for (int i = 0; i < 5; ++i) h = must(b.matmul(h, x));
    y = must(b.unary(ir::Op::Relu, must(b.binary(ir::Op::Mul, h, must(b.scalar(1e-6, DType::f32))))));
  }
};

class PersistentCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("kiln_pc_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<Executor> device(bool read_only = false) {
    DeviceOptions o;
    o.cpu_rates = RatesSource::reference;  // the fusion (and so the kernel counts) of every machine
    o.cache_path = (dir_ / "cache.sqlite").string();
    o.cache_read_only = read_only;
    o.explain_misses = true;
    auto d = open_executor("cpu", o);
    KILN_CHECK(d.has_value()) << d.error().message;
    return std::move(*d);
  }

  // Runs the chain on `dev`; returns the output and the stats.
  std::pair<ir::HostTensor, RunStats> run(Executor& dev) {
    ChainGraph c;
    ir::HostTensor in = ir::HostTensor::zeros(DType::f32, {48, 48});
    for (int64_t i = 0; i < in.numel(); ++i) in.set(i, (i % 7) * 0.25 - 0.5);
    Bindings b{{c.x, dev.pool()->from_host(in).value()}};
    RunStats s;
    auto out = dev.execute(c.g, {c.y}, b, &s);
    KILN_CHECK(out.has_value()) << out.error().message;
    return {(*out)[0]->to_host(), s};
  }
  fs::path dir_;
};

TEST_F(PersistentCacheTest, SecondDeviceCompilesNothingAndAgrees) {
  auto first = device();
  auto [a, cold] = run(*first);
  EXPECT_EQ(cold.plan_source, "built");
  EXPECT_EQ(cold.kernels, 5);
  EXPECT_EQ(cold.compiled, 3);
  EXPECT_EQ(cold.cache_misses, 3);
  auto second = device();  // its own JIT and store connection: what a new process has
  auto [b, warm] = run(*second);
  EXPECT_EQ(warm.plan_source, "disk");
  EXPECT_EQ(warm.compiled, 0);
  EXPECT_EQ(warm.kernels, 5);
  EXPECT_EQ(warm.cache_hits, 3);
  ASSERT_EQ(a.bytes, b.bytes);  // byte for byte
}

TEST_F(PersistentCacheTest, ReadOnlyServesHitsAndWritesNothing) {
  { auto warmup = device(); run(*warmup); }
  fs::path file = dir_ / "cache.sqlite";
  auto size = fs::file_size(file);
  auto mtime = fs::last_write_time(file);
  auto ro = device(/*read_only=*/true);
  auto [out, s] = run(*ro);
  EXPECT_EQ(s.plan_source, "disk");
  EXPECT_EQ(s.compiled, 0);
  EXPECT_EQ(fs::file_size(file), size);
  EXPECT_EQ(fs::last_write_time(file), mtime);
}

TEST_F(PersistentCacheTest, ReadOnlyMissingCacheCompilesAndCreatesNoFile) {
  auto ro = device(/*read_only=*/true);
  auto [out, s] = run(*ro);
  EXPECT_EQ(s.compiled, 3);
  EXPECT_FALSE(fs::exists(dir_ / "cache.sqlite"));
}

TEST_F(PersistentCacheTest, GarbageCacheFileIsReplacedAndResultsAreCorrect) {
  auto reference = device();
  auto [want, cold] = run(*reference);
  reference.reset();
  {
    std::ofstream f(dir_ / "cache.sqlite", std::ios::binary | std::ios::trunc);
    for (int i = 0; i < 5000; ++i) f << "not a database ";
  }
  fs::remove(dir_ / "cache.sqlite-wal");
  fs::remove(dir_ / "cache.sqlite-shm");
  testing::internal::CaptureStderr();
  auto dev = device();
  auto [got, s] = run(*dev);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(s.compiled, 3);
  EXPECT_EQ(got.bytes, want.bytes);
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

// A plan record damaged on disk costs a rebuild (its kernels still load from the cache), and the
// rebuilt record replaces it.
TEST_F(PersistentCacheTest, DamagedPlanRecordIsRebuiltFromTheStoredKernels) {
  auto [want, cold] = run(*device());
  EXPECT_EQ(cold.compiled, 3);
  {
    auto store = cache::Store::open((dir_ / "cache.sqlite").string());
    ASSERT_TRUE(store.has_value());
    std::vector<cache::Entry> plans = (*store)->list(cache::Table::plans);
    ASSERT_EQ(plans.size(), 1u);
    std::optional<cache::Entry> e = (*store)->show(plans[0].key);
    ASSERT_TRUE(e.has_value());
    for (size_t i = 0; i < e->value.size(); i += 7) e->value[i] ^= 0x5a;
    ASSERT_TRUE((*store)->put(cache::Table::plans, cache::KeyParts{e->parts}, *e));
  }
  auto [got, rebuilt] = run(*device());
  EXPECT_EQ(rebuilt.plan_source, "built");
  EXPECT_EQ(rebuilt.compiled, 0);
  EXPECT_EQ(rebuilt.cache_hits, 3);
  EXPECT_EQ(got.bytes, want.bytes);
  auto [again, warm] = run(*device());
  EXPECT_EQ(warm.plan_source, "disk");
  EXPECT_EQ(again.bytes, want.bytes);
}

TEST_F(PersistentCacheTest, ComponentLoggersReportThroughTheLogCallback) {
  auto parsed = parse_config(
      "[compilation]\ncache = { file = \"" + (dir_ / "cache.sqlite").string() + "\" }\n"
      "[compilation.logger]\nlevel = \"full\"\ntargets = [\"log\"]\n"
      "[fusion.beam_search.logger]\nlevel = \"verbose\"\ntargets = [\"log\"]\n"
      "[cache.logger]\nlevel = \"verbose\"\ntargets = [\"log\"]\n"
      "[memory.logger]\nlevel = \"verbose\"\ntargets = [\"log\"]\n",
      "kiln.toml");
  ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
  std::vector<std::string> lines;
  std::mutex mu;
  set_log_callback([&](std::string_view component, std::string_view, std::string_view message) {
    std::lock_guard lock(mu);
    lines.push_back(std::string(component) + ": " + std::string(message));
  });
  auto options = device_options_from_config(parsed->config);
  ASSERT_TRUE(options.has_value()) << options.error().message;
  auto dev = open_executor("cpu", *options);
  ASSERT_TRUE(dev.has_value());
  run(**dev);
  set_log_callback(nullptr);
  auto has = [&](const std::string& prefix) {
    return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.starts_with(prefix); });
  };
  EXPECT_TRUE(has("fusion: 5 kernels by beam")) << ::testing::PrintToString(lines);
  EXPECT_TRUE(has("fusion: %t")) << "the reasons";
  EXPECT_TRUE(has("compilation: compiled 3 kernels"));
  EXPECT_TRUE(has("cache: 0 kernels loaded from the cache, 3 compiled for cpu"));
  EXPECT_TRUE(has("cache: miss k0: no stored entry"));
  EXPECT_TRUE(has("memory: allocated a new"));
}

}  // namespace
}  // namespace kiln::runtime
