// The one executor (DESIGN.md §2, §7): every compiling device (`cpu`, `cuda:N`, `vulkan:N`) is an
// Executor over its Target (runtime/target.h). Written once here: the plan cache (this process's
// plans by structural key, and plan records in the persistent cache, so that a new process with a
// warm cache skips fusion and compilation on every target), the kernel cache, autotune decisions,
// stats, dumps, and a realize: inputs bound (or uploaded), kernels launched in plan order on one
// stream, temporaries released after their last reader, results returned (or downloaded).
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "passes/cost_model.h"
#include "runtime/cache_entry_ref.h"
#include "runtime/device.h"
#include "runtime/kernel_cache.h"
#include "runtime/logger.h"
#include "runtime/plan_family.h"
#include "runtime/structural_key.h"
#include "runtime/target.h"
#include "runtime/tune_decisions.h"
#include "support/recently_used.h"

namespace kiln::runtime {

class Executor final : public Device {
 public:
  static Expected<std::unique_ptr<Executor>> create(std::unique_ptr<Target> target,
                                                    DeviceOptions options);
  ~Executor() override;

  std::string_view name() const override { return name_; }
  const std::shared_ptr<BufferPool>& pool() const override { return pool_; }
  Expected<std::vector<std::shared_ptr<Buffer>>> execute(ir::Graph& g,
                                                         const std::vector<const ir::Node*>& outputs,
                                                         const Bindings& inputs,
                                                         RunStats* stats = nullptr,
                                                         const Donated* donated = nullptr) override;

  // The plan a realize of `outputs` runs (from this process's plans, the persistent cache, or
  // built now); *cache_hit says whether it was this process's.
  Expected<std::shared_ptr<const Plan>> plan_for(ir::Graph& g,
                                                 const std::vector<const ir::Node*>& outputs,
                                                 bool* cache_hit = nullptr);
  // The plan a realize of `outputs` runs, built now with its fusion record and optimized graph
  // (which stored plans do not keep); with `compile`, its kernels from the kernel cache or
  // compiled, each with the schedule a realize uses (tuned with DeviceOptions::autotune): what
  // `kiln dump` shows. Kernels are loaded only where the target can run them. Not added to the
  // plan cache.
  // `track`, with `compile` false (`kiln dump` of a graph met at other sizes by note_sizes): the
  // kernels are chosen as a realize's would be (those met at other sizes take them at run time).
  Expected<std::shared_ptr<const Plan>> inspect(ir::Graph& g,
                                                const std::vector<const ir::Node*>& outputs,
                                                bool compile = true, bool track = false);

  // `kiln warm`: lowers the graph and compiles every kernel into the persistent cache without
  // loading or running anything (a compile-only target works), then stores the plan record.
  // Returns the kernels compiled (those already cached are skipped; nothing when the stored plan
  // and all its kernels are there) and tuned (with DeviceOptions::autotune, each kernel is tuned
  // first, on the device, and compiled with its winner). A graph with a marked input (a `.kg`
  // size symbol) is lowered even when its plan is stored: warmed at a second size of its shape
  // family, it stores the family's symbolic plan (`symbolic`), which serves a run at any size.
  struct Warmed {
    int compiled = 0;
    int tuned = 0;
    bool symbolic = false;
  };
  Expected<Warmed> warm(ir::Graph& g, const std::vector<const ir::Node*>& outputs);
  // A graph at other sizes than those a realize is about to run (a `.kg` graph's first call with
  // a size symbol on an inner axis, read again with that symbol one larger): lowered, not
  // compiled, its kernels noted as met, so that the realize's kernels of the same form take the
  // sizes that differ at run time from their first size on (ir/kernel_sizes.h), not from the
  // second. Nothing under the static policy.
  Expected<void> note_sizes(ir::Graph& g, const std::vector<const ir::Node*>& outputs);
  // The persistent-cache entries a realize of `outputs` reads, marked present or not: the plan,
  // then with a stored plan whose kernels are intact its kernels (a run reads nothing else);
  // without one, each kernel of the lowered plan (each digest once), with autotune each kernel's
  // decision before it and the kernel keyed with the stored winner. Compiles and tunes nothing.
  Expected<std::vector<CacheEntryRef>> cache_entries(ir::Graph& g,
                                                     const std::vector<const ir::Node*>& outputs);
  // `kiln warm --check`: the `what` of each entry cache_entries finds missing.
  Expected<std::vector<std::string>> cache_misses(ir::Graph& g,
                                                  const std::vector<const ir::Node*>& outputs);

