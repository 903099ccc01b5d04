// Device lookup by name, binding checks, and the reference device.
#include "runtime/device.h"

#include <new>
#include <stdexcept>

#include <chrono>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cache/size.h"
#include "cache/store.h"
#include "interp/reference.h"
#include "runtime/config.h"
#include "codegen/cpu/cpu_backend.h"
#include "runtime/executor.h"
#include "support/thread_pool.h"
#include "runtime/gpu_backend.h"
#include "runtime/logger.h"
#include "runtime/reference_device.h"

namespace kiln::runtime {

namespace {
std::string input_label(const ir::Node* n) {
  const std::string& name = n->attrs.s(ir::AttrKey::name);
  return name.empty() ? fmt::format("#{}", n->attrs.i(ir::AttrKey::slot)) : "%" + name;
}
// An input's name, else the graph's own name for the value (%t<id>).
std::string value_label(const ir::Node* n) {
  return n->op == ir::Op::Input ? input_label(n) : fmt::format("%t{}", n->id);
}
}  // namespace

std::vector<std::string> available_devices() {
  std::vector<std::string> names{"cpu", "reference"};
  for (const auto& list : {list_vulkan_devices(), list_cuda_devices()})
    for (const GpuDeviceInfo& d : list)
      if (d.present) names.push_back(d.name);
  return names;
}

std::vector<DeviceInfo> list_devices(int cpu_threads, const codegen::cuda::NvrtcSearch& nvrtc) {
  DeviceInfo cpu{"cpu", false, {}};
  if (auto backend = codegen::CpuBackend::create()) {
    cpu.present = true;
    cpu.properties = {{"cpu", (*backend)->cpu_name()},
                      {"threads", std::to_string(cpu_threads > 0 ? cpu_threads
                                                                 : support::ThreadPool::default_threads())},
                      {"llvm", (*backend)->llvm_version()},
                      {"features", (*backend)->cpu_features()},
                      {"last-level cache", fmt::format("{} MiB", (*backend)->llc_bytes() >> 20)}};
  } else {
    cpu.properties = {{"absent", backend.error().message}};
  }
  std::vector<DeviceInfo> devices{
      std::move(cpu), {"reference", true, {{"kind", "op-by-op interpreter in f64 (the test oracle)"}}}};
  for (auto list : {list_vulkan_devices(), list_cuda_devices(nvrtc)})
    for (DeviceInfo& d : list) devices.push_back(std::move(d));
  return devices;
}

Expected<std::unique_ptr<Device>> open_device(std::string_view name, DeviceOptions options) {
  if (options.beam.max_blocks < 1 || options.beam.beam_width < 1)
    return make_error(fmt::format("beam search needs max_blocks >= 1 and beam_width >= 1, got {} and {}",
                                  options.beam.max_blocks, options.beam.beam_width));
  if (name == "reference") return std::unique_ptr<Device>(new ReferenceDevice(options.namer));
  if (is_executor_name(name)) {
    auto dev = open_executor(name, std::move(options));
    if (!dev) return std::unexpected(dev.error());
    return std::unique_ptr<Device>(std::move(*dev));
  }
  return make_error(fmt::format("unknown device '{}' (available: {})", name,
                                fmt::join(available_devices(), ", ")));
}

Expected<DeviceOptions> device_options_from_config(const Config& config) {
  DeviceOptions o;
  o.fuser = config.fusion_enabled ? passes::FuserKind::beam : passes::FuserKind::none;
  o.beam = passes::BeamOptions{config.max_blocks, config.beam_width};
  o.cache_path = cache_scope_path(config.compilation_cache, config);
  o.autotune_cache_path = cache_scope_path(config.autotune_cache, config);
  o.cache_read_only = config.cache_read_only;
  auto size = cache::parse_size(config.cache_max_size);
  if (!size) return std::unexpected(size.error());
  o.cache_max_size = *size;
  o.explain_misses = config.cache_logger.level == "verbose";
  o.cpu_target = config.cpu_target;
  o.tensor_core_matmul = config.matmul_precision == "high";
  if (config.check_mode == "enforce") {
    o.check_mode = codegen::CheckMode::enforce;
  } else if (config.check_mode == "validate") {
    o.check_mode = codegen::CheckMode::validate;
  } else if (config.check_mode == "auto") {
#ifdef NDEBUG
    o.check_mode = codegen::CheckMode::none;  // release builds: unchecked kernels
#else
    o.check_mode = codegen::CheckMode::validate;
#endif
  } else {
    return make_error(fmt::format(
        "compilation.check_mode: unknown mode '{}' (expected enforce, validate or auto)",
        config.check_mode));
  }
  o.verify_ir = config.verify_ir;
  o.dump_dir = config.dump_dir;
  o.num_threads = config.num_threads;
  o.cpu_rates = config.cpu_rates == "reference" ? RatesSource::reference : RatesSource::measured;
  o.gpu_rates = config.gpu_rates == "reference" ? RatesSource::reference : RatesSource::measured;
  o.nvrtc = {config.nvrtc_library, config.cuda_home};
  o.record_dir = config.record_dir;
  o.logger = std::make_shared<const Logger>(Logger::from_config(config));
  o.max_streams = config.max_streams;
  auto level = autotune::parse_level(config.autotune_level);
  if (!level)
    return make_error(fmt::format(
        "autotune.level: unknown level '{}' (expected minimal, balanced, extensive or full)",
        config.autotune_level));
  o.autotune_level = *level;
  o.autotune = config.autotune_enabled;
  if (config.shapes_policy == "static") o.shape_policy = ShapePolicy::static_;
  else if (config.shapes_policy == "dynamic") o.shape_policy = ShapePolicy::dynamic;
  else if (config.shapes_policy == "automatic") o.shape_policy = ShapePolicy::automatic;
  else
    return make_error(fmt::format(
        "shapes.policy: unknown policy '{}' (expected static, dynamic or automatic)", config.shapes_policy));
  o.shape_buckets = config.shapes_buckets;
  o.shape_max_slowdown = config.shapes_max_slowdown;
  if (config.persistent_memory == "enabled") o.persistent_memory = PersistentMemory::enabled;
  else if (config.persistent_memory == "disabled") o.persistent_memory = PersistentMemory::disabled;
  else if (config.persistent_memory == "enforced") o.persistent_memory = PersistentMemory::enforced;
  else
    return make_error(fmt::format(
        "memory.persistent_memory: unknown mode '{}' (expected enabled, disabled or enforced)",
        config.persistent_memory));
  return o;
}

PlannerOptions planner_options(const DeviceOptions& options, const passes::Fuser* fuser,
                               KernelCache* kernels) {
  PlannerOptions po;
  po.fuser = fuser;
  po.kernels = kernels;
  po.namer = options.namer;
  po.verify_ir = options.verify_ir;
  po.dump_dir = options.dump_dir;
  // Compiles use the cores the cpu's kernels would (compilation runs before any kernel does).
  po.compile_threads = options.num_threads > 0 ? options.num_threads : support::ThreadPool::default_threads();
  return po;
}

std::unique_ptr<cache::Store> open_cache_store(const DeviceOptions& options) {
  if (options.cache_path.empty()) return nullptr;
  cache::StoreOptions so;
  so.read_only = options.cache_read_only;
  so.max_size = options.cache_max_size;
  if (options.logger)
    so.warn = [logger = options.logger](const std::string& m) {
      logger->log(LogComponent::cache, LogLevel::minimal, m);
    };
  auto store = cache::Store::open(options.cache_path, so);
  if (store) return std::move(*store);
  fmt::print(stderr, "kiln: warning: kernel cache '{}' is not used: {}\n", options.cache_path,
             store.error().message);
  return nullptr;
}

std::unique_ptr<passes::Fuser> make_fuser(const DeviceOptions& options, const passes::CostModel& cost) {
  return passes::make_fuser(options.fuser, cost, options.beam);
}

std::string describe_fuser(const DeviceOptions& options, const passes::Fuser& fuser,
                           const passes::CostModel& cost) {
  switch (options.fuser) {
    case passes::FuserKind::first:
    case passes::FuserKind::none:
      return fmt::format("{} {}", fuser.name(), passes::kFuserVersion);
    case passes::FuserKind::beam:
    case passes::FuserKind::greedy:
      break;
  }
  const bool greedy = options.fuser == passes::FuserKind::greedy;
  return fmt::format("{} {} max_blocks={} beam_width={} max_kernel_buffers={} {}", fuser.name(),
                     passes::kFuserVersion, greedy ? 1 : options.beam.max_blocks,
                     greedy ? 1 : options.beam.beam_width, options.beam.max_kernel_buffers,
                     cost.rates().str());
}

void fill_run_stats(const Plan& plan, const std::string& source, double plan_ms, double run_ms,
                    RunStats* stats) {
  if (!stats) return;
  bool hit = source == "memory";
  stats->kernels = static_cast<int>(plan.steps.size());
  stats->plan_cache_hit = hit;
  stats->plan_source = source;
  stats->cache_hits = hit ? 0 : plan.loaded;
  stats->cache_misses = hit ? 0 : plan.compiled;
  stats->miss_reasons = hit ? std::vector<std::string>{} : plan.miss_reasons;
  stats->recompile_reasons = hit ? std::vector<std::string>{} : plan.recompile_reasons;
  stats->dynamic_kernels = 0;
  for (const PlanStep& st : plan.steps)
    stats->dynamic_kernels += st.kernel.dynamic_outer || st.kernel.has_sizes() ? 1 : 0;
  stats->compiled = hit ? 0 : plan.compiled;
  stats->tuned = hit ? 0 : plan.tuned;
  stats->compile_ms = hit ? 0 : plan.compile_ms;
  stats->plan_ms = hit ? 0 : plan_ms;
  stats->run_ms = run_ms;
  stats->groups.clear();
  for (const PlanStep& st : plan.steps)
    stats->groups.push_back(KernelRunInfo{st.kernel.name, st.values, st.num_ops});
}

Expected<void> check_bindings(const std::vector<const ir::Node*>& nodes, const Bindings& inputs) {
  for (const ir::Node* n : nodes) {
    if (n->op != ir::Op::Input) continue;
    auto it = inputs.find(n);
    if (it == inputs.end() || !it->second)
      return make_error(fmt::format("input {} is not bound", input_label(n)));
    const Buffer& b = *it->second;
    if (b.dtype() != n->dtype || b.shape() != n->shape)
      return make_error(fmt::format("input {}: expected {}{}, got {}{}", input_label(n),
                                    ir::dtype_name(n->dtype), ir::shape_str(n->shape),
                                    ir::dtype_name(b.dtype()), ir::shape_str(b.shape())));
  }
  return {};
}

namespace {

// The interpreter holds every value it computes as f64: when the host cannot hold them, the
// error names the largest (the likeliest culprit) and what it needs.
kiln::Error reference_out_of_memory(const std::vector<const ir::Node*>& live,
                                    const ValueNamer& namer) {
  const ir::Node* largest = nullptr;
  for (const ir::Node* n : live)
    if (!largest || n->numel() > largest->numel()) largest = n;
  if (!largest) return kiln::Error{"out of memory on device 'reference'"};
  return kiln::Error{fmt::format(
      "out of memory on device 'reference': cannot allocate {} bytes for {} ({}{} held as f64)",
      static_cast<uint64_t>(largest->numel()) * sizeof(double),
      namer ? namer(largest) : value_label(largest),
      ir::dtype_name(largest->dtype), ir::shape_str(largest->shape))};
}

}  // namespace

Expected<std::vector<std::shared_ptr<Buffer>>> ReferenceDevice::execute(
    ir::Graph&, const std::vector<const ir::Node*>& outputs, const Bindings& inputs,
    RunStats* stats, const Donated*) {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<const ir::Node*> live = ir::topo_order(outputs);
  if (auto ok = check_bindings(live, inputs); !ok) return std::unexpected(ok.error());
  Expected<std::vector<ir::HostTensor>> results = make_error("");
  for (const ir::Node* n : live)  // f64 values the machine cannot hold fail before allocating
    if (!ir::HostTensor::fits_in_memory(static_cast<double>(n->numel()) * sizeof(double)))
      return std::unexpected(reference_out_of_memory(live, namer_));
  try {
    std::unordered_map<const ir::Node*, ir::HostTensor> host;
    for (const ir::Node* n : live)
      if (n->op == ir::Op::Input) host.emplace(n, inputs.at(n)->to_host());
    results = interp::evaluate_reference(outputs, host);
  } catch (const std::bad_alloc&) {
    return std::unexpected(reference_out_of_memory(live, namer_));
  } catch (const std::length_error&) {
    return std::unexpected(reference_out_of_memory(live, namer_));
  }
  if (!results) return std::unexpected(results.error());
  std::vector<std::shared_ptr<Buffer>> out;
  for (size_t i = 0; i < results->size(); ++i) {
    auto b = pool_->from_host((*results)[i], namer_ ? namer_(outputs[i]) : value_label(outputs[i]));
    if (!b) return std::unexpected(b.error());
    out.push_back(std::move(*b));
  }
  if (stats) {
    *stats = RunStats{};
    stats->run_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  return out;
}

}  // namespace kiln::runtime
