// CpuDevice: plan cache lookup, buffer wiring, and threaded launches in dependency order.
#include "runtime/cpu_device.h"

#include <array>
#include <chrono>
#include <unordered_set>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "autotune/roofline.h"
#include "autotune/runner.h"
#include "runtime/cpu_rates.h"
#include "runtime/dump_writer.h"
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
  auto backend = codegen::CpuBackend::create(options.cpu_target);
  if (!backend) return std::unexpected(backend.error());
  std::unique_ptr<PersistentCache> disk;
  if (auto store = open_cache_store(options))
    disk = std::make_unique<PersistentCache>(std::move(store), **backend);
  return std::unique_ptr<CpuDevice>(
      new CpuDevice(std::move(options), std::move(*backend), std::move(disk)));
}

CpuDevice::CpuDevice(DeviceOptions options, std::unique_ptr<codegen::CpuBackend> backend,
                     std::unique_ptr<PersistentCache> disk)
    : options_(std::move(options)),
      backend_(std::move(backend)),
      disk_(std::move(disk)),
      kernels_(*backend_, disk_.get(), options_.explain_misses, options_.check_mode),
      threads_(options_.num_threads > 0 ? options_.num_threads
                                        : support::ThreadPool::default_threads()),
      pool_(BufferPool::create(options_.persistent_memory)) {
  if (options_.autotune && !options_.autotune_cache_path.empty() &&
      options_.autotune_cache_path != options_.cache_path) {
    DeviceOptions tune = options_;
    tune.cache_path = options_.autotune_cache_path;
    tune_store_ = open_cache_store(tune);
  }
  decisions_ = std::make_unique<TuneDecisions>(tune_store(), options_.logger, options_.autotune_level);
  if (options_.logger && options_.logger->enabled(LogComponent::memory, LogLevel::verbose))
    pool_->set_fresh_allocation_observer([logger = options_.logger](size_t bytes) {
      logger->log(LogComponent::memory, LogLevel::verbose,
                  fmt::format("allocated a new {} byte buffer", bytes));
    });
}

