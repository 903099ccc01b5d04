// Reading `.kg` and `.onnx` graph files for the kiln tools.
#include "tools/graph_file.h"

#include <algorithm>
#include <charconv>
#include <filesystem>

#include <fmt/format.h>

#include "onnx/importer.h"
#include "tools/npy.h"

namespace kiln::tools {

bool is_onnx_path(const std::string& path) {
  return std::filesystem::path(path).extension() == ".onnx";
}

Expected<void> parse_dim_arg(const std::string& arg, ir::KgSizes& sizes) {
  const auto eq = arg.find('=');
  std::string name = arg.substr(0, eq);
  if (!name.empty() && name[0] == '?') name.erase(0, 1);
  int64_t n = -1;
  if (eq != std::string::npos) {
    const char* first = arg.data() + eq + 1;
    const char* last = arg.data() + arg.size();
    auto [end, ec] = std::from_chars(first, last, n);
    if (ec != std::errc() || end != last || first == last) n = -1;
  }
  if (name.empty() || n < 0)
    return make_error(fmt::format("--dim '{}': expected NAME=N, N a non-negative integer", arg));
  if (!sizes.emplace(name, n).second) return make_error(fmt::format("--dim {} is given twice", name));
  return {};
}

Expected<GraphFile> read_graph_file(ir::Graph& g, const std::string& path, const InputSpec* inputs,
                                    const ir::KgSizes* sizes) {
  GraphFile out;
  if (sizes && sizes->empty()) sizes = nullptr;
  if (!is_onnx_path(path)) {
    auto graph = ir::read_kg_file(g, path, sizes);
    if (!graph) return std::unexpected(graph.error());
    out.graph = std::move(*graph);
    if (sizes)
      for (const auto& [name, n] : *sizes)
        if (!std::ranges::any_of(out.graph.sizes, [&](const auto& s) { return s.first == name; }))
          return make_error(fmt::format("--dim {}={}: {} has no size symbol '?{}'", name, n, path, name));
    return out;
  }
  if (sizes) return make_error(fmt::format("--dim: {} is an ONNX model; its inputs' files fix its sizes", path));
  onnx::ImportOptions options;
  if (inputs)
    for (const auto& [name, file] : inputs->files) {
      auto t = read_input_file(file);
      if (!t) return std::unexpected(t.error());
      options.input_values.emplace(name, std::move(*t));
    }
  auto model = onnx::import_model_file(g, path, options);
  if (!model) return std::unexpected(model.error());
  out.graph = std::move(model->graph);
  out.constants = std::move(model->constants);
  return out;
}

}  // namespace kiln::tools
