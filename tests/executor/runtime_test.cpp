// The cpu runtime's own machinery: thread pool chunks, structural plan keys, buffer lifetimes.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "cache/store.h"
#include "ir/builder.h"
#include "ir/kernel_facts.h"
#include "ir/kernel_sizes.h"
#include "runtime/buffer.h"
#include "runtime/cache_keys.h"
#include "runtime/cpu_rates.h"
#include "runtime/cpu_target.h"
#include "runtime/executor.h"
#include "runtime/kernel_cache.h"
#include "runtime/measured_rates.h"
#include "runtime/structural_key.h"
#include "support/free_blocks.h"
#include "support/recently_used.h"
#include "support/thread_pool.h"
#include "tests/autotune/tune_test_kernels.h"
#include "tests/support/must.h"

namespace kiln::runtime {
namespace {

using ir::DType;
using ir::Op;

using kiln::tests::must;

TEST(ThreadPool, ChunksCoverTheRangeExactlyOnce) {
  support::ThreadPool pool(3);
  for (int64_t n : {1, 2, 3, 7, 1000, 100003}) {
    std::vector<std::atomic<int>> hits(n);
    std::atomic<int> calls{0};
    pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
      ++calls;
      for (int64_t i = b; i < e; ++i) ++hits[i];
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << "n=" << n << " i=" << i;
    EXPECT_LE(calls, 3 * support::ThreadPool::kChunksPerThread);
    EXPECT_LE(calls, n);
  }
}

// Back-to-back jobs (the workers are still polling) and jobs after a pause longer than the poll
// (they sleep and must be woken): every job runs every chunk exactly once, and a pool destroyed
// while its workers poll or sleep joins them.
TEST(ThreadPool, BackToBackAndAfterSleepJobsRunEveryChunkOnce) {
  for (int round = 0; round < 3; ++round) {
    support::ThreadPool pool(3);
    int64_t total = 0;
    for (int job = 0; job < 2000; ++job) {
      std::atomic<int64_t> sum{0};
      pool.parallel_for(300, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) sum += i;
      });
      ASSERT_EQ(sum.load(), 300 * 299 / 2) << "job " << job;
      total += sum;
      if (job % 500 == 499) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    EXPECT_EQ(total, int64_t{2000} * (300 * 299 / 2));
    if (round == 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// A kernel that asks for one chunk per thread (a matrix-vector product's column stripes) gets at
// most one per thread, still covering the range once.
TEST(ThreadPool, OneChunkPerThreadWhenAsked) {
  support::ThreadPool pool(3);
  for (int64_t n : {1, 2, 3, 64, 1000}) {
    std::vector<std::atomic<int>> hits(n);
    std::atomic<int> calls{0};
    pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
      ++calls;
      for (int64_t i = b; i < e; ++i) ++hits[i];
    }, 1);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << "n=" << n << " i=" << i;
    EXPECT_EQ(calls, std::min<int64_t>(n, 3)) << "n=" << n;
  }
}

TEST(ThreadPool, MinChunkKeepsSmallRangesOnOneThread) {
  support::ThreadPool pool(4);
  std::atomic<int> calls{0};
  pool.parallel_for(100, 1000, [&](int64_t b, int64_t e) {
    ++calls;
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 100);
  });
  EXPECT_EQ(calls, 1);
}

// A job that does not wake sleepers (wake_sleepers false) runs on the caller alone once every
// worker sleeps (a pause longer than the poll), and still covers its range once; the next job
// that wakes them runs on them again.
TEST(ThreadPool, ASmallJobLeavesSleepingWorkersAsleep) {
  support::ThreadPool pool(3);
  const std::thread::id caller = std::this_thread::get_id();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // past the poll: all asleep
  std::vector<std::atomic<int>> hits(600);
  std::atomic<int> elsewhere{0};
  pool.parallel_for(600, 1, [&](int64_t b, int64_t e) {
    if (std::this_thread::get_id() != caller) ++elsewhere;
    for (int64_t i = b; i < e; ++i) ++hits[i];
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // time for a woken worker
  }, 0, /*wake_sleepers=*/false);
  for (int64_t i = 0; i < 600; ++i) ASSERT_EQ(hits[i], 1) << i;
  EXPECT_EQ(elsewhere, 0);
  // A job that wakes them is shared again: its chunks wait until another thread took one.
  std::atomic<bool> shared{false};
  pool.parallel_for(12, 1, [&](int64_t, int64_t) {
    if (std::this_thread::get_id() != caller) shared = true;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!shared && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  });
  EXPECT_TRUE(shared);
}

// The map behind the plans, graph readings and kernels kept in memory: a find counts as a use,
// a second put under a key keeps the first value, and past the limit the entry used longest ago
// leaves through `evicted` (so that its owner destroys it after its lock).
TEST(RecentlyUsed, KeepsTheEntriesUsedLastAndHandsBackTheOneThatGoes) {
  support::RecentlyUsed<int, std::string> kept(3);
  std::optional<std::string> evicted;
  EXPECT_EQ(kept.put(1, "one", evicted), "one");
  kept.put(2, "two", evicted);
  kept.put(3, "three", evicted);
  EXPECT_FALSE(evicted);
  EXPECT_EQ(kept.put(2, "second two", evicted), "two");  // the first kept, and now used last
  EXPECT_FALSE(evicted);
  ASSERT_NE(kept.find(1), nullptr);  // order of use now: 3, 2, 1
  kept.put(4, "four", evicted);
  EXPECT_EQ(evicted, "three");
  EXPECT_EQ(kept.find(3), nullptr);
  EXPECT_EQ(kept.size(), 3u);
  evicted.reset();
  kept.put(5, "five", evicted);
  EXPECT_EQ(evicted, "two");
  ASSERT_NE(kept.find(1), nullptr);
  EXPECT_EQ(*kept.find(1), "one");
  EXPECT_EQ(*kept.find(4), "four");
  EXPECT_EQ(*kept.find(5), "five");
}

// The free blocks behind every pool (cpu, CUDA, Vulkan): reuse takes the block released last of
// the smallest capacity that fits, one the pool cannot use yet is passed over, and the blocks kept
// are at most twice the most bytes live at once (at least the minimum), the ones released longest
// ago handed back to be freed.
TEST(FreeBlocks, KeepTwiceThePeakOfLiveBytesAndHandBackTheOldest) {
  support::FreeBlocks<int> blocks(/*min_bytes=*/100, /*max_bytes=*/500);
  for (int id = 0; id < 3; ++id) blocks.note_fresh(40);  // 120 live
  EXPECT_EQ(blocks.peak_live_bytes(), 120u);
  EXPECT_EQ(blocks.limit(), 240u);
  EXPECT_TRUE(blocks.release(40, 0).empty());
  EXPECT_TRUE(blocks.release(40, 1).empty());
  EXPECT_TRUE(blocks.release(40, 2).empty());
  EXPECT_EQ(blocks.cached_bytes(), 120u);
  EXPECT_EQ(blocks.live_bytes(), 0u);
  auto newest = blocks.take(40, 40);
  ASSERT_TRUE(newest);
  EXPECT_EQ(newest->block, 2) << "the block released last";
  auto usable = blocks.take(30, 50, [](int id) { return id != 1; });
  ASSERT_TRUE(usable);
  EXPECT_EQ(usable->block, 0) << "block 1 passed over";
  EXPECT_FALSE(blocks.take(41, 60)) << "no block of a capacity in range";
  EXPECT_EQ(blocks.release(40, 2).size(), 0u);
  EXPECT_EQ(blocks.release(40, 0).size(), 0u);  // cached now: 1, 2, 0 (120 bytes)
  // Larger blocks, one live at a time: the oldest cached ones make room.
  blocks.note_fresh(100);  // 100 live: the peak stays 120
  auto dropped = blocks.release(100, 3);
  ASSERT_EQ(dropped.size(), 0u);  // 220 <= 240
  blocks.note_fresh(60);
  dropped = blocks.release(60, 4);  // 280 > 240: block 1, the oldest, goes
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].block, 1);
  EXPECT_EQ(blocks.cached_bytes(), 240u);
  blocks.note_fresh(600);  // more than the most ever kept (500)
  EXPECT_EQ(blocks.limit(), 500u);
  dropped = blocks.release(600, 5);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].block, 5) << "freed at once";
  auto all = blocks.take_all();
  ASSERT_EQ(all.size(), 4u);  // by capacity: 2 and 0 (40), 4 (60), 3 (100)
  EXPECT_EQ(all[0].block, 2);
  EXPECT_EQ(all[1].block, 0);
  EXPECT_EQ(all[2].block, 4);
  EXPECT_EQ(all[3].block, 3);
  EXPECT_EQ(blocks.cached_bytes(), 0u);
}

