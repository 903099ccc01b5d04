// CpuTarget: artifacts are linked object code with its LLVM IR; entries hold the object code, the
// IR and a checksum; a stream runs each launch over the thread pool, synchronously.
#include "runtime/cpu_target.h"

#include "autotune/roofline.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autotune/runner.h"
#include "codegen/cpu/streaming_stores.h"
#include "runtime/cpu_rates.h"

namespace kiln::runtime {

namespace {

// Whether code of a kernel with run-time sizes has room for `instance`'s slot values: each at most
// its limit, the longest row it keeps (cpu::size_limits). A slot may be any number (a diagonal's
// offset, say, as well as an extent).
bool has_room_for(const codegen::CpuArtifact& code, const kir::Kernel& instance) {
  for (size_t s = 0; s < instance.sizes.size() && s < code.size_limits.size(); ++s)
    if (code.size_limits[s] >= 0 &&
        (instance.sizes[s] < 0 || instance.sizes[s] > code.size_limits[s]))
      return false;
  return true;
}

using json = nlohmann::json;

// Points of the parallel domain per thread chunk below which waking a thread costs more than it saves.
constexpr int64_t kMinPointsPerChunk = 1 << 14;
constexpr double kOpsPerPoint = 4;
// A launch of fewer smallest chunks than this (each about kMinPointsPerChunk * kOpsPerPoint
// operations, a microsecond or two) runs on the workers that are awake, without waking those
// asleep (support::ThreadPool::parallel_for): small_ops (6 of them) between two benchmark
// repetitions took 7 us with a wake, 5 without.
constexpr int64_t kWakeMinChunks = 16;
// The cost model prices the work of such launches on one core.
static_assert(kWakeMinChunks * kMinPointsPerChunk * kOpsPerPoint == passes::kOneCoreWorkOps);
// Such a launch of a one-axis kernel of at least this many times kOpsPerPoint operations a point
// runs on the caller alone: its few microseconds of vector arithmetic gain less on a second core
// than that core's start costs (its vector units come out of idle slowly). small_ops (768
// dependent operations a point, 512 points, 4 us on one core) ran 3.7-4.5 us on two threads when
// they were awake, 6-8 us (one run in ten 210) under Google Benchmark; on the caller, 5.
constexpr int64_t kHeavyPoint = 16;

class CpuKernel final : public Artifact {
 public:
  CpuKernel(std::shared_ptr<const codegen::CpuArtifact> code, int64_t min_chunk)
      : code(std::move(code)), min_chunk(min_chunk), outer_extent(this->code->outer_extent) {}
  CpuKernel(std::shared_ptr<const codegen::CpuArtifact> code, int64_t min_chunk, int64_t outer_extent)
      : code(std::move(code)), min_chunk(min_chunk), outer_extent(outer_extent) {}
  const std::string& source() const override { return code->llvm_ir; }
  double compile_ms() const override { return code->compile_ms; }
  bool loaded() const override { return code->fn != nullptr; }

  std::shared_ptr<const codegen::CpuArtifact> code;
  int64_t min_chunk;  // outer indices per thread chunk, at least
  // The launch's range [0, outer_extent): the code's, or a dynamic kernel's instance's
  // (with_outer_extent). min_chunk depends on the inner axes and the work per point only.
  int64_t outer_extent;
  // A kernel with run-time sizes: this instance's slot values (with_sizes), passed after the
  // buffers.
  std::vector<int64_t> sizes;
};

}  // namespace

// kMinPointsPerChunk points of the domain, fewer for kernels that compute more per point
// (kMinPointsPerChunk at up to kOpsPerPoint operations a point).
int64_t cpu_min_chunk(const kir::Kernel& kernel) {
  int64_t inner = 1;
  for (size_t d = 1; d < kernel.domain.size(); ++d) inner *= kernel.domain[d];
  double points = 1;
  for (int64_t d : kernel.domain) points *= static_cast<double>(d);
  const double ops = points > 0 ? autotune::kernel_work(kernel).flops / points : 0;
  const auto heavier = static_cast<int64_t>(std::max(1.0, ops / kOpsPerPoint));
  return std::max<int64_t>(1, kMinPointsPerChunk / heavier / std::max<int64_t>(1, inner));
}

namespace {

class HostMemory final : public DeviceMemory {
 public:
  explicit HostMemory(std::shared_ptr<Buffer> buffer) : buffer_(std::move(buffer)) {}
  size_t bytes() const override { return buffer_->nbytes(); }
  std::shared_ptr<Buffer> host() const override { return buffer_; }
  std::byte* data() const { return buffer_->data(); }

