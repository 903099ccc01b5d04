// Autotuning on a GPU device (vulkan:0: Mesa's lavapipe here and in CI): the GPU tuning loop on
// hand-built kernels, the device's measured rates, and GpuDevice with autotune (decisions kept
// in the cache, so a second device tunes nothing and finds the tuned kernels).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "ir/builder.h"
#include "runtime/device.h"
#include "runtime/gpu_target.h"
#include "runtime/cache_keys.h"
#include "runtime/executor.h"
#include "runtime/gpu_tuner.h"
#include "runtime/measured_rates.h"
#include "tests/autotune/tune_test_kernels.h"

namespace kiln::runtime {
namespace {

using autotune::CandidateStatus;
using autotune::Level;
using autotune::TuneDecision;

std::unique_ptr<GpuBackend> vulkan() {
  auto b = open_vulkan_backend(0);
  EXPECT_TRUE(b.has_value()) << (b ? "" : b.error().message);
  return b ? std::move(*b) : nullptr;
}

// Every candidate compiled, ran and matched the default's outputs; the winner was timed.
void expect_all_checked(const TuneDecision& d) {
  for (const autotune::CandidateResult& c : d.candidates) {
    EXPECT_TRUE(c.output_checked) << c.params.str() << ": " << c.reason;
    EXPECT_NE(c.status, CandidateStatus::disqualified) << c.params.str() << ": " << c.reason;
  }
  const autotune::CandidateResult& w = d.candidates[static_cast<size_t>(d.winner_index)];
  EXPECT_EQ(w.params, d.winner);
  EXPECT_FALSE(w.samples.empty());
  for (double s : w.samples) EXPECT_GT(s, 0);
}

TEST(GpuTune, EveryKernelKindTunesWithCheckedCandidates) {
  auto backend = vulkan();
  ASSERT_TRUE(backend);
  for (const kir::Kernel& k : {autotune::testing::elementwise_kernel(64, 256),
                               autotune::testing::row_reduce_kernel(64, 512),
                               autotune::testing::matmul_kernel(64, 64, 32)}) {
    Expected<TuneDecision> d = tune_gpu_kernel(*backend, k, Level::minimal, 0, 2);
    ASSERT_TRUE(d.has_value()) << k.name << ": " << d.error().message;
    EXPECT_EQ(d->candidates.size(), 3u) << k.name;
    expect_all_checked(*d);
  }
}

TEST(GpuTune, EveryCudaCandidateCompilesToACubinWithoutAGpu) {
  auto compiler = open_cuda_compiler("sm_90");
  if (!compiler) GTEST_SKIP() << "no CUDA compiler: " << compiler.error().message;
  int compiled = 0;
  for (const kir::Kernel& k : {autotune::testing::elementwise_kernel(64, 256),
                               autotune::testing::row_reduce_kernel(64, 512),
                               autotune::testing::matmul_kernel(128, 128, 64),
                               autotune::testing::int_kernel(5000)})
    for (const autotune::TuneCandidate& c : autotune::gpu_tune_space(k)) {
      auto src = codegen::gpu::emit_source(k, c.params, codegen::gpu::Dialect::cuda);
      ASSERT_TRUE(src.has_value()) << c.params.str() << ": " << src.error().message;
      auto bin = (*compiler)->compile(*src, k.name);
      ASSERT_TRUE(bin.has_value()) << k.name << " " << c.params.str() << ": " << bin.error().message;
      EXPECT_FALSE(bin->empty());
      ++compiled;
    }
  EXPECT_GT(compiled, 25);
}

TEST(GpuTune, AFailedCompileIsDisqualifiedAndTheRunGoesOn) {
  auto backend = vulkan();
  ASSERT_TRUE(backend);
  autotune::TuneOptions opt;
  opt.hooks.fail_compile = [](size_t i) -> std::optional<std::string> {
    if (i == 1) return "shader compiler crashed";
    return std::nullopt;
  };
  opt.hooks.after_check_run = [](size_t i, autotune::KernelBuffers& bufs) {
    if (i == 2) bufs[2].bytes[3] ^= std::byte{0x40};  // an exponent bit of out[0]
  };
  Expected<TuneDecision> d =
      tune_gpu_kernel(*backend, autotune::testing::elementwise_kernel(16, 64), Level::minimal, 0, 2, opt);
  ASSERT_TRUE(d.has_value()) << d.error().message;
  EXPECT_EQ(d->candidates[1].status, CandidateStatus::disqualified);
  EXPECT_EQ(d->candidates[1].reason, "compile failed: shader compiler crashed");
  EXPECT_EQ(d->candidates[2].status, CandidateStatus::disqualified);
  EXPECT_NE(d->candidates[2].reason.find("wrong output"), std::string::npos) << d->candidates[2].reason;
  EXPECT_EQ(d->winner_index, 0);
}

// vulkan:0's rates are measured on the device, kept in the persistent cache, and read back by the
// next executor (a planted measurement is what it uses: it measured nothing).
TEST(GpuTune, RatesAreMeasuredOnceAndKeptInTheCache) {
  auto backend = vulkan();
  ASSERT_TRUE(backend);
  auto r = measure_gpu_rates(*backend);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_GT(r->bandwidth, 1e8);
  EXPECT_GT(r->compute_rate, 1e8);
  EXPECT_GT(r->launch_overhead, 0);
  const std::filesystem::path cache = std::filesystem::temp_directory_path() /
                                      ("kiln-gpu-rates-" + std::to_string(::getpid()) + ".sqlite");
  std::filesystem::remove(cache);
  DeviceOptions o;
  o.cache_path = cache.string();
  {
    auto dev = open_executor("vulkan:0", o);
    ASSERT_TRUE(dev.has_value()) << dev.error().message;
    const passes::DeviceRates measured = (*dev)->device_rates();
    EXPECT_GT(measured.bandwidth, 1e8);
    auto store = cache::Store::open(o.cache_path);
    ASSERT_TRUE(store.has_value());
    auto kept = (*store)->get(cache::Table::autotune, rates_key((*dev)->target()));
    ASSERT_TRUE(kept.has_value());
    EXPECT_EQ(rates_from_entry(*kept)->bandwidth, measured.bandwidth);
    ASSERT_TRUE((*store)->put(cache::Table::autotune, rates_key((*dev)->target()),
                              rates_entry({123e9, 7e-6, 456e9})));
  }
  auto next = open_executor("vulkan:0", o);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ((*next)->device_rates().bandwidth, 123e9);
  EXPECT_EQ((*next)->device_rates().compute_rate, 456e9);
  o.gpu_rates = RatesSource::reference;
  auto reference = open_executor("vulkan:0", o);
  ASSERT_TRUE(reference.has_value());
  EXPECT_EQ((*reference)->device_rates().bandwidth, gpu_rates(*backend).bandwidth);
  std::filesystem::remove(cache);
}

// softmax over rows of x: max, exp, sum, divide (one row-reduce kernel on the GPU).
struct Softmax {
  ir::Graph g;
  ir::Builder b{g};
  const ir::Node* x;
  const ir::Node* y;
  Softmax(int64_t rows, int64_t cols) {
    x = g.input(ir::DType::f32, {rows, cols}, "x");
    const ir::Node* m = *b.reduce(ir::Op::ReduceMax, x, std::vector<int64_t>{1}, true);
    const ir::Node* e = *b.unary(ir::Op::Exp, *b.binary(ir::Op::Sub, x, m));
    y = *b.binary(ir::Op::Div, e, *b.reduce(ir::Op::Sum, e, std::vector<int64_t>{1}, true));
  }
};

ir::HostTensor ramp(int64_t rows, int64_t cols) {
  ir::HostTensor t = ir::HostTensor::zeros(ir::DType::f32, {rows, cols});
  for (int64_t i = 0; i < rows * cols; ++i) t.set(i, static_cast<double>(i % 17) / 8.0);
  return t;
}

TEST(GpuTune, TheDeviceKeepsDecisionsForTheNextProcess) {
  const std::filesystem::path cache = std::filesystem::temp_directory_path() / "kiln-gpu-tune-test.sqlite";
  std::filesystem::remove(cache);
  DeviceOptions o;
  o.gpu_rates = RatesSource::reference;
  o.cache_path = cache.string();
  o.autotune = true;
  o.autotune_level = Level::minimal;
  Softmax s(32, 300);
  std::vector<double> first_values;
  for (int process = 0; process < 2; ++process) {
    auto dev = open_device("vulkan:0", o);
    ASSERT_TRUE(dev.has_value()) << dev.error().message;
    Bindings in{{s.x, (*dev)->pool()->from_host(ramp(32, 300)).value()}};
    RunStats stats;
    auto out = (*dev)->execute(s.g, {s.y}, in, &stats);
    ASSERT_TRUE(out.has_value()) << out.error().message;
    ir::HostTensor r = (*out)[0]->to_host();
    double row0 = 0;
    for (int64_t j = 0; j < 300; ++j) row0 += r.get(j);
    EXPECT_NEAR(row0, 1.0, 1e-5);
    if (process == 0) {
      EXPECT_EQ(stats.tuned, stats.kernels);
      EXPECT_GT(stats.tuned, 0);
      for (int64_t i = 0; i < r.numel(); i += 97) first_values.push_back(r.get(i));
    } else {
      EXPECT_EQ(stats.tuned, 0);
      EXPECT_EQ(stats.compiled, 0);  // the tuned kernels are in the cache
      size_t v = 0;
      for (int64_t i = 0; i < r.numel(); i += 97) EXPECT_EQ(r.get(i), first_values[v++]) << i;
    }
  }
  std::filesystem::remove(cache);
}

}  // namespace
}  // namespace kiln::runtime
