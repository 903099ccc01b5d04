// The `reference` device: runs graphs through the f64 op-by-op interpreter (interp/reference.h).
#pragma once

#include "runtime/device.h"

namespace kiln::runtime {

class ReferenceDevice final : public Device {
 public:
  // `namer` names values in messages (DeviceOptions::namer); null: %t<id>.
  explicit ReferenceDevice(ValueNamer namer = {})
      : pool_(BufferPool::create(PersistentMemory::enabled, "reference")), namer_(std::move(namer)) {}
  std::string_view name() const override { return "reference"; }
  const std::shared_ptr<BufferPool>& pool() const override { return pool_; }
  Expected<std::vector<std::shared_ptr<Buffer>>> execute(ir::Graph& g,
                                                         const std::vector<const ir::Node*>& outputs,
                                                         const Bindings& inputs, RunStats* stats,
                                                         const Donated* donated) override;

 private:
  std::shared_ptr<BufferPool> pool_;
  ValueNamer namer_;
};

}  // namespace kiln::runtime
