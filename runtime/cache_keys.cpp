// The parts of kernel, plan and autotune keys.
#include "runtime/cache_keys.h"

namespace kiln::runtime {

namespace {
void add_identity(cache::KeyParts& key, const Target& target) {
  for (auto& part : target.identity()) key.parts.push_back(std::move(part));
}
}  // namespace

cache::KeyParts kernel_key(const Target& target, const kir::Kernel& kernel,
                           const codegen::TuneParams& params, codegen::CheckMode check) {
  return kernel_key(target, kir::print_kernel(kernel, /*with_labels=*/false), params, check);
}

cache::KeyParts kernel_key(const Target& target, std::string kernel_text,
                           const codegen::TuneParams& params, codegen::CheckMode check) {
  cache::KeyParts key{{{"kernel", std::move(kernel_text)}, {"tune", params.str()}}};
  add_identity(key, target);
  key.parts.emplace_back("schema", kCacheKeySchema);
  key.parts.emplace_back("check", std::string(codegen::check_mode_name(check)));
  return key;
}

namespace {
// A plans-table key: `first` names what `structure` is the structure of.
cache::KeyParts planned_key(const char* first, const Target& target, const std::string& structure,
                            const std::string& fuser, codegen::CheckMode check,
                            const std::string& autotune) {
  cache::KeyParts key{
      {{first, cache::KeyParts{{{"structure", structure}}}.digest()}, {"fuser", fuser}}};
  add_identity(key, target);
  key.parts.emplace_back("schema", kCacheKeySchema);
  key.parts.emplace_back("planner", kPlannerVersion);
  key.parts.emplace_back("check", std::string(codegen::check_mode_name(check)));
  key.parts.emplace_back("autotune", autotune);
  return key;
}
}  // namespace

cache::KeyParts plan_key(const Target& target, const std::string& structure,
                         const std::string& fuser, codegen::CheckMode check,
                         const std::string& autotune) {
  return planned_key("graph", target, structure, fuser, check, autotune);
}

cache::KeyParts template_key(const Target& target, const std::string& family,
                             const std::string& fuser, codegen::CheckMode check,
                             const std::string& autotune) {
  return planned_key("family", target, family, fuser, check, autotune);
}

cache::KeyParts autotune_key(const Target& target, const kir::Kernel& kernel, autotune::Level level) {
  cache::KeyParts key{{{"kernel", kir::print_kernel(kernel, /*with_labels=*/false)}}};
  add_identity(key, target);
  key.parts.emplace_back("autotune", std::string(autotune::level_name(level)));
  key.parts.emplace_back("tuner", kTunerVersion);
  return key;
}

cache::KeyParts sizes_decision_key(const Target& target, const kir::Kernel& general) {
  cache::KeyParts key{{{"sized", kir::print_kernel(general, /*with_labels=*/false)}}};
  add_identity(key, target);
  key.parts.emplace_back("decision", "kiln-sized-1");
  return key;
}

cache::KeyParts rates_key(const Target& target) {
  cache::KeyParts key{{{"rates", "kiln-rates-5"}}};
  add_identity(key, target);
  key.parts.emplace_back("setup", target.rates_setup());
  return key;
}

}  // namespace kiln::runtime
