// The fusion cost model (DESIGN.md §5): estimated time of a group =
//   global-memory bytes read and written / bandwidth (per buffer: an intermediate of at most
//     kCacheResidentBytes moves at the cache's bandwidth; graph inputs always come from memory)
//   + kernel launches * launch overhead
//   + scalar work executed (recomputation included), priced by kind: a contraction's
//     multiply-adds at the matmul rate, each costly elementwise op (cost 4 or more: exp, tanh,
//     div...) at its own measured time per element, the rest at the compute rate (all of it on
//     one core when the group is too small to wake another: kOneCoreWorkOps),
// with the rates of the target device.
#pragma once

#include <map>
#include <string>

#include "passes/fuser.h"

namespace kiln::passes {

struct DeviceRates {
  double bandwidth = 32e9;        // bytes per second, read + written
  double launch_overhead = 5e-6;  // seconds per kernel launch
  double compute_rate = 50e9;     // scalar operations per second (all cores, vectorized)
  // By kind of work; 0 means "as above" (compute_rate, bandwidth), which the reference rates use.
  double matmul_rate = 0;      // a contraction's flops per second (2 per multiply-add)
  double cache_bandwidth = 0;  // bytes per second of buffers of at most kCacheResidentBytes
  // Seconds per f32 element of each costly elementwise op (ir::op_cost >= 4), all cores; an op
  // not here is priced at op_cost / compute_rate.
  std::map<ir::Op, double> op_seconds = {};
  // Scalar operations per second of one core: a group of fewer than kOneCoreWorkOps operations
  // runs on one (the cpu target wakes no worker for it). 0: as compute_rate (a GPU, the reference).
  double serial_compute_rate = 0;

  // Fixed rates of a 2-core AVX2 machine: deterministic estimates for golden tests and dumps.
  static DeviceRates reference_cpu() { return DeviceRates{}; }
  // A data-center GPU (HBM bandwidth, launch overhead, fp32 throughput): for GPU targets without
  // a device to ask (kiln dump --target cuda), and for GPU devices that are not the CPU.
  static DeviceRates reference_gpu() { return DeviceRates{2.0e12, 4e-6, 2.0e13}; }
  std::string str() const;
};

// A buffer this small is assumed to stay in the caches from the kernel that writes it to the one
// that reads it (and from one run to the next): two cores' L2 and a share of the L3.
inline constexpr double kCacheResidentBytes = 4.0 * 1024 * 1024;

// A group that executes fewer operations than this runs on one core where the device's rates say
// how fast one is (DeviceRates::serial_compute_rate): the cpu target wakes no sleeping worker for a
// launch of fewer than 16 chunks of 16384 points at 4 operations a point (runtime/cpu_target.cpp),
// and runs such a one-axis kernel of heavy points on the caller. small_ops (262144 operations)
// was priced at both cores' rate, 1.4 us, and ran 4.3 on one.
inline constexpr double kOneCoreWorkOps = double{1 << 20};

// An attention kernel's contractions run at this share of the matmul rate (small tiles, the
// softmax between them); each score costs this many simple ops besides its exponential.
inline constexpr double kAttentionMatmulShare = 0.75;
inline constexpr double kAttentionOpsPerScore = 8;

// A contraction evaluated outside a matmul loop nest: where a reduction in its group reads the
// product (an RMSNorm's sum of squares over a projection's output row), the backends see no matmul
// pattern, and each run of it (the kernel's, and the reduction's own) is a plain scalar reduction
// with strided loads of its second operand, the hoisted one on one thread. Such a run is priced at
// this share of the compute rate: a 256 x 256 vector-matrix product under an RMSNorm, fused so,
// ran at 3.7 GFLOP/s where the compute rate was 120 Gop/s (2 cores, AVX-512: 1/32 is one lane of
// one core), and took 141 us against 3.9 for the product and the norm as two kernels.
inline constexpr double kLooseContractionShare = 1.0 / 32;

struct AttentionMatch;

// The op kinds the cost model prices with their own rate.
enum class WorkKind : uint8_t { simple, costly, matmul };
WorkKind work_kind(const ir::Node* n);

class CostModel {
 public:
  explicit CostModel(DeviceRates rates) : rates_(rates) {}
  const DeviceRates& rates() const { return rates_; }
  // The estimate for one group as it would be lowered (see the .cpp for how recomputation,
  // hoisting of row reductions and broadcast reads are counted).
  GroupCost estimate(const FusedGroup& group) const;
  // The formula's terms, for costs the fuser adds up incrementally: moving buffer n's `bytes`;
  // `flops` of n's work (node_flops units); `launches` kernel launches.
  // A graph input is read from memory whatever its size: a program realizing in a loop touches it
  // once per run, and the run's other buffers have evicted it by the next.
  double buffer_seconds(const ir::Node* n, double bytes) const {
    const bool cached = bytes <= kCacheResidentBytes && rates_.cache_bandwidth > 0 &&
                        n->op != ir::Op::Input;
    return bytes / (cached ? rates_.cache_bandwidth : rates_.bandwidth);
  }
  double work_seconds(const ir::Node* n, double flops) const;
  double launch_seconds(int launches) const { return launches * rates_.launch_overhead; }
  // `flops` of a contraction run outside a matmul loop nest (kLooseContractionShare).
  double loose_contraction_seconds(double flops) const {
    return flops / (rates_.compute_rate * kLooseContractionShare);
  }
  // A whole attention in one kernel (passes/attention_match.h): its contractions, exponentials and
  // logits, counted once each.
  double attention_seconds(const AttentionMatch& m) const;

 private:
  // The group's flops; with `work`, adds their time (work_seconds) to it.
  double executed_flops(const FusedGroup& group, double* work = nullptr) const;

  DeviceRates rates_;
};

}  // namespace kiln::passes
