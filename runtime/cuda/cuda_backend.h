// The CUDA GpuBackend (open_cuda_backend in runtime/gpu_backend.h) and the one decision it makes
// without a device: what NVRTC compiles for a given compute capability.
#pragma once

#include <string>
#include <vector>

#include "kiln/error.h"

namespace kiln::runtime::cuda {

// What compile() asks NVRTC for: a cubin for the device's exact sm_XX when NVRTC knows it;
// otherwise PTX for the newest older architecture NVRTC knows, which the driver JIT-compiles
// for the device at load time.
struct CompileTarget {
  int sm = 0;         // 90 for sm_90
  bool cubin = true;  // false: PTX for the driver's JIT
};

// `supported` is Nvrtc::supported_archs() (empty: unknown, assume the device's own arch works).
// Fails when every architecture NVRTC knows is newer than the device.
Expected<CompileTarget> choose_compile_target(int device_sm, const std::vector<int>& supported,
                                              const std::string& nvrtc_version);

}  // namespace kiln::runtime::cuda
