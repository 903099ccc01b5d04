// GpuKernelCache: emit -> compile -> load, with the device binary kept in the persistent store
// beside the source and launch shape it was compiled from.
#include "runtime/gpu_kernel_cache.h"

#include <chrono>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kiln::runtime {

using json = nlohmann::json;

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Flipped bytes inside a binary or its source would load and launch wrong code (or a wrong
// launch shape): an entry is checked against this before it is loaded.
std::string entry_checksum(const std::vector<uint8_t>& binary, const std::string& source) {
  return cache::KeyParts{{{"binary", std::string(binary.begin(), binary.end())}, {"source", source}}}
      .digest();
}

// The source and launch shape of a stored entry, when the entry is intact and holds a
// `binary_kind` binary; nullopt for entries of older writers (no scratch sizes, no checksum).
std::optional<codegen::gpu::GpuSource> stored_source(const cache::Entry& e,
                                                     const std::string& binary_kind) {
  json meta = json::parse(e.metadata, nullptr, /*allow_exceptions=*/false);
  if (!meta.is_object()) return std::nullopt;
  try {
    if (meta.at("binary").get<std::string>() != binary_kind ||
        meta.at("checksum").get<std::string>() != entry_checksum(e.value, e.source))
      return std::nullopt;
    codegen::gpu::GpuSource source;
    source.text = e.source;
    source.entry = meta.at("entry").get<std::string>();
    source.strategy = meta.at("strategy").get<std::string>();
    source.launch.groups = meta.at("groups").get<int64_t>();
    source.launch.group_size = meta.at("group_size").get<int>();
    source.scratch_bytes = meta.at("scratch_bytes").get<int64_t>();
    source.scratch_zero_bytes = meta.at("scratch_zero_bytes").get<int64_t>();
    if (source.launch.groups < 1 || source.launch.group_size < 1 || source.scratch_bytes < 0 ||
        source.scratch_zero_bytes < 0 || source.scratch_zero_bytes > source.scratch_bytes)
      return std::nullopt;
    return source;
  } catch (const json::exception&) {
    return std::nullopt;
  }
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

cache::KeyParts GpuKernelCache::plan_key(const std::string& structure, const std::string& fuser,
                                         const std::string& autotune) const {
  return cache::KeyParts{{{"graph", cache::KeyParts{{{"structure", structure}}}.digest()},
                          {"fuser", fuser},
                          {"target", backend_.binary_kind()},
                          {"device", backend_.fingerprint()},
                          {"codegen", codegen::gpu::kGpuCodegenVersion},
                          {"schema", kSchema},
                          {"check", std::string(codegen::check_mode_name(check_))},
                          {"autotune", autotune}}};
}

// The stored entry: the binary as value, the generated source as source, the launch shape and a
// checksum of both in the metadata.
std::shared_ptr<GpuKernel> GpuKernelCache::load_entry(cache::Entry entry) {
  std::optional<codegen::gpu::GpuSource> source = stored_source(entry, backend_.binary_kind());
  if (!source) return nullptr;  // a stale or damaged entry: rebuild
  auto program = backend_.load(*source, entry.value);
  if (!program) return nullptr;
  auto k = std::make_shared<GpuKernel>();
  k->source = std::move(*source);
  k->binary = std::move(entry.value);
  k->program = std::move(*program);
  return k;
}

std::shared_ptr<GpuKernel> GpuKernelCache::from_store(const cache::KeyParts& key) {
  std::optional<cache::Entry> e = store_->get(cache::Table::kernels, key);
  return e ? load_entry(std::move(*e)) : nullptr;
}

std::shared_ptr<const GpuKernel> GpuKernelCache::load(const std::string& digest) {
  if (!store_) return nullptr;
  std::optional<cache::Entry> e = store_->show(digest);
  if (!e || e->table != cache::Table::kernels) return nullptr;
  return load_entry(std::move(*e));
}

bool GpuKernelCache::has_entry(const std::string& digest) const {
  if (!store_) return false;
  std::optional<cache::Entry> e = store_->show(digest);
  return e && e->table == cache::Table::kernels && stored_source(*e, backend_.binary_kind());
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
                    {"scratch_bytes", k.source.scratch_bytes},
                    {"scratch_zero_bytes", k.source.scratch_zero_bytes},
                    {"binary", backend_.binary_kind()},
                    {"compile_ms", k.compile_ms},
                    {"checksum", entry_checksum(k.binary, k.source.text)}}
                   .dump();
  store_->put(cache::Table::kernels, key, e);
}

bool GpuKernelCache::contains(const kir::Kernel& kernel, const codegen::TuneParams& params) const {
  return has_entry(key(kernel, params).digest());
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
    if (auto k = from_store(*disk_key)) {
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
