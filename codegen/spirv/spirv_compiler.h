// GLSL 450 compute -> SPIR-V through shaderc, validated and optimized with SPIRV-Tools, and
// disassembled for dumps. The one place that includes shaderc and SPIRV-Tools headers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/error.h"

namespace kiln::codegen::spirv {

// Target environment: Vulkan 1.2 (SPIR-V 1.5).
// Compiles `glsl` (a compute shader with entry `main`); `name` appears in error messages. With
// `optimize`, the module goes through SPIRV-Tools' performance passes. The result is validated.
Expected<std::vector<uint32_t>> compile_glsl(const std::string& glsl, const std::string& name,
                                             bool optimize = true);
// spirv-val's rules for Vulkan 1.2; the error names the failing instruction.
Expected<void> validate(const std::vector<uint32_t>& words);
// spirv-dis text (friendly names, indented).
Expected<std::string> disassemble(const std::vector<uint32_t>& words);
// "shaderc <ver> / SPIRV-Tools <ver>": part of cache keys.
std::string toolchain_version();

}  // namespace kiln::codegen::spirv
