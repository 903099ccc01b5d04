// Streaming (non-temporal) stores of the cpu backend (codegen/cpu/streaming_stores.h): which
// kernels get them, and that they write exactly what ordinary stores write, for rows that start
// anywhere within a cache line, for chunks that start anywhere, and for a misaligned buffer.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <tuple>

#include "codegen/cpu/streaming_stores.h"
#include "tests/codegen/cpu_test_support.h"

namespace kiln::codegen::testing {
namespace {

using kir::Alu;
using kir::Expr;

int count(const std::string& text, const std::string& word) {
  int n = 0;
  for (size_t p = text.find(word); p != std::string::npos; p = text.find(word, p + 1)) ++n;
  return n;
}

// y[index] = x[index] * 2 + 1 over `domain` (C order), in dtype t.
kir::Kernel twice_plus_one(DType t, std::vector<int64_t> domain) {
  auto arena = std::make_shared<kir::ExprArena>();
  const Expr* index = arena->var(0);
  for (size_t d = 1; d < domain.size(); ++d)
    index = arena->alu(Alu::Add, DType::i64,
                       {arena->alu(Alu::Mul, DType::i64, {index, arena->index(domain[d])}),
                        arena->var(static_cast<int32_t>(d))});
  const Expr* x = arena->load(0, t, index);
  const Expr* y = arena->alu(Alu::Add, t,
                             {arena->alu(Alu::Mul, t, {x, arena->constant(t, 2)}), arena->constant(t, 1)});
  return make_kernel("stream", {in_param(t, domain), out_param(t, domain)}, domain, arena,
                     {kir::Store{1, index, y}});
}

Buffer input(DType t, size_t n) {
  Buffer b(t, n);
  for (size_t i = 0; i < n; ++i) b.set(i, static_cast<double>(i % 101) - 50);
  return b;
}

void expect_twice_plus_one(const Buffer& x, const Buffer& y) {
  ASSERT_EQ(x.size(), y.size());
  size_t wrong = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (y.get(i) != to_dtype(y.dtype, x.get(i) * 2 + 1) && wrong++ < 5)
      ADD_FAILURE() << "element " << i << ": " << y.get(i) << ", expected " << x.get(i) * 2 + 1;
  EXPECT_EQ(wrong, 0u);
}

TEST(CpuStreamingStores, OnlyLargeOutputsThatTheKernelDoesNotReadStream) {
  EXPECT_EQ(codegen::cpu::streaming_buffers(twice_plus_one(DType::f32, {1 << 22})),
            (std::vector<bool>{false, true}));  // 16 MiB
  EXPECT_EQ(codegen::cpu::streaming_buffers(twice_plus_one(DType::f32, {(1 << 22) - 1})),
            (std::vector<bool>{false, false}));
  EXPECT_EQ(codegen::cpu::streaming_buffers(twice_plus_one(DType::u8, {1 << 24})),
            (std::vector<bool>{false, true}));
}

// Where the last-level cache holds the kernel's buffers several times over, its outputs stay
// there: a kernel streams only when its footprint is a quarter of the cache or more.
TEST(CpuStreamingStores, ALargeLastLevelCacheKeepsAKernelThatFitsInIt) {
  const int64_t mib = int64_t{1} << 20;
  const kir::Kernel k32 = twice_plus_one(DType::f32, {1 << 22});  // 16 MiB in, 16 MiB out
  const kir::Kernel k128 = twice_plus_one(DType::f32, {1 << 24});  // 64 MiB in, 64 MiB out
  EXPECT_EQ(codegen::cpu::streaming_buffers(k32, 32 * mib), (std::vector<bool>{false, true}));
  EXPECT_EQ(codegen::cpu::streaming_buffers(k32, 128 * mib), (std::vector<bool>{false, true}));
  EXPECT_EQ(codegen::cpu::streaming_buffers(k32, 129 * mib), (std::vector<bool>{false, false}));
  EXPECT_EQ(codegen::cpu::streaming_buffers(k32, 480 * mib), (std::vector<bool>{false, false}));
  EXPECT_EQ(codegen::cpu::streaming_buffers(k128, 480 * mib), (std::vector<bool>{false, true}));
  // Compiled for such a cache (as a "native" backend on that host would be): ordinary stores.
  auto big = CpuBackend::create(test_cpu_target(), 480 * mib);
  ASSERT_TRUE(big.has_value()) << big.error().message;
  EXPECT_EQ((*big)->llc_bytes(), 480 * mib);
  auto art = (*big)->compile(k32, {});
  ASSERT_TRUE(art.has_value()) << art.error().message;
  EXPECT_EQ(count((*art)->llvm_ir, "!nontemporal"), 0);
  auto streamed = backend().compile(k32, {});
  ASSERT_TRUE(streamed.has_value()) << streamed.error().message;
  EXPECT_GT(count((*streamed)->llvm_ir, "!nontemporal"), 0);
}

// y[i] = sum over r < 16 of x[r, i], x [16, n]: 16 times more read than written.
kir::Kernel sum_of_rows(int64_t n) {
  auto arena = std::make_shared<kir::ExprArena>();
  const Expr* index = arena->alu(
      Alu::Add, DType::i64,
      {arena->alu(Alu::Mul, DType::i64, {arena->var(1), arena->index(n)}), arena->var(0)});
  const Expr* sum =
      arena->reduce(kir::ReduceOp::Sum, DType::f32, arena->load(0, DType::f32, index), {1}, {16});
  return make_kernel("rows", {in_param(DType::f32, {16, n}), out_param(DType::f32, {n})}, {n},
                     arena, {kir::Store{1, arena->var(0), sum}});
}

// A kernel whose buffers are twice the last-level cache or more evicts its own output before
// anything reads it back: an output of 1 MiB or more streams there, below the 16 MiB of the rule
// by size alone; and such a kernel keeps its size (a dynamic one streams nothing).
TEST(CpuStreamingStores, ASmallerOutputStreamsWhereTheKernelsReadsAreTwiceTheCache) {
  const int64_t mib = int64_t{1} << 20;
  const kir::Kernel k = sum_of_rows(mib / 4);  // 16 MiB in, 1 MiB out: 17 MiB
  EXPECT_EQ(codegen::cpu::streaming_buffers(k), (std::vector<bool>{false, false}));
  EXPECT_EQ(codegen::cpu::streaming_buffers(k, 8 * mib), (std::vector<bool>{false, true}));
  EXPECT_EQ(codegen::cpu::streaming_buffers(k, 9 * mib), (std::vector<bool>{false, false}));
  // Just under 1 MiB out: too small to stream whatever the cache.
  EXPECT_EQ(codegen::cpu::streaming_buffers(sum_of_rows(mib / 4 - 1), 4 * mib),
            (std::vector<bool>{false, false}));
  const kir::KernelFacts facts = kir::analyze_kernel(k);
  EXPECT_TRUE(CpuBackend::serves_any_outer_extent(k, facts, CheckMode::none, 9 * mib));
  EXPECT_FALSE(CpuBackend::serves_any_outer_extent(k, facts, CheckMode::none, 8 * mib));
  EXPECT_TRUE(CpuBackend::serves_instance(k, kir::written_only(k), 9 * mib));
  EXPECT_FALSE(CpuBackend::serves_instance(k, kir::written_only(k), 8 * mib));

  auto small = CpuBackend::create(test_cpu_target(), 8 * mib);
  ASSERT_TRUE(small.has_value()) << small.error().message;
  auto art = (*small)->compile(k, {});
  ASSERT_TRUE(art.has_value()) << art.error().message;
  EXPECT_GT(count((*art)->llvm_ir, "!nontemporal"), 0);
  const int64_t n = mib / 4;
  const Buffer x = input(DType::f32, static_cast<size_t>(16 * n));
  std::vector<float> y(static_cast<size_t>(n), -1.0f);
  void* ptrs[] = {const_cast<uint8_t*>(x.bytes.data()), y.data()};
  (*art)->fn(ptrs, 0, 5);  // a chunk that ends mid-line, then the rest
  (*art)->fn(ptrs, 5, n);
  size_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) {
    double want = 0;
    for (int64_t r = 0; r < 16; ++r) want += x.get(static_cast<size_t>(r * n + i));
    if (y[static_cast<size_t>(i)] != static_cast<float>(want) && wrong++ < 5)
      ADD_FAILURE() << "element " << i << ": " << y[static_cast<size_t>(i)] << ", expected "
                    << want;
  }
  EXPECT_EQ(wrong, 0u);
}

// The host's last-level cache as Linux reports it: what a "native" backend compiles for, unless
// pinned; a named CPU's kernels may run anywhere, so it knows none.
TEST(CpuStreamingStores, NativeTargetsCompileForTheHostsLastLevelCache) {
  const int64_t host = CpuBackend::host_llc_bytes();
  EXPECT_GE(host, 0);
  auto native = CpuBackend::create("native");
  ASSERT_TRUE(native.has_value()) << native.error().message;
  EXPECT_EQ((*native)->llc_bytes(), host);
  auto v3 = CpuBackend::create("x86-64-v3");
  ASSERT_TRUE(v3.has_value()) << v3.error().message;
  EXPECT_EQ((*v3)->llc_bytes(), 0);
}

TEST(CpuStreamingStores, ALargeOutputIsWrittenNonTemporallyWithTheSameValues) {
  for (DType t : {DType::f32, DType::u8, DType::f64}) {
    SCOPED_TRACE(std::string(ir::dtype_name(t)));
    const int64_t n = codegen::cpu::kStreamingStoreBytes / ir::dtype_size(t) + 17;
    const kir::Kernel k = twice_plus_one(t, {n});
    std::shared_ptr<const CpuArtifact> art;
    // run_kernel also runs it in chunks of 1, 2, 3, ... points: heads of every length.
    std::vector<Buffer> out = run_kernel(k, {input(t, static_cast<size_t>(n))}, {}, &art);
    ASSERT_EQ(out.size(), 2u);
    expect_twice_plus_one(out[0], out[1]);
    ASSERT_TRUE(art);
    EXPECT_GT(count(art->llvm_ir, "!nontemporal"), 0) << art->llvm_ir;
    EXPECT_GT(count(art->llvm_ir, "llvm.x86.sse.sfence"), 0);
  }
}

TEST(CpuStreamingStores, RowsThatStartInsideACacheLineAreExact) {
  // 1031 floats a row: each row starts at a different offset within a line, so each has its
  // own scalar head before the aligned vector body.
  const std::vector<int64_t> domain{4099, 1031};
  const kir::Kernel k = twice_plus_one(DType::f32, domain);
  ASSERT_TRUE(codegen::cpu::streaming_buffers(k)[1]);
  std::shared_ptr<const CpuArtifact> art;
  std::vector<Buffer> out = run_kernel(k, {input(DType::f32, 4099 * 1031)}, {}, &art);
  ASSERT_EQ(out.size(), 2u);
  expect_twice_plus_one(out[0], out[1]);
  EXPECT_GT(count(art->llvm_ir, "!nontemporal"), 0);
}

TEST(CpuStreamingStores, AMisalignedOutputBufferIsWrittenWithOrdinaryStoresWhereItMustBe) {
  // The output starts 4 bytes past a line: no element is 64-byte aligned... until every 16th
  // one is; the stores test their address and write the same values either way.
  const int64_t n = codegen::cpu::kStreamingStoreBytes / 4 + 5;
  const kir::Kernel k = twice_plus_one(DType::f32, {n});
  auto art = backend().compile(k, {});
  ASSERT_TRUE(art.has_value()) << art.error().message;
  const Buffer x = input(DType::f32, static_cast<size_t>(n));
  std::vector<uint8_t> storage(static_cast<size_t>(n) * 4 + 128, 0xAB);
  uint8_t* line = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64);
  uint8_t* y = line + 4;
  void* ptrs[] = {const_cast<uint8_t*>(x.bytes.data()), y};
  (*art)->fn(ptrs, 0, 7);
  (*art)->fn(ptrs, 7, n);
  Buffer got(DType::f32, static_cast<size_t>(n));
  std::memcpy(got.bytes.data(), y, static_cast<size_t>(n) * 4);
  expect_twice_plus_one(x, got);
  EXPECT_EQ(line[3], 0xAB);            // nothing written before the buffer
  EXPECT_EQ(y[static_cast<size_t>(n) * 4], 0xAB);  // nor after it
}

