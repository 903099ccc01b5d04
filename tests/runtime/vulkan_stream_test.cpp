// Vulkan streams running hand-written compute shaders: grid-stride and shared-memory kernels,
// 64-bit and 8-bit buffers, chained launches, stream-ordered memory reuse, two threads, timing.
// Every kernel test runs twice: device memory written directly by the host, and through staging.
#include <cstring>
#include <numeric>
#include <thread>

#include "runtime/vulkan/vulkan_memory.h"
#include "tests/runtime/vulkan_test_util.h"

namespace kiln::runtime::vulkan {
namespace {

class VulkanStreamTest : public VulkanTest, public ::testing::WithParamInterface<bool> {
 protected:
  VulkanBackendOptions options() const override { return {.direct_host_access = GetParam()}; }

  template <class T>
  std::shared_ptr<DeviceMemory> upload(GpuStream& s, const std::vector<T>& host) {
    auto memory = allocate(host.size() * sizeof(T));
    if (memory == nullptr) return nullptr;
    auto ok = s.upload(*memory, host.data(), host.size() * sizeof(T));
    EXPECT_TRUE(ok.has_value()) << ok.error().message;
    return memory;
  }
};

void expect_ok(const Expected<void>& result) {
  ASSERT_TRUE(result.has_value()) << result.error().message;
}

// out[i] = in[i] * k, grid-stride over n floats.
std::string scale_glsl(uint32_t n, float k) {
  return "#version 450\nlayout(local_size_x = 64) in;\n"
         "layout(set = 0, binding = 0) readonly buffer I { float x[]; };\n"
         "layout(set = 0, binding = 1) writeonly buffer O { float y[]; };\n"
         "void main() {\n"
         "  for (uint i = gl_GlobalInvocationID.x; i < " +
         std::to_string(n) + "u; i += gl_NumWorkGroups.x * 64u) y[i] = x[i] * " +
         std::to_string(k) + ";\n}\n";
}

TEST_P(VulkanStreamTest, VectorAddOfOneMillionFloats) {
  constexpr uint32_t n = 1u << 20;
  auto add = program(vector_add_glsl(n), 64, 256, "vector_add");
  ASSERT_NE(add, nullptr);
  std::vector<float> a(n), b(n), c(n, -1.0f);
  for (uint32_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i % 1000);
    b[i] = 0.5f * static_cast<float>(i % 77);
  }
  auto s = stream();
  auto da = upload(*s, a), db = upload(*s, b);
  auto dc = allocate(n * sizeof(float));
  expect_ok(s->launch(*add, {da.get(), db.get(), dc.get()}));
  expect_ok(s->download(*dc, c.data(), n * sizeof(float)));
  expect_ok(s->synchronize());
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(c[i], a[i] + b[i]) << "at " << i;
}

TEST_P(VulkanStreamTest, WorkgroupSharedMemoryReduction) {
  constexpr uint32_t groups = 16, chunk = 4096;
  const std::string glsl =
      "#version 450\nlayout(local_size_x = 256) in;\n"
      "layout(set = 0, binding = 0) readonly buffer I { float x[]; };\n"
      "layout(set = 0, binding = 1) writeonly buffer O { float partial[]; };\n"
      "shared float acc[256];\n"
      "void main() {\n"
      "  uint t = gl_LocalInvocationID.x, base = gl_WorkGroupID.x * 4096u;\n"
      "  float s = 0.0;\n"
      "  for (uint i = t; i < 4096u; i += 256u) s += x[base + i];\n"
      "  acc[t] = s;\n"
      "  barrier();\n"
      "  for (uint w = 128u; w > 0u; w >>= 1) {\n"
      "    if (t < w) acc[t] += acc[t + w];\n"
      "    barrier();\n"
      "  }\n"
      "  if (t == 0u) partial[gl_WorkGroupID.x] = acc[0];\n"
      "}\n";
  auto reduce = program(glsl, groups, 256, "reduce");
  ASSERT_NE(reduce, nullptr);
  std::vector<float> x(groups * chunk);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 13);
  std::vector<float> partial(groups, -1.0f);
  auto s = stream();
  auto dx = upload(*s, x);
  auto dp = allocate(groups * sizeof(float));
  expect_ok(s->launch(*reduce, {dx.get(), dp.get()}));
  expect_ok(s->download(*dp, partial.data(), groups * sizeof(float)));
  expect_ok(s->synchronize());
  for (uint32_t g = 0; g < groups; ++g) {
    float expected = std::accumulate(x.begin() + g * chunk, x.begin() + (g + 1) * chunk, 0.0f);
    EXPECT_EQ(partial[g], expected) << "group " << g;
  }
}

