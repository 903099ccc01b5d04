// compilation.check_mode in the cpu backend: enforce clamps out-of-range indices, validate records
// the first bad access in the error slot and suppresses it, none leaves the generated code alone;
// in-range kernels agree bit for bit in all three modes. Buffers sit between guard values so
// that any write outside them shows.
#include <gtest/gtest.h>

#include <array>
#include <regex>
#include <sstream>
#include <thread>

#include "codegen/check_mode.h"
#include "tests/codegen/check_mode_kernels.h"
#include "tests/codegen/cpu_test_support.h"

namespace kiln::codegen::testing {
namespace {

using kir::Alu;
using kir::Expr;

constexpr int64_t kGuard = 16;       // guard elements on each side of every buffer
constexpr float kGuardValue = -777;  // never produced by the kernels below

// f32 buffers with guards, run in one call over the whole outer extent (so the first bad access
// in program order is the one recorded).
struct Guarded {
  std::vector<std::vector<float>> storage;
  std::array<int64_t, kCheckSlotWords> slot{};

  explicit Guarded(const std::vector<std::vector<float>>& values) {
    for (const auto& v : values) {
      std::vector<float> s(v.size() + 2 * kGuard, kGuardValue);
      std::copy(v.begin(), v.end(), s.begin() + kGuard);
      storage.push_back(std::move(s));
    }
  }
  float at(size_t buf, int64_t i) const { return storage[buf][kGuard + i]; }
  void run(const CpuArtifact& art, CheckMode mode) {
    std::vector<void*> ptrs;
    for (auto& s : storage) ptrs.push_back(s.data() + kGuard);
    if (mode == CheckMode::validate) ptrs.push_back(slot.data());
    art.fn(ptrs.data(), 0, art.outer_extent);
  }
  void expect_guards_intact() const {
    for (size_t b = 0; b < storage.size(); ++b)
      for (int64_t g = 0; g < kGuard; ++g) {
        EXPECT_EQ(storage[b][g], kGuardValue) << "written before buffer " << b;
        EXPECT_EQ(storage[b][storage[b].size() - 1 - g], kGuardValue)
            << "written after buffer " << b;
      }
  }
};

std::shared_ptr<const CpuArtifact> compile(const kir::Kernel& k, CheckMode mode) {
  auto art = backend().compile(k, TuneParams{}, mode);
  KILN_CHECK(art.has_value()) << art.error().message;
  return *art;
}

std::vector<float> iota(int64_t n, float base) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(base + static_cast<float>(i));
  return v;
}

using kiln::testing::shifted_load;
using kiln::testing::shifted_store;

TEST(CpuCheckMode, EnforceClampsLoads) {
  for (int64_t shift : {3, -2}) {
    Guarded g({iota(8, 10), std::vector<float>(8, 0)});
    g.run(*compile(shifted_load(shift), CheckMode::enforce), CheckMode::enforce);
    for (int64_t i = 0; i < 8; ++i)
      EXPECT_EQ(g.at(1, i), 10 + std::clamp<int64_t>(i + shift, 0, 7))
          << "shift " << shift << " i " << i;
    g.expect_guards_intact();
  }
}

TEST(CpuCheckMode, EnforceClampsStores) {
  Guarded up({iota(8, 10), std::vector<float>(8, 0)});
  up.run(*compile(shifted_store(3), CheckMode::enforce), CheckMode::enforce);
  // i = 0..3 land on 3..6; i = 4..7 are clamped onto 7, the last write (x[7]) wins.
  for (int64_t j = 0; j < 8; ++j) EXPECT_EQ(up.at(1, j), j < 3 ? 0 : j < 7 ? 10 + j - 3 : 17) << j;
  up.expect_guards_intact();
  Guarded down({iota(8, 10), std::vector<float>(8, 0)});
  down.run(*compile(shifted_store(-2), CheckMode::enforce), CheckMode::enforce);
  // i = 0, 1 are clamped onto 0, then i = 2 writes x[2] there; 6 and 7 are never written.
  for (int64_t j = 0; j < 8; ++j) EXPECT_EQ(down.at(1, j), j < 6 ? 10 + j + 2 : 0) << j;
  down.expect_guards_intact();
}

TEST(CpuCheckMode, ValidateReportsTheFirstBadLoadAndReadsZero) {
  const kir::Kernel k = shifted_load(3);
  Guarded g({iota(8, 10), std::vector<float>(8, -1)});
  g.run(*compile(k, CheckMode::validate), CheckMode::validate);
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(g.at(1, i), i + 3 < 8 ? 10 + i + 3 : 0) << i;
  g.expect_guards_intact();
  EXPECT_EQ(describe_check_failure(k, g.slot.data()),
            "kernel k0: load of param %0 (x) at index 8 is outside its 8 elements");

  Guarded neg({iota(8, 10), std::vector<float>(8, -1)});
  neg.run(*compile(shifted_load(-2), CheckMode::validate), CheckMode::validate);
  EXPECT_EQ(describe_check_failure(shifted_load(-2), neg.slot.data()),
            "kernel k0: load of param %0 (x) at index -2 is outside its 8 elements");
  EXPECT_EQ(neg.at(1, 0), 0);
  EXPECT_EQ(neg.at(1, 2), 10);
}

TEST(CpuCheckMode, ValidateSkipsBadStores) {
  const kir::Kernel k = shifted_store(3);
  Guarded g({iota(8, 10), std::vector<float>(8, -1)});
  g.run(*compile(k, CheckMode::validate), CheckMode::validate);
  for (int64_t j = 0; j < 8; ++j) EXPECT_EQ(g.at(1, j), j < 3 ? -1 : 10 + j - 3) << j;
  g.expect_guards_intact();
  EXPECT_EQ(describe_check_failure(k, g.slot.data()),
            "kernel k3: store of param %1 (out) at index 8 is outside its 8 elements");
}

// Chunks of one launch run at once: exactly one of their bad accesses fills the slot, whole.
TEST(CpuCheckMode, ConcurrentChunksRecordOneWholeAccess) {
  auto a = std::make_shared<kir::ExprArena>();
  const int64_t n = 4096;
  const Expr* twice = a->alu(Alu::Mul, DType::i64, {a->var(0), a->index(2)});  // bad from n / 2
  kir::Param x = in_param(DType::f32, {n});
  x.label = "x";
  kir::Kernel k = make_kernel("k1", {x, out_param(DType::f32, {n})}, {n}, a,
                              {{1, a->var(0), a->load(0, DType::f32, twice)}});
  auto art = compile(k, CheckMode::validate);
  for (int round = 0; round < 20; ++round) {
    std::vector<float> in = iota(n, 1), out(n, -1);
    std::array<int64_t, kCheckSlotWords> slot{};
    void* ptrs[] = {in.data(), out.data(), slot.data()};
    std::vector<std::thread> threads;
    for (int64_t begin = 0; begin < n; begin += n / 8)
      threads.emplace_back([&, begin] { art->fn(ptrs, begin, begin + n / 8); });
    for (auto& t : threads) t.join();
    ASSERT_EQ(slot[kCheckFlag], 1);
    EXPECT_EQ(slot[kCheckKind], kCheckLoad);
    EXPECT_EQ(slot[kCheckBuf], 0);
    EXPECT_TRUE(slot[kCheckIndex] >= n && slot[kCheckIndex] < 2 * n && slot[kCheckIndex] % 2 == 0)
        << slot[kCheckIndex];
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], 2 * i < n ? 1 + 2 * i : 0) << i;
  }
}

