// The ONNX importer: an ONNX model (ModelProto bytes) as a kiln graph (docs/onnx.md).
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "ir/graph.h"
#include "ir/kg.h"
#include "kiln/error.h"
#include "kiln/host_tensor.h"

namespace kiln::onnx {

struct ImportOptions {
  // Values of graph inputs known at import (a bound .npy, a test's input data). They give the
  // shape of inputs declared with symbolic dimensions, and they are read where an op needs a
  // constant operand (Reshape's shape, axes, pads, Gather's indices): the graph is then
  // specialized to that value. Each must match the input's declared dtype and fixed dimensions.
  std::map<std::string, ir::HostTensor> input_values;
};

struct ImportedModel {
  // inputs: the model's graph inputs (those without an initializer), in order, then the
  // constants the graph reads (initializers, Constant nodes, folded values), each named.
  ir::KgGraph graph;
  std::map<std::string, ir::HostTensor> constants;  // the data of those constant inputs, by name
  int64_t opset = 0;                                // of the default domain
};

// Errors name the node (its index, name and op type). An op, attribute or dtype kiln cannot
// express reads "... unsupported ..." (never a wrong result); a model that cannot be read says
// which field and byte.
Expected<ImportedModel> import_model(ir::Graph& g, std::string_view bytes,
                                     const ImportOptions& options = {});
Expected<ImportedModel> import_model_file(ir::Graph& g, const std::string& path,
                                          const ImportOptions& options = {});

}  // namespace kiln::onnx
