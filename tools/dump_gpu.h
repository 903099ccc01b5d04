// `kiln dump --target cuda|vulkan`: each kernel of a plan as CUDA C, PTX, GLSL or SPIR-V (no GPU
// needed), and `--out-dir` files that external tools read (ptxas, spirv-val, spirv-dis, llc).
#pragma once

#include <string>
#include <vector>

#include "runtime/plan.h"
#include "support/error.h"

namespace kiln::tools {

struct TargetDumpOptions {
  std::string target = "cpu";  // cpu | cuda | vulkan
  std::string arch = "sm_90";  // cuda: the sm_XX the PTX (and cubin) is for
  std::string stage;           // source | ptx (cuda) | spirv (vulkan)
  std::string out_dir;         // empty: none
};

// The text of `stage` for every kernel of `plan` (which the cpu target must have compiled).
Expected<std::string> target_kernels_text(const runtime::Plan& plan, const TargetDumpOptions& o);
// The source of every kernel in the target's own language (cpu: LLVM IR of the compiled plan; cuda:
// CUDA C; vulkan: GLSL), one per step.
Expected<std::vector<std::string>> target_kernel_sources(const runtime::Plan& plan,
                                                         const TargetDumpOptions& o);
// "LLVM IR", "CUDA C" or "GLSL".
std::string source_language(const std::string& target);

// Writes one file per kernel and kind into o.out_dir: k0.ll (cpu), k0.cu + k0.ptx + k0.cubin
// (cuda), k0.comp + k0.spv (vulkan; binary SPIR-V). Returns the paths written.
Expected<std::vector<std::string>> write_kernel_files(const runtime::Plan& plan,
                                                      const TargetDumpOptions& o);

}  // namespace kiln::tools
