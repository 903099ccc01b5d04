// CUDA backend on a real device: NVRTC-compiled kernels uploaded, launched and read back, two
// streams, launch timing, pooled reuse and out-of-memory. Skips where no CUDA device is present.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_memory_pool.h"
#include "runtime/cuda/cuda_program.h"
#include "runtime/gpu_backend.h"

namespace kiln::runtime {
namespace {

constexpr int kCount = 10000;

codegen::gpu::GpuSource vector_add() {
  codegen::gpu::GpuSource source;
  source.text = R"(
extern "C" __global__ void vector_add(const float* a, const float* b, float* c) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 10000) c[i] = a[i] + b[i];
}
)";
  source.entry = "vector_add";
  source.launch = {(kCount + 255) / 256, 256};
  source.strategy = "elementwise";
  return source;
}

// Sum of ints: a shared-memory tree per block, then one atomicAdd per block.
codegen::gpu::GpuSource block_sum() {
  codegen::gpu::GpuSource source;
  source.text = R"(
extern "C" __global__ void block_sum(const int* in, int* total) {
  __shared__ int partial[256];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  partial[threadIdx.x] = i < 10000 ? in[i] : 0;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(total, partial[0]);
}
)";
  source.entry = "block_sum";
  source.launch = {(kCount + 255) / 256, 256};
  source.strategy = "reduce";
  return source;
}

class CudaGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = open_cuda_backend(0);
    if (!backend) GTEST_SKIP() << "no CUDA device: " << backend.error().message;
    backend_ = std::move(*backend);
  }
  std::shared_ptr<const GpuProgram> build(const codegen::gpu::GpuSource& source) {
    auto binary = backend_->compile(source, source.entry + ".cu");
    EXPECT_TRUE(binary.has_value()) << binary.error().message;
    if (!binary) return nullptr;
    auto program = backend_->load(source, *binary);
    EXPECT_TRUE(program.has_value()) << program.error().message;
    return program ? *program : nullptr;
  }
  std::shared_ptr<DeviceMemory> allocate(size_t bytes) {
    auto memory = backend_->allocate(bytes);
    EXPECT_TRUE(memory.has_value()) << memory.error().message;
    return memory ? *memory : nullptr;
  }
  std::unique_ptr<GpuBackend> backend_;
};

TEST_F(CudaGpuTest, DescribesItself) {
  EXPECT_EQ(backend_->name(), "cuda:0");
  EXPECT_TRUE(backend_->fingerprint().starts_with("sm_")) << backend_->fingerprint();
  EXPECT_EQ(backend_->binary_kind(), "cubin");
  EXPECT_EQ(backend_->dialect(), codegen::gpu::Dialect::cuda);
  const auto properties = backend_->properties();
  ASSERT_FALSE(properties.empty());
  EXPECT_EQ(properties[0].first, "name");
  const auto devices = list_cuda_devices();
  ASSERT_FALSE(devices.empty());
  EXPECT_EQ(devices[0].name, "cuda:0");
  EXPECT_TRUE(devices[0].present);
}

TEST_F(CudaGpuTest, VectorAddRoundTrip) {
  auto binary = backend_->compile(vector_add(), "vector_add.cu");
  ASSERT_TRUE(binary.has_value()) << binary.error().message;
  EXPECT_TRUE(cuda::is_cubin(*binary));
  auto program = backend_->load(vector_add(), *binary);
  ASSERT_TRUE(program.has_value()) << program.error().message;
  std::vector<float> a(kCount), b(kCount), c(kCount, -1.0f);
  std::iota(a.begin(), a.end(), 0.0f);
  std::iota(b.begin(), b.end(), 0.5f);
  const size_t bytes = kCount * sizeof(float);
  auto da = allocate(bytes), db = allocate(bytes), dc = allocate(bytes);
  auto stream = backend_->create_stream();
  ASSERT_TRUE(stream.has_value()) << stream.error().message;
  GpuStream& s = **stream;
  ASSERT_TRUE(s.upload(*da, a.data(), bytes).has_value());
  ASSERT_TRUE(s.upload(*db, b.data(), bytes).has_value());
  ASSERT_TRUE(s.launch(**program, {da.get(), db.get(), dc.get()}).has_value());
  ASSERT_TRUE(s.download(*dc, c.data(), bytes).has_value());
  auto synced = s.synchronize();
  ASSERT_TRUE(synced.has_value()) << synced.error().message;
  for (int i = 0; i < kCount; ++i) ASSERT_EQ(c[i], a[i] + b[i]) << i;
}

