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

struct DeviceState {
  std::string name;
  std::unique_ptr<runtime::Device> device;
  ir::Graph graph;
  ir::Builder builder{graph};
  std::mutex mu;  // one realize at a time per device; recording is lock-free apart from interning
  RealizeStats last;
};

struct TensorImpl {
  std::shared_ptr<DeviceState> dev;
  const ir::Node* node = nullptr;    // what consumers reference: after realize, an Input node
  const ir::Node* origin = nullptr;  // the computation node before realize
  std::shared_ptr<runtime::Buffer> buffer;  // set once realized
  std::vector<std::shared_ptr<TensorImpl>> deps;  // operands, until realized
  std::optional<Error> error;

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
    std::vector<const ir::Node*> nodes;
    std::vector<std::shared_ptr<TensorImpl>> deps;
    for (const Tensor* t : operands) {
      if (!t->impl_) return make_error(dev, Error{"operation on an empty kiln::Tensor"});
      if (t->impl_->error) return make_error(t->impl_->dev, *t->impl_->error);
      if (dev && dev != t->impl_->dev)
        return make_error(dev, Error{fmt::format("operands live on different devices ('{}' and '{}')",
                                                 dev->name, t->impl_->dev->name)});
      dev = t->impl_->dev;
      nodes.push_back(t->impl_->node);
      deps.push_back(t->impl_);
    }
    ir::NodeResult r = build(dev->builder, nodes);
    return from_node(std::move(dev), std::move(r), std::move(deps));
  }

  static Expected<void> realize(const std::vector<Tensor>& tensors);
};

}  // namespace detail
}  // namespace kiln
