// The .kg regressions of GPU source (tests/graphs/gpu_regressions: reductions ending in a scalar,
// a single row or a single column, with more work after them; gathers, whose index loads feed
// other loads): each graph runs on vulkan:0 and gives the cpu device's results; each of its GPU
// kernels, under every schedule that applies (splits 1 and 4, reductions in the thread, four
// lanes), gives the cpu backend's results on vulkan:0, or is refused there when it would outrun
// lavapipe's loop budget, and compiles as CUDA through NVRTC and ptxas.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "ir/kg.h"
#include "passes/cost_model.h"
#include "passes/fuser.h"
#include "runtime/device.h"
#include "runtime/planner.h"
#include "tests/codegen/gpu_test_util.h"
#include "tests/codegen/gpu_vulkan_runner.h"

namespace kiln::codegen::gpu {
namespace {

std::vector<std::filesystem::path> regression_graphs() {
  std::vector<std::filesystem::path> out;
  for (const auto& e :
       std::filesystem::directory_iterator(KILN_SOURCE_DIR "/tests/graphs/gpu_regressions"))
    if (e.path().extension() == ".kg") out.push_back(e.path());
  std::ranges::sort(out);
  return out;
}

struct LoadedGraph {
  ir::Graph g;
  ir::KgGraph kg;
  std::vector<const ir::Node*> outputs;
  std::vector<const ir::Node*> inputs;
};

std::unique_ptr<LoadedGraph> load(const std::filesystem::path& path) {
  auto l = std::make_unique<LoadedGraph>();
  auto kg = ir::read_kg_file(l->g, path.string());
  EXPECT_TRUE(kg.has_value()) << (kg ? "" : kg.error().message);
  if (!kg) return nullptr;
  l->kg = std::move(*kg);
  for (const auto& [name, node] : l->kg.outputs) l->outputs.push_back(node);
  for (const auto& [name, node] : l->kg.inputs) l->inputs.push_back(node);
  return l;
}

// The kernels the GPU devices run for the graph: fused with a GPU's reference rates, as
// `kiln dump --target cuda` does, each named after the graph.
std::vector<kir::Kernel> gpu_kernels(const std::filesystem::path& path) {
  std::unique_ptr<LoadedGraph> l = load(path);
  if (!l) return {};
  const passes::CostModel model(passes::DeviceRates::reference_gpu());
  const std::unique_ptr<passes::Fuser> fuser = passes::make_beam_fuser(model);
  runtime::PlannerOptions po;
  po.fuser = fuser.get();
  auto plan = runtime::build_plan(l->g, l->outputs, l->inputs, po);
  EXPECT_TRUE(plan.has_value()) << path << ": " << (plan ? "" : plan.error().message);
  std::vector<kir::Kernel> out;
  if (!plan) return out;
  for (const runtime::PlanStep& step : (*plan)->steps) {
    out.push_back(step.kernel);
    out.back().name = path.stem().string() + "_" + step.kernel.name;
  }
  return out;
}

// Every schedule that applies to `k` (emit_source rejects the others).
std::vector<TuneParams> schedules(const kir::Kernel& k) {
  std::vector<TuneParams> out;
  for (const TuneParams& p :
       {TuneParams{}, TuneParams{.splits = 1}, TuneParams{.splits = 4},
        TuneParams{.reduce = GpuReduce::thread}, TuneParams{.vector_loads = kLanes}})
    if (emit_source(k, p, Dialect::glsl).has_value()) out.push_back(p);
  return out;
}

ir::HostTensor normal_input(ir::DType t, const ir::Shape& shape, uint32_t seed) {
  ir::HostTensor h = ir::HostTensor::zeros(t, shape);
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int64_t i = 0; i < h.numel(); ++i) h.set(i, normal(rng));
  return h;
}

TEST(GpuGraphRegressions, GraphsRunOnVulkanLikeTheCpuDevice) {
  auto vulkan = runtime::open_device("vulkan:0");
  if (!vulkan) GTEST_SKIP() << "vulkan:0 is not available: " << vulkan.error().message;
  runtime::DeviceOptions reference_rates;
  reference_rates.cpu_rates = runtime::RatesSource::reference;
  auto cpu = runtime::open_device("cpu", reference_rates);
  ASSERT_TRUE(cpu.has_value()) << cpu.error().message;
  const auto graphs = regression_graphs();
  ASSERT_GE(graphs.size(), 10u);
  uint32_t seed = 1;
  for (const auto& path : graphs) {
    SCOPED_TRACE(path.filename().string());
    std::unique_ptr<LoadedGraph> l = load(path);
    ASSERT_TRUE(l);
    runtime::Bindings on_gpu, on_cpu;
    for (const ir::Node* in : l->inputs) {
      const ir::HostTensor h = normal_input(in->dtype, in->shape, seed++);
      on_gpu[in] = (*vulkan)->pool()->from_host(h).value();
      on_cpu[in] = (*cpu)->pool()->from_host(h).value();
    }
    auto got = (*vulkan)->execute(l->g, l->outputs, on_gpu);
    ASSERT_TRUE(got.has_value()) << got.error().message;
    auto want = (*cpu)->execute(l->g, l->outputs, on_cpu);
    ASSERT_TRUE(want.has_value()) << want.error().message;
    for (size_t o = 0; o < l->outputs.size(); ++o) {
      const ir::HostTensor g = (*got)[o]->to_host(), w = (*want)[o]->to_host();
      ASSERT_EQ(g.shape, w.shape);
      double scale = 1;  // sums of thousands of terms: relative to the output's magnitude
      for (int64_t i = 0; i < w.numel(); ++i) scale = std::max(scale, std::fabs(w.get(i)));
      for (int64_t i = 0; i < w.numel(); ++i)
        ASSERT_NEAR(g.get(i), w.get(i), 1e-4 * scale) << l->kg.outputs[o].first << " element " << i;
    }
  }
}

TEST(GpuGraphRegressions, KernelsMatchTheCpuBackendUnderEverySchedule) {
  if (!runner().gpu) GTEST_SKIP() << "vulkan:0 is not available";
  ASSERT_TRUE(runner().cpu);
  uint32_t seed = 1000;
  int runs = 0;
  for (const auto& path : regression_graphs())
    for (const kir::Kernel& k : gpu_kernels(path))
      for (const TuneParams& p : schedules(k)) {
        // A thread per point over the 100000-long scalar reduction is refused on lavapipe: its
        // loops would be cut short (unnoticed here: with the inputs' NaNs both results are NaN).
        if (over_loop_limit(k, p)) {
          expect_loop_limit_refusal(k, p);
          continue;
        }
        // +-1 and +-2 (and rare NaNs): sums are exact in any order.
        run_both(k, CheckMode::none, seed++, p, Inputs::reduce);
        ++runs;
      }
  EXPECT_GE(runs, 40);
}

TEST(GpuGraphRegressions, KernelsCompileAsCudaUnderEverySchedule) {
  if (!test_nvrtc()) GTEST_SKIP() << nvrtc_unavailable();
  std::vector<std::pair<std::string, std::string>> sources;
  for (const auto& path : regression_graphs())
    for (kir::Kernel k : gpu_kernels(path)) {
      const std::string base = k.name;
      for (const TuneParams& p : schedules(k)) {
        k.name = fmt::format("{}_{}", base, sources.size());
        auto src = emit_source(k, p, Dialect::cuda);
        ASSERT_TRUE(src.has_value()) << k.name << " " << p.str() << ": " << src.error().message;
        sources.emplace_back(k.name + " " + p.str(), src->text);
      }
    }
  ASSERT_GE(sources.size(), 40u);
  expect_cuda_batch_compiles(sources, "gpu_regressions");
}

}  // namespace
}  // namespace kiln::codegen::gpu
