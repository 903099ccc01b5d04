// Kernel forms per target, for `kiln dump --target ... [--out-dir DIR]`.
#include "tools/dump_target.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

#include "runtime/dump_text.h"
#include "support/write_file.h"

namespace kiln::tools {

namespace {

Expected<std::vector<runtime::ArtifactForm>> forms_of(const runtime::PlanStep& step,
                                                      runtime::Target& target) {
  if (!step.artifact) return make_error("internal: the plan was not compiled");
  auto forms = target.forms(*step.artifact, step.kernel.name);
  if (!forms) return make_error(fmt::format("{}: {}", step.kernel.name, forms.error().message));
  return forms;
}

}  // namespace

Expected<std::string> target_kernels_text(const runtime::Plan& plan, runtime::Target& target,
                                          const std::string& stage) {
  const std::string_view comment =
      runtime::comment_marker(stage == "spirv" ? "spvasm" : target.source_extension());
  std::string out = fmt::format("{} {} kernel{} for {}\n", comment, plan.steps.size(),
                                plan.steps.size() == 1 ? "" : "s", target.name());
  for (const runtime::PlanStep& step : plan.steps) {
    auto forms = forms_of(step, target);
    if (!forms) return std::unexpected(forms.error());
    auto form = std::find_if(forms->begin(), forms->end(),
                             [&](const runtime::ArtifactForm& f) { return f.stage == stage; });
    if (form == forms->end())
      return make_error(fmt::format("{} has no {} form of its kernels", target.name(), stage));
    out += runtime::step_header(step, comment) + form->bytes;
  }
  return out;
}

std::vector<std::string> target_kernel_sources(const runtime::Plan& plan) {
  std::vector<std::string> sources;
  for (const runtime::PlanStep& step : plan.steps)
    sources.push_back(step.artifact ? step.artifact->source() : std::string());
  return sources;
}

std::string source_language(const runtime::Target& target) {
  const std::string ext = target.source_extension();
  return ext == "cu" ? "CUDA C" : ext == "comp" ? "GLSL" : "LLVM IR";
}

Expected<std::vector<std::string>> write_kernel_files(const runtime::Plan& plan,
                                                      runtime::Target& target, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(fmt::format("cannot create '{}': {}", dir, ec.message()));
  std::vector<std::string> written;
  for (const runtime::PlanStep& step : plan.steps) {
    auto forms = forms_of(step, target);
    if (!forms) return std::unexpected(forms.error());
    for (const runtime::ArtifactForm& f : *forms) {
      if (f.extension.empty()) continue;  // shown only (disassembly)
      const std::filesystem::path p = std::filesystem::path(dir) / (step.kernel.name + "." + f.extension);
      if (auto ok = write_file(p.string(), f.bytes); !ok) return std::unexpected(ok.error());
      written.push_back(p.string());
    }
  }
  return written;
}

}  // namespace kiln::tools