TEST_P(VulkanStreamTest, Int64Float64AndUint8Buffers) {
  for (const char* f : {"shaderInt64", "shaderFloat64", "storageBuffer8BitAccess", "shaderInt8"}) {
    if (!has_feature(f)) GTEST_SKIP() << "device lacks " << f;
  }
  const std::string glsl =
      "#version 450\n"
      "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n"
      "#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require\n"
      "#extension GL_EXT_shader_8bit_storage : require\n"
      "layout(local_size_x = 32) in;\n"
      "layout(set = 0, binding = 0) readonly buffer A { int64_t a[]; };\n"
      "layout(set = 0, binding = 1) writeonly buffer B { int64_t b[]; };\n"
      "layout(set = 0, binding = 2) readonly buffer C { double c[]; };\n"
      "layout(set = 0, binding = 3) writeonly buffer D { double d[]; };\n"
      "layout(set = 0, binding = 4) readonly buffer E { uint8_t e[]; };\n"
      "layout(set = 0, binding = 5) writeonly buffer F { uint8_t f[]; };\n"
      "void main() {\n"
      "  uint i = gl_GlobalInvocationID.x;\n"
      "  if (i >= 1000u) return;\n"
      "  b[i] = a[i] * 3l + (1l << 40);\n"
      "  d[i] = c[i] * 0.1lf + 1e-12lf;\n"
      "  f[i] = uint8_t(uint(e[i]) * 3u + 7u);\n"
      "}\n";
  auto kernel = program(glsl, 32, 32, "wide_and_narrow");
  ASSERT_NE(kernel, nullptr);
  constexpr size_t n = 1000;
  std::vector<int64_t> a(n), b(n);
  std::vector<double> c(n), d(n);
  std::vector<uint8_t> e(n), f(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = static_cast<int64_t>(i) * 123456789012 - 5000000000000;
    c[i] = 1.0 / static_cast<double>(i + 3);
    e[i] = static_cast<uint8_t>(i * 37);
  }
  auto s = stream();
  auto da = upload(*s, a), dc = upload(*s, c), de = upload(*s, e);
  auto db = allocate(n * 8), dd = allocate(n * 8), df = allocate(n);
  expect_ok(s->launch(*kernel, {da.get(), db.get(), dc.get(), dd.get(), de.get(), df.get()}));
  expect_ok(s->download(*db, b.data(), n * 8));
  expect_ok(s->download(*dd, d.data(), n * 8));
  expect_ok(s->download(*df, f.data(), n));
  expect_ok(s->synchronize());
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(b[i], a[i] * 3 + (int64_t{1} << 40)) << i;
    ASSERT_EQ(d[i], c[i] * 0.1 + 1e-12) << i;  // exact: double arithmetic on the device
    ASSERT_EQ(f[i], static_cast<uint8_t>(e[i] * 3 + 7)) << i;
  }
}

