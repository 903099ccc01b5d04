// Seeded random kernel buffers (every dtype) and the output comparison against the default.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "autotune/kernel_buffers.h"
#include "tests/autotune/tune_test_kernels.h"

namespace kiln::autotune {
namespace {

using ir::DType;
using testing::param;

kir::Kernel all_dtypes_kernel() {
  kir::Kernel k;
  k.name = "dtypes";
  for (DType t : ir::kAllDTypes) k.params.push_back(param(t, {5, 7}, false, ""));
  k.arena = std::make_shared<kir::ExprArena>();
  return k;
}

// Whether every buffer of `a` holds the same bytes as the one of `b` at the same index.
bool same_bytes(const KernelBuffers& a, const KernelBuffers& b) {
  if (a.size() != b.size()) return false;
  for (size_t p = 0; p < a.size(); ++p)
    if (a[p].bytes != b[p].bytes) return false;
  return true;
}

// Benchmarking holds every parameter and two more copies of each output on the host; a kernel
// past what the host holds is not tuned (kiln run of a 400 GB output got std::bad_alloc from here).
TEST(KernelBuffers, BenchmarkBytesCountOutputsThriceAndBoundTheHost) {
  kir::Kernel k;
  k.name = "big";
  k.params.push_back(param(DType::f32, {1}, false, ""));
  k.params.push_back(param(DType::f64, {10}, true, ""));
  k.arena = std::make_shared<kir::ExprArena>();
  EXPECT_EQ(benchmark_bytes(k), 4 + 3 * 80);
  EXPECT_TRUE(fits_on_host(k));
  k.params[1].shape = {100000000000};
  EXPECT_FALSE(fits_on_host(k));
}

TEST(KernelBuffers, RandomContentsAreSeededAndInRange) {
  const kir::Kernel k = all_dtypes_kernel();
  const KernelBuffers a = random_buffers(k, 7), b = random_buffers(k, 7), c = random_buffers(k, 8);
  EXPECT_TRUE(same_bytes(a, b));
  EXPECT_FALSE(same_bytes(a, c));
  for (size_t p = 0; p < k.params.size(); ++p) {
    const DType t = k.params[p].dtype;
    EXPECT_EQ(a[p].dtype, t);
    EXPECT_EQ(a[p].shape, k.params[p].shape);
    ASSERT_EQ(a[p].bytes.size(), 35u * ir::dtype_size(t));
    bool varied = false;
    for (int64_t i = 0; i < 35; ++i) {
      const double v = a[p].get(i);
      varied |= v != a[p].get(0);
      const bool in_range = ir::is_float(t)       ? v >= -2 && v <= 2
                            : t == DType::boolean ? v == 0 || v == 1
                            : t == DType::u8      ? v >= 0 && v <= 16 && v == std::floor(v)
                                                  : v >= -8 && v <= 8 && v == std::floor(v);
      EXPECT_TRUE(in_range) << ir::dtype_name(t) << " " << v;
    }
    EXPECT_TRUE(varied) << ir::dtype_name(t);
  }
}

TEST(KernelBuffers, EmptyParametersStillGetAValidPointer) {
  kir::Kernel k;
  k.params.push_back(param(DType::f32, {0, 3}, false, ""));
  const KernelBuffers bufs = random_buffers(k, 1);
  EXPECT_EQ(bufs[0].numel(), 0);
  EXPECT_EQ(bufs[0].bytes.size(), 4u);
  EXPECT_NE(bufs[0].data(), nullptr);
}

// A float output and an int output, with an input in front (never compared).
kir::Kernel two_outputs() {
  kir::Kernel k;
  k.params = {param(DType::f32, {4}, false, "in"), param(DType::f32, {4}, true, "y"),
              param(DType::i32, {4}, true, "z")};
  return k;
}

KernelBuffers filled(const kir::Kernel& k, const std::vector<std::vector<double>>& values) {
  KernelBuffers out;
  for (size_t p = 0; p < k.params.size(); ++p) {
    out.push_back(ir::HostTensor::zeros(k.params[p].dtype, k.params[p].shape));
    for (int64_t i = 0; i < 4; ++i) out.back().set(i, values[p][static_cast<size_t>(i)]);
  }
  return out;
}

TEST(KernelBuffers, FloatsCompareWithinTheOutputsScale) {
  const kir::Kernel k = two_outputs();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const KernelBuffers want = filled(k, {{1, 2, 3, 4}, {100, 0.5, nan, -1}, {1, 2, 3, 4}});
  // Scale 100: 1e-4 x 100 = 0.01 allowed anywhere in the output; the input may differ freely.
  EXPECT_EQ(
      compare_outputs(k, want, filled(k, {{9, 9, 9, 9}, {100, 0.509, nan, -1}, {1, 2, 3, 4}})),
      std::nullopt);
  const std::optional<std::string> off =
      compare_outputs(k, want, filled(k, {{1, 2, 3, 4}, {100, 0.52, nan, -1}, {1, 2, 3, 4}}));
  ASSERT_TRUE(off.has_value());
  EXPECT_EQ(*off,
            "output %1 (y) element 1: got 0.519999981, the default candidate gave 0.5 (tolerance "
            "0.0001 of the output's scale 100)");
  EXPECT_TRUE(compare_outputs(k, want, filled(k, {{1, 2, 3, 4}, {100, 0.5, 1, -1}, {1, 2, 3, 4}})));
}

// Every float dtype is read as its own (f32 and f64 directly, f16 and bf16 through HostTensor):
// the same values compare equal, NaN with NaN, and an exponent apart is named with its value.
TEST(KernelBuffers, EveryFloatDtypeComparesItsOwnValues) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    kir::Kernel k;
    k.params = {param(t, {4}, false, "in"), param(t, {4}, true, "y")};
    const KernelBuffers want = filled(k, {{1, 2, 3, 4}, {1, -2, nan, 8}});
    EXPECT_EQ(compare_outputs(k, want, filled(k, {{5, 5, 5, 5}, {1, -2, nan, 8}})), std::nullopt)
        << ir::dtype_name(t);
    const std::optional<std::string> off =
        compare_outputs(k, want, filled(k, {{1, 2, 3, 4}, {1, -2, nan, 16}}));
    ASSERT_TRUE(off.has_value()) << ir::dtype_name(t);
    EXPECT_EQ(off->rfind("output %1 (y) element 3: got 16, the default candidate gave 8", 0), 0u)
        << *off;
  }
}

