// `kiln devices`: the devices this machine offers (cpu, reference, vulkan:N, cuda:N) with their
// properties, and for a runtime with no usable device, the reason.
#include <fmt/format.h>

#include "runtime/device.h"
#include "tools/commands.h"

namespace kiln::tools {

int devices_command() {
  for (const runtime::DeviceInfo& d : runtime::list_devices()) {
    fmt::print("{}  {}\n", d.name, d.present ? "present" : "absent");
    for (const auto& [key, value] : d.properties) fmt::print("  {}: {}\n", key, value);
  }
  return 0;
}

}  // namespace kiln::tools