 private:
  std::shared_ptr<Buffer> buffer_;
};

// Runs each launch at once over the pool: synchronize() has nothing to wait for.
class CpuStream final : public Stream {
 public:
  explicit CpuStream(support::ThreadPool& threads) : threads_(threads) {}
  Expected<void> upload(DeviceMemory& dst, const void* src, size_t bytes) override {
    std::memcpy(static_cast<HostMemory&>(dst).data(), src, bytes);
    return {};
  }
  Expected<void> download(const DeviceMemory& src, void* dst, size_t bytes) override {
    std::memcpy(dst, static_cast<const HostMemory&>(src).data(), bytes);
    return {};
  }
  Expected<void> launch(const Artifact& artifact, const std::vector<DeviceMemory*>& args,
                        bool timed) override {
    const auto& k = static_cast<const CpuKernel&>(artifact);
    if (!k.loaded()) return make_error("cpu: a kernel that was compiled but not linked cannot run");
    if (static_cast<size_t>(k.code->size_slots) != k.sizes.size())
      return make_error(fmt::format("cpu: a kernel of {} run-time sizes launched with {}",
                                    k.code->size_slots, k.sizes.size()));
    pointers_.clear();
    for (DeviceMemory* m : args) pointers_.push_back(static_cast<HostMemory*>(m)->data());
    if (!k.sizes.empty()) pointers_.push_back(const_cast<int64_t*>(k.sizes.data()));
    const auto t0 = std::chrono::steady_clock::now();
    void* const* argv = pointers_.data();
    const codegen::CpuArtifact& code = *k.code;
    // Cut in units of chunk_align points (codegen::CpuArtifact::units).
    const int64_t units = code.units(k.outer_extent), min_units = code.units(k.min_chunk);
    const auto run = [&](int64_t b, int64_t e) { code.run_units(argv, b, e, k.outer_extent); };
    const bool small = units < kWakeMinChunks * min_units;
    if (small && code.align() > 1 && k.min_chunk * kHeavyPoint <= kMinPointsPerChunk)
      run(0, units);  // a few microseconds of vector arithmetic: one core
    else
      threads_.parallel_for(units, min_units, run, code.chunks_per_thread,
                            /*wake_sleepers=*/!small);
    if (timed)
      times_.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    return {};
  }
  Expected<void> synchronize() override {
    last_times_ = std::move(times_);
    times_.clear();
    return {};
  }
  std::vector<double> launch_times_ms() const override { return last_times_; }

