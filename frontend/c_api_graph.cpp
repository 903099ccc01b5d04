// The C API's graph files and dumps (include/kiln/kiln_c.h): `.kg` graphs called on tensors
// (frontend/kg_call.h) and the text of `kiln dump` stages (frontend/inspect.h).
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "c_api_support.h"
#include "frontend/inspect.h"
#include "frontend/kg_call.h"
#include "kiln/kiln_c.h"

struct kiln_graph_s {
  std::shared_ptr<const kiln::detail::KgFile> file;
  // Per callable input, its size symbol per axis (kiln_graph_input_symbol's strings).
  std::vector<std::vector<std::string>> symbols;
};

using namespace kiln::c_api;

namespace {

kiln_status give_graph(const char* fn,
                       kiln::Expected<std::shared_ptr<const kiln::detail::KgFile>> file,
                       kiln_graph* out) {
  if (!file)
    return fail(KILN_ERROR_INVALID_ARGUMENT, fmt::format("{}: {}", fn, file.error().message));
  std::vector<std::vector<std::string>> symbols;
  for (size_t i = 0; i < (*file)->callable_inputs(); ++i)
    symbols.push_back(kiln::ir::input_symbols(*(*file)->kg.inputs[i].second));
  *out = new kiln_graph_s{std::move(*file), std::move(symbols)};
  return KILN_OK;
}

kiln_status check_index(const char* fn, const char* what, int32_t index, size_t count) {
  if (index < 0 || static_cast<size_t>(index) >= count)
    return fail(
        KILN_ERROR_INVALID_ARGUMENT,
        fmt::format("{}: {} index {} is out of range (the graph has {})", fn, what, index, count));
  return KILN_OK;
}

// Copies `text` into memory the caller frees with kiln_string_release.
kiln_status give_text(const char* fn, const std::string& text, char** out) {
  char* copy = static_cast<char*>(std::malloc(text.size() + 1));
  if (!copy) return fail(KILN_ERROR_DEVICE, fmt::format("{}: out of memory", fn));
  std::memcpy(copy, text.c_str(), text.size() + 1);
  *out = copy;
  return KILN_OK;
}

kiln_status check_stage(const char* fn, const char* stage) {
  if (!stage) return null_argument(fn, "stage");
  if (!kiln::detail::is_dump_stage(stage))
    return fail(
        KILN_ERROR_INVALID_ARGUMENT,
        fmt::format("{}: unknown stage '{}' (graph, groups, kernels, analyze, source)", fn, stage));
  return KILN_OK;
}

}  // namespace

