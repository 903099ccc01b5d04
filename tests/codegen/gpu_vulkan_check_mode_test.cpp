// compilation.check_mode on vulkan:0 (lavapipe): the kernels of check_mode_kernels.h, with planted
// out-of-range accesses, give on the GPU what they give on the cpu backend. enforce clamps every
// index; validate records the bad access in the error slot (read back after the launch and told
// by describe_check_failure, as the GPU devices report it) and suppresses it: a bad load reads 0,
// a bad store writes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <regex>

#include "codegen/check_mode.h"
#include "tests/codegen/check_mode_kernels.h"
#include "tests/codegen/gpu_vulkan_runner.h"

namespace kiln::codegen::gpu {
namespace {

using kiln::testing::shifted_load;
using kiln::testing::shifted_row_sum;
using kiln::testing::shifted_store;

struct Outcome {
  std::vector<double> out;
  std::optional<std::string> error;  // validate: what the slot recorded
  std::string strategy;              // vulkan: the source's strategy
};

// x[i] = 10 + i (small integers: every sum is exact in any order); the output starts at -1.
std::vector<ir::HostTensor> tensors_for(const kir::Kernel& k) {
  std::vector<ir::HostTensor> t;
  for (const kir::Param& p : k.params) {
    t.push_back(ir::HostTensor::zeros(p.dtype, p.shape));
    for (int64_t i = 0; i < t.back().numel(); ++i)
      t.back().set(i, p.output ? -1.0 : 10.0 + static_cast<double>(i % 64));
  }
  return t;
}

Outcome finish(const kir::Kernel& k, const std::vector<ir::HostTensor>& t, CheckMode mode,
               const std::vector<int64_t>& slot) {
  Outcome r;
  for (int64_t i = 0; i < t.back().numel(); ++i) r.out.push_back(t.back().get(i));
  if (mode == CheckMode::validate) r.error = describe_check_failure(k, slot.data());
  return r;
}

Outcome on_vulkan(const kir::Kernel& k, CheckMode mode) {
  std::vector<ir::HostTensor> t = tensors_for(k);
  std::vector<int64_t> slot(kCheckSlotWords, 0);
  Outcome r;
  run_on_vulkan(k, t, mode, {}, &slot, &r.strategy);
  Outcome done = finish(k, t, mode, slot);
  done.strategy = r.strategy;
  return done;
}

Outcome on_cpu(const kir::Kernel& k, CheckMode mode) {
  std::vector<ir::HostTensor> t = tensors_for(k);
  std::vector<int64_t> slot(kCheckSlotWords, 0);
  auto art = runner().cpu->compile(k, {}, mode);
  KILN_CHECK(art.has_value()) << art.error().message;
  std::vector<void*> ptrs;
  for (auto& x : t) ptrs.push_back(x.data());
  if (mode == CheckMode::validate) ptrs.push_back(slot.data());
  (*art)->fn(ptrs.data(), 0, (*art)->outer_extent);
  return finish(k, t, mode, slot);
}

class GpuVulkanCheckMode : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!runner().gpu) GTEST_SKIP() << "vulkan:0 is not available";
    ASSERT_TRUE(runner().cpu);
  }
};

TEST_F(GpuVulkanCheckMode, EnforceClampsLoadsAsTheCpuDoes) {
  for (int64_t shift : {3, -2}) {
    Outcome gpu = on_vulkan(shifted_load(shift), CheckMode::enforce);
    for (int64_t i = 0; i < 8; ++i)
      EXPECT_EQ(gpu.out[i], 10 + std::clamp<int64_t>(i + shift, 0, 7)) << shift << " " << i;
    EXPECT_EQ(gpu.out, on_cpu(shifted_load(shift), CheckMode::enforce).out) << shift;
  }
  Outcome rows = on_vulkan(shifted_row_sum(), CheckMode::enforce);
  EXPECT_EQ(rows.strategy, "row-reduce");
  EXPECT_EQ(rows.out, on_cpu(shifted_row_sum(), CheckMode::enforce).out);
  // Row 3 reads x[193..255], then x[255] again for the clamped x[256].
  EXPECT_EQ(rows.out[3], (11 + 73) * 63 / 2 + 73);
}

