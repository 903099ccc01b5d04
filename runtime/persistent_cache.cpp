// PersistentCache: key parts, kernel entries (object code + LLVM IR + metadata) and plan records
// (the wiring of a Plan plus the digest of each step's kernel), encoded as CBOR.
#include "runtime/persistent_cache.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unordered_map>

namespace kiln::runtime {

namespace {
using nlohmann::json;

// Bumped when the plan record or the key parts change meaning.
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

json kernel_shape_json(const kir::Kernel& k) {
  json params = json::array();
  for (const kir::Param& p : k.params)
    params.push_back({{"dtype", std::string(ir::dtype_name(p.dtype))}, {"shape", p.shape},
                      {"output", p.output}, {"label", p.label}});
  return {{"name", k.name}, {"domain", k.domain}, {"params", params}};
}

// The part of a kernel the executor needs (names, params, domain): a run never reads the body.
std::optional<kir::Kernel> kernel_shape_from_json(const json& j) {
  kir::Kernel k;
  k.name = j.at("name").get<std::string>();
  k.domain = j.at("domain").get<std::vector<int64_t>>();
  for (const json& p : j.at("params")) {
    auto dt = ir::parse_dtype(p.at("dtype").get<std::string>());
    if (!dt) return std::nullopt;
    k.params.push_back(kir::Param{*dt, p.at("shape").get<ir::Shape>(), p.at("output").get<bool>(),
                                  p.at("label").get<std::string>()});
  }
  k.arena = std::make_shared<kir::ExprArena>();
  return k;
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
  json j = json::from_cbor(e->value, true, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return nullptr;
  auto plan = std::make_shared<Plan>();
  std::unordered_map<std::string, std::shared_ptr<const codegen::CpuArtifact>> linked;  // by digest
  try {
    for (const json& s : j.at("slots")) {
      auto dt = ir::parse_dtype(s.at("dtype").get<std::string>());
      if (!dt) return nullptr;
      plan->slots.push_back(Slot{*dt, s.at("shape").get<ir::Shape>(), s.at("input").get<int>()});
    }
    for (const json& s : j.at("steps")) {
      PlanStep step;
      auto kernel = kernel_shape_from_json(s.at("kernel"));
      if (!kernel) return nullptr;
      std::string digest = s.at("digest").get<std::string>();
      auto& artifact = linked[digest];  // steps running the same kernel share one link
      if (!artifact) {
        std::optional<cache::Entry> k = store_->show(digest);
        if (!k) return nullptr;  // a kernel was evicted: rebuild the plan
        auto loaded = link_entry(backend_, *k);
        if (!loaded) return nullptr;
        artifact = *loaded;
      }
      step.kernel = std::move(*kernel);
      step.kernel_digest = digest;
      step.artifact = artifact;
      step.args = s.at("args").get<std::vector<int>>();
      step.release_after = s.at("release_after").get<std::vector<int>>();
      step.values = s.at("values").get<std::vector<std::string>>();
      step.num_ops = s.at("num_ops").get<int>();
      plan->steps.push_back(std::move(step));
    }
    plan->output_slots = j.at("outputs").get<std::vector<int>>();
    plan->fuser = j.at("fuser").get<std::string>();
    plan->loaded = static_cast<int>(linked.size());
  } catch (const json::exception&) {
    return nullptr;  // a record from an incompatible writer: rebuild
  }
  return plan;
}

void PersistentCache::store_plan(const cache::KeyParts& key, const Plan& plan,
                                 const std::vector<std::string>& kernel_digests) {
  if (store_->read_only() || kernel_digests.size() != plan.steps.size()) return;
  json slots = json::array(), steps = json::array();
  for (const Slot& s : plan.slots)
    slots.push_back({{"dtype", std::string(ir::dtype_name(s.dtype))}, {"shape", s.shape},
                     {"input", s.input_index}});
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    steps.push_back({{"kernel", kernel_shape_json(s.kernel)}, {"digest", kernel_digests[i]},
                     {"args", s.args}, {"release_after", s.release_after}, {"values", s.values},
                     {"num_ops", s.num_ops}});
  }
  json j = {{"slots", slots}, {"steps", steps}, {"outputs", plan.output_slots}, {"fuser", plan.fuser}};
  cache::Entry e;
  e.value = json::to_cbor(j);
  e.metadata = json{{"kernels", plan.steps.size()}}.dump();
  store_->put(cache::Table::plans, key, e);
}

std::string PersistentCache::explain_miss(cache::Table table, const cache::KeyParts& key) {
  cache::Explanation x = store_->explain(table, key);
  if (x.hit) return "";
  std::string text = x.text();
  constexpr std::string_view kPrefix = "miss: ";
  return text.starts_with(kPrefix) ? text.substr(kPrefix.size()) : text;
}

}  // namespace kiln::runtime