  // The cost model the fuser plans with: the measured rates on targets that plan with them (the
  // cpu), else the target's reference rates.
  const passes::CostModel& cost_model();
  // This device's rates (the autotuner's roofline, and the cpu's plans): the reference rates with
  // RatesSource::reference; else measured once per machine and kept in the persistent cache
  // (the autotune table, under rates_key), measured again only where no cache holds them.
  const passes::DeviceRates& device_rates();
  Target& target() { return *target_; }
  const DeviceOptions& options() const { return options_; }
  // The most realizes that have run at once (bounded by DeviceOptions::max_streams).
  int peak_running_realizes() const { return peak_active_.load(); }
  // Plans kept in memory, one per graph and sizes realized, at most kMaxPlans: past that the one
  // used longest ago goes (met again, it is built again or taken from its symbolic plan or the
  // persistent cache).
  static constexpr size_t kMaxPlans = 256;

 private:
  Executor(std::unique_ptr<Target> target, DeviceOptions options,
           std::unique_ptr<cache::Store> store);
  // What one realize moved and measured.
  struct Realize {
    int64_t up = 0, down = 0;   // bytes copied to and from the device
    bool time_kernels = false;  // launch each kernel timed (RunStats::device_ms)
    double kernel_ms = 0;       // sum of the timed launches' times
    std::vector<double> launch_ms;  // each timed launch's time, in plan order
    // With validate: each step's error slot, read back once the stream completes.
    std::vector<std::array<int64_t, codegen::kCheckSlotWords>> checks;
    // Per slot: a plan input whose buffer the caller donated and no output has taken yet.
    std::vector<bool> donated;
    int written_over = 0;  // outputs that took a donated input's memory
  };
  // The fuser (made with the target's rates on first use), and its description for plan keys.
  const passes::Fuser& fuser();
  cache::KeyParts stored_plan_key(const StructuralKey& key);  // with this executor's tuning
  cache::KeyParts stored_plan_key(const StructuralKey& key, const std::string& tuning);
  // The key of a shape family's symbolic plans in the cache (plan_record.h's template record).
  cache::KeyParts stored_template_key(const ShapeFamily& family);
  // The fuser's description, with the shape policy's: a part of both keys above.
  std::string planned_with();
  cache::Store* tune_store() { return tune_store_ ? tune_store_.get() : store_.get(); }
  // The schedule a kernel runs with: TuneParams{} without autotune, else the tuned winner (tuned
  // now if need be, counted in *tuned).
  codegen::TuneParams schedule(const kir::Kernel& kernel, int* tuned);
  // The schedule a run would take from the decisions already stored (autotune), else TuneParams{};
  // adds each decision's entry to `entries`.
  codegen::TuneParams stored_schedule(const kir::Kernel& kernel, std::vector<CacheEntryRef>& entries);
  // The shape policy's choice for one kernel (PlannerOptions::dynamic): `marked` when the plan
  // has an input with a symbolic dimension; `track` lets the automatic policy note the kernel's
  // size (a build that compiles), or generalize it when it saw another in an earlier build
  // (`build`: Executor::build's count; two kernels of one form in one plan are no recompile).
  std::optional<int64_t> dynamic_choice(const kir::Kernel& kernel, const kir::KernelFacts& facts,
                                        bool marked, bool track, uint64_t build,
                                        std::vector<std::string>& reasons);
  PlannerOptions::DynamicFn dynamic_fn(const std::vector<const ir::Node*>& inputs, bool track,
                                       uint64_t build);
  // The shape policy's choice for a kernel left specialized (PlannerOptions::sizes): the
  // instance of a general kernel with run-time sizes (ir/kernel_sizes.h) made from two sizes of
  // it, where the target serves one. `track` lets it note the kernel, or generalize it when it
  // saw it at other sizes in an earlier build; `size_changed` (the graph's input shapes changed
  // since its last build) lets a kernel that differs in float constants alone generalize
  // (kir::generalize).
  std::optional<kir::Kernel> sized_choice(const kir::Kernel& kernel, const kir::KernelFacts& facts,
                                          bool track, bool size_changed, uint64_t build,
                                          std::vector<std::string>& reasons);
  // Under `automatic` with autotuning on, whether `general` (an instance at `special`'s sizes)
  // runs too slowly against `special` (shapes.max_slowdown), timed on the target: the reason to
  // keep the sizes' own code, said for --stats; nullopt to generalize, with what was measured in
  // `measured` ("" when nothing was). The ratio is kept in the tuning store
  // (sizes_decision_key) and read back by the next process, unless `retiming`.
  std::optional<std::string> keeps_sizes(const kir::Kernel& general, const kir::Kernel& special,
                                         bool retiming, std::string& measured);
  PlannerOptions::SizesFn sizes_fn(bool track, bool size_changed, uint64_t build);
  // Whether a graph of these inputs has a symbolic plan to warm or export: an input is marked
  // dynamic (a `.kg` size symbol, mark_dynamic) and the shape policy is not static.
  bool warms_symbolic(const std::vector<const ir::Node*>& inputs) const;
  // On a plan miss for a graph seen before (the same ops and wiring), which input dimensions
  // changed (`*dims_changed`: any), or, at the same input shapes, which attributes did (a
  // slice's end, a constant): the lines for RunStats::recompile_reasons.
  std::vector<std::string> shape_change(const std::vector<const ir::Node*>& outputs,
                                        const StructuralKey& key, bool* dims_changed);
  // Symbolic plans (plan_family.h): the plan of a family's templates for these sizes, its dynamic
  // kernels bound to their new extents and checked against the graph; null where no template
  // serves them (the plan is then built).
  std::shared_ptr<Plan> symbolic_plan(const ShapeFamily& family, const StructuralKey& key,
                                      const std::vector<const ir::Node*>& outputs);
  // The templates of `family` another process stored, their base plans' kernels loaded (*loaded:
  // how many distinct ones); none (with a warning for an unusable record) where there are none.
  std::vector<PlanTemplate> stored_templates(const ShapeFamily& family, int* loaded);
  // A plan built for `family`: a template made with the family's previous one where they allow,
  // and the family's templates then stored in the cache.
  // true when a template was made and stored.
  bool note_built(const ShapeFamily& family, std::shared_ptr<const Plan> plan);
  // Lowering only (no kernels compiled).
  // `track`: its kernels are noted as met, and those met at other sizes take them at run time,
  // as a realize's would (note_sizes, inspect); otherwise nothing is noted.
  // `note`: note_sizes' lowering (noted_builds_).
  Expected<std::shared_ptr<Plan>> lower(ir::Graph& g, const std::vector<const ir::Node*>& outputs,
                                        const std::vector<const ir::Node*>& inputs,
                                        bool track = false, bool note = false);
  // Lowered, tuned and compiled (or loaded) through the kernel cache; `size_changed`: see
  // sized_choice.
  Expected<std::shared_ptr<Plan>> build(ir::Graph& g, const std::vector<const ir::Node*>& outputs,
                                        const std::vector<const ir::Node*>& inputs,
                                        KernelCache& kernels, bool size_changed = false);
  // *source: "memory" (this process), "disk" (a stored plan record), "symbolic" (a family's
  // template at these sizes) or "built".
  Expected<std::shared_ptr<const Plan>> get_plan(ir::Graph& g,
                                                 const std::vector<const ir::Node*>& outputs,
                                                 const StructuralKey& key, std::string* source);
  // The plan stored under `disk_key` when it decodes, fits the graph of `key` and `outputs`, and
  // its kernels are all intact in the store; with `load`, each kernel's artifact loaded. null
  // (with a warning for an unusable record) when a run would rebuild the plan.
  std::shared_ptr<Plan> stored_plan(const cache::KeyParts& disk_key, const StructuralKey& key,
                                    const std::vector<const ir::Node*>& outputs, bool load);
  void store_plan(const cache::KeyParts& key, const Plan& plan);
  // Host memory: the buffers a run of `plan` allocates (every slot not an input), taken from the
  // pool, their pages touched and given back, so that its first run writes into memory the OS
  // has already mapped (a fresh 64 MiB output took 32 huge-page faults, 2 MiB zeroed each, in
  // the run) rather than faulting it in.
  void prefault_slots(const Plan& plan);
  void log(LogComponent component, const std::string& message) const;
  void log_built_plan(const Plan& plan) const;

