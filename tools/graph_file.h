// The graph files the kiln tools read: `.kg` text, or an ONNX model (`.onnx`, docs/onnx.md).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "ir/kg.h"
#include "kiln/error.h"
#include "kiln/host_tensor.h"
#include "tools/graph_inputs.h"

namespace kiln::runtime {
class Executor;
}

namespace kiln::tools {

struct GraphFile {
  ir::KgGraph graph;
  // Inputs bound by the file itself (an ONNX model's initializers and constants), by name.
  std::map<std::string, ir::HostTensor> constants;
};

bool is_onnx_path(const std::string& path);

// Reads `path` into `g` by its extension. For an ONNX model, the .npy files `inputs` names are
// read first: they fix symbolic dimensions and the values an op needs at import (docs/onnx.md).
// `sizes` (--dim NAME=N) size a `.kg` file's symbols (`?b`), or an ONNX model's symbolic input
// dimensions not fixed by a file (onnx::ImportOptions::sizes); each must name one, unless
// `other_sizes_ok` (kiln warm over many graphs: a graph's sizes are those of its symbols).
Expected<GraphFile> read_graph_file(ir::Graph& g, const std::string& path,
                                    const InputSpec* inputs = nullptr,
                                    const ir::KgSizes* sizes = nullptr,
                                    bool other_sizes_ok = false);

// `graph` (read from `path`) with a size symbol on an inner axis (`f32[4,?n=10]`): read again with
// each such symbol one larger and lowered by `executor`, nothing compiled
// (runtime::Executor::note_sizes), so that its kernels take those sizes at run time from this
// first size on, as a kiln::Graph's first call does: `kiln run` compiles the kernels another
// process at another size finds in the cache, and `kiln dump` shows the kernels a run uses. Best
// effort: a reading or lowering that fails changes nothing but that.
void note_inner_sizes(runtime::Executor& executor, const std::string& path,
                      const ir::KgGraph& graph);

// One --dim argument: "NAME=N" (a leading '?' on NAME is allowed) reads as N..N; with `ranges`,
// "NAME=LO..HI" too (0 <= LO <= HI). An error names the argument and the form expected.
struct DimArg {
  std::string name;
  int64_t lo, hi;
};
Expected<DimArg> read_dim_arg(const std::string& arg, bool ranges);

// Parses --dim "NAME=N" (read_dim_arg without ranges) into `sizes`.
Expected<void> parse_dim_arg(const std::string& arg, ir::KgSizes& sizes);

}  // namespace kiln::tools
