// NVRTC behind kiln's Nvrtc interface: finds libnvrtc with dlopen, resolves its entry points and
// compiles CUDA C to PTX and cubin. NVRTC's own types are declared here so no CUDA header is
// needed.
#include "codegen/cuda/nvrtc.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

namespace kiln::codegen::cuda {

namespace {

// From nvrtc.h (stable since CUDA 7): results are ints, 0 is NVRTC_SUCCESS; programs are opaque.
using nvrtcResult = int;
using nvrtcProgram = struct NvrtcProgramOpaque*;
constexpr nvrtcResult kNvrtcSuccess = 0;

// NVRTC stays loaded for the life of the process once opened: it allocates process-lifetime state
// when loaded (its own libstdc++'s exception pool, 72704 bytes), and a library unloaded at exit
// leaves LeakSanitizer frames it cannot name, so scripts/lsan.supp could not single it out.
struct LibraryCloser {
  void operator()(void*) const {}
};
using LibraryHandle = std::unique_ptr<void, LibraryCloser>;

// Where libnvrtc may be, in the order tried.
std::vector<std::string> candidate_paths(const NvrtcSearch& search) {
  std::vector<std::string> paths;
  if (!search.library.empty()) paths.push_back(search.library);
  for (const char* soname : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"})
    paths.emplace_back(soname);
  std::vector<std::filesystem::path> dirs = {"/usr/local/cuda/lib64"};
  if (!search.cuda_home.empty()) dirs.push_back(std::filesystem::path(search.cuda_home) / "lib64");
  for (const auto& dir : dirs) {
    std::error_code ec;
    std::vector<std::string> found;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      const std::string file = entry.path().filename().string();
      if (file.starts_with("libnvrtc.so")) found.push_back(entry.path().string());
    }
    // Newest soname first ("libnvrtc.so.13" sorts after "libnvrtc.so").
    std::sort(found.rbegin(), found.rend());
    paths.insert(paths.end(), found.begin(), found.end());
  }
  return paths;
}

// The CUDA include directory beside the library (lib64/../include), for cuda_fp16.h and
// cuda_bf16.h; empty when there is none.
std::string include_dir_of(void* symbol) {
  Dl_info info{};
  if (dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return {};
  std::error_code ec;
  const auto library = std::filesystem::canonical(info.dli_fname, ec);
  if (ec) return {};
  const auto include = library.parent_path().parent_path() / "include";
  return std::filesystem::is_directory(include / "", ec) ? include.string() : std::string();
}

// NVRTC's entry points and what load() learned; Nvrtc::Api is this (helpers below cannot name
// the private Nvrtc::Api).
struct NvrtcFunctions {
  std::string path;
  std::string include_dir;
  int major = 0;
  int minor = 0;
  std::vector<int> archs;
  nvrtcResult (*version)(int*, int*) = nullptr;
  nvrtcResult (*create_program)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                                const char* const*) = nullptr;
  nvrtcResult (*compile_program)(nvrtcProgram, int, const char* const*) = nullptr;
  nvrtcResult (*get_program_log_size)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*get_program_log)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*get_ptx_size)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*get_ptx)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*get_cubin_size)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*get_cubin)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*destroy_program)(nvrtcProgram*) = nullptr;
  const char* (*get_error_string)(nvrtcResult) = nullptr;
  // Optional (CUDA >= 11.2).
  nvrtcResult (*get_num_supported_archs)(int*) = nullptr;
  nvrtcResult (*get_supported_archs)(int*) = nullptr;

  std::string error_text(nvrtcResult result) const {
    const char* text = get_error_string ? get_error_string(result) : nullptr;
    return text ? text : fmt::format("nvrtc error {}", result);
  }
};

template <class Fn>
bool resolve(void* library, const char* symbol, Fn& out, std::string& missing) {
  out = reinterpret_cast<Fn>(dlsym(library, symbol));
  if (!out) missing += (missing.empty() ? "" : ", ") + std::string(symbol);
  return out != nullptr;
}

