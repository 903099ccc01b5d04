// The cpu device the C++ API benchmarks share: no persistent cache and no tuning, so that what
// they time does not depend on what an earlier run left behind.
#pragma once

#include <kiln/kiln.h>

namespace kiln::bench {

inline kiln::Device& api_cpu_device() {
  static kiln::Device dev =
      kiln::Device::open("cpu", kiln::Options{.settings = {{"compilation.cache", "none"},
                                                           {"autotune.cache", "none"},
                                                           {"autotune.enabled", "false"}},
                                              .use_config = false,
                                              .config_dir = ""})
          .value();
  return dev;
}

}  // namespace kiln::bench
