// The lazy Tensor: each op records its builder call (checked on a scratch graph, tensor_impl.h);
// realize() builds the graph of the pending tensors, hands it to the device, and keeps each
// result's buffer, which later ops read as a graph input.
#include "kiln/kiln.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <unordered_map>

#include "runtime/config.h"
#include "runtime/logger.h"
#include "tensor_impl.h"

namespace kiln {

namespace detail {

namespace {

// The recording thread's scratch graph, where each op is checked against placeholder inputs of
// its operands' dtypes and shapes (one per dtype and shape: only the result's dtype, shape or
// error is read). Started afresh once it holds kScratchNodes nodes, so it stays small however
// long the program records.
constexpr size_t kScratchNodes = 4096;
constexpr size_t kPlaceholders = 16;
struct Scratch {
  std::unique_ptr<ir::Graph> graph = std::make_unique<ir::Graph>();
  std::unique_ptr<ir::Builder> builder = std::make_unique<ir::Builder>(*graph);
  std::vector<const ir::Node*> placeholders;  // the most recent, round robin
  size_t next = 0;

  ir::Builder& fresh_enough() {
    if (graph->size() > kScratchNodes) {
      builder.reset();
      placeholders.clear();
      graph = std::make_unique<ir::Graph>();
      builder = std::make_unique<ir::Builder>(*graph);
    }
    return *builder;
  }
  const ir::Node* placeholder(DType dtype, const Shape& shape) {
    for (const ir::Node* p : placeholders)
      if (p->dtype == dtype && p->shape == shape) return p;
    const ir::Node* p = graph->input(dtype, shape);
    if (placeholders.size() < kPlaceholders) {
      placeholders.push_back(p);
    } else {
      placeholders[next] = p;
      next = (next + 1) % kPlaceholders;
    }
    return p;
  }
};

}  // namespace

std::optional<Tensor> TensorImpl::gather(std::span<const Tensor* const> operands,
                                         std::shared_ptr<DeviceState>& dev,
                                         std::vector<std::shared_ptr<TensorImpl>>& deps) {
  deps.reserve(operands.size());
  for (const Tensor* t : operands) {
    if (!t->impl_) return make_error(dev, Error{"operation on an empty kiln::Tensor"});
    if (t->impl_->error) return make_error(t->impl_->dev, *t->impl_->error);
    if (dev && dev != t->impl_->dev)
      return make_error(dev, Error{fmt::format("operands live on different devices ({})",
                                               two_devices(dev->name, t->impl_->dev->name))});
    dev = t->impl_->dev;
    deps.push_back(t->impl_);
  }
  return std::nullopt;
}

Tensor TensorImpl::recorded(std::shared_ptr<DeviceState> dev,
                            std::vector<std::shared_ptr<TensorImpl>> deps,
                            Expected<ir::ValueType> type, BuildFn build) {
  if (!type) return make_error(std::move(dev), type.error());
  auto t = std::make_shared<TensorImpl>();
  t->dev = std::move(dev);
  t->dtype = type->dtype;
  t->shape = std::move(type->shape);
  t->deps = std::move(deps);
  t->build = std::move(build);
  return Tensor(std::move(t));
}

Tensor TensorImpl::apply(const std::vector<const Tensor*>& operands, BuildFn build,
                         std::shared_ptr<DeviceState> source_dev) {
  std::shared_ptr<DeviceState> dev = std::move(source_dev);
  std::vector<std::shared_ptr<TensorImpl>> deps;
  if (std::optional<Tensor> bad = gather(operands, dev, deps)) return std::move(*bad);
  thread_local Scratch scratch;
  ir::Builder& b = scratch.fresh_enough();
  Nodes placeholders;
  placeholders.reserve(deps.size());
  for (const auto& d : deps) placeholders.push_back(scratch.placeholder(d->dtype, d->shape));
  ir::NodeResult r = build(b, placeholders);
  Expected<ir::ValueType> type = r ? Expected<ir::ValueType>(ir::ValueType{(*r)->dtype, (*r)->shape})
                                   : std::unexpected(r.error());
  return recorded(std::move(dev), std::move(deps), std::move(type), std::move(build));
}

namespace {
// The unrealized tensors `roots` depend on (themselves included), operands before users, when
// none is claimed by another realize; else that realize's claim. Iterative, so a chain of any
// length fits the stack. Caller holds DeviceState::mu.
struct Walk {
  std::vector<TensorImpl*> order;
  uint64_t blocked_by = 0;
};
Walk unrealized(const std::vector<TensorImpl*>& roots, uint64_t stamp) {
  Walk w;
  struct Frame {
    TensorImpl* t;
    size_t next;
  };
  std::vector<Frame> stack;
  for (TensorImpl* root : roots) {
    if (root->buffer || root->seen == stamp) continue;
    root->seen = stamp;
    stack.push_back({root, 0});
    while (!stack.empty()) {
      TensorImpl* t = stack.back().t;
      if (t->claim != 0) {
        w.blocked_by = t->claim;
        return w;
      }
      if (size_t& next = stack.back().next; next < t->deps.size()) {
        TensorImpl* d = t->deps[next++].get();
        if (!d->buffer && d->seen != stamp) {
          d->seen = stamp;
          stack.push_back({d, 0});
        }
        continue;
      }
      w.order.push_back(t);
      stack.pop_back();
    }
  }
  return w;
}

// Which realized operands this realize may give up to the device (buffer donation): those that
// only tensors letting go of them hold. A claimed tensor lets go of its operands when the realize
// is done if it is an output (realized, it drops its recipe), or if only tensors that let go hold
// it (it is dropped with their recipes; one that a handle or a pending tensor outside the
// realize holds keeps its recipe, and with it its operands). Its buffer must be kiln's own and
// held by that tensor alone (no other tensor, no DLPack export). Use counts that match the
// references found here cannot rise meanwhile: no handle exists to copy.
void find_donors(const std::vector<TensorImpl*>& order, const std::vector<TensorImpl*>& outputs,
                 std::vector<TensorImpl*>& donors) {
  std::unordered_map<const TensorImpl*, long> use_count, refs;  // refs: from tensors letting go
  // First the realized operands' references from `order`: one whose count exceeds them (a handle
  // holds it) cannot be donated, and most realizes have none that can.
  for (TensorImpl* t : order)
    for (const auto& d : t->deps)
      if (d->buffer) ++refs[d.get()];
  bool any = false;
  for (TensorImpl* t : order)
    for (const auto& d : t->deps)
      any = any || (d->buffer && d.use_count() == refs[d.get()] && d->buffer.use_count() == 1 &&
                    !d->buffer->external());
  if (!any) return;
  refs.clear();
  for (TensorImpl* t : order)
    for (const auto& d : t->deps) use_count[d.get()] = d.use_count();
  // Users come after their operands in `order`: backwards, a tensor's holders are all seen first.
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    TensorImpl* t = *it;
    const bool output = std::find(outputs.begin(), outputs.end(), t) != outputs.end();
    if (!output && use_count[t] != refs[t]) continue;
    for (const auto& d : t->deps) ++refs[d.get()];
  }
  for (auto& [d, n] : use_count) {
    auto* t = const_cast<TensorImpl*>(d);
    if (t->buffer && n == refs[d] && t->buffer.use_count() == 1 && !t->buffer->external())
      donors.push_back(t);
  }
}

// A realized operand's marked axes (Tensor::mark_dynamic) as its input node's attribute.
std::string input_symbols_of(TensorImpl& t) {
  std::lock_guard lock(t.dev->mu);
  return ir::input_symbols_attr(t.symbols);
}

// The graph of the claimed tensors `order` (operands first): a realized operand is an input bound
// to its buffer, a claimed tensor its builder call. Returns the nodes of `outputs`. Operands the
// device may write over (find_donors) are in `donated`, and their tensors in `donors`.
Expected<Nodes> build_graph(ir::Graph& g, const std::vector<TensorImpl*>& order,
                            const std::vector<TensorImpl*>& outputs, runtime::Bindings& bindings,
                            runtime::Donated& donated, std::vector<TensorImpl*>& donors) {
  ir::Builder b(g);
  // Realized operands (shared with other realizes, so not marked): one input each.
  std::unordered_map<const TensorImpl*, const ir::Node*> input_of;
  Nodes ins;
  for (TensorImpl* t : order) {
    ins.clear();
    for (const auto& d : t->deps) {
      if (!d->buffer) {  // claimed by this realize, and built already (operands come first)
        ins.push_back(d->built);
        continue;
      }
      auto [it, fresh] = input_of.emplace(d.get(), nullptr);
      if (fresh) it->second = g.input(d->dtype, d->shape, "", input_symbols_of(*d));
      ins.push_back(it->second);
    }
    ir::NodeResult r = t->build(b, ins);
    // Checked when recorded, on inputs of the same dtypes and shapes.
    if (!r) return make_error("realize: an op checked when it was recorded failed: " + r.error().message);
    t->built = *r;
  }
  find_donors(order, outputs, donors);  // before `bindings` holds the buffers too
  for (TensorImpl* d : donors) donated.insert(input_of.at(d));
  for (const auto& [d, node] : input_of) bindings[node] = d->buffer;
  Nodes nodes;
  for (TensorImpl* t : outputs) nodes.push_back(t->built);
  return nodes;
}
}  // namespace

Expected<void> TensorImpl::realize(const std::vector<Tensor>& tensors) {
  std::shared_ptr<DeviceState> dev;
  std::vector<TensorImpl*> roots;
  for (size_t i = 0; i < tensors.size(); ++i) {  // dev and error never change: no lock needed
    const Tensor& t = tensors[i];
    if (!t.impl_) return kiln::make_error("realize of an empty kiln::Tensor");
    if (t.impl_->error) return std::unexpected(*t.impl_->error);
    if (dev && dev != t.impl_->dev)
      return kiln::make_error(fmt::format(
          "realize: tensor {} lives on another device than the ones before it ({}); realize "
          "each device's tensors apart",
          i, two_devices(dev->name, t.impl_->dev->name)));
    dev = t.impl_->dev;
    roots.push_back(t.impl_.get());
  }
  if (!dev) return {};
  // Claim what to compute. A tensor that another thread is realizing is waited for and then
  // found realized, not run a second time.
  std::vector<TensorImpl*> order, outputs;
  uint64_t id = 0;
  {
    std::unique_lock lock(dev->mu);
    for (;;) {
      Walk w = unrealized(roots, dev->next_walk++);
      if (w.blocked_by == 0) {
        order = std::move(w.order);
        break;
      }
      dev->done.wait(lock, [&] { return !dev->running.count(w.blocked_by); });
    }
    if (order.empty()) return {};
    id = dev->next_realize++;
    dev->running.insert(id);
    for (TensorImpl* t : order) t->claim = id;
    for (TensorImpl* t : roots)
      if (t->claim == id && std::find(outputs.begin(), outputs.end(), t) == outputs.end())
        outputs.push_back(t);
  }
  // Gives up the claims (publishing the results when there are some) and wakes the waiters.
  auto finish = [&](const std::vector<std::shared_ptr<runtime::Buffer>>* results,
                    const runtime::RunStats* stats) {
    std::vector<std::shared_ptr<TensorImpl>> released;  // freed after mu is let go
    std::vector<BuildFn> recipes;
    {
      std::lock_guard lock(dev->mu);
      for (TensorImpl* t : order) t->claim = 0, t->built = nullptr;
      dev->running.erase(id);
      if (results) {
        for (size_t i = 0; i < outputs.size(); ++i) {
          TensorImpl* t = outputs[i];
          t->buffer = (*results)[i];
          t->computed = TensorImpl::sequence();
          for (auto& d : t->deps) released.push_back(std::move(d));
          t->deps.clear();
          recipes.push_back(std::move(t->build));
          t->build = nullptr;
        }
        dev->last = RealizeStats{stats->kernels,        stats->compiled,
                                 stats->compile_ms,     stats->run_ms,
                                 stats->plan_cache_hit, stats->donated,
                                 stats->dynamic_kernels, stats->recompile_reasons,
                                 stats->plan_source};
      }
    }
    dev->done.notify_all();
  };
  ir::Graph graph;
  runtime::Bindings bindings;
  runtime::Donated donated;
  std::vector<TensorImpl*> donors;
  auto nodes = build_graph(graph, order, outputs, bindings, donated, donors);
  if (!nodes) {
    finish(nullptr, nullptr);
    return std::unexpected(nodes.error());
  }
  runtime::RunStats stats;
  auto results = dev->device->execute(graph, *nodes, bindings, &stats, &donated);
  if (!results && stats.donated > 0) {
    // A result may have been written over a donated operand before the run failed. Only the
    // tensors this realize computes still reach it: realizing them again reports this rather than
    // reading changed data.
    std::string why = fmt::format("an operand's buffer was reused in place (buffer donation) by a "
                                  "realize that failed: {}", results.error().message);
    std::lock_guard lock(dev->mu);
    for (TensorImpl* d : donors) {
      d->buffer = nullptr;
      d->build = [why](ir::Builder&, const Nodes&) -> ir::NodeResult { return kiln::make_error(why); };
    }
  }
  finish(results ? &*results : nullptr, &stats);
  if (!results) return std::unexpected(results.error());
  return {};
}

}  // namespace detail

