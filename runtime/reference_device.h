// The `reference` device: runs graphs through the f64 op-by-op interpreter (runtime/reference.h).
#pragma once

#include "runtime/device.h"

namespace kiln::runtime {

class ReferenceDevice final : public Device {
 public:
  ReferenceDevice() : pool_(BufferPool::create()) {}
  std::string_view name() const override { return "reference"; }
  const std::shared_ptr<BufferPool>& pool() const override { return pool_; }
  Expected<std::vector<std::shared_ptr<Buffer>>> execute(ir::Graph& g,
                                                         const std::vector<const ir::Node*>& outputs,
                                                         const Bindings& inputs,
                                                         RunStats* stats) override;

 private:
  std::shared_ptr<BufferPool> pool_;
};

}  // namespace kiln::runtime
