// Test helpers for GPU source: NVRTC loading, and compiling many CUDA kernels as one translation
// unit (each in its own namespace) so that NVRTC and ptxas run once per architecture.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "codegen/cuda/nvrtc.h"

namespace kiln::codegen::gpu {

inline std::shared_ptr<const cuda::Nvrtc> test_nvrtc() {
  static auto lib = cuda::Nvrtc::load();
  return lib ? *lib : nullptr;
}

inline std::string nvrtc_unavailable() {
  auto lib = cuda::Nvrtc::load();
  return lib ? "" : "NVRTC cannot be loaded: " + lib.error().message;
}

// Every source must have a distinct entry name. PTX for sm_80 and sm_90, each checked by ptxas
// (-O0: the check is that the PTX is valid; optimizing it would only cost time).
inline void expect_cuda_batch_compiles(const std::vector<std::pair<std::string, std::string>>& sources,
                                       const std::string& batch) {
  auto lib = test_nvrtc();
  ASSERT_TRUE(lib) << nvrtc_unavailable();
  std::string unit;
  for (size_t i = 0; i < sources.size(); ++i)
    unit += fmt::format("namespace kiln_batch_{} {{ // {}\n{}}}\n", i, sources[i].first, sources[i].second);
  const bool have_ptxas = std::filesystem::exists("/usr/local/cuda/bin/ptxas");
  for (const char* arch : {"sm_80", "sm_90"}) {
    auto bin = lib->compile(unit, batch, arch, false);
    ASSERT_TRUE(bin.has_value()) << batch << " " << arch << ": " << bin.error().message;
    if (!have_ptxas) continue;
    const std::string ptx = testing::TempDir() + "/kiln_gpu_" + batch + "_" + arch + ".ptx";
    std::ofstream(ptx) << bin->ptx;
    const std::string cmd = fmt::format("/usr/local/cuda/bin/ptxas -O0 -arch={} {} -o /dev/null", arch, ptx);
    EXPECT_EQ(std::system(cmd.c_str()), 0) << batch << ": ptxas rejected " << ptx;
  }
}

}  // namespace kiln::codegen::gpu
