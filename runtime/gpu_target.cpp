// GpuTarget: emit -> compile -> load, entries holding the binary beside the source and launch
// shape it was compiled from, and streams that give each launch its scratch buffer.
#include "runtime/gpu_target.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <thread>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autotune/tune_space.h"
#include "codegen/gpu/launch_strategy.h"
#include "runtime/gpu_tuner.h"

namespace kiln::runtime {

namespace {

using json = nlohmann::json;

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Expected<codegen::gpu::GpuSource> read_gpu_entry(const cache::Entry& e, std::string_view binary_kind) {
  json meta = json::parse(e.metadata, nullptr, /*allow_exceptions=*/false);
  if (!meta.is_object()) return make_error("its metadata is not a JSON object");
  try {
    const std::string kind = meta.at("binary").get<std::string>();
    if (!binary_kind.empty() && kind != binary_kind)
      return make_error(fmt::format("it holds {}, not {}", kind, binary_kind));
    codegen::gpu::GpuSource source;
    source.text = e.source;
    source.entry = meta.at("entry").get<std::string>();
    source.strategy = meta.at("strategy").get<std::string>();
    source.launch.groups = meta.at("groups").get<int64_t>();
    source.launch.group_size = meta.at("group_size").get<int>();
    source.scratch_bytes = meta.at("scratch_bytes").get<int64_t>();
    source.scratch_zero_bytes = meta.at("scratch_zero_bytes").get<int64_t>();
    // Entries of kiln-gpu-4 and before (other keys, kept until evicted) have no count.
    source.loop_iterations = meta.value("loop_iterations", int64_t{0});
    // Static kernels' entries name no dynamic launch.
    source.launch.dynamic_tasks = meta.value("dynamic_tasks", int64_t{0});
    source.launch.tasks_per_group = meta.value("tasks_per_group", int64_t{1});
    source.launch.outer_block = meta.value("outer_block", int64_t{1});
    if (source.launch.dynamic_tasks < 0 || source.launch.tasks_per_group < 1 ||
        source.launch.outer_block < 1)
      return make_error(fmt::format(
          "its dynamic launch is not one ({} tasks per {} outer points, {} per group)",
          source.launch.dynamic_tasks, source.launch.outer_block, source.launch.tasks_per_group));
    if (source.launch.groups < 1 || source.launch.group_size < 1 || source.scratch_bytes < 0 ||
        source.scratch_zero_bytes < 0 || source.scratch_zero_bytes > source.scratch_bytes)
      return make_error(fmt::format("its launch shape is not one ({} groups of {}, scratch {} of {} zeroed)",
                                    source.launch.groups, source.launch.group_size,
                                    source.scratch_zero_bytes, source.scratch_bytes));
    if (source.loop_iterations < 0)
      return make_error(
          fmt::format("its loop iteration count {} is negative", source.loop_iterations));
    if (e.value.empty() || source.text.empty() || source.entry.empty())
      return make_error("it lacks its binary, source or entry point");
    return source;
  } catch (const json::exception& x) {
    return make_error(fmt::format("its metadata is not a GPU kernel's ({})", x.what()));
  }
}

namespace {

// A backend's stream, with each launch's scratch buffer made on it.
class GpuTargetStream final : public Stream {
 public:
  GpuTargetStream(GpuBackend& backend, std::unique_ptr<GpuStream> stream)
      : backend_(backend), stream_(std::move(stream)) {}
  Expected<void> upload(DeviceMemory& dst, const void* src, size_t bytes) override {
    return stream_->upload(dst, src, bytes);
  }
  Expected<void> download(const DeviceMemory& src, void* dst, size_t bytes) override {
    return stream_->download(src, dst, bytes);
  }
  Expected<void> launch(const Artifact& artifact, const std::vector<DeviceMemory*>& args,
                        bool timed) override {
    const auto& kernel = static_cast<const GpuKernel&>(artifact);
    const GpuCode& k = *kernel.code;
    if (!k.program) return make_error(backend_.name() + ": a kernel that was compiled but not loaded cannot run");
    std::optional<int64_t> outer;
    if (k.gpu_source.launch.dynamic_tasks > 0) {
      if (kernel.outer_extent < 0)
        return make_error(backend_.name() +
                          ": a dynamic kernel bound to no outer extent cannot run");
      outer = kernel.outer_extent;
    }
    auto scratch = make_scratch(backend_, *stream_, k.gpu_source);
    if (!scratch) return std::unexpected(scratch.error());
    if (!*scratch) return stream_->launch(*k.program, args, timed, outer);
    std::vector<DeviceMemory*> with_scratch = args;
    with_scratch.push_back(scratch->get());
    return stream_->launch(*k.program, with_scratch, timed, outer);
  }
  Expected<void> synchronize() override { return stream_->synchronize(); }
  std::vector<double> launch_times_ms() const override { return stream_->launch_times_ms(); }

