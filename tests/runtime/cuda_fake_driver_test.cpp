// The CUDA runtime's driver-facing logic against a fake driver table (host memory, streams that
// complete only when synchronized): stream-ordered pool reuse, out-of-memory retry, launch
// parameters, timing, module loading. Runs everywhere; the real driver is covered by the gpu tests.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/cuda_driver.h"
#include "runtime/cuda/cuda_memory_pool.h"
#include "runtime/cuda/cuda_program.h"
#include "runtime/cuda/cuda_stream.h"

namespace kiln::runtime::cuda {
namespace {

// The fake device's state; the driver table's functions are captureless and reach it here.
struct FakeGpu {
  struct Stream {
    int enqueued = 0;
    int completed = 0;
  };
  struct Event {
    uintptr_t stream = 0;
    int target = -1;  // -1: never recorded
  };
  struct Launch {
    uintptr_t function = 0;
    unsigned grid = 0;
    unsigned block = 0;
    std::vector<CUdeviceptr> args;
    std::vector<int32_t> ints;  // the int arguments after the pointers
  };
  int int_args = 0;  // int arguments the launched kernel takes after its three pointers
  size_t limit = size_t{1} << 30;
  size_t used = 0;
  int mem_allocs = 0;
  int mem_frees = 0;
  uintptr_t next_id = 0x1000;
  std::map<CUdeviceptr, std::vector<uint8_t>> memory;
  std::map<uintptr_t, Stream> streams;
  std::map<uintptr_t, Event> events;
  std::vector<Launch> launches;
  std::string last_image;