TEST_F(GpuVulkanCheckMode, ValidateReportsTheBadLoadAndReadsZero) {
  Outcome up = on_vulkan(shifted_load(1), CheckMode::validate);
  EXPECT_EQ(up.error, "kernel k0: load of param %0 (x) at index 8 is outside its 8 elements");
  EXPECT_EQ(up.out, (std::vector<double>{11, 12, 13, 14, 15, 16, 17, 0}));
  Outcome down = on_vulkan(shifted_load(-1), CheckMode::validate);
  EXPECT_EQ(down.error, "kernel k0: load of param %0 (x) at index -1 is outside its 8 elements");
  EXPECT_EQ(down.out, (std::vector<double>{0, 10, 11, 12, 13, 14, 15, 16}));
  for (int64_t shift : {1, -1}) {
    Outcome cpu = on_cpu(shifted_load(shift), CheckMode::validate);
    Outcome gpu = shift == 1 ? up : down;
    EXPECT_EQ(gpu.error, cpu.error) << shift;
    EXPECT_EQ(gpu.out, cpu.out) << shift;
  }
}

TEST_F(GpuVulkanCheckMode, ValidateSkipsTheBadStore) {
  Outcome gpu = on_vulkan(shifted_store(1), CheckMode::validate);
  EXPECT_EQ(gpu.error, "kernel k3: store of param %1 (out) at index 8 is outside its 8 elements");
  EXPECT_EQ(gpu.out, (std::vector<double>{-1, 10, 11, 12, 13, 14, 15, 16}));
  Outcome cpu = on_cpu(shifted_store(1), CheckMode::validate);
  EXPECT_EQ(gpu.error, cpu.error);
  EXPECT_EQ(gpu.out, cpu.out);
}

// Threads race for the slot: exactly one of the three bad loads fills it, whole.
TEST_F(GpuVulkanCheckMode, OneOfSeveralBadAccessesFillsTheSlot) {
  for (int round = 0; round < 5; ++round) {
    Outcome gpu = on_vulkan(shifted_load(3), CheckMode::validate);
    ASSERT_TRUE(gpu.error.has_value());
    EXPECT_TRUE(std::regex_match(
        *gpu.error,
        std::regex(
            R"(kernel k0: load of param %0 \(x\) at index (8|9|10) is outside its 8 elements)")))
        << *gpu.error;
    EXPECT_EQ(gpu.out, (std::vector<double>{13, 14, 15, 16, 17, 0, 0, 0}));
  }
}

TEST_F(GpuVulkanCheckMode, ABadLoadInsideACooperativeReductionIsReported) {
  Outcome gpu = on_vulkan(shifted_row_sum(), CheckMode::validate);
  EXPECT_EQ(gpu.strategy, "row-reduce");
  EXPECT_EQ(gpu.error,
            "kernel rows: load of param %0 (x) at index 256 is outside its 256 elements");
  // Rows 0..2 read 64 values each, x[i*64 + 1 .. i*64 + 64]: (11 .. 73) then 10 from the next row.
  const double full = (11 + 73) * 63 / 2 + 10;
  EXPECT_EQ(gpu.out, (std::vector<double>{full, full, full, full - 10}));
  Outcome cpu = on_cpu(shifted_row_sum(), CheckMode::validate);
  EXPECT_EQ(gpu.error, cpu.error);
  EXPECT_EQ(gpu.out, cpu.out);
}

TEST_F(GpuVulkanCheckMode, InRangeKernelsLeaveTheSlotEmpty) {
  Outcome gpu = on_vulkan(shifted_load(0), CheckMode::validate);
  EXPECT_EQ(gpu.error, std::nullopt);
  EXPECT_EQ(gpu.out, (std::vector<double>{10, 11, 12, 13, 14, 15, 16, 17}));
}

}  // namespace
}  // namespace kiln::codegen::gpu
