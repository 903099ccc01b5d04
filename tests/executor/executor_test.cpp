// The one executor over its targets: what `kiln dump` inspects is what a realize runs (the same
// schedules, tuned ones included), a compile-only target compiles and shows kernels but refuses to
// run them with a clear error, and one key scheme names a kernel the same way for every reader.
#include <gtest/gtest.h>

#include <filesystem>

#include <fmt/format.h>

#include "ir/builder.h"
#include "ir/kernel_facts.h"
#include "runtime/cache_keys.h"
#include "runtime/executor.h"
#include "runtime/gpu_target.h"
#include "tests/cache/temp_dir.h"

namespace kiln::runtime {
namespace {

using ir::DType;

// softmax over rows, then a scaled copy: two kernels on the cpu's reference rates.
struct TwoKernels {
  ir::Graph g;
  ir::Builder b{g};
  const ir::Node* x = g.input(DType::f32, {64, 200}, "x");
  const ir::Node* y;
  TwoKernels() {
    const ir::Node* m = *b.reduce(ir::Op::ReduceMax, x, std::vector<int64_t>{1}, true);
    const ir::Node* e = *b.unary(ir::Op::Exp, *b.binary(ir::Op::Sub, x, m));
    const ir::Node* s = *b.binary(ir::Op::Div, e, *b.reduce(ir::Op::Sum, e, std::vector<int64_t>{1}, true));
    y = *b.matmul(s, *b.permute(x, {1, 0}));
  }
};

class ExecutorTest : public cache::testing::TempDirTest {
 protected:
  DeviceOptions options() const {
    DeviceOptions o;
    o.cpu_rates = o.gpu_rates = RatesSource::reference;
    o.cache_path = path("cache.sqlite");
    return o;
  }
};

// Decisions with `planted` for both kernels of TwoKernels, at level minimal, where `o` keeps them.
void plant_decisions(const DeviceOptions& o, const codegen::TuneParams& planted) {
  auto store = cache::Store::open(o.autotune_cache_path.empty() ? o.cache_path : o.autotune_cache_path);
  ASSERT_TRUE(store.has_value());
  auto dev = open_executor("cpu", o);
  ASSERT_TRUE(dev.has_value()) << dev.error().message;
  TwoKernels t;
  auto lowered = (*dev)->inspect(t.g, {t.y}, /*compile=*/false);
  ASSERT_TRUE(lowered.has_value()) << lowered.error().message;
  ASSERT_EQ((*lowered)->steps.size(), 2u);
  for (const PlanStep& step : (*lowered)->steps) {
    autotune::TuneDecision d;
    d.winner = planted;
    d.level = autotune::Level::minimal;
    autotune::CandidateResult winner;
    winner.params = planted;
    winner.samples = {1.0};
    winner.score = 1.0;
    d.candidates.push_back(winner);
    cache::Entry e;
    const std::string json = d.to_json().dump();
    e.value.assign(json.begin(), json.end());
    ASSERT_TRUE((*store)->put(cache::Table::autotune,
                              autotune_key((*dev)->target(), step.kernel, autotune::Level::minimal), e));
  }
}

// The one kernel of `out`'s plan on a GPU executor, compiled: its strategy and source (the plan
// owns the kernel; this copies what the tests read).
struct OneGpuKernel {
  std::string strategy, text;
};
::testing::AssertionResult one_gpu_kernel(Executor& dev, ir::Graph& g, const ir::Node* out,
                                          OneGpuKernel& got) {
  auto plan = dev.inspect(g, {out});
  if (!plan) return ::testing::AssertionFailure() << plan.error().message;
  if ((*plan)->steps.size() != 1)
    return ::testing::AssertionFailure() << (*plan)->steps.size() << " steps, not 1";
  const GpuCode& k = *static_cast<const GpuKernel&>(*(*plan)->steps[0].artifact).code;
  if (k.binary.empty()) return ::testing::AssertionFailure() << "no binary";
  got = {k.gpu_source.strategy, k.gpu_source.text};
  return ::testing::AssertionSuccess();
}

codegen::TuneParams unusual_schedule() {
  codegen::TuneParams p;
  p.vector_width = 4;
  p.unroll = 2;
  return p;
}

// A decision planted in the cache with a schedule the tuner would not pick by default: a tuned
// realize and an inspection (kiln dump --autotune) both run every kernel with it, tune nothing,
// and name the same kernel entries.
TEST_F(ExecutorTest, InspectShowsTheSchedulesARealizeRuns) {
  DeviceOptions o = options();
  o.autotune = true;
  o.autotune_level = autotune::Level::minimal;
  const codegen::TuneParams planted = unusual_schedule();
  ASSERT_NO_FATAL_FAILURE(plant_decisions(o, planted));
  auto run_dev = open_executor("cpu", o);
  auto dump_dev = open_executor("cpu", o);
  ASSERT_TRUE(run_dev && dump_dev);
  TwoKernels t;
  Bindings in{{t.x, (*run_dev)->pool()->from_host(ir::HostTensor::zeros(DType::f32, {64, 200})).value()}};
  RunStats stats;
  ASSERT_TRUE((*run_dev)->execute(t.g, {t.y}, in, &stats).has_value());
  EXPECT_EQ(stats.tuned, 0);
  auto ran = (*run_dev)->plan_for(t.g, {t.y});
  auto shown = (*dump_dev)->inspect(t.g, {t.y});
  ASSERT_TRUE(ran && shown);
  ASSERT_EQ((*shown)->steps.size(), (*ran)->steps.size());
  for (size_t i = 0; i < (*ran)->steps.size(); ++i) {
    const PlanStep& step = (*shown)->steps[i];
    EXPECT_EQ(step.kernel_digest,
              kernel_key((*dump_dev)->target(), step.kernel, planted, codegen::CheckMode::none).digest())
        << step.kernel.name << ": inspected with the planted schedule";
    EXPECT_EQ(step.kernel_digest, (*ran)->steps[i].kernel_digest) << step.kernel.name;
    ASSERT_TRUE(step.artifact);
    EXPECT_EQ(step.artifact->source(), (*ran)->steps[i].artifact->source()) << step.kernel.name;
  }
  EXPECT_EQ((*shown)->tuned, 0);
}

// A process that does not tune runs the plan a tuned one stored (a tuned warm-up): its tuned
// kernels, loaded from the cache, with nothing compiled or tuned. With reference rates and one
// cache, and with measured rates kept in a separate autotune cache (the defaults: the plan keys
// depend on the rates, so the untuned process must plan with the ones the tuned one kept).
class UntunedAfterTuned : public ExecutorTest, public ::testing::WithParamInterface<bool> {};
INSTANTIATE_TEST_SUITE_P(Rates, UntunedAfterTuned, ::testing::Values(false, true),
                         [](const auto& p) { return p.param ? "Measured" : "Reference"; });

TEST_P(UntunedAfterTuned, AnUntunedProcessRunsWhatATunedOneStored) {
  DeviceOptions untuned_options = options();
  if (GetParam()) {
    untuned_options.cpu_rates = RatesSource::measured;
    untuned_options.autotune_cache_path = path("tune.sqlite");
  }
  DeviceOptions tuned = untuned_options;
  tuned.autotune = true;
  tuned.autotune_level = autotune::Level::minimal;
  const codegen::TuneParams planted = unusual_schedule();
  ASSERT_NO_FATAL_FAILURE(plant_decisions(tuned, planted));
  TwoKernels t;
  auto bind = [&](Executor& dev) {
    return Bindings{{t.x, dev.pool()->from_host(ir::HostTensor::zeros(DType::f32, {64, 200})).value()}};
  };
  std::vector<std::string> tuned_kernels;
  {
    auto warm = open_executor("cpu", tuned);
    ASSERT_TRUE(warm.has_value());
    ASSERT_TRUE((*warm)->execute(t.g, {t.y}, bind(**warm), nullptr).has_value());
    auto plan = (*warm)->plan_for(t.g, {t.y});
    ASSERT_TRUE(plan.has_value());
    for (const PlanStep& step : (*plan)->steps) {
      EXPECT_EQ(step.kernel_digest,
                kernel_key((*warm)->target(), step.kernel, planted, codegen::CheckMode::none).digest())
          << step.kernel.name << ": the tuned schedule";
      tuned_kernels.push_back(step.kernel_digest);
    }
  }
  auto untuned = open_executor("cpu", untuned_options);  // autotune off, the same caches
  ASSERT_TRUE(untuned.has_value());
  RunStats stats;
  ASSERT_TRUE((*untuned)->execute(t.g, {t.y}, bind(**untuned), &stats).has_value());
  EXPECT_EQ(stats.compiled, 0);
  EXPECT_EQ(stats.tuned, 0);
  EXPECT_EQ(stats.plan_source, "disk");
  auto plan = (*untuned)->plan_for(t.g, {t.y});
  ASSERT_TRUE(plan.has_value());
  std::vector<std::string> ran;
  for (const PlanStep& step : (*plan)->steps) ran.push_back(step.kernel_digest);
  EXPECT_EQ(ran, tuned_kernels);
}

// Without autotune a realize runs the default schedule, whatever decisions the cache holds.
TEST_F(ExecutorTest, WithoutAutotuneTheDefaultScheduleRuns) {
  auto dev = open_executor("cpu", options());
  ASSERT_TRUE(dev.has_value());
  TwoKernels t;
  auto plan = (*dev)->inspect(t.g, {t.y});
  ASSERT_TRUE(plan.has_value());
  for (const PlanStep& step : (*plan)->steps)
    EXPECT_EQ(step.kernel_digest,
              kernel_key((*dev)->target(), step.kernel, {}, codegen::CheckMode::none).digest());
}

// CUDA for sm_90 without a GPU: kernels compile (and are shown) but are not loaded, and a realize
// fails with one message naming the target rather than crashing.
TEST_F(ExecutorTest, ACompileOnlyTargetShowsKernelsAndRefusesToRun) {
  auto compiler = open_cuda_compiler("sm_90");
  if (!compiler) GTEST_SKIP() << compiler.error().message;
  // An architecture NVRTC does not know (a typo) is refused, not compiled as PTX for another.
  auto typo = open_cuda_compiler("sm_900");
  ASSERT_FALSE(typo.has_value());
  EXPECT_NE(typo.error().message.find("does not compile for sm_900; it knows sm_"),
            std::string::npos)
      << typo.error().message;
  auto dev = Executor::create(std::make_unique<GpuTarget>(std::move(*compiler)),
                              options());
  ASSERT_TRUE(dev.has_value());
  EXPECT_FALSE((*dev)->target().can_run());
  TwoKernels t;
  auto plan = (*dev)->inspect(t.g, {t.y});
  ASSERT_TRUE(plan.has_value()) << plan.error().message;
  for (const PlanStep& step : (*plan)->steps) {
    ASSERT_TRUE(step.artifact);
    EXPECT_FALSE(step.artifact->loaded());
    EXPECT_NE(step.artifact->source().find("extern \"C\" __global__"), std::string::npos);
    auto forms = (*dev)->target().forms(*step.artifact, step.kernel.name);
    ASSERT_TRUE(forms.has_value()) << forms.error().message;
    ASSERT_GE(forms->size(), 2u);
    EXPECT_EQ((*forms)[1].stage, "ptx");
    EXPECT_NE((*forms)[1].bytes.find(".target sm_90"), std::string::npos);
  }
  Bindings in{{t.x, (*dev)->pool()->from_host(ir::HostTensor::zeros(DType::f32, {64, 200})).value()}};
  auto out = (*dev)->execute(t.g, {t.y}, in, nullptr);
  ASSERT_FALSE(out.has_value());
  EXPECT_EQ(out.error().message.find("cuda (sm_90, compile only)"), 0u) << out.error().message;
}

// A dynamic GPU kernel bound to another extent of its bucket (what a symbolic plan does at each new
// size) shares the compiled code, source and binary, with the kernel it was compiled as: only the
// extent differs. A static kernel, or an extent outside [0, kMaxDynamicBound], gets none.
TEST_F(ExecutorTest, AGpuKernelBoundToAnotherExtentSharesItsCode) {
  auto compiler = open_cuda_compiler("sm_90");
  if (!compiler) GTEST_SKIP() << compiler.error().message;
  GpuTarget target(std::move(*compiler));
  // y[v0] = x[v0] * 2 over 6 points, dynamic in the bucket (4, 8].
  kir::Kernel k;
  k.name = "twice";
  k.arena = std::make_shared<kir::ExprArena>();
  k.domain = {6};
  k.params = {{DType::f32, {6}, false, "x"}, {DType::f32, {6}, true, "y"}};
  k.stores.push_back({1, k.arena->var(0),
                      k.arena->alu(kir::Alu::Mul, DType::f32,
                                   {k.arena->load(0, DType::f32, k.arena->var(0)),
                                    k.arena->constant(DType::f32, 2.0)})});
  const kir::KernelFacts static_facts = kir::analyze_kernel(k);
  auto fixed = target.compile(k, static_facts, {}, codegen::CheckMode::none, /*load=*/false);
  ASSERT_TRUE(fixed.has_value()) << fixed.error().message;
  EXPECT_EQ(target.with_outer_extent(**fixed, 7), nullptr)
      << "a static kernel serves its size only";
  EXPECT_FALSE(target.serves_instance(k, {}));

  k.dynamic_outer = true;
  k.dynamic_bound = 8;
  const kir::KernelFacts facts = kir::analyze_kernel(k);
  ASSERT_TRUE(target.serves_any_outer_extent(k, facts, codegen::CheckMode::none));
  EXPECT_TRUE(target.serves_instance(k, {}));
  auto compiled = target.compile(k, facts, {}, codegen::CheckMode::none, /*load=*/false);
  ASSERT_TRUE(compiled.has_value()) << compiled.error().message;
  const auto& at6 = static_cast<const GpuKernel&>(**compiled);
  EXPECT_EQ(at6.outer_extent, 6);
  EXPECT_GT(at6.code->gpu_source.launch.dynamic_tasks, 0);
  std::shared_ptr<const Artifact> bound = target.with_outer_extent(**compiled, 7);
  ASSERT_NE(bound, nullptr);
  const auto& at7 = static_cast<const GpuKernel&>(*bound);
  EXPECT_EQ(at7.outer_extent, 7);
  EXPECT_EQ(at7.code, at6.code) << "the code is shared, not copied";
  EXPECT_EQ(&bound->source(), &(*compiled)->source());
  EXPECT_NE(at7.summary().find("(dynamic: outer extent 7)"), std::string::npos) << at7.summary();
  EXPECT_EQ(target.with_outer_extent(**compiled, -1), nullptr);
  EXPECT_EQ(target.with_outer_extent(**compiled, codegen::gpu::kMaxDynamicBound + 1), nullptr);
  EXPECT_NE(target.with_outer_extent(**compiled, codegen::gpu::kMaxDynamicBound), nullptr);
}

// compilation.matmul_precision = "high" on a CUDA compiler of sm_80 or later: f32, f16 and bf16
// matmuls become the tensor-core strategy (mma.sync of the operands' kind, compiled by NVRTC and
// checked by ptxas into the cubin), the target says so in its cache identity; the default
// precision and older architectures keep the tiled matmul for f32 (and the reductions of the
// generic strategies for f16 and bf16, whose products the reference rounds).
TEST_F(ExecutorTest, TensorCoreMatmulsOnCudaSm80AndLater) {
  auto key_of = [](const Target& t) {
    for (const auto& [k, v] : t.identity())
      if (k == "matmul") return v;
    return std::string("none");
  };
  struct Want {
    const char* arch;
    bool asked;
    DType dtype;
    const char* strategy;
    const char* instruction;
  };
  const Want wants[] = {
      {"sm_90", true, DType::f32, "matmul-mma", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"},
      {"sm_80", true, DType::f32, "matmul-mma", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"},
      {"sm_90", true, DType::f16, "matmul-mma", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"},
      {"sm_90", true, DType::bf16, "matmul-mma", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"},
      {"sm_90", false, DType::f32, "matmul-tiled", nullptr},
      {"sm_90", false, DType::bf16, "column-reduce", nullptr},
      {"sm_75", true, DType::f32, "matmul-tiled", nullptr},
      {"sm_75", true, DType::f16, "column-reduce", nullptr},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(fmt::format("{} {} {}", w.arch, w.asked ? "high" : "highest", ir::dtype_name(w.dtype)));
    auto compiler = open_cuda_compiler(w.arch);
    if (!compiler) GTEST_SKIP() << compiler.error().message;
    auto dev = Executor::create(std::make_unique<GpuTarget>(std::move(*compiler), w.asked), options());
    ASSERT_TRUE(dev.has_value()) << dev.error().message;
    const bool mma = w.instruction != nullptr;
    EXPECT_EQ(key_of((*dev)->target()), mma ? "tensor-cores" : "none");
    ir::Graph g;
    ir::Builder b(g);
    const ir::Node* x = g.input(w.dtype, {100, 50}, "x");
    const ir::Node* m = g.input(w.dtype, {50, 72}, "m");
    const ir::Node* y = *b.unary(ir::Op::Relu, *b.matmul(x, m));
    OneGpuKernel k;
    ASSERT_TRUE(one_gpu_kernel(**dev, g, y, k));
    EXPECT_EQ(k.strategy, w.strategy);
    EXPECT_EQ(k.text.find("mma.sync") != std::string::npos, mma);
    if (mma) {
      EXPECT_NE(k.text.find(w.instruction), std::string::npos);
      // A depth of 50 is no multiple of a 16-byte chunk: the operands go through registers.
      EXPECT_EQ(k.text.find("cp.async.cg"), std::string::npos);
      // Plain loads along 16-byte chunks (x as stored, m read from its transpose) are copied
      // to shared memory by cp.async and read into fragments by ldmatrix; an operand off the
      // chunk grid (x sliced from column 1) keeps the registers.
      for (bool off_grid : {false, true}) {
        ir::Graph g2;
        ir::Builder b2(g2);
        const ir::Node* x2 = g2.input(w.dtype, {96, off_grid ? 65 : 64}, "x");
        const ir::Node* mt = g2.input(w.dtype, {72, 64}, "mt");
        const ir::Node* xa = off_grid ? *b2.slice(x2, 1, 1, 65, 1) : x2;
        const ir::Node* y2 = *b2.matmul(xa, *b2.permute(mt, {1, 0}));
        OneGpuKernel k2;
        ASSERT_TRUE(one_gpu_kernel(**dev, g2, y2, k2));
        EXPECT_EQ(k2.strategy, "matmul-mma");
        EXPECT_NE(k2.text.find(w.instruction), std::string::npos);
        EXPECT_EQ(k2.text.find("cp.async.cg.shared.global") != std::string::npos, !off_grid);
        EXPECT_EQ(k2.text.find("kiln_ldm4(fa") != std::string::npos, !off_grid);
      }
    }
  }
}

// Attention on CUDA sm_90 with matmul_precision = "high" runs both products on the tensor cores
// (strategy attention-mma, tf32 mma.sync) where the head and value widths are multiples of 8 up
// to 128; otherwise, and at "highest", the SIMT flash kernel. Compiled with NVRTC and ptxas.
TEST_F(ExecutorTest, AttentionOnTheTensorCoresOnCudaSm80AndLater) {
  struct Want {
    bool asked;
    int64_t head, value;
    bool causal;
    const char* strategy;
  };
  const Want wants[] = {{true, 64, 64, true, "attention-mma"},   {true, 128, 40, false, "attention-mma"},
                        {false, 64, 64, true, "attention"},      {true, 36, 64, false, "attention"},
                        {true, 64, 136, false, "attention"}};
  for (const Want& w : wants) {
    SCOPED_TRACE(fmt::format("{} head {} value {}", w.asked ? "high" : "highest", w.head, w.value));
    auto compiler = open_cuda_compiler("sm_90");
    if (!compiler) GTEST_SKIP() << compiler.error().message;
    auto dev = Executor::create(std::make_unique<GpuTarget>(std::move(*compiler), w.asked), options());
    ASSERT_TRUE(dev.has_value()) << dev.error().message;
    ir::Graph g;
    ir::Builder b(g);
    const ir::Node* q = g.input(DType::f32, {2, 100, w.head}, "q");
    const ir::Node* k = g.input(DType::f32, {2, 120, w.head}, "k");
    const ir::Node* v = g.input(DType::f32, {2, 120, w.value}, "v");
    const ir::Node* y = *b.attention(q, k, v, w.causal, std::nullopt);
    OneGpuKernel kernel;
    ASSERT_TRUE(one_gpu_kernel(**dev, g, y, kernel));
    EXPECT_EQ(kernel.strategy, w.strategy);
    EXPECT_EQ(
        kernel.text.find("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") != std::string::npos,
        std::string(w.strategy) == "attention-mma");
  }
}

// Realizing the same outputs again reuses their structural key; a new graph never does, even
// where its nodes take the addresses of a destroyed graph's (the key is by graph serial).
TEST_F(ExecutorTest, ARepeatedRealizeAndANewGraphAtTheSameAddressesBothGetTheirOwnPlan) {
  auto dev = open_executor("cpu", options());
  ASSERT_TRUE(dev.has_value()) << dev.error().message;
  ir::HostTensor h = ir::HostTensor::zeros(DType::f32, {5});
  for (int i = 0; i < 5; ++i) h.set(i, i - 2);
  for (int round = 0; round < 6; ++round) {
    // Alternately x + 1 and x * 3, each in a fresh graph built the same way: the allocator
    // tends to give the new graph's nodes the old one's addresses.
    auto g = std::make_unique<ir::Graph>();
    ir::Builder b{*g};
    const ir::Node* x = g->input(DType::f32, {5}, "x");
    const bool add = round % 2 == 0;
    const ir::Node* y = add ? *b.binary(ir::Op::Add, x, *b.full({}, 1, DType::f32))
                            : *b.binary(ir::Op::Mul, x, *b.full({}, 3, DType::f32));
    for (int repeat = 0; repeat < 2; ++repeat) {
      auto out = (*dev)->execute(*g, {y}, {{x, (*dev)->pool()->from_host(h).value()}});
      ASSERT_TRUE(out.has_value()) << out.error().message;
      ir::HostTensor r = (*out)[0]->to_host();
      for (int i = 0; i < 5; ++i)
        EXPECT_EQ(r.get(i), add ? (i - 2) + 1 : (i - 2) * 3) << "round " << round << ", element " << i;
    }
  }
}

}  // namespace
}  // namespace kiln::runtime