TEST(StructuralKey, IgnoresIdsSlotsAndNamesButNotStructure) {
  ir::Graph g;
  ir::Builder b(g);
  auto build = [&](const char* name, double scale) {
    const ir::Node* x = g.input(DType::f32, {4, 4}, name);
    return must(b.binary(Op::Add, must(b.binary(Op::Mul, x, must(b.scalar(scale, DType::f32)))),
                         must(b.scalar(1.0, DType::f32))));
  };
  const ir::Node* y1 = build("a", 2.0);
  const ir::Node* y2 = build("b", 2.0);  // the literals are interned: older ids than the input
  const ir::Node* y3 = build("c", 3.0);
  StructuralKey k1 = structural_key({y1}), k2 = structural_key({y2}), k3 = structural_key({y3});
  EXPECT_EQ(k1.key, k2.key);
  EXPECT_NE(k1.key, k3.key);
  ASSERT_EQ(k2.inputs.size(), 1u);
  EXPECT_EQ(k2.inputs[0]->attrs.s(ir::AttrKey::name), "b");
  // Which inputs are distinct is structure: x+x differs from x+y.
  const ir::Node* x = g.input(DType::f32, {4}, "x");
  const ir::Node* z = g.input(DType::f32, {4}, "z");
  EXPECT_NE(structural_key({must(b.binary(Op::Add, x, x))}).key,
            structural_key({must(b.binary(Op::Add, x, z))}).key);
}

