// memory.persistent_memory and streaming.max_streams on the cpu device and its buffer pool:
// which buffers are persistent, where freed blocks go, how many realizes run at once, and the
// kiln.toml keys that select them.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "ir/builder.h"
#include "runtime/buffer.h"
#include "runtime/config.h"
#include "runtime/executor.h"
#include "support/host_memory.h"

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

// y = x + x over f32[n], on a cpu executor opened with `o` (reference rates) whose pool holds x,
// all ones.
struct Doubling {
  Doubling(int64_t n, DeviceOptions o) {
    o.cpu_rates = RatesSource::reference;
    auto opened = open_executor("cpu", o);
    EXPECT_TRUE(opened.has_value()) << (opened ? "" : opened.error().message);
    if (!opened) return;
    dev = std::move(*opened);
    ir::Builder b(g);
    x = g.input(DType::f32, {n}, "x");
    y = *b.binary(ir::Op::Add, x, x);
    in = Bindings{{x, dev->pool()->from_host(ones(n)).value()}};
  }
  Expected<std::vector<std::shared_ptr<Buffer>>> run(RunStats* stats = nullptr) {
    return dev->execute(g, {y}, in, stats);
  }
  std::unique_ptr<Executor> dev;
  ir::Graph g;
  const ir::Node* x = nullptr;
  const ir::Node* y = nullptr;
  Bindings in;
};

TEST(PersistentMemory, CpuDeviceReturnsPersistentResultsWhenEnforced) {
  for (auto mode : {PersistentMemory::enabled, PersistentMemory::enforced}) {
    DeviceOptions o;
    o.persistent_memory = mode;
    Doubling d(64, o);
    ASSERT_TRUE(d.dev);
    auto out = d.run();
    ASSERT_TRUE(out.has_value()) << out.error().message;
    EXPECT_EQ((*out)[0]->persistent(), mode == PersistentMemory::enforced);
    EXPECT_EQ((*out)[0]->to_host().get(3), 2.0);
  }
}

// "THPeligible:" of the mapping in /proc/self/smaps that holds `p`: 1 when huge pages may back
// it, -1 when the kernel does not say.
int thp_eligible(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto addr = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find('-')) {
      inside = lo <= addr && addr < hi;
    } else if (inside && line.rfind("THPeligible:", 0) == 0) {
      return std::stoi(line.substr(12));
    }
  }
  return -1;
}

bool transparent_huge_pages_offered() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s((std::istreambuf_iterator<char>(f)), {});
  return s.find("[never]") == std::string::npos && !s.empty();
}

// Blocks of 4 MiB and more are mapped on 2 MiB boundaries with huge pages advised, reused like
// any block (a slightly smaller request takes one), and returned with the call that matches how
// they were made: freeing a mapped block with free() aborts, and under ASan is reported.
TEST(BufferPool, LargeBlocksAreMappedOnHugePageBoundaries) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  auto pool = BufferPool::create(PersistentMemory::enabled);
  std::byte* first = nullptr;
  {
    auto big = pool->allocate(DType::f32, {(int64_t{8} << 20) / 4 + 5}).value();  // 8 MiB + 20 bytes
    first = big->data();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % kHuge, 0u);
    first[0] = std::byte{1};
    first[big->nbytes() - 1] = std::byte{2};
    if (transparent_huge_pages_offered() && thp_eligible(first) >= 0) {
      EXPECT_EQ(thp_eligible(first), 1) << "no huge pages advised for an 8 MiB block";
    }
  }
  EXPECT_EQ(pool->cached_bytes(), (size_t{8} << 20) + 4096);  // whole 4 KiB pages
  {
    // Within 1/8 of its size: the same block, then back to the free list.
    auto smaller = pool->allocate(DType::f32, {(int64_t{15} << 19) / 4}).value();  // 7.5 MiB
    EXPECT_EQ(smaller->data(), first);
    EXPECT_EQ(pool->cached_bytes(), 0u);
  }
  {
    // A 4 MiB persistent copy of host data: mapped, aligned, returned to the system when freed.
    auto weights = pool->from_host(ones(int64_t{1} << 20)).value();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(weights->data()) % kHuge, 0u);
    EXPECT_EQ(weights->to_host().get((int64_t{1} << 20) - 1), 1.0);
    EXPECT_EQ(pool->persistent_bytes(), size_t{4} << 20);
  }
  EXPECT_EQ(pool->persistent_bytes(), 0u);
  // A block under 4 MiB stays an ordinary 64-byte-aligned allocation.
  auto small = pool->allocate(DType::f32, {1000}).value();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small->data()) % 64, 0u);
}  // the pool's destructor returns the cached mapped block

