// Kernel source and binaries per target, for `kiln dump --target ... [--out-dir DIR]`.
#include "tools/dump_gpu.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "codegen/cuda/nvrtc.h"
#include "codegen/gpu/gpu_source.h"
#include "codegen/spirv/spirv_compiler.h"
#include "runtime/dump_text.h"

namespace kiln::tools {

namespace {

// One kernel in every form its target has, computed on demand.
struct KernelForms {
  std::string source;           // .ll, .cu or .comp
  std::string ptx;              // cuda
  std::vector<uint8_t> cubin;   // cuda, with out_dir
  std::vector<uint32_t> spirv;  // vulkan
};

// NVRTC, loaded once per dump (not per kernel) and only when PTX is wanted.
class NvrtcOnce {
 public:
  Expected<const codegen::cuda::Nvrtc*> get() {
    if (!loaded_) loaded_ = codegen::cuda::Nvrtc::load();
    if (!*loaded_) return std::unexpected(loaded_->error());
    return loaded_->value().get();
  }

 private:
  std::optional<Expected<std::shared_ptr<const codegen::cuda::Nvrtc>>> loaded_;
};

Expected<KernelForms> forms_of(const runtime::PlanStep& step, const TargetDumpOptions& o,
                               bool binaries, NvrtcOnce& nvrtc_once) {
  KernelForms f;
  if (o.target == "cpu") {
    if (!step.artifact) return make_error("internal: the cpu plan was not compiled");
    f.source = step.artifact->llvm_ir;
    return f;
  }
  auto dialect = o.target == "cuda" ? codegen::gpu::Dialect::cuda : codegen::gpu::Dialect::glsl;
  auto src = codegen::gpu::emit_source(step.kernel, {}, dialect);
  if (!src) return make_error(fmt::format("{}: {}", step.kernel.name, src.error().message));
  f.source = src->text;
  if (!binaries) return f;
  if (o.target == "cuda") {
    auto nvrtc = nvrtc_once.get();
    if (!nvrtc) return std::unexpected(nvrtc.error());
    auto bin = (*nvrtc)->compile(src->text, step.kernel.name, o.arch, !o.out_dir.empty());
    if (!bin) return std::unexpected(bin.error());
    f.ptx = std::move(bin->ptx);
    f.cubin = std::move(bin->cubin);
  } else {
    auto words = codegen::spirv::compile_glsl(src->text, step.kernel.name + ".comp");
    if (!words) return std::unexpected(words.error());
    f.spirv = std::move(*words);
  }
  return f;
}

Expected<void> write_file(const std::filesystem::path& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) return make_error(fmt::format("cannot write '{}'", path.string()));
  return {};
}

}  // namespace

Expected<std::string> target_kernels_text(const runtime::Plan& plan, const TargetDumpOptions& o) {
  const char* comment = o.target == "cpu" || o.stage == "spirv" ? ";" : "//";
  bool binaries = o.stage == "ptx" || o.stage == "spirv";
  std::string out = fmt::format("{} {} kernel{} for {}{}\n", comment, plan.steps.size(),
                                plan.steps.size() == 1 ? "" : "s", o.target,
                                o.target == "cuda" && o.stage == "ptx" ? " " + o.arch : "");
  NvrtcOnce nvrtc;
  for (const runtime::PlanStep& step : plan.steps) {
    auto f = forms_of(step, o, binaries, nvrtc);
    if (!f) return std::unexpected(f.error());
    out += fmt::format("\n{0} {1}: {2}\n{0} {3}\n", comment, step.kernel.name,
                       fmt::join(step.values, " "), runtime::parameters_line(step));
    if (o.stage == "ptx") {
      out += f->ptx;
    } else if (o.stage == "spirv") {
      auto text = codegen::spirv::disassemble(f->spirv);
      if (!text) return std::unexpected(text.error());
      out += *text;
    } else {
      out += f->source;
    }
  }
  return out;
}

Expected<std::vector<std::string>> target_kernel_sources(const runtime::Plan& plan,
                                                         const TargetDumpOptions& o) {
  NvrtcOnce nvrtc;  // never loaded: sources need no binaries
  std::vector<std::string> sources;
  for (const runtime::PlanStep& step : plan.steps) {
    auto f = forms_of(step, o, /*binaries=*/false, nvrtc);
    if (!f) return std::unexpected(f.error());
    sources.push_back(std::move(f->source));
  }
  return sources;
}

std::string source_language(const std::string& target) {
  return target == "cuda" ? "CUDA C" : target == "vulkan" ? "GLSL" : "LLVM IR";
}

Expected<std::vector<std::string>> write_kernel_files(const runtime::Plan& plan,
                                                      const TargetDumpOptions& o) {
  std::error_code ec;
  std::filesystem::create_directories(o.out_dir, ec);
  if (ec) return make_error(fmt::format("cannot create '{}': {}", o.out_dir, ec.message()));
  std::vector<std::string> written;
  auto put = [&](const std::string& name, const void* data, size_t size) -> Expected<void> {
    std::filesystem::path p = std::filesystem::path(o.out_dir) / name;
    if (auto ok = write_file(p, data, size); !ok) return ok;
    written.push_back(p.string());
    return {};
  };
  NvrtcOnce nvrtc;
  for (const runtime::PlanStep& step : plan.steps) {
    auto f = forms_of(step, o, /*binaries=*/true, nvrtc);
    if (!f) return std::unexpected(f.error());
    const std::string& k = step.kernel.name;
    Expected<void> ok;
    if (o.target == "cpu") {
      ok = put(k + ".ll", f->source.data(), f->source.size());
    } else if (o.target == "cuda") {
      ok = put(k + ".cu", f->source.data(), f->source.size());
      if (ok) ok = put(k + ".ptx", f->ptx.data(), f->ptx.size());
      if (ok && !f->cubin.empty()) ok = put(k + ".cubin", f->cubin.data(), f->cubin.size());
    } else {
      ok = put(k + ".comp", f->source.data(), f->source.size());
      if (ok) ok = put(k + ".spv", f->spirv.data(), f->spirv.size() * sizeof(uint32_t));
    }
    if (!ok) return std::unexpected(ok.error());
  }
  return written;
}

}  // namespace kiln::tools