// Node ids are per graph: outputs from two graphs have colliding ids, and the key must still
// see two distinct inputs (positions are keyed by node address, not id).
TEST(StructuralKey, OutputsFromTwoGraphsWithCollidingIds) {
  ir::Graph g1, g2;
  ir::Builder b1(g1), b2(g2);
  const ir::Node* x1 = g1.input(DType::f32, {4}, "x1");
  const ir::Node* x2 = g2.input(DType::f32, {4}, "x2");
  ASSERT_EQ(x1->id, x2->id);
  const ir::Node* y1 = must(b1.unary(Op::Neg, x1));
  const ir::Node* y2 = must(b2.unary(Op::Neg, x2));
  StructuralKey two = structural_key({y1, y2});
  ASSERT_EQ(two.inputs.size(), 2u);
  EXPECT_EQ(two.inputs[0], x1);
  EXPECT_EQ(two.inputs[1], x2);
  // The same structure within one graph gives the same key; one shared input does not.
  const ir::Node* z = g1.input(DType::f32, {4}, "z");
  EXPECT_EQ(two.key, structural_key({y1, must(b1.unary(Op::Neg, z))}).key);
  EXPECT_NE(two.key, structural_key({y1, y1}).key);
  // Back to one graph: the table is reused from a clean state.
  EXPECT_EQ(structural_key({y1}).inputs.size(), 1u);
}

// Subgraphs larger than the position table's first size (it grows while placing), built late in
// a graph with many earlier nodes and early in another: equal structure, equal key, on any thread.
TEST(StructuralKey, LargeSubgraphsAndFreshThreads) {
  auto chain = [](ir::Graph& g, int length) {
    ir::Builder b(g);
    const ir::Node* x = g.input(DType::f32, {8}, "x");
    const ir::Node* w = g.input(DType::f32, {8}, "w");
    const ir::Node* y = x;
    for (int i = 0; i < length; ++i) y = must(b.binary(i % 2 ? Op::Add : Op::Mul, y, w));
    return y;
  };
  ir::Graph crowded, fresh;
  for (int i = 0; i < 5000; ++i) crowded.input(DType::f32, {1}, "pad");
  const ir::Node* late = chain(crowded, 3000);
  const ir::Node* early = chain(fresh, 3000);
  StructuralKey a = structural_key({late}), b = structural_key({early});
  EXPECT_EQ(a.key, b.key);
  ASSERT_EQ(a.inputs.size(), 2u);
  EXPECT_EQ(a.inputs[0]->attrs.s(ir::AttrKey::name), "x");
  std::string on_thread;
  std::thread([&] { on_thread = structural_key({late}).key; }).join();
  EXPECT_EQ(on_thread, a.key);
  EXPECT_NE(a.key, structural_key({chain(fresh, 2999)}).key);
}