  bool complete(const Event& e) const {
    return e.target >= 0 &&
           (!streams.count(e.stream) || streams.at(e.stream).completed >= e.target);
  }
  uint8_t* host(CUdeviceptr p, size_t bytes) {
    auto it = memory.upper_bound(p);
    if (it == memory.begin()) return nullptr;
    --it;
    if (p + bytes > it->first + it->second.size()) return nullptr;
    return it->second.data() + (p - it->first);
  }
};
FakeGpu* gpu = nullptr;

template <class T>
T handle(uintptr_t id) {
  return reinterpret_cast<T>(id);
}
uintptr_t id(const void* h) {
  return reinterpret_cast<uintptr_t>(h);
}

CudaDriver make_fake_driver() {
  CudaDriver d;
  d.cuGetErrorName = [](CUresult r, const char** s) -> CUresult {
    *s = r == kCudaErrorOutOfMemory ? "CUDA_ERROR_OUT_OF_MEMORY"
         : r == 218                 ? "CUDA_ERROR_INVALID_PTX"
                                    : "CUDA_ERROR_UNKNOWN";
    return 0;
  };
  d.cuGetErrorString = [](CUresult, const char** s) -> CUresult { return *s = "fake", 0; };
  d.cuDeviceGet = [](CUdevice* dev, int i) -> CUresult { return *dev = i, 0; };
  d.cuDevicePrimaryCtxRetain = [](CUcontext* c, CUdevice) -> CUresult {
    return *c = handle<CUcontext>(0x42), 0;
  };
  d.cuDevicePrimaryCtxRelease = [](CUdevice) -> CUresult { return 0; };
  d.cuCtxSetCurrent = [](CUcontext c) -> CUresult {
    return c == handle<CUcontext>(0x42) ? 0 : 201;
  };
  d.cuStreamCreate = [](CUstream* s, unsigned) -> CUresult {
    const uintptr_t i = gpu->next_id++;
    gpu->streams[i] = {};
    return *s = handle<CUstream>(i), 0;
  };
  d.cuStreamDestroy = [](CUstream s) -> CUresult { return gpu->streams.erase(id(s)) ? 0 : 400; };
  d.cuStreamSynchronize = [](CUstream s) -> CUresult {
    auto& st = gpu->streams.at(id(s));
    return st.completed = st.enqueued, 0;
  };
  d.cuMemAlloc = [](CUdeviceptr* p, size_t bytes) -> CUresult {
    if (gpu->used + bytes > gpu->limit) return kCudaErrorOutOfMemory;
    *p = (gpu->next_id += 0x100000);
    gpu->memory[*p].resize(bytes);
    gpu->used += bytes;
    gpu->mem_allocs++;
    return 0;
  };
  d.cuMemFree = [](CUdeviceptr p) -> CUresult {
    gpu->used -= gpu->memory.at(p).size();
    gpu->memory.erase(p);
    gpu->mem_frees++;
    return 0;
  };
  // Copies happen at once, but count as stream work that completes only on synchronize.
  d.cuMemcpyHtoDAsync = [](CUdeviceptr dst, const void* src, size_t n, CUstream s) -> CUresult {
    uint8_t* to = gpu->host(dst, n);
    if (!to) return 1;
    std::memcpy(to, src, n);
    return gpu->streams.at(id(s)).enqueued++, 0;
  };
  d.cuMemcpyDtoHAsync = [](void* dst, CUdeviceptr src, size_t n, CUstream s) -> CUresult {
    const uint8_t* from = gpu->host(src, n);
    if (!from) return 1;
    std::memcpy(dst, from, n);
    return gpu->streams.at(id(s)).enqueued++, 0;
  };
  d.cuModuleLoadDataEx = [](CUmodule* m, const void* image, unsigned n, CUjit_option* options,
                            void** values) -> CUresult {
    const auto* bytes = static_cast<const char*>(image);
    gpu->last_image = bytes[0] == 0x7f ? std::string("cubin") : std::string(bytes);
    if (gpu->last_image.starts_with("bad")) {
      for (unsigned i = 0; i < n; ++i)
        if (options[i] == kJitErrorLogBuffer)
          std::strcpy(static_cast<char*>(values[i]), "ptxas fatal: unexpected token");
      return 218;
    }
    return *m = handle<CUmodule>(0x77), 0;
  };
  d.cuModuleGetFunction = [](CUfunction* f, CUmodule, const char* name) -> CUresult {
    if (std::string(name) != "vector_add") return 500;
    return *f = handle<CUfunction>(0x88), 0;
  };
  d.cuModuleUnload = [](CUmodule) -> CUresult { return 0; };
  d.cuLaunchKernel = [](CUfunction f, unsigned gx, unsigned, unsigned, unsigned bx, unsigned,
                        unsigned, unsigned, CUstream s, void** params, void**) -> CUresult {
    FakeGpu::Launch launch{id(f), gx, bx, {}, {}};
    // kiln passes exactly the pointer arguments; the fake reads three (vector_add's count).
    for (int i = 0; i < 3; ++i) launch.args.push_back(*static_cast<CUdeviceptr*>(params[i]));
    for (int i = 0; i < gpu->int_args; ++i)
      launch.ints.push_back(*static_cast<int32_t*>(params[3 + i]));
    gpu->launches.push_back(launch);
    return gpu->streams.at(id(s)).enqueued++, 0;
  };
  d.cuEventCreate = [](CUevent* e, unsigned) -> CUresult {
    const uintptr_t i = gpu->next_id++;
    gpu->events[i] = {};
    return *e = handle<CUevent>(i), 0;
  };
  d.cuEventRecord = [](CUevent e, CUstream s) -> CUresult {
    gpu->events.at(id(e)) = {id(s), gpu->streams.at(id(s)).enqueued};
    return 0;
  };
  d.cuEventQuery = [](CUevent e) -> CUresult {
    return gpu->complete(gpu->events.at(id(e))) ? 0 : kCudaErrorNotReady;
  };
  d.cuEventSynchronize = [](CUevent e) -> CUresult {
    auto& ev = gpu->events.at(id(e));
    if (gpu->streams.count(ev.stream)) gpu->streams[ev.stream].completed = ev.target;
    return 0;
  };
  d.cuEventElapsedTime = [](float* ms, CUevent a, CUevent b) -> CUresult {
    if (!gpu->complete(gpu->events.at(id(a))) || !gpu->complete(gpu->events.at(id(b))))
      return kCudaErrorNotReady;
    return *ms = 0.5f * static_cast<float>(gpu->events.at(id(b)).target), 0;
  };
  d.cuEventDestroy = [](CUevent e) -> CUresult { return gpu->events.erase(id(e)) ? 0 : 400; };
  return d;
}

class CudaFakeDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gpu = &state_;
    auto context = CudaContext::retain(driver_, 0);
    ASSERT_TRUE(context.has_value()) << context.error().message;
    context_ = *context;
    pool_ = std::make_shared<CudaMemoryPool>(context_);
  }
  void TearDown() override {
    pool_.reset();
    context_.reset();
    gpu = nullptr;
  }
  std::unique_ptr<CudaStream> stream() {
    auto s = CudaStream::create(context_);
    EXPECT_TRUE(s.has_value());
    return std::move(*s);
  }
  std::shared_ptr<DeviceMemory> allocate(size_t bytes) {
    auto m = pool_->allocate(bytes);
    EXPECT_TRUE(m.has_value()) << m.error().message;
    return *m;
  }
  static CUdeviceptr pointer(const std::shared_ptr<DeviceMemory>& m) {
    return static_cast<const CudaMemory&>(*m).pointer();
  }

