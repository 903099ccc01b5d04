// compilation.check_mode through the cpu device: validated and enforced runs of normal graphs
// match unchecked ones, kiln.toml's modes map onto DeviceOptions, and the check mode is part of
// both the kernel and the plan keys of the persistent cache.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "ir/builder.h"
#include "passes/lower.h"
#include "runtime/config.h"
#include "runtime/executor.h"
#include "runtime/cpu_target.h"
#include "runtime/kernel_cache.h"
#include "tests/support/must.h"

namespace kiln::runtime {
namespace {

namespace fs = std::filesystem;
using codegen::CheckMode;
using ir::DType;

using kiln::tests::must;

// relu(x @ w + b) and a row sum of x: a matmul with an epilogue, broadcasting and a reduction.
struct Graph {
  ir::Graph g;
  ir::Builder b{g};
  const ir::Node* x = g.input(DType::f32, {19, 24}, "x");
  const ir::Node* w = g.input(DType::f32, {24, 33}, "w");
  const ir::Node* bias = g.input(DType::f32, {33}, "bias");
  const ir::Node* y =
      must(b.unary(ir::Op::Relu, must(b.binary(ir::Op::Add, must(b.matmul(x, w)), bias))));
  const ir::Node* s = must(b.reduce(ir::Op::Sum, x, std::vector<int64_t>{1}, false));
  // Movement ops whose lowering guards reads with selects (pad, concat) or wraps them (roll).
  const ir::Node* cat = must(b.concat(
      {must(b.pad(x, {2, 1}, {0, 3}, 7)), must(b.flip(must(b.slice(w, 1, 3, 31, 1)), {0}))}, 0));
  const ir::Node* moved = must(b.binary(ir::Op::Add, cat, must(b.roll(cat, {5, -3}, {0, 1}))));
  const ir::Node* soft = must(b.softmax(x, 1));
  const ir::Node* am = must(b.arg_reduce(ir::Op::ArgMax, y, 1, false));
};

// Small integers: every summation order gives the same floats, so modes must agree exactly.
ir::HostTensor filled(ir::Shape shape, int salt) {
  ir::HostTensor t = ir::HostTensor::zeros(DType::f32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, static_cast<double>((i * 5 + salt) % 9) - 4);
  return t;
}

std::unique_ptr<Executor> device(CheckMode mode, const std::string& cache = "") {
  DeviceOptions o;
  o.cpu_rates = RatesSource::reference;
  o.check_mode = mode;
  o.cache_path = cache;
  auto d = open_executor("cpu", o);
  KILN_CHECK(d.has_value()) << d.error().message;
  return std::move(*d);
}

// Outputs whose values are small integers (every mode must give the same bytes), and a softmax:
// validated kernels are not vectorized, so its sum of exponentials may associate differently.
struct Outputs {
  std::vector<std::vector<std::byte>> exact;
  ir::HostTensor softmax;
};

void expect_same(const Outputs& got, const Outputs& want, const std::string& what) {
  EXPECT_EQ(got.exact, want.exact) << what;
  ASSERT_EQ(got.softmax.numel(), want.softmax.numel()) << what;
  for (int64_t i = 0; i < want.softmax.numel(); ++i)
    ASSERT_NEAR(got.softmax.get(i), want.softmax.get(i), 1e-6 * want.softmax.get(i))
        << what << " " << i;
}

Outputs run(Executor& dev, RunStats* stats = nullptr) {
  Graph gr;
  Bindings b{{gr.x, dev.pool()->from_host(filled({19, 24}, 1)).value()},
             {gr.w, dev.pool()->from_host(filled({24, 33}, 2)).value()},
             {gr.bias, dev.pool()->from_host(filled({33}, 3)).value()}};
  auto out = dev.execute(gr.g, {gr.y, gr.s, gr.moved, gr.am, gr.soft}, b, stats);
  KILN_CHECK(out.has_value()) << out.error().message;
  Outputs got;
  for (size_t i = 0; i + 1 < out->size(); ++i) got.exact.push_back((*out)[i]->to_host().bytes);
  got.softmax = out->back()->to_host();
  return got;
}

TEST(CheckModeDevice, CheckedRunsMatchUncheckedOnes) {
  auto none = device(CheckMode::none);
  const auto want = run(*none);
  bool nonzero = false;
  for (std::byte byte : want.exact[0]) nonzero |= byte != std::byte{0};
  EXPECT_TRUE(nonzero);
  for (CheckMode mode : {CheckMode::validate, CheckMode::enforce}) {
    auto dev = device(mode);
    RunStats s;
    const std::string name(codegen::check_mode_name(mode));
    expect_same(run(*dev, &s), want, name);
    EXPECT_GT(s.kernels, 0);
    expect_same(run(*dev), want, name + ", plan from memory");
  }
}

// A plan's kernel swapped for one that reads past its input (what a lowering bug would produce):
// execute fails with the first bad access, named after the plan's kernel.
TEST(CheckModeDevice, ValidateFailsTheRunWithTheFirstBadAccess) {
  auto dev = device(CheckMode::validate);
  ir::Graph g;
  ir::Builder b{g};
  const ir::Node* x = g.input(DType::f32, {100}, "x");
  const ir::Node* y = must(b.unary(ir::Op::Neg, x));
  auto plan = dev->plan_for(g, {y});
  ASSERT_TRUE(plan.has_value()) << plan.error().message;
  ASSERT_EQ((*plan)->steps.size(), 1u);
  // Planting the bad kernel in the executor's own cached plan (never done outside tests).
  PlanStep& step = std::const_pointer_cast<Plan>(*plan)->steps[0];
  kir::Kernel bad = step.kernel;
  ASSERT_EQ(bad.params.size(), 2u);
  const int in = bad.params[0].output ? 1 : 0, out = 1 - in;
  kir::ExprArena& a = *bad.arena;
  const kir::Expr* past = a.alu(kir::Alu::Add, DType::i64, {a.var(0), a.index(7)});
  bad.stores = {{out, a.var(0), a.load(in, DType::f32, past)}};
  auto art = dev->target().compile(bad, kir::analyze_kernel(bad), codegen::TuneParams{},
                                   CheckMode::validate, /*load=*/true);
  ASSERT_TRUE(art.has_value()) << art.error().message;
  step.artifact = *art;  // the plan is the device's cached one: the next run uses it

  ir::HostTensor in_values = filled({100}, 0);
  Bindings bindings{{x, dev->pool()->from_host(in_values).value()}};
  auto result = dev->execute(g, {y}, bindings, nullptr);
  ASSERT_FALSE(result.has_value());
  const std::string label = bad.params[in].label.empty() ? "" : " (" + bad.params[in].label + ")";
  EXPECT_EQ(result.error().message, "kernel " + bad.name + ": load of param %" +
                                        std::to_string(in) + label +
                                        " at index 100 is outside its 100 elements");
}

TEST(CheckModeDevice, ConfigModesMapOntoDeviceOptions) {
  Config c;
  c.compilation_cache.kind = "none";
  const std::pair<const char*, CheckMode> cases[] = {
      {"enforce", CheckMode::enforce},
      {"validate", CheckMode::validate},
#ifdef NDEBUG
      {"auto", CheckMode::none},
#else
      {"auto", CheckMode::validate},
#endif
  };
  for (const auto& [name, mode] : cases) {
    c.check_mode = name;
    auto o = device_options_from_config(c);
    ASSERT_TRUE(o.has_value()) << o.error().message;
    EXPECT_EQ(o->check_mode, mode) << name;
  }
  c.check_mode = "sometimes";
  auto bad = device_options_from_config(c);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("compilation.check_mode"), std::string::npos);
}

class CheckModeCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("kiln_check_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string cache() const { return (dir_ / "cache.sqlite").string(); }
  fs::path dir_;
};

TEST_F(CheckModeCacheTest, KernelDigestsDifferPerMode) {
  auto target = CpuTarget::create({});
  ASSERT_TRUE(target.has_value()) << target.error().message;
  auto store = cache::Store::open(cache());
  ASSERT_TRUE(store.has_value()) << store.error().message;
  auto a = std::make_shared<kir::ExprArena>();
  kir::Kernel k;
  k.name = "k0";
  k.params = {kir::Param{DType::f32, {64}, false, "x"}, kir::Param{DType::f32, {64}, true, "y"}};
  k.domain = {64};
  k.arena = a;
  k.stores = {{1, a->var(0), a->load(0, DType::f32, a->var(0))}};
  std::set<std::string> digests;
  for (CheckMode mode : {CheckMode::none, CheckMode::enforce, CheckMode::validate}) {
    KernelCache kernels(**target, store->get(), false, mode);
    auto got = kernels.get(k, kir::analyze_kernel(k), codegen::TuneParams{});
    ASSERT_TRUE(got.has_value()) << got.error().message;
    EXPECT_EQ(got->source, KernelLookup::Source::compiled) << codegen::check_mode_name(mode);
    digests.insert(got->digest);
    auto again = KernelCache(**target, store->get(), false, mode).get(k, kir::analyze_kernel(k), codegen::TuneParams{});
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->source, KernelLookup::Source::disk);
    EXPECT_EQ(again->digest, got->digest);
  }
  EXPECT_EQ(digests.size(), 3u);
}

