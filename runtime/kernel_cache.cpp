// KernelCache: memory, then the persistent store (by key, or by digest for plan records), then
// the target's compiler; what is compiled is stored.
#include "runtime/kernel_cache.h"

#include <fmt/format.h>

#include <algorithm>

#include "runtime/cache_keys.h"

namespace kiln::runtime {

std::string explain_miss(cache::Store& store, cache::Table table, const cache::KeyParts& key) {
  cache::Explanation x = store.explain(table, key);
  // The entry is there and intact, but does not hold what this target reads (warned about).
  if (x.hit) return "the stored entry is not usable by this target";
  std::string text = x.text();
  constexpr std::string_view kPrefix = "miss: ";
  return text.starts_with(kPrefix) ? text.substr(kPrefix.size()) : text;
}

cache::KeyParts KernelCache::key(const kir::Kernel& kernel, const codegen::TuneParams& params) const {
  return kernel_key(target_, kernel, params, check_);
}

void KernelCache::put(const cache::KeyParts& key, const Artifact& artifact) {
  if (!store_ || store_->read_only()) return;
  if (std::optional<cache::Entry> e = target_.to_entry(artifact))
    store_->put(cache::Table::kernels, key, *e);
}

Expected<KernelLookup> KernelCache::get(const kir::Kernel& kernel, const kir::KernelFacts& facts,
                                        const codegen::TuneParams& params,
                                        const std::string* kernel_text) {
  // A kernel of hundreds of ops prints to tens of KB: once per lookup, for both keys.
  const std::string printed =
      kernel_text ? std::string() : kir::print_kernel(kernel, /*with_labels=*/false);
  const std::string& canonical = kernel_text ? *kernel_text : printed;
  const std::string text = canonical + "\n" + params.str();
  {
    std::lock_guard lock(mu_);
    if (const KernelLookup* kept = kernels_.find(text)) {
      KernelLookup hit = *kept;
      hit.source = KernelLookup::Source::memory;
      hit.miss_reason.clear();  // reported when it was first looked up
      return bound(kernel, std::move(hit));
    }
  }
  KernelLookup found;
  std::optional<cache::KeyParts> disk_key;
  if (store_) {
    disk_key = kernel_key(target_, canonical, params, check_);
    found.digest = disk_key->digest();
    if (std::optional<cache::Entry> e = store_->get(cache::Table::kernels, *disk_key))
      found.artifact = usable(*e, load_);
    if (found.artifact) {
      found.source = KernelLookup::Source::disk;
    } else if (explain_) {
      found.miss_reason = explain_miss(*store_, cache::Table::kernels, *disk_key);
    }
  }
  if (!found.artifact) {
    auto compiled = target_.compile(kernel, facts, params, check_, load_);
    if (!compiled) return std::unexpected(compiled.error());
    found.artifact = std::move(*compiled);
    found.source = KernelLookup::Source::compiled;
    if (disk_key) put(*disk_key, *found.artifact);  // overwrites a damaged entry
  }
  // Destroyed after the lock is let go (its JIT code goes with the last holder).
  std::optional<KernelLookup> evicted;
  std::lock_guard lock(mu_);
  // Two lookups that compiled the same kernel at once keep the first, by text and by digest.
  KernelLookup result = kernels_.put(text, found, evicted);
  if (!result.digest.empty()) {
    std::weak_ptr<const Artifact>& by_digest = by_digest_[result.digest];
    if (by_digest.expired()) by_digest = result.artifact;
  }
  if (evicted) std::erase_if(by_digest_, [](const auto& entry) { return entry.second.expired(); });
  return bound(kernel, std::move(result));
}

Expected<KernelLookup> KernelCache::bound(const kir::Kernel& kernel, KernelLookup lookup) const {
  if (!kernel.dynamic_outer && !kernel.has_sizes()) return lookup;
  auto artifact = bind(*lookup.artifact, kernel);
  if (!artifact) return std::unexpected(artifact.error());
  lookup.artifact = std::move(*artifact);
  return lookup;
}

Expected<std::shared_ptr<const Artifact>> KernelCache::bind(const Artifact& artifact,
                                                            const kir::Kernel& instance) const {
  if (instance.has_sizes()) {
    std::shared_ptr<const Artifact> out = target_.with_sizes(artifact, instance);
    if (!out)
      return make_error(fmt::format("{} cannot run kernel {} with {} run-time sizes",
                                    target_.name(), instance.name, instance.sizes.size()));
    return out;
  }
  std::shared_ptr<const Artifact> out =
      target_.with_outer_extent(artifact, instance.outer_extent());
  if (!out) return make_error(fmt::format("{} cannot run a dynamic kernel", target_.name()));
  return out;
}

Expected<bool> KernelCache::warm(const kir::Kernel& kernel, const kir::KernelFacts& facts,
                                 const codegen::TuneParams& params) {
  if (!store_) return make_error("no persistent cache to warm");
  const cache::KeyParts k = key(kernel, params);
  if (has_entry(k.digest())) return false;
  auto compiled = target_.compile(kernel, facts, params, check_, /*load=*/false);
  if (!compiled) return std::unexpected(compiled.error());
  put(k, **compiled);
  return true;
}

std::shared_ptr<const Artifact> KernelCache::load(const std::string& digest) {
  {
    std::lock_guard lock(mu_);
    if (auto it = by_digest_.find(digest); it != by_digest_.end())
      if (std::shared_ptr<const Artifact> kept = it->second.lock()) return kept;
  }
  if (!store_) return nullptr;
  std::optional<cache::Entry> e = store_->show(digest);
  if (!e || e->table != cache::Table::kernels) return nullptr;
  std::shared_ptr<const Artifact> artifact = usable(*e, load_);
  if (!artifact) return nullptr;
  std::lock_guard lock(mu_);
  if (by_digest_.size() >= kernels_.max())
    std::erase_if(by_digest_, [](const auto& entry) { return entry.second.expired(); });
  std::weak_ptr<const Artifact>& kept = by_digest_[digest];
  if (std::shared_ptr<const Artifact> first = kept.lock()) return first;  // loaded at once twice
  kept = artifact;
  return artifact;
}

bool KernelCache::has_entry(const std::string& digest) const {
  if (!store_) return false;
  std::optional<cache::Entry> e = store_->show(digest);
  return e && e->table == cache::Table::kernels && usable(*e, /*load=*/false);
}

std::shared_ptr<const Artifact> KernelCache::usable(const cache::Entry& e, bool load) const {
  auto artifact = target_.from_entry(e, load);
  if (artifact) return *artifact;
  store_->warn(fmt::format("cache {}: kernels entry {} is unusable ({}); it is compiled again",
                           store_->path(), e.key, artifact.error().message));
  return nullptr;
}

}  // namespace kiln::runtime
