// GLSL -> SPIR-V with shaderc; validation, optimization and disassembly with SPIRV-Tools.
#include "codegen/spirv/spirv_compiler.h"

#include <shaderc/shaderc.h>

#include <memory>
#include <spirv-tools/libspirv.hpp>
#include <spirv-tools/optimizer.hpp>

namespace kiln::codegen::spirv {
namespace {

constexpr spv_target_env kTargetEnv = SPV_ENV_VULKAN_1_2;

struct CompilerDeleter {
  void operator()(shaderc_compiler* c) const { shaderc_compiler_release(c); }
};
struct OptionsDeleter {
  void operator()(shaderc_compile_options* o) const { shaderc_compile_options_release(o); }
};
struct ResultDeleter {
  void operator()(shaderc_compilation_result* r) const { shaderc_result_release(r); }
};

// Collects SPIRV-Tools diagnostics into one message.
spvtools::MessageConsumer collect_into(std::string& out) {
  return [&out](spv_message_level_t, const char*, const spv_position_t& pos, const char* msg) {
    if (!out.empty()) out += "; ";
    out += "word " + std::to_string(pos.index) + ": " + msg;
  };
}

}  // namespace

Expected<std::vector<uint32_t>> compile_glsl(const std::string& glsl, const std::string& name,
                                             bool optimize) {
  std::unique_ptr<shaderc_compiler, CompilerDeleter> compiler(shaderc_compiler_initialize());
  std::unique_ptr<shaderc_compile_options, OptionsDeleter> options(
      shaderc_compile_options_initialize());
  if (!compiler || !options) return make_error("shaderc: cannot initialize the compiler");
  shaderc_compile_options_set_target_env(options.get(), shaderc_target_env_vulkan,
                                         shaderc_env_version_vulkan_1_2);
  shaderc_compile_options_set_target_spirv(options.get(), shaderc_spirv_version_1_5);
  // SPIRV-Tools runs the optimizer below, after validation of the unoptimized module.
  shaderc_compile_options_set_optimization_level(options.get(), shaderc_optimization_level_zero);
  std::unique_ptr<shaderc_compilation_result, ResultDeleter> result(
      shaderc_compile_into_spv(compiler.get(), glsl.data(), glsl.size(), shaderc_compute_shader,
                               name.c_str(), "main", options.get()));
  if (!result) return make_error("shaderc: " + name + ": compilation returned no result");
  if (shaderc_result_get_compilation_status(result.get()) != shaderc_compilation_status_success)
    return make_error("shaderc: " + name + ": " + shaderc_result_get_error_message(result.get()));
  const auto* bytes = reinterpret_cast<const uint32_t*>(shaderc_result_get_bytes(result.get()));
  std::vector<uint32_t> words(bytes, bytes + shaderc_result_get_length(result.get()) / 4);
  if (auto ok = validate(words); !ok)
    return make_error("spirv-val: " + name + ": " + ok.error().message);
  if (!optimize) return words;

  std::string diagnostics;
  spvtools::Optimizer optimizer(kTargetEnv);
  optimizer.SetMessageConsumer(collect_into(diagnostics));
  optimizer.RegisterPerformancePasses();
  std::vector<uint32_t> optimized;
  if (!optimizer.Run(words.data(), words.size(), &optimized))
    return make_error("spirv-opt: " + name + ": " + diagnostics);
  if (auto ok = validate(optimized); !ok)
    return make_error("spirv-val (after spirv-opt): " + name + ": " + ok.error().message);
  return optimized;
}

Expected<void> validate(const std::vector<uint32_t>& words) {
  std::string diagnostics;
  spvtools::SpirvTools tools(kTargetEnv);
  tools.SetMessageConsumer(collect_into(diagnostics));
  if (!tools.Validate(words)) return make_error(diagnostics.empty() ? "invalid module" : diagnostics);
  return {};
}

Expected<std::string> disassemble(const std::vector<uint32_t>& words) {
  std::string diagnostics, text;
  spvtools::SpirvTools tools(kTargetEnv);
  tools.SetMessageConsumer(collect_into(diagnostics));
  if (!tools.Disassemble(words, &text,
                         SPV_BINARY_TO_TEXT_OPTION_INDENT | SPV_BINARY_TO_TEXT_OPTION_FRIENDLY_NAMES))
    return make_error("spirv-dis: " + diagnostics);
  return text;
}

std::string toolchain_version() {
  unsigned int version = 0, revision = 0;
  shaderc_get_spv_version(&version, &revision);
  return std::string("shaderc spv ") + std::to_string(version >> 16) + "." +
         std::to_string((version >> 8) & 0xff) + "-r" + std::to_string(revision) + " / " +
         spvSoftwareVersionDetailsString();
}

}  // namespace kiln::codegen::spirv
