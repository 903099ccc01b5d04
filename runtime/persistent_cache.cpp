// PersistentCache: key parts, kernel entries (object code + LLVM IR + metadata), and plan records
// (runtime/plan_record.h) whose kernels are linked from their object code by digest.
#include "runtime/persistent_cache.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "runtime/plan_record.h"

namespace kiln::runtime {

namespace {
using nlohmann::json;

// Bumped when the key parts change meaning (the plan record has its own version).
constexpr const char* kSchema = "1";

// Object code is checked against this before linking: flipped bytes inside machine code would
// link and run wrong code, and nothing else catches them.
std::string object_checksum(const std::vector<uint8_t>& object) {
  return cache::KeyParts{{{"object", std::string(object.begin(), object.end())}}}.digest();
}

// The artifact of a kernel entry: its object code linked, when the entry is intact.
Expected<std::shared_ptr<const codegen::CpuArtifact>> link_entry(codegen::CpuBackend& backend,
                                                                 const cache::Entry& e) {
  json meta = json::parse(e.metadata, nullptr, /*allow_exceptions=*/false);
  if (!meta.is_object() || !meta.contains("symbol") || !meta.contains("outer_extent") ||
      !meta.contains("checksum"))
    return make_error("kernel entry without its metadata");
  if (meta["checksum"].get<std::string>() != object_checksum(e.value))
    return make_error("kernel entry whose object code does not match its checksum");
  auto loaded = backend.load(e.value, meta["symbol"].get<std::string>(),
                             meta["outer_extent"].get<int64_t>());
  if (!loaded) return std::unexpected(loaded.error());
  auto artifact = std::make_shared<codegen::CpuArtifact>(**loaded);
  artifact->llvm_ir = e.source;
  return std::shared_ptr<const codegen::CpuArtifact>(std::move(artifact));
}

}  // namespace

PersistentCache::PersistentCache(std::unique_ptr<cache::Store> store, codegen::CpuBackend& backend)
    : store_(std::move(store)), backend_(backend) {}

std::vector<std::pair<std::string, std::string>> PersistentCache::target_parts() const {
  return {{"target", "cpu"},
          {"cpu", backend_.cpu_name()},
          {"features", backend_.cpu_features()},
          {"llvm", backend_.llvm_version()},
          {"codegen", codegen::CpuBackend::kCodegenVersion},
          {"schema", kSchema}};
}

cache::KeyParts PersistentCache::kernel_key(const kir::Kernel& kernel,
                                            const codegen::TuneParams& params,
                                            codegen::CheckMode check) const {
  cache::KeyParts k{{{"kernel", kir::print_kernel(kernel, /*with_labels=*/false)},
                     {"tune", params.str()}}};
  for (auto& p : target_parts()) k.parts.push_back(std::move(p));
  k.parts.emplace_back("check", std::string(codegen::check_mode_name(check)));
  return k;
}

cache::KeyParts PersistentCache::plan_key(const std::string& structure,
                                          const std::string& fuser) const {
  cache::KeyParts k{{{"graph", cache::KeyParts{{{"structure", structure}}}.digest()},
                     {"fuser", fuser}}};
  for (auto& p : target_parts()) k.parts.push_back(std::move(p));
  return k;
}

std::shared_ptr<const codegen::CpuArtifact> PersistentCache::load_kernel(const cache::KeyParts& key) {
  std::optional<cache::Entry> e = store_->get(cache::Table::kernels, key);
  if (!e) return nullptr;
  auto linked = link_entry(backend_, *e);
  return linked ? *linked : nullptr;  // a damaged entry: recompile (and overwrite it)
}

void PersistentCache::store_kernel(const cache::KeyParts& key, const codegen::CpuArtifact& a) {
  if (a.object.empty() || store_->read_only()) return;
  json meta = {{"symbol", a.symbol}, {"outer_extent", a.outer_extent}, {"compile_ms", a.compile_ms},
               {"checksum", object_checksum(a.object)}};
  cache::Entry e;
  e.value = a.object;
  e.source = a.llvm_ir;
  e.metadata = meta.dump();
  store_->put(cache::Table::kernels, key, e);
}

std::shared_ptr<Plan> PersistentCache::load_plan(const cache::KeyParts& key) {
  std::optional<cache::Entry> e = store_->get(cache::Table::plans, key);
  if (!e) return nullptr;
  std::optional<Plan> record = plan_from_entry(*e);
  if (!record) return nullptr;  // a damaged record or one of an incompatible writer: rebuild
  auto plan = std::make_shared<Plan>(std::move(*record));
  std::unordered_map<std::string, std::shared_ptr<const codegen::CpuArtifact>> linked;  // by digest
  for (PlanStep& step : plan->steps) {
    auto& artifact = linked[step.kernel_digest];  // steps running the same kernel share one link
    if (!artifact) {
      std::optional<cache::Entry> k = store_->show(step.kernel_digest);
      if (!k) return nullptr;  // a kernel was evicted: rebuild the plan
      auto loaded = link_entry(backend_, *k);
      if (!loaded) return nullptr;
      artifact = *loaded;
    }
    step.artifact = artifact;
  }
  plan->loaded = static_cast<int>(linked.size());
  return plan;
}

void PersistentCache::store_plan(const cache::KeyParts& key, const Plan& plan,
                                 const std::vector<std::string>& kernel_digests) {
  if (store_->read_only()) return;
  if (std::optional<cache::Entry> e = plan_record_entry(plan, kernel_digests))
    store_->put(cache::Table::plans, key, *e);
}

std::string PersistentCache::explain_miss(cache::Table table, const cache::KeyParts& key) {
  cache::Explanation x = store_->explain(table, key);
  if (x.hit) return "";
  std::string text = x.text();
  constexpr std::string_view kPrefix = "miss: ";
  return text.starts_with(kPrefix) ? text.substr(kPrefix.size()) : text;
}

}  // namespace kiln::runtime