// The outputs' bytes, in buffers of their own; the inputs' tensors keep their dtype and shape and
// hold no bytes.
TEST(KernelBuffers, CopyOutputsCopiesOutputsOnly) {
  const kir::Kernel k = two_outputs();
  KernelBuffers from = filled(k, {{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}});
  const KernelBuffers copy = copy_outputs(k, from);
  ASSERT_EQ(copy.size(), 3u);
  EXPECT_TRUE(copy[0].bytes.empty());
  EXPECT_EQ(copy[0].dtype, DType::f32);
  EXPECT_EQ(copy[0].shape, (ir::Shape{4}));
  EXPECT_EQ(copy[1].bytes, from[1].bytes);
  EXPECT_EQ(copy[2].bytes, from[2].bytes);
  EXPECT_NE(copy[1].data(), from[1].data());
  from[1].set(0, 99);
  EXPECT_EQ(copy[1].get(0), 5);
  EXPECT_EQ(compare_outputs(k, copy, filled(k, {{0, 0, 0, 0}, {5, 6, 7, 8}, {9, 10, 11, 12}})),
            std::nullopt);
}

TEST(KernelBuffers, IntegersCompareExactly) {
  const kir::Kernel k = two_outputs();
  const KernelBuffers want = filled(k, {{0, 0, 0, 0}, {1, 1, 1, 1}, {1, 2, 3, 4}});
  const std::optional<std::string> off =
      compare_outputs(k, want, filled(k, {{0, 0, 0, 0}, {1, 1, 1, 1}, {1, 2, 3, 5}}));
  ASSERT_TRUE(off.has_value());
  EXPECT_EQ(*off, "output %2 (z) element 3: got 5, the default candidate gave 4");
}

}  // namespace
}  // namespace kiln::autotune