extern "C" {

kiln_status kiln_graph_load(const char* path, kiln_graph* out) {
  const char* fn = __func__;
  if (!path) return null_argument(fn, "path");
  if (!out) return null_argument(fn, "out");
  return guarded(fn, [&] { return give_graph(fn, kiln::detail::read_kg_file(path), out); });
}

kiln_status kiln_graph_parse(const char* text, const char* filename, kiln_graph* out) {
  const char* fn = __func__;
  if (!text) return null_argument(fn, "text");
  if (!out) return null_argument(fn, "out");
  return guarded(fn, [&] {
    return give_graph(fn, kiln::detail::read_kg_text(text, filename ? filename : "<text>"), out);
  });
}

kiln_status kiln_graph_trace(const kiln_tensor* outputs, int32_t num_outputs,
                             const kiln_tensor* args, int32_t num_args, kiln_graph* out) {
  const char* fn = __func__;
  if (num_outputs <= 0)
    return fail(KILN_ERROR_INVALID_ARGUMENT,
                fmt::format("{}: num_outputs is {}: there is nothing to trace", fn, num_outputs));
  if (num_args < 0)
    return fail(KILN_ERROR_INVALID_ARGUMENT,
                fmt::format("{}: num_args {} is negative", fn, num_args));
  if (!outputs) return null_argument(fn, "outputs");
  if (num_args > 0 && !args) return null_argument(fn, "args");
  if (!out) return null_argument(fn, "out");
  return guarded(fn, [&] {
    std::vector<kiln::Tensor> outs, ins;
    for (int32_t i = 0; i < num_outputs; ++i) {
      if (!outputs[i])
        return fail(KILN_ERROR_INVALID_ARGUMENT, fmt::format("{}: outputs[{}] is NULL", fn, i));
      outs.push_back(outputs[i]->tensor);
    }
    for (int32_t i = 0; i < num_args; ++i) {
      if (!args[i])
        return fail(KILN_ERROR_INVALID_ARGUMENT, fmt::format("{}: args[{}] is NULL", fn, i));
      ins.push_back(args[i]->tensor);
    }
    return give_graph(fn, kiln::detail::trace_kg(outs, ins), out);
  });
}

void kiln_graph_release(kiln_graph graph) {
  delete graph;
}

kiln_status kiln_graph_counts(kiln_graph graph, int32_t* inputs, int32_t* outputs) {
  if (!graph) return null_argument(__func__, "graph");
  if (inputs) *inputs = static_cast<int32_t>(graph->file->callable_inputs());
  if (outputs) *outputs = static_cast<int32_t>(graph->file->kg.outputs.size());
  return KILN_OK;
}

kiln_status kiln_graph_input(kiln_graph graph, int32_t index, const char** name, kiln_dtype* dtype,
                             int32_t* rank) {
  if (!graph) return null_argument(__func__, "graph");
  const auto& inputs = graph->file->kg.inputs;
  if (kiln_status s = check_index(__func__, "input", index, graph->file->callable_inputs()); s != KILN_OK)
    return s;
  const auto& [input_name, node] = inputs[static_cast<size_t>(index)];
  if (name) *name = input_name.c_str();
  if (dtype) *dtype = static_cast<kiln_dtype>(node->dtype);
  if (rank) *rank = static_cast<int32_t>(node->shape.size());
  return KILN_OK;
}

kiln_status kiln_graph_input_shape(kiln_graph graph, int32_t index, int64_t* dims,
                                   int32_t capacity) {
  if (!graph) return null_argument(__func__, "graph");
  const auto& inputs = graph->file->kg.inputs;
  if (kiln_status s = check_index(__func__, "input", index, graph->file->callable_inputs()); s != KILN_OK)
    return s;
  const kiln::Shape& shape = inputs[static_cast<size_t>(index)].second->shape;
  if (capacity < 0 || static_cast<size_t>(capacity) < shape.size())
    return fail(
        KILN_ERROR_INVALID_ARGUMENT,
        fmt::format("{}: capacity {} is less than the rank, {}", __func__, capacity, shape.size()));
  if (!shape.empty() && !dims) return null_argument(__func__, "dims");
  for (size_t i = 0; i < shape.size(); ++i) dims[i] = shape[i];
  return KILN_OK;
}

kiln_status kiln_graph_input_symbol(kiln_graph graph, int32_t index, int32_t axis,
                                    const char** symbol) {
  if (!graph) return null_argument(__func__, "graph");
  if (!symbol) return null_argument(__func__, "symbol");
  if (kiln_status s = check_index(__func__, "input", index, graph->symbols.size()); s != KILN_OK)
    return s;
  const std::vector<std::string>& axes = graph->symbols[static_cast<size_t>(index)];
  if (axis < 0 || static_cast<size_t>(axis) >= axes.size())
    return fail(KILN_ERROR_INVALID_ARGUMENT,
                fmt::format("{}: axis {} is out of range for input {}, of rank {}", __func__, axis,
                            index, axes.size()));
  *symbol = axes[static_cast<size_t>(axis)].c_str();
  return KILN_OK;
}

kiln_status kiln_graph_output(kiln_graph graph, int32_t index, const char** name) {
  if (!graph) return null_argument(__func__, "graph");
  if (!name) return null_argument(__func__, "name");
  const auto& outputs = graph->file->kg.outputs;
  if (kiln_status s = check_index(__func__, "output", index, outputs.size()); s != KILN_OK)
    return s;
  *name = outputs[static_cast<size_t>(index)].first.c_str();
  return KILN_OK;
}

kiln_status kiln_graph_call(kiln_device device, kiln_graph graph, const char* const* names,
                            const kiln_tensor* inputs, int32_t count, kiln_tensor* outputs,
                            int32_t capacity) {
  const char* fn = __func__;
  if (!device) return null_argument(fn, "device");
  if (!graph) return null_argument(fn, "graph");
  if (count < 0)
    return fail(KILN_ERROR_INVALID_ARGUMENT, fmt::format("{}: count {} is negative", fn, count));
  if (count > 0 && !inputs) return null_argument(fn, "inputs");
  if (!outputs) return null_argument(fn, "outputs");
  const size_t num_outputs = graph->file->kg.outputs.size();
  if (capacity < 0 || static_cast<size_t>(capacity) < num_outputs)
    return fail(KILN_ERROR_INVALID_ARGUMENT,
                fmt::format("{}: capacity {} is less than the graph's {} outputs", fn, capacity,
                            num_outputs));
  return guarded(fn, [&] {
    std::vector<std::string_view> bound_names;
    std::vector<kiln::Tensor> tensors;
    for (int32_t i = 0; i < count; ++i) {
      if (!inputs[i])
        return fail(KILN_ERROR_INVALID_ARGUMENT, fmt::format("{}: inputs[{}] is NULL", fn, i));
      if (names && !names[i])
        return fail(KILN_ERROR_INVALID_ARGUMENT, fmt::format("{}: names[{}] is NULL", fn, i));
      if (names) bound_names.emplace_back(names[i]);
      tensors.push_back(inputs[i]->tensor);
    }
    if (kiln_status st = one_device(fn, "inputs", tensors, device->device); st != KILN_OK)
      return st;
    auto results = kiln::detail::call_kg(device->device, graph->file, bound_names, tensors);
    if (!results)
      return fail(KILN_ERROR_INVALID_ARGUMENT, fmt::format("{}: {}", fn, results.error().message));
    for (size_t i = 0; i < results->size(); ++i)
      outputs[i] = new kiln_tensor_s{std::move((*results)[i])};
    return KILN_OK;
  });
}

kiln_status kiln_graph_dump(kiln_device device, kiln_graph graph, const char* stage, int why,
                            char** out) {
  const char* fn = __func__;
  if (!device) return null_argument(fn, "device");
  if (!graph) return null_argument(fn, "graph");
  if (!out) return null_argument(fn, "out");
  if (kiln_status s = check_stage(fn, stage); s != KILN_OK) return s;
  return guarded(fn, [&] {
    auto text = kiln::detail::dump_kg(device->device, *graph->file, stage, why != 0);
    if (!text) return fail(KILN_ERROR_DEVICE, fmt::format("{}: {}", fn, text.error().message));
    return give_text(fn, *text, out);
  });
}

kiln_status kiln_dump(const kiln_tensor* tensors, size_t count, const char* stage, int why,
                      char** out) {
  const char* fn = __func__;
  if (count > 0 && !tensors) return null_argument(fn, "tensors");
  if (count == 0)
    return fail(KILN_ERROR_INVALID_ARGUMENT, fmt::format("{}: no tensors to dump", fn));
  if (!out) return null_argument(fn, "out");
  if (kiln_status s = check_stage(fn, stage); s != KILN_OK) return s;
  return guarded(fn, [&] {
    std::vector<kiln::Tensor> ts;
    for (size_t i = 0; i < count; ++i) {
      if (!tensors[i])
        return fail(KILN_ERROR_INVALID_ARGUMENT, fmt::format("{}: tensors[{}] is NULL", fn, i));
      ts.push_back(tensors[i]->tensor);
    }
    if (kiln_status st = one_device(fn, "tensors", ts); st != KILN_OK) return st;
    auto text = kiln::detail::dump_tensors(ts, stage, why != 0);
    if (!text) return fail(KILN_ERROR_DEVICE, fmt::format("{}: {}", fn, text.error().message));
    return give_text(fn, *text, out);
  });
}

void kiln_string_release(char* text) {
  std::free(text);
}

}  // extern "C"