 private:
  support::ThreadPool& threads_;
  std::vector<void*> pointers_;
  std::vector<double> times_, last_times_;
};

}  // namespace

Expected<std::unique_ptr<CpuTarget>> CpuTarget::create(const CpuTargetOptions& options) {
  auto backend = codegen::CpuBackend::create(options.cpu_target);
  if (!backend) return std::unexpected(backend.error());
  return std::unique_ptr<CpuTarget>(new CpuTarget(std::move(*backend), options));
}

CpuTarget::CpuTarget(std::unique_ptr<codegen::CpuBackend> backend, const CpuTargetOptions& options)
    : backend_(std::move(backend)),
      threads_(options.num_threads > 0 ? options.num_threads : support::ThreadPool::default_threads()),
      scratch_(BufferPool::create(PersistentMemory::disabled)) {}

std::vector<std::pair<std::string, std::string>> CpuTarget::identity() const {
  return {{"target", "cpu"},
          {"cpu", backend_->cpu_name()},
          {"features", backend_->cpu_features()},
          {"llc", std::to_string(backend_->llc_bytes())},
          {"llvm", backend_->llvm_version()},
          {"codegen", codegen::CpuBackend::kCodegenVersion}};
}

Expected<passes::DeviceRates> CpuTarget::measure_rates() { return measure_cpu_rates(*backend_, threads_); }

// As for streaming stores (codegen/cpu/streaming_stores.h): a quarter of the last-level cache.
int64_t CpuTarget::cache_resident_bytes() const {
  return backend_->llc_bytes() / codegen::cpu::kStreamingCacheFraction;
}

std::string CpuTarget::rates_setup() const { return fmt::format("threads={}", threads_.size()); }

Expected<std::shared_ptr<const Artifact>> CpuTarget::compile(const kir::Kernel& kernel,
                                                             const kir::KernelFacts& facts,
                                                             const codegen::TuneParams& params,
                                                             codegen::CheckMode check, bool) {
  // Compiling links too: a cpu artifact is always ready to run. A bench may have compiled it
  // already (the tuner's winner, time_ratio's pair).
  if (check == codegen::CheckMode::none) {
    std::shared_ptr<const codegen::CpuArtifact> code =
        recent_code(kir::print_kernel(kernel, /*with_labels=*/false), params.str(), /*take=*/true);
    if (code) return std::make_shared<const CpuKernel>(std::move(code), cpu_min_chunk(kernel));
  }
  auto code = backend_->compile(kernel, params, check, &facts);
  if (!code) return std::unexpected(code.error());
  return std::make_shared<const CpuKernel>(std::move(*code), cpu_min_chunk(kernel));
}

std::shared_ptr<const codegen::CpuArtifact> CpuTarget::recent_code(const std::string& kernel_text,
                                                                   const std::string& schedule,
                                                                   bool take) {
  const std::string key = kernel_text + '\n' + schedule;
  std::lock_guard lock(recent_mu_);
  const auto hit = std::ranges::find(recent_, key, &decltype(recent_)::value_type::first);
  if (hit == recent_.end()) return nullptr;
  std::shared_ptr<const codegen::CpuArtifact> code = hit->second;
  if (take)
    std::erase_if(recent_, [&](const auto& e) { return e.first.starts_with(kernel_text + '\n'); });
  return code;
}

autotune::CpuCompile CpuTarget::bench_compile() {
  return [this](const kir::Kernel& kernel, const codegen::TuneParams& params)
             -> Expected<std::shared_ptr<const codegen::CpuArtifact>> {
    const std::string text = kir::print_kernel(kernel, /*with_labels=*/false);
    const std::string schedule = params.str();
    // Code of the same text compiled for another instance serves this one where it has room for
    // its sizes (as with_sizes checks); the bench runs it over this instance's range.
    if (auto code = recent_code(text, schedule, /*take=*/false); code && has_room_for(*code, kernel))
      return code;
    auto code = backend_->compile(kernel, params, codegen::CheckMode::none);
    if (!code) return std::unexpected(code.error());
    std::lock_guard lock(recent_mu_);
    if (recent_.size() >= kRecentCode) recent_.erase(recent_.begin());
    recent_.emplace_back(text + '\n' + schedule, *code);
    return *code;
  };
}

bool CpuTarget::serves_any_outer_extent(const kir::Kernel& kernel, const kir::KernelFacts& facts,
                                        codegen::CheckMode check) const {
  return codegen::CpuBackend::serves_any_outer_extent(kernel, facts, check, backend_->llc_bytes());
}

bool CpuTarget::serves_instance(const kir::Kernel& kernel,
                                const std::vector<bool>& written_only) const {
  return codegen::CpuBackend::serves_instance(kernel, written_only, backend_->llc_bytes());
}

std::shared_ptr<const Artifact> CpuTarget::with_outer_extent(const Artifact& artifact,
                                                             int64_t outer_extent) const {
  const auto& k = static_cast<const CpuKernel&>(artifact);
  // Code specialized to its size serves that size only.
  if (!k.code->dynamic_outer && outer_extent != k.code->outer_extent) return nullptr;
  return std::make_shared<const CpuKernel>(k.code, k.min_chunk, outer_extent);
}

bool CpuTarget::serves_any_sizes(const kir::Kernel& kernel, const kir::KernelFacts& facts,
                                 codegen::CheckMode check) const {
  return codegen::CpuBackend::serves_any_sizes(kernel, facts, check, backend_->llc_bytes());
}

bool CpuTarget::serves_sizes_instance(const kir::KernelFacts& general, const kir::Kernel& special,
                                      const kir::KernelFacts& special_facts) const {
  return codegen::CpuBackend::serves_sizes_instance(general, special, special_facts,
                                                    backend_->llc_bytes());
}

std::shared_ptr<const Artifact> CpuTarget::with_sizes(const Artifact& artifact,
                                                      const kir::Kernel& instance) const {
  const auto& k = static_cast<const CpuKernel&>(artifact);
  if (k.code->size_slots == 0 || static_cast<size_t>(k.code->size_slots) != instance.sizes.size())
    return nullptr;
  if (!has_room_for(*k.code, instance)) return nullptr;
  // The launch's range, which need not be the outer extent (attention runs (batch point, block
  // of query rows) units: for a [2, 3, 1, 16] attention over a cache of any length, 6 units, of
  // which the outer extent's 2 ran, and the other heads' outputs were never written).
  auto bound = std::make_shared<CpuKernel>(k.code, cpu_min_chunk(instance),
                                           codegen::CpuBackend::instance_range(*k.code, instance));
  bound->sizes = instance.sizes;
  return bound;
}

std::optional<cache::Entry> CpuTarget::to_entry(const Artifact& artifact) const {
  const codegen::CpuArtifact& a = *static_cast<const CpuKernel&>(artifact).code;
  if (a.object.empty()) return std::nullopt;
  cache::Entry e;
  e.value = a.object;
  e.source = a.llvm_ir;
  e.metadata = json{{"symbol", a.symbol},
                    {"outer_extent", a.outer_extent},
                    {"min_chunk", static_cast<const CpuKernel&>(artifact).min_chunk},
                    {"dynamic_outer", a.dynamic_outer},
                    {"size_slots", a.size_slots},
                    {"size_limits", a.size_limits},
                    {"unit_rows", a.unit_rows},
                    {"chunks_per_thread", a.chunks_per_thread},
                    {"chunk_align", a.chunk_align},
                    {"compile_ms", a.compile_ms}}
                   .dump();
  return e;
}

Expected<CpuEntry> read_cpu_entry(const cache::Entry& e) {
  json meta = json::parse(e.metadata, nullptr, /*allow_exceptions=*/false);
  if (!meta.is_object()) return make_error("its metadata is not a JSON object");
  try {
    CpuEntry out{meta.at("symbol").get<std::string>(), meta.at("outer_extent").get<int64_t>(),
                 meta.at("min_chunk").get<int64_t>()};
    if (meta.contains("dynamic_outer")) out.dynamic_outer = meta.at("dynamic_outer").get<bool>();
    if (meta.contains("chunks_per_thread")) out.chunks_per_thread = meta.at("chunks_per_thread").get<int>();
    if (meta.contains("chunk_align")) out.chunk_align = meta.at("chunk_align").get<int64_t>();
    if (meta.contains("size_slots")) out.size_slots = meta.at("size_slots").get<int32_t>();
    if (out.size_slots < 0)
      return make_error(fmt::format("its run-time sizes are {}", out.size_slots));
    if (meta.contains("size_limits"))
      out.size_limits = meta.at("size_limits").get<std::vector<int64_t>>();
    if (meta.contains("unit_rows")) out.unit_rows = meta.at("unit_rows").get<int64_t>();
    if (out.unit_rows < 0 || (out.unit_rows > 0 && out.size_slots == 0))
      return make_error(fmt::format("its unit of query rows is {} (with {} run-time sizes)",
                                    out.unit_rows, out.size_slots));
    if (out.size_slots > 0 && out.size_limits.size() != static_cast<size_t>(out.size_slots))
      return make_error(fmt::format("it has {} run-time sizes and {} limits", out.size_slots,
                                    out.size_limits.size()));
    if (out.symbol.empty()) return make_error("its symbol is empty");
    if (out.outer_extent < 0) return make_error(fmt::format("its outer extent is {}", out.outer_extent));
    if (out.min_chunk < 1) return make_error(fmt::format("its chunk is {}", out.min_chunk));
    if (out.chunks_per_thread < 0)
      return make_error(fmt::format("its chunks per thread are {}", out.chunks_per_thread));
    if (out.chunk_align < 1)
      return make_error(fmt::format("its chunk alignment is {}", out.chunk_align));
    if (e.value.empty()) return make_error("it holds no object code");
    return out;
  } catch (const json::exception& x) {
    return make_error(fmt::format("its metadata is not a cpu kernel's ({})", x.what()));
  }
}

Expected<std::shared_ptr<const Artifact>> CpuTarget::from_entry(const cache::Entry& e, bool load) {
  auto stored = read_cpu_entry(e);
  if (!stored) return std::unexpected(stored.error());
  std::shared_ptr<codegen::CpuArtifact> code;
  if (load) {
    auto linked = backend_->load(e.value, stored->symbol, stored->outer_extent);
    if (!linked) return make_error("its object code does not link: " + linked.error().message);
    code = std::make_shared<codegen::CpuArtifact>(**linked);
  } else {
    code = std::make_shared<codegen::CpuArtifact>();
    code->symbol = stored->symbol;
    code->outer_extent = stored->outer_extent;
  }
  code->dynamic_outer = stored->dynamic_outer;
  code->size_slots = stored->size_slots;
  code->size_limits = stored->size_limits;
  code->unit_rows = stored->unit_rows;
  code->chunks_per_thread = stored->chunks_per_thread;
  code->chunk_align = stored->chunk_align;
  code->llvm_ir = e.source;
  code->compile_ms = 0;
  return std::make_shared<const CpuKernel>(std::move(code), stored->min_chunk);
}

Expected<std::vector<ArtifactForm>> CpuTarget::forms(const Artifact& artifact, const std::string&) {
  return std::vector<ArtifactForm>{{"source", "ll", artifact.source()}};
}

autotune::ParallelFor CpuTarget::parallel_for_like(const kir::Kernel& kernel) {
  const int per_thread = codegen::CpuBackend::chunks_per_thread(kernel, kir::analyze_kernel(kernel),
                                                                codegen::CheckMode::none);
  return [this, per_thread](int64_t n, const std::function<void(int64_t, int64_t)>& chunk) {
    threads_.parallel_for(n, 1, chunk, per_thread);
  };
}

Expected<autotune::TuneDecision> CpuTarget::tune(const kir::Kernel& kernel, autotune::Level level,
                                                 double roofline_ms) {
  // Candidates run cut as the device runs the kernel (a matrix-vector product's stripes are
  // timed as they will run); their compiles share the same cut.
  return autotune::tune_cpu_kernel(*backend_, parallel_for_like(kernel), kernel, level, roofline_ms,
                                   {}, bench_compile());
}

Expected<std::optional<double>> CpuTarget::time_ratio(const kir::Kernel& candidate,
                                                      const kir::Kernel& reference) {
  // Cut as the device runs the reference (the two have the same parameters).
  autotune::TimeRatioOptions options;
  options.compile = bench_compile();
  Expected<double> ratio = autotune::cpu_time_ratio(*backend_, parallel_for_like(reference),
                                                    candidate, reference, options);
  if (!ratio) return std::unexpected(ratio.error());
  return std::optional<double>(*ratio);
}

std::shared_ptr<DeviceMemory> CpuTarget::wrap(std::shared_ptr<Buffer> buffer) {
  return std::make_shared<HostMemory>(std::move(buffer));
}

Expected<std::shared_ptr<DeviceMemory>> CpuTarget::allocate(size_t bytes) {
  auto buffer = scratch_->allocate(ir::DType::u8, {static_cast<int64_t>(std::max<size_t>(bytes, 1))},
                                   "a kernel buffer");
  if (!buffer) return std::unexpected(buffer.error());
  return wrap(std::move(*buffer));
}

Expected<std::unique_ptr<Stream>> CpuTarget::create_stream() {
  return std::unique_ptr<Stream>(std::make_unique<CpuStream>(threads_));
}

}  // namespace kiln::runtime
