// Internal: a graph file (`.kg`, or an ONNX model) recorded as lazy tensors, its outputs computed
// from tensors bound to its inputs by name (kiln::Graph, the C API's kiln_graph_*; `kiln run`
// binds .npy files the same way).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "ir/kg.h"
#include "kiln/kiln.h"
#include "support/recently_used.h"

namespace kiln::runtime {
class Buffer;
}

namespace kiln::detail {

struct DeviceState;

// A graph read once and never changed afterwards (but for the constants' device copies, made
// under `mu`), so any number of threads may call it at once. The tensors it records share it
// (each output's recipe holds it).
struct KgFile {
  ir::Graph graph;
  ir::KgGraph kg;
  // The last constants.size() inputs of `kg` are bound by the file itself, in this order (an
  // ONNX model's initializers and constants); callers bind the others, the callable inputs.
  std::vector<ir::HostTensor> constants;
  // A traced graph's (trace_kg, which makes no constants): the last captured.size() inputs of
  // `kg` are bound to these tensors, the realized tensors its ops read besides its arguments
  // (weights), held while the graph lives.
  std::vector<Tensor> captured;
  size_t callable_inputs() const { return kg.inputs.size() - constants.size() - captured.size(); }

  // The constants' buffers on each device the file was called on: copied there at the first
  // call, so that later calls copy nothing. They hold no reference to the device: an entry goes
  // with its device (dropped at the next call once the device is closed), and the buffers kept
  // here are never written over (a realize donates only buffers nothing else holds).
  mutable std::mutex mu;
  // The devices whose executor met the file at other sizes of its inner size symbols
  // (note_inner_sizes, at the first call on each).
  mutable std::vector<std::weak_ptr<DeviceState>> noted;
  mutable std::vector<std::pair<std::weak_ptr<DeviceState>, std::vector<std::shared_ptr<runtime::Buffer>>>>
      device_constants;

  // A `.kg` file with size symbols (`?b`, docs/dynamic-shapes.md), or an ONNX model whose inputs
  // have symbolic dimensions (`onnx`: `text` holds the model's bytes, read first with each
  // symbol at 1), keeps its text, and is read again at the sizes of the tensors it is called on:
  // one read per distinct sizes (under `mu`), the kMaxReadings used last kept (a server meeting a
  // new batch size on most requests kept a reading of every size it had served).
  std::string text;
  std::string filename;
  bool onnx = false;
  static constexpr size_t kMaxReadings = 64;
  using Reading = std::shared_ptr<const KgFile>;
  mutable support::RecentlyUsed<ir::KgSizes, Reading,
                                std::map<ir::KgSizes, support::Recent<Reading>, std::less<>>>
      at_sizes{kMaxReadings};

  // An ONNX model read again at other sizes: each of its constants equal to the first reading's
  // is that reading's (`from_base[i]`, the index among `base`'s constants; -1 for its own), so
  // one copy of the model's weights serves every size, on the host and on each device (its own
  // host copy of a shared constant is dropped). `base` holds this file (its `at_sizes`, or a
  // pending tensor's recipe once it left them) and is read only while a call holds it.
  const KgFile* base = nullptr;
  std::vector<int> from_base;
};

// Reads a graph file by its extension: an ONNX model (`.onnx`, docs/onnx.md; a symbolic dimension
// of its inputs is a size symbol, as a `.kg` file's `?b`) or `.kg` text. Errors name the file (for
// `.kg`, "FILE:LINE:COL: error: WHAT"; for ONNX, the node).
Expected<std::shared_ptr<const KgFile>> read_kg_file(const std::string& path);
Expected<std::shared_ptr<const KgFile>> read_kg_text(std::string_view text,
                                                     std::string_view filename);

// Copies the nodes `roots` depend on into `g` (`roots` are nodes of the file's graph), the file's
// inputs replaced by `inputs` (one per declared input, in declaration order, with its dtype and
// shape). Returns each copied node by its original.
std::unordered_map<const ir::Node*, const ir::Node*> copy_kg(
    const KgFile& file, const std::vector<const ir::Node*>& roots, ir::Graph& g,
    const std::vector<const ir::Node*>& inputs);

// The graph of the ops that compute `outputs` from `args` (Graph::trace): each arg is an input
// (arg0, arg1, ... in order), each other realized tensor the ops read is captured (captured0, ...:
// KgFile::captured), each op between them recorded once more into the graph, and the outputs are
// out0, out1, ... A call records the same ops over other tensors of the args' dtypes and shapes.
// Errors: an output or arg with an error, tensors of different devices, an arg given twice.
Expected<std::shared_ptr<const KgFile>> trace_kg(const std::vector<Tensor>& outputs,
                                                 const std::vector<Tensor>& args);

// The graph's outputs (in its `output` order) as tensors of `device`, recorded, not run: like any
// op, each is a recipe until realized, and realizing several at once shares their common values.
// `inputs[i]` is bound to the graph input named `names[i]` (no '%'); with no names, the callable
// inputs are in declaration order. Every callable input must be bound once, with the dtype and
// shape it declares; the file binds its constants and captured tensors itself (a traced graph
// is called on the device its captured tensors live on).
Expected<std::vector<Tensor>> call_kg(const Device& device,
                                      const std::shared_ptr<const KgFile>& file,
                                      std::span<const std::string_view> names,
                                      std::span<const Tensor> inputs);

// A file whose size symbol is on an inner axis, once per device: its kernels noted at each
// symbol's next size (Executor::note_sizes), so that those of its first size take their sizes at
// run time, as its first call makes them (and a dump of the file shows them).
void note_kg_inner_sizes(const Device& device, const KgFile& file);

}  // namespace kiln::detail
