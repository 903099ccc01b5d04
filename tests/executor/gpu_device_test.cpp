// The generic GPU device on vulkan:0 (Mesa's lavapipe here and in CI): realizes, the plan and
// kernel caches, persistent device copies of inputs (memory.persistent_memory), streams used
// from several threads at once (streaming.max_streams), bounds checks, lavapipe's loop budget,
// and device names.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include <array>

#include "codegen/check_mode.h"
#include "codegen/gpu/gpu_source.h"
#include "ir/builder.h"
#include "passes/cost_model.h"
#include "passes/fuser.h"
#include "runtime/device.h"
#include "runtime/gpu_target.h"
#include "runtime/planner.h"
#include "tests/autotune/tune_test_kernels.h"

namespace kiln::runtime {
namespace {

using ir::DType;

ir::HostTensor iota(int64_t n) {
  ir::HostTensor t = ir::HostTensor::zeros(DType::f32, {n});
  for (int64_t i = 0; i < n; ++i) t.set(i, static_cast<double>(i));
  return t;
}

std::unique_ptr<Device> open_vulkan(DeviceOptions o = {}) {
  auto dev = open_device("vulkan:0", std::move(o));
  EXPECT_TRUE(dev.has_value()) << (dev ? "" : dev.error().message);
  return dev ? std::move(*dev) : nullptr;
}

// y = x * x + 1 over n elements.
struct SquarePlusOne {
  ir::Graph g;
  ir::Builder b{g};
  const ir::Node* x;
  const ir::Node* y;
  explicit SquarePlusOne(int64_t n) {
    x = g.input(DType::f32, {n}, "x");
    y = *b.binary(ir::Op::Add, *b.binary(ir::Op::Mul, x, x), *b.scalar(1.0, DType::f32));
  }
};

TEST(GpuDevice, RunsAGraphAndReusesItsPlan) {
  auto dev = open_vulkan();
  ASSERT_TRUE(dev);
  EXPECT_EQ(dev->name(), "vulkan:0");
  SquarePlusOne c(1000);
  Bindings in{{c.x, dev->pool()->from_host(iota(1000)).value()}};
  RunStats first, second;
  auto out = dev->execute(c.g, {c.y}, in, &first);
  ASSERT_TRUE(out.has_value()) << out.error().message;
  ir::HostTensor r = (*out)[0]->to_host();
  for (int64_t i : {0, 1, 7, 999}) EXPECT_EQ(r.get(i), static_cast<double>(i * i + 1)) << i;
  EXPECT_EQ(first.kernels, 1);
  EXPECT_EQ(first.compiled, 1);
  EXPECT_EQ(first.plan_source, "built");
  ASSERT_TRUE(dev->execute(c.g, {c.y}, in, &second).has_value());
  EXPECT_EQ(second.compiled, 0);
  EXPECT_EQ(second.plan_source, "memory");
}

TEST(GpuDevice, PersistentInputsAreUploadedOnce) {
  for (auto mode : {PersistentMemory::enabled, PersistentMemory::disabled}) {
    DeviceOptions o;
    o.persistent_memory = mode;
    auto dev = open_vulkan(o);
    ASSERT_TRUE(dev);
    SquarePlusOne c(4096);
    Bindings in{{c.x, dev->pool()->from_host(iota(4096)).value()}};
    RunStats first, second;
    ASSERT_TRUE(dev->execute(c.g, {c.y}, in, &first).has_value());
    auto out = dev->execute(c.g, {c.y}, in, &second);
    ASSERT_TRUE(out.has_value());
    EXPECT_EQ(first.upload_bytes, 4096 * 4);
    EXPECT_EQ(second.upload_bytes, mode == PersistentMemory::enabled ? 0 : 4096 * 4);
    EXPECT_EQ(second.download_bytes, 4096 * 4);
    EXPECT_EQ((*out)[0]->to_host().get(4095), 4095.0 * 4095.0 + 1);
  }
}

TEST(GpuDevice, EnforcedKeepsResultsOnTheDeviceForTheNextRealize) {
  DeviceOptions o;
  o.persistent_memory = PersistentMemory::enforced;
  auto dev = open_vulkan(o);
  ASSERT_TRUE(dev);
  SquarePlusOne c(256);
  Bindings in{{c.x, dev->pool()->from_host(iota(256)).value()}};
  auto once = dev->execute(c.g, {c.y}, in, nullptr);
  ASSERT_TRUE(once.has_value());
  Bindings again{{c.x, (*once)[0]}};  // the result fed back as the input
  RunStats s;
  auto twice = dev->execute(c.g, {c.y}, again, &s);
  ASSERT_TRUE(twice.has_value());
  EXPECT_EQ(s.upload_bytes, 0);
  EXPECT_EQ((*twice)[0]->to_host().get(3), 101.0);  // (3*3+1)^2 + 1
}

TEST(GpuDevice, StreamsServeSeveralThreadsAtOnce) {
  DeviceOptions o;
  o.max_streams = 2;
  auto dev = open_vulkan(o);
  ASSERT_TRUE(dev);
  SquarePlusOne c(1 << 14);
  Bindings in{{c.x, dev->pool()->from_host(iota(1 << 14)).value()}};
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int r = 0; r < 5; ++r) {
        auto out = dev->execute(c.g, {c.y}, in, nullptr);
        if (!out || (*out)[0]->to_host().get(100) != 10001.0) ++wrong;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

// A kernel that reads past its input (what a lowering bug would produce), compiled with
// validate: the error slot names the first bad access, and the load is skipped.
TEST(GpuDevice, ValidateRecordsTheFirstOutOfRangeAccess) {
  auto backend = open_vulkan_backend(0);
  ASSERT_TRUE(backend.has_value()) << backend.error().message;
  kir::Kernel k;
  k.name = "k0";
  k.arena = std::make_shared<kir::ExprArena>();
  k.params = {{DType::f32, {100}, false, "x"}, {DType::f32, {100}, true, "y"}};
  k.domain = {100};
  kir::ExprArena& a = *k.arena;
  const kir::Expr* past = a.alu(kir::Alu::Add, DType::i64, {a.var(0), a.index(7)});
  k.stores = {{1, a.var(0), a.load(0, DType::f32, past)}};
  auto source = codegen::gpu::emit_source(k, {}, codegen::gpu::Dialect::glsl,
                                          codegen::CheckMode::validate);
  ASSERT_TRUE(source.has_value()) << source.error().message;
  auto binary = (*backend)->compile(*source, "k0");
  ASSERT_TRUE(binary.has_value()) << binary.error().message;
  auto program = (*backend)->load(*source, *binary);
  ASSERT_TRUE(program.has_value()) << program.error().message;
  auto x = (*backend)->allocate(400), y = (*backend)->allocate(400);
  auto slot = (*backend)->allocate(codegen::kCheckSlotWords * 8);
  ASSERT_TRUE(x && y && slot);
  auto stream = (*backend)->create_stream();
  ASSERT_TRUE(stream.has_value()) << stream.error().message;
  std::vector<float> host(100, 1.f);
  std::array<int64_t, codegen::kCheckSlotWords> words{};
  ASSERT_TRUE((*stream)->upload(**x, host.data(), 400).has_value());
  ASSERT_TRUE((*stream)->upload(**slot, words.data(), sizeof words).has_value());
  ASSERT_TRUE((*stream)->launch(**program, {x->get(), y->get(), slot->get()}).has_value());
  ASSERT_TRUE((*stream)->download(**slot, words.data(), sizeof words).has_value());
  ASSERT_TRUE((*stream)->synchronize().has_value());
  auto failure = codegen::describe_check_failure(k, words.data());
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(*failure, "kernel k0: load of param %0 (x) at index 100 is outside its 100 elements");
}

// Runs `y` of `g` on vulkan:0 and on the cpu (reference rates: the same kernels) with inputs
// `in`; returns both results, vulkan:0's first.
std::vector<ir::HostTensor> run_on_vulkan_and_cpu(
    ir::Graph& g, const ir::Node* y,
    const std::vector<std::pair<const ir::Node*, ir::HostTensor>>& in) {
  DeviceOptions reference;
  reference.cpu_rates = reference.gpu_rates = RatesSource::reference;
  std::vector<ir::HostTensor> results;
  for (const char* name : {"vulkan:0", "cpu"}) {
    auto dev = open_device(name, reference);
    EXPECT_TRUE(dev.has_value()) << dev.error().message;
    if (!dev) return {};
    Bindings bound;
    for (const auto& [node, tensor] : in)
      bound.emplace(node, (*dev)->pool()->from_host(tensor).value());
    auto out = (*dev)->execute(g, {y}, bound);
    EXPECT_TRUE(out.has_value()) << name << ": " << out.error().message;
    if (!out) return {};
    results.push_back((*out)[0]->to_host());
  }
  return results;
}

// Lavapipe ends an invocation's loops early past 65535 iterations in all (GpuBackend::
// loop_iteration_limit). The tiled matmul writes its loops of constant trips (the staging, the
// 16-deep slice's products, the accumulators) unrolled in GLSL, so only its loops over tiles and
// 16-deep slices of K count: over K = 14336 its default tiles of 64 run 1 + 1 + 897 passes, where
// counting those loops too refused every tile (tiles of 16: 79063). The default is kept, and the
// device's result is the cpu's.
TEST(GpuDevice, TiledMatmulsOverALongKKeepTheirDefaultTiles) {
  auto backend = open_vulkan_backend(0);
  ASSERT_TRUE(backend.has_value()) << backend.error().message;
  const std::optional<int64_t> limit = (*backend)->loop_iteration_limit();
  if (!limit) GTEST_SKIP() << "vulkan:0 has no loop budget (not lavapipe)";
  constexpr int64_t K = 14336;
  const kir::Kernel k = autotune::testing::matmul_kernel(64, 64, K);
  auto heuristic = codegen::gpu::emit_source(k, {}, codegen::gpu::Dialect::glsl);
  ASSERT_TRUE(heuristic.has_value()) << heuristic.error().message;
  EXPECT_EQ(heuristic->loop_iterations, 2 + K / 16 + 1);
  auto chosen = emit_for_device(**backend, k, {}, codegen::CheckMode::none);
  ASSERT_TRUE(chosen.has_value()) << chosen.error().message;
  auto tiles64 = codegen::gpu::emit_source(k, {.tile = 64}, codegen::gpu::Dialect::glsl);
  ASSERT_TRUE(tiles64.has_value());
  EXPECT_EQ(chosen->text, tiles64->text);
  EXPECT_EQ(chosen->text, heuristic->text);
  EXPECT_TRUE((*backend)->compile(*chosen, k.name).has_value());

  ir::Graph g;
  ir::Builder b(g);
  const ir::Node* x = g.input(DType::f32, {64, K}, "x");
  const ir::Node* w = g.input(DType::f32, {K, 64}, "w");
  const ir::Node* y = *b.matmul(x, w);
  ir::HostTensor hx = ir::HostTensor::zeros(DType::f32, {64, K}), hw = hx;
  hw.shape = {K, 64};
  for (int64_t i = 0; i < hx.numel(); ++i) {  // small integers: every sum is exact
    hx.set(i, static_cast<double>(i % 7) - 3);
    hw.set(i, static_cast<double>(i % 5) - 2);
  }
  const std::vector<ir::HostTensor> results = run_on_vulkan_and_cpu(g, y, {{x, hx}, {w, hw}});
  ASSERT_EQ(results.size(), 2u);
  int64_t nonzero = 0;
  for (int64_t i = 0; i < results[1].numel(); ++i) {
    ASSERT_EQ(results[0].get(i), results[1].get(i)) << "element " << i;
    nonzero += results[1].get(i) != 0;
  }
  EXPECT_GT(nonzero, results[1].numel() / 2);  // the sums are not all cut short to nothing
}

// A softmax over a row of 2^23: a reduction reading another cannot split its row, and one
// workgroup of 256 gives each thread three loops of 32768 (the max, the sum, the stores), over
// lavapipe's budget: the default gives way to the first schedule of the tuning space within it,
// and the device's result is the cpu's. An explicit schedule over it is refused.
TEST(GpuDevice, DefaultSchedulesOverTheLoopBudgetGiveWayToOnesWithin) {
  auto backend = open_vulkan_backend(0);
  ASSERT_TRUE(backend.has_value()) << backend.error().message;
  const std::optional<int64_t> limit = (*backend)->loop_iteration_limit();
  if (!limit) GTEST_SKIP() << "vulkan:0 has no loop budget (not lavapipe)";
  constexpr int64_t L = int64_t{1} << 23;
  ir::Graph g;
  ir::Builder b(g);
  const ir::Node* x = g.input(DType::f32, {1, L}, "x");
  const ir::Node* y = *b.softmax(x, -1);
  // The kernel vulkan:0 plans (the beam fuser at the reference rates): the softmax in one.
  const passes::CostModel model(passes::DeviceRates::reference_gpu());
  const std::unique_ptr<passes::Fuser> fuser = passes::make_beam_fuser(model);
  PlannerOptions po;
  po.fuser = fuser.get();
  auto plan = build_plan(g, {y}, {x}, po);
  ASSERT_TRUE(plan.has_value()) << plan.error().message;
  ASSERT_EQ((*plan)->steps.size(), 1u);
  const kir::Kernel& k = (*plan)->steps[0].kernel;
  auto heuristic = codegen::gpu::emit_source(k, {}, codegen::gpu::Dialect::glsl);
  ASSERT_TRUE(heuristic.has_value()) << heuristic.error().message;
  EXPECT_GT(heuristic->loop_iterations, *limit);
  auto chosen = emit_for_device(**backend, k, {}, codegen::CheckMode::none);
  ASSERT_TRUE(chosen.has_value()) << chosen.error().message;
  EXPECT_LE(chosen->loop_iterations, *limit);
  auto wider = codegen::gpu::emit_source(k, {.block_size = 512}, codegen::gpu::Dialect::glsl);
  ASSERT_TRUE(wider.has_value());
  EXPECT_EQ(chosen->text, wider->text);  // the tuning space's first: workgroups of 512
  // An explicit schedule is not replaced: the device refuses it.
  auto explicit256 = emit_for_device(**backend, k, {.block_size = 256}, codegen::CheckMode::none);
  ASSERT_TRUE(explicit256.has_value());
  EXPECT_GT(explicit256->loop_iterations, *limit);
  EXPECT_FALSE((*backend)->compile(*explicit256, k.name).has_value());

  ir::HostTensor hx = ir::HostTensor::zeros(DType::f32, {1, L});
  for (int64_t i = 0; i < L; ++i) hx.set(i, static_cast<double>(i % 7) - 3);
  const std::vector<ir::HostTensor> results = run_on_vulkan_and_cpu(g, y, {{x, hx}});
  ASSERT_EQ(results.size(), 2u);
  // exp and the order of a sum of 2^23 terms differ by a few ulps between the devices; a sum cut
  // short would be off by far more.
  for (int64_t i = 0; i < L; ++i) {
    const double want = results[1].get(i);
    ASSERT_NEAR(results[0].get(i), want, want * 1e-4) << "element " << i;
  }
}

// A sum over 2^35 elements (one value broadcast): every schedule kiln has gives a thread more
// than 65535 of them on lavapipe, so the realize fails with the reason rather than a wrong sum.
TEST(GpuDevice, KernelsWithNoScheduleWithinTheLoopBudgetAreRefused) {
  auto backend = open_vulkan_backend(0);
  ASSERT_TRUE(backend.has_value()) << backend.error().message;
  if (!(*backend)->loop_iteration_limit())
    GTEST_SKIP() << "vulkan:0 has no loop budget (not lavapipe)";
  ir::Graph g;
  ir::Builder b(g);
  const ir::Node* x = g.input(DType::f32, {1}, "x");
  const ir::Node* s = *b.reduce(ir::Op::Sum, *b.expand(x, {int64_t{1} << 35}), std::nullopt, false);
  DeviceOptions reference;
  reference.gpu_rates = RatesSource::reference;
  auto dev = open_vulkan(reference);
  ASSERT_TRUE(dev);
  auto out = dev->execute(g, {s}, {{x, dev->pool()->from_host(iota(1)).value()}});
  ASSERT_FALSE(out.has_value()) << "a sum over 2^35 elements ran: " << (*out)[0]->to_host().get(0);
  const std::string& m = out.error().message;
  for (const char* part :
       {"loop iterations per invocation", "over the 65535 that vulkan:0 (llvmpipe",
        "ends an invocation's loops early", "kernel ", "other schedules of its tuning space",
        "so this kernel does not run on vulkan:0"})
    EXPECT_NE(m.find(part), std::string::npos) << "no '" << part << "' in: " << m;

  // A cumsum along 70000 points: no schedule of a scan is within the budget, and it says so.
  ir::Graph h;
  ir::Builder hb(h);
  const ir::Node* y = h.input(DType::f32, {70000}, "y");
  const ir::Node* c = *hb.cumsum(y, 0, false, false);
  auto scanned = dev->execute(h, {c}, {{y, dev->pool()->from_host(iota(70000)).value()}});
  ASSERT_FALSE(scanned.has_value());
  const std::string& why = scanned.error().message;
  for (const char* part : {"its scan schedule", "runs up to 70003 loop iterations",
                           "none of the 2 other schedules of its tuning space",
                           "so this kernel does not run on vulkan:0"})
    EXPECT_NE(why.find(part), std::string::npos) << "no '" << part << "' in: " << why;
}

TEST(GpuDevice, BadNamesAndMissingDevicesAreErrors) {
  auto bad = open_device("vulkan:x");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message, "bad device name 'vulkan:x' (expected vulkan:N, e.g. vulkan:0)");
  auto missing = open_device("vulkan:99");
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message.find("99"), std::string::npos) << missing.error().message;
  if (!list_cuda_devices().front().present) {
    auto cuda = open_device("cuda:0");
    ASSERT_FALSE(cuda.has_value());
    EXPECT_TRUE(cuda.error().message.starts_with("cuda: ")) << cuda.error().message;
  }
}

}  // namespace
}  // namespace kiln::runtime
