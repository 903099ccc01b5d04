// The flash-attention strategy of GPU source (codegen/gpu/attention_writer.cpp): attention kernels
// choose it; on vulkan:0 (lavapipe) they give the reference device's results, under every tile
// and block size of the tuning space, for causal and non-causal attention, a decode row against
// many keys, an odd head_dim, a fully masked row (NaN) and an additive mask read from a buffer;
// the CUDA C compiles through NVRTC and ptxas.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "autotune/tune_space.h"
#include "codegen/gpu/launch_strategy.h"
#include "ir/kg.h"
#include "passes/cost_model.h"
#include "passes/fuser.h"
#include "runtime/device.h"
#include "runtime/planner.h"
#include "tests/codegen/gpu_test_util.h"
#include "tests/codegen/gpu_vulkan_runner.h"

namespace kiln::codegen::gpu {
namespace {

struct Case {
  std::string name;
  std::string text;  // a .kg graph with one output
};

// q k v of [batch..., L, d]; the composite's causal mask compares key and query indices.
std::vector<Case> cases() {
  return {
      {"causal", R"(kiln.graph v1
input %q : f32[2,2,64,32]
input %k : f32[2,2,64,32]
input %v : f32[2,2,64,32]
%y = attention(%q, %k, %v, causal=true)
output %y
)"},
      {"noncausal", R"(kiln.graph v1
input %q : f32[2,2,50,32]
input %k : f32[2,2,70,32]
input %v : f32[2,2,70,32]
%y = attention(%q, %k, %v, causal=false, scale=0.2)
output %y
)"},
      {"decode", R"(kiln.graph v1
input %q : f32[8,1,64]
input %k : f32[8,300,64]
input %v : f32[8,300,64]
%y = attention(%q, %k, %v)
output %y
)"},
      {"head40", R"(kiln.graph v1
input %q : f32[2,3,37,40]
input %k : f32[2,3,37,40]
input %v : f32[2,3,37,40]
%y = attention(%q, %k, %v, causal=true)
output %y
)"},
      // Row 0 of the mask is -inf throughout: that row sees no key (NaN, as in the reference).
      {"masked_row", R"(kiln.graph v1
input %q : f32[2,40,16]
input %k : f32[2,40,16]
input %v : f32[2,40,16]
input %dead_row_mask : f32[40,40]
%kt = permute(%k, dims=[0,2,1])
%s = matmul(%q, %kt)
%x = mul(%s, 0.25)
%l = add(%x, %dead_row_mask)
%p = softmax(%l, axis=-1)
%y = matmul(%p, %v)
output %y
)"},
      {"additive_mask", R"(kiln.graph v1
input %q : f32[2,2,33,24]
input %k : f32[2,2,45,24]
input %v : f32[2,2,45,24]
input %mask : f32[33,45]
%kt = permute(%k, dims=[0,1,3,2])
%s = matmul(%q, %kt)
%x = mul(%s, 0.2)
%l = add(%x, %mask)
%p = softmax(%l, axis=-1)
%y = matmul(%p, %v)
output %y
)"},
  };
}

struct Loaded {
  ir::Graph g;
  ir::KgGraph kg;
  std::vector<const ir::Node*> outputs, inputs;
  std::shared_ptr<runtime::Plan> plan;  // fused with a GPU's reference rates, not compiled
};

std::unique_ptr<Loaded> load(const Case& c) {
  auto l = std::make_unique<Loaded>();
  auto kg = ir::read_kg(l->g, c.text, c.name + ".kg");
  EXPECT_TRUE(kg.has_value()) << c.name << ": " << (kg ? "" : kg.error().message);
  if (!kg) return nullptr;
  l->kg = std::move(*kg);
  for (const auto& [name, node] : l->kg.outputs) l->outputs.push_back(node);
  for (const auto& [name, node] : l->kg.inputs) l->inputs.push_back(node);
  const passes::CostModel model(passes::DeviceRates::reference_gpu());
  const std::unique_ptr<passes::Fuser> fuser = passes::make_beam_fuser(model);
  runtime::PlannerOptions po;
  po.fuser = fuser.get();
  auto plan = runtime::build_plan(l->g, l->outputs, l->inputs, po);
  EXPECT_TRUE(plan.has_value()) << c.name << ": " << (plan ? "" : plan.error().message);
  if (!plan) return nullptr;
  l->plan = *plan;
  for (runtime::PlanStep& step : l->plan->steps) step.kernel.name = c.name + "_" + step.kernel.name;
  return l;
}

// Normal values; a mask input gets some -inf (never a whole row, but for dead_row_mask's first).
std::vector<ir::HostTensor> inputs_of(const Loaded& l, uint32_t seed) {
  std::vector<ir::HostTensor> out;
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (size_t n = 0; n < l.inputs.size(); ++n) {
    const ir::Node* in = l.inputs[n];
    ir::HostTensor h = ir::HostTensor::zeros(in->dtype, in->shape);
    const std::string& name = l.kg.inputs[n].first;
    const bool mask = name.ends_with("mask");
    const int64_t row = in->shape.back();
    for (int64_t i = 0; i < h.numel(); ++i) {
      const bool masked = name == "dead_row_mask" ? i < row : mask && i % 7 == 3;
      h.set(i, masked ? -INFINITY : normal(rng) * (mask ? 2.0 : 1.0));
    }
    out.push_back(std::move(h));
  }
  return out;
}

ir::HostTensor reference_output(Loaded& l, const std::vector<ir::HostTensor>& in) {
  auto ref = runtime::open_device("reference");
  EXPECT_TRUE(ref.has_value()) << ref.error().message;
  runtime::Bindings b;
  for (size_t n = 0; n < in.size(); ++n) b[l.inputs[n]] = (*ref)->pool()->from_host(in[n]).value();
  auto got = (*ref)->execute(l.g, l.outputs, b);
  EXPECT_TRUE(got.has_value()) << got.error().message;
  return (*got)[0]->to_host();
}

// Runs the plan's kernels in order on vulkan:0, `params` for the attention kernels (the default
// for the others); returns the output.
ir::HostTensor run_plan_on_vulkan(const Loaded& l, const std::vector<ir::HostTensor>& in,
                                  const TuneParams& params) {
  std::vector<ir::HostTensor> slots;
  for (const runtime::Slot& s : l.plan->slots)
    slots.push_back(s.input_index >= 0 ? in[s.input_index]
                                       : ir::HostTensor::zeros(s.dtype, s.shape));
  for (const runtime::PlanStep& step : l.plan->steps) {
    std::vector<ir::HostTensor> t;
    for (int slot : step.args) t.push_back(slots[slot]);
    const bool attention = choose_strategy(step.kernel, kir::analyze_kernel(step.kernel)).kind ==
                           Strategy::Kind::attention;
    run_on_vulkan(step.kernel, t, CheckMode::none, attention ? params : TuneParams{});
    if (testing::Test::HasFatalFailure()) return {};
    for (size_t p = 0; p < t.size(); ++p)
      if (step.kernel.params[p].output) slots[step.args[p]] = t[p];
  }
  return slots[l.plan->output_slots[0]];
}

// NaN where the reference has NaN; elsewhere within 1e-4 of the output's magnitude.
void expect_close(const ir::HostTensor& got, const ir::HostTensor& want, const std::string& what,
                  int* nans = nullptr) {
  ASSERT_EQ(got.shape, want.shape) << what;
  double scale = 1;
  for (int64_t i = 0; i < want.numel(); ++i)
    if (std::isfinite(want.get(i))) scale = std::max(scale, std::fabs(want.get(i)));
  int failures = 0;
  for (int64_t i = 0; i < want.numel() && failures < 5; ++i) {
    const double g = got.get(i), w = want.get(i);
    const bool ok = std::isnan(w) ? std::isnan(g) : std::fabs(g - w) <= 1e-4 * scale;
    if (std::isnan(w) && nans) ++*nans;
    if (!ok) {
      ++failures;
      ADD_FAILURE() << what << " element " << i << ": vulkan " << g << " reference " << w;
    }
  }
}

const kir::Kernel* attention_kernel(const Loaded& l) {
  for (const runtime::PlanStep& step : l.plan->steps)
    if (choose_strategy(step.kernel, kir::analyze_kernel(step.kernel)).kind ==
        Strategy::Kind::attention)
      return &step.kernel;
  return nullptr;
}

TEST(GpuAttention, AttentionKernelsChooseTheAttentionStrategy) {
  for (const Case& c : cases()) {
    std::unique_ptr<Loaded> l = load(c);
    ASSERT_TRUE(l);
    const kir::Kernel* k = attention_kernel(*l);
    ASSERT_NE(k, nullptr) << c.name << ": no attention kernel";
    // The kernel computing the output is that one.
    EXPECT_EQ(l->plan->steps.back().kernel.name, k->name) << c.name;
    for (Dialect d : {Dialect::glsl, Dialect::cuda}) {
      auto src = emit_source(*k, {}, d);
      ASSERT_TRUE(src.has_value()) << c.name << ": " << src.error().message;
      EXPECT_EQ(src->strategy, "attention") << c.name;
    }
    const kir::KernelFacts facts = kir::analyze_kernel(*k);
    ASSERT_TRUE(facts.attention);
    if (c.name == "causal" || c.name == "head40") {
      EXPECT_EQ(facts.attention->causal_offset, 0) << c.name;
    }
    if (c.name == "decode") {
      EXPECT_EQ(heuristic_attention_rows(*k, *facts.attention), 1);
      EXPECT_EQ(facts.attention->keys, 300);
    }
  }
}

// Tiles fit 16 KiB of shared memory for head_dim and value_dim up to 256 at 64 rows; a value row
// too long for even one query row leaves the kernel to the generic strategies.
TEST(GpuAttention, TilesFitSharedMemoryOrFallBack) {
  for (int rows : {1, 16, 32, 64})
    for (int64_t dim : {1, 40, 64, 128, 256}) {
      auto t = attention_tiles(rows, dim);
      ASSERT_TRUE(t) << rows << " rows, value_dim " << dim;
      EXPECT_LE(t->floats * 4, kAttentionSharedBytes);
      EXPECT_GE(t->value_keys, 1);
    }
  EXPECT_FALSE(attention_tiles(1, 5000));
  Case wide{"wide", R"(kiln.graph v1
input %q : f32[1,4,8]
input %k : f32[1,6,8]
input %v : f32[1,6,5000]
%y = attention(%q, %k, %v)
output %y
)"};
  std::unique_ptr<Loaded> l = load(wide);
  ASSERT_TRUE(l);
  for (const runtime::PlanStep& step : l->plan->steps) {
    const kir::KernelFacts facts = kir::analyze_kernel(step.kernel);
    EXPECT_FALSE(attention_of(step.kernel, facts));
    EXPECT_NE(choose_strategy(step.kernel, facts).kind, Strategy::Kind::attention);
  }
}

TEST(GpuAttention, KernelsMatchTheReferenceOnVulkan) {
  if (!runner().gpu) GTEST_SKIP() << "vulkan:0 is not available";
  uint32_t seed = 1;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    std::unique_ptr<Loaded> l = load(c);
    ASSERT_TRUE(l);
    const std::vector<ir::HostTensor> in = inputs_of(*l, seed++);
    const ir::HostTensor want = reference_output(*l, in);
    int nans = 0;
    expect_close(run_plan_on_vulkan(*l, in, {}), want, c.name, &nans);
    if (c.name == "masked_row") {
      EXPECT_EQ(nans, 2 * 16) << "row 0 of each batch is NaN";
    }
    if (c.name != "masked_row" && c.name != "additive_mask") {
      EXPECT_EQ(nans, 0);
    }
  }
}

// Every candidate of the tuning space, and tiles from 1 to 64 rows with small and large blocks.
TEST(GpuAttention, SchedulesMatchTheReferenceOnVulkan) {
  if (!runner().gpu) GTEST_SKIP() << "vulkan:0 is not available";
  uint32_t seed = 100;
  for (const Case& c : cases()) {
    if (c.name != "causal" && c.name != "decode" && c.name != "additive_mask") continue;
    SCOPED_TRACE(c.name);
    std::unique_ptr<Loaded> l = load(c);
    ASSERT_TRUE(l);
    const kir::Kernel* k = attention_kernel(*l);
    ASSERT_NE(k, nullptr);
    const std::vector<ir::HostTensor> in = inputs_of(*l, seed++);
    const ir::HostTensor want = reference_output(*l, in);
    std::vector<TuneParams> schedules;
    for (const autotune::TuneCandidate& cand : autotune::gpu_tune_space(*k))
      schedules.push_back(cand.params);
    EXPECT_GE(schedules.size(), c.name == "decode" ? 2u : 3u);
    schedules.push_back({.block_size = 32, .tile = 4});
    schedules.push_back({.block_size = 512, .tile = 16});
    for (const TuneParams& p : schedules) {
      auto src = emit_source(*k, p, Dialect::glsl);
      ASSERT_TRUE(src.has_value()) << p.str() << ": " << src.error().message;
      EXPECT_EQ(src->strategy, "attention") << p.str();
      expect_close(run_plan_on_vulkan(*l, in, p), want, c.name + " " + p.str());
    }
  }
}

// The runtime's own path: the graph on the vulkan:0 device gives the reference's results.
TEST(GpuAttention, VulkanDeviceRunsAttentionLikeTheReference) {
  auto vulkan = runtime::open_device("vulkan:0");
  if (!vulkan) GTEST_SKIP() << "vulkan:0 is not available: " << vulkan.error().message;
  std::unique_ptr<Loaded> l = load(cases()[0]);
  ASSERT_TRUE(l);
  const std::vector<ir::HostTensor> in = inputs_of(*l, 7);
  runtime::Bindings b;
  for (size_t n = 0; n < in.size(); ++n)
    b[l->inputs[n]] = (*vulkan)->pool()->from_host(in[n]).value();
  auto got = (*vulkan)->execute(l->g, l->outputs, b);
  ASSERT_TRUE(got.has_value()) << got.error().message;
  expect_close((*got)[0]->to_host(), reference_output(*l, in), "vulkan:0 device");
}

TEST(GpuAttention, KernelsCompileAsCuda) {
  if (!test_nvrtc()) GTEST_SKIP() << nvrtc_unavailable();
  std::vector<std::pair<std::string, std::string>> sources;
  for (const Case& c : cases()) {
    std::unique_ptr<Loaded> l = load(c);
    ASSERT_TRUE(l);
    const kir::Kernel* found = attention_kernel(*l);
    ASSERT_NE(found, nullptr) << c.name;
    kir::Kernel k = *found;
    const std::string base = k.name;
    // Every case's default schedule; the whole tuning space of the causal one (NVRTC and ptxas
    // take about a second per kernel).
    std::vector<TuneParams> schedules{TuneParams{}};
    if (c.name == "causal")
      for (const autotune::TuneCandidate& cand : autotune::gpu_tune_space(k))
        if (!(cand.params == TuneParams{})) schedules.push_back(cand.params);
    for (const TuneParams& p : schedules) {
      k.name = fmt::format("{}_{}", base, sources.size());
      auto src = emit_source(k, p, Dialect::cuda);
      ASSERT_TRUE(src.has_value()) << k.name << " " << p.str() << ": " << src.error().message;
      EXPECT_EQ(src->strategy, "attention");
      sources.emplace_back(k.name + " " + p.str(), src->text);
    }
  }
  // compute_90 only (expect_cuda_batch_compiles would add sm_80), checked by ptxas.
  std::string unit;
  for (size_t i = 0; i < sources.size(); ++i)
    unit += fmt::format("namespace kiln_batch_{} {{ // {}\n{}}}\n", i, sources[i].first,
                        sources[i].second);
  auto bin = test_nvrtc()->compile(unit, "attention", "sm_90", false);
  ASSERT_TRUE(bin.has_value()) << bin.error().message;
  if (!std::filesystem::exists("/usr/local/cuda/bin/ptxas")) return;
  const std::string ptx = testing::TempDir() + "/kiln_gpu_attention_sm_90.ptx";
  std::ofstream(ptx) << bin->ptx;
  const std::string cmd =
      fmt::format("/usr/local/cuda/bin/ptxas -O0 -arch=sm_90 {} -o /dev/null", ptx);
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "ptxas rejected " << ptx;
}

}  // namespace
}  // namespace kiln::codegen::gpu