  // A realize on `stream`: inputs bound or uploaded, kernels launched, results returned or
  // downloaded; `outputs` name the results in messages (DeviceOptions::namer).
  Expected<std::vector<std::shared_ptr<Buffer>>> run_plan(const Plan& plan, const StructuralKey& key,
                                                          const std::vector<const ir::Node*>& outputs,
                                                          const Bindings& inputs, Stream& stream,
                                                          Realize& r);
  // The steps launched in order on `stream`: each output slot allocated when first written
  // (named by `names`), temporaries released after their last reader, with validate each
  // launch's zeroed error slot downloaded into r.checks.
  Expected<void> launch_steps(const Plan& plan, const std::vector<std::string>& names,
                              std::vector<std::shared_ptr<DeviceMemory>>& slots, Stream& stream,
                              Realize& r);
  // The output slots as results: an input as it is, host memory as it is, device memory
  // downloaded into a host result (complete once the stream is synchronized).
  Expected<std::vector<std::shared_ptr<Buffer>>> collect_results(
      const Plan& plan, const StructuralKey& key, const Bindings& inputs,
      const std::vector<std::string>& names, const std::vector<std::shared_ptr<DeviceMemory>>& slots,
      Stream& stream, Realize& r);
  // The memory a kernel reads a bound input from: the host buffer itself (host memory), or its
  // device copy: uploaded on `stream` for this run, or (persistent_memory) kept from an earlier
  // run of the same host buffer.
  Expected<std::shared_ptr<DeviceMemory>> input_memory(const std::shared_ptr<Buffer>& host,
                                                       Stream& stream, Realize& r);
  std::shared_ptr<DeviceMemory> donated_memory(const PlanStep& step, int param,
                                              const std::vector<std::shared_ptr<DeviceMemory>>& slots,
                                              Realize& r);
  // The memory of a slot a kernel writes; a host result is allocated as one (allocate_result).
  Expected<std::shared_ptr<DeviceMemory>> slot_memory(const Slot& slot, const std::string& name,
                                                      bool result);
  // Up to options_.max_streams streams; execute() holds one while it runs.
  Expected<std::unique_ptr<Stream>> acquire_stream();
  void release_stream(std::unique_ptr<Stream> stream, bool reusable);