// A matrix-vector product's kernel runs one stripe of columns per thread; the cache entry keeps
// that (a kernel loaded from it runs as compiled), and an entry that says a negative count is
// refused with what is wrong.
TEST_F(CheckModeCacheTest, AMatrixVectorKernelKeepsItsChunksPerThreadInTheCache) {
  auto target = CpuTarget::create({});
  ASSERT_TRUE(target.has_value()) << target.error().message;
  ir::Graph g;
  ir::Builder b(g);
  const ir::Node* x = g.input(DType::f32, {1, 96}, "x");
  const ir::Node* w = g.input(DType::f32, {96, 200}, "w");
  passes::FusedGroup group;
  group.nodes = {must(b.matmul(x, w))};
  group.outputs = group.nodes;
  group.inputs = {x, w};
  auto lowered = passes::lower_group(group, "gemv");
  ASSERT_TRUE(lowered.has_value()) << lowered.error().message;
  const kir::Kernel& k = lowered->kernel;
  auto art = (*target)->compile(k, kir::analyze_kernel(k), codegen::TuneParams{}, CheckMode::none, false);
  ASSERT_TRUE(art.has_value()) << art.error().message;
  std::optional<cache::Entry> entry = (*target)->to_entry(**art);
  ASSERT_TRUE(entry.has_value());
  auto stored = read_cpu_entry(*entry);
  ASSERT_TRUE(stored.has_value()) << stored.error().message;
  EXPECT_EQ(stored->chunks_per_thread, 1);
  EXPECT_EQ(stored->outer_extent, 4);  // 200 columns in blocks of 64
  auto loaded = (*target)->from_entry(*entry, true);
  ASSERT_TRUE(loaded.has_value()) << loaded.error().message;
  EXPECT_EQ(read_cpu_entry(*(*target)->to_entry(**loaded))->chunks_per_thread, 1);
  cache::Entry bad = *entry;
  const std::string field = "\"chunks_per_thread\":1";
  ASSERT_NE(bad.metadata.find(field), std::string::npos) << bad.metadata;
  bad.metadata.replace(bad.metadata.find(field), field.size(), "\"chunks_per_thread\":-2");
  auto refused = read_cpu_entry(bad);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("chunks per thread are -2"), std::string::npos)
      << refused.error().message;
}

