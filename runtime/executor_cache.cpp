// The executor's persistent side: plan records (stored and read back with their kernels linked by
// digest), `kiln warm` and what a run would read from the cache (`kiln warm --check`, bundles).
#include <fmt/format.h>

#include <unordered_set>

#include "runtime/cache_keys.h"
#include "runtime/executor.h"
#include "runtime/measured_rates.h"
#include "runtime/plan_record.h"
#include "runtime/planner.h"

namespace kiln::runtime {

std::shared_ptr<Plan> Executor::stored_plan(const cache::KeyParts& disk_key, const StructuralKey& key,
                                            const std::vector<const ir::Node*>& outputs, bool load) {
  // A use (a hit) only when the plan is run; looking for --check or warm is not one.
  std::optional<cache::Entry> e = load ? store_->get(cache::Table::plans, disk_key) : store_->show(disk_key.digest());
  if (!e || e->table != cache::Table::plans) return nullptr;
  // A stored plan is untrusted input: it must decode to a consistent wiring that fits this graph.
  Expected<Plan> record = plan_from_entry(*e);
  Expected<void> fits = record ? check_plan_fits(*record, key.inputs, outputs) : Expected<void>{};
  if (!record || !fits) {
    store_->warn(fmt::format("cache {}: plans entry {} is unusable ({}); it is rebuilt", store_->path(),
                             e->key, (!record ? record.error() : fits.error()).message));
    return nullptr;
  }
  auto plan = std::make_shared<Plan>(std::move(*record));
  std::unordered_set<std::string> distinct;
  for (PlanStep& step : plan->steps) {
    distinct.insert(step.kernel_digest);
    if (!load) {
      if (!kernels_.has_entry(step.kernel_digest)) return nullptr;  // evicted or damaged: rebuild
    } else if (!(step.artifact = kernels_.load(step.kernel_digest))) {
      return nullptr;
    } else if (step.kernel.dynamic_outer || step.kernel.has_sizes()) {
      // The stored kernel serves every size: bound to this plan's (refused if it does not).
      auto bound = kernels_.bind(*step.artifact, step.kernel);
      if (!bound) {
        store_->warn(fmt::format("cache {}: plans entry {} is unusable (step {}: {}); it is rebuilt",
                                 store_->path(), e->key, step.kernel.name, bound.error().message));
        return nullptr;
      }
      step.artifact = std::move(*bound);
    }
  }
  plan->loaded = static_cast<int>(distinct.size());
  return plan;
}

void Executor::store_plan(const cache::KeyParts& key, const Plan& plan) {
  if (!store_ || store_->read_only()) return;
  std::vector<std::string> digests;
  for (const PlanStep& step : plan.steps) digests.push_back(step.kernel_digest);
  if (std::optional<cache::Entry> e = plan_record_entry(plan, digests))
    store_->put(cache::Table::plans, key, *e);
}

Expected<Executor::Warmed> Executor::warm(ir::Graph& g, const std::vector<const ir::Node*>& outputs) {
  if (!store_) return make_error(name_ + ": no persistent cache to warm");
  const StructuralKey key = structural_key(outputs);
  const cache::KeyParts disk_key = stored_plan_key(key);
  const bool family = warms_symbolic(key.inputs);
  if (!family && stored_plan(disk_key, key, outputs, /*load=*/false)) return Warmed{};
  // A marked graph's kernels as its run makes them (tracked: the inner sizes note_sizes met are
  // taken at run time), so a run at another size finds them.
  auto plan = lower(g, outputs, key.inputs, /*track=*/family);
  if (!plan) return std::unexpected(plan.error());
  Warmed done;
  for (PlanStep& step : (*plan)->steps) {
    const codegen::TuneParams params = schedule(step.kernel, &done.tuned);
    auto compiled = kernels_.warm(step.kernel, *step.facts, params);
    if (!compiled)
      return make_error(fmt::format("{}: kernel {}: {}", name_, step.kernel.name, compiled.error().message));
    done.compiled += *compiled ? 1 : 0;
    step.kernel_digest = kernels_.key(step.kernel, params).digest();
  }
  store_plan(disk_key, **plan);
  if (family) {
    // What points into `g` goes, as in get_plan.
    (*plan)->optimized_outputs.clear();
    (*plan)->fusion.groups.clear();
    (*plan)->fusion.reasons.clear();
    done.symbolic = note_built(structural_family(outputs), *plan);
  }
  return done;
}

Expected<void> Executor::note_sizes(ir::Graph& g, const std::vector<const ir::Node*>& outputs) {
  if (options_.shape_policy == ShapePolicy::static_) return {};
  auto plan = lower(g, outputs, structural_key(outputs).inputs, /*track=*/true, /*note=*/true);
  if (!plan) return std::unexpected(plan.error());
  return {};
}

codegen::TuneParams Executor::stored_schedule(const kir::Kernel& kernel,
                                              std::vector<CacheEntryRef>& entries) {
  if (!decisions_) return {};
  const cache::KeyParts key = autotune_key(*target_, kernel, options_.autotune_level);
  const std::optional<codegen::TuneParams> won = stored_winner(*tune_store(), key);
  const std::string digest = key.digest();
  entries.push_back({cache::Table::autotune, digest, fmt::format("autotune {} {}", kernel.name, digest),
                     won.has_value()});
  return won.value_or(codegen::TuneParams{});
}

Expected<std::vector<CacheEntryRef>> Executor::cache_entries(ir::Graph& g,
                                                             const std::vector<const ir::Node*>& outputs) {
  if (!store_) return make_error(name_ + ": no persistent cache to check");
  std::vector<CacheEntryRef> entries;
  std::unordered_set<std::string> listed;  // steps running the same kernel read one entry
  const auto add = [&](CacheEntryRef e) {
    if (listed.insert(e.digest).second) entries.push_back(std::move(e));
  };
  const StructuralKey key = structural_key(outputs);
  const cache::KeyParts disk_key = stored_plan_key(key);
  const std::string plan_digest = disk_key.digest();
  // A plan's key holds the rates it was planned with: the measurement a run plans with is read too.
  if (target_->plans_with_measured_rates() &&
      (target_->host_memory() ? options_.cpu_rates : options_.gpu_rates) == RatesSource::measured) {
    const std::string digest = rates_key(*target_).digest();
    std::optional<cache::Entry> kept = tune_store()->show(digest);
    add({cache::Table::autotune, digest, "rates " + name_,
         kept && kept->table == cache::Table::autotune && rates_from_entry(*kept).has_value()});
  }
  // A graph with a marked input: its family's symbolic plans and their kernels where stored (a run
  // at another size reads them), never a miss (a family may have none: a size in an index).
  if (warms_symbolic(key.inputs)) {
    const std::string digest = stored_template_key(structural_family(outputs)).digest();
    if (std::optional<cache::Entry> e = store_->show(digest); e && e->table == cache::Table::plans)
      if (auto templates = decode_template_record(e->value)) {
        add({cache::Table::plans, digest, "symbolic plan " + digest, true});
        for (const PlanTemplate& t : *templates)
          for (const PlanStep& step : t.base->steps)
            if (kernels_.has_entry(step.kernel_digest))
              add({cache::Table::kernels, step.kernel_digest,
                   fmt::format("kernel {} {}", step.kernel.name, step.kernel_digest), true});
      }
  }
  // A stored plan whose kernels are all intact names every entry a run reads (and no decision).
  if (std::shared_ptr<Plan> stored = stored_plan(disk_key, key, outputs, /*load=*/false)) {
    add({cache::Table::plans, plan_digest, "plan " + plan_digest, true});
    for (const PlanStep& step : stored->steps)
      add({cache::Table::kernels, step.kernel_digest,
           fmt::format("kernel {} {}", step.kernel.name, step.kernel_digest), true});
    return entries;
  }
  add({cache::Table::plans, plan_digest, "plan " + plan_digest, false});
  auto plan = lower(g, outputs, key.inputs);
  if (!plan) return std::unexpected(plan.error());
  for (const PlanStep& step : (*plan)->steps) {
    std::vector<CacheEntryRef> decision;
    const codegen::TuneParams params = stored_schedule(step.kernel, decision);
    for (CacheEntryRef& d : decision) add(std::move(d));
    const std::string digest = kernels_.key(step.kernel, params).digest();
    add({cache::Table::kernels, digest, fmt::format("kernel {} {}", step.kernel.name, digest),
         kernels_.has_entry(digest)});
  }
  return entries;
}

Expected<std::vector<std::string>> Executor::cache_misses(ir::Graph& g,
                                                          const std::vector<const ir::Node*>& outputs) {
  auto entries = cache_entries(g, outputs);
  if (!entries) return std::unexpected(entries.error());
  return missing_entries(*entries);
}

}  // namespace kiln::runtime
