// `kiln dump --stage source|ptx|spirv` and `--out-dir`: each kernel of a plan in the forms its
// target gives (runtime/target.h: Target::forms): LLVM IR (cpu); CUDA C, PTX and the cubin (cuda);
// GLSL, SPIR-V disassembled and binary (vulkan). The forms are those of the artifacts the plan
// runs, compiled with the schedules a run uses.
#pragma once

#include <string>
#include <vector>

#include "runtime/plan.h"
#include "runtime/target.h"
#include "kiln/error.h"

namespace kiln::tools {

// The text of `stage` (source, ptx, spirv) for every kernel of `plan`, each headed by a comment
// naming the kernel, its values and its parameters. An error when the target has no such form.
Expected<std::string> target_kernels_text(const runtime::Plan& plan, runtime::Target& target,
                                          const std::string& stage);
// The source of every kernel in the target's own language, one per step.
std::vector<std::string> target_kernel_sources(const runtime::Plan& plan);
// "LLVM IR", "CUDA C" or "GLSL", by the target's source extension.
std::string source_language(const runtime::Target& target);

// Writes one file per kernel and form into `dir`: k0.ll (cpu), k0.cu + k0.ptx + k0.cubin (cuda),
// k0.comp + k0.spv (vulkan; binary SPIR-V). Returns the paths written.
Expected<std::vector<std::string>> write_kernel_files(const runtime::Plan& plan,
                                                      runtime::Target& target, const std::string& dir);

}  // namespace kiln::tools