// Resolves every entry point kiln uses; the error names the missing ones.
Expected<void> resolve_api(void* lib, NvrtcFunctions& api) {
  std::string missing;
  resolve(lib, "nvrtcVersion", api.version, missing);
  resolve(lib, "nvrtcCreateProgram", api.create_program, missing);
  resolve(lib, "nvrtcCompileProgram", api.compile_program, missing);
  resolve(lib, "nvrtcGetProgramLogSize", api.get_program_log_size, missing);
  resolve(lib, "nvrtcGetProgramLog", api.get_program_log, missing);
  resolve(lib, "nvrtcGetPTXSize", api.get_ptx_size, missing);
  resolve(lib, "nvrtcGetPTX", api.get_ptx, missing);
  resolve(lib, "nvrtcGetCUBINSize", api.get_cubin_size, missing);
  resolve(lib, "nvrtcGetCUBIN", api.get_cubin, missing);
  resolve(lib, "nvrtcDestroyProgram", api.destroy_program, missing);
  resolve(lib, "nvrtcGetErrorString", api.get_error_string, missing);
  if (!missing.empty()) return make_error("missing symbols " + missing);
  std::string optional;
  resolve(lib, "nvrtcGetNumSupportedArchs", api.get_num_supported_archs, optional);
  resolve(lib, "nvrtcGetSupportedArchs", api.get_supported_archs, optional);
  return {};
}

}  // namespace

struct Nvrtc::Api : NvrtcFunctions {
  LibraryHandle library;
};

Expected<std::shared_ptr<const Nvrtc>> Nvrtc::load(const NvrtcSearch& search) {
  std::string tried;
  for (const std::string& path : candidate_paths(search)) {
    LibraryHandle lib(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL));
    if (!lib) {
      const char* why = dlerror();
      tried += fmt::format("\n  {}: {}", path, why ? why : "not loadable");
      continue;
    }
    auto api = std::make_unique<Api>();
    if (auto ok = resolve_api(lib.get(), *api); !ok) {
      tried += fmt::format("\n  {}: {}", path, ok.error().message);
      continue;
    }
    if (nvrtcResult r = api->version(&api->major, &api->minor); r != kNvrtcSuccess)
      return make_error(
          fmt::format("nvrtc: {}: nvrtcVersion failed: {}", path, api->error_text(r)));
    int count = 0;
    if (api->get_num_supported_archs && api->get_supported_archs &&
        api->get_num_supported_archs(&count) == kNvrtcSuccess && count > 0) {
      api->archs.resize(static_cast<size_t>(count));
      if (api->get_supported_archs(api->archs.data()) != kNvrtcSuccess) api->archs.clear();
    }
    api->include_dir = include_dir_of(reinterpret_cast<void*>(api->version));
    api->path = path;
    api->library = std::move(lib);
    std::shared_ptr<Nvrtc> nvrtc(new Nvrtc());
    nvrtc->api_ = std::move(api);
    return std::shared_ptr<const Nvrtc>(std::move(nvrtc));
  }
  return make_error(
      "nvrtc: libnvrtc not found (set KILN_NVRTC_LIBRARY or install the CUDA "
      "toolkit); tried:" +
      tried);
}

Nvrtc::~Nvrtc() = default;

std::string Nvrtc::version() const {
  return fmt::format("{}.{}", api_->major, api_->minor);
}

std::string Nvrtc::library_path() const {
  return api_->path;
}

std::vector<int> Nvrtc::supported_archs() const {
  return api_->archs;
}

namespace {

// Owns one nvrtcProgram.
class Program {
 public:
  Program(const NvrtcFunctions& api, nvrtcProgram program) : api_(api), program_(program) {}
  ~Program() { api_.destroy_program(&program_); }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  nvrtcProgram get() const { return program_; }

  std::string log() const {
    size_t size = 0;
    if (api_.get_program_log_size(program_, &size) != kNvrtcSuccess || size <= 1) return {};
    std::string text(size, '\0');
    if (api_.get_program_log(program_, text.data()) != kNvrtcSuccess) return {};
    text.resize(size - 1);  // drop the terminating NUL
    return text;
  }

