// Google Benchmark over the example workloads (../shared/WORKLOADS.md): each iteration computes
// and materializes the whole output on the cpu device, inputs bound before timing.
//   build/bench/kiln_bench --benchmark_filter=ew_chain
// Reports the median of 10 runs after 2 warm-ups (the first warm-up also compiles the plan).
#include <benchmark/benchmark.h>

#include <fmt/format.h>

#include "ir/kg.h"
#include "runtime/device.h"
#include "tools/graph_inputs.h"

namespace {

struct Workload {
  const char* name;
  const char* file;
};
constexpr Workload kWorkloads[] = {
    {"ew_chain", "ew_chain.kg"},   {"softmax", "softmax.kg"},       {"layernorm", "layernorm.kg"},
    {"reduce_sum", "reduce_sum.kg"}, {"argmax_axis0", "argmax_axis0.kg"}, {"small_ops", "small_ops.kg"},
    {"gemv", "gemv.kg"},           {"life", "life.kg"},             {"matmul", "matmul.kg"},
    {"matmul_bias_relu", "matmul_bias_relu.kg"},                     {"attention", "attention.kg"}};

kiln::runtime::Device& cpu() {
  static auto dev = std::move(*kiln::runtime::open_device("cpu"));
  return *dev;
}

void run_workload(benchmark::State& state, const Workload& w) {
  kiln::ir::Graph g;
  auto graph = kiln::ir::read_kg_file(g, fmt::format("{}/examples/{}", KILN_SOURCE_DIR, w.file));
  if (!graph) {
    state.SkipWithError(graph.error().message.c_str());
    return;
  }
  kiln::tools::InputSpec spec{.files = {}, .random = true, .seed = 1};
  auto host = kiln::tools::load_inputs(*graph, spec);
  kiln::runtime::Bindings bindings;
  for (size_t i = 0; i < graph->inputs.size(); ++i)
    bindings[graph->inputs[i].second] = cpu().pool()->from_host((*host)[i]).value();
  std::vector<const kiln::ir::Node*> outputs;
  for (const auto& o : graph->outputs) outputs.push_back(o.second);
  for (int warm = 0; warm < 2; ++warm) {
    auto r = cpu().execute(g, outputs, bindings);
    if (!r) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
  }
  for (auto _ : state) {
    auto r = cpu().execute(g, outputs, bindings);
    benchmark::DoNotOptimize(r);
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (const Workload& w : kWorkloads)
    benchmark::RegisterBenchmark(w.name, [&w](benchmark::State& s) { run_workload(s, w); })
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1)
        ->Repetitions(10)
        ->ReportAggregatesOnly(true)
        ->UseRealTime();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