TEST(CpuStreamingStores, SmallOutputsAndCheckedKernelsKeepOrdinaryStores) {
  const kir::Kernel small = twice_plus_one(DType::f32, {1 << 20});
  auto art = backend().compile(small, {});
  ASSERT_TRUE(art.has_value()) << art.error().message;
  EXPECT_EQ(count((*art)->llvm_ir, "!nontemporal"), 0);
  const kir::Kernel large = twice_plus_one(DType::f32, {1 << 22});
  auto checked = backend().compile(large, {}, CheckMode::validate);
  ASSERT_TRUE(checked.has_value()) << checked.error().message;
  EXPECT_EQ(count((*checked)->llvm_ir, "!nontemporal"), 0);
}

// The autotuner's other store kind (autotune/tune_space.h) overrides the rule either way, and
// writes the same values.
TEST(CpuStreamingStores, TheScheduleChoosesTheStoreKindOverTheRule) {
  const int64_t mib = int64_t{1} << 20;
  const kir::Kernel k = twice_plus_one(DType::f32, {(1 << 22) + 3});  // 16 MiB in and out
  EXPECT_EQ(codegen::cpu::streaming_buffers(k, 32 * mib, CpuStores::cached),
            (std::vector<bool>{false, false}));
  EXPECT_EQ(codegen::cpu::streaming_buffers(k, 480 * mib, CpuStores::streaming),
            (std::vector<bool>{false, true}));
  EXPECT_EQ(codegen::cpu::other_store_kind(k, 32 * mib), CpuStores::cached);
  EXPECT_EQ(codegen::cpu::other_store_kind(k, 480 * mib), std::nullopt);  // it fits the cache
  // 16 MiB in, 1 MiB out: streamed by the rule where the cache is 8 MiB, by the schedule at 16.
  const kir::Kernel rows = sum_of_rows(mib / 4);
  EXPECT_EQ(codegen::cpu::other_store_kind(rows, 8 * mib), CpuStores::cached);
  EXPECT_EQ(codegen::cpu::other_store_kind(rows, 16 * mib), CpuStores::streaming);
  EXPECT_EQ(codegen::cpu::other_store_kind(rows, 32 * mib), std::nullopt);
  EXPECT_EQ(codegen::cpu::other_store_kind(twice_plus_one(DType::f32, {(1 << 18) - 1}), 0),
            std::nullopt);  // just under 1 MiB out
  const Buffer x = input(DType::f32, (1 << 22) + 3);
  for (auto [llc, stores, streams] : {std::tuple{32 * mib, CpuStores::cached, false},
                                      std::tuple{480 * mib, CpuStores::streaming, true}}) {
    SCOPED_TRACE(static_cast<int>(stores));
    auto b = CpuBackend::create(test_cpu_target(), llc);
    ASSERT_TRUE(b.has_value()) << b.error().message;
    TuneParams p;
    p.stores = stores;
    auto art = (*b)->compile(k, p);
    ASSERT_TRUE(art.has_value()) << art.error().message;
    EXPECT_EQ(count((*art)->llvm_ir, "!nontemporal") > 0, streams);
    Buffer y(DType::f32, x.size());
    void* ptrs[] = {const_cast<uint8_t*>(x.bytes.data()), y.bytes.data()};
    (*art)->fn(ptrs, 0, 5);  // a chunk that ends mid-line, then the rest
    (*art)->fn(ptrs, 5, static_cast<int64_t>(x.size()));
    expect_twice_plus_one(x, y);
  }
}

}  // namespace
}  // namespace kiln::codegen::testing