 private:
  const NvrtcFunctions& api_;
  nvrtcProgram program_;
};

// Reads one of the program's outputs (PTX or cubin) through its size and copy functions.
template <class Out>
Expected<Out> read_output(const NvrtcFunctions& api, nvrtcProgram program,
                          nvrtcResult (*size_fn)(nvrtcProgram, size_t*),
                          nvrtcResult (*get_fn)(nvrtcProgram, char*), const char* what) {
  size_t size = 0;
  if (nvrtcResult r = size_fn(program, &size); r != kNvrtcSuccess)
    return make_error(fmt::format("{} size: {}", what, api.error_text(r)));
  Out out(size, 0);
  if (nvrtcResult r = get_fn(program, reinterpret_cast<char*>(out.data())); r != kNvrtcSuccess)
    return make_error(fmt::format("{}: {}", what, api.error_text(r)));
  return out;
}

struct CompileOutput {
  std::string log;
  std::string ptx;
  std::vector<uint8_t> cubin;
};

// One NVRTC compilation for `gpu_arch` ("compute_90" or "sm_90").
Expected<CompileOutput> compile_once(const NvrtcFunctions& api, const std::string& source,
                                     const std::string& name, const std::string& gpu_arch) {
  nvrtcProgram raw = nullptr;
  if (nvrtcResult r = api.create_program(&raw, source.c_str(), name.c_str(), 0, nullptr, nullptr);
      r != kNvrtcSuccess)
    return make_error(fmt::format("nvrtc: {}: nvrtcCreateProgram: {}", name, api.error_text(r)));
  Program program(api, raw);
  std::vector<std::string> options = {"--gpu-architecture=" + gpu_arch, "-default-device",
                                      "--std=c++17"};
  if (!api.include_dir.empty()) options.push_back("-I" + api.include_dir);
  std::vector<const char*> argv;
  for (const auto& option : options) argv.push_back(option.c_str());
  nvrtcResult r = api.compile_program(program.get(), static_cast<int>(argv.size()), argv.data());
  CompileOutput out{program.log(), {}, {}};
  if (r != kNvrtcSuccess)
    return make_error(fmt::format("nvrtc: {}: compilation for {} failed ({}):\n{}", name, gpu_arch,
                                  api.error_text(r), out.log));
  // With sm_XX, NVRTC 12+ also keeps the PTX; older versions may not (compile() then asks again).
  const bool real_arch = gpu_arch.starts_with("sm_");
  auto ptx = read_output<std::string>(api, program.get(), api.get_ptx_size, api.get_ptx, "PTX");
  if (!ptx && !real_arch)
    return make_error(fmt::format("nvrtc: {}: {}", name, ptx.error().message));
  if (ptx) out.ptx = std::move(*ptx);
  while (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
  if (real_arch) {
    auto cubin = read_output<std::vector<uint8_t>>(api, program.get(), api.get_cubin_size,
                                                   api.get_cubin, "cubin");
    if (!cubin) return make_error(fmt::format("nvrtc: {}: {}", name, cubin.error().message));
    out.cubin = std::move(*cubin);
  }
  return out;
}

}  // namespace

Expected<CudaBinary> Nvrtc::compile(const std::string& source, const std::string& name,
                                    std::string_view arch, bool cubin) const {
  auto number = parse_arch(arch);
  if (!number) return make_error(fmt::format("nvrtc: {}: {}", name, number.error().message));
  // One compilation for sm_XX gives the cubin and (NVRTC 12+) the PTX; compute_XX otherwise.
  auto first =
      compile_once(*api_, source, name, fmt::format("{}_{}", cubin ? "sm" : "compute", *number));
  if (!first) return std::unexpected(first.error());
  CudaBinary binary{std::move(first->ptx), std::move(first->cubin), std::move(first->log)};
  if (binary.ptx.empty()) {
    auto ptx = compile_once(*api_, source, name, fmt::format("compute_{}", *number));
    if (!ptx) return std::unexpected(ptx.error());
    binary.ptx = std::move(ptx->ptx);
  }
  return binary;
}

Expected<int> parse_arch(std::string_view arch) {
  const auto bad = [&] {
    return make_error(fmt::format("cuda: bad architecture '{}': expected sm_XX, e.g. sm_90", arch));
  };
  if (!arch.starts_with("sm_") || arch.size() < 5 || arch.size() > 7) return bad();
  int value = 0;
  for (char c : arch.substr(3)) {
    if (c < '0' || c > '9') return bad();
    value = value * 10 + (c - '0');
  }
  if (value < 10) return bad();
  return value;
}

}  // namespace kiln::codegen::cuda
