// `kiln dump`: how a graph is optimized, fused (with cost estimates and reasons) and compiled,
// as text, a Graphviz digraph or a self-contained HTML page.
#include <fmt/format.h>

#include <filesystem>

#include <algorithm>

#include "ir/kg.h"
#include "runtime/dump_text.h"
#include "runtime/executor.h"
#include "runtime/structural_key.h"
#include "support/warm_up.h"
#include "support/write_file.h"
#include "tools/commands.h"
#include "tools/dump_dot.h"
#include "tools/dump_html.h"
#include "tools/dump_target.h"
#include "tools/graph_file.h"
#include "tools/workload.h"

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
  if (o.measure && (o.stage != "groups" || o.format != "text"))
    return make_error("--measure applies to --stage groups (text)");
  if (o.stage == "ptx" && o.target != "cuda")
    return make_error(fmt::format("--stage ptx needs --target cuda (not {})", o.target));
  if (o.stage == "spirv" && o.target != "vulkan")
    return make_error(fmt::format("--stage spirv needs --target vulkan (not {})", o.target));
  if (o.arch_given && o.target != "cuda")
    return make_error(fmt::format("--arch applies to --target cuda, not {}", o.target));
  return {};
}

Expected<void> emit(const std::string& path, const std::string& text) {
  if (path.empty()) {
    fmt::print("{}", text);
    return {};
  }
  return write_file(path, text);
}

// Everything one dump needs: the graph, the executor of its target, and the plan that executor
// runs, with the names and the cost model behind it.
struct DumpInput {
  ir::Graph g;
  ir::KgGraph graph;
  std::vector<const ir::Node*> outputs;
  runtime::StructuralKey key;
  std::unique_ptr<runtime::Executor> executor;
  std::shared_ptr<const runtime::Plan> plan;
};

bool compiles(const DumpOptions& o) {
  return o.stage == "source" || o.stage == "llvm" || o.stage == "ptx" || o.stage == "spirv" ||
         o.format == "html" || !o.out_dir.empty();
}

// kiln.toml and the environment, read here at the edge as `kiln run` reads them, with the
// command line's fuser, rates and tuning; the cache is read, never written.
Expected<runtime::DeviceOptions> dump_device_options(const DumpOptions& o, const ir::KgGraph& graph) {
  auto options = workload_device_options("");
  if (!options) return std::unexpected(options.error());
  options->namer = runtime::kg_value_namer(graph);
  if (o.fusion.fuser_given) options->fuser = *passes::parse_fuser_kind(o.fusion.fuser);  // CLI11 checked it
  if (o.fusion.fuser_given || o.fusion.max_blocks || o.fusion.beam_width)
    options->beam = *beam_options(o.fusion);  // checked by check_combination
  if (!o.rates.empty())
    options->cpu_rates = options->gpu_rates =
        o.rates == "reference" ? runtime::RatesSource::reference : runtime::RatesSource::measured;
  options->autotune = autotune_from(o.autotune, o.no_autotune, options->autotune);
  options->cache_read_only = true;
  options->time_kernels = o.measure;
  return options;
}

Expected<void> prepare(const DumpOptions& o, DumpInput& in) {
  auto graph = read_graph_file(in.g, o.graph_path, nullptr, &o.sizes);
  if (!graph) return std::unexpected(graph.error());
  in.graph = std::move(graph->graph);
  in.outputs = in.graph.output_nodes();
  in.key = runtime::structural_key(in.outputs);
  auto options = dump_device_options(o, in.graph);
  if (!options) return std::unexpected(options.error());
  const bool tune = options->autotune;
  auto executor = open_target({.target = o.target, .arch = o.arch, .arch_given = o.arch_given,
                               .tune = tune, .tune_asked = o.autotune,
                               .compile_only_fallback = true},
                              std::move(*options));
  if (!executor) return std::unexpected(executor.error());
  in.executor = std::move(*executor);
  note_inner_sizes(*in.executor, o.graph_path, in.graph);
  auto plan = in.executor->inspect(in.g, in.outputs, compiles(o), /*track=*/true);
  if (!plan) return std::unexpected(plan.error());
  in.plan = *plan;
  return {};
}

