// A `.kg` graph's outputs recorded as lazy tensors: each output's recipe replays the nodes it
// depends on into the realize's graph, where equal nodes are interned, so outputs realized
// together share their common values.
#include "frontend/kg_call.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "onnx/importer.h"
#include "runtime/executor.h"
#include "tensor_impl.h"

namespace kiln::detail {

namespace {

Expected<std::shared_ptr<const KgFile>> finish(std::shared_ptr<KgFile> file,
                                               Expected<ir::KgGraph> kg) {
  if (!kg) return std::unexpected(kg.error());
  file->kg = std::move(*kg);
  if (file->kg.sizes.empty()) file->text.clear();  // kept only to read again at other sizes
  return file;
}

// A first reading gives every symbolic input dimension the size 1, or, where the model cannot be
// read at 1 (a Reshape to [3, -1], a convolution wider than 1), the first of these it reads at.
constexpr int64_t kFirstReadingSizesAfterOne[] = {2, 3, 4, 8, 16, 32, 64, 128, 224, 256, 512};

// Where a reader's error ("FILE:LINE:COL: error: ...") is, as (line, column); (0, 0) for
// another message.
std::pair<int, int> error_position(std::string_view message, std::string_view filename) {
  if (!message.starts_with(filename) || message.size() <= filename.size() ||
      message[filename.size()] != ':')
    return {0, 0};
  int line = 0, col = 0;
  const std::string rest(message.substr(filename.size() + 1));
  if (std::sscanf(rest.c_str(), "%d:%d", &line, &col) != 2) return {0, 0};
  return {line, col};
}

// `.kg` text into a new file; its text kept when it has size symbols. A first reading (no
// `sizes`) of a file whose symbol has no size (`?n`, not `?n=8`) reads it as an ONNX model's
// symbolic dimension is read: at 1, or at the first of kFirstReadingSizesAfterOne it reads at.
// Each call reads it again at its tensors' sizes.
Expected<std::shared_ptr<const KgFile>> read_text(std::string text, std::string filename,
                                                  const ir::KgSizes* sizes = nullptr) {
  const auto read_at = [&](std::optional<int64_t> unsized) {
    auto file = std::make_shared<KgFile>();
    file->text = text;
    file->filename = filename;
    auto kg = ir::read_kg(file->graph, file->text, file->filename, sizes, unsized);
    return finish(std::move(file), std::move(kg));
  };
  auto file = read_at(std::nullopt);
  if (file || sizes) return file;
  // Only where a symbol without a size is what failed (the reading at 1 reads further).
  auto at_one = read_at(1);
  if (at_one) return at_one;
  if (at_one.error().message == file.error().message) return file;
  // Failing at every size, the reading that got furthest says what is wrong (a mistake past a
  // reshape that reads at 3 only); where every size fails at one place, that place's message.
  std::string furthest = at_one.error().message;
  bool same = true;
  for (int64_t size : kFirstReadingSizesAfterOne) {
    auto at = read_at(size);
    if (at) return at;
    const std::string& why = at.error().message;
    same = same && why == at_one.error().message;
    if (error_position(why, filename) > error_position(furthest, filename)) furthest = why;
  }
  if (same) return at_one;
  if (error_position(furthest, filename) > error_position(at_one.error().message, filename))
    return make_error(furthest);
  return make_error(
      fmt::format("{} (a graph reads a size symbol without a size first at 1, then "
                  "at {} while it fails; write a size it reads at in the file, "
                  "?name=N)",
                  at_one.error().message, fmt::join(kFirstReadingSizesAfterOne, ", ")));
}

// Whether an ONNX model's graph inputs have a symbolic dimension.
bool has_symbolic_inputs(const std::string& bytes) {
  auto parsed = onnx::parse_model(bytes);
  if (!parsed) return false;
  return std::ranges::any_of(parsed->graph.inputs, [](const onnx::ValueInfo& input) {
    return input.shape &&
           std::ranges::any_of(*input.shape, [](const onnx::Dimension& d) { return !d.value; });
  });
}

// An ONNX model's bytes into a new file: at `sizes` (its symbolic input dimensions; those not
// named as a first reading's are). The bytes are kept when it has size symbols and is the first
// reading (no `base`); a later reading shares `base`'s equal constants.
Expected<std::shared_ptr<const KgFile>> read_onnx(std::string bytes, std::string filename,
                                                  const ir::KgSizes* sizes, const KgFile* base) {
  std::shared_ptr<KgFile> file;
  onnx::ImportOptions options;
  if (sizes) options.sizes = *sizes;
  auto read_at = [&](int64_t unsized) {
    file = std::make_shared<KgFile>();
    options.unsized = unsized;
    return onnx::import_model(file->graph, bytes, options);
  };
  auto model = read_at(1);
  if (!model && !sizes && has_symbolic_inputs(bytes)) {
    const std::string at_one = model.error().message;
    for (int64_t size : kFirstReadingSizesAfterOne)
      if ((model = read_at(size))) break;
    if (!model)
      return make_error(
          fmt::format("{}: {} (a graph reads an ONNX model first with each symbolic "
                      "input dimension at 1, then at {} while it fails)",
                      filename, at_one, fmt::join(kFirstReadingSizesAfterOne, ", ")));
  }
  if (!model) return make_error(fmt::format("{}: {}", filename, model.error().message));
  // The importer lists the model's inputs first, then the constants it binds.
  for (const auto& [name, node] : model->graph.inputs) {
    auto it = model->constants.find(name);
    if (it != model->constants.end()) {
      file->constants.push_back(std::move(it->second));
      continue;
    }
    KILN_CHECK(file->constants.empty()) << "input %" << name << " after the model's constants";
  }
  file->kg = std::move(model->graph);
  file->onnx = true;
  file->filename = std::move(filename);
  if (!base && !file->kg.sizes.empty()) file->text = std::move(bytes);
  if (base) {
    file->base = base;
    file->from_base.assign(file->constants.size(), -1);
    std::unordered_map<std::string_view, size_t> by_name;
    for (size_t j = 0; j < base->constants.size(); ++j)
      by_name.emplace(base->kg.inputs[base->callable_inputs() + j].first, j);
    for (size_t i = 0; i < file->constants.size(); ++i) {
      auto it = by_name.find(file->kg.inputs[file->callable_inputs() + i].first);
      if (it == by_name.end()) continue;
      const ir::HostTensor& mine = file->constants[i];
      const ir::HostTensor& theirs = base->constants[it->second];
      if (mine.dtype != theirs.dtype || mine.shape != theirs.shape || mine.bytes != theirs.bytes)
        continue;
      file->from_base[i] = static_cast<int>(it->second);
      file->constants[i] = ir::HostTensor{};
    }
  }
  return std::shared_ptr<const KgFile>(std::move(file));
}

// Where the input called `name` (a leading % allowed) is among the file's callable inputs.
std::optional<size_t> input_position(const KgFile& file, std::string_view name) {
  if (name.starts_with('%')) name.remove_prefix(1);
  const size_t count = file.callable_inputs();
  for (size_t i = 0; i < count; ++i)
    if (file.kg.inputs[i].first == name) return i;
  return std::nullopt;
}

// The file at the sizes of the tensors bound to its symbolic dimensions: `file` itself when they
// are the file's, else the file read again at them (kept). A symbol given two sizes is an error.
Expected<std::shared_ptr<const KgFile>> at_sizes_of(const std::shared_ptr<const KgFile>& file,
                                                    std::span<const std::string_view> names,
                                                    std::span<const Tensor> inputs) {
  if (file->kg.sizes.empty() || file->text.empty()) return file;
  const size_t count = file->callable_inputs();
  ir::KgSizes sizes;
  std::map<std::string, std::string, std::less<>> where;
  for (size_t i = 0; i < inputs.size() && i < count; ++i) {
    size_t at = i;
    if (!names.empty()) {
      std::optional<size_t> position = input_position(*file, names[i]);
      if (!position) continue;  // bind() says so
      at = *position;
    }
    const auto& [name, node] = file->kg.inputs[at];
    const Shape shape = inputs[i].shape();
    if (!inputs[i].ok() || shape.size() != node->shape.size()) continue;  // bind() says so
    const std::vector<std::string> symbols = ir::input_symbols(*node);
    for (size_t d = 0; d < shape.size(); ++d) {
      if (symbols[d].empty()) continue;
      auto [it, fresh] = sizes.emplace(symbols[d], shape[d]);
      if (fresh) {
        where[symbols[d]] = name;
      } else if (it->second != shape[d]) {
        return make_error(fmt::format("size symbol ?{} is {} in input %{} but {} in input %{}", symbols[d],
                                      it->second, where[symbols[d]], shape[d], name));
      }
    }
  }
  bool same = true;
  for (const auto& [symbol, size] : file->kg.sizes)
    if (auto it = sizes.find(symbol); it != sizes.end() && it->second != size) same = false;
  if (same) return file;
  {
    std::lock_guard lock(file->mu);
    if (const KgFile::Reading* kept = file->at_sizes.find(sizes)) return *kept;
  }
  auto again = file->onnx ? read_onnx(file->text, file->filename, &sizes, file.get())
                          : read_text(file->text, file->filename, &sizes);
  if (!again) return std::unexpected(again.error());
  // Goes after the lock (its graph, its own constants' device copies).
  std::optional<KgFile::Reading> evicted;
  std::lock_guard lock(file->mu);
  // Two calls that read the same sizes at once keep the first reading.
  return file->at_sizes.put(std::move(sizes), std::move(*again), evicted);
}

std::string declared_inputs(const KgFile& file) {
  std::vector<std::string> names;
  for (size_t i = 0; i < file.callable_inputs(); ++i) {
    const auto& [name, node] = file.kg.inputs[i];
    names.push_back(
        fmt::format("%{}: {}{}", name, ir::dtype_name(node->dtype), ir::shape_str(node->shape)));
  }
  return names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "));
}

// The callable inputs in declaration order, from `names` (or positions without names).
Expected<std::vector<const Tensor*>> bind(const KgFile& file,
                                          std::span<const std::string_view> names,
                                          std::span<const Tensor> inputs) {
  const ir::KgGraph& kg = file.kg;
  const size_t count = file.callable_inputs();
  if (!names.empty() && names.size() != inputs.size())
    return make_error(fmt::format("{} input names for {} tensors", names.size(), inputs.size()));
  // A name the graph does not have is named (before the count, which it makes wrong too).
  for (std::string_view name : names) {
    if (name.starts_with('%')) name.remove_prefix(1);
    if (!input_position(file, name))
      return make_error(
          fmt::format("the graph has no input %{} (its inputs: {})", name, declared_inputs(file)));
  }
  if (inputs.size() != count)
    return make_error(fmt::format("the graph takes {} input{} ({}), {} given", count,
                                  count == 1 ? "" : "s", declared_inputs(file), inputs.size()));
  std::vector<const Tensor*> bound(count, nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    size_t at = i;
    if (!names.empty()) {
      std::string_view name = names[i];
      if (name.starts_with('%')) name.remove_prefix(1);
      at = *input_position(file, name);  // every name is one of its inputs (above)
      if (bound[at]) return make_error(fmt::format("input %{} is bound twice", name));
    }
    bound[at] = &inputs[i];
  }
  for (size_t i = 0; i < count; ++i) {
    const auto& [name, node] = kg.inputs[i];
    const Tensor& t = *bound[i];
    if (const Error* e = t.error())
      return make_error(fmt::format("input %{}: {}", name, e->message));
    if (t.dtype() != node->dtype || t.shape() != node->shape) {
      // Declared with size symbols: as the file writes it, then at this call's sizes.
      const std::vector<std::string> symbols = ir::input_symbols(*node);
      std::vector<std::string> axes;
      for (size_t a = 0; a < node->shape.size(); ++a)
        axes.push_back(a < symbols.size() && !symbols[a].empty() ? "?" + symbols[a]
                                                                 : std::to_string(node->shape[a]));
      const std::string declared = fmt::format("{}[{}]", ir::dtype_name(node->dtype), fmt::join(axes, ","));
      const std::string here = fmt::format("{}{}", ir::dtype_name(node->dtype), ir::shape_str(node->shape));
      return make_error(fmt::format("input %{} is declared {}{}, the tensor bound to it is {}{}", name,
                                    declared, declared == here ? "" : " (" + here + " at this call's sizes)",
                                    ir::dtype_name(t.dtype()), ir::shape_str(t.shape())));
    }
  }
  return bound;
}

}  // namespace

std::unordered_map<const ir::Node*, const ir::Node*> copy_kg(
    const KgFile& file, const std::vector<const ir::Node*>& roots, ir::Graph& g,
    const std::vector<const ir::Node*>& inputs) {
  KILN_CHECK(inputs.size() == file.kg.inputs.size())
      << inputs.size() << " inputs for " << file.kg.inputs.size();
  std::unordered_map<const ir::Node*, const ir::Node*> copy;
  for (size_t i = 0; i < inputs.size(); ++i) copy[file.kg.inputs[i].second] = inputs[i];
  // Checked when the file was read; the inputs have the declared dtypes and shapes.
  for (const ir::Node* n : ir::topo_order(roots)) {
    if (copy.count(n)) continue;
    KILN_CHECK(n->op != ir::Op::Input) << "an input the .kg file does not declare";
    std::vector<const ir::Node*> operands;
    operands.reserve(n->inputs.size());
    for (const ir::Node* in : n->inputs) operands.push_back(copy.at(in));
    copy[n] = g.make(n->op, n->dtype, n->shape, std::move(operands), n->attrs);
  }
  return copy;
}

Expected<std::shared_ptr<const KgFile>> read_kg_file(const std::string& path) {
  // The text is kept (not read by ir::read_kg_file) to read it again at other sizes.
  auto text = ir::read_text_file(path);
  if (!text) return std::unexpected(text.error());
  if (std::filesystem::path(path).extension() == ".onnx")
    return read_onnx(std::move(*text), path, nullptr, nullptr);
  return read_text(std::move(*text), path);
}

namespace {

// The file's constants as tensors of `device`, copied there once per device; an error names the
// constant. A failed copy is not kept, so a later call tries again.
Expected<std::vector<Tensor>> constants_on(const KgFile& file, const Device& device) {
  if (file.constants.empty()) return std::vector<Tensor>{};
  std::vector<Tensor> of_base;  // a later reading's shared constants (KgFile::from_base)
  if (file.base) {
    auto shared = constants_on(*file.base, device);
    if (!shared) return shared;
    of_base = std::move(*shared);
  }
  const std::shared_ptr<DeviceState>& state = TensorImpl::state_of(device);
  auto leaves = [&](const std::vector<std::shared_ptr<runtime::Buffer>>& buffers) {
    std::vector<Tensor> tensors;
    for (size_t i = 0; i < buffers.size(); ++i)
      tensors.push_back(buffers[i] ? TensorImpl::make_leaf(state, buffers[i])
                                   : of_base.at(file.from_base[i]));
    return tensors;
  };
  {
    std::lock_guard lock(file.mu);
    std::erase_if(file.device_constants, [](const auto& entry) { return entry.first.expired(); });
    for (const auto& [owner, buffers] : file.device_constants)
      if (owner.lock() == state) return leaves(buffers);
  }
  // Copied outside the lock, so calls on devices that have theirs do not wait; when two calls
  // copy at once, the first to finish is kept.
  std::vector<std::shared_ptr<runtime::Buffer>> buffers;
  for (size_t i = 0; i < file.constants.size(); ++i) {
    if (file.base && file.from_base[i] >= 0) {
      buffers.push_back(nullptr);
      continue;
    }
    auto b = state->device->pool()->from_host(file.constants[i], "a graph constant");
    if (!b)
      return make_error(fmt::format("constant %{} of the graph: {}", file.kg.inputs[file.callable_inputs() + i].first,
                                    b.error().message));
    buffers.push_back(std::move(*b));
  }
  std::lock_guard lock(file.mu);
  for (const auto& [owner, kept] : file.device_constants)
    if (owner.lock() == state) return leaves(kept);
  file.device_constants.emplace_back(state, buffers);
  return leaves(buffers);
}

// The file's size symbols mark the realized tensors bound to their inputs, as a `.kg` input's
// `?b` does under `kiln run` (Tensor::mark_dynamic), so that their kernels take the size at run
// time from the first call on. The caller's tensor is left as it is: a leaf of the same buffer,
// marked, stands for it (an empty tensor where nothing is marked). A tensor still pending is
// computed in the realize that reads it, so it is no input of that realize to mark.
std::vector<Tensor> mark_symbols(const KgFile& file, const std::vector<const Tensor*>& bound) {
  std::vector<Tensor> marked(bound.size());
  if (file.kg.sizes.empty()) return marked;  // no symbols: nothing to read per input
  for (size_t i = 0; i < file.callable_inputs(); ++i) {
    const std::vector<std::string> symbols = ir::input_symbols(*file.kg.inputs[i].second);
    if (std::ranges::all_of(symbols, [](const std::string& s) { return s.empty(); })) continue;
    const std::shared_ptr<TensorImpl>& impl = TensorImpl::impl_of(*bound[i]);
    if (!impl) continue;  // bind() refused it already
    std::shared_ptr<runtime::Buffer> buffer = impl->realized_buffer();
    if (!buffer) continue;
    std::vector<std::string> own;
    {
      std::lock_guard lock(impl->dev->mu);
      own = impl->symbols;
    }
    own.resize(symbols.size());
    for (size_t axis = 0; axis < symbols.size(); ++axis)
      if (own[axis].empty()) own[axis] = symbols[axis];
    marked[i] = TensorImpl::make_leaf(impl->dev, std::move(buffer));
    TensorImpl::impl_of(marked[i])->symbols = std::move(own);
  }
  return marked;
}

// A file whose size symbol is on an inner axis (`f32[4,?n]`), at its first call on a device: read
// again with each symbol one larger and lowered there, not compiled (Executor::note_sizes),
// so that this call's kernels take those sizes at run time from this first size on: one compile
// where the first size's own code and then, at the second size, the general code were two. A
// leading axis's symbol needs none of this (a kernel takes its outer extent at run time as it
// is). Best effort: a reading or lowering that fails changes nothing but that.
void note_inner_sizes(const std::shared_ptr<DeviceState>& state, const KgFile& given,
                      const KgFile& file) {
  if (given.text.empty() || file.kg.sizes.empty()) return;
  auto* executor = dynamic_cast<runtime::Executor*>(state->device.get());
  if (!executor) return;
  {  // Once per device, whether the file has an inner symbol or not.
    std::lock_guard lock(given.mu);
    std::erase_if(given.noted, [](const auto& d) { return d.expired(); });
    for (const auto& d : given.noted)
      if (d.lock() == state) return;
    given.noted.push_back(state);
  }
  const std::optional<ir::KgSizes> sizes = ir::second_reading_sizes(file.kg);
  if (!sizes) return;
  auto other = given.onnx ? read_onnx(given.text, given.filename, &*sizes, &given)
                          : read_text(given.text, given.filename, &*sizes);
  if (!other) return;
  const KgFile& o = **other;
  ir::Graph g;
  std::vector<const ir::Node*> inputs, outputs;
  for (const auto& [name, node] : o.kg.inputs)
    inputs.push_back(
        g.input(node->dtype, node->shape, "", ir::input_symbols_attr(ir::input_symbols(*node))));
  const std::vector<const ir::Node*> roots = o.kg.output_nodes();
  const auto copy = copy_kg(o, roots, g, inputs);
  for (const ir::Node* root : roots) outputs.push_back(copy.at(root));
  (void)executor->note_sizes(g, outputs);
}

}  // namespace

void note_kg_inner_sizes(const Device& device, const KgFile& file) {
  if (const std::shared_ptr<DeviceState>& state = TensorImpl::state_of(device))
    note_inner_sizes(state, file, file);
}

Expected<std::shared_ptr<const KgFile>> read_kg_text(std::string_view text,
                                                     std::string_view filename) {
  return read_text(std::string(text), std::string(filename));
}

Expected<std::vector<Tensor>> call_kg(const Device& device,
                                      const std::shared_ptr<const KgFile>& given,
                                      std::span<const std::string_view> names,
                                      std::span<const Tensor> inputs) {
  const std::shared_ptr<DeviceState>& state = TensorImpl::state_of(device);
  if (!state) return make_error("the device is not open");
  auto sized = at_sizes_of(given, names, inputs);
  if (!sized) return std::unexpected(sized.error());
  const std::shared_ptr<const KgFile>& file = *sized;
  auto bound = bind(*file, names, inputs);
  if (!bound) return std::unexpected(bound.error());
  note_inner_sizes(state, *given, *file);
  std::vector<Tensor> marked = mark_symbols(*file, *bound);
  for (size_t i = 0; i < marked.size(); ++i)
    if (marked[i].ok()) (*bound)[i] = &marked[i];
  auto constants = constants_on(*file, device);
  if (!constants) return std::unexpected(constants.error());
  for (const Tensor& t : *constants) bound->push_back(&t);
  for (const Tensor& t : file->captured) {
    if (TensorImpl::impl_of(t)->dev != state)
      return make_error(fmt::format(
          "the traced graph reads tensors of another device than the call's (its captured "
          "tensors; {})",
          two_devices(state->name, TensorImpl::impl_of(t)->dev->name)));
    bound->push_back(&t);
  }
  std::shared_ptr<DeviceState> dev = state;
  std::vector<std::shared_ptr<TensorImpl>> deps;
  if (std::optional<Tensor> bad = TensorImpl::gather(*bound, dev, deps))
    return make_error(bad->error()->message);
  // The outputs' builds copy the file's graph once per graph they build into (a realize's, where
  // they share their nodes): the first copies every output, the others look theirs up. A build
  // per output had copied the whole graph up to it: a decode step's 9 outputs (its next token
  // and 8 caches) copied most of its ~250 nodes 9 times in every realize. Each output's dtype and
  // shape are its node's: the file was checked when read, and bind() checked the inputs.
  struct Copied {
    std::mutex mu;
    std::vector<const ir::Node*> roots;  // the file's output nodes, copied together
    uint64_t graph = 0;  // ir::Graph::serial of the graph `copy` was made in (0: none)
    Nodes inputs;
    std::unordered_map<const ir::Node*, const ir::Node*> copy;
  };
  auto copied = std::make_shared<Copied>();
  copied->roots = file->kg.output_nodes();
  std::vector<Tensor> outputs;
  for (const auto& [name, node] : file->kg.outputs)
    outputs.push_back(TensorImpl::recorded(
        dev, deps, ir::ValueType{node->dtype, node->shape},
        [file, copied, out = node](ir::Builder& b, const Nodes& in) -> ir::NodeResult {
          std::lock_guard lock(copied->mu);
          if (copied->graph != b.graph().serial() || copied->inputs != in) {
            copied->copy = copy_kg(*file, copied->roots, b.graph(), in);
            copied->graph = b.graph().serial();
            copied->inputs = in;
          }
          return copied->copy.at(out);
        }));
  return outputs;
}

}  // namespace kiln::detail
