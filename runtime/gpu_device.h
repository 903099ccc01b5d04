// The GPU devices (`cuda:N`, `vulkan:N`): one generic device over a GpuBackend. Plans are built
// as on the cpu (passes, fusion, lowering), each kernel becomes CUDA C or GLSL, then PTX/cubin or
// SPIR-V (cached with the device's fingerprint), and a realize runs as one stream of copies and
// launches: inputs up, kernels in plan order, outputs down. With a persistent cache, plans persist
// as on the cpu: a plan record (runtime/plan_record.h) names each step's kernel entry by digest.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "passes/cost_model.h"
#include "runtime/cache_entry_ref.h"
#include "runtime/device.h"
#include "runtime/gpu_backend.h"
#include "runtime/gpu_kernel_cache.h"
#include "runtime/logger.h"
#include "runtime/structural_key.h"
#include "runtime/tune_decisions.h"

namespace kiln::runtime {

// A plan with a loaded GPU kernel per step.
struct GpuPlan {
  std::shared_ptr<Plan> plan;
  std::vector<std::shared_ptr<const GpuKernel>> kernels;  // one per plan step
};

class GpuDevice final : public Device {
 public:
  static Expected<std::unique_ptr<GpuDevice>> create(std::unique_ptr<GpuBackend> backend,
                                                     DeviceOptions options);
  ~GpuDevice() override;
  std::string_view name() const override { return name_; }
  const std::shared_ptr<BufferPool>& pool() const override { return pool_; }
  Expected<std::vector<std::shared_ptr<Buffer>>> execute(ir::Graph& g,
                                                         const std::vector<const ir::Node*>& outputs,
                                                         const Bindings& inputs,
                                                         RunStats* stats) override;
  // The plan for `outputs` with its GPU kernels (from this process's plans or built now).
  Expected<std::shared_ptr<const GpuPlan>> plan_for(ir::Graph& g,
                                                    const std::vector<const ir::Node*>& outputs);
  GpuBackend& backend() { return *backend_; }
  // `kiln warm`: lowers the graph and compiles every kernel into the persistent cache without
  // loading or running anything (a compile-only backend works), then stores the plan record.
  // Returns the kernels compiled (those already cached are skipped; nothing when the stored plan
  // and all its kernels are there) and tuned. With DeviceOptions::autotune, each kernel is tuned
  // first (on the device: a compile-only backend cannot tune) and compiled with its winner.
  struct Warmed {
    int compiled = 0;
    int tuned = 0;
  };
  Expected<Warmed> warm(ir::Graph& g, const std::vector<const ir::Node*>& outputs);
  // The persistent-cache entries a realize of `outputs` reads, marked present or not: the plan,
  // then with a stored plan its kernels (a run reads nothing else); without one, each kernel of
  // the lowered plan (each digest once), with autotune each kernel's decision before it and the
  // kernel keyed with the stored winner. Compiles and tunes nothing.
  Expected<std::vector<CacheEntryRef>> cache_entries(ir::Graph& g,
                                                     const std::vector<const ir::Node*>& outputs);
  // `kiln warm --check`: "kernel <name> <digest>" for each kernel the cache lacks.
  Expected<std::vector<std::string>> cache_misses(ir::Graph& g,
                                                  const std::vector<const ir::Node*>& outputs);