TEST_P(VulkanStreamTest, ChainedLaunchesAndRewrittenInputsKeepStreamOrder) {
  constexpr uint32_t n = 10000;
  auto twice = program(scale_glsl(n, 2.0f), 8, 64, "twice");
  auto add = program(vector_add_glsl(n), 8, 256, "add");
  ASSERT_NE(twice, nullptr);
  ASSERT_NE(add, nullptr);
  std::vector<float> x(n), y(n, 0.0f), first(n, 0.0f), second(n, 0.0f);
  std::iota(x.begin(), x.end(), 0.0f);
  std::iota(y.begin(), y.end(), 1.0f);
  auto s = stream();
  auto dx = upload(*s, x);
  auto tmp = allocate(n * 4), out = allocate(n * 4);
  // out = 2x + x, then the input is overwritten with y in the same batch: out = 2y + y.
  expect_ok(s->launch(*twice, {dx.get(), tmp.get()}));
  expect_ok(s->launch(*add, {tmp.get(), dx.get(), out.get()}));
  expect_ok(s->download(*out, first.data(), n * 4));
  expect_ok(s->upload(*dx, y.data(), n * 4));
  expect_ok(s->launch(*twice, {dx.get(), tmp.get()}));
  expect_ok(s->launch(*add, {tmp.get(), dx.get(), out.get()}));
  expect_ok(s->download(*out, second.data(), n * 4));
  expect_ok(s->synchronize());
  for (uint32_t i = 0; i < n; ++i) {
    ASSERT_EQ(first[i], 3.0f * x[i]) << i;
    ASSERT_EQ(second[i], 3.0f * y[i]) << i;
  }
}

TEST_P(VulkanStreamTest, FreedBlocksAreReusedOnlyAfterTheStreamSynchronizes) {
  constexpr uint32_t n = 4096;
  auto twice = program(scale_glsl(n, 2.0f), 4, 64, "twice");
  ASSERT_NE(twice, nullptr);
  std::vector<float> x(n, 3.0f), zeros(n, 0.0f), result(n, 0.0f);
  auto loader = stream();  // the input is written by another stream, already synchronized
  auto dx = upload(*loader, x);
  expect_ok(loader->synchronize());
  auto s = stream();
  auto out = allocate(n * 4);
  expect_ok(s->launch(*twice, {dx.get(), out.get()}));
  expect_ok(s->download(*out, result.data(), n * 4));
  auto handle = [](const std::shared_ptr<DeviceMemory>& m) {
    return dynamic_cast<const VulkanDeviceMemory&>(*m).block()->buffer.buffer;
  };
  VkBuffer input = handle(dx);
  const void* mapped = dynamic_cast<const VulkanDeviceMemory&>(*dx).block()->buffer.mapped;
  if (!GetParam()) {
    EXPECT_EQ(mapped, nullptr);  // staging: device memory is never mapped
  } else if (has_property("type", "cpu")) {
    EXPECT_NE(mapped, nullptr);  // lavapipe: all its memory is host-visible
  }
  dx.reset();                      // freed while the unsubmitted launch still reads it
  auto other = upload(*s, zeros);  // same size class: must not receive the input's block
  EXPECT_NE(handle(other), input);
  expect_ok(s->synchronize());
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(result[i], 6.0f) << i;
  auto reused = allocate(n * 4);  // now the block is back in the pool
  EXPECT_EQ(handle(reused), input);
}

TEST_P(VulkanStreamTest, TwoStreamsFromTwoThreads) {
  constexpr uint32_t n = 50000;
  auto add = program(vector_add_glsl(n), 16, 256, "add");
  ASSERT_NE(add, nullptr);
  auto work = [&](float base, std::vector<float>* out) {
    auto s = stream();
    std::vector<float> a(n, base), b(n, 1.0f);
    auto da = upload(*s, a), db = upload(*s, b);
    auto dc = allocate(n * 4);
    for (int round = 0; round < 10; ++round) {  // a += b, ten times
      ASSERT_TRUE(s->launch(*add, {da.get(), db.get(), dc.get()}).has_value());
      ASSERT_TRUE(s->launch(*add, {dc.get(), dc.get(), da.get()}).has_value());  // a = 2c
      ASSERT_TRUE(s->synchronize().has_value());
    }
    ASSERT_TRUE(s->download(*da, out->data(), n * 4).has_value());
    ASSERT_TRUE(s->synchronize().has_value());
  };
  std::vector<float> r1(n), r2(n);
  std::thread t1(work, 1.0f, &r1), t2(work, 5.0f, &r2);
  t1.join();
  t2.join();
  auto expected = [](float a) {
    for (int i = 0; i < 10; ++i) a = 2.0f * (a + 1.0f);
    return a;
  };
  for (uint32_t i = 0; i < n; ++i) {
    ASSERT_EQ(r1[i], expected(1.0f)) << i;
    ASSERT_EQ(r2[i], expected(5.0f)) << i;
  }
}

