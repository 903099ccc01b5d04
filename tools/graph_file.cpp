// Reading `.kg` and `.onnx` graph files for the kiln tools.
#include "tools/graph_file.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/kg.h"
#include "onnx/importer.h"
#include "runtime/executor.h"
#include "tools/npy.h"

namespace kiln::tools {

bool is_onnx_path(const std::string& path) {
  return std::filesystem::path(path).extension() == ".onnx";
}

Expected<DimArg> read_dim_arg(const std::string& arg, bool ranges) {
  const auto eq = arg.find('=');
  DimArg out{arg.substr(0, eq), -1, -1};
  if (!out.name.empty() && out.name[0] == '?') out.name.erase(0, 1);
  const auto number = [](std::string_view text) -> int64_t {
    int64_t n = -1;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    return ec == std::errc() && end == text.data() + text.size() && !text.empty() ? n : -1;
  };
  if (eq != std::string::npos) {
    const std::string_view value = std::string_view(arg).substr(eq + 1);
    const auto dots = ranges ? value.find("..") : std::string_view::npos;
    out.lo = number(value.substr(0, dots));
    out.hi = dots == std::string_view::npos ? out.lo : number(value.substr(dots + 2));
  }
  if (out.name.empty() || out.lo < 0 || out.hi < out.lo)
    return make_error(
        ranges ? fmt::format("--dim '{}': expected NAME=N or NAME=LO..HI, non-negative integers "
                             "with LO <= HI",
                             arg)
               : fmt::format("--dim '{}': expected NAME=N, N a non-negative integer", arg));
  return out;
}

Expected<void> parse_dim_arg(const std::string& arg, ir::KgSizes& sizes) {
  auto dim = read_dim_arg(arg, /*ranges=*/false);
  if (!dim) return std::unexpected(dim.error());
  if (!sizes.emplace(dim->name, dim->lo).second)
    return make_error(fmt::format("--dim {} is given twice", dim->name));
  return {};
}

namespace {

// The model with its symbolic dimensions sized by the bound inputs (`options.input_values`) and
// kept symbolic, the values bound at run time: its kernels are those `kiln warm --dim` and a
// kiln::Graph make, and inputs left to --random-inputs take those sizes too. Where an op reads a
// bound value as a constant (a Reshape's shape given as an input), that import fails, and the
// model is read specialized to the values. Without symbolic dimensions bound, the values are
// given at import as they are.
Expected<onnx::ImportedModel> import_bound(ir::Graph& g, const std::string& path,
                                           const onnx::ImportOptions& options) {
  if (options.input_values.empty()) return onnx::import_model_file(g, path, options);
  auto bytes = ir::read_text_file(path);
  if (!bytes) return std::unexpected(bytes.error());
  std::map<std::string, ir::Shape> shapes;
  for (const auto& [name, t] : options.input_values) shapes.emplace(name, t.shape);
  auto given = onnx::bound_sizes(*bytes, shapes);
  if (given && !given->empty()) {
    onnx::ImportOptions symbolic;
    symbolic.sizes = *given;
    for (const auto& [symbol, n] : options.sizes) symbolic.sizes.insert_or_assign(symbol, n);
    // A failed import leaves only nodes that nothing reaches in `g`.
    if (auto model = onnx::import_model(g, *bytes, symbolic)) return model;
  }
  auto model = onnx::import_model(g, *bytes, options);
  if (!model) return make_error(fmt::format("{}: {}", path, model.error().message));
  return model;
}

}  // namespace

Expected<GraphFile> read_graph_file(ir::Graph& g, const std::string& path, const InputSpec* inputs,
                                    const ir::KgSizes* sizes, bool other_sizes_ok) {
  GraphFile out;
  if (sizes && sizes->empty()) sizes = nullptr;
  if (!is_onnx_path(path)) {
    auto graph = ir::read_kg_file(g, path, sizes);
    if (!graph) return std::unexpected(graph.error());
    out.graph = std::move(*graph);
    if (sizes && !other_sizes_ok)
      for (const auto& [name, n] : *sizes)
        if (!std::ranges::any_of(out.graph.sizes, [&](const auto& s) { return s.first == name; }))
          return make_error(fmt::format("--dim {}={}: {} has no size symbol '?{}'", name, n, path, name));
    return out;
  }
  onnx::ImportOptions options;
  if (sizes) options.sizes = *sizes;
  if (inputs)
    for (const auto& [name, file] : inputs->files) {
      auto t = read_input_file(file);
      if (!t) return std::unexpected(t.error());
      options.input_values.emplace(name, std::move(*t));
    }
  auto model = import_bound(g, path, options);
  if (!model) return std::unexpected(model.error());
  if (sizes && !other_sizes_ok)
    for (const auto& [name, n] : *sizes)
      if (!std::ranges::any_of(model->graph.sizes,
                               [&](const auto& s) { return s.first == name; })) {
        std::vector<std::string> symbols;
        for (const auto& [symbol, size] : model->graph.sizes) symbols.push_back(symbol);
        return make_error(fmt::format(
            "--dim {}={}: {} has no symbolic input dimension '{}' (its symbols: {})", name, n, path,
            name, symbols.empty() ? "none" : fmt::format("{}", fmt::join(symbols, ", "))));
      }
  out.graph = std::move(model->graph);
  out.constants = std::move(model->constants);
  return out;
}

// A graph whose size symbol is on an inner axis (`f32[4,?n=10]`): read again with each such symbol
// one larger and lowered by `executor`, nothing compiled (runtime::Executor::note_sizes), so that
// the run's kernels take those sizes at run time from this first size on, as a kiln::Graph's
// first call does: another process at another size then finds the same kernels in the cache.
// Best effort: a reading or lowering that fails changes nothing but that.
void note_inner_sizes(runtime::Executor& executor, const std::string& path,
                      const ir::KgGraph& graph) {
  const std::optional<ir::KgSizes> sizes = ir::second_reading_sizes(graph);
  if (!sizes) return;
  ir::Graph other;
  auto file = read_graph_file(other, path, nullptr, &*sizes, /*other_sizes_ok=*/true);
  if (file) (void)executor.note_sizes(other, file->graph.output_nodes());
}
}  // namespace kiln::tools
