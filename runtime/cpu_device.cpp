// CpuDevice: plan cache lookup, buffer wiring, and threaded launches in dependency order.
#include "runtime/cpu_device.h"

#include <array>
#include <chrono>
#include <fmt/format.h>

#include "runtime/cpu_rates.h"
#include "runtime/logger.h"
#include "runtime/structural_key.h"

namespace kiln::runtime {

namespace {
// Points of the parallel domain per thread chunk below which waking a thread costs more than it saves.
constexpr int64_t kMinPointsPerChunk = 1 << 14;

double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
}  // namespace

Expected<std::unique_ptr<CpuDevice>> CpuDevice::create(DeviceOptions options) {
  auto backend = codegen::CpuBackend::create();
  if (!backend) return std::unexpected(backend.error());
  std::unique_ptr<PersistentCache> disk;
  if (!options.cache_path.empty()) {
    cache::StoreOptions so;
    so.read_only = options.cache_read_only;
    so.max_size = options.cache_max_size;
    if (options.logger)
      so.warn = [logger = options.logger](const std::string& m) {
        logger->log(LogComponent::cache, LogLevel::minimal, m);
      };
    // A cache that cannot be opened costs compilation time, never the run.
    if (auto store = cache::Store::open(options.cache_path, so))
      disk = std::make_unique<PersistentCache>(std::move(*store), **backend);
    else
      fmt::print(stderr, "kiln: warning: kernel cache '{}' is not used: {}\n", options.cache_path,
                 store.error().message);
  }
  return std::unique_ptr<CpuDevice>(
      new CpuDevice(std::move(options), std::move(*backend), std::move(disk)));
}

CpuDevice::CpuDevice(DeviceOptions options, std::unique_ptr<codegen::CpuBackend> backend,
                     std::unique_ptr<PersistentCache> disk)
    : options_(std::move(options)),
      backend_(std::move(backend)),
      disk_(std::move(disk)),
      kernels_(*backend_, disk_.get(), options_.explain_misses, options_.check_mode),
      threads_(options_.num_threads > 0 ? options_.num_threads : ThreadPool::default_threads()),
      pool_(BufferPool::create()) {
  if (options_.logger && options_.logger->enabled(LogComponent::memory, LogLevel::verbose))
    pool_->set_fresh_allocation_observer([logger = options_.logger](size_t bytes) {
      logger->log(LogComponent::memory, LogLevel::verbose,
                  fmt::format("allocated a new {} byte buffer", bytes));
    });
}

const passes::CostModel& CpuDevice::cost_model() {
  std::call_once(fuser_once_, [this] {
    cost_ = std::make_unique<passes::CostModel>(cpu_rates(*backend_, threads_));
    if (options_.fuser == "first") {
      fuser_ = passes::make_first_fuser();
    } else if (options_.fuser == "none") {
      fuser_ = passes::make_unfused();
    } else {
      passes::BeamOptions beam = options_.fuser == "greedy" ? passes::BeamOptions{1, 1} : options_.beam;
      fuser_ = passes::make_beam_fuser(*cost_, beam);
    }
  });
  return *cost_;
}

Expected<std::shared_ptr<Plan>> CpuDevice::plan_for(ir::Graph& g,
                                                    const std::vector<const ir::Node*>& outputs,
                                                    bool* cache_hit) {
  StructuralKey key = structural_key(outputs);
  std::string source;
  auto plan = get_plan(g, outputs, key, &source);
  if (cache_hit) *cache_hit = source == "memory";
  return plan;
}

std::string CpuDevice::fuser_description() {
  const passes::CostModel& cost = cost_model();
  if (options_.fuser == "first" || options_.fuser == "none") return std::string(fuser_->name());
  return fmt::format("{} max_blocks={} beam_width={} {}", fuser_->name(),
                     options_.fuser == "greedy" ? 1 : options_.beam.max_blocks,
                     options_.fuser == "greedy" ? 1 : options_.beam.beam_width, cost.rates().str());
}

Expected<std::shared_ptr<Plan>> CpuDevice::get_plan(ir::Graph& g,
                                                    const std::vector<const ir::Node*>& outputs,
                                                    const StructuralKey& key, std::string* source) {
  {
    std::lock_guard lock(plans_mu_);
    if (auto it = plans_.find(key.key); it != plans_.end()) {
      *source = "memory";
      return it->second;
    }
  }
  cost_model();
  std::optional<cache::KeyParts> disk_key;
  std::shared_ptr<Plan> plan;
  if (disk_) {
    // A plan names its kernels' digests, which differ per check mode: so must the plan's key.
    disk_key = disk_->plan_key(key.key, fmt::format("{} check={}", fuser_description(),
                                                    codegen::check_mode_name(options_.check_mode)));
    if ((plan = disk_->load_plan(*disk_key))) {
      *source = "disk";
      log(LogComponent::cache, fmt::format("plan {} from the cache: {} kernels, {} linked",
                                           disk_key->digest(), plan->steps.size(), plan->loaded));
    }
  }
  if (!plan) {
    PlannerOptions po{.fuser = fuser_.get(), .kernels = &kernels_, .namer = options_.namer};
    auto built = build_plan(g, outputs, key.inputs, po);
    if (!built) return built;
    plan = *built;
    *source = "built";
    log_built_plan(*plan);
    if (disk_) {
      std::vector<std::string> digests;
      for (const PlanStep& s : plan->steps) digests.push_back(s.kernel_digest);
      disk_->store_plan(*disk_key, *plan, digests);
    }
  }
  std::lock_guard lock(plans_mu_);
  plans_.emplace(key.key, plan);
  return plan;
}

void CpuDevice::log(LogComponent component, const std::string& message) const {
  if (options_.logger) options_.logger->log(component, LogLevel::verbose, message);
}

void CpuDevice::log_built_plan(const Plan& plan) const {
  if (!options_.logger) return;
  log(LogComponent::fusion,
      fmt::format("{} kernels by {}, estimated {:.1f} µs, planned in {:.2f} ms", plan.steps.size(),
                  plan.fuser, plan.fusion.total_seconds * 1e6, plan.plan_ms));
  for (const passes::FusionReason& r : plan.fusion.reasons)
    log(LogComponent::fusion, fmt::format("%t{} -> %t{}: {}", r.producer->id, r.consumer->id, r.reason));
  if (plan.compiled > 0)
    log(LogComponent::compilation,
        fmt::format("compiled {} kernels in {:.1f} ms", plan.compiled, plan.compile_ms));
  if (disk_)
    log(LogComponent::cache, fmt::format("{} kernels linked from the cache, {} compiled",
                                         plan.loaded, plan.compiled));
  for (const std::string& why : plan.miss_reasons) log(LogComponent::cache, "miss " + why);
  // (each reason reads "k0: closest stored entry ... differs in ...")
}

Expected<void> CpuDevice::run_plan(const Plan& plan, std::vector<std::shared_ptr<Buffer>>& slots) {
  const bool validate = options_.check_mode == codegen::CheckMode::validate;
  std::array<int64_t, codegen::kCheckSlotWords> check_slot{};
  std::vector<void*> args;
  for (const PlanStep& step : plan.steps) {
    args.clear();
    for (size_t i = 0; i < step.args.size(); ++i) {
      int s = step.args[i];
      if (step.kernel.params[i].output && !slots[s])
        slots[s] = pool_->allocate(plan.slots[s].dtype, plan.slots[s].shape);
      args.push_back(slots[s]->data());
    }
    if (validate) {
      check_slot.fill(0);
      args.push_back(check_slot.data());
    }
    const codegen::CpuArtifact& a = *step.artifact;
    int64_t inner = 1;
    for (size_t d = 1; d < step.kernel.domain.size(); ++d) inner *= step.kernel.domain[d];
    int64_t min_chunk = std::max<int64_t>(1, kMinPointsPerChunk / std::max<int64_t>(1, inner));
    void* const* argv = args.data();
    threads_.parallel_for(a.outer_extent, min_chunk,
                          [&](int64_t b, int64_t e) { a.fn(argv, b, e); });
    if (validate)
      if (auto bad = codegen::describe_check_failure(step.kernel, check_slot.data()))
        return make_error(*bad);
    for (int s : step.release_after) slots[s].reset();
  }
  return {};
}

Expected<std::vector<std::shared_ptr<Buffer>>> CpuDevice::execute(
    ir::Graph& g, const std::vector<const ir::Node*>& outputs, const Bindings& inputs,
    RunStats* stats) {
  auto t0 = std::chrono::steady_clock::now();
  // One walk of the graph: the structural key also lists every Input node to check.
  StructuralKey key = structural_key(outputs);
  if (auto ok = check_bindings(key.inputs, inputs); !ok) return std::unexpected(ok.error());
  std::string source;
  auto got = get_plan(g, outputs, key, &source);
  if (!got) return std::unexpected(got.error());
  bool hit = source == "memory";
  const std::shared_ptr<Plan>& plan = *got;
  auto t1 = std::chrono::steady_clock::now();

  std::vector<std::shared_ptr<Buffer>> slots(plan->slots.size());
  for (size_t s = 0; s < plan->slots.size(); ++s)
    if (plan->slots[s].input_index >= 0) slots[s] = inputs.at(key.inputs[plan->slots[s].input_index]);
  if (auto ran = run_plan(*plan, slots); !ran) return std::unexpected(ran.error());
  auto t2 = std::chrono::steady_clock::now();

  std::vector<std::shared_ptr<Buffer>> results;
  for (int s : plan->output_slots) results.push_back(slots[s]);
  if (stats) {
    stats->kernels = static_cast<int>(plan->steps.size());
    stats->plan_cache_hit = hit;
    stats->plan_source = source;
    stats->cache_hits = hit ? 0 : plan->loaded;
    stats->cache_misses = hit ? 0 : plan->compiled;
    stats->miss_reasons = hit ? std::vector<std::string>{} : plan->miss_reasons;
    stats->compiled = hit ? 0 : plan->compiled;
    stats->compile_ms = hit ? 0 : plan->compile_ms;
    stats->plan_ms = hit ? 0 : ms_between(t0, t1);
    stats->run_ms = ms_between(t1, t2);
    stats->groups.clear();
    for (const PlanStep& st : plan->steps)
      stats->groups.push_back(KernelRunInfo{st.kernel.name, st.values, st.num_ops});
  }
  return results;
}

}  // namespace kiln::runtime
