// The cpu runtime's own machinery: thread pool chunks, structural plan keys, buffer lifetimes.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>

#include "ir/builder.h"
#include "runtime/buffer.h"
#include "runtime/cpu_device.h"
#include "runtime/structural_key.h"
#include "runtime/thread_pool.h"

namespace kiln::runtime {
namespace {

using ir::DType;
using ir::Op;

const ir::Node* must(ir::NodeResult r) {
  KILN_CHECK(r.has_value()) << r.error().message;
  return *r;
}

TEST(ThreadPool, ChunksCoverTheRangeExactlyOnce) {
  ThreadPool pool(3);
  for (int64_t n : {1, 2, 3, 7, 1000, 100003}) {
    std::vector<std::atomic<int>> hits(n);
    std::atomic<int> calls{0};
    pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
      ++calls;
      for (int64_t i = b; i < e; ++i) ++hits[i];
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << "n=" << n << " i=" << i;
    EXPECT_LE(calls, 3);
  }
}

TEST(ThreadPool, MinChunkKeepsSmallRangesOnOneThread) {
  ThreadPool pool(4);
  std::atomic<int> calls{0};
  pool.parallel_for(100, 1000, [&](int64_t b, int64_t e) {
    ++calls;
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 100);
  });
  EXPECT_EQ(calls, 1);
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

TEST(CpuPlan, IntermediatesAreReleasedAfterTheirLastReader) {
  auto dev = CpuDevice::create({});
  ASSERT_TRUE(dev.has_value()) << dev.error().message;
  ir::Graph g;
  ir::Builder b(g);
  const ir::Node* x = g.input(DType::f32, {64, 64}, "x");
  const ir::Node* m = must(b.reduce(Op::ReduceMax, x, std::vector<int64_t>{1}, true));
  const ir::Node* s = must(b.reduce(Op::Sum, must(b.binary(Op::Sub, x, m)), std::vector<int64_t>{1}, true));
  const ir::Node* y = must(b.binary(Op::Div, must(b.binary(Op::Sub, x, m)), s));
  auto plan = (*dev)->plan_for(g, {y});
  ASSERT_TRUE(plan.has_value()) << plan.error().message;
  const Plan& p = **plan;
  ASSERT_EQ(p.steps.size(), 3u);
  // m (written by step 0) is last read by step 2; s (step 1) too; y is an output: kept.
  int m_slot = p.steps[0].args.back(), s_slot = p.steps[1].args.back();
  EXPECT_TRUE(p.steps[0].release_after.empty());
  EXPECT_TRUE(p.steps[1].release_after.empty());
  EXPECT_EQ(p.steps[2].release_after, (std::vector<int>{m_slot, s_slot}));
  // The same structure again is a plan cache hit.
  bool hit = false;
  auto again = (*dev)->plan_for(g, {y}, &hit);
  ASSERT_TRUE(again.has_value());
  EXPECT_TRUE(hit);
  EXPECT_EQ(again->get(), plan->get());
}

TEST(BufferPool, ReusesReleasedBlocks) {
  auto pool = BufferPool::create();
  std::byte* first;
  {
    auto a = pool->allocate(DType::f32, {1000});
    first = a->data();
  }
  EXPECT_GE(pool->cached_bytes(), 4000u);
  auto b = pool->allocate(DType::f32, {1000});
  EXPECT_EQ(b->data(), first);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % 64, 0u);
  EXPECT_EQ(pool->cached_bytes(), 0u);
}

}  // namespace
}  // namespace kiln::runtime
