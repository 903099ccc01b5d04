// Internal: the state behind kiln::Device and kiln::Tensor, shared by the frontend's files.
#pragma once

#include <fmt/format.h>
#include <functional>
#include <mutex>
#include <optional>

#include "ir/builder.h"
#include "ir/graph.h"
#include "kiln/kiln.h"
#include "runtime/device.h"

namespace kiln {

namespace detail {

// Thread safety (the contract is stated in kiln/kiln.h):
// - A TensorImpl's dev, origin and error never change after it is made.
// - node, buffer and deps change once, when the tensor is realized. Only realize writes them, and
//   it holds both DeviceState::mu and DeviceState::bind_mu while it does; it reads them under mu
//   alone (no other writer can run). Recording reads `node` under bind_mu alone, which is held
//   only for pointer copies, so recording never waits for a compile or a kernel run.
struct DeviceState {
  std::string name;
  std::unique_ptr<runtime::Device> device;
  ir::Graph graph;  // interning is thread-safe (its own lock)
  ir::Builder builder{graph};
  std::mutex mu;       // one realize at a time per device; guards `last`
  std::mutex bind_mu;  // guards node/buffer/deps of this device's tensors (see above)
  RealizeStats last;
};

struct TensorImpl {
  std::shared_ptr<DeviceState> dev;
  const ir::Node* origin = nullptr;  // the computation node: dtype and shape are read here
  std::optional<Error> error;
  // Guarded as described above.
  const ir::Node* node = nullptr;  // what consumers reference: after realize, an Input node
  std::shared_ptr<runtime::Buffer> buffer;        // set once realized
  std::vector<std::shared_ptr<TensorImpl>> deps;  // operands, until realized

  static Tensor make_error(std::shared_ptr<DeviceState> dev, Error e) {
    auto t = std::make_shared<TensorImpl>();
    t->dev = std::move(dev);
    t->error = std::move(e);
    return Tensor(std::move(t));
  }
  static Tensor make_leaf(std::shared_ptr<DeviceState> dev, std::shared_ptr<runtime::Buffer> b) {
    auto t = std::make_shared<TensorImpl>();
    t->node = t->origin = dev->graph.input(b->dtype(), b->shape());
    t->buffer = std::move(b);
    t->dev = std::move(dev);
    return Tensor(std::move(t));
  }
  static Tensor from_node(std::shared_ptr<DeviceState> dev, ir::NodeResult r,
                          std::vector<std::shared_ptr<TensorImpl>> deps) {
    if (!r) return make_error(std::move(dev), r.error());
    auto t = std::make_shared<TensorImpl>();
    t->dev = std::move(dev);
    t->node = t->origin = *r;
    t->deps = std::move(deps);
    return Tensor(std::move(t));
  }

  // Records one op over `operands`: checks them, then builds the node(s) with `build`.
  static Tensor apply(const std::vector<const Tensor*>& operands,
                      const std::function<ir::NodeResult(ir::Builder&,
                                                         const std::vector<const ir::Node*>&)>& build) {
    std::shared_ptr<DeviceState> dev;
    std::vector<std::shared_ptr<TensorImpl>> deps;
    for (const Tensor* t : operands) {
      if (!t->impl_) return make_error(dev, Error{"operation on an empty kiln::Tensor"});
      if (t->impl_->error) return make_error(t->impl_->dev, *t->impl_->error);
      if (dev && dev != t->impl_->dev)
        return make_error(dev, Error{fmt::format("operands live on different devices ('{}' and '{}')",
                                                 dev->name, t->impl_->dev->name)});
      dev = t->impl_->dev;
      deps.push_back(t->impl_);
    }
    // A realize on another thread may be swapping `node` for an Input node: either one is right,
    // since realize maps the old node to the new one for as long as `deps` keeps this operand.
    std::vector<const ir::Node*> nodes;
    {
      std::lock_guard lock(dev->bind_mu);
      for (const auto& d : deps) nodes.push_back(d->node);
    }
    ir::NodeResult r = build(dev->builder, nodes);
    return from_node(std::move(dev), std::move(r), std::move(deps));
  }

  static Expected<void> realize(const std::vector<Tensor>& tensors);
  // The result buffer once realized (null before), safe while another thread realizes.
  std::shared_ptr<runtime::Buffer> realized_buffer() const {
    std::lock_guard lock(dev->bind_mu);
    return buffer;
  }
};

}  // namespace detail
}  // namespace kiln
