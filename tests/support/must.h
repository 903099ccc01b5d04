// must(): the node a builder call made, for tests whose graphs are known to be well formed; a
// builder error stops the test binary with its message.
#pragma once

#include "ir/builder.h"
#include "kiln/error.h"

namespace kiln::tests {

inline const ir::Node* must(ir::NodeResult r) {
  KILN_CHECK(r.has_value()) << r.error().message;
  return *r;
}

}  // namespace kiln::tests