TEST(CpuPlan, IntermediatesAreReleasedAfterTheirLastReader) {
  DeviceOptions o;
  o.cpu_rates = RatesSource::reference;
  auto dev = open_executor("cpu", o);
  ASSERT_TRUE(dev.has_value()) << dev.error().message;
  ir::Graph g;
  ir::Builder b(g);
  // Three matmuls in a chain: each product is an operand of the next, so it is materialized.
  const ir::Node* x = g.input(DType::f32, {32, 32}, "x");
  const ir::Node* h1 = must(b.matmul(x, x));
  const ir::Node* h2 = must(b.matmul(h1, x));
  const ir::Node* y = must(b.matmul(h2, h1));
  auto plan = (*dev)->plan_for(g, {y});
  ASSERT_TRUE(plan.has_value()) << plan.error().message;
  const Plan& p = **plan;
  ASSERT_EQ(p.steps.size(), 3u);
  // h1 (step 0) is last read by step 2, h2 (step 1) by step 2; y is an output: kept.
  int h1_slot = p.steps[0].args.back(), h2_slot = p.steps[1].args.back();
  EXPECT_TRUE(p.steps[0].release_after.empty());
  EXPECT_TRUE(p.steps[1].release_after.empty());
  std::vector<int> released = p.steps[2].release_after;
  std::sort(released.begin(), released.end());
  EXPECT_EQ(released, (std::vector<int>{std::min(h1_slot, h2_slot), std::max(h1_slot, h2_slot)}));
  // The same structure again is a plan cache hit.
  bool hit = false;
  auto again = (*dev)->plan_for(g, {y}, &hit);
  ASSERT_TRUE(again.has_value());
  EXPECT_TRUE(hit);
  EXPECT_EQ(again->get(), plan->get());
}

TEST(CpuRates, MeasuredOnRealKernels) {
  auto backend = codegen::CpuBackend::create();
  ASSERT_TRUE(backend.has_value()) << backend.error().message;
  support::ThreadPool threads(2);
  auto r = measure_cpu_rates(**backend, threads);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_GT(r->bandwidth, 1e9);   // bytes/s: any machine that runs this suite streams > 1 GB/s
  EXPECT_LT(r->bandwidth, 1e13);
  EXPECT_GT(r->launch_overhead, 0);
  EXPECT_LT(r->launch_overhead, 1e-2);
  EXPECT_GT(r->compute_rate, 1e8);
  EXPECT_GT(r->matmul_rate, 1e8);          // flops of a 256^3 matmul
  EXPECT_EQ(r->op_seconds.size(), 13u);    // every costly op of kiln/ops.def, each timed
  EXPECT_GT(r->op_seconds.at(ir::Op::Exp), 0);
  EXPECT_LT(r->op_seconds.at(ir::Op::Exp), 1e-6);
  EXPECT_GE(r->cache_bandwidth, r->bandwidth);
  EXPECT_GT(r->serial_compute_rate, 1e8);  // the chain on one core
}

