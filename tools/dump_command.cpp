// `kiln dump`: how a graph is optimized, fused (with cost estimates and reasons) and compiled,
// as text, a Graphviz digraph or a self-contained HTML page.
#include <fmt/format.h>

#include <filesystem>

#include <fstream>

#include "codegen/cuda/nvrtc.h"
#include "ir/kg.h"
#include "passes/cost_model.h"
#include "runtime/config.h"
#include "runtime/cpu_device.h"
#include "runtime/dump_text.h"
#include "runtime/gpu_device.h"
#include "runtime/planner.h"
#include "runtime/structural_key.h"
#include "tools/commands.h"
#include "tools/dump_dot.h"
#include "tools/dump_gpu.h"
#include "tools/dump_html.h"
#include "tools/graph_namer.h"

namespace kiln::tools {

Expected<passes::BeamOptions> beam_options(const FuserFlags& flags) {
  if (flags.fuser != "beam" && (flags.max_blocks || flags.beam_width))
    return make_error(fmt::format("--max-blocks and --beam-width apply to --fuser beam, not --fuser {}",
                                  flags.fuser));
  passes::BeamOptions beam;
  if (flags.fuser == "greedy") beam.max_blocks = beam.beam_width = 1;
  if (flags.max_blocks) beam.max_blocks = *flags.max_blocks;
  if (flags.beam_width) beam.beam_width = *flags.beam_width;
  return beam;
}

namespace {

Expected<void> check_combination(const DumpOptions& o) {
  if (auto beam = beam_options(o.fusion); !beam) return std::unexpected(beam.error());
  if (o.format != "text" && o.stage_given && o.stage != "groups")
    return make_error(fmt::format("--format {} draws the groups stage; use --stage groups or --format text",
                                  o.format));
  if (o.stage == "ptx" && o.target != "cuda")
    return make_error(fmt::format("--stage ptx needs --target cuda (not {})", o.target));
  if (o.stage == "spirv" && o.target != "vulkan")
    return make_error(fmt::format("--stage spirv needs --target vulkan (not {})", o.target));
  if (o.arch_given && o.target != "cuda")
    return make_error(fmt::format("--arch applies to --target cuda, not {}", o.target));
  if (o.target == "cuda")
    if (auto arch = codegen::cuda::parse_arch(o.arch); !arch) return std::unexpected(arch.error());
  return {};
}

TargetDumpOptions target_options(const DumpOptions& o) {
  return TargetDumpOptions{o.target, o.arch, o.stage == "llvm" ? "source" : o.stage, o.out_dir};
}

std::unique_ptr<passes::Fuser> make_fuser(const DumpOptions& o, const passes::CostModel& model) {
  if (o.fusion.fuser == "first") return passes::make_first_fuser();
  return passes::make_beam_fuser(model, *beam_options(o.fusion));  // checked by check_combination
}

Expected<void> emit(const std::string& path, const std::string& text) {
  if (path.empty()) {
    fmt::print("{}", text);
    return {};
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) return make_error(fmt::format("cannot write '{}'", path));
  return {};
}

// Everything one dump needs: the graph, its plan, the names and the cost model behind them.
struct DumpInput {
  ir::Graph g;
  ir::KgGraph graph;
  std::vector<const ir::Node*> outputs;
  runtime::StructuralKey key;
  std::unique_ptr<runtime::CpuDevice> device;  // when compiling or measuring rates
  std::unique_ptr<runtime::KernelCache> kernels;
  std::unique_ptr<passes::CostModel> reference;
  const passes::CostModel* model = nullptr;
  std::unique_ptr<passes::Fuser> fuser;
  std::shared_ptr<runtime::Plan> plan;
};

Expected<void> prepare(const DumpOptions& o, DumpInput& in) {
  auto graph = ir::read_kg_file(in.g, o.graph_path);
  if (!graph) return std::unexpected(graph.error());
  in.graph = std::move(*graph);
  for (const auto& [name, node] : in.graph.outputs) in.outputs.push_back(node);
  in.key = runtime::structural_key(in.outputs);

  bool cpu = o.target == "cpu";
  bool compile = cpu && (o.stage == "source" || o.stage == "llvm" || o.format == "html" ||
                         !o.out_dir.empty());
  if (compile || (cpu && o.rates == "measured")) {
    auto dev = runtime::CpuDevice::create({});
    if (!dev) return std::unexpected(dev.error());
    in.device = std::move(*dev);
  }
  if (!cpu) {
    // The rates the GPU device would plan with: vulkan:0's when present, else a GPU's.
    passes::DeviceRates rates = passes::DeviceRates::reference_gpu();
    if (o.target == "vulkan" && o.rates == "measured")
      if (auto backend = runtime::open_vulkan_backend(0)) rates = runtime::gpu_rates(**backend);
    in.reference = std::make_unique<passes::CostModel>(rates);
    in.model = in.reference.get();
  } else if (o.rates == "measured") {
    in.model = &in.device->cost_model();
  } else {
    in.reference = std::make_unique<passes::CostModel>(passes::DeviceRates::reference_cpu());
    in.model = in.reference.get();
  }
  in.fuser = make_fuser(o, *in.model);
  // kiln.toml and the environment, read here at the edge: the verifier and KILN_DUMP.
  auto loaded = runtime::load_config(std::filesystem::current_path().string());
  if (!loaded) return std::unexpected(loaded.error());
  for (const std::string& w : loaded->warnings) fmt::print(stderr, "{}\n", w);
  runtime::PlannerOptions po;
  po.verify_ir = loaded->config.verify_ir;
  po.dump_dir = loaded->config.dump_dir;
  po.fuser = in.fuser.get();
  po.namer = make_namer(in.graph);
  if (compile) {
    in.kernels = std::make_unique<runtime::KernelCache>(in.device->backend());
    po.kernels = in.kernels.get();
  }
  auto plan = runtime::build_plan(in.g, in.outputs, in.key.inputs, po);
  if (!plan) return std::unexpected(plan.error());
  in.plan = *plan;
  return {};
}

Expected<std::string> render(const DumpOptions& o, const DumpInput& in) {
  runtime::ValueNamer namer = runtime::optimized_namer(*in.plan, in.outputs, make_namer(in.graph));
  if (o.format == "dot") return render_dot(build_dump_graph(*in.plan, namer, *in.model), o.why);
  if (o.format == "html") {
    auto sources = target_kernel_sources(*in.plan, target_options(o));
    if (!sources) return std::unexpected(sources.error());
    return render_html(build_dump_graph(*in.plan, namer, *in.model), *in.plan, namer, o.graph_path,
                       KernelSources{source_language(o.target), std::move(*sources)}, *in.model);
  }
  if (o.stage == "graph")
    return ir::print_kg(runtime::standalone_graph(in.plan->optimized_outputs, in.key.inputs, namer));
  if (o.stage == "groups") return runtime::groups_text(*in.plan, namer, *in.model, o.why);
  if (o.stage == "kernels") return runtime::kernels_text(*in.plan);
  return target_kernels_text(*in.plan, target_options(o));
}

}  // namespace

int dump_command(const DumpOptions& o) {
  if (auto ok = check_combination(o); !ok) return report_error(ok.error().message);
  if (o.why && o.format == "text" && o.stage != "groups")
    fmt::print(stderr, "kiln: warning: --why applies to --stage groups (and --format dot)\n");
  DumpInput in;
  if (auto ok = prepare(o, in); !ok) return report_error(ok.error().message);
  if (!o.out_dir.empty()) {
    auto written = write_kernel_files(*in.plan, target_options(o));
    if (!written) return report_error(written.error().message);
    fmt::print(stderr, "kiln: wrote {} file{} to {}\n", written->size(), written->size() == 1 ? "" : "s", o.out_dir);
    if (!o.stage_given) return 0;  // --out-dir alone: the files are the output
  }
  auto text = render(o, in);
  if (!text) return report_error(text.error().message);
  if (auto ok = emit(o.output, *text); !ok) return report_error(ok.error().message);
  return 0;
}

}  // namespace kiln::tools
