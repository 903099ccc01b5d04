// Google Benchmark over the example workloads (../shared/WORKLOADS.md): each iteration computes
// and materializes the whole output on the cpu device, inputs bound before timing.
//   build/bench/kiln_bench --benchmark_filter=ew_chain
// Reports the median of 10 runs after 2 warm-ups (the first warm-up also compiles the plan and,
// as kiln's default configuration does, tunes its kernels), all on the same input buffers; each
// timed run right after an untimed one (run_workload).
#include <benchmark/benchmark.h>

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <memory>

#include "ir/kg.h"
#include "runtime/config.h"
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

// The cpu device as `kiln run` opens it: kiln.toml in the working directory and the KILN_*
// variables, else the defaults (autotuning on, decisions kept in the cache).
kiln::runtime::Device& cpu() {
  static std::unique_ptr<kiln::runtime::Device> dev = [] {
    auto config = kiln::runtime::load_config(std::filesystem::current_path().string());
    KILN_CHECK(config.has_value()) << config.error().message;
    for (const std::string& w : config->warnings) fmt::print(stderr, "{}\n", w);
    auto options = kiln::runtime::device_options_from_config(config->config);
    KILN_CHECK(options.has_value()) << options.error().message;
    auto opened = kiln::runtime::open_device("cpu", std::move(*options));
    KILN_CHECK(opened.has_value()) << opened.error().message;
    return std::move(*opened);
  }();
  return *dev;
}

// A workload's graph, inputs (bound before timing) and outputs, made once for all of its
// repetitions, as the peers time theirs: 2 warm-up runs, then the timed runs on the same
// buffers. One workload is kept at a time.
struct Prepared {
  const Workload* workload = nullptr;
  kiln::ir::Graph g;
  kiln::runtime::Bindings bindings;
  std::vector<const kiln::ir::Node*> outputs;
  std::string error;  // why it cannot run
};

std::unique_ptr<Prepared> prepare(const Workload& w) {
  auto p = std::make_unique<Prepared>();
  p->workload = &w;
  auto graph = kiln::ir::read_kg_file(p->g, fmt::format("{}/examples/{}", KILN_SOURCE_DIR, w.file));
  if (!graph) {
    p->error = graph.error().message;
    return p;
  }
  kiln::tools::InputSpec spec{.files = {}, .random = true, .seed = 1};
  auto host = kiln::tools::load_inputs(*graph, spec);
  if (!host) {
    p->error = host.error().message;
    return p;
  }
  for (size_t i = 0; i < graph->inputs.size(); ++i) {
    auto b = cpu().pool()->from_host((*host)[i]);
    if (!b) {
      p->error = b.error().message;
      return p;
    }
    p->bindings[graph->inputs[i].second] = std::move(*b);
  }
  for (const auto& o : graph->outputs) p->outputs.push_back(o.second);
  for (int warm = 0; warm < 2 && p->error.empty(); ++warm)
    if (auto r = cpu().execute(p->g, p->outputs, p->bindings); !r) p->error = r.error().message;
  return p;
}

// The workload being timed (reset before main returns, while the device is still open).
std::unique_ptr<Prepared> current;

void run_workload(benchmark::State& state, const Workload& w) {
  if (!current || current->workload != &w) {
    current.reset();  // the last workload's buffers go first
    current = prepare(w);
  }
  if (!current->error.empty()) {
    state.SkipWithError(current->error.c_str());
    return;
  }
  // Each timed run follows an untimed one, as the peers' runs follow each other (their timer
  // wraps each of 10 back-to-back calls): between two repetitions Google Benchmark runs code of
  // its own, and a run timed right after it found less of itself in the caches (small_ops, 4 us
  // of kernel: 8 to 9 us a repetition, 6 back to back).
  auto run = [&]() -> bool {
    auto r = cpu().execute(current->g, current->outputs, current->bindings);
    if (!r) {
      state.SkipWithError(r.error().message.c_str());
      return false;
    }
    benchmark::DoNotOptimize(r);
    return true;
  };
  for (auto _ : state) {
    if (!run()) return;
    const auto start = std::chrono::steady_clock::now();
    if (!run()) return;
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
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
        ->UseManualTime();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  current.reset();
}
