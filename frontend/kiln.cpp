// The lazy Tensor: each op records a graph node through ir::Builder; realize() hands the pending
// subgraph to the device, then turns each result into a graph input bound to its buffer.
#include "kiln/kiln.h"

#include <cstring>
#include <filesystem>
#include <unordered_map>
#include <unordered_set>

#include "runtime/config.h"
#include "tensor_impl.h"

namespace kiln {

namespace detail {

namespace {
// Rewrites the pending graph so that realized tensors are read from their buffers.
std::vector<const ir::Node*> substitute(ir::Graph& g, const std::vector<const ir::Node*>& outputs,
                                        std::unordered_map<const ir::Node*, const ir::Node*>& map) {
  if (map.empty()) return outputs;
  for (const ir::Node* n : ir::topo_order(outputs)) {
    if (map.count(n)) continue;
    std::vector<const ir::Node*> ins;
    bool changed = false;
    for (const ir::Node* in : n->inputs) {
      auto it = map.find(in);
      ins.push_back(it == map.end() ? in : it->second);
      changed |= it != map.end();
    }
    if (changed) map[n] = g.make(n->op, n->dtype, n->shape, std::move(ins), n->attrs);
  }
  std::vector<const ir::Node*> out;
  for (const ir::Node* o : outputs) out.push_back(map.count(o) ? map.at(o) : o);
  return out;
}
}  // namespace

namespace {
// The buffers and node rewrites that let `pending` read the realized tensors below them.
// Caller holds DeviceState::mu, so no realize changes the tensors while this walks them.
void bind_realized(const std::vector<TensorImpl*>& pending, runtime::Bindings& bindings,
                   std::unordered_map<const ir::Node*, const ir::Node*>& subst) {
  std::unordered_set<const TensorImpl*> seen;
  std::vector<const TensorImpl*> stack(pending.begin(), pending.end());
  while (!stack.empty()) {
    const TensorImpl* t = stack.back();
    stack.pop_back();
    if (!seen.insert(t).second) continue;
    if (t->buffer) {
      bindings[t->node] = t->buffer;
      if (t->origin != t->node) subst[t->origin] = t->node;
      continue;
    }
    for (const auto& d : t->deps) stack.push_back(d.get());
  }
}
}  // namespace

Expected<void> TensorImpl::realize(const std::vector<Tensor>& tensors) {
  std::shared_ptr<DeviceState> dev;
  for (const Tensor& t : tensors) {  // dev and error never change: no lock needed
    if (!t.impl_) return kiln::make_error("realize of an empty kiln::Tensor");
    if (t.impl_->error) return std::unexpected(*t.impl_->error);
    if (dev && dev != t.impl_->dev)
      return kiln::make_error("realize: tensors live on different devices");
    dev = t.impl_->dev;
  }
  if (!dev) return {};
  // Held throughout: a tensor that another thread is realizing is pending until that realize
  // ends, and is then found realized here rather than run a second time.
  std::lock_guard lock(dev->mu);
  std::vector<TensorImpl*> pending;
  for (const Tensor& t : tensors)
    if (!t.impl_->buffer) pending.push_back(t.impl_.get());
  if (pending.empty()) return {};
  runtime::Bindings bindings;
  std::unordered_map<const ir::Node*, const ir::Node*> subst;
  bind_realized(pending, bindings, subst);
  std::vector<const ir::Node*> outputs;
  for (TensorImpl* t : pending) outputs.push_back(t->node);
  outputs = substitute(dev->graph, outputs, subst);
  runtime::RunStats stats;
  auto results = dev->device->execute(dev->graph, outputs, bindings, &stats);
  if (!results) return std::unexpected(results.error());
  dev->last = RealizeStats{stats.kernels, stats.compiled, stats.compile_ms, stats.run_ms,
                           stats.plan_cache_hit};
  std::vector<const ir::Node*> inputs;
  for (size_t i = 0; i < pending.size(); ++i)
    inputs.push_back(dev->graph.input((*results)[i]->dtype(), (*results)[i]->shape()));
  std::vector<std::shared_ptr<TensorImpl>> released;  // freed after bind_mu is let go
  std::lock_guard publish(dev->bind_mu);
  for (size_t i = 0; i < pending.size(); ++i) {
    TensorImpl* t = pending[i];
    t->buffer = (*results)[i];
    t->node = inputs[i];
    for (auto& d : t->deps) released.push_back(std::move(d));
    t->deps.clear();
  }
  return {};
}

}  // namespace detail

using detail::TensorImpl;

// ---- Device -----------------------------------------------------------------------------------

Expected<Device> Device::open(std::string_view name) {
  // kiln.toml (found upward from the working directory, or KILN_CONFIG) and KILN_* overrides.
  auto loaded = runtime::load_config(std::filesystem::current_path().string());
  if (!loaded) return std::unexpected(loaded.error());
  for (const std::string& w : loaded->warnings) fmt::print(stderr, "{}\n", w);
  auto options = runtime::device_options_from_config(loaded->config);
  if (!options) return std::unexpected(options.error());
  auto dev = runtime::open_device(name, std::move(*options));
  if (!dev) return std::unexpected(dev.error());
  auto state = std::make_shared<detail::DeviceState>();
  state->name = std::string(name);
  state->device = std::move(*dev);
  return Device(std::move(state));
}
std::string Device::name() const { return state_ ? state_->name : ""; }
RealizeStats Device::last_stats() const {
  if (!state_) return {};
  std::lock_guard lock(state_->mu);
  return state_->last;
}

// ---- Tensor: creation and data ----------------------------------------------------------------

Tensor Tensor::from_host(const Device& dev, const HostTensor& data) {
  if (!dev.state_) return TensorImpl::make_error(nullptr, Error{"from_host: device is not open"});
  if (static_cast<int64_t>(data.bytes.size()) != data.numel() * ir::dtype_size(data.dtype))
    return TensorImpl::make_error(
        dev.state_, Error{fmt::format("from_host: {} bytes do not hold {}{}", data.bytes.size(),
                                      ir::dtype_name(data.dtype), ir::shape_str(data.shape))});
  auto buffer = dev.state_->device->pool()->from_host(data, "Tensor::from_host");
  if (!buffer) return TensorImpl::make_error(dev.state_, buffer.error());
  return TensorImpl::make_leaf(dev.state_, std::move(*buffer));
}

namespace {
template <class T>
Tensor typed_from_host(const Device& dev, std::span<const T> data, Shape shape, DType dtype) {
  if (static_cast<int64_t>(data.size()) != ir::shape_numel(shape))
    return Tensor::from_host(dev, HostTensor{dtype, shape, std::vector<std::byte>(data.size_bytes())});
  HostTensor h{dtype, std::move(shape), std::vector<std::byte>(data.size_bytes())};
  if (!data.empty()) std::memcpy(h.bytes.data(), data.data(), data.size_bytes());
  return Tensor::from_host(dev, h);
}
}  // namespace

Tensor Tensor::from_host(const Device& dev, std::span<const float> d, Shape s) {
  return typed_from_host(dev, d, std::move(s), DType::f32);
}
Tensor Tensor::from_host(const Device& dev, std::span<const double> d, Shape s) {
  return typed_from_host(dev, d, std::move(s), DType::f64);
}
Tensor Tensor::from_host(const Device& dev, std::span<const int32_t> d, Shape s) {
  return typed_from_host(dev, d, std::move(s), DType::i32);
}
Tensor Tensor::from_host(const Device& dev, std::span<const int64_t> d, Shape s) {
  return typed_from_host(dev, d, std::move(s), DType::i64);
}
Tensor Tensor::from_host_bool(const Device& dev, const std::vector<bool>& d, Shape s) {
  HostTensor h = HostTensor::zeros(DType::boolean, s);
  if (static_cast<int64_t>(d.size()) != h.numel())
    return from_host(dev, HostTensor{DType::boolean, s, std::vector<std::byte>(d.size())});
  for (size_t i = 0; i < d.size(); ++i) h.set(static_cast<int64_t>(i), d[i] ? 1 : 0);
  return from_host(dev, h);
}

Tensor Tensor::full(const Device& dev, Shape shape, double value, DType dtype) {
  if (!dev.state_) return TensorImpl::make_error(nullptr, Error{"full: device is not open"});
  return TensorImpl::from_node(dev.state_, dev.state_->builder.full(shape, value, dtype), {});
}
Tensor Tensor::arange(const Device& dev, int64_t start, int64_t end, int64_t step, DType dtype) {
  if (!dev.state_) return TensorImpl::make_error(nullptr, Error{"arange: device is not open"});
  return TensorImpl::from_node(dev.state_, dev.state_->builder.arange(start, end, step, dtype), {});
}

bool Tensor::ok() const { return impl_ && !impl_->error; }
const Error* Tensor::error() const {
  static const Error kEmpty{"empty kiln::Tensor"};
  if (!impl_) return &kEmpty;
  return impl_->error ? &*impl_->error : nullptr;
}
// From `origin`, which never changes: `node` may be swapped by a realize on another thread.
DType Tensor::dtype() const { return ok() ? impl_->origin->dtype : DType::f32; }
Shape Tensor::shape() const { return ok() ? impl_->origin->shape : Shape{}; }
int64_t Tensor::numel() const { return ir::shape_numel(shape()); }

Expected<void> Tensor::realize() { return TensorImpl::realize({*this}); }
Expected<void> realize(const std::vector<Tensor>& tensors) { return TensorImpl::realize(tensors); }

Expected<HostTensor> Tensor::to_host() {
  if (auto r = realize(); !r) return std::unexpected(r.error());
  return impl_->realized_buffer()->to_host();
}

}  // namespace kiln
