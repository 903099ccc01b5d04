// `kiln devices`: the devices this machine offers (cpu, reference, vulkan:N, cuda:N) with their
// properties, and for a runtime with no usable device, the reason.
#include <fmt/format.h>

#include <filesystem>

#include "runtime/config.h"
#include "runtime/device.h"
#include "tools/commands.h"

namespace kiln::tools {

int devices_command() {
  // The thread count and where NVRTC is come from the environment, read here at the edge.
  auto config = runtime::load_config(std::filesystem::current_path().string());
  if (!config) return report_error(config.error().message);
  auto options = runtime::device_options_from_config(config->config);
  if (!options) return report_error(options.error().message);
  for (const runtime::DeviceInfo& d : runtime::list_devices(options->num_threads, options->nvrtc)) {
    fmt::print("{}  {}\n", d.name, d.present ? "present" : "absent");
    for (const auto& [key, value] : d.properties) fmt::print("  {}: {}\n", key, value);
  }
  return 0;
}

}  // namespace kiln::tools
