// The persistent kernel and plan cache through the cpu device: a second device (a stand-in for a
// second process: its own JIT) compiles nothing; read-only caches serve hits and write nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>

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

// A shape family's symbolic plans are stored as one template record; a record whose sizes do not
// match its plan (sealed, so the store cannot tell) is refused with a warning, the size is built
// from the stored kernels, and the family's next template replaces the record.
TEST_F(PersistentCacheTest, AnInconsistentTemplateRecordIsRefusedAndReplaced) {
  const auto run_at = [&](Executor& dev, int64_t b) {
    ir::Graph g;
    ir::Builder bld{g};
    const ir::Node* x = g.input(DType::f32, {b, 64}, "x");
    const ir::Node* y = must(bld.unary(
        ir::Op::Exp, must(bld.binary(ir::Op::Mul, x, must(bld.scalar(0.5, DType::f32))))));
    ir::HostTensor in = ir::HostTensor::zeros(DType::f32, {b, 64});
    for (int64_t i = 0; i < in.numel(); ++i) in.set(i, (i % 11) * 0.125 - 0.5);
    RunStats s;
    auto out = dev.execute(g, {y}, Bindings{{x, dev.pool()->from_host(in).value()}}, &s);
    KILN_CHECK(out.has_value()) << out.error().message;
    const ir::HostTensor got = (*out)[0]->to_host();
    for (int64_t i = 0; i < in.numel(); ++i)
      EXPECT_NEAR(got.get(i), std::exp(0.5 * in.get(i)), 1e-6 * std::exp(0.5 * in.get(i)))
          << "b=" << b;
    return s;
  };
  const auto dynamic = [&] {
    DeviceOptions o;
    o.cpu_rates = RatesSource::reference;
    o.cache_path = (dir_ / "cache.sqlite").string();
    o.shape_policy = ShapePolicy::dynamic;
    auto d = open_executor("cpu", o);
    KILN_CHECK(d.has_value()) << d.error().message;
    return std::move(*d);
  };
  {
    auto dev = dynamic();
    EXPECT_EQ(run_at(*dev, 4).plan_source, "built");
    EXPECT_EQ(run_at(*dev, 6).plan_source, "built");
  }
  const auto template_entry = [&]() -> std::optional<cache::Entry> {
    auto store = cache::Store::open((dir_ / "cache.sqlite").string());
    KILN_CHECK(store.has_value());
    for (const cache::Entry& e : (*store)->list(cache::Table::plans))
      if (!e.parts.empty() && e.parts.front().first == "family") return (*store)->show(e.key);
    return std::nullopt;
  };
  std::optional<cache::Entry> e = template_entry();
  ASSERT_TRUE(e.has_value()) << "the family's template record";
  EXPECT_EQ(run_at(*dynamic(), 9).plan_source, "symbolic") << "a new device takes it";
  {
    auto j = nlohmann::json::from_cbor(e->value);
    j["templates"][0]["sizes"].erase(0);
    e->value = nlohmann::json::to_cbor(j);
    auto store = cache::Store::open((dir_ / "cache.sqlite").string());
    ASSERT_TRUE(store.has_value());
    ASSERT_TRUE((*store)->put(cache::Table::plans, cache::KeyParts{e->parts}, *e));
  }
  {
    auto dev = dynamic();
    testing::internal::CaptureStderr();
    const RunStats s = run_at(*dev, 9);
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(s.plan_source, "built");
    EXPECT_EQ(s.compiled, 0) << "its kernel from the cache";
    EXPECT_NE(err.find("(symbolic plans) is unusable (template 0: "), std::string::npos) << err;
    EXPECT_NE(err.find("size functions for a plan of"), std::string::npos) << err;
    EXPECT_EQ(run_at(*dev, 11).plan_source, "built");  // with 9, the family's new template
  }
  EXPECT_EQ(run_at(*dynamic(), 13).plan_source, "symbolic");
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
