// GPU source emission: every example graph's kernels and hand-built kernels covering every ALU
// op x dtype, every reduction and both check modes compile as GLSL (shaderc + spirv-val) and as
// CUDA C (NVRTC, then ptxas for sm_80 / sm_90); strategy choice for the canonical shapes.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "codegen/gpu/gpu_source.h"
#include "codegen/spirv/spirv_compiler.h"
#include "ir/graph.h"
#include "ir/kg.h"
#include "passes/cost_model.h"
#include "passes/fuser.h"
#include "runtime/planner.h"
#include "runtime/structural_key.h"
#include "tests/codegen/gpu_test_util.h"

namespace kiln::codegen::gpu {
namespace {


// The kernels of an example as the GPU device plans them (beam fuser, reference GPU rates), or
// as the first fuser cuts them (`first`: more, smaller kernels).
std::vector<kir::Kernel> example_kernels(const std::string& name, bool first = false) {
  ir::Graph g;
  auto kg = ir::read_kg_file(g, std::string(KILN_SOURCE_DIR) + "/examples/" + name + ".kg");
  EXPECT_TRUE(kg.has_value()) << (kg ? "" : kg.error().message);
  if (!kg) return {};
  std::vector<const ir::Node*> outputs;
  for (const auto& [n, node] : kg->outputs) outputs.push_back(node);
  const passes::CostModel model(passes::DeviceRates::reference_gpu());
  auto fuser = first ? passes::make_first_fuser() : passes::make_beam_fuser(model);
  runtime::PlannerOptions po;
  po.fuser = fuser.get();
  auto plan = runtime::build_plan(g, outputs, runtime::structural_key(outputs).inputs, po);
  EXPECT_TRUE(plan.has_value()) << (plan ? "" : plan.error().message);
  if (!plan) return {};
  // Each distinct kernel once (life repeats one kernel per generation).
  std::vector<kir::Kernel> ks;
  std::set<std::string> seen;
  for (const auto& step : (*plan)->steps)
    if (seen.insert(kir::print_kernel(step.kernel, /*with_labels=*/false)).second) ks.push_back(step.kernel);
  return ks;
}

std::vector<std::string> example_names() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(std::string(KILN_SOURCE_DIR) + "/examples"))
    if (e.path().extension() == ".kg") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

void expect_glsl_compiles(const kir::Kernel& k, CheckMode check) {
  auto src = emit_source(k, {}, Dialect::glsl, check);
  ASSERT_TRUE(src.has_value()) << k.name << ": " << src.error().message;
  EXPECT_GE(src->launch.groups, 1);
  EXPECT_LE(src->launch.groups, 65535);
  auto again = emit_source(k, {}, Dialect::glsl, check);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(src->text, again->text) << "emission is not deterministic";
  auto spv = spirv::compile_glsl(src->text, k.name, /*optimize=*/check == CheckMode::none);
  EXPECT_TRUE(spv.has_value()) << k.name << " (" << check_mode_name(check) << "): "
                               << (spv ? "" : spv.error().message) << "\n" << src->text;
}

TEST(GpuSourceTest, ExampleKernelsCompileAsGlsl) {
  for (const std::string& name : example_names())
    for (kir::Kernel& k : example_kernels(name)) {
      k.name = name + "_" + k.name;
      for (CheckMode c : {CheckMode::none, CheckMode::validate}) expect_glsl_compiles(k, c);
    }
}

// The first fuser cuts graphs into more, smaller kernels: other shapes of the same examples.
TEST(GpuSourceTest, FirstFuserExampleKernelsCompileAsGlsl) {
  for (const std::string& name : example_names())
    for (kir::Kernel& k : example_kernels(name, /*first=*/true)) {
      k.name = name + "_first_" + k.name;
      expect_glsl_compiles(k, CheckMode::none);
    }
}

TEST(GpuSourceTest, ExampleKernelsCompileAsCuda) {
  if (!test_nvrtc()) GTEST_SKIP() << nvrtc_unavailable();
  std::vector<std::pair<std::string, std::string>> sources;
  for (const std::string& name : example_names())
    for (kir::Kernel& k : example_kernels(name)) {
      const std::string base = k.name;
      for (CheckMode c : {CheckMode::none, CheckMode::validate}) {
        k.name = fmt::format("{}_{}_{}", name, base, check_mode_name(c));
        auto src = emit_source(k, {}, Dialect::cuda, c);
        ASSERT_TRUE(src.has_value()) << k.name << ": " << src.error().message;
        sources.emplace_back(k.name, src->text);
      }
    }
  expect_cuda_batch_compiles(sources, "examples");
}

std::string strategy_of(const std::string& example) {
  auto ks = example_kernels(example);
  EXPECT_EQ(ks.size(), 1u) << example;
  if (ks.empty()) return "";
  auto src = emit_source(ks[0], {}, Dialect::glsl);
  return src ? src->strategy : src.error().message;
}

TEST(GpuSourceTest, StrategiesFollowKernelShape) {
  EXPECT_EQ(strategy_of("softmax"), "row-reduce");
  EXPECT_EQ(strategy_of("layernorm"), "row-reduce");
  EXPECT_EQ(strategy_of("matmul"), "matmul-tiled");
  EXPECT_EQ(strategy_of("matmul_bias_relu"), "matmul-tiled");
  EXPECT_EQ(strategy_of("ew_chain"), "elementwise");
  EXPECT_EQ(strategy_of("argmax_axis0"), "elementwise");  // the reduction reads the column
  // 4096 points are too few threads for a column each: 32 columns per workgroup, its threads
  // folding slices of the reduction (coalesced across the columns).
  EXPECT_EQ(strategy_of("gemv"), "column-reduce");
}

}  // namespace
}  // namespace kiln::codegen::gpu