TEST(CpuCheckMode, ValidateLeavesTheSlotEmptyWhenInRange) {
  const kir::Kernel k = shifted_load(0);
  Guarded g({iota(8, 10), std::vector<float>(8, -1)});
  g.run(*compile(k, CheckMode::validate), CheckMode::validate);
  EXPECT_EQ(describe_check_failure(k, g.slot.data()), std::nullopt);
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(g.at(1, i), 10 + i);
}

// The optimized IR without the symbol's name, which has a per-compilation serial.
std::string ir_of(const kir::Kernel& k, CheckMode mode, bool explicit_mode = true) {
  auto art = explicit_mode ? backend().compile(k, TuneParams{}, mode) : backend().compile(k, {});
  KILN_CHECK(art.has_value()) << art.error().message;
  return std::regex_replace((*art)->llvm_ir, std::regex((*art)->symbol), "KERNEL");
}

// Lines of `ir` with an integer compare that mentions `constant`.
int compares_with(const std::string& ir, const std::string& constant) {
  int n = 0;
  std::istringstream lines(ir);
  for (std::string line; std::getline(lines, line);)
    n += line.find(" icmp ") != std::string::npos && line.find(constant) != std::string::npos;
  return n;
}

TEST(CpuCheckMode, NoneEmitsTheUncheckedCode) {
  auto a = std::make_shared<kir::ExprArena>();
  const Expr* i = a->var(0);
  const Expr* v =
      a->alu(Alu::Mul, DType::f32, {a->load(0, DType::f32, i), a->load(1, DType::f32, i)});
  kir::Kernel k = make_kernel(
      "ew",
      {in_param(DType::f32, {4096}), in_param(DType::f32, {4096}), out_param(DType::f32, {4096})},
      {4096}, a, {{2, i, v}});
  const std::string none = ir_of(k, CheckMode::none);
  EXPECT_EQ(none, ir_of(k, CheckMode::none, /*explicit_mode=*/false));
  EXPECT_EQ(none.find("kiln.check.report"), std::string::npos) << none;
  const std::string validate = ir_of(k, CheckMode::validate);
  EXPECT_NE(validate.find("kiln.check.report"), std::string::npos) << validate;
  // The compares left in `none` are the loop's own (trip count, the vectorizer's checks): none
  // against the buffers' length.
  EXPECT_EQ(compares_with(none, "4096"), 0) << none;
  EXPECT_GT(compares_with(validate, "4096"), 0) << validate;
  EXPECT_NE(ir_of(k, CheckMode::enforce).find("4095"), std::string::npos);
}

