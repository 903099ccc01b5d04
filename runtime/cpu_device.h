// The `cpu` device: plans are built once per subgraph structure (the in-memory plan cache),
// kernels are JIT-compiled by the cpu backend, and launches are split over a thread pool.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <unordered_map>

#include "autotune/tune_level.h"
#include "codegen/cpu/cpu_backend.h"
#include "passes/cost_model.h"
#include "runtime/cache_entry_ref.h"
#include "runtime/device.h"
#include "runtime/logger.h"
#include "runtime/persistent_cache.h"
#include "runtime/structural_key.h"
#include "runtime/tune_decisions.h"
#include "support/thread_pool.h"

namespace kiln::runtime {

class CpuDevice final : public Device {
 public:
  static Expected<std::unique_ptr<CpuDevice>> create(DeviceOptions options);
  std::string_view name() const override { return "cpu"; }
  const std::shared_ptr<BufferPool>& pool() const override { return pool_; }
  Expected<std::vector<std::shared_ptr<Buffer>>> execute(ir::Graph& g,
                                                         const std::vector<const ir::Node*>& outputs,
                                                         const Bindings& inputs,
                                                         RunStats* stats) override;
  // The plan for `outputs` (from the plan cache or built now), for dumps and tools.
  Expected<std::shared_ptr<Plan>> plan_for(ir::Graph& g, const std::vector<const ir::Node*>& outputs,
                                           bool* cache_hit = nullptr);
  codegen::CpuBackend& backend() { return *backend_; }
  // The persistent-cache entries a realize of `outputs` reads, each marked present or not: the
  // plan and, when it is stored, every kernel it links; else every kernel lowering names (keyed
  // with its tuned schedule under autotune, after its autotune decision). Each digest once.
  // Lowers the graph but compiles and tunes nothing. An error without a persistent cache.
  Expected<std::vector<CacheEntryRef>> cache_entries(ir::Graph& g,
                                                     const std::vector<const ir::Node*>& outputs);
  // What a realize of `outputs` would not find in the persistent cache (`kiln warm --check`):
  // "plan <digest>" and "kernel <name> <digest>" lines; empty when everything is there.
  Expected<std::vector<std::string>> cache_misses(ir::Graph& g,
                                                  const std::vector<const ir::Node*>& outputs);
  // The most realizes that have run at once (bounded by DeviceOptions::max_streams).
  int peak_running_realizes() const { return peak_active_.load(); }
  // The cost model with this machine's rates (measured once, see runtime/cpu_rates.h).
  const passes::CostModel& cost_model();

 private:
  CpuDevice(DeviceOptions options, std::unique_ptr<codegen::CpuBackend> backend,
            std::unique_ptr<PersistentCache> disk);
  // From this process's plans, the persistent cache, or built now; `source` says which.
  Expected<std::shared_ptr<Plan>> get_plan(ir::Graph& g, const std::vector<const ir::Node*>& outputs,
                                           const StructuralKey& key, std::string* source);
  std::string fuser_description();
  // The fuser part of plan keys: a plan names its kernels' digests, which differ per check mode
  // and schedule (tuned or not).
  std::string plan_fuser_key();
  cache::Store* tune_store() { return tune_store_ ? tune_store_.get() : disk_ ? &disk_->store() : nullptr; }
  // The autotuner's schedule for `kernel`: this process's decision, the persistent cache's, or
  // tuned now (counted in *tuned). Never fails a run: if tuning fails, the default schedule.
  codegen::TuneParams tuned_params(const kir::Kernel& kernel, int* tuned);
  // The key of a kernel's autotune decision (`kernel_text` unlabelled): what the measurements
  // depend on — the kernel, this CPU and its features, the code generator, the level.
  cache::KeyParts autotune_key(const std::string& kernel_text, autotune::Level level) const;
  // Fails with the first out-of-range access of a kernel compiled with CheckMode::validate.
  // `outputs` name the results in messages (through DeviceOptions::namer, e.g. the .kg's names).
  Expected<void> run_plan(const Plan& plan, const std::vector<const ir::Node*>& outputs,
                          std::vector<std::shared_ptr<Buffer>>& slots);
  // Verbose lines of the component's logger (fusion, compilation, cache decisions).
  void log(LogComponent component, const std::string& message) const;
  void log_built_plan(const Plan& plan) const;

  DeviceOptions options_;
  std::unique_ptr<codegen::CpuBackend> backend_;
  std::unique_ptr<PersistentCache> disk_;  // null without a cache path
  // autotune.cache when it names another file than the kernel cache; else decisions go in disk_.
  std::unique_ptr<cache::Store> tune_store_;
  KernelCache kernels_;
  support::ThreadPool threads_;
  std::shared_ptr<BufferPool> pool_;
  std::once_flag fuser_once_;
  std::unique_ptr<passes::CostModel> cost_;
  std::unique_ptr<passes::Fuser> fuser_;
  std::mutex plans_mu_;
  std::unordered_map<std::string, std::shared_ptr<Plan>> plans_;
  // streaming.max_streams: realizes running at once.
  std::mutex active_mu_;
  std::condition_variable active_free_;
  int active_ = 0;
  std::atomic<int> peak_active_{0};
  std::unique_ptr<TuneDecisions> decisions_;  // one kernel tuned at a time: timings must not overlap
};

}  // namespace kiln::runtime
