// The conformance harness: the device under test (KILN_TEST_DEVICE, default cpu) vs reference.
#include "harness.h"

#include "runtime/config.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

namespace kiln::testing {

std::string device_under_test_name() {
  const char* name = std::getenv("KILN_TEST_DEVICE");
  return name && *name ? name : "cpu";
}

// Opened with the options kiln.toml and its KILN_* overrides give, as a program would: ctest
// runs the cpu suites a second time with KILN_COMPILATION_CPU_TARGET=x86-64-v3.
Expected<std::unique_ptr<runtime::Device>> open_device_under_test(
    const std::function<void(runtime::DeviceOptions&)>& adjust) {
  auto loaded = runtime::load_config(std::filesystem::current_path().string());
  if (!loaded) return std::unexpected(loaded.error());
  auto options = runtime::device_options_from_config(loaded->config);
  if (!options) return std::unexpected(options.error());
  if (adjust) adjust(*options);
  return runtime::open_device(device_under_test_name(), std::move(*options));
}

Expected<runtime::Device*> device_under_test() {
  static Expected<std::unique_ptr<runtime::Device>> dev = open_device_under_test();
  if (!dev) return std::unexpected(dev.error());
  return dev->get();
}

runtime::Device& reference_device() {
  static std::unique_ptr<runtime::Device> dev = std::move(*runtime::open_device("reference"));
  return *dev;
}

ir::HostTensor make_input(ir::DType dtype, const ir::Shape& shape, uint64_t seed, bool positive,
                          double scale) {
  ir::HostTensor t = ir::HostTensor::zeros(dtype, shape);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v;
    if (ir::is_float(dtype)) {
      v = normal(rng) * scale;
      if (positive) v = std::abs(v) + 0.25;
    } else if (dtype == ir::DType::boolean) {
      v = static_cast<double>(rng() & 1);
    } else if (dtype == ir::DType::u8) {
      v = static_cast<double>(rng() % 17);
    } else {
      v = static_cast<double>(static_cast<int64_t>(rng() % 17) - 8);
      if (positive) v = std::abs(v) + 1;
    }
    t.set(i, v);
  }
  return t;
}

const ir::Node* Case::input(ir::DType dtype, ir::Shape shape, bool positive, double scale) {
  const ir::Node* n = graph.input(dtype, shape, "in" + std::to_string(inputs.size()));
  inputs.emplace_back(n, make_input(dtype, shape, 1234 + inputs.size() * 7919, positive, scale));
  return n;
}

double tolerance(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::f64: return 1e-9;
    case ir::DType::f32: return 2e-5;
    case ir::DType::f16: return 4e-3;
    case ir::DType::bf16: return 3e-2;
    case ir::DType::i32:
    case ir::DType::i64:
    case ir::DType::i8:
    case ir::DType::u8:
    case ir::DType::boolean: return 0;  // exact
  }
  return 0;
}

namespace {

// Graphs compared and outputs that matched, printed when the test process ends (the GPU check's
// report counts them: scripts/gpu-check.sh).
struct Tally {
  std::string device;
  int graphs = 0, outputs = 0, matched = 0;
  ~Tally() {
    if (graphs > 0)
      std::printf("conformance: %d graphs, %d of %d outputs matched the reference on %s\n", graphs,
                  matched, outputs, device.c_str());
  }
};
Tally tally;

}  // namespace

void expect_matches_reference(Case& c, const std::vector<const ir::Node*>& outputs,
                              const std::string& what) {
  auto dut = device_under_test();
  if (!dut) {
    // A GPU that is not there is skipped; every other device must open (vulkan:0 is lavapipe).
    if (device_under_test_name().starts_with("cuda"))
      GTEST_SKIP() << "no CUDA device: " << dut.error().message;
    ADD_FAILURE() << "cannot open device " << device_under_test_name() << ": " << dut.error().message;
    return;
  }
  expect_matches_reference_on(**dut, c, outputs, what);
}

void expect_matches_reference_on(runtime::Device& device, Case& c,
                                 const std::vector<const ir::Node*>& outputs,
                                 const std::string& what, double relative_tol) {
  runtime::Bindings dut_in, ref_in;
  for (auto& [node, host] : c.inputs) {
    dut_in[node] = device.pool()->from_host(host).value();
    ref_in[node] = reference_device().pool()->from_host(host).value();
  }
  auto got = device.execute(c.graph, outputs, dut_in);
  ASSERT_TRUE(got.has_value()) << what << ": " << device.name() << ": " << got.error().message;
  auto want = reference_device().execute(c.graph, outputs, ref_in);
  ASSERT_TRUE(want.has_value()) << what << ": reference: " << want.error().message;
  tally.device = device.name();
  ++tally.graphs;
  for (size_t o = 0; o < outputs.size(); ++o) {
    ++tally.outputs;
    ir::HostTensor g = (*got)[o]->to_host(), w = (*want)[o]->to_host();
    ASSERT_EQ(g.dtype, outputs[o]->dtype) << what;
    ASSERT_EQ(g.shape, w.shape) << what;
    double scale = 1;
    for (int64_t i = 0; i < w.numel(); ++i)
      if (std::isfinite(w.get(i))) scale = std::max(scale, std::abs(w.get(i)));
    double tol = (relative_tol > 0 ? relative_tol : tolerance(w.dtype)) * scale;
    int bad = 0;
    for (int64_t i = 0; i < w.numel() && bad < 5; ++i) {
      double a = g.get(i), b = w.get(i);
      bool ok = (std::isnan(a) && std::isnan(b)) || a == b || std::abs(a - b) <= tol;
      if (!ok) {
        ++bad;
        ADD_FAILURE() << what << ": output " << o << " element " << i << ": " << device.name() << " " << a
                      << " reference " << b << " (tolerance " << tol << ")";
      }
    }
    if (bad == 0) ++tally.matched;
  }
}

}  // namespace kiln::testing