// A one-axis kernel's range is cut at multiples of its vector iteration (chunk_align); the cache
// entry keeps that, and refuses an alignment below 1 with what is wrong.
TEST_F(CheckModeCacheTest, AOneAxisKernelKeepsItsChunkAlignmentInTheCache) {
  auto target = CpuTarget::create({});
  ASSERT_TRUE(target.has_value()) << target.error().message;
  ir::Graph g;
  ir::Builder b(g);
  const ir::Node* x = g.input(DType::f32, {1000}, "x");
  passes::FusedGroup group;
  group.nodes = {must(b.unary(ir::Op::Exp, x))};
  group.outputs = group.nodes;
  group.inputs = {x};
  auto lowered = passes::lower_group(group, "ew");
  ASSERT_TRUE(lowered.has_value()) << lowered.error().message;
  const kir::Kernel& k = lowered->kernel;
  const codegen::TuneParams params{.vector_width = 8, .unroll = 2};
  auto art = (*target)->compile(k, kir::analyze_kernel(k), params, CheckMode::none, false);
  ASSERT_TRUE(art.has_value()) << art.error().message;
  std::optional<cache::Entry> entry = (*target)->to_entry(**art);
  ASSERT_TRUE(entry.has_value());
  auto stored = read_cpu_entry(*entry);
  ASSERT_TRUE(stored.has_value()) << stored.error().message;
  EXPECT_EQ(stored->chunk_align, 16);
  auto loaded = (*target)->from_entry(*entry, true);
  ASSERT_TRUE(loaded.has_value()) << loaded.error().message;
  EXPECT_EQ(read_cpu_entry(*(*target)->to_entry(**loaded))->chunk_align, 16);
  cache::Entry bad = *entry;
  const std::string field = "\"chunk_align\":16";
  ASSERT_NE(bad.metadata.find(field), std::string::npos) << bad.metadata;
  bad.metadata.replace(bad.metadata.find(field), field.size(), "\"chunk_align\":0");
  auto refused = read_cpu_entry(bad);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("chunk alignment is 0"), std::string::npos)
      << refused.error().message;
}

TEST_F(CheckModeCacheTest, PlansOfOneModeAreNotServedToAnother) {
  Outputs want;
  {
    auto none = device(CheckMode::none, cache());
    want = run(*none);
  }
  auto validate = device(CheckMode::validate, cache());
  RunStats s;
  expect_same(run(*validate, &s), want, "validate");
  EXPECT_EQ(s.plan_source, "built");
  EXPECT_EQ(s.cache_hits, 0);
  EXPECT_GT(s.compiled, 0);
  auto validate_again = device(CheckMode::validate, cache());
  RunStats again;
  expect_same(run(*validate_again, &again), want, "validate from the cache");
  EXPECT_EQ(again.plan_source, "disk");
  EXPECT_EQ(again.compiled, 0);
}

}  // namespace
}  // namespace kiln::runtime