// The cpu's measured rates are kept in the persistent cache per CPU and thread count: the next
// executor plans with what is stored (a planted measurement), a damaged entry is measured again
// and replaced, and reference rates ignore the store.
TEST(CpuRates, KeptInThePersistentCacheAndPlannedWith) {
  const std::filesystem::path cache = std::filesystem::path(::testing::TempDir()) /
                                      ("kiln_rates_" + std::to_string(::getpid()) + ".sqlite");
  std::filesystem::remove(cache);
  DeviceOptions o;
  o.cache_path = cache.string();
  o.num_threads = 2;
  cache::KeyParts key;
  {
    auto dev = open_executor("cpu", o);
    ASSERT_TRUE(dev.has_value()) << dev.error().message;
    const passes::DeviceRates measured = (*dev)->cost_model().rates();
    EXPECT_GT(measured.bandwidth, 1e9);
    // The cpu measures the rates by kind too: a matmul, costly ops, the caches' bandwidth.
    EXPECT_GT(measured.matmul_rate, 1e9);
    EXPECT_GT(measured.op_seconds.at(ir::Op::Tanh), 0);
    EXPECT_GE(measured.cache_bandwidth, measured.bandwidth);
    key = rates_key((*dev)->target());
    EXPECT_NE(std::find(key.parts.begin(), key.parts.end(), std::pair<std::string, std::string>{"setup", "threads=2"}),
              key.parts.end());
  }
  auto store = cache::Store::open(o.cache_path);
  ASSERT_TRUE(store.has_value());
  ASSERT_TRUE((*store)->get(cache::Table::autotune, key).has_value());
  passes::DeviceRates planted{11e9, 3e-6, 22e9, 33e9, 55e9, {{ir::Op::Exp, 4e-9}, {ir::Op::Div, 1e-9}}, 9e9};
  ASSERT_TRUE((*store)->put(cache::Table::autotune, key, rates_entry(planted)));
  {
    auto dev = open_executor("cpu", o);
    ASSERT_TRUE(dev.has_value());
    EXPECT_EQ((*dev)->cost_model().rates().bandwidth, 11e9);
    EXPECT_EQ((*dev)->cost_model().rates().compute_rate, 22e9);
    EXPECT_EQ((*dev)->cost_model().rates().matmul_rate, 33e9);
    EXPECT_EQ((*dev)->cost_model().rates().op_seconds, planted.op_seconds);
    EXPECT_EQ((*dev)->cost_model().rates().cache_bandwidth, 55e9);
    EXPECT_EQ((*dev)->cost_model().rates().serial_compute_rate, 9e9);
  }
  ASSERT_TRUE((*store)->put(cache::Table::autotune, key, rates_entry({0, 3e-6, 22e9})));  // damaged
  {
    auto dev = open_executor("cpu", o);
    ASSERT_TRUE(dev.has_value());
    EXPECT_GT((*dev)->cost_model().rates().bandwidth, 1e9);
    EXPECT_NE((*dev)->cost_model().rates().bandwidth, 11e9);
    auto replaced = (*store)->get(cache::Table::autotune, key);
    ASSERT_TRUE(replaced.has_value());
    EXPECT_EQ(rates_from_entry(*replaced)->bandwidth, (*dev)->cost_model().rates().bandwidth);
  }
  o.cpu_rates = RatesSource::reference;
  auto reference = open_executor("cpu", o);
  ASSERT_TRUE(reference.has_value());
  EXPECT_EQ((*reference)->cost_model().rates().bandwidth, passes::DeviceRates::reference_cpu().bandwidth);
  std::filesystem::remove(cache);
}

TEST(BufferPool, ReusesReleasedBlocks) {
  auto pool = BufferPool::create();
  std::byte* first;
  {
    auto a = pool->allocate(DType::f32, {1000}).value();
    first = a->data();
  }
  EXPECT_GE(pool->cached_bytes(), 4000u);
  auto b = pool->allocate(DType::f32, {1000}).value();
  EXPECT_EQ(b->data(), first);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % 64, 0u);
  EXPECT_EQ(pool->cached_bytes(), 0u);
}

