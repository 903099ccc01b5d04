// `kiln dump`: the optimized graph (.kg), the kernel IR, or the LLVM IR of each kernel.
#include <fmt/format.h>

#include "ir/kg.h"
#include "runtime/cpu_device.h"
#include "runtime/planner.h"
#include "runtime/structural_key.h"
#include "tools/commands.h"
#include "tools/graph_namer.h"

namespace kiln::tools {

int dump_command(const DumpOptions& o) {
  if (o.stage != "graph" && o.stage != "kernels" && o.stage != "llvm")
    return report_error(fmt::format("unknown stage '{}' (expected graph, kernels or llvm)", o.stage));
  ir::Graph g;
  auto graph = ir::read_kg_file(g, o.graph_path);
  if (!graph) return report_error(graph.error().message);
  std::vector<const ir::Node*> outputs;
  for (const auto& [name, node] : graph->outputs) outputs.push_back(node);
  runtime::StructuralKey key = runtime::structural_key(outputs);

  std::unique_ptr<runtime::CpuDevice> device;
  runtime::PlannerOptions po{.fuser = nullptr, .kernels = nullptr, .namer = make_namer(*graph)};
  std::unique_ptr<runtime::KernelCache> kernels;
  if (o.stage == "llvm") {
    auto dev = runtime::CpuDevice::create({});
    if (!dev) return report_error(dev.error().message);
    device = std::move(*dev);
    kernels = std::make_unique<runtime::KernelCache>(device->backend());
    po.kernels = kernels.get();
  }
  auto plan = runtime::build_plan(g, outputs, key.inputs, po);
  if (!plan) return report_error(plan.error().message);

  if (o.stage == "graph") {
    ir::KgGraph optimized{graph->inputs, {}, {}};
    for (size_t i = 0; i < outputs.size(); ++i)
      optimized.outputs.emplace_back(graph->outputs[i].first, (*plan)->optimized_outputs[i]);
    fmt::print("{}", ir::print_kg(optimized));
    return 0;
  }
  fmt::print("# {} kernel{}\n", (*plan)->steps.size(), (*plan)->steps.size() == 1 ? "" : "s");
  for (const runtime::PlanStep& step : (*plan)->steps) {
    fmt::print("\n# {}: {}\n", step.kernel.name, fmt::join(step.values, " "));
    if (o.stage == "kernels") fmt::print("{}", kir::print_kernel(step.kernel));
    else fmt::print("{}", step.artifact->llvm_ir);
  }
  return 0;
}

}  // namespace kiln::tools