Expected<std::string> render(const DumpOptions& o, DumpInput& in) {
  const passes::CostModel& model = in.executor->cost_model();
  runtime::ValueNamer namer = runtime::optimized_namer(*in.plan, in.outputs, runtime::kg_value_namer(in.graph));
  if (o.format == "dot") return render_dot(build_dump_graph(*in.plan, namer, model), o.why);
  if (o.format == "html")
    return render_html(build_dump_graph(*in.plan, namer, model), *in.plan, namer, o.graph_path,
                       KernelSources{source_language(in.executor->target()),
                                     target_kernel_sources(*in.plan)},
                       model);
  if (o.stage == "graph") {
    ir::KgGraph kg = runtime::optimized_graph(*in.plan, in.outputs, in.key.inputs,
                                              runtime::kg_value_namer(in.graph));
    // The file's own output names (a value the reader built as its operand, such as
    // mean(%x, axes=[]), is named only there).
    for (size_t i = 0; i < kg.outputs.size() && i < in.graph.outputs.size(); ++i)
      kg.outputs[i].first = in.graph.outputs[i].first;
    return ir::print_kg(kg);
  }
  if (o.stage == "groups") return runtime::groups_text(*in.plan, namer, model, o.why);
  if (o.stage == "kernels") return runtime::kernels_text(*in.plan, in.key.inputs);
  if (o.stage == "analyze") return runtime::facts_text(*in.plan);
  return target_kernels_text(*in.plan, in.executor->target(), o.stage == "llvm" ? "source" : o.stage);
}

// --measure: the plan run o.repeat times on seeded random inputs (after warm-up runs), each
// kernel's estimate (the cost model's, as the groups print it) next to its median measured time,
// and their ratio.
Expected<std::string> measure_text(const DumpOptions& o, DumpInput& in) {
  if (!in.executor->target().can_run())
    return make_error(fmt::format("--measure: target {} has no device here to run on", o.target));
  InputSpec spec;
  spec.random = true;
  auto host = load_inputs(in.graph, spec);
  if (!host) return std::unexpected(host.error());
  auto bindings = bind_inputs(*in.executor, in.graph, *host);
  if (!bindings) return std::unexpected(bindings.error());
  // The estimates are of a steady state: warm-up runs first (at least kWarmupRuns and
  // kWarmupMs, at most kMaxWarmupRuns), so that a kernel of a few microseconds is not timed while
  // the core wakes up (small_ops: 6.2-6.8 us in the median of its first 10 runs, 4.2 after).
  constexpr int kWarmupRuns = 2, kMaxWarmupRuns = 10000;
  constexpr double kWarmupMs = 20;
  Expected<void> warmed;
  support::warm_up([&] {
    auto warm = run_repeated(*in.executor, in.g, in.outputs, *bindings, 1);
    if (!warm) warmed = std::unexpected(warm.error());
    return warm.has_value();
  }, kWarmupRuns, kWarmupMs, kMaxWarmupRuns);
  if (!warmed) return std::unexpected(warmed.error());
  auto ran = run_repeated(*in.executor, in.g, in.outputs, *bindings, o.repeat);
  if (!ran) return std::unexpected(ran.error());
  const runtime::PlanCosts costs = runtime::plan_costs(*in.plan, in.executor->cost_model());
  std::string text = fmt::format("\nmeasured on {} (median of {} run{}):\n", in.executor->name(),
                                 o.repeat, o.repeat == 1 ? "" : "s");
  text += fmt::format("  {:<8} {:>14} {:>14} {:>10}\n", "kernel", "estimate µs", "measured µs",
                      "est/meas");
  double est_total = 0, meas_total = 0;
  for (size_t k = 0; k < ran->stats.groups.size(); ++k) {
    const runtime::KernelRunInfo& kernel = ran->stats.groups[k];
    const double measured = kernel.ms * 1e3;
    const double estimate = k < costs.groups.size() ? costs.groups[k].seconds * 1e6 : 0;
    est_total += estimate;
    meas_total += measured;
    text += fmt::format("  {:<8} {:>14.3f} {:>14.3f} {:>10.2f}\n", kernel.name, estimate, measured,
                        measured > 0 ? estimate / measured : 0.0);
  }
  text += fmt::format("  {:<8} {:>14.3f} {:>14.3f} {:>10.2f}\n", "total", est_total, meas_total,
                      meas_total > 0 ? est_total / meas_total : 0.0);
  return text;
}

}  // namespace

int dump_command(const DumpOptions& o) {
  if (auto ok = check_combination(o); !ok) return report_error(ok.error().message);
  if (o.why && o.format == "text" && o.stage != "groups")
    fmt::print(stderr, "kiln: warning: --why applies to --stage groups (and --format dot)\n");
  DumpInput in;
  if (auto ok = prepare(o, in); !ok) return report_error(ok.error().message);
  if (!o.out_dir.empty()) {
    auto written = write_kernel_files(*in.plan, in.executor->target(), o.out_dir);
    if (!written) return report_error(written.error().message);
    fmt::print(stderr, "kiln: wrote {} file{} to {}\n", written->size(), written->size() == 1 ? "" : "s", o.out_dir);
    if (!o.stage_given) return 0;  // --out-dir alone: the files are the output
  }
  auto text = render(o, in);
  if (!text) return report_error(text.error().message);
  if (o.measure) {
    auto measured = measure_text(o, in);
    if (!measured) return report_error(measured.error().message);
    *text += *measured;
  }
  if (auto ok = emit(o.output, *text); !ok) return report_error(ok.error().message);
  return 0;
}

}  // namespace kiln::tools