 private:
  GpuDevice(std::unique_ptr<GpuBackend> backend, DeviceOptions options,
            std::unique_ptr<cache::Store> store);
  // The autotune decision key of a kernel: its text, this device's target and fingerprint, the GPU
  // code generator and the level.
  cache::KeyParts autotune_key(const kir::Kernel& kernel) const;
  // The schedule a plan step's kernel runs with: TuneParams{} without autotune, else the tuned
  // winner (tuned now if need be, counted in *tuned).
  codegen::TuneParams schedule(const kir::Kernel& kernel, int* tuned);
  // The plan's kernels, lowered and not compiled.
  Expected<std::shared_ptr<Plan>> lower(ir::Graph& g, const std::vector<const ir::Node*>& outputs);
  // *source: "memory" (this process), "disk" (a stored plan record) or "built".
  Expected<std::shared_ptr<const GpuPlan>> get_plan(ir::Graph& g,
                                                    const std::vector<const ir::Node*>& outputs,
                                                    const StructuralKey& key, std::string* source);
  // Lowers, tunes (with autotune) and compiles or loads each kernel.
  Expected<std::shared_ptr<GpuPlan>> build_gpu_plan(ir::Graph& g,
                                                    const std::vector<const ir::Node*>& outputs);
  // The persistent key of the plan of a graph: its structure, the fuser, the kernels' target
  // parts and the autotune level (a tuned plan names tuned kernels).
  cache::KeyParts plan_key(const StructuralKey& key) const;
  // A stored plan record whose kernels are all intact in the store (loads nothing); nullopt when
  // a run would rebuild the plan.
  std::optional<Plan> stored_plan(const cache::KeyParts& key);
  // The stored plan with every kernel loaded on the device; null when any is missing or damaged.
  std::shared_ptr<GpuPlan> load_plan(const cache::KeyParts& key);
  void store_plan(const cache::KeyParts& key, const Plan& plan);
  void log(LogComponent component, const std::string& message) const;
  struct Transfers {
    int64_t up = 0, down = 0;  // bytes
    bool time_kernels = false;  // launch each kernel timed (RunStats::device_ms)
    double kernel_ms = 0;       // sum of the timed launches' device times
  };
  // `outputs` name the results in messages (DeviceOptions::namer).
  Expected<std::vector<std::shared_ptr<Buffer>>> run_plan(const GpuPlan& plan, const StructuralKey& key,
                                                          const std::vector<const ir::Node*>& outputs,
                                                          const Bindings& inputs, GpuStream& stream,
                                                          Transfers& moved);
  // The device copy of a bound input: uploaded on `stream` for this run, or (persistent_memory)
  // the copy kept from an earlier run of the same host buffer.
  Expected<std::shared_ptr<DeviceMemory>> device_input(const std::shared_ptr<Buffer>& host,
                                                       GpuStream& stream, Transfers& moved);
  // Up to options_.max_streams streams; execute() holds one while it runs.
  Expected<std::unique_ptr<GpuStream>> acquire_stream();
  void release_stream(std::unique_ptr<GpuStream> stream);

  std::unique_ptr<GpuBackend> backend_;
  DeviceOptions options_;
  std::string name_;
  std::unique_ptr<cache::Store> store_;  // null without a persistent cache
  // autotune.cache when it names another file than the kernel cache; else decisions go in store_.
  std::unique_ptr<cache::Store> tune_store_;
  GpuKernelCache kernels_;
  std::unique_ptr<TuneDecisions> decisions_;  // with DeviceOptions::autotune
  std::once_flag rates_once_;
  passes::DeviceRates measured_rates_;  // for the roofline (measured_gpu_rates), once
  std::shared_ptr<BufferPool> pool_;
  std::unique_ptr<passes::CostModel> cost_;
  std::unique_ptr<passes::Fuser> fuser_;

  std::mutex plans_mu_;
  std::unordered_map<std::string, std::shared_ptr<const GpuPlan>> plans_;

  std::mutex streams_mu_;
  std::condition_variable stream_free_;
  std::vector<std::unique_ptr<GpuStream>> idle_streams_;
  int streams_created_ = 0;

  struct PersistentCopy {
    std::weak_ptr<Buffer> host;
    std::shared_ptr<DeviceMemory> device;
  };
  std::mutex persistent_mu_;
  std::unordered_map<const Buffer*, PersistentCopy> persistent_;
};

// Rates for the fuser's cost model: a device that is really the CPU (lavapipe, property
// type = cpu) gets the cpu's reference rates; others DeviceRates::reference_gpu().
passes::DeviceRates gpu_rates(const GpuBackend& backend);

// "cuda:N" / "vulkan:N" -> the backend's device N; other names are not GPU devices (nullopt).
std::optional<Expected<std::unique_ptr<Device>>> open_gpu_device(std::string_view name,
                                                                 DeviceOptions options);

}  // namespace kiln::runtime