  FakeGpu state_;
  CudaDriver driver_ = make_fake_driver();
  std::shared_ptr<const CudaContext> context_;
  std::shared_ptr<CudaMemoryPool> pool_;
};

TEST_F(CudaFakeDriverTest, BlockInUseByAStreamIsReusedOnlyAfterTheStreamGetsThere) {
  auto s = stream();
  auto first = allocate(1000);
  EXPECT_EQ(first->bytes(), 1000u);
  const CUdeviceptr first_pointer = pointer(first);
  const std::vector<float> data(250, 1.0f);
  ASSERT_TRUE(s->upload(*first, data.data(), 1000).has_value());
  first.reset();  // freed while the upload is still "in flight"
  EXPECT_EQ(pool_->cached_bytes(), 1024u);
  auto second = allocate(900);  // same size class, but the stream has not reached the free
  EXPECT_NE(pointer(second), first_pointer);
  EXPECT_EQ(state_.mem_allocs, 2);
  ASSERT_TRUE(s->synchronize().has_value());
  auto third = allocate(1024);  // now the first block is safe to hand out again
  EXPECT_EQ(pointer(third), first_pointer);
  EXPECT_EQ(state_.mem_allocs, 2);
}

TEST_F(CudaFakeDriverTest, BlockNoStreamTouchedIsReusedAtOnce) {
  const CUdeviceptr first = pointer(allocate(4096));
  EXPECT_EQ(pointer(allocate(3000)), first);
  EXPECT_EQ(state_.mem_allocs, 1);
}

TEST_F(CudaFakeDriverTest, DestroyedStreamNeedsNoEvent) {
  CUdeviceptr first = 0;
  {
    auto s = stream();
    auto block = allocate(512);
    first = pointer(block);
    const int value = 7;
    ASSERT_TRUE(s->upload(*block, &value, sizeof(value)).has_value());
    s.reset();  // synchronizes and destroys the stream
  }
  EXPECT_EQ(pointer(allocate(512)), first);
}

TEST_F(CudaFakeDriverTest, OutOfMemoryFreesTheCacheAndRetriesThenReportsTheDriverError) {
  state_.limit = 8192;
  allocate(4096).reset();     // cached
  auto big = allocate(8192);  // fails once, frees the cached 4096, succeeds
  EXPECT_EQ(state_.mem_frees, 1);
  EXPECT_EQ(pool_->cached_bytes(), 0u);
  auto more = pool_->allocate(600);
  ASSERT_FALSE(more.has_value());
  EXPECT_EQ(more.error().message,
            "cuda: cuMemAlloc of 1024 bytes (for a 600-byte buffer) on device 0: "
            "CUDA_ERROR_OUT_OF_MEMORY: fake");
}

TEST_F(CudaFakeDriverTest, UploadDownloadRoundTripAndBoundsCheck) {
  auto s = stream();
  auto block = allocate(16);
  const std::vector<int> in = {1, 2, 3, 4};
  std::vector<int> out(4, 0);
  ASSERT_TRUE(s->upload(*block, in.data(), 16).has_value());
  ASSERT_TRUE(s->download(*block, out.data(), 16).has_value());
  ASSERT_TRUE(s->synchronize().has_value());
  EXPECT_EQ(out, in);
  auto too_big = s->upload(*block, in.data(), 17);
  ASSERT_FALSE(too_big.has_value());
  EXPECT_EQ(too_big.error().message, "cuda: upload of 17 bytes into a 16-byte buffer");
}