// A server whose requests keep growing reuses no block (each is larger than any released): the
// pool keeps no more free blocks than twice the most it has had live at once (at least 64 MiB), and
// returns the ones released longest ago. Before, it kept 4 GiB of them (an MLP served at 3000
// growing batch sizes reached 4.8 GB resident).
TEST(BufferPool, KeepsNoMoreFreeBlocksThanItsPeakOfLiveOnes) {
  constexpr size_t kFloor = size_t{64} << 20;
  auto pool = BufferPool::create();
  std::byte* last = nullptr;
  size_t released = 0;
  for (int64_t i = 0; i < 100; ++i) {  // 1 MiB, 1 MiB + 64 KiB, ... 7.2 MiB: 409 MiB in all
    auto b = pool->allocate(DType::f32, {(int64_t{1} << 18) + i * (int64_t{1} << 14)}).value();
    last = b->data();
    released += b->nbytes();
  }
  EXPECT_GT(released, 4 * kFloor);
  EXPECT_LE(pool->cached_bytes(), kFloor);
  EXPECT_GT(pool->cached_bytes(), kFloor / 2);
  EXPECT_LT(pool->peak_live_bytes(), size_t{8} << 20);  // one block at a time
  // The newest block is kept: a request of its size gets it back.
  auto again = pool->allocate(DType::f32, {(int64_t{1} << 18) + 99 * (int64_t{1} << 14)}).value();
  EXPECT_EQ(again->data(), last);
}

// A loop that alternates two runs, one holding 120 MiB at once and one 180 MiB, keeps both runs'
// blocks cached (above the 64 MiB floor, up to twice the peak), so every run reuses the same
// blocks: none is returned to the system and taken again.
TEST(BufferPool, KeepsWhatTwoAlternatingRunsHoldAtOnce) {
  auto pool = BufferPool::create();
  std::vector<std::byte*> first[2];
  for (int round = 0; round < 3; ++round)
    for (int run = 0; run < 2; ++run) {
      const int64_t mib = run == 0 ? 40 : 60;
      std::vector<std::shared_ptr<Buffer>> held;
      for (int i = 0; i < 3; ++i)
        held.push_back(pool->allocate(DType::f32, {(mib << 20) / 4 + i * 1024}).value());
      for (int i = 0; i < 3; ++i) {
        if (round == 0)
          first[run].push_back(held[i]->data());
        else
          EXPECT_EQ(held[i]->data(), first[run][i])
              << "round " << round << ", run " << run << ", block " << i;
      }
    }
  EXPECT_GE(pool->peak_live_bytes(), size_t{180} << 20);
  EXPECT_GE(pool->cached_bytes(), size_t{300} << 20);
}

// A program whose kernels are specialized to each size it meets compiles one per size: the kernel
// cache keeps the ones looked up last (KernelCache::kMaxKernels; 4 here), and a kernel that went
// is compiled again when met again. An artifact still held (a plan's) keeps its code and runs;
// the code of one nothing holds is removed from the JIT with its last holder.
TEST(KernelCache, KeepsTheKernelsLookedUpLastAndCodeLivesWithItsHolders) {
  auto target = CpuTarget::create({});
  ASSERT_TRUE(target.has_value()) << target.error().message;
  KernelCache kernels(**target, nullptr, false, codegen::CheckMode::none, true, /*max_kernels=*/4);
  auto a = std::make_shared<kir::ExprArena>();
  // y = x + n over n points: one kernel text per n.
  auto kernel = [&](int64_t n) {
    kir::Kernel k;
    k.name = "add" + std::to_string(n);
    k.params = {{DType::f32, {n}, false, "x"}, {DType::f32, {n}, true, "y"}};
    k.domain = {n};
    k.arena = a;
    k.stores = {{1, a->var(0),
                 a->alu(kir::Alu::Add, DType::f32,
                        {a->load(0, DType::f32, a->var(0)), a->constant(DType::f32, double(n))})}};
    return k;
  };
  auto get = [&](int64_t n) {
    const kir::Kernel k = kernel(n);
    return kernels.get(k, kir::analyze_kernel(k), codegen::TuneParams{}).value();
  };
  KernelLookup held = get(16);
  EXPECT_EQ(held.source, KernelLookup::Source::compiled);
  EXPECT_EQ(get(16).source, KernelLookup::Source::memory);
  for (int64_t n = 17; n < 22; ++n) EXPECT_EQ(get(n).source, KernelLookup::Source::compiled) << n;
  EXPECT_EQ(get(21).source, KernelLookup::Source::memory) << "the newest is kept";
  EXPECT_EQ(get(18).source, KernelLookup::Source::memory) << "among the newest 4";
  EXPECT_EQ(get(17).source, KernelLookup::Source::compiled) << "went, and is compiled again";
  EXPECT_EQ(get(16).source, KernelLookup::Source::compiled) << "went from the cache";
  // The first artifact, held all along, still runs its own code.
  auto pool = BufferPool::create();
  auto x = pool->allocate(DType::f32, {16}).value();
  auto y = pool->allocate(DType::f32, {16}).value();
  for (int i = 0; i < 16; ++i) reinterpret_cast<float*>(x->data())[i] = static_cast<float>(i);
  auto stream = (*target)->create_stream();
  ASSERT_TRUE(stream.has_value()) << stream.error().message;
  auto xm = (*target)->wrap(x), ym = (*target)->wrap(y);
  ASSERT_TRUE((*stream)->launch(*held.artifact, {xm.get(), ym.get()}, false).has_value());
  ASSERT_TRUE((*stream)->synchronize().has_value());
  for (int i = 0; i < 16; ++i) EXPECT_EQ(reinterpret_cast<float*>(y->data())[i], i + 16.0f) << i;
}