using detail::TensorImpl;

// ---- Device -----------------------------------------------------------------------------------

namespace {
Expected<runtime::Config> options_config(const Options& options) {
  std::error_code ec;
  const std::string dir = options.config_dir.empty() ? std::filesystem::current_path(ec).string()
                                                     : options.config_dir;
  runtime::Config config = runtime::default_config(dir);
  if (options.use_config) {
    auto loaded = runtime::load_config(dir);
    if (!loaded) return std::unexpected(loaded.error());
    for (const std::string& w : loaded->warnings) fmt::print(stderr, "{}\n", w);
    config = std::move(loaded->config);
  }
  for (const auto& [key, value] : options.settings)
    if (auto r = runtime::apply_setting(config, key, value); !r) return std::unexpected(r.error());
  return config;
}
}  // namespace

Expected<Device> Device::open(std::string_view name, const Options& options) {
  auto config = options_config(options);
  if (!config) return std::unexpected(config.error());
  auto device_options = runtime::device_options_from_config(*config);
  if (!device_options) return std::unexpected(device_options.error());
  auto dev = runtime::open_device(name, std::move(*device_options));
  if (!dev) return std::unexpected(dev.error());
  auto state = std::make_shared<detail::DeviceState>();
  state->name = std::string(name);
  state->device = std::move(*dev);
  return Device(std::move(state));
}
Expected<Device> Device::open(std::string_view name) {
  return open(name, Options{.settings = {}, .use_config = true, .config_dir = ""});
}
Expected<void> Device::check_setting(std::string_view key, std::string_view value) {
  runtime::Config config = runtime::default_config("");
  return runtime::apply_setting(config, std::string(key), std::string(value));
}
void set_log_callback(LogCallback callback) { runtime::set_log_callback(std::move(callback)); }
std::string Device::name() const { return state_ ? state_->name : ""; }
RealizeStats Device::last_stats() const {
  if (!state_) return {};
  std::lock_guard lock(state_->mu);
  return state_->last;
}

