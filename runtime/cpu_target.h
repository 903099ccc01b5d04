// The `cpu` target: kernels JIT-compiled by the cpu backend (codegen/cpu), object code in the
// persistent cache, launches split over a thread pool, kernels reading and writing host buffers
// in place (host_memory: the executor never copies).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autotune/runner.h"
#include "codegen/cpu/cpu_backend.h"
#include "runtime/target.h"
#include "support/thread_pool.h"

namespace kiln::runtime {

struct CpuTargetOptions {
  // kiln.toml compilation.cpu_target (codegen::CpuBackend::create): "native", "x86-64-v3", ...
  std::string cpu_target = "native";
  int num_threads = 0;  // 0: support::ThreadPool::default_threads()
};

// What a cpu kernel entry holds besides its object code (the metadata), read and checked: the
// symbol to link, the range of the outer loop, the smallest chunk of it worth a thread.
struct CpuEntry {
  std::string symbol;
  int64_t outer_extent = 0;
  int64_t min_chunk = 1;
  bool dynamic_outer = false;  // compiled from a dynamic kernel (absent in older entries: false)
  int chunks_per_thread = 0;   // codegen::CpuArtifact::chunks_per_thread (absent: 0)
  int64_t chunk_align = 1;     // codegen::CpuArtifact::chunk_align (absent: 1)
  int32_t size_slots = 0;      // codegen::CpuArtifact::size_slots (absent: 0)
  std::vector<int64_t> size_limits = {};  // codegen::CpuArtifact::size_limits (absent: none)
  int64_t unit_rows = 0;                  // codegen::CpuArtifact::unit_rows (absent: 0)
};
Expected<CpuEntry> read_cpu_entry(const cache::Entry& entry);

// The smallest chunk of a kernel's outer axis worth a thread of its own.
int64_t cpu_min_chunk(const kir::Kernel& kernel);

class CpuTarget final : public Target {
 public:
  static Expected<std::unique_ptr<CpuTarget>> create(const CpuTargetOptions& options);

  std::string name() const override { return "cpu"; }
  bool can_run() const override { return true; }
  std::string source_extension() const override { return "ll"; }
  std::vector<std::pair<std::string, std::string>> identity() const override;
  passes::DeviceRates reference_rates() const override { return passes::DeviceRates::reference_cpu(); }
  Expected<passes::DeviceRates> measure_rates() override;
  std::string rates_setup() const override;
  bool plans_with_measured_rates() const override { return true; }
  Expected<std::shared_ptr<const Artifact>> compile(const kir::Kernel& kernel,
                                                    const kir::KernelFacts& facts,
                                                    const codegen::TuneParams& params,
                                                    codegen::CheckMode check, bool load) override;
  bool serves_any_outer_extent(const kir::Kernel& kernel, const kir::KernelFacts& facts,
                               codegen::CheckMode check) const override;
  bool serves_instance(const kir::Kernel& kernel,
                       const std::vector<bool>& written_only) const override;
  std::shared_ptr<const Artifact> with_outer_extent(const Artifact& artifact,
                                                    int64_t outer_extent) const override;
  bool serves_any_sizes(const kir::Kernel& kernel, const kir::KernelFacts& facts,
                        codegen::CheckMode check) const override;
  bool serves_sizes_instance(const kir::KernelFacts& general, const kir::Kernel& special,
                             const kir::KernelFacts& special_facts) const override;
  std::shared_ptr<const Artifact> with_sizes(const Artifact& artifact,
                                             const kir::Kernel& instance) const override;
  std::optional<cache::Entry> to_entry(const Artifact& artifact) const override;
  Expected<std::shared_ptr<const Artifact>> from_entry(const cache::Entry& entry, bool load) override;
  Expected<std::vector<ArtifactForm>> forms(const Artifact& artifact, const std::string& name) override;
  Expected<autotune::TuneDecision> tune(const kir::Kernel& kernel, autotune::Level level,
                                        double roofline_ms) override;
  Expected<std::optional<double>> time_ratio(const kir::Kernel& candidate,
                                             const kir::Kernel& reference) override;
  int64_t cache_resident_bytes() const override;
  bool host_memory() const override { return true; }
  std::shared_ptr<DeviceMemory> wrap(std::shared_ptr<Buffer> buffer) override;
  Expected<std::shared_ptr<DeviceMemory>> allocate(size_t bytes) override;
  Expected<std::unique_ptr<Stream>> create_stream() override;

  codegen::CpuBackend& backend() { return *backend_; }
  support::ThreadPool& threads() { return threads_; }

 private:
  CpuTarget(std::unique_ptr<codegen::CpuBackend> backend, const CpuTargetOptions& options);
  // Runs like the device runs `kernel`: cut over the threads in its chunks per thread.
  autotune::ParallelFor parallel_for_like(const kir::Kernel& kernel);
  // Compiles for a bench (tuning, time_ratio), keeping the code in recent_.
  autotune::CpuCompile bench_compile();
  // The code a bench compiled for `kernel_text` under `schedule` (TuneParams::str), or null;
  // `take` also drops every entry of that kernel (the losers of its bench).
  std::shared_ptr<const codegen::CpuArtifact> recent_code(const std::string& kernel_text,
                                                          const std::string& schedule, bool take);

  std::unique_ptr<codegen::CpuBackend> backend_;
  support::ThreadPool threads_;
  std::shared_ptr<BufferPool> scratch_;  // allocate()'s buffers (tuning, the check slot)

  // The code the last benches compiled, by kernel text (kir::print_kernel without labels) and
  // schedule: the tuner compiles every candidate, time_ratio both kernels, and the plan then
  // compiles the one chosen; that compile takes the code from here (and drops the kernel's other
  // entries: the losers). At most kRecentCode entries, the oldest dropped first.
  static constexpr size_t kRecentCode = 32;
  std::mutex recent_mu_;
  std::vector<std::pair<std::string, std::shared_ptr<const codegen::CpuArtifact>>> recent_;
};

}  // namespace kiln::runtime
