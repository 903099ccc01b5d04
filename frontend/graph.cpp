// kiln::Graph (include/kiln/kiln.h): a graph file read once (frontend/kg_call.h), called on tensors
// and dumped.
#include <string_view>

#include "frontend/inspect.h"
#include "frontend/kg_call.h"
#include "kiln/kiln.h"

namespace kiln {

Expected<Graph> Graph::load(const std::string& path) {
  auto file = detail::read_kg_file(path);
  if (!file) return std::unexpected(file.error());
  return Graph(std::move(*file));
}

Expected<Graph> Graph::parse(std::string_view kg_text, std::string_view filename) {
  auto file = detail::read_kg_text(kg_text, filename);
  if (!file) return std::unexpected(file.error());
  return Graph(std::move(*file));
}

Expected<Graph> Graph::trace(const std::vector<Tensor>& outputs, const std::vector<Tensor>& args) {
  auto file = detail::trace_kg(outputs, args);
  if (!file) return std::unexpected(file.error());
  return Graph(std::move(*file));
}

std::vector<GraphInput> Graph::inputs() const {
  std::vector<GraphInput> out;
  for (size_t i = 0; i < file_->callable_inputs(); ++i) {
    const auto& [name, node] = file_->kg.inputs[i];
    out.push_back({name, node->dtype, node->shape, ir::input_symbols(*node)});
  }
  return out;
}

std::vector<std::string> Graph::outputs() const {
  std::vector<std::string> out;
  for (const auto& [name, node] : file_->kg.outputs) out.push_back(name);
  return out;
}

Expected<std::vector<Tensor>> Graph::call(const Device& device, const std::vector<Tensor>& inputs) const {
  return detail::call_kg(device, file_, {}, inputs);
}

Expected<std::vector<Tensor>> Graph::call(
    const Device& device, const std::vector<std::pair<std::string, Tensor>>& inputs) const {
  std::vector<std::string_view> names;
  std::vector<Tensor> tensors;
  for (const auto& [name, t] : inputs) {
    names.push_back(name);
    tensors.push_back(t);
  }
  return detail::call_kg(device, file_, names, tensors);
}

Expected<std::string> Graph::dump(const Device& device, std::string_view stage, bool why) const {
  return detail::dump_kg(device, *file_, stage, why);
}

}  // namespace kiln
