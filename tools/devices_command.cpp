// `kiln devices`: the devices this machine offers (cpu, reference, vulkan:N, cuda:N) with their
// properties, and for a runtime with no usable device, the reason.
#include <fmt/format.h>

#include "codegen/cpu/cpu_backend.h"
#include "runtime/gpu_backend.h"
#include "support/thread_pool.h"
#include "tools/commands.h"

namespace kiln::tools {

namespace {

void print_device(const runtime::GpuDeviceInfo& d) {
  fmt::print("{}  {}\n", d.name, d.present ? "present" : "absent");
  for (const auto& [key, value] : d.properties) fmt::print("  {}: {}\n", key, value);
}

}  // namespace

int devices_command() {
  runtime::GpuDeviceInfo cpu{"cpu", false, {}};
  if (auto backend = codegen::CpuBackend::create()) {
    cpu.present = true;
    cpu.properties = {{"cpu", (*backend)->cpu_name()},
                      {"threads", std::to_string(support::ThreadPool::default_threads())},
                      {"llvm", (*backend)->llvm_version()},
                      {"features", (*backend)->cpu_features()}};
  } else {
    cpu.properties = {{"absent", backend.error().message}};
  }
  print_device(cpu);
  print_device({"reference", true, {{"kind", "op-by-op interpreter in f64 (the test oracle)"}}});
  for (const auto& list : {runtime::list_vulkan_devices(), runtime::list_cuda_devices()})
    for (const runtime::GpuDeviceInfo& d : list) print_device(d);
  return 0;
}

}  // namespace kiln::tools
