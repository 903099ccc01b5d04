// CUDA backend without a GPU: the no-driver errors and device listing, the compile-target choice,
// size classes, binary sniffing, property rows and driver error formatting.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/cuda_device_info.h"
#include "runtime/cuda/cuda_driver.h"
#include "runtime/cuda/cuda_memory_pool.h"
#include "runtime/cuda/cuda_program.h"
#include "runtime/gpu_backend.h"

namespace kiln::runtime::cuda {
namespace {

bool driver_library_present() {
  void* lib = dlopen(kCudaDriverLibrary, RTLD_NOW | RTLD_LOCAL);
  if (lib) dlclose(lib);
  return lib != nullptr;
}

TEST(CudaWithoutDevice, OpenSaysWhyCudaIsUnusable) {
  auto backend = open_cuda_backend(0);
  if (backend) GTEST_SKIP() << "a CUDA device is present: " << (*backend)->name();
  const std::string& message = backend.error().message;
  EXPECT_TRUE(message.starts_with("cuda: ")) << message;
  if (!driver_library_present()) {
    EXPECT_NE(message.find("libcuda.so.1 not found (no NVIDIA driver on this machine)"),
              std::string::npos)
        << message;
  }
}

TEST(CudaWithoutDevice, ListHasOneAbsentEntryWithTheSameReason) {
  auto backend = open_cuda_backend(0);
  if (backend) GTEST_SKIP() << "a CUDA device is present";
  const std::vector<GpuDeviceInfo> devices = list_cuda_devices();
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].name, "cuda");
  EXPECT_FALSE(devices[0].present);
  ASSERT_EQ(devices[0].properties.size(), 1u);
  EXPECT_EQ(devices[0].properties[0].first, "absent");
  EXPECT_EQ(devices[0].properties[0].second, backend.error().message);
}

TEST(CudaWithoutDevice, EveryIndexFailsCleanly) {
  if (open_cuda_backend(0)) GTEST_SKIP() << "a CUDA device is present";
  for (int index : {-1, 1, 7}) {
    auto backend = open_cuda_backend(index);
    ASSERT_FALSE(backend.has_value()) << index;
    EXPECT_TRUE(backend.error().message.starts_with("cuda: ")) << backend.error().message;
  }
}

TEST(CudaCompileTarget, ExactArchGivesCubin) {
  auto target = choose_compile_target(90, {75, 80, 86, 89, 90, 100, 120}, "13.0");
  ASSERT_TRUE(target.has_value()) << target.error().message;
  EXPECT_EQ(target->sm, 90);
  EXPECT_TRUE(target->cubin);
}

TEST(CudaCompileTarget, UnknownListTrustsTheDeviceArch) {
  auto target = choose_compile_target(86, {}, "11.1");
  ASSERT_TRUE(target.has_value());
  EXPECT_EQ(target->sm, 86);
  EXPECT_TRUE(target->cubin);
}

TEST(CudaCompileTarget, NewerDeviceFallsBackToPtxOfTheNewestOlderArch) {
  auto target = choose_compile_target(121, {75, 80, 90, 100, 120}, "12.8");
  ASSERT_TRUE(target.has_value());
  EXPECT_EQ(target->sm, 120);
  EXPECT_FALSE(target->cubin);
}

TEST(CudaCompileTarget, DeviceOlderThanEveryArchIsAnError) {
  auto target = choose_compile_target(61, {75, 80, 90}, "13.0");
  ASSERT_FALSE(target.has_value());
  EXPECT_NE(target.error().message.find("sm_75 to sm_90"), std::string::npos)
      << target.error().message;
  EXPECT_NE(target.error().message.find("sm_61"), std::string::npos);
  EXPECT_NE(target.error().message.find("NVRTC 13.0"), std::string::npos);
}

TEST(CudaMemoryPool, SizeClasses) {
  EXPECT_EQ(CudaMemoryPool::size_class(0), 512u);
  EXPECT_EQ(CudaMemoryPool::size_class(512), 512u);
  EXPECT_EQ(CudaMemoryPool::size_class(513), 1024u);
  EXPECT_EQ(CudaMemoryPool::size_class(1000000), size_t{1} << 20);
  EXPECT_EQ(CudaMemoryPool::size_class(size_t{64} << 20), size_t{64} << 20);
  EXPECT_EQ(CudaMemoryPool::size_class((size_t{64} << 20) + 1), size_t{66} << 20);
  EXPECT_EQ(CudaMemoryPool::size_class(size_t{100} << 20), size_t{100} << 20);
}

TEST(CudaProgram, CubinIsRecognizedByItsElfMagic) {
  EXPECT_TRUE(is_cubin({0x7f, 'E', 'L', 'F', 2, 1}));
  EXPECT_FALSE(is_cubin({'/', '/', ' ', 'G'}));
  EXPECT_FALSE(is_cubin({0x7f, 'E'}));
  EXPECT_FALSE(is_cubin({}));
}

TEST(CudaDeviceInfo, PropertiesRows) {
  CudaDeviceInfo info;
  info.ordinal = 0;
  info.name = "NVIDIA H100 80GB HBM3";
  info.major = 9;
  info.minor = 0;
  info.sm_count = 132;
  info.max_threads_per_block = 1024;
  info.total_memory = size_t{80} << 30;
  EXPECT_EQ(info.arch(), "sm_90");
  const auto rows = device_properties(info, "13.0", "NVRTC 13.0");
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"name", "NVIDIA H100 80GB HBM3"},
      {"compute capability", "9.0 (sm_90)"},
      {"memory", "80.0 GiB"},
      {"multiprocessors", "132"},
      {"max threads per block", "1024"},
      {"driver", "CUDA 13.0"},
      {"nvrtc", "NVRTC 13.0"},
  };
  EXPECT_EQ(rows, expected);
}

TEST(CudaDriverErrors, CheckNamesTheCallTheErrorAndTheDriverMessage) {
  CudaDriver driver;
  driver.cuGetErrorName = [](CUresult result, const char** out) -> CUresult {
    *out = result == kCudaErrorOutOfMemory ? "CUDA_ERROR_OUT_OF_MEMORY" : nullptr;
    return *out ? kCudaSuccess : 1;
  };
  driver.cuGetErrorString = [](CUresult result, const char** out) -> CUresult {
    *out = result == kCudaErrorOutOfMemory ? "out of memory" : nullptr;
    return *out ? kCudaSuccess : 1;
  };
  EXPECT_TRUE(driver.check(kCudaSuccess, "cuMemAlloc").has_value());
  auto failed = driver.check(kCudaErrorOutOfMemory, "cuMemAlloc of 512 bytes");
  ASSERT_FALSE(failed.has_value());
  EXPECT_EQ(failed.error().message,
            "cuda: cuMemAlloc of 512 bytes: CUDA_ERROR_OUT_OF_MEMORY: out of memory");
  // A code the driver does not know keeps its number.
  EXPECT_EQ(driver.check(999, "cuInit").error().message,
            "cuda: cuInit: CUresult 999: unknown error");
}

}  // namespace
}  // namespace kiln::runtime::cuda