codegen::gpu::GpuSource vector_add_source() {
  codegen::gpu::GpuSource source;
  source.entry = "vector_add";
  source.launch = {40, 256};
  return source;
}

TEST_F(CudaFakeDriverTest, LaunchPassesPointerArgumentsInOrderAndTimesTimedLaunches) {
  auto program = CudaProgram::load(context_, vector_add_source(), {0x7f, 'E', 'L', 'F', 0});
  ASSERT_TRUE(program.has_value()) << program.error().message;
  auto s = stream();
  auto a = allocate(4096), b = allocate(4096), c = allocate(4096);
  const std::vector<DeviceMemory*> args = {a.get(), b.get(), c.get()};
  ASSERT_TRUE(s->launch(**program, args, /*timed=*/true).has_value());
  ASSERT_TRUE(s->launch(**program, args, /*timed=*/false).has_value());
  ASSERT_TRUE(s->launch(**program, args, /*timed=*/true).has_value());
  EXPECT_TRUE(s->launch_times_ms().empty());
  ASSERT_TRUE(s->synchronize().has_value());
  ASSERT_EQ(state_.launches.size(), 3u);
  EXPECT_EQ(state_.launches[0].grid, 40u);
  EXPECT_EQ(state_.launches[0].block, 256u);
  EXPECT_EQ(state_.launches[0].args,
            (std::vector<CUdeviceptr>{pointer(a), pointer(b), pointer(c)}));
  // The fake's elapsed time is half the end event's position in the stream: launches 1 and 3.
  EXPECT_EQ(s->launch_times_ms(), (std::vector<double>{0.5, 1.5}));
  ASSERT_TRUE(s->synchronize().has_value());
  EXPECT_TRUE(s->launch_times_ms().empty());  // nothing timed in this batch
}

TEST_F(CudaFakeDriverTest, LaunchShapeOutsideTheDeviceLimitsIsAnError) {
  auto source = vector_add_source();
  source.launch = {70000, 256};
  auto program = CudaProgram::load(context_, source, {0x7f, 'E', 'L', 'F'});
  ASSERT_TRUE(program.has_value());
  auto a = allocate(64);
  auto launched = stream()->launch(**program, {a.get(), a.get(), a.get()}, false);
  ASSERT_FALSE(launched.has_value());
  EXPECT_NE(launched.error().message.find("70000 blocks of 256 threads"), std::string::npos)
      << launched.error().message;
}

// A dynamic kernel (codegen/gpu/gpu_source.h) takes its outer extent as an int after the
// pointers, and is launched with the blocks that extent needs; without an extent it does not run.
TEST_F(CudaFakeDriverTest, ADynamicKernelTakesItsOuterExtentAsItsLastArgument) {
  auto source = vector_add_source();
  source.launch = {64, 256, /*dynamic_tasks=*/4, /*tasks_per_group=*/2};
  auto program = CudaProgram::load(context_, source, {0x7f, 'E', 'L', 'F'});
  ASSERT_TRUE(program.has_value());
  auto a = allocate(64);
  state_.int_args = 1;
  auto s = stream();
  ASSERT_TRUE(s->launch(**program, {a.get(), a.get(), a.get()}, false, 5).has_value());
  ASSERT_TRUE(s->launch(**program, {a.get(), a.get(), a.get()}, false, 0).has_value());
  ASSERT_TRUE(s->launch(**program, {a.get(), a.get(), a.get()}, false, 100000).has_value());
  ASSERT_EQ(state_.launches.size(), 3u);
  EXPECT_EQ(state_.launches[0].grid, 10u);  // 5 x 4 tasks, 2 per block
  EXPECT_EQ(state_.launches[0].ints, std::vector<int32_t>{5});
  EXPECT_EQ(state_.launches[1].grid, 1u);
  EXPECT_EQ(state_.launches[1].ints, std::vector<int32_t>{0});
  EXPECT_EQ(state_.launches[2].grid, 65535u);
  EXPECT_EQ(state_.launches[2].ints, std::vector<int32_t>{100000});
  auto none = s->launch(**program, {a.get(), a.get(), a.get()}, false);
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.error().message.find("no outer extent given"), std::string::npos)
      << none.error().message;
  auto too_big = s->launch(**program, {a.get(), a.get(), a.get()}, false, int64_t{1} << 31);
  ASSERT_FALSE(too_big.has_value());
  EXPECT_NE(too_big.error().message.find("outer extent 2147483648"), std::string::npos)
      << too_big.error().message;
  EXPECT_EQ(state_.launches.size(), 3u);
}

