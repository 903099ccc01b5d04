// y[i] = where(c, a, x[i]) stored where y may be written over x (buffer donation): the cpu
// backend stores only the points that change when y and x are one buffer, and every point when
// they are not. A decoder step that writes one row of a [R, 1024] cache touches that row's page
// only: the test makes every other page of the cache read-only, so a store there would fault.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "tests/codegen/cpu_test_support.h"

namespace kiln::codegen::testing {
namespace {

using kir::Alu;
using kir::Expr;

constexpr int64_t kWidth = 1024;  // a row of f32 is 4096 bytes

// cache'[r, c] = where(r == pos, row[c], cache[r, c]) (keep_first: where(r != pos, cache, row)).
kir::Kernel row_update(int64_t rows, bool keep_first) {
  auto a = std::make_shared<kir::ExprArena>();
  const DType f = DType::f32, L = DType::i64;
  const Expr* index =
      a->alu(Alu::Add, L, {a->alu(Alu::Mul, L, {a->var(0), a->index(kWidth)}), a->var(1)});
  const Expr* r = a->alu(Alu::Cast, DType::i32, {a->var(0)});
  const Expr* pos = a->load(0, DType::i32, a->index(0));
  const Expr* row = a->load(1, f, a->var(1));
  const Expr* old = a->load(2, f, index);
  const Expr* value =
      keep_first ? a->alu(Alu::Where, f, {a->alu(Alu::Ne, DType::boolean, {r, pos}), old, row})
                 : a->alu(Alu::Where, f, {a->alu(Alu::Eq, DType::boolean, {r, pos}), row, old});
  return make_kernel("row_update",
                     {in_param(DType::i32, {1}), in_param(f, {1, kWidth}),
                      in_param(f, {rows, kWidth}), out_param(f, {rows, kWidth})},
                     {rows, kWidth}, a, {kir::Store{3, index, value}});
}

float old_value(int64_t i) {
  return static_cast<float>(i % 977) * 0.25f - 7.f;
}
float new_value(int64_t c) {
  return 1000.f + static_cast<float>(c);
}

TEST(CpuInPlaceStore, AnUpdateWrittenOverItsInputStoresOnlyThePointsThatChange) {
  const int64_t rows = 64;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t row_bytes = kWidth * sizeof(float);
  if (row_bytes % page != 0) GTEST_SKIP() << "pages of " << page << " bytes";
  for (bool keep_first : {false, true}) {
    SCOPED_TRACE(keep_first ? "where(r != pos, cache, row)" : "where(r == pos, row, cache)");
    const kir::Kernel k = row_update(rows, keep_first);
    auto art = backend().compile(k, {});
    ASSERT_TRUE(art.has_value()) << art.error().message;
    EXPECT_NE((*art)->llvm_ir.find("icmp ne ptr"), std::string::npos) << (*art)->llvm_ir;
    const size_t bytes = static_cast<size_t>(rows) * row_bytes;
    void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mem, MAP_FAILED);
    auto* cache = static_cast<float*>(mem);
    for (int64_t i = 0; i < rows * kWidth; ++i) cache[i] = old_value(i);
    std::vector<float> row(kWidth);
    for (int64_t c = 0; c < kWidth; ++c) row[static_cast<size_t>(c)] = new_value(c);
    for (int32_t pos : {0, 37, 63}) {
      // Every row but pos read-only: the kernel, run on the cache as both x and y, may write
      // row pos alone.
      ASSERT_EQ(mprotect(mem, bytes, PROT_READ), 0);
      ASSERT_EQ(mprotect(cache + pos * kWidth, row_bytes, PROT_READ | PROT_WRITE), 0);
      std::vector<void*> ptrs{&pos, row.data(), cache, cache};
      (*art)->fn(ptrs.data(), 0, (*art)->outer_extent);
      ASSERT_EQ(mprotect(mem, bytes, PROT_READ | PROT_WRITE), 0);
    }
    size_t wrong = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < kWidth; ++c) {
        const int64_t i = r * kWidth + c;
        const bool written = r == 0 || r == 37 || r == 63;
        const float want = written ? new_value(c) : old_value(i);
        if (cache[i] != want && wrong++ < 5)
          ADD_FAILURE() << "[" << r << ", " << c << "]: " << cache[i] << ", expected " << want;
      }
    EXPECT_EQ(wrong, 0u);
    munmap(mem, bytes);

    // Into a buffer of its own, every point is stored (in one call and in chunks).
    Buffer pos_b(DType::i32, 1), row_b(DType::f32, static_cast<size_t>(kWidth)),
        old_b(DType::f32, static_cast<size_t>(rows * kWidth));
    pos_b.set(0, 5);
    for (int64_t c = 0; c < kWidth; ++c) row_b.set(static_cast<size_t>(c), new_value(c));
    for (int64_t i = 0; i < rows * kWidth; ++i) old_b.set(static_cast<size_t>(i), old_value(i));
    std::vector<Buffer> out = run_kernel(k, {pos_b, row_b, old_b});
    ASSERT_EQ(out.size(), 4u);
    for (int64_t i = 0; i < rows * kWidth; ++i) {
      const float want = i / kWidth == 5 ? new_value(i % kWidth) : old_value(i);
      if (out[3].get(static_cast<size_t>(i)) != want && wrong++ < 5)
        ADD_FAILURE() << "element " << i << ": " << out[3].get(static_cast<size_t>(i))
                      << ", expected " << want;
    }
    EXPECT_EQ(wrong, 0u);
  }
}

}  // namespace
}  // namespace kiln::codegen::testing