 private:
  GpuBackend& backend_;
  std::unique_ptr<GpuStream> stream_;
};

}  // namespace

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

Expected<codegen::gpu::GpuSource> emit_for_device(const GpuBackend& backend,
                                                  const kir::Kernel& kernel,
                                                  const codegen::TuneParams& params,
                                                  codegen::CheckMode check,
                                                  const kir::KernelFacts* facts,
                                                  bool tensor_cores) {
  auto source =
      codegen::gpu::emit_source(kernel, params, backend.dialect(), check, facts, tensor_cores);
  const std::optional<int64_t> limit = backend.loop_iteration_limit();
  if (!source || !limit || source->loop_iterations <= *limit || !(params == codegen::TuneParams{}))
    return source;
  source->other_schedules_tried = 0;
  for (const autotune::TuneCandidate& c : autotune::gpu_tune_space(kernel, tensor_cores)) {
    if (c.params == params) continue;
    ++source->other_schedules_tried;
    auto other = codegen::gpu::emit_source(kernel, c.params, backend.dialect(), check, facts,
                                           tensor_cores);
    if (other && other->loop_iterations <= *limit) return other;
  }
  return source;
}

passes::DeviceRates gpu_rates(const GpuBackend& backend) {
  for (const auto& [key, value] : backend.properties())
    if (key == "type" && value.find("cpu") != std::string::npos)
      return passes::DeviceRates::reference_cpu();
  return passes::DeviceRates::reference_gpu();
}

GpuTarget::GpuTarget(std::unique_ptr<GpuBackend> backend, bool tensor_core_matmul)
    : backend_(std::move(backend)), tensor_cores_(tensor_core_matmul && backend_->warp_mma()) {}

GpuTarget::~GpuTarget() = default;

std::vector<std::pair<std::string, std::string>> GpuTarget::identity() const {
  std::vector<std::pair<std::string, std::string>> id{
      {"target", backend_->binary_kind()},
      {"device", backend_->fingerprint()},
      {"codegen", codegen::gpu::kGpuCodegenVersion}};
  if (tensor_cores_) id.emplace_back("matmul", "tensor-cores");
  return id;
}

Expected<passes::DeviceRates> GpuTarget::measure_rates() { return measure_gpu_rates(*backend_); }

std::string GpuTarget::source_extension() const {
  return backend_->dialect() == codegen::gpu::Dialect::cuda ? "cu" : "comp";
}

Expected<std::shared_ptr<const Artifact>> GpuTarget::compile(const kir::Kernel& kernel,
                                                             const kir::KernelFacts& facts,
                                                             const codegen::TuneParams& params,
                                                             codegen::CheckMode check, bool load) {
  auto t0 = std::chrono::steady_clock::now();
  auto source = emit_for_device(*backend_, kernel, params, check, &facts, tensor_cores_);
  if (!source) return std::unexpected(source.error());
  auto binary = backend_->compile(*source, kernel.name);
  if (!binary) return std::unexpected(binary.error());
  auto code = std::make_shared<GpuCode>();
  code->gpu_source = std::move(*source);
  code->binary = std::move(*binary);
  code->ms = ms_since(t0);
  if (load) {
    auto program = backend_->load(code->gpu_source, code->binary);
    if (!program) return std::unexpected(program.error());
    code->program = std::move(*program);
  }
  const int64_t outer = code->gpu_source.launch.dynamic_tasks > 0 ? kernel.outer_extent() : -1;
  return std::make_shared<const GpuKernel>(std::move(code), outer);
}

std::string GpuKernel::summary() const {
  const codegen::gpu::GpuSource& src = code->gpu_source;
  const codegen::gpu::LaunchShape l = codegen::gpu::launch_at(src.launch, outer_extent);
  return fmt::format(
      "strategy {}, {} workgroup{} of {} threads{}", src.strategy, l.groups,
      l.groups == 1 ? "" : "s", l.group_size,
      src.launch.dynamic_tasks > 0 ? fmt::format(" (dynamic: outer extent {})", outer_extent) : "");
}

bool GpuTarget::serves_any_outer_extent(const kir::Kernel& kernel, const kir::KernelFacts& facts,
                                        codegen::CheckMode check) const {
  return codegen::gpu::serves_any_outer_extent(kernel, facts, check, tensor_cores_);
}

// The text is the bound's: every extent of the bucket runs as one planned at its size would.
// (The executor binds an instance to the kernel of its own bucket only.)
bool GpuTarget::serves_instance(const kir::Kernel& kernel, const std::vector<bool>&) const {
  return kernel.dynamic_outer && kernel.dynamic_bound > 0;
}

std::shared_ptr<const Artifact> GpuTarget::with_outer_extent(const Artifact& artifact,
                                                             int64_t outer_extent) const {
  const auto& k = static_cast<const GpuKernel&>(artifact);
  if (k.code->gpu_source.launch.dynamic_tasks <= 0 || outer_extent < 0 ||
      outer_extent > codegen::gpu::kMaxDynamicBound)
    return nullptr;
  return std::make_shared<const GpuKernel>(k.code, outer_extent);
}

// The stored entry: the binary as value, the generated source as source, the launch shape in the
// metadata.
std::optional<cache::Entry> GpuTarget::to_entry(const Artifact& artifact) const {
  const GpuCode& k = *static_cast<const GpuKernel&>(artifact).code;
  cache::Entry e;
  e.value = k.binary;
  e.source = k.gpu_source.text;
  e.metadata = json{
      {"entry", k.gpu_source.entry},
      {"strategy", k.gpu_source.strategy},
      {"groups", k.gpu_source.launch.groups},
      {"group_size", k.gpu_source.launch.group_size},
      {"scratch_bytes", k.gpu_source.scratch_bytes},
      {"scratch_zero_bytes", k.gpu_source.scratch_zero_bytes},
      {"loop_iterations", k.gpu_source.loop_iterations},
      {"dynamic_tasks", k.gpu_source.launch.dynamic_tasks},
      {"tasks_per_group", k.gpu_source.launch.tasks_per_group},
      {"outer_block", k.gpu_source.launch.outer_block},
      {"binary", backend_->binary_kind()},
      {"compile_ms",
       k.ms}}.dump();
  return e;
}

Expected<std::shared_ptr<const Artifact>> GpuTarget::from_entry(const cache::Entry& entry, bool load) {
  auto source = read_gpu_entry(entry, backend_->binary_kind());
  if (!source) return std::unexpected(source.error());
  auto code = std::make_shared<GpuCode>();
  code->gpu_source = std::move(*source);
  code->binary = entry.value;
  if (load) {
    auto program = backend_->load(code->gpu_source, code->binary);
    if (!program) return make_error("its binary does not load: " + program.error().message);
    code->program = std::move(*program);
  }
  return std::make_shared<const GpuKernel>(std::move(code), -1);
}

Expected<std::vector<ArtifactForm>> GpuTarget::forms(const Artifact& artifact, const std::string& name) {
  const GpuCode& k = *static_cast<const GpuKernel&>(artifact).code;
  std::vector<ArtifactForm> forms{{"source", source_extension(), k.gpu_source.text}};
  auto binary = backend_->binary_forms(k.gpu_source, k.binary, name);
  if (!binary) return std::unexpected(binary.error());
  for (ArtifactForm& f : *binary) forms.push_back(std::move(f));
  return forms;
}

Expected<autotune::TuneDecision> GpuTarget::tune(const kir::Kernel& kernel, autotune::Level level,
                                                 double roofline_ms) {
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return tune_gpu_kernel(*backend_, kernel, level, roofline_ms, threads, {}, tensor_cores_);
}

std::shared_ptr<DeviceMemory> GpuTarget::wrap(std::shared_ptr<Buffer>) {
  KILN_CHECK(false) << backend_->name() << ": device memory is not host memory";
  return nullptr;
}

Expected<std::shared_ptr<DeviceMemory>> GpuTarget::allocate(size_t bytes) {
  return backend_->allocate(device_alloc_bytes(bytes));
}

Expected<std::unique_ptr<Stream>> GpuTarget::create_stream() {
  auto stream = backend_->create_stream();
  if (!stream) return std::unexpected(stream.error());
  return std::unique_ptr<Stream>(std::make_unique<GpuTargetStream>(*backend_, std::move(*stream)));
}

std::optional<Expected<std::unique_ptr<GpuBackend>>> open_gpu_backend(
    std::string_view name, const codegen::cuda::NvrtcSearch& nvrtc) {
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
  return api == "cuda" ? open_cuda_backend(index, nvrtc) : open_vulkan_backend(index);
}

}  // namespace kiln::runtime
