// cache_entry_problem: each table's entries checked by the reader that uses them.
#include "runtime/entry_check.h"

#include <nlohmann/json.hpp>

#include "autotune/tune_decision.h"
#include "runtime/cpu_target.h"
#include "runtime/gpu_target.h"
#include "runtime/measured_rates.h"
#include "runtime/plan_record.h"

namespace kiln::runtime {

namespace {

std::string kernel_problem(const cache::Entry& e) {
  const auto meta = nlohmann::json::parse(e.metadata, nullptr, /*allow_exceptions=*/false);
  if (!meta.is_object()) return "its metadata is not a JSON object";
  // A GPU entry names its binary's kind; a cpu entry its symbol.
  if (meta.contains("binary")) {
    auto gpu = read_gpu_entry(e, "");
    return gpu ? "" : gpu.error().message;
  }
  auto cpu = read_cpu_entry(e);
  return cpu ? "" : cpu.error().message;
}

std::string autotune_problem(const cache::Entry& e) {
  if (!e.parts.empty() && e.parts.front().first == "rates")
    return rates_from_entry(e) ? "" : "it does not hold three positive, finite rates";
  if (!e.parts.empty() && e.parts.front().first == "sized")
    return ratio_from_entry(e) ? "" : "it does not hold a positive, finite time ratio";
  const auto j = nlohmann::json::parse(e.value.begin(), e.value.end(), nullptr, /*allow_exceptions=*/false);
  auto decision = autotune::TuneDecision::from_json(j);
  return decision ? "" : "its decision does not parse: " + decision.error().message;
}

}  // namespace

std::string cache_entry_problem(const cache::Entry& entry) {
  switch (entry.table) {
    case cache::Table::plans: {
      if (!entry.parts.empty() && entry.parts.front().first == "family") {
        auto templates = decode_template_record(entry.value);
        return templates ? "" : "its template record is unusable: " + templates.error().message;
      }
      auto plan = plan_from_entry(entry);
      return plan ? "" : "its plan record is unusable: " + plan.error().message;
    }
    case cache::Table::kernels:
      return kernel_problem(entry);
    case cache::Table::autotune:
      return autotune_problem(entry);
  }
  return "an entry of no table";
}

}  // namespace kiln::runtime