// ---- Tensor: creation and data ----------------------------------------------------------------

Tensor Tensor::from_host(const Device& dev, const HostTensor& data) {
  if (!dev.state_) return TensorImpl::make_error(nullptr, Error{"from_host: device is not open"});
  if (!ir::is_dtype(data.dtype))
    return TensorImpl::make_error(dev.state_, Error{fmt::format("from_host: {} is not a kiln dtype",
                                                                static_cast<int>(data.dtype))});
  if (auto problem = ir::shape_size_problem(data.shape))
    return TensorImpl::make_error(
        dev.state_,
        Error{fmt::format("from_host: shape {} {}", ir::shape_brief(data.shape), *problem)});
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
  return TensorImpl::apply(
      {}, [shape, value, dtype](ir::Builder& b, const detail::Nodes&) { return b.full(shape, value, dtype); },
      dev.state_);
}
Tensor Tensor::arange(const Device& dev, int64_t start, int64_t end, int64_t step, DType dtype) {
  if (!dev.state_) return TensorImpl::make_error(nullptr, Error{"arange: device is not open"});
  return TensorImpl::apply({}, [=](ir::Builder& b, const detail::Nodes&) {
    return b.arange(start, end, step, dtype);
  }, dev.state_);
}

bool Tensor::ok() const { return impl_ && !impl_->error; }
const Error* Tensor::error() const {
  static const Error kEmpty{"empty kiln::Tensor"};
  if (!impl_) return &kEmpty;
  return impl_->error ? &*impl_->error : nullptr;
}
DType Tensor::dtype() const { return ok() ? impl_->dtype : DType::f32; }
Shape Tensor::shape() const { return ok() ? impl_->shape : Shape{}; }
int64_t Tensor::numel() const { return ir::shape_numel(shape()); }
std::optional<Device> Tensor::device() const {
  if (!impl_ || !impl_->dev) return std::nullopt;
  return Device(impl_->dev);
}