  std::unique_ptr<Target> target_;
  DeviceOptions options_;
  std::string name_;
  std::unique_ptr<cache::Store> store_;  // null without a persistent cache
  // autotune.cache when it names another file than the kernel cache; else decisions go in store_.
  std::unique_ptr<cache::Store> tune_store_;
  KernelCache kernels_;
  std::unique_ptr<TuneDecisions> decisions_;  // with DeviceOptions::autotune
  std::shared_ptr<BufferPool> pool_;          // host buffers: results (and all memory on the cpu)
  std::once_flag rates_once_;
  passes::DeviceRates rates_;
  bool rates_measured_ = false;
  std::once_flag fuser_once_;
  std::unique_ptr<passes::CostModel> cost_;
  std::unique_ptr<passes::Fuser> fuser_;
  std::string fuser_description_;

  // The automatic shape policy: per kernel (its dynamic form's text), the outer extent it was
  // first compiled at, or that it was generalized; per graph without its shapes, the input
  // shapes of the last plan built for it (RunStats::recompile_reasons).
  //
  // Each kernel noted keeps the build that noted it (builds_ counts Executor::build): kernels of
  // one form at two sizes in one plan (two softmaxes of other widths, an MLP's two matmuls) are
  // no size that changed, so they stay specialized; a later build at other sizes generalizes.
  struct SeenKernel {
    int64_t extent = 0;
    bool generalized = false;
    uint64_t build = 0;
  };
  std::atomic<uint64_t> builds_{0};
  std::mutex shapes_mu_;
  // The builds that were note_sizes' lowerings (a graph read at larger sizes, nothing compiled),
  // so that --stats says where a kernel was first met.
  std::unordered_set<uint64_t> noted_builds_;
  std::unordered_map<std::string, SeenKernel> seen_kernels_;
  // Kernels with run-time sizes: per kir::sizes_key, the kernel last compiled at fixed sizes,
  // and the general kernel made from two of its sizes (null until then, or where none serves).
  struct SizedKernel {
    kir::Kernel last;
    uint64_t build = 0;  // the build that noted `last`
    std::shared_ptr<const kir::Kernel> general;
    std::shared_ptr<const kir::KernelFacts> general_facts;  // of *general (its expressions)
    bool kept = false;  // measured slower than its sizes' own code: every size compiles its own
    // While kept: the sizes that compiled their own since, and the count at which the general
    // kernel is timed again (kRetimeAfter, doubled at each timing that keeps it).
    int kept_sizes = 0;
    int retime_at = 0;
    // The kernels of this form that one build met (`count_build`): a plan of many (an unrolled
    // recurrence's steps) takes their numbers at run time rather than compile each.
    uint64_t count_build = 0;
    int in_build = 0;
  };
  // A kernel kept at its sizes is timed again after this many new sizes compiled their own: one
  // timing at the second size (3 keys of a growing cache) is noisy and unlike later sizes, and
  // keeping it wrongly compiles every size (0.33 ms a step became 160).
  static constexpr int kRetimeAfter = 4;
  // The kernel of one form, apart from the others in its numbers only, at which one plan
  // generalizes: from this one on they take their numbers at run time (an unrolled loop's steps,
  // their offsets apart). The fewer before it keep their own code (a split's parts).
  static constexpr int kFormsInOneBuild = 4;
  std::unordered_map<std::string, SizedKernel> sized_kernels_;
  // Under `dynamic` (or a marked input): per kir::sizes_key, the first kernel of that form made
  // dynamic along its outer axis, and its text as such (without its outer extent), so that a
  // kernel of that form at other inner sizes takes them at run time (takes_inner_sizes).
  struct InnerSeen {
    std::string text;
    kir::Kernel kernel;
    uint64_t build = 0;
  };
  std::unordered_map<std::string, InnerSeen> inner_seen_;
  // Where the target runs no such kernel, `reasons` says so (for --stats), as sized_choice does.
  bool takes_inner_sizes(const kir::Kernel& kernel, const kir::Kernel& dynamic, uint64_t build,
                         std::vector<std::string>& reasons);
  // Per graph without its shapes: the input shapes of the last plan built for it and, for a
  // graph of at most kAttrsKept nodes, each node's attributes (in topological order), so that a
  // plan built again at the same input shapes says which attribute asked for it.
  static constexpr size_t kAttrsKept = 4096;
  struct SeenGraph {
    std::vector<ir::Shape> inputs;
    std::vector<ir::Attrs> attrs;
  };
  std::unordered_map<std::string, SeenGraph> seen_graphs_;
  // Per shape family (structural_family's key): the last plan built for it, at its sizes, and
  // the templates made from two of its plans (the newest first; one per size bucket, say).
  struct Family {
    std::shared_ptr<const Plan> last;
    std::vector<int64_t> last_dims;
    std::vector<PlanTemplate> templates;
    bool disk_read = false;  // the cache's template record looked for
  };
  static constexpr size_t kTemplatesPerFamily = 8;
  // The kMaxFamilies met last: each holds a plan, and an attribute that takes a new value at
  // every step (a slice's end that grows) makes a new family each time.
  static constexpr size_t kMaxFamilies = 256;
  support::RecentlyUsed<std::string, Family> families_{kMaxFamilies};
  // The family under `key`, made if there is none; the one that made way for it goes into
  // `evicted` (destroyed after the caller lets go of shapes_mu_, which it holds).
  Family& family_at(const std::string& key, std::optional<Family>& evicted);
  std::mutex plans_mu_;
  // By structural key, the kMaxPlans found or made last. A server that meets a new batch size on
  // most requests made one per size, and kept every one.
  support::RecentlyUsed<std::string, std::shared_ptr<const Plan>> plans_{kMaxPlans};

