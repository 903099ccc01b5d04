// Assembling hand-built kernels in tests (designated initializers of kir::Kernel would trip
// -Wmissing-field-initializers), shared by the codegen and autotune suites.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/kernel_ir.h"

namespace kiln::testing {

inline kir::Kernel make_kernel(std::string name, std::vector<kir::Param> params,
                               std::vector<int64_t> domain, std::shared_ptr<kir::ExprArena> a,
                               std::vector<kir::Store> stores) {
  kir::Kernel k;
  k.name = std::move(name);
  k.params = std::move(params);
  k.domain = std::move(domain);
  k.arena = std::move(a);
  k.stores = std::move(stores);
  return k;
}

}  // namespace kiln::testing