// The tuner compiles every candidate; the plan's compile of the winner then links the code the
// tuner compiled instead of compiling the kernel again, and so does the compile of a kernel
// time_ratio just timed. The winner's other candidates go with it: a second compile is fresh.
TEST(CpuTarget, ThePlansCompileTakesTheCodeItsBenchCompiled) {
  auto target = CpuTarget::create({});
  ASSERT_TRUE(target.has_value()) << target.error().message;
  CpuTarget& t = **target;
  auto a = std::make_shared<kir::ExprArena>();
  kir::Kernel k;
  k.name = "scale";
  k.params = {{DType::f32, {4096}, false, "x"}, {DType::f32, {4096}, true, "y"}};
  k.domain = {4096};
  k.arena = a;
  k.stores = {{1, a->var(0),
               a->alu(kir::Alu::Mul, DType::f32,
                      {a->load(0, DType::f32, a->var(0)), a->constant(DType::f32, 3.0)})}};
  const kir::KernelFacts facts = kir::analyze_kernel(k);
  const int64_t before = t.backend().compiles();
  auto decision = t.tune(k, autotune::Level::minimal, 0);
  ASSERT_TRUE(decision.has_value()) << decision.error().message;
  const int64_t tuned = t.backend().compiles();
  EXPECT_GT(tuned, before);
  auto won = t.compile(k, facts, decision->winner, codegen::CheckMode::none, true);
  ASSERT_TRUE(won.has_value()) << won.error().message;
  EXPECT_EQ(t.backend().compiles(), tuned) << "the winner compiled again";
  auto again = t.compile(k, facts, decision->winner, codegen::CheckMode::none, true);
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_EQ(t.backend().compiles(), tuned + 1);
  // A checked compile is other code: never the bench's.
  ASSERT_TRUE(t.tune(k, autotune::Level::minimal, 0).has_value());
  const int64_t retuned = t.backend().compiles();
  ASSERT_TRUE(
      t.compile(k, facts, decision->winner, codegen::CheckMode::validate, true).has_value());
  EXPECT_EQ(t.backend().compiles(), retuned + 1);
  // time_ratio's pair: the one the plan then compiles is not compiled again.
  auto ratio = t.time_ratio(k, k);
  ASSERT_TRUE(ratio.has_value()) << ratio.error().message;
  ASSERT_TRUE(ratio->has_value());
  const int64_t timed = t.backend().compiles();
  ASSERT_TRUE(t.compile(k, facts, {}, codegen::CheckMode::none, true).has_value());
  EXPECT_EQ(t.backend().compiles(), timed);
}

