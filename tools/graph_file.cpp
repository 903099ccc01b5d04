// Reading `.kg` and `.onnx` graph files for the kiln tools.
#include "tools/graph_file.h"

#include <filesystem>

#include "onnx/importer.h"
#include "tools/npy.h"

namespace kiln::tools {

bool is_onnx_path(const std::string& path) {
  return std::filesystem::path(path).extension() == ".onnx";
}

Expected<GraphFile> read_graph_file(ir::Graph& g, const std::string& path, const InputSpec* inputs) {
  GraphFile out;
  if (!is_onnx_path(path)) {
    auto graph = ir::read_kg_file(g, path);
    if (!graph) return std::unexpected(graph.error());
    out.graph = std::move(*graph);
    return out;
  }
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
