// Allocations the system cannot meet (DESIGN.md §7): a kiln::Error naming the device, the bytes
// and the tensor, never a signal; the pool and the device stay usable afterwards.
#include <gtest/gtest.h>

#include "ir/builder.h"
#include "runtime/buffer.h"
#include "runtime/device.h"
#include "runtime/planner.h"

namespace kiln::runtime {
namespace {

using ir::DType;

// 4e11 bytes: more than this machine's memory and swap, so the system refuses it at once.
constexpr int64_t kHuge = 100'000'000'000;

TEST(AllocationFailure, ThePoolNamesDeviceBytesAndTensorAndStaysUsable) {
  auto pool = BufferPool::create(PersistentMemory::enabled, "cpu");
  auto small = pool->allocate(DType::f32, {1024}, "%a");
  ASSERT_TRUE(small.has_value());
  small->reset();  // a cached free block, which the failed request returns to the system
  EXPECT_GT(pool->cached_bytes(), 0u);
  auto huge = pool->allocate(DType::f32, {kHuge}, "%y");
  ASSERT_FALSE(huge.has_value());
  EXPECT_EQ(huge.error().message,
            "out of memory on device 'cpu': cannot allocate 400000000000 bytes for %y "
            "(f32[100000000000])");
  EXPECT_EQ(pool->cached_bytes(), 0u) << "the cache is given back before giving up";
  auto persistent = pool->allocate_result(DType::f64, {kHuge, 1}, "%r");
  EXPECT_FALSE(persistent.has_value());
  auto again = pool->allocate(DType::f32, {1024}, "%b");
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_EQ((*again)->nbytes(), 4096u);
}

TEST(AllocationFailure, ASizeBeyondTheAddressSpaceIsAnErrorNotAnOverflow) {
  auto pool = BufferPool::create(PersistentMemory::disabled, "cpu");
  const int64_t big = int64_t{1} << 40;
  auto r = pool->allocate(DType::f64, {big, big}, "%w");  // 2^83 bytes: does not fit in size_t
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message,
            "out of memory on device 'cpu': cannot allocate more bytes than an address space "
            "holds for %w (f64[1099511627776,1099511627776])");
  auto just_over = pool->allocate(DType::u8, {(int64_t{1} << 47) + 1}, "%v");
  EXPECT_FALSE(just_over.has_value());
}

// x : f32[1] -> exp(expand(x, [kHuge])): the input is small, the result cannot be allocated.
struct HugeGraph {
  ir::Graph g;
  ir::Builder b{g};
  const ir::Node* x = g.input(DType::f32, {1}, "x");
  const ir::Node* y = *b.unary(ir::Op::Exp, *b.expand(x, {kHuge}));
};

struct SmallGraph {
  ir::Graph g;
  ir::Builder b{g};
  const ir::Node* x = g.input(DType::f32, {3}, "x");
  const ir::Node* y = *b.binary(ir::Op::Mul, x, x);
};

// The result is named by the caller's namer (as `kiln run` names a .kg's values), whichever
// device runs it.
void check_device(const std::string& name) {
  HugeGraph huge;
  DeviceOptions options;
  options.cpu_rates = options.gpu_rates = RatesSource::reference;
  options.namer = [y = huge.y](const ir::Node* n) { return n == y ? "%y" : default_value_name(n); };
  auto dev = open_device(name, options);
  if (!dev && name.starts_with("vulkan")) GTEST_SKIP() << dev.error().message;
  ASSERT_TRUE(dev.has_value()) << dev.error().message;
  auto in = (*dev)->pool()->from_host(ir::HostTensor::zeros(DType::f32, {1})).value();
  auto r = (*dev)->execute(huge.g, {huge.y}, {{huge.x, in}});
  ASSERT_FALSE(r.has_value()) << name;
  const std::string& m = r.error().message;
  EXPECT_TRUE(m.starts_with("out of memory on device '" + name + "': cannot allocate ")) << m;
  // The interpreter holds every op's value, so there the expand (unnamed) fails first.
  EXPECT_NE(m.find(name == "reference" ? " bytes for %t1 (f32[100000000000]"
                                       : " bytes for %y (f32[100000000000])"),
            std::string::npos) << m;

  SmallGraph small;  // the same device still runs
  ir::HostTensor h = ir::HostTensor::zeros(DType::f32, {3});
  for (int i = 0; i < 3; ++i) h.set(i, i + 1.5);
  auto ok = (*dev)->execute(small.g, {small.y}, {{small.x, (*dev)->pool()->from_host(h).value()}});
  ASSERT_TRUE(ok.has_value()) << ok.error().message;
  ir::HostTensor out = (*ok)[0]->to_host();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out.get(i), (i + 1.5) * (i + 1.5)) << name;
}

TEST(AllocationFailure, CpuDeviceReportsAndKeepsRunning) { check_device("cpu"); }
TEST(AllocationFailure, ReferenceDeviceReportsAndKeepsRunning) { check_device("reference"); }
TEST(AllocationFailure, VulkanDeviceReportsAndKeepsRunning) { check_device("vulkan:0"); }

}  // namespace
}  // namespace kiln::runtime
