// KILN_DUMP: writes each newly built plan's reproducer and dumps; problems are only warnings.
#include "runtime/dump_writer.h"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

#include <unistd.h>

#include "cache/store.h"
#include "runtime/dump_text.h"
#include "support/write_file.h"

namespace kiln::runtime {

namespace {

// Where this process looks for the next free number: several plans of one process, and several
// processes sharing one directory, never overwrite each other's files.
std::atomic<int> next_sequence{1};

// Creates `dir` and claims graph-NNNN.kg in it by creating the file exclusively.
Expected<std::string> claim_stem(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(fmt::format("cannot create '{}': {}", dir.string(), ec.message()));
  for (int attempt = 0; attempt < 100000; ++attempt) {
    std::string stem = fmt::format("graph-{:04}", next_sequence.fetch_add(1));
    std::string path = (dir / (stem + ".kg")).string();
    if (FILE* f = std::fopen(path.c_str(), "wx")) {
      std::fclose(f);
      return stem;
    }
    if (errno != EEXIST) return make_error(fmt::format("cannot create '{}': {}", path, std::strerror(errno)));
  }
  return make_error(fmt::format("no free graph-NNNN.kg name left in '{}'", dir.string()));
}

}  // namespace

Expected<std::vector<std::string>> write_plan_files(const std::string& dir, const std::string& stem,
                                                    const std::vector<const ir::Node*>& outputs,
                                                    const std::vector<const ir::Node*>& inputs,
                                                    const Plan& plan, const ValueNamer& namer,
                                                    std::string_view source_extension) {
  ValueNamer opt_namer = optimized_namer(plan, outputs, namer);
  passes::CostModel model(passes::DeviceRates::reference_cpu());
  std::vector<std::pair<std::string, std::string>> files = {
      {".kg", ir::print_kg(standalone_graph(outputs, inputs, namer))},
      {".optimized.kg", ir::print_kg(optimized_graph(plan, outputs, inputs, namer))},
      {".groups.txt", groups_text(plan, opt_namer, model, /*why=*/true)},
      {".kernels.txt", kernels_text(plan, inputs)},
  };
  bool compiled = !plan.steps.empty() && plan.steps.front().artifact;
  if (compiled)
    files.emplace_back(fmt::format(".source.{}", source_extension), source_text(plan, source_extension));
  std::vector<std::string> written;
  for (const auto& [suffix, text] : files) {
    std::filesystem::path path = std::filesystem::path(dir) / (stem + suffix);
    if (auto w = write_file(path.string(), text); !w) return std::unexpected(w.error());
    written.push_back(path.string());
  }
  return written;
}

PlanDump::PlanDump(const std::string& dir, const std::vector<const ir::Node*>& outputs,
                   const std::vector<const ir::Node*>& inputs, ValueNamer namer, std::string fuser)
    : outputs_(outputs), inputs_(inputs), namer_(std::move(namer)), fuser_(std::move(fuser)) {
  if (dir.empty()) return;
  auto stem = claim_stem(dir);
  if (!stem) {
    fmt::print(stderr, "kiln: warning: KILN_DUMP: {}\n", stem.error().message);
    return;
  }
  dir_ = dir;
  stem_ = *stem;
  write(stem_ + ".kg", ir::print_kg(standalone_graph(outputs_, inputs_, namer_)));
  std::error_code ec;
  std::filesystem::create_directory(std::filesystem::path(dir_) / (stem_ + ".steps"), ec);
  if (ec) {
    fmt::print(stderr, "kiln: warning: KILN_DUMP: cannot create '{}.steps': {}\n", stem_,
               ec.message());
    stem_.clear();
  }
}

void PlanDump::write(const std::string& file, const std::string& text) {
  if (!active()) return;
  if (auto w = write_file((std::filesystem::path(dir_) / file).string(), text); !w) {
    fmt::print(stderr, "kiln: warning: KILN_DUMP: {}\n", w.error().message);
    stem_.clear();  // the rest would fail the same way
  }
}

void PlanDump::lowering_step(int number, const passes::LoweringStep& step,
                             const passes::Lowering& ir) {
  if (!active()) return;
  last_step_ = number;
  ValueNamer namer = rewritten_namer(ir.outputs, outputs_, namer_);
  std::string file = fmt::format("{}.steps/{:02}-{}", stem_, number, step.name);
  switch (step.produces) {
    case passes::IrLevel::graph:
      write(file + ".kg", ir::print_kg(standalone_graph(ir.outputs, inputs_, namer)));
      break;
    case passes::IrLevel::groups: {
      passes::CostModel model(passes::DeviceRates::reference_cpu());
      write(file + ".txt", fusion_text(ir.fusion, fuser_, {}, namer, model, /*why=*/true));
      break;
    }
    case passes::IrLevel::kernels: {
      std::string text =
          fmt::format("# {} kernel{}\n", ir.kernels.size(), ir.kernels.size() == 1 ? "" : "s");
      for (size_t k = 0; k < ir.kernels.size(); ++k) {
        text += kernel_block(ir.kernels[k].kernel, group_values(ir.fusion.groups[k], namer));
      }
      write(file + ".txt", text);
      break;
    }
    case passes::IrLevel::facts: {
      std::string text;
      for (const passes::LoweredKernel& k : ir.kernels)
        text += fmt::format("# {}\n{}\n", k.kernel.name, k.facts ? kir::facts_text(k.kernel, *k.facts) : "");
      write(file + ".txt", text);
      break;
    }
  }
}

void PlanDump::executor_step(std::string_view name, std::string_view extension,
                             const std::string& text) {
  if (!active()) return;
  write(fmt::format("{}.steps/{:02}-{}.{}", stem_, ++last_step_, name, extension), text);
}

void PlanDump::finish(const Plan& plan, std::string_view source_extension) {
  if (!active()) return;
  auto written = write_plan_files(dir_, stem_, outputs_, inputs_, plan, namer_, source_extension);
  if (!written) fmt::print(stderr, "kiln: warning: KILN_DUMP: {}\n", written.error().message);
}

void record_graph(const std::string& dir, const std::vector<const ir::Node*>& outputs,
                  const std::vector<const ir::Node*>& inputs, const ValueNamer& namer) {
  if (dir.empty()) return;
  std::string text = ir::print_kg(standalone_graph(outputs, inputs, namer));
  std::string digest = cache::KeyParts{{{"graph", text}}}.digest();
  std::filesystem::path path = std::filesystem::path(dir) / ("graph-" + digest.substr(0, 16) + ".kg");
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) return;
  std::filesystem::create_directories(dir, ec);
  // Written under a temporary name and renamed: a reader (kiln warm) never sees half a file.
  std::filesystem::path tmp = path;
  tmp += fmt::format(".tmp-{}", ::getpid());
  auto w = write_file(tmp.string(), text);
  if (w) std::filesystem::rename(tmp, path, ec);
  if (!w || ec)
    fmt::print(stderr, "kiln: warning: KILN_RECORD: {}\n",
               w ? fmt::format("cannot write '{}': {}", path.string(), ec.message()) : w.error().message);
}

}  // namespace kiln::runtime