const passes::CostModel& CpuDevice::cost_model() {
  std::call_once(fuser_once_, [this] {
    cost_ = std::make_unique<passes::CostModel>(cpu_rates(*backend_, threads_));
    fuser_ = make_fuser(options_, *cost_);
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
  return describe_fuser(options_, *fuser_, cost);
}

std::string CpuDevice::plan_fuser_key() {
  return fmt::format("{} check={} tune={}", fuser_description(),
                     codegen::check_mode_name(options_.check_mode),
                     options_.autotune ? options_.autotune_level : "off");
}

codegen::TuneParams CpuDevice::tuned_params(const kir::Kernel& kernel, int* tuned) {
  auto level = autotune::parse_level(options_.autotune_level);
  if (!level) return {};  // device_options_from_config checked it; a bad DeviceOptions tunes nothing
  return decisions_->winner(kernel.name, autotune_key(kir::print_kernel(kernel, false), *level), [&] {
    const passes::DeviceRates& rates = cost_model().rates();
    autotune::ParallelFor pf = [this](int64_t n, const std::function<void(int64_t, int64_t)>& chunk) {
      threads_.parallel_for(n, 1, chunk);
    };
    return autotune::tune_cpu_kernel(*backend_, pf, kernel, *level,
                                     autotune::roofline_ms(kernel, rates.bandwidth, rates.compute_rate));
  }, tuned);
}

cache::KeyParts CpuDevice::autotune_key(const std::string& kernel_text,
                                        autotune::Level level) const {
  return cache::KeyParts{{{"kernel", kernel_text},
                          {"target", "cpu"},
                          {"cpu", backend_->cpu_name()},
                          {"features", backend_->cpu_features()},
                          {"llvm", backend_->llvm_version()},
                          {"codegen", codegen::CpuBackend::kCodegenVersion},
                          {"autotune", std::string(autotune::level_name(level))}}};
}

Expected<std::vector<CacheEntryRef>> CpuDevice::cache_entries(
    ir::Graph& g, const std::vector<const ir::Node*>& outputs) {
  if (!disk_) return make_error("the cpu device has no persistent cache to check");
  StructuralKey key = structural_key(outputs);
  cost_model();
  std::vector<CacheEntryRef> entries;
  std::unordered_set<std::string> listed;  // steps running the same kernel read one entry
  auto add = [&](cache::Table table, const std::string& digest, std::string what, bool present) {
    if (listed.insert(digest).second) entries.push_back({table, digest, std::move(what), present});
  };
  cache::KeyParts plan_key = disk_->plan_key(key.key, plan_fuser_key());
  std::string plan_digest = plan_key.digest();
  // A stored plan that links names every kernel a run reads, all present (and a run reads no
  // decision). One that does not link (a kernel evicted) is rebuilt by the run: a miss.
  if (std::shared_ptr<Plan> stored = disk_->load_plan(plan_key)) {
    add(cache::Table::plans, plan_digest, "plan " + plan_digest, true);
    for (const PlanStep& step : stored->steps)
      add(cache::Table::kernels, step.kernel_digest,
          fmt::format("kernel {} {}", step.kernel.name, step.kernel_digest), true);
    return entries;
  }
  add(cache::Table::plans, plan_digest, "plan " + plan_digest, false);
  PlannerOptions po = planner_options(options_, fuser_.get(), nullptr);
  auto plan = build_plan(g, outputs, key.inputs, po);
  if (!plan) return std::unexpected(plan.error());
  std::optional<autotune::Level> level;
  if (options_.autotune) level = autotune::parse_level(options_.autotune_level);
  cache::Store* decisions = tune_store();
  for (const PlanStep& step : (*plan)->steps) {
    // Tuned kernels are stored under their winner's schedule: the decision names the kernel key.
    codegen::TuneParams params;
    if (level) {
      cache::KeyParts tune_key = autotune_key(kir::print_kernel(step.kernel, false), *level);
      std::optional<codegen::TuneParams> winner;
      if (decisions) winner = stored_winner(*decisions, tune_key);
      const std::string digest = tune_key.digest();
      add(cache::Table::autotune, digest, fmt::format("autotune {} {}", step.kernel.name, digest),
          winner.has_value());
      if (winner) params = *winner;
    }
    std::string digest = disk_->kernel_key(step.kernel, params, options_.check_mode).digest();
    add(cache::Table::kernels, digest, fmt::format("kernel {} {}", step.kernel.name, digest),
        disk_->store().show(digest).has_value());
  }
  return entries;
}

Expected<std::vector<std::string>> CpuDevice::cache_misses(
    ir::Graph& g, const std::vector<const ir::Node*>& outputs) {
  auto entries = cache_entries(g, outputs);
  if (!entries) return std::unexpected(entries.error());
  return missing_entries(*entries);
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
    disk_key = disk_->plan_key(key.key, plan_fuser_key());
    if ((plan = disk_->load_plan(*disk_key))) {
      *source = "disk";
      log(LogComponent::cache, fmt::format("plan {} from the cache: {} kernels, {} linked",
                                           disk_key->digest(), plan->steps.size(), plan->loaded));
    }
  }
  if (!plan) {
    int tuned = 0;
    PlannerOptions po = planner_options(options_, fuser_.get(), &kernels_);
    if (options_.autotune)
      po.tune = [&](const kir::Kernel& k) -> Expected<codegen::TuneParams> { return tuned_params(k, &tuned); };
    auto built = build_plan(g, outputs, key.inputs, po);
    if (!built) return built;
    plan = *built;
    plan->tuned = tuned;
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

Expected<void> CpuDevice::run_plan(const Plan& plan, const std::vector<const ir::Node*>& outputs,
                                   std::vector<std::shared_ptr<Buffer>>& slots) {
  const bool validate = options_.check_mode == codegen::CheckMode::validate;
  std::array<int64_t, codegen::kCheckSlotWords> check_slot{};
  std::vector<void*> args;
  std::vector<bool> is_result(plan.slots.size(), false);
  for (int s : plan.output_slots) is_result[s] = true;
  const std::vector<std::string> names = slot_names(plan, outputs, options_.namer);
  for (const PlanStep& step : plan.steps) {
    args.clear();
    for (size_t i = 0; i < step.args.size(); ++i) {
      int s = step.args[i];
      if (step.kernel.params[i].output && !slots[s]) {
        const Slot& slot = plan.slots[s];
        auto made = is_result[s] ? pool_->allocate_result(slot.dtype, slot.shape, names[s])
                                 : pool_->allocate(slot.dtype, slot.shape, names[s]);
        if (!made) return std::unexpected(made.error());
        slots[s] = std::move(*made);
      }
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
  {
    std::unique_lock lock(active_mu_);
    active_free_.wait(lock, [&] { return active_ < std::max(1, options_.max_streams); });
    ++active_;
    if (active_ > peak_active_.load()) peak_active_.store(active_);
  }
  struct Leave {
    CpuDevice* d;
    ~Leave() {
      { std::lock_guard lock(d->active_mu_); --d->active_; }
      d->active_free_.notify_one();
    }
  } leave{this};
  auto t0 = std::chrono::steady_clock::now();
  // One walk of the graph: the structural key also lists every Input node to check.
  StructuralKey key = structural_key(outputs);
  if (auto ok = check_bindings(key.inputs, inputs); !ok) return std::unexpected(ok.error());
  std::string source;
  auto got = get_plan(g, outputs, key, &source);
  if (!got) return std::unexpected(got.error());
  const std::shared_ptr<Plan>& plan = *got;
  if (source != "memory") record_graph(options_.record_dir, outputs, key.inputs, options_.namer);
  auto t1 = std::chrono::steady_clock::now();

  std::vector<std::shared_ptr<Buffer>> slots(plan->slots.size());
  for (size_t s = 0; s < plan->slots.size(); ++s)
    if (plan->slots[s].input_index >= 0) slots[s] = inputs.at(key.inputs[plan->slots[s].input_index]);
  if (auto ran = run_plan(*plan, outputs, slots); !ran) return std::unexpected(ran.error());
  auto t2 = std::chrono::steady_clock::now();

  std::vector<std::shared_ptr<Buffer>> results;
  for (int s : plan->output_slots) results.push_back(slots[s]);
  fill_run_stats(*plan, source, ms_between(t0, t1), ms_between(t1, t2), stats);
  return results;
}

}  // namespace kiln::runtime
