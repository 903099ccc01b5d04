// GpuDevice: plans with GPU kernels (built, or stored records with their kernels loaded by
// digest), a pool of streams, persistent device copies of inputs, and one stream of uploads,
// launches and downloads per realize.
#include "runtime/gpu_device.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <charconv>
#include <thread>
#include <fmt/format.h>

#include "autotune/roofline.h"
#include "codegen/gpu/launch_strategy.h"
#include "runtime/dump_writer.h"
#include "runtime/gpu_tuner.h"
#include "runtime/logger.h"
#include "runtime/plan_record.h"

namespace kiln::runtime {

namespace {

double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

size_t slot_bytes(const Slot& s) {
  return static_cast<size_t>(ir::shape_numel(s.shape)) * ir::dtype_size(s.dtype);
}

// A device allocation that failed, named like the host pool's (runtime/buffer.h): the device,
// the bytes, the tensor it was for, then the backend's own reason.
kiln::Error allocation_error(std::string_view device, std::string_view what, const Slot& slot,
                             const kiln::Error& why) {
  return kiln::Error{fmt::format("out of memory on device '{}': cannot allocate {} bytes for {} ({}{}): {}",
                                 device, slot_bytes(slot), what.empty() ? "a value" : what,
                                 ir::dtype_name(slot.dtype), ir::shape_str(slot.shape),
                                 why.message)};
}

}  // namespace

passes::DeviceRates gpu_rates(const GpuBackend& backend) {
  for (const auto& [key, value] : backend.properties())
    if (key == "type" && value.find("cpu") != std::string::npos)
      return passes::DeviceRates::reference_cpu();
  return passes::DeviceRates::reference_gpu();
}

Expected<std::unique_ptr<GpuDevice>> GpuDevice::create(std::unique_ptr<GpuBackend> backend,
                                                       DeviceOptions options) {
  std::unique_ptr<cache::Store> store = open_cache_store(options);
  return std::unique_ptr<GpuDevice>(new GpuDevice(std::move(backend), std::move(options), std::move(store)));
}

GpuDevice::GpuDevice(std::unique_ptr<GpuBackend> backend, DeviceOptions options,
                     std::unique_ptr<cache::Store> store)
    : backend_(std::move(backend)),
      options_(std::move(options)),
      name_(backend_->name()),
      store_(std::move(store)),
      kernels_(*backend_, store_.get(), options_.explain_misses, options_.check_mode),
      pool_(BufferPool::create(options_.persistent_memory, "host memory of " + name_)),
      cost_(std::make_unique<passes::CostModel>(gpu_rates(*backend_))),
      fuser_(make_fuser(options_, *cost_)) {
  if (!options_.autotune) return;
  if (!options_.autotune_cache_path.empty() && options_.autotune_cache_path != options_.cache_path) {
    DeviceOptions tune = options_;
    tune.cache_path = options_.autotune_cache_path;
    tune_store_ = open_cache_store(tune);
  }
  decisions_ = std::make_unique<TuneDecisions>(tune_store_ ? tune_store_.get() : store_.get(),
                                               options_.logger, options_.autotune_level);
}

cache::KeyParts GpuDevice::autotune_key(const kir::Kernel& kernel) const {
  const auto level = autotune::parse_level(options_.autotune_level);
  return cache::KeyParts{{{"kernel", kir::print_kernel(kernel, false)},
                          {"target", backend_->dialect() == codegen::gpu::Dialect::cuda ? "cuda" : "vulkan"},
                          {"device", backend_->fingerprint()},
                          {"codegen", codegen::gpu::kGpuCodegenVersion},
                          {"autotune", std::string(autotune::level_name(level.value_or(autotune::Level::balanced)))}}};
}

codegen::TuneParams GpuDevice::schedule(const kir::Kernel& kernel, int* tuned) {
  if (!decisions_) return {};
  const auto level = autotune::parse_level(options_.autotune_level);
  if (!level) return {};  // device_options_from_config checked it; a bad DeviceOptions tunes nothing
  return decisions_->winner(kernel.name, autotune_key(kernel), [&] {
    std::call_once(rates_once_, [&] { measured_rates_ = measured_gpu_rates(*backend_); });
    const double bound = autotune::roofline_ms(kernel, measured_rates_.bandwidth, measured_rates_.compute_rate);
    const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return tune_gpu_kernel(*backend_, kernel, *level, bound, threads);
  }, tuned);
}

// Streams, programs and device memory must go before the backend that made them.
GpuDevice::~GpuDevice() {
  persistent_.clear();
  idle_streams_.clear();
  plans_.clear();
}

Expected<std::shared_ptr<const GpuPlan>> GpuDevice::plan_for(ir::Graph& g,
                                                             const std::vector<const ir::Node*>& outputs) {
  std::string source;
  return get_plan(g, outputs, structural_key(outputs), &source);
}

void GpuDevice::log(LogComponent component, const std::string& message) const {
  if (options_.logger) options_.logger->log(component, LogLevel::verbose, message);
}

cache::KeyParts GpuDevice::plan_key(const StructuralKey& key) const {
  return kernels_.plan_key(key.key, describe_fuser(options_, *fuser_, *cost_),
                           options_.autotune ? options_.autotune_level : "off");
}

std::optional<Plan> GpuDevice::stored_plan(const cache::KeyParts& key) {
  std::optional<cache::Entry> e = store_->get(cache::Table::plans, key);
  if (!e) return std::nullopt;
  std::optional<Plan> plan = plan_from_entry(*e);
  if (!plan) return std::nullopt;
  for (const std::string& digest : distinct_kernel_digests(*plan))
    if (!kernels_.has_entry(digest)) return std::nullopt;  // evicted or damaged: rebuild
  return plan;
}

std::shared_ptr<GpuPlan> GpuDevice::load_plan(const cache::KeyParts& key) {
  std::optional<cache::Entry> e = store_->get(cache::Table::plans, key);
  if (!e) return nullptr;
  std::optional<Plan> record = plan_from_entry(*e);
  if (!record) return nullptr;  // a damaged record or one of an incompatible writer: rebuild
  auto gp = std::make_shared<GpuPlan>();
  gp->plan = std::make_shared<Plan>(std::move(*record));
  std::unordered_map<std::string, std::shared_ptr<const GpuKernel>> loaded;  // by digest
  for (const PlanStep& step : gp->plan->steps) {
    auto& kernel = loaded[step.kernel_digest];  // steps running the same kernel share one load
    if (!kernel && !(kernel = kernels_.load(step.kernel_digest))) return nullptr;
    gp->kernels.push_back(kernel);
  }
  gp->plan->loaded = static_cast<int>(loaded.size());
  return gp;
}

void GpuDevice::store_plan(const cache::KeyParts& key, const Plan& plan) {
  if (store_->read_only()) return;
  std::vector<std::string> digests;
  for (const PlanStep& step : plan.steps) digests.push_back(step.kernel_digest);
  if (std::optional<cache::Entry> e = plan_record_entry(plan, digests))
    store_->put(cache::Table::plans, key, *e);
}

Expected<std::shared_ptr<const GpuPlan>> GpuDevice::get_plan(ir::Graph& g,
                                                             const std::vector<const ir::Node*>& outputs,
                                                             const StructuralKey& key, std::string* source) {
  {
    std::lock_guard lock(plans_mu_);
    if (auto it = plans_.find(key.key); it != plans_.end()) {
      *source = "memory";
      return it->second;
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  std::optional<cache::KeyParts> disk_key;
  std::shared_ptr<GpuPlan> gp;
  if (store_) {
    disk_key = plan_key(key);
    if ((gp = load_plan(*disk_key))) {
      *source = "disk";
      log(LogComponent::cache, fmt::format("plan {} from the cache: {} kernels, {} loaded for {}",
                                           disk_key->digest(), gp->plan->steps.size(),
                                           gp->plan->loaded, name_));
    }
  }
  if (!gp) {
    auto built = build_gpu_plan(g, outputs);
    if (!built) return std::unexpected(built.error());
    gp = std::move(*built);
    *source = "built";
    if (store_) store_plan(*disk_key, *gp->plan);
  }
  gp->plan->plan_ms = ms_between(t0, std::chrono::steady_clock::now());
  std::lock_guard lock(plans_mu_);
  auto [it, inserted] = plans_.emplace(key.key, gp);
  return it->second;
}

Expected<std::shared_ptr<GpuPlan>> GpuDevice::build_gpu_plan(ir::Graph& g,
                                                             const std::vector<const ir::Node*>& outputs) {
  auto built = lower(g, outputs);
  if (!built) return std::unexpected(built.error());
  auto gp = std::make_shared<GpuPlan>();
  gp->plan = *built;
  Plan& plan = *gp->plan;
  int tuned = 0;
  for (PlanStep& step : plan.steps) {
    auto got = kernels_.get(step.kernel, schedule(step.kernel, &tuned));
    if (!got) return make_error(fmt::format("{}: kernel {}: {}", name_, step.kernel.name, got.error().message));
    if (got->source == GpuKernelLookup::Source::compiled) {
      ++plan.compiled;
      plan.compile_ms += got->kernel->compile_ms;
      if (store_ && !got->miss_reason.empty())
        plan.miss_reasons.push_back(step.kernel.name + ": " + got->miss_reason);
    } else if (got->source == GpuKernelLookup::Source::disk) {
      ++plan.loaded;
    }
    step.kernel_digest = got->digest;
    gp->kernels.push_back(got->kernel);
  }
  plan.tuned = tuned;
  log(LogComponent::fusion, fmt::format("{} kernels by {} for {}", plan.steps.size(),
                                        describe_fuser(options_, *fuser_, *cost_), name_));
  if (plan.compiled > 0)
    log(LogComponent::compilation, fmt::format("compiled {} kernels for {} in {:.1f} ms",
                                               plan.compiled, name_, plan.compile_ms));
  if (store_)
    log(LogComponent::cache, fmt::format("{} kernels loaded from the cache, {} compiled for {}",
                                         plan.loaded, plan.compiled, name_));
  return gp;
}

Expected<std::shared_ptr<Plan>> GpuDevice::lower(ir::Graph& g,
                                                 const std::vector<const ir::Node*>& outputs) {
  StructuralKey key = structural_key(outputs);
  PlannerOptions po = planner_options(options_, fuser_.get(), nullptr);
  return build_plan(g, outputs, key.inputs, po);
}

Expected<GpuDevice::Warmed> GpuDevice::warm(ir::Graph& g,
                                            const std::vector<const ir::Node*>& outputs) {
  if (!store_) return make_error(name_ + ": no persistent cache to warm");
  const cache::KeyParts disk_key = plan_key(structural_key(outputs));
  if (stored_plan(disk_key)) return Warmed{};
  auto plan = lower(g, outputs);
  if (!plan) return std::unexpected(plan.error());
  int compiled = 0, tuned = 0;
  for (PlanStep& step : (*plan)->steps) {
    const codegen::TuneParams params = schedule(step.kernel, &tuned);
    auto done = kernels_.warm(step.kernel, params);
    if (!done) return make_error(fmt::format("{}: kernel {}: {}", name_, step.kernel.name, done.error().message));
    compiled += *done ? 1 : 0;
    step.kernel_digest = kernels_.key(step.kernel, params).digest();
  }
  store_plan(disk_key, **plan);
  return Warmed{.compiled = compiled, .tuned = tuned};
}

Expected<std::vector<CacheEntryRef>> GpuDevice::cache_entries(ir::Graph& g,
                                                              const std::vector<const ir::Node*>& outputs) {
  if (!store_) return make_error(name_ + ": no persistent cache to check");
  std::vector<CacheEntryRef> entries;
  // Steps running the same kernel read one entry.
  const auto add = [&](CacheEntryRef e) {
    if (std::none_of(entries.begin(), entries.end(), [&](const CacheEntryRef& o) { return o.digest == e.digest; }))
      entries.push_back(std::move(e));
  };
  const cache::KeyParts disk_key = plan_key(structural_key(outputs));
  const std::string plan_digest = disk_key.digest();
  // A stored plan whose kernels are all intact names every entry a run reads (no decision).
  if (std::optional<Plan> stored = stored_plan(disk_key)) {
    add({cache::Table::plans, plan_digest, "plan " + plan_digest, true});
    for (const PlanStep& step : stored->steps)
      add({cache::Table::kernels, step.kernel_digest,
           fmt::format("kernel {} {}", step.kernel.name, step.kernel_digest), true});
    return entries;
  }
  add({cache::Table::plans, plan_digest, "plan " + plan_digest, false});
  auto plan = lower(g, outputs);
  if (!plan) return std::unexpected(plan.error());
  for (const PlanStep& step : (*plan)->steps) {
    codegen::TuneParams params;
    if (decisions_) {
      const cache::KeyParts tune_key = autotune_key(step.kernel);
      const std::optional<codegen::TuneParams> won =
          stored_winner(tune_store_ ? *tune_store_ : *store_, tune_key);
      const std::string digest = tune_key.digest();
      add({cache::Table::autotune, digest, fmt::format("autotune {} {}", step.kernel.name, digest),
           won.has_value()});
      params = won.value_or(codegen::TuneParams{});
    }
    const std::string digest = kernels_.key(step.kernel, params).digest();
    add({cache::Table::kernels, digest, fmt::format("kernel {} {}", step.kernel.name, digest),
         kernels_.contains(step.kernel, params)});
  }
  return entries;
}

Expected<std::vector<std::string>> GpuDevice::cache_misses(ir::Graph& g,
                                                           const std::vector<const ir::Node*>& outputs) {
  auto entries = cache_entries(g, outputs);
  if (!entries) return std::unexpected(entries.error());
  return missing_entries(*entries);
}

Expected<std::unique_ptr<GpuStream>> GpuDevice::acquire_stream() {
  std::unique_lock lock(streams_mu_);
  stream_free_.wait(lock, [&] {
    return !idle_streams_.empty() || streams_created_ < std::max(1, options_.max_streams);
  });
  if (!idle_streams_.empty()) {
    auto s = std::move(idle_streams_.back());
    idle_streams_.pop_back();
    return s;
  }
  ++streams_created_;
  lock.unlock();
  auto s = backend_->create_stream();
  if (!s) {
    std::lock_guard relock(streams_mu_);
    --streams_created_;
    stream_free_.notify_one();
  }
  return s;
}

void GpuDevice::release_stream(std::unique_ptr<GpuStream> stream) {
  {
    std::lock_guard lock(streams_mu_);
    idle_streams_.push_back(std::move(stream));
  }
  stream_free_.notify_one();
}

Expected<std::shared_ptr<DeviceMemory>> GpuDevice::device_input(const std::shared_ptr<Buffer>& host,
                                                                 GpuStream& stream, Transfers& moved) {
  bool keep = host->persistent() && options_.persistent_memory != PersistentMemory::disabled;
  if (keep) {
    std::lock_guard lock(persistent_mu_);
    auto it = persistent_.find(host.get());
    if (it != persistent_.end() && it->second.host.lock() == host) return it->second.device;
  }
  auto mem = backend_->allocate(device_alloc_bytes(host->nbytes()));
  if (!mem)
    return std::unexpected(
        allocation_error(name_, "an input", Slot{host->dtype(), host->shape()}, mem.error()));
  if (host->nbytes() > 0)
    if (auto up = stream.upload(**mem, host->data(), host->nbytes()); !up) return std::unexpected(up.error());
  moved.up += static_cast<int64_t>(host->nbytes());
  if (keep) {
    // Published only once the copy is complete, so other streams never read it early.
    if (auto done = stream.synchronize(); !done) return std::unexpected(done.error());
    std::lock_guard lock(persistent_mu_);
    std::erase_if(persistent_, [](const auto& kv) { return kv.second.host.expired(); });
    persistent_[host.get()] = PersistentCopy{host, *mem};
  }
  return *mem;
}

Expected<std::shared_ptr<DeviceMemory>> make_scratch(GpuBackend& backend, GpuStream& stream,
                                                     const codegen::gpu::GpuSource& source) {
  if (source.scratch_bytes <= 0) return nullptr;
  // Counters cover at most kMaxSplitRows rows: a static block of zeros outlives every stream.
  static const std::vector<uint8_t> zeros(codegen::gpu::kMaxSplitRows * sizeof(uint32_t) + 8);
  if (source.scratch_zero_bytes < 0 || static_cast<size_t>(source.scratch_zero_bytes) > zeros.size())
    return make_error(fmt::format("kernel scratch counters of {} bytes (at most {})", source.scratch_zero_bytes, zeros.size()));
  auto mem = backend.allocate(device_alloc_bytes(static_cast<size_t>(source.scratch_bytes)));
  if (!mem) return std::unexpected(mem.error());
  if (source.scratch_zero_bytes > 0)
    if (auto up = stream.upload(**mem, zeros.data(), static_cast<size_t>(source.scratch_zero_bytes)); !up)
      return std::unexpected(up.error());
  return *mem;
}

Expected<std::vector<std::shared_ptr<Buffer>>> GpuDevice::run_plan(const GpuPlan& gp,
                                                                    const StructuralKey& key,
                                                                    const std::vector<const ir::Node*>& outputs,
                                                                    const Bindings& inputs,
                                                                    GpuStream& stream,
                                                                    Transfers& moved) {
  const Plan& plan = *gp.plan;
  const std::vector<std::string> names = slot_names(plan, outputs, options_.namer);
  std::vector<std::shared_ptr<DeviceMemory>> slots(plan.slots.size());
  for (size_t s = 0; s < plan.slots.size(); ++s) {
    if (plan.slots[s].input_index < 0) continue;
    auto mem = device_input(inputs.at(key.inputs[plan.slots[s].input_index]), stream, moved);
    if (!mem) return std::unexpected(mem.error());
    slots[s] = std::move(*mem);
  }
  // With validate, each launch gets its own zeroed error slot, read after the stream completes.
  const bool validate = options_.check_mode == codegen::CheckMode::validate;
  constexpr size_t kSlotBytes = codegen::kCheckSlotWords * sizeof(int64_t);
  std::vector<std::shared_ptr<DeviceMemory>> check_mem;
  std::vector<std::array<int64_t, codegen::kCheckSlotWords>> check_host(validate ? plan.steps.size() : 0);
  static const std::array<int64_t, codegen::kCheckSlotWords> kZero{};

  std::vector<DeviceMemory*> args;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& step = plan.steps[i];
    args.clear();
    for (size_t p = 0; p < step.args.size(); ++p) {
      int s = step.args[p];
      if (step.kernel.params[p].output && !slots[s]) {
        auto mem = backend_->allocate(device_alloc_bytes(slot_bytes(plan.slots[s])));
        if (!mem)
          return std::unexpected(
              allocation_error(name_, names[s], plan.slots[s], mem.error()));
        slots[s] = std::move(*mem);
      }
      args.push_back(slots[s].get());
    }
    if (validate) {
      auto mem = backend_->allocate(kSlotBytes);
      if (!mem) return std::unexpected(mem.error());
      if (auto up = stream.upload(**mem, kZero.data(), kSlotBytes); !up) return std::unexpected(up.error());
      check_mem.push_back(*mem);
      args.push_back(mem->get());
    }
    auto scratch = make_scratch(*backend_, stream, gp.kernels[i]->source);
    if (!scratch) return std::unexpected(scratch.error());
    if (*scratch) args.push_back(scratch->get());
    if (auto ran = stream.launch(*gp.kernels[i]->program, args, moved.time_kernels); !ran)
      return make_error(fmt::format("{}: kernel {}: {}", name_, step.kernel.name, ran.error().message));
    if (validate)
      if (auto down = stream.download(*check_mem.back(), check_host[i].data(), kSlotBytes); !down)
        return std::unexpected(down.error());
    for (int s : step.release_after) slots[s].reset();
  }

  std::vector<std::shared_ptr<Buffer>> results;
  for (int s : plan.output_slots) {
    const Slot& slot = plan.slots[s];
    if (slot.input_index >= 0) {  // an input returned as is
      results.push_back(inputs.at(key.inputs[slot.input_index]));
      continue;
    }
    auto made = pool_->allocate_result(slot.dtype, slot.shape, names[s]);
    if (!made) return std::unexpected(made.error());
    std::shared_ptr<Buffer> host = std::move(*made);
    if (host->nbytes() > 0)
      if (auto down = stream.download(*slots[s], host->data(), host->nbytes()); !down)
        return std::unexpected(down.error());
    moved.down += static_cast<int64_t>(host->nbytes());
    results.push_back(std::move(host));
  }
  if (auto done = stream.synchronize(); !done)
    return make_error(fmt::format("{}: {}", name_, done.error().message));
  if (moved.time_kernels)
    for (double ms : stream.launch_times_ms()) moved.kernel_ms += ms;
  for (size_t i = 0; i < check_host.size(); ++i)
    if (auto bad = codegen::describe_check_failure(plan.steps[i].kernel, check_host[i].data()))
      return make_error(*bad);
  // Results a later realize may read back as inputs keep their device copy (enforced mode).
  if (options_.persistent_memory == PersistentMemory::enforced) {
    std::lock_guard lock(persistent_mu_);
    for (size_t r = 0; r < results.size(); ++r)
      if (results[r]->persistent() && plan.slots[plan.output_slots[r]].input_index < 0)
        persistent_[results[r].get()] = PersistentCopy{results[r], slots[plan.output_slots[r]]};
  }
  return results;
}

Expected<std::vector<std::shared_ptr<Buffer>>> GpuDevice::execute(
    ir::Graph& g, const std::vector<const ir::Node*>& outputs, const Bindings& inputs,
    RunStats* stats) {
  auto t0 = std::chrono::steady_clock::now();
  StructuralKey key = structural_key(outputs);
  if (auto ok = check_bindings(key.inputs, inputs); !ok) return std::unexpected(ok.error());
  std::string source;
  auto plan = get_plan(g, outputs, key, &source);
  if (!plan) return std::unexpected(plan.error());
  if (source != "memory") record_graph(options_.record_dir, outputs, key.inputs, options_.namer);
  auto t1 = std::chrono::steady_clock::now();
  auto stream = acquire_stream();
  if (!stream) return make_error(fmt::format("{}: {}", name_, stream.error().message));
  Transfers moved;
  moved.time_kernels = stats != nullptr && options_.time_kernels;
  auto results = run_plan(**plan, key, outputs, inputs, **stream, moved);
  // A stream whose batch failed may hold a half-recorded batch: it is dropped, not reused.
  if (results) {
    release_stream(std::move(*stream));
  } else {
    stream->reset();
    std::lock_guard lock(streams_mu_);
    --streams_created_;
    stream_free_.notify_one();
  }
  if (!results) return results;
  auto t2 = std::chrono::steady_clock::now();
  fill_run_stats(*(*plan)->plan, source, ms_between(t0, t1), ms_between(t1, t2), stats);
  if (stats) {
    stats->upload_bytes = moved.up;
    stats->download_bytes = moved.down;
    stats->device_ms = moved.kernel_ms;
  }
  return results;
}

std::optional<Expected<std::unique_ptr<Device>>> open_gpu_device(std::string_view name,
                                                                 DeviceOptions options) {
  size_t colon = name.find(':');
  std::string_view api = name.substr(0, colon);
  if (api != "cuda" && api != "vulkan") return std::nullopt;
  int index = 0;
  if (colon != std::string_view::npos) {
    std::string_view digits = name.substr(colon + 1);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty() || index < 0)
      return make_error(fmt::format("bad device name '{}' (expected {}:N, e.g. {}:0)", name, api, api));
  }
  auto backend = api == "cuda" ? open_cuda_backend(index) : open_vulkan_backend(index);
  if (!backend) return make_error(backend.error().message);
  auto dev = GpuDevice::create(std::move(*backend), std::move(options));
  if (!dev) return make_error(dev.error().message);
  return Expected<std::unique_ptr<Device>>(std::unique_ptr<Device>(std::move(*dev)));
}

}  // namespace kiln::runtime
