// Running a fuzz graph on a device and comparing its outputs with the reference's: exact values
// bit for bit (NaN with NaN, the sign of zero where IEEE fixes it), rounded ones within the
// tolerance of the least precise dtype they went through, relative to the largest magnitude
// in their history (measured on the reference).
#pragma once

#include <string>
#include <vector>

#include "fuzz_value.h"
#include "harness.h"

namespace kiln::testing::fuzz {

struct RunResult {
  std::vector<ir::HostTensor> outputs;
  std::string error;  // execute() failed: why
};

// Executes `outputs` of the case's graph (or of `outputs` rewritten into it) on `device`.
RunResult run_on(runtime::Device& device, Case& c, const std::vector<const ir::Node*>& outputs);

// For each output, the largest finite magnitude of any float value it is computed from (the
// reference's values): the devices' rounding errors are relative to it.
std::vector<double> history_scales(Case& c, const std::vector<const ir::Node*>& outputs);

// One line per disagreement (at most a few per output); empty when `got` matches `want`.
std::vector<std::string> compare_runs(const std::vector<FuzzValue>& outputs,
                                      const std::vector<double>& scales, const RunResult& got,
                                      const RunResult& want, const std::string& got_name);

}  // namespace kiln::testing::fuzz
