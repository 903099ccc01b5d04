// CUDA C -> PTX (and cubin for an exact sm_XX) through NVRTC, loaded with dlopen: one kiln binary
// runs with or without the CUDA toolkit, and compiling needs no GPU. The one place that knows
// NVRTC's API.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/error.h"

namespace kiln::codegen::cuda {

struct CudaBinary {
  std::string ptx;             // for compute_XX of the requested arch
  std::vector<uint8_t> cubin;  // for sm_XX exactly; empty unless asked for
  std::string log;             // NVRTC's program log (warnings)
};

// Where to look for libnvrtc besides the loader's path and /usr/local/cuda/lib64, as the
// environment says at the edge (runtime/config.h).
struct NvrtcSearch {
  std::string library;    // tried first (KILN_NVRTC_LIBRARY)
  std::string cuda_home;  // its lib64 is searched last (CUDA_HOME)
};

class Nvrtc {
 public:
  // Finds libnvrtc.so.<major>: search.library, the loader's path, /usr/local/cuda/lib64, then
  // search.cuda_home/lib64; the error says where it looked.
  static Expected<std::shared_ptr<const Nvrtc>> load(const NvrtcSearch& search = {});
  ~Nvrtc();
  Nvrtc(const Nvrtc&) = delete;
  Nvrtc& operator=(const Nvrtc&) = delete;

  std::string version() const;       // "13.0"
  std::string library_path() const;  // the file or soname that was loaded
  // The sm_XX numbers NVRTC can compile for (nvrtcGetSupportedArchs), ascending; empty when
  // this NVRTC cannot say.
  std::vector<int> supported_archs() const;
  // `arch` is "sm_80", "sm_90", ...: PTX (.target sm_XX), plus a cubin for sm_XX with `cubin`
  // (one NVRTC compilation for sm_XX where NVRTC keeps its PTX, as 12+ does). Thread-safe.
  // Errors carry NVRTC's log and `name`.
  Expected<CudaBinary> compile(const std::string& source, const std::string& name,
                               std::string_view arch, bool cubin) const;

 private:
  Nvrtc() = default;
  struct Api;
  std::unique_ptr<Api> api_;
};

// "sm_90" -> 90; an error listing the accepted form otherwise.
Expected<int> parse_arch(std::string_view arch);

}  // namespace kiln::codegen::cuda