// In-range kernels: an elementwise broadcast, a row reduction and a matmul (which the tiled
// emitter takes only unchecked); all values are small integers, so every mode must agree exactly.
std::vector<kir::Kernel> in_range_kernels() {
  std::vector<kir::Kernel> ks;
  auto a = std::make_shared<kir::ExprArena>();
  const Expr *i = a->var(0), *j = a->var(1), *r = a->var(2);
  auto idx = [&](const Expr* x, int64_t m, const Expr* y) {
    return a->alu(Alu::Add, DType::i64, {a->alu(Alu::Mul, DType::i64, {x, a->index(m)}), y});
  };
  ks.push_back(make_kernel(
      "bcast",
      {in_param(DType::f32, {6, 5}), in_param(DType::f32, {5}), out_param(DType::f32, {6, 5})},
      {6, 5}, a,
      {{2, idx(i, 5, j),
        a->alu(Alu::Add, DType::f32,
               {a->load(0, DType::f32, idx(i, 5, j)), a->load(1, DType::f32, j)})}}));
  const Expr* rowsum =
      a->reduce(kir::ReduceOp::Sum, DType::f32, a->load(0, DType::f32, idx(i, 5, r)), {2}, {5});
  ks.push_back(make_kernel("rows", {in_param(DType::f32, {6, 5}), out_param(DType::f32, {6})}, {6},
                           a, {{1, i, rowsum}}));
  const int64_t m = 13, n = 24, kk = 9;
  const Expr* prod =
      a->alu(Alu::Mul, DType::f32,
             {a->load(0, DType::f32, idx(i, kk, r)), a->load(1, DType::f32, idx(r, n, j))});
  ks.push_back(make_kernel(
      "mm",
      {in_param(DType::f32, {m, kk}), in_param(DType::f32, {kk, n}), out_param(DType::f32, {m, n})},
      {m, n}, a, {{2, idx(i, n, j), a->reduce(kir::ReduceOp::Sum, DType::f32, prod, {2}, {kk})}}));
  return ks;
}

TEST(CpuCheckMode, InRangeKernelsAgreeInEveryMode) {
  for (const kir::Kernel& k : in_range_kernels()) {
    std::vector<std::vector<float>> inputs;
    for (const kir::Param& p : k.params) {
      std::vector<float> v(static_cast<size_t>(ir::shape_numel(p.shape)), 0);
      if (!p.output)
        for (size_t e = 0; e < v.size(); ++e) v[e] = static_cast<float>((e * 7) % 11) - 5;
      inputs.push_back(v);
    }
    std::vector<std::vector<float>> results;
    for (CheckMode mode : {CheckMode::none, CheckMode::enforce, CheckMode::validate}) {
      Guarded g(inputs);
      auto art = compile(k, mode);
      // Checked kernels take the generic emitter, whose loads and stores carry the checks.
      if (mode == CheckMode::validate) {
        EXPECT_NE(art->llvm_ir.find("kiln.check.report"), std::string::npos) << k.name;
      }
      g.run(*art, mode);
      g.expect_guards_intact();
      EXPECT_EQ(g.slot[kCheckFlag], 0) << k.name;
      results.push_back(g.storage.back());
    }
    EXPECT_EQ(results[0], results[1]) << k.name << ": none vs enforce";
    EXPECT_EQ(results[0], results[2]) << k.name << ": none vs validate";
    EXPECT_NE(results[0], inputs.back()) << k.name << ": the kernel wrote nothing";
  }
}

}  // namespace
}  // namespace kiln::codegen::testing
