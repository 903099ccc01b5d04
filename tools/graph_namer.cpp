// make_namer: a snapshot of the graph's names, owned by the returned function.
#include "tools/graph_namer.h"

#include <memory>
#include <unordered_map>

namespace kiln::tools {

runtime::ValueNamer make_namer(const ir::KgGraph& graph) {
  auto names = std::make_shared<std::unordered_map<const ir::Node*, std::string>>();
  for (const auto& [name, node] : graph.inputs) (*names)[node] = "%" + name;
  for (const auto& [name, node] : graph.outputs) names->emplace(node, "%" + name);
  for (const auto& [name, node] : graph.values) names->emplace(node, "%" + name);
  return [names](const ir::Node* n) {
    auto it = names->find(n);
    return it != names->end() ? it->second : runtime::default_value_name(n);
  };
}

}  // namespace kiln::tools