TEST_F(CudaGpuTest, ReductionWithSharedMemoryAndAtomics) {
  auto program = build(block_sum());
  ASSERT_TRUE(program);
  std::vector<int> in(kCount);
  std::iota(in.begin(), in.end(), 1);
  int total = 0;
  auto din = allocate(kCount * sizeof(int)), dtotal = allocate(sizeof(int));
  auto stream = backend_->create_stream();
  ASSERT_TRUE(stream.has_value());
  GpuStream& s = **stream;
  ASSERT_TRUE(s.upload(*din, in.data(), kCount * sizeof(int)).has_value());
  ASSERT_TRUE(s.upload(*dtotal, &total, sizeof(int)).has_value());
  ASSERT_TRUE(s.launch(*program, {din.get(), dtotal.get()}).has_value());
  ASSERT_TRUE(s.download(*dtotal, &total, sizeof(int)).has_value());
  ASSERT_TRUE(s.synchronize().has_value());
  EXPECT_EQ(total, kCount * (kCount + 1) / 2);
}

TEST_F(CudaGpuTest, TwoStreamsKeepTheirOwnOrder) {
  auto program = build(vector_add());
  ASSERT_TRUE(program);
  const size_t bytes = kCount * sizeof(float);
  std::vector<float> ones(kCount, 1.0f), twos(kCount, 2.0f), out1(kCount), out2(kCount);
  auto s1 = backend_->create_stream(), s2 = backend_->create_stream();
  ASSERT_TRUE(s1.has_value() && s2.has_value());
  auto a1 = allocate(bytes), c1 = allocate(bytes), a2 = allocate(bytes), c2 = allocate(bytes);
  ASSERT_TRUE((*s1)->upload(*a1, ones.data(), bytes).has_value());
  ASSERT_TRUE((*s2)->upload(*a2, twos.data(), bytes).has_value());
  ASSERT_TRUE((*s1)->launch(*program, {a1.get(), a1.get(), c1.get()}).has_value());
  ASSERT_TRUE((*s2)->launch(*program, {a2.get(), a2.get(), c2.get()}).has_value());
  ASSERT_TRUE((*s1)->download(*c1, out1.data(), bytes).has_value());
  ASSERT_TRUE((*s2)->download(*c2, out2.data(), bytes).has_value());
  ASSERT_TRUE((*s2)->synchronize().has_value());
  ASSERT_TRUE((*s1)->synchronize().has_value());
  EXPECT_EQ(out1, std::vector<float>(kCount, 2.0f));
  EXPECT_EQ(out2, std::vector<float>(kCount, 4.0f));
}

TEST_F(CudaGpuTest, TimedLaunchesReportDeviceTime) {
  auto program = build(vector_add());
  ASSERT_TRUE(program);
  const size_t bytes = kCount * sizeof(float);
  auto a = allocate(bytes), c = allocate(bytes);
  auto stream = backend_->create_stream();
  ASSERT_TRUE(stream.has_value());
  for (bool timed : {true, false, true})
    ASSERT_TRUE((*stream)->launch(*program, {a.get(), a.get(), c.get()}, timed).has_value());
  ASSERT_TRUE((*stream)->synchronize().has_value());
  const std::vector<double> times = (*stream)->launch_times_ms();
  ASSERT_EQ(times.size(), 2u);
  for (double ms : times) {
    EXPECT_GT(ms, 0.0);
    EXPECT_LT(ms, 1000.0);
  }
}

TEST_F(CudaGpuTest, FreedBlockIsReusedAfterItsStreamFinishes) {
  auto stream = backend_->create_stream();
  ASSERT_TRUE(stream.has_value());
  auto block = allocate(1 << 20);
  std::vector<char> data(1 << 20, 3);
  ASSERT_TRUE((*stream)->upload(*block, data.data(), data.size()).has_value());
  const auto first = static_cast<const cuda::CudaMemory&>(*block).pointer();
  block.reset();
  ASSERT_TRUE((*stream)->synchronize().has_value());
  auto again = allocate(1 << 20);
  EXPECT_EQ(static_cast<const cuda::CudaMemory&>(*again).pointer(), first);
}

TEST_F(CudaGpuTest, OutOfMemoryIsAnErrorWithTheDriversMessage) {
  auto huge = backend_->allocate(size_t{1} << 50);  // 1 PiB
  ASSERT_FALSE(huge.has_value());
  EXPECT_NE(huge.error().message.find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos)
      << huge.error().message;
  auto small = backend_->allocate(1024);  // the device is still usable
  EXPECT_TRUE(small.has_value());
}

TEST_F(CudaGpuTest, CompileErrorCarriesTheNvrtcLog) {
  auto source = vector_add();
  source.text = "extern \"C\" __global__ void vector_add(float* p) { p[0] = ; }";
  auto binary = backend_->compile(source, "broken.cu");
  ASSERT_FALSE(binary.has_value());
  EXPECT_NE(binary.error().message.find("broken.cu(1): error"), std::string::npos)
      << binary.error().message;
}

}  // namespace
}  // namespace kiln::runtime
