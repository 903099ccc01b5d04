// GpuKernelCache: emit -> compile -> load, with the device binary kept in the persistent store.
#include "runtime/gpu_kernel_cache.h"

#include <chrono>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kiln::runtime {

using json = nlohmann::json;

namespace {
constexpr const char* kSchema = "1";

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

cache::KeyParts GpuKernelCache::key(const kir::Kernel& kernel, const codegen::TuneParams& params) const {
  return cache::KeyParts{{{"kernel", kir::print_kernel(kernel, /*with_labels=*/false)},
                          {"tune", params.str()},
                          {"target", backend_.binary_kind()},
                          {"device", backend_.fingerprint()},
                          {"codegen", codegen::gpu::kGpuCodegenVersion},
                          {"schema", kSchema},
                          {"check", std::string(codegen::check_mode_name(check_))}}};
}

// The stored entry: the binary as value, the generated source as source, the launch shape in the
// metadata. The source is emitted again (cheap, deterministic) and must match what was stored.
std::shared_ptr<GpuKernel> GpuKernelCache::from_store(const cache::KeyParts& key,
                                                      const kir::Kernel& kernel,
                                                      const codegen::TuneParams& params) {
  std::optional<cache::Entry> e = store_->get(cache::Table::kernels, key);
  if (!e) return nullptr;
  auto source = codegen::gpu::emit_source(kernel, params, backend_.dialect(), check_);
  if (!source || source->text != e->source) return nullptr;  // a stale or damaged entry: rebuild
  auto program = backend_.load(*source, e->value);
  if (!program) return nullptr;
  auto k = std::make_shared<GpuKernel>();
  k->source = std::move(*source);
  k->binary = std::move(e->value);
  k->program = std::move(*program);
  return k;
}

Expected<std::shared_ptr<GpuKernel>> GpuKernelCache::build(const kir::Kernel& kernel,
                                                           const codegen::TuneParams& params) {
  auto t0 = std::chrono::steady_clock::now();
  auto source = codegen::gpu::emit_source(kernel, params, backend_.dialect(), check_);
  if (!source) return std::unexpected(source.error());
  auto binary = backend_.compile(*source, kernel.name);
  if (!binary) return std::unexpected(binary.error());
  auto k = std::make_shared<GpuKernel>();
  k->source = std::move(*source);
  k->binary = std::move(*binary);
  k->compile_ms = ms_since(t0);
  return k;
}

void GpuKernelCache::put(const cache::KeyParts& key, const GpuKernel& k) {
  if (store_->read_only()) return;
  cache::Entry e;
  e.value = k.binary;
  e.source = k.source.text;
  e.metadata = json{{"entry", k.source.entry},
                    {"strategy", k.source.strategy},
                    {"groups", k.source.launch.groups},
                    {"group_size", k.source.launch.group_size},
                    {"binary", backend_.binary_kind()},
                    {"compile_ms", k.compile_ms}}
                   .dump();
  store_->put(cache::Table::kernels, key, e);
}

bool GpuKernelCache::contains(const kir::Kernel& kernel, const codegen::TuneParams& params) const {
  return store_ && store_->show(key(kernel, params).digest()).has_value();
}

Expected<bool> GpuKernelCache::warm(const kir::Kernel& kernel, const codegen::TuneParams& params) {
  if (!store_) return make_error("no persistent cache to warm");
  if (contains(kernel, params)) return false;
  auto k = build(kernel, params);
  if (!k) return std::unexpected(k.error());
  put(key(kernel, params), **k);
  return true;
}

Expected<GpuKernelLookup> GpuKernelCache::get(const kir::Kernel& kernel,
                                              const codegen::TuneParams& params) {
  std::string text = kir::print_kernel(kernel, false) + "\n" + params.str();
  {
    std::lock_guard lock(mu_);
    if (auto it = kernels_.find(text); it != kernels_.end()) {
      GpuKernelLookup hit = it->second;
      hit.source = GpuKernelLookup::Source::memory;
      return hit;
    }
  }
  GpuKernelLookup found;
  std::optional<cache::KeyParts> disk_key;
  if (store_) {
    disk_key = key(kernel, params);
    found.digest = disk_key->digest();
    if (auto k = from_store(*disk_key, kernel, params)) {
      found.kernel = std::move(k);
      found.source = GpuKernelLookup::Source::disk;
    } else if (explain_) {
      found.miss_reason = store_->explain(cache::Table::kernels, *disk_key).text();
    }
  }
  if (!found.kernel) {
    auto k = build(kernel, params);
    if (!k) return std::unexpected(k.error());
    auto program = backend_.load((*k)->source, (*k)->binary);
    if (!program) return std::unexpected(program.error());
    (*k)->program = std::move(*program);
    if (store_) put(*disk_key, **k);
    found.kernel = std::move(*k);
    found.source = GpuKernelLookup::Source::compiled;
  }
  std::lock_guard lock(mu_);
  kernels_.emplace(text, found);
  return found;
}

}  // namespace kiln::runtime