// support::HostBlock, the pool's kind of memory where something other than the pool needs it
// (the autotuner's timing buffers): mapped on a 2 MiB boundary with huge pages advised from
// 4 MiB, 64-byte aligned below; moved, not copied; freed the way it was made.
TEST(HostBlock, LargeBlocksAreThePoolsKindOfMemory) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  support::HostBlock big((size_t{6} << 20) + 12);
  ASSERT_NE(big.data(), nullptr);
  EXPECT_EQ(big.size(), (size_t{6} << 20) + 12);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data()) % kHuge, 0u);
  big.data()[0] = std::byte{1};
  big.data()[big.size() - 1] = std::byte{2};
  if (transparent_huge_pages_offered() && thp_eligible(big.data()) >= 0) {
    EXPECT_EQ(thp_eligible(big.data()), 1) << "no huge pages advised for a 6 MiB block";
  }
  std::byte* const at = big.data();
  support::HostBlock moved = std::move(big);
  EXPECT_EQ(moved.data(), at);
  EXPECT_EQ(big.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(big.size(), 0u);
  support::HostBlock small(1000);
  ASSERT_NE(small.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data()) % support::kHostAlign, 0u);
  small = std::move(moved);  // frees the small block, takes the mapped one
  EXPECT_EQ(small.data(), at);
  EXPECT_EQ(small.data()[small.size() - 1], std::byte{2});
}

// With kernels timed, a realize counts the page faults it took. Building the plan touched the
// pages of its 64 MiB output (Executor::prefault_slots), so its first run takes fewer faults than
// that block has pages (32 with huge pages, 16384 without); a run while that result is still held
// needs a second block, fresh from the system, and takes at least 32; a run after both are given
// back reuses one and takes fewer. (64 MiB, not less: a run's other faults, up to 9 seen under
// ASan's allocator, stay well below a block's 32 huge pages.)
TEST(BufferPool, TheFirstRunsPageFaultsAreCounted) {
  constexpr int64_t n = int64_t{16} << 20;
  DeviceOptions o;
  o.time_kernels = true;
  Doubling d(n, o);
  ASSERT_TRUE(d.dev);
  RunStats first, second, later;
  {
    auto out = d.run(&first);
    ASSERT_TRUE(out.has_value()) << out.error().message;
    EXPECT_EQ((*out)[0]->to_host().get(n - 1), 2.0);
    auto held = d.run(&second);
    ASSERT_TRUE(held.has_value()) << held.error().message;
    EXPECT_EQ((*held)[0]->to_host().get(n - 1), 2.0);
  }
  auto out = d.run(&later);
  ASSERT_TRUE(out.has_value()) << out.error().message;
  EXPECT_GE(first.page_faults, 0);
  EXPECT_LT(first.page_faults, 32) << "the first run faulted its output in";
  EXPECT_GE(second.page_faults, 32);
  EXPECT_GE(later.page_faults, 0);
  EXPECT_LT(later.page_faults, second.page_faults);
  // Untimed realizes do not count them.
  Doubling quiet(n, DeviceOptions{});
  ASSERT_TRUE(quiet.dev);
  RunStats untimed;
  ASSERT_TRUE(quiet.run(&untimed).has_value());
  EXPECT_EQ(untimed.page_faults, -1);
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
