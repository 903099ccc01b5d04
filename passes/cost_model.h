// The fusion cost model (DESIGN.md §5): estimated time of a group =
//   global-memory bytes read and written / bandwidth
//   + kernel launches * launch overhead
//   + scalar work executed (recomputation included) / compute rate,
// with the rates of the target device.
#pragma once

#include <string>

#include "passes/fuser.h"

namespace kiln::passes {

struct DeviceRates {
  double bandwidth = 32e9;        // bytes per second, read + written
  double launch_overhead = 5e-6;  // seconds per kernel launch
  double compute_rate = 50e9;     // scalar operations per second (all cores, vectorized)

  // Fixed rates of a 2-core AVX2 machine: deterministic estimates for golden tests and dumps.
  static DeviceRates reference_cpu() { return DeviceRates{}; }
  // A data-center GPU (HBM bandwidth, launch overhead, fp32 throughput): for GPU targets without
  // a device to ask (kiln dump --target cuda), and for GPU devices that are not the CPU.
  static DeviceRates reference_gpu() { return DeviceRates{2.0e12, 4e-6, 2.0e13}; }
  std::string str() const;
};

class CostModel {
 public:
  explicit CostModel(DeviceRates rates) : rates_(rates) {}
  const DeviceRates& rates() const { return rates_; }
  // The estimate for one group as it would be lowered (see the .cpp for how recomputation,
  // hoisting of row reductions and broadcast reads are counted).
  GroupCost estimate(const FusedGroup& group) const;
  // The formula alone, for costs the fuser adds up incrementally.
  double seconds(double bytes, int launches, double flops) const {
    return bytes / rates_.bandwidth + launches * rates_.launch_overhead +
           flops / rates_.compute_rate;
  }

 private:
  double executed_flops(const FusedGroup& group) const;

  DeviceRates rates_;
};

}  // namespace kiln::passes
