// The ONNX importer: an ONNX model (ModelProto bytes) as a kiln graph (docs/onnx.md).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "ir/graph.h"
#include "ir/kg.h"
#include "kiln/error.h"
#include "kiln/host_tensor.h"
#include "onnx/proto.h"

namespace kiln::onnx {

// A sequence or optional value as a tree: a sequence's elements, an optional's one element or
// none. Its tensors are bound and returned flat, each under its flat_names entry: "x[0]", "x[1]"
// for a sequence x ("x[0][2]" nested); an optional's element has the optional's name.
struct Structure {
  TypeKind kind = TypeKind::tensor;
  std::vector<Structure> items;
};
std::vector<std::string> flat_names(const std::string& name, const Structure& s);
// A test file's value (ValueData) as its structure, its tensors added to `tensors` by flat name.
Expected<Structure> flatten(const ValueData& d, const std::string& name,
                            std::map<std::string, ir::HostTensor>& tensors);

struct ImportOptions {
  // Values of graph inputs known at import (a bound .npy, a test's input data). They give the
  // shape of inputs declared with symbolic dimensions, and they are read where an op needs a
  // constant operand (Reshape's shape, axes, pads, Gather's indices): the graph is then
  // specialized to that value. Each must match the input's declared dtype and fixed dimensions.
  std::map<std::string, ir::HostTensor> input_values;
  // Sequence and optional graph inputs (which must be given): their structure by name; their
  // tensors are in input_values under their flat_names.
  std::map<std::string, Structure> input_structures;
  // Sizes of the symbolic dimensions of graph inputs not given a value, by symbol: a dimension's
  // symbol is its dim_param, every character other than a letter, digit or '_' written '_'
  // (`input_symbol`). Such a dimension becomes a size symbol of the imported graph (its input's
  // `?name`, docs/dynamic-shapes.md): the kernels take it at run time, and the graph's `sizes`
  // lists each symbol with the size it took here.
  ir::KgSizes sizes;
  // The size of a symbolic dimension `sizes` does not name; none: such a dimension is an error.
  std::optional<int64_t> unsized;
};

// The size symbol of dimension `axis` of graph input `input` declared as `d` (symbolic): its
// dim_param as an identifier, or `<input>_<axis>` for a dimension with neither value nor name.
std::string input_symbol(std::string_view input, size_t axis, const Dimension& d);

struct ImportedModel {
  // inputs: the model's graph inputs (those without an initializer), in order, then the
  // constants the graph reads (initializers, Constant nodes, folded values), each named.
  ir::KgGraph graph;
  std::map<std::string, ir::HostTensor> constants;  // the data of those constant inputs, by name
  int64_t opset = 0;                                // of the default domain
  // Graph outputs that are sequences or optionals: their structure by name; graph.outputs lists
  // their tensors under their flat_names.
  std::map<std::string, Structure> output_structures;
};

// The sizes that bound inputs give the model's symbolic input dimensions: for each graph input
// that `shapes` names, of its declared rank, each dimension without a value is its symbol
// (input_symbol) at the bound extent. Where two inputs give one symbol two sizes the first is
// kept: binding the second then says which disagrees.
Expected<ir::KgSizes> bound_sizes(std::string_view bytes,
                                  const std::map<std::string, ir::Shape>& shapes);

// Errors name the node (its index, name and op type). An op, attribute or dtype kiln cannot
// express reads "... unsupported ..." (never a wrong result); a model that cannot be read says
// which field and byte.
Expected<ImportedModel> import_model(ir::Graph& g, std::string_view bytes,
                                     const ImportOptions& options = {});
Expected<ImportedModel> import_model_file(ir::Graph& g, const std::string& path,
                                          const ImportOptions& options = {});

}  // namespace kiln::onnx