TEST_P(VulkanStreamTest, TimedLaunchesReportDeviceTime) {
  constexpr uint32_t n = 1u << 18;
  auto add = program(vector_add_glsl(n), 64, 256, "add");
  ASSERT_NE(add, nullptr);
  std::vector<float> a(n, 1.0f);
  auto s = stream();
  auto da = upload(*s, a), dc = allocate(n * 4);
  expect_ok(s->launch(*add, {da.get(), da.get(), dc.get()}, true));
  expect_ok(s->launch(*add, {da.get(), da.get(), dc.get()}, false));
  expect_ok(s->launch(*add, {dc.get(), dc.get(), da.get()}, true));
  EXPECT_TRUE(s->launch_times_ms().empty());
  expect_ok(s->synchronize());
  std::vector<double> times = s->launch_times_ms();
  ASSERT_EQ(times.size(), 2u);
  for (double t : times) {
    EXPECT_GT(t, 0.0);
    EXPECT_LT(t, 10000.0);
  }
  expect_ok(s->synchronize());  // an empty batch has no timed launches
  EXPECT_TRUE(s->launch_times_ms().empty());
}

TEST_P(VulkanStreamTest, MisuseIsReportedNotRecorded) {
  auto add = program(vector_add_glsl(16), 1, 256, "add");
  ASSERT_NE(add, nullptr);
  auto s = stream();
  auto small = allocate(64);
  std::vector<float> big(100, 0.0f);
  auto too_big = s->upload(*small, big.data(), big.size() * 4);
  ASSERT_FALSE(too_big.has_value());
  EXPECT_NE(too_big.error().message.find("upload of 400 bytes into a 64-byte buffer"),
            std::string::npos);
  auto missing = s->launch(*add, {small.get(), small.get()});
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message.find("binds buffer 2 but 2 arguments"), std::string::npos)
      << missing.error().message;
  expect_ok(s->synchronize());
}

TEST_P(VulkanStreamTest, ManyTimedLaunchesInOneBatch) {
  // More launches than one descriptor pool holds sets and one query pool holds timestamps.
  constexpr uint32_t n = 256, launches = 150;
  const std::string glsl =
      "#version 450\nlayout(local_size_x = 64) in;\n"
      "layout(set = 0, binding = 0) buffer X { uint x[]; };\n"
      "void main() { x[gl_GlobalInvocationID.x] += gl_GlobalInvocationID.x + 1u; }\n";
  auto bump = program(glsl, n / 64, 64, "bump");
  ASSERT_NE(bump, nullptr);
  std::vector<uint32_t> x(n, 0);
  auto s = stream();
  auto dx = upload(*s, x);
  for (uint32_t i = 0; i < launches; ++i) expect_ok(s->launch(*bump, {dx.get()}, true));
  expect_ok(s->download(*dx, x.data(), n * 4));
  expect_ok(s->synchronize());
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(x[i], launches * (i + 1)) << i;
  std::vector<double> times = s->launch_times_ms();
  ASSERT_EQ(times.size(), launches);
  for (double t : times) EXPECT_GT(t, 0.0);
}

INSTANTIATE_TEST_SUITE_P(Memory, VulkanStreamTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "direct" : "staging"; });

}  // namespace
}  // namespace kiln::runtime::vulkan
