// Internal: a `.kg` graph file recorded as lazy tensors, its outputs computed from tensors bound to
// its inputs by name (the C API's kiln_graph_*; `kiln run` binds .npy files the same way).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "ir/kg.h"
#include "kiln/kiln.h"

namespace kiln::detail {

// A graph read once and never changed afterwards, so any number of threads may call it at once.
// The tensors it records share it (each output's recipe holds it).
struct KgFile {
  ir::Graph graph;
  ir::KgGraph kg;
};

// Reads a `.kg` file, or `.kg` text (errors name `filename`: "FILE:LINE:COL: error: WHAT").
Expected<std::shared_ptr<const KgFile>> read_kg_file(const std::string& path);
Expected<std::shared_ptr<const KgFile>> read_kg_text(std::string_view text,
                                                     std::string_view filename);

// Copies the nodes `roots` depend on into `g` (`roots` are nodes of the file's graph), the file's
// inputs replaced by `inputs` (one per declared input, in declaration order, with its dtype and
// shape). Returns each copied node by its original.
std::unordered_map<const ir::Node*, const ir::Node*> copy_kg(
    const KgFile& file, const std::vector<const ir::Node*>& roots, ir::Graph& g,
    const std::vector<const ir::Node*>& inputs);

// The graph's outputs (in its `output` order) as tensors of `device`, recorded, not run: like any
// op, each is a recipe until realized, and realizing several at once shares their common values.
// `inputs[i]` is bound to the graph input named `names[i]` (no '%'); with no names, the inputs are
// in declaration order. Every input must be bound once, with the dtype and shape it declares.
Expected<std::vector<Tensor>> call_kg(const Device& device,
                                      const std::shared_ptr<const KgFile>& file,
                                      std::span<const std::string_view> names,
                                      std::span<const Tensor> inputs);

}  // namespace kiln::detail
