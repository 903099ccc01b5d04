// Internal: the state behind kiln::Device and kiln::Tensor, shared by the frontend's files.
//
// A tensor is a recipe until it is realized: the builder call that makes its node(s) from its
// operands' nodes, and the operands themselves. No graph outlives a realize: recording checks the
// op on a small scratch graph of the recording thread (dtype and shape rules, errors at once), and
// realize builds one graph of exactly what it computes, hands it to the device, and drops it. So a
// long-running program holds only what its live tensors need (docs/embedding.md), and recording
// shares nothing between threads.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <unordered_set>
#include <vector>

#include "ir/builder.h"
#include "ir/graph.h"
#include "kiln/kiln.h"
#include "runtime/device.h"

namespace kiln {

namespace detail {

struct DeviceState {
  std::string name;
  std::unique_ptr<runtime::Device> device;
  // Realizes run at once, each on the tensors it claimed (TensorImpl::claim): `mu` is held only to
  // claim and to publish, never while a realize builds, compiles or runs. It guards every
  // tensor's claim, buffer, deps and build, and `last`; `done` wakes the realizes waiting for
  // tensors that another realize claimed.
  std::mutex mu;
  std::condition_variable done;
  uint64_t next_realize = 1;
  uint64_t next_walk = 1;
  std::unordered_set<uint64_t> running;  // the realizes holding claims
  RealizeStats last;
};

using Nodes = std::vector<const ir::Node*>;
// Makes a tensor's node(s) from its operands' nodes. Called once on the recording thread's
// scratch graph (the check) and once per realize that computes the tensor, so it owns (copies)
// everything it reads.
using BuildFn = std::function<ir::NodeResult(ir::Builder&, const Nodes&)>;

// Thread safety (the contract is stated in kiln/kiln.h):
// - dev, dtype, shape and error never change after the tensor is made; recording reads nothing
//   else, so it takes no lock.
// - A realize claims every unrealized tensor it computes (under DeviceState::mu; all of them or,
//   when another realize holds one, none: it waits for that one and looks again, so no realize
//   waits while holding claims). Only the claimer reads deps and build, and it publishes the
//   buffer, clears deps and build and drops the claim under mu.
struct TensorImpl {
  std::shared_ptr<DeviceState> dev;
  DType dtype = DType::f32;
  Shape shape;
  std::optional<Error> error;
  std::shared_ptr<runtime::Buffer> buffer;        // set once realized (or given: a leaf)
  std::vector<std::shared_ptr<TensorImpl>> deps;  // operands, until realized
  BuildFn build;                                  // until realized
  uint64_t claim = 0;                             // the realize computing it now (0: none)
  // When it was made and when a realize computed it from its recipe (0: never; a leaf given its
  // buffer), on one process-wide clock (sequence()): trace_kg tells a tensor computed after its
  // args were made, whose value a trace would capture, from one that was there before.
  uint64_t made = sequence();
  uint64_t computed = 0;
  static uint64_t sequence() {
    static std::atomic<uint64_t> clock{1};
    return clock.fetch_add(1, std::memory_order_relaxed);
  }
  // Tensor::mark_dynamic: per axis, the size symbol's name ("" static; empty vector: none),
  // written and read under DeviceState::mu.
  std::vector<std::string> symbols;
  // Scratch of realize: the last walk that saw it (written under DeviceState::mu) and its node in
  // the claiming realize's graph (written by that realize alone).
  uint64_t seen = 0;
  const ir::Node* built = nullptr;

  static Tensor make_error(std::shared_ptr<DeviceState> dev, Error e) {
    auto t = std::make_shared<TensorImpl>();
    t->dev = std::move(dev);
    t->error = std::move(e);
    return Tensor(std::move(t));
  }
  static Tensor make_leaf(std::shared_ptr<DeviceState> dev, std::shared_ptr<runtime::Buffer> b) {
    auto t = std::make_shared<TensorImpl>();
    t->dtype = b->dtype();
    t->shape = b->shape();
    t->buffer = std::move(b);
    t->dev = std::move(dev);
    return Tensor(std::move(t));
  }

  // Records one op over `operands` (none: a source such as full or arange on `source_dev`):
  // checks them, checks `build` on the scratch graph, and keeps it for realize.
  static Tensor apply(const std::vector<const Tensor*>& operands, BuildFn build,
                      std::shared_ptr<DeviceState> source_dev = nullptr);
  // The same for an elementwise op, checked without a scratch node: `rule` gives its result's
  // dtype and shape, or its error, from the operands' (by the builder's own rules:
  // ir::Builder::unary_type, binary_type, check_scalar). Recording is most of what a small op
  // costs, and this is the common case.
  template <class Rule>
  static Tensor apply_typed(std::initializer_list<const Tensor*> operands, Rule rule, BuildFn build) {
    std::shared_ptr<DeviceState> dev;
    std::vector<std::shared_ptr<TensorImpl>> deps;
    if (std::optional<Tensor> bad = gather({operands.begin(), operands.size()}, dev, deps))
      return std::move(*bad);
    Expected<ir::ValueType> type = rule(deps);
    return recorded(std::move(dev), std::move(deps), std::move(type), std::move(build));
  }
  // apply's parts: the operands' impls (and device) or the error tensor of a bad operand; the
  // recorded tensor of a checked op.
  static std::optional<Tensor> gather(std::span<const Tensor* const> operands,
                                      std::shared_ptr<DeviceState>& dev,
                                      std::vector<std::shared_ptr<TensorImpl>>& deps);
  static Tensor recorded(std::shared_ptr<DeviceState> dev, std::vector<std::shared_ptr<TensorImpl>> deps,
                         Expected<ir::ValueType> type, BuildFn build);

  static Expected<void> realize(const std::vector<Tensor>& tensors);
  // The state behind a device handle (null for a Device that was never opened).
  static const std::shared_ptr<DeviceState>& state_of(const Device& device) { return device.state_; }
  // The handle of an open device's state (composites that make constants on x's device).
  static Device device_of(std::shared_ptr<DeviceState> state) { return Device(std::move(state)); }
  // A handle of `impl` (trace_kg's captured tensors).
  static Tensor handle(std::shared_ptr<TensorImpl> impl) { return Tensor(std::move(impl)); }
  // The implementation behind a tensor handle (null for an empty Tensor).
  static const std::shared_ptr<TensorImpl>& impl_of(const Tensor& tensor) { return tensor.impl_; }
  // The result buffer once realized (null before), safe while another thread realizes.
  std::shared_ptr<runtime::Buffer> realized_buffer() const {
    std::lock_guard lock(dev->mu);
    return buffer;
  }
};

// Two devices that one call was given, for its error: "'cpu' and 'vulkan:0'", or "both named
// 'cpu', opened apart" where they share a name (two Device::open calls give two devices).
inline std::string two_devices(const std::string& first, const std::string& other) {
  return first == other ? fmt::format("both named '{}', opened apart", first)
                        : fmt::format("'{}' and '{}'", first, other);
}

}  // namespace detail
}  // namespace kiln