Expected<void> Tensor::realize() { return TensorImpl::realize({*this}); }

Expected<void> Tensor::mark_dynamic(int64_t axis, std::string name) {
  if (!impl_) return make_error("mark_dynamic: an empty tensor");
  if (impl_->error) return std::unexpected(*impl_->error);
  const auto rank = static_cast<int64_t>(impl_->shape.size());
  const std::optional<int64_t> a = ir::normalize_axis(axis, rank);
  if (!a) return make_error(fmt::format("mark_dynamic: axis {} is out of range for a tensor of shape {}", axis,
                                        ir::shape_str(impl_->shape)));
  if (name.empty()) name = fmt::format("s{}", *a);
  // A `.kg` identifier (kiln dump writes the symbol as ?name, which kiln_graph_parse reads back):
  // a letter or '_', then letters, digits and '_'; not inf or nan (numbers there).
  const auto word = [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
  };
  if (!(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') ||
      !std::ranges::all_of(name, word) || name == "inf" || name == "nan")
    return make_error(fmt::format(
        "mark_dynamic: '{}' is not a symbol name (a letter or '_', then letters, digits, '_')",
        name));
  std::lock_guard lock(impl_->dev->mu);
  impl_->symbols.resize(impl_->shape.size());
  // One symbol is one size: another axis of this tensor marked with it must have this size.
  for (size_t other = 0; other < impl_->symbols.size(); ++other)
    if (static_cast<int64_t>(other) != *a && impl_->symbols[other] == name &&
        impl_->shape[other] != impl_->shape[*a])
      return make_error(
          fmt::format("mark_dynamic: '{}' names axis {} (size {}) already; axis {} has size {}",
                      name, other, impl_->shape[other], *a, impl_->shape[*a]));
  impl_->symbols[*a] = std::move(name);
  return {};
}
Expected<void> realize(const std::vector<Tensor>& tensors) { return TensorImpl::realize(tensors); }

Expected<HostTensor> Tensor::to_host() {
  if (auto r = realize(); !r) return std::unexpected(r.error());
  return impl_->realized_buffer()->to_host();
}

}  // namespace kiln