TEST_F(CudaFakeDriverTest, PtxIsPassedNulTerminated) {
  const std::string ptx = ".version 9.0\n.target sm_90\n";
  auto program = CudaProgram::load(context_, vector_add_source(),
                                   std::vector<uint8_t>(ptx.begin(), ptx.end()));
  ASSERT_TRUE(program.has_value()) << program.error().message;
  EXPECT_EQ(state_.last_image, ptx);
}

TEST_F(CudaFakeDriverTest, ModuleLoadErrorCarriesTheJitLog) {
  const std::string ptx = "bad ptx";
  auto program = CudaProgram::load(context_, vector_add_source(),
                                   std::vector<uint8_t>(ptx.begin(), ptx.end()));
  ASSERT_FALSE(program.has_value());
  EXPECT_EQ(program.error().message,
            "cuda: cuModuleLoadDataEx for kernel 'vector_add' on device 0: "
            "CUDA_ERROR_INVALID_PTX: fake\nptxas fatal: unexpected token");
}

TEST_F(CudaFakeDriverTest, MissingEntryIsNamed) {
  auto source = vector_add_source();
  source.entry = "kiln_kernel_7";
  auto program = CudaProgram::load(context_, source, {0x7f, 'E', 'L', 'F'});
  ASSERT_FALSE(program.has_value());
  EXPECT_NE(program.error().message.find("cuModuleGetFunction('kiln_kernel_7')"), std::string::npos)
      << program.error().message;
}

// Blocks freed while a stream still uses them cannot be handed out again yet, so a loop that
// frees each block with its work in flight takes a new one every time: the pool kept every one
// (a server meeting new sizes likewise kept each size) until cuMemAlloc failed. It now keeps at
// most twice its peak of live bytes (at least the minimum asked for, 8 KiB here): the block
// released longest ago is freed, after the stream has reached it, and the last is reused.
TEST_F(CudaFakeDriverTest, PoolKeepsNoMoreFreeBlocksThanTwiceItsPeakOfLiveOnes) {
  auto pool = std::make_shared<CudaMemoryPool>(context_, /*min_cached=*/size_t{8} << 10);
  auto s = stream();
  size_t most_cached = 0;
  CUdeviceptr last = 0;
  for (int run = 0; run < 8; ++run) {
    auto block = pool->allocate(4096);
    ASSERT_TRUE(block.has_value()) << block.error().message;
    last = pointer(*block);
    const char byte = 1;
    ASSERT_TRUE(s->upload(**block, &byte, 1).has_value());
    block->reset();  // freed while the upload is still in flight
    most_cached = std::max(most_cached, pool->cached_bytes());
  }
  EXPECT_EQ(state_.mem_allocs, 8) << "no block was ready for reuse";
  EXPECT_EQ(pool->peak_live_bytes(), 4096u);
  EXPECT_EQ(most_cached, size_t{8} << 10);
  EXPECT_EQ(state_.mem_frees, 6) << "all but the two released last";
  ASSERT_TRUE(s->synchronize().has_value());
  auto again = pool->allocate(4096);
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_EQ(pointer(*again), last) << "the block released last is reused";
  again->reset();
  pool.reset();
  EXPECT_EQ(state_.mem_allocs, state_.mem_frees);
  EXPECT_TRUE(state_.events.empty());
}

TEST_F(CudaFakeDriverTest, PoolDestructionFreesEverythingAndLeavesNoEvents) {
  auto s = stream();
  auto block = allocate(2048);
  const char byte = 1;
  ASSERT_TRUE(s->upload(*block, &byte, 1).has_value());
  block.reset();
  allocate(100).reset();
  pool_.reset();
  s.reset();
  EXPECT_EQ(state_.mem_allocs, state_.mem_frees);
  EXPECT_TRUE(state_.memory.empty());
  EXPECT_TRUE(state_.events.empty());
  EXPECT_TRUE(state_.streams.empty());
}

}  // namespace
}  // namespace kiln::runtime::cuda