  // The structural keys of the last output lists realized, by graph serial and output nodes:
  // nodes are immutable and live as long as their graph, so realizing the same outputs again
  // (a served graph, a loop that records the same ops: the graph interns them) skips the walk.
  std::shared_ptr<const StructuralKey> structural_key_of(const ir::Graph& g,
                                                         const std::vector<const ir::Node*>& outputs);
  struct KeyMemo {
    uint64_t graph = 0;
    std::vector<const ir::Node*> outputs;
    std::shared_ptr<const StructuralKey> key;
  };
  static constexpr size_t kKeyMemos = 8;
  std::mutex key_memo_mu_;
  std::array<KeyMemo, kKeyMemos> key_memo_;
  size_t key_memo_next_ = 0;

  std::mutex streams_mu_;
  std::condition_variable stream_free_;
  std::vector<std::unique_ptr<Stream>> idle_streams_;
  int streams_out_ = 0;  // streams made and not dropped (idle or held by a realize)
  int active_ = 0;       // realizes holding a stream
  std::atomic<int> peak_active_{0};

  // Device copies of persistent host buffers (targets without host memory).
  struct PersistentCopy {
    std::weak_ptr<Buffer> host;
    std::shared_ptr<DeviceMemory> device;
  };
  std::mutex persistent_mu_;
  std::unordered_map<const Buffer*, PersistentCopy> persistent_;
};

// Whether `name` names an executor's device: "cpu", or a GPU API ("cuda", "vulkan") with or
// without an index.
bool is_executor_name(std::string_view name);
// Opens the executor of a device name: "cpu", "cuda:N" or "vulkan:N"; an error for other names,
// a malformed index, or a device that cannot be opened (the message says why).
Expected<std::unique_ptr<Executor>> open_executor(std::string_view name, DeviceOptions options);

}  // namespace kiln::runtime