// time_ratio of a kernel with run-time sizes at one instance, then at others of the same text:
// the second timing takes the code the first compiled (CpuTarget keeps it by text), and runs it
// over its own instance's rows. It ran the first instance's 6 rows: at 40 rows, rows 6 to 39 were
// never written ("does not compute what 'rows' does: element 6: ..."), and at 2 rows it wrote
// past the buffers of 2.
TEST(CpuTarget, ATimingOfAnotherInstanceRunsItsOwnRows) {
  auto target = CpuTarget::create({});
  ASSERT_TRUE(target.has_value()) << target.error().message;
  CpuTarget& t = **target;
  using autotune::testing::row_reduce_kernel;
  const std::optional<kir::Kernel> general =
      kir::generalize(row_reduce_kernel(6, 20), row_reduce_kernel(4, 10));
  ASSERT_TRUE(general.has_value());
  ASSERT_EQ(general->domain_slot(0), 0) << kir::print_kernel(*general);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{6, 20}, {40, 50}, {2, 30}, {40, 50}}) {
    const kir::Kernel special = row_reduce_kernel(rows, cols);
    const std::optional<kir::Kernel> instance = kir::match_sizes(*general, special);
    ASSERT_TRUE(instance.has_value()) << rows << "x" << cols;
    auto ratio = t.time_ratio(*instance, special);
    ASSERT_TRUE(ratio.has_value()) << rows << "x" << cols << ": " << ratio.error().message;
    EXPECT_TRUE(ratio->has_value());
  }
}

// A kernel whose buffers the last-level cache holds runs from it while its candidates are timed
// back to back: it is tuned with no early stop at the memory-bound roofline (a DRAM bound, which
// every candidate beat, had kept the first round's leader), where the target knows its cache.
TEST(CpuAutotune, AKernelTheCacheHoldsIsTunedWithoutAMemoryBound) {
  const std::filesystem::path cache = std::filesystem::path(::testing::TempDir()) /
                                      ("kiln_tune_llc_" + std::to_string(::getpid()) + ".sqlite");
  std::filesystem::remove(cache);
  DeviceOptions o;
  o.cache_path = cache.string();
  o.autotune = true;
  o.autotune_level = autotune::Level::minimal;
  auto dev = open_executor("cpu", o);
  ASSERT_TRUE(dev.has_value()) << dev.error().message;
  ir::Graph g;
  ir::Builder b(g);
  const int64_t n = int64_t{1} << 18;  // 1 MiB in, 1 MiB out
  const ir::Node* x = g.input(DType::f32, {n}, "x");
  const ir::Node* y = must(b.binary(Op::Mul, must(b.unary(Op::Exp, x)), x));
  ir::HostTensor ones = ir::HostTensor::zeros(DType::f32, {n});
  for (int64_t i = 0; i < n; ++i) ones.set(i, 1.0);
  Bindings in{{x, (*dev)->pool()->from_host(ones).value()}};
  ASSERT_TRUE((*dev)->execute(g, {y}, in, nullptr).has_value());
  auto store = cache::Store::open(o.cache_path);
  ASSERT_TRUE(store.has_value());
  int decisions = 0;
  for (const cache::Entry& listed : (*store)->list(cache::Table::autotune)) {
    if (listed.metadata.find("winner") == std::string::npos) continue;  // the rates
    auto e = (*store)->show(listed.key);
    ASSERT_TRUE(e.has_value());
    const auto decision = nlohmann::json::parse(std::string(e->value.begin(), e->value.end()));
    const double roofline = decision.at("roofline_ms").get<double>();
    if ((*dev)->target().cache_resident_bytes() > 2 * n * 4)
      EXPECT_EQ(roofline, 0.0) << e->source;
    else
      EXPECT_GT(roofline, 0.0) << e->source;
    ++decisions;
  }
  EXPECT_EQ(decisions, 1);
  dev->reset();
  std::filesystem::remove(cache);
}

// Of several free blocks of one size, the one released last comes back first: a loop that drops
// its result before the next realize writes into the memory it just wrote (still in cache), not
// into each cached block in turn.
TEST(BufferPool, ReusesTheBlockReleasedLast) {
  auto pool = BufferPool::create();
  auto a = pool->allocate(DType::f32, {1 << 20}).value();
  auto b = pool->allocate(DType::f32, {1 << 20}).value();
  auto c = pool->allocate(DType::f32, {1 << 20}).value();
  std::byte* const second = b->data();
  std::byte* const third = c->data();
  a.reset();
  b.reset();
  for (int i = 0; i < 3; ++i) {
    auto again = pool->allocate(DType::f32, {1 << 20}).value();
    EXPECT_EQ(again->data(), second) << i;
  }
  c.reset();
  auto after = pool->allocate(DType::f32, {1 << 20}).value();
  EXPECT_EQ(after->data(), third);
}

}  // namespace
}  // namespace kiln::runtime
