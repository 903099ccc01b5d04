// The `.kg` graph file format (DESIGN.md §4): reader and canonical printer.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "kiln/error.h"

namespace kiln::ir {

using NamedNode = std::pair<std::string, const Node*>;  // name without the leading '%'

// Sizes of `.kg` size symbols (`?b`) given by the reader's caller (kiln run --dim b=N), by name.
using KgSizes = std::map<std::string, int64_t, std::less<>>;

struct KgGraph {
  std::vector<NamedNode> inputs;   // in declaration order
  std::vector<NamedNode> outputs;  // in `output` order
  std::vector<NamedNode> values;   // every `%name = ...` statement, in file order (for naming)
  // The size symbols the inputs' types define (`input %x : f32[?b,64]`, DESIGN.md §4), with the
  // size each took, in order of first use. An input's symbolic axes: ir::input_symbols.
  std::vector<std::pair<std::string, int64_t>> sizes = {};

  // The output nodes, in `output` order.
  std::vector<const Node*> output_nodes() const {
    std::vector<const Node*> nodes;
    for (const auto& [name, node] : outputs) nodes.push_back(node);
    return nodes;
  }
};

// Parses `.kg` text into `g`. Composites are expanded into primitives, literals become scalar
// `full` nodes. Errors read "FILE:LINE:COL: error: WHAT" and say what was expected there.
// An input dimension may be a size symbol: `?b=64` (64 unless `sizes` gives b), or `?b` (sized by
// `sizes`, or by an earlier input); attribute lists and integers may name a defined symbol
// (`reshape(%x, shape=[?b,8,8])`), which reads as its size.
// `unsized`: the size of a symbol that neither the file nor `sizes` sizes (a graph loaded to be
// called at its tensors' sizes reads first at such a size); nullopt: such a symbol is an error.
Expected<KgGraph> read_kg(Graph& g, std::string_view text, std::string_view filename,
                          const KgSizes* sizes = nullptr,
                          std::optional<int64_t> unsized = std::nullopt);
// Where an input of `graph` has a size symbol on an inner axis (`f32[4,?n]`): the sizes to read it
// at a second time, every symbol larger (the outer ones too, so that a kernel lowered at both
// takes each size that changes at run time): the first by 1, the next by 2, and so on, so that two
// symbols of one size differ there; nullopt where no input has one.
std::optional<KgSizes> second_reading_sizes(const KgGraph& graph);

// A file's bytes. A missing or unreadable file, or a directory, is an error naming the path; so
// is a file that is not a regular one (a pipe, a device) and holds more than `stream_limit`
// bytes (/dev/zero never ends).
inline constexpr uint64_t kStreamLimit = uint64_t{256} << 20;
Expected<std::string> read_text_file(const std::string& path, uint64_t stream_limit = kStreamLimit);
// Reads a file; a missing or unreadable file is an error naming the path.
Expected<KgGraph> read_kg_file(Graph& g, const std::string& path, const KgSizes* sizes = nullptr);

// Canonical `.kg` text of everything reachable from the outputs. Inputs print under their names;
// statement values that are outputs take the output's name, those listed in `values` their name
// there, the others are %t0, %t1, ... in topological order (a name taken twice gets a _1 suffix);
// scalar `full` operands print as literals. Reading the text back gives a
// structurally identical graph (same ops, dtypes, shapes, attributes, outputs).
std::string print_kg(const KgGraph& graph);

}  // namespace kiln::ir
