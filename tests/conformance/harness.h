// Runs one graph on the device under test (KILN_TEST_DEVICE: cpu, vulkan:0, cuda:0; default cpu)
// and on the reference device, and compares them with per-dtype tolerances.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "kiln/host_tensor.h"
#include "runtime/device.h"

namespace kiln::testing {

// Shared devices (creating an LLVM JIT per test would dominate the suite's run time).
std::string device_under_test_name();
// A new device under test with the options kiln.toml and its KILN_* overrides give
// (compilation.cpu_target among them), changed by `adjust`.
Expected<std::unique_ptr<runtime::Device>> open_device_under_test(
    const std::function<void(runtime::DeviceOptions&)>& adjust = {});
Expected<runtime::Device*> device_under_test();
runtime::Device& reference_device();

// Seeded inputs: floats normal(0,1) scaled by `scale` (or positive when `positive`), ints in
// [-8, 8], bools p=0.5.
ir::HostTensor make_input(ir::DType dtype, const ir::Shape& shape, uint64_t seed,
                          bool positive = false, double scale = 1.0);

struct Case {
  ir::Graph graph;
  ir::Builder b{graph};
  std::vector<std::pair<const ir::Node*, ir::HostTensor>> inputs;

  const ir::Node* input(ir::DType dtype, ir::Shape shape, bool positive = false, double scale = 1.0);
};

// Runs `outputs` on both devices; EXPECTs agreement within the dtype's tolerance relative to the
// output's scale: |cpu - ref| <= tol * max(1, max|ref|). NaN must match NaN.
void expect_matches_reference(Case& c, const std::vector<const ir::Node*>& outputs,
                              const std::string& what);
double tolerance(ir::DType dtype);
// The same on `device`, with relative tolerance `tol` (0: tolerance(dtype)).
void expect_matches_reference_on(runtime::Device& device, Case& c,
                                 const std::vector<const ir::Node*>& outputs,
                                 const std::string& what, double tol = 0);

}  // namespace kiln::testing
