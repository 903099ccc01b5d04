// The `.kg` graph file format (DESIGN.md §4): reader and canonical printer.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "kiln/error.h"

namespace kiln::ir {

using NamedNode = std::pair<std::string, const Node*>;  // name without the leading '%'

struct KgGraph {
  std::vector<NamedNode> inputs;   // in declaration order
  std::vector<NamedNode> outputs;  // in `output` order
  std::vector<NamedNode> values;   // every `%name = ...` statement, in file order (for naming)
};

// Parses `.kg` text into `g`. Composites are expanded into primitives, literals become scalar
// `full` nodes. Errors read "FILE:LINE:COL: error: WHAT" and say what was expected there.
Expected<KgGraph> read_kg(Graph& g, std::string_view text, std::string_view filename);
// Reads a file; a missing or unreadable file is an error naming the path.
Expected<KgGraph> read_kg_file(Graph& g, const std::string& path);

// Canonical `.kg` text of everything reachable from the outputs. Inputs print under their names;
// statement values that are outputs take the output's name, those listed in `values` their name
// there, the others are %t0, %t1, ... in topological order (a name taken twice gets a _1 suffix);
// scalar `full` operands print as literals. Reading the text back gives a
// structurally identical graph (same ops, dtypes, shapes, attributes, outputs).
std::string print_kg(const KgGraph& graph);

}  // namespace kiln::ir
