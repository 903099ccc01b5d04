// memory.persistent_memory and streaming.max_streams on the cpu device and its buffer pool:
// which buffers are persistent, where freed blocks go, how many realizes run at once, and the
// kiln.toml keys that select them.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "ir/builder.h"
#include "runtime/buffer.h"
#include "runtime/config.h"
#include "runtime/executor.h"

namespace kiln::runtime {
namespace {

using ir::DType;

ir::HostTensor ones(int64_t n) {
  ir::HostTensor t = ir::HostTensor::zeros(DType::f32, {n});
  for (int64_t i = 0; i < n; ++i) t.set(i, 1.0);
  return t;
}

TEST(PersistentMemory, EnabledKeepsHostDataOutOfTheRecyclingPool) {
  auto pool = BufferPool::create(PersistentMemory::enabled);
  {
    auto weights = pool->from_host(ones(1000)).value();
    EXPECT_TRUE(weights->persistent());
    EXPECT_EQ(pool->persistent_bytes(), 4032u);  // 4000 rounded up to 64-byte alignment
    auto scratch = pool->allocate(DType::f32, {1000}).value();
    EXPECT_FALSE(scratch->persistent());
    EXPECT_FALSE(pool->allocate_result(DType::f32, {10}).value()->persistent());
  }
  // The weights went back to the system; only the intermediates stay cached for reuse.
  EXPECT_EQ(pool->persistent_bytes(), 0u);
  EXPECT_EQ(pool->cached_bytes(), 4032u + 64u);
}

TEST(PersistentMemory, DisabledRecyclesEverything) {
  auto pool = BufferPool::create(PersistentMemory::disabled);
  { EXPECT_FALSE(pool->from_host(ones(1000)).value()->persistent()); }
  EXPECT_EQ(pool->persistent_bytes(), 0u);
  EXPECT_EQ(pool->cached_bytes(), 4032u);
}

TEST(PersistentMemory, EnforcedMakesResultsPersistentToo) {
  auto pool = BufferPool::create(PersistentMemory::enforced);
  auto result = pool->allocate_result(DType::f32, {16}).value();
  EXPECT_TRUE(result->persistent());
  EXPECT_TRUE(pool->from_host(ones(4)).value()->persistent());
  EXPECT_FALSE(pool->allocate(DType::f32, {16}).value()->persistent());
}

TEST(PersistentMemory, CpuDeviceReturnsPersistentResultsWhenEnforced) {
  for (auto mode : {PersistentMemory::enabled, PersistentMemory::enforced}) {
    DeviceOptions o;
    o.cpu_rates = RatesSource::reference;
    o.persistent_memory = mode;
    auto dev = open_executor("cpu", o);
    ASSERT_TRUE(dev.has_value()) << dev.error().message;
    ir::Graph g;
    ir::Builder b(g);
    const ir::Node* x = g.input(DType::f32, {64}, "x");
    const ir::Node* y = *b.binary(ir::Op::Add, x, x);
    Bindings in{{x, (*dev)->pool()->from_host(ones(64)).value()}};
    auto out = (*dev)->execute(g, {y}, in, nullptr);
    ASSERT_TRUE(out.has_value()) << out.error().message;
    EXPECT_EQ((*out)[0]->persistent(), mode == PersistentMemory::enforced);
    EXPECT_EQ((*out)[0]->to_host().get(3), 2.0);
  }
}

// Realizes running at once never exceed max_streams: four threads realize at once, and the device's
// own high-water mark of overlapping realizes stays at the limit.
TEST(MaxStreams, CpuDeviceRunsAtMostThatManyRealizesAtOnce) {
  for (int limit : {1, 2}) {
    DeviceOptions o;
    o.cpu_rates = RatesSource::reference;
    o.max_streams = limit;
    o.num_threads = 1;
    auto dev = open_executor("cpu", o);
    ASSERT_TRUE(dev.has_value()) << dev.error().message;
    ir::Graph g;
    ir::Builder b(g);
    const ir::Node* x = g.input(DType::f32, {1 << 16}, "x");
    const ir::Node* y = *b.unary(ir::Op::Exp, *b.binary(ir::Op::Mul, x, x));
    Bindings in{{x, (*dev)->pool()->from_host(ones(1 << 16)).value()}};
    ASSERT_TRUE((*dev)->execute(g, {y}, in, nullptr).has_value());  // build the plan once
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&] {
        for (int r = 0; r < 20; ++r)
          if (!(*dev)->execute(g, {y}, in, nullptr)) ++failures;
      });
    for (auto& t : threads) t.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_LE((*dev)->peak_running_realizes(), limit);
    EXPECT_GE((*dev)->peak_running_realizes(), 1);
  }
}

TEST(DeviceOptionsFromConfig, StreamsAndPersistentMemory) {
  Config c;
  c.max_streams = 3;
  for (auto [name, mode] : {std::pair{"enabled", PersistentMemory::enabled},
                            std::pair{"disabled", PersistentMemory::disabled},
                            std::pair{"enforced", PersistentMemory::enforced}}) {
    c.persistent_memory = name;
    auto o = device_options_from_config(c);
    ASSERT_TRUE(o.has_value()) << o.error().message;
    EXPECT_EQ(o->max_streams, 3);
    EXPECT_EQ(o->persistent_memory, mode) << name;
  }
  c.persistent_memory = "sometimes";
  auto bad = device_options_from_config(c);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message,
            "memory.persistent_memory: unknown mode 'sometimes' (expected enabled, disabled or enforced)");
}

}  // namespace
}  // namespace kiln::runtime
