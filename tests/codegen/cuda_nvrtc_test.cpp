// NVRTC wrapper: CUDA C -> PTX checked by ptxas, cubin for an exact sm_XX, errors with the log,
// and the sm_XX parser. Needs no GPU; skips where NVRTC is not installed.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "codegen/cuda/nvrtc.h"

namespace kiln::codegen::cuda {
namespace {

// fp16 and bf16 conversions, a shared-memory tree reduction and an atomic: the features kiln's
// generated kernels use.
constexpr const char* kKernel = R"(
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void kiln_test_kernel(const __half* a, const __nv_bfloat16* b, float* sum,
                                            __half* out) {
  __shared__ float partial[128];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const float x = __half2float(a[i]) + __bfloat162float(b[i]);
  out[i] = __float2half(x * 2.0f);
  partial[threadIdx.x] = x;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(sum, partial[0]);
}
)";

class NvrtcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loaded = Nvrtc::load();
    if (!loaded) GTEST_SKIP() << "NVRTC not available: " << loaded.error().message;
    nvrtc_ = *loaded;
  }
  std::shared_ptr<const Nvrtc> nvrtc_;
};

// Runs ptxas on `ptx` for `arch`; returns its exit status, or -1 without ptxas.
int run_ptxas(const std::string& ptx, const std::string& arch) {
  const std::filesystem::path ptxas = "/usr/local/cuda/bin/ptxas";
  if (!std::filesystem::exists(ptxas)) return -1;
  const auto dir = std::filesystem::temp_directory_path();
  const auto stem = "kiln_nvrtc_test_" + std::to_string(getpid()) + "_" + arch;
  const auto input = dir / (stem + ".ptx");
  const auto output = dir / (stem + ".cubin");
  std::ofstream(input) << ptx;
  const std::string command =
      ptxas.string() + " -arch=" + arch + " -o " + output.string() + " " + input.string() + " 2>&1";
  const int status = std::system(command.c_str());
  std::filesystem::remove(input);
  std::filesystem::remove(output);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
}

TEST_F(NvrtcTest, VersionIsMajorDotMinor) {
  const std::string version = nvrtc_->version();
  ASSERT_NE(version.find('.'), std::string::npos) << version;
  EXPECT_GE(std::stoi(version), 11) << version;
}

TEST_F(NvrtcTest, PtxTargetsTheRequestedArchAndPassesPtxas) {
  for (const std::string arch : {"sm_80", "sm_90"}) {
    auto binary = nvrtc_->compile(kKernel, "test_kernel.cu", arch, /*cubin=*/false);
    ASSERT_TRUE(binary.has_value()) << binary.error().message;
    EXPECT_NE(binary->ptx.find(".target " + arch), std::string::npos) << binary->ptx;
    EXPECT_NE(binary->ptx.find(".entry kiln_test_kernel"), std::string::npos);
    // atomicAdd with its result unused: a red (or atom) instruction on global f32.
    EXPECT_TRUE(binary->ptx.find("red.global.add.f32") != std::string::npos ||
                binary->ptx.find("atom.global.add.f32") != std::string::npos);
    EXPECT_NE(binary->ptx.find(".shared"), std::string::npos);
    EXPECT_TRUE(binary->cubin.empty());
    const int status = run_ptxas(binary->ptx, arch);
    if (status == -1) GTEST_SKIP() << "no /usr/local/cuda/bin/ptxas";
    EXPECT_EQ(status, 0) << "ptxas rejected the PTX for " << arch;
  }
}

TEST_F(NvrtcTest, CubinIsAnElfForTheExactArch) {
  auto binary = nvrtc_->compile(kKernel, "test_kernel.cu", "sm_90", /*cubin=*/true);
  ASSERT_TRUE(binary.has_value()) << binary.error().message;
  ASSERT_GT(binary->cubin.size(), 64u);
  EXPECT_EQ(binary->cubin[0], 0x7f);
  EXPECT_EQ(binary->cubin[1], 'E');
  EXPECT_EQ(binary->cubin[2], 'L');
  EXPECT_EQ(binary->cubin[3], 'F');
  EXPECT_NE(binary->ptx.find(".target sm_90"), std::string::npos);
}

TEST_F(NvrtcTest, SyntaxErrorCarriesTheLogAndSourceName) {
  const std::string source = "extern \"C\" __global__ void broken(float* p) { p[0] = ; }\n";
  auto binary = nvrtc_->compile(source, "broken_kernel.cu", "sm_90", /*cubin=*/false);
  ASSERT_FALSE(binary.has_value());
  const std::string& message = binary.error().message;
  EXPECT_NE(message.find("broken_kernel.cu"), std::string::npos) << message;
  // NVRTC's log line: "broken_kernel.cu(1): error: expected an expression".
  EXPECT_NE(message.find("broken_kernel.cu(1): error"), std::string::npos) << message;
  EXPECT_NE(message.find("expected an expression"), std::string::npos) << message;
}

TEST_F(NvrtcTest, BadArchIsRejectedBeforeCompiling) {
  auto binary = nvrtc_->compile(kKernel, "test_kernel.cu", "compute_90", false);
  ASSERT_FALSE(binary.has_value());
  EXPECT_NE(binary.error().message.find("expected sm_XX"), std::string::npos)
      << binary.error().message;
}

TEST_F(NvrtcTest, SupportedArchsIncludeSm90) {
  const std::vector<int> archs = nvrtc_->supported_archs();
  if (archs.empty()) GTEST_SKIP() << "this NVRTC does not list its architectures";
  EXPECT_NE(std::find(archs.begin(), archs.end(), 90), archs.end());
  EXPECT_TRUE(std::is_sorted(archs.begin(), archs.end()));
}

TEST(NvrtcLoad, MissingLibraryNamedByTheSearchIsReportedOrFallsBack) {
  // A bad KILN_NVRTC_LIBRARY (handed down from the edge) is tried first and listed in the error
  // if nothing else loads.
  NvrtcSearch search;
  search.library = "/nonexistent/libnvrtc.so.99";
  auto loaded = Nvrtc::load(search);
  if (loaded) {
    EXPECT_NE((*loaded)->library_path(), "/nonexistent/libnvrtc.so.99");
  } else {
    EXPECT_NE(loaded.error().message.find("/nonexistent/libnvrtc.so.99"), std::string::npos)
        << loaded.error().message;
  }
}

TEST(ParseArch, AcceptsSmNumbers) {
  EXPECT_EQ(parse_arch("sm_80").value_or(-1), 80);
  EXPECT_EQ(parse_arch("sm_90").value_or(-1), 90);
  EXPECT_EQ(parse_arch("sm_120").value_or(-1), 120);
}

TEST(ParseArch, RejectsOtherForms) {
  for (const char* bad : {"90", "sm_x", "compute_90", "sm_", "sm_9", "SM_90", "sm_90a", ""}) {
    auto parsed = parse_arch(bad);
    ASSERT_FALSE(parsed.has_value()) << bad;
    EXPECT_NE(parsed.error().message.find("sm_XX"), std::string::npos) << parsed.error().message;
  }
}

}  // namespace
}  // namespace kiln::codegen::cuda
