// Executor: options, the fuser and its cost model, plans (this process's, stored, or built), the
// stream pool, and execute().
#include "runtime/executor.h"

#include <sys/resource.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <bit>
#include <chrono>
#include <iterator>
#include <type_traits>
#include <unordered_set>
#include <variant>

#include "autotune/kernel_buffers.h"
#include "autotune/roofline.h"
#include "ir/kernel_facts.h"
#include "ir/kernel_sizes.h"
#include "ir/kg_ops.h"
#include "runtime/cache_keys.h"
#include "runtime/cpu_target.h"
#include "runtime/dump_writer.h"
#include "runtime/gpu_target.h"
#include "runtime/measured_rates.h"
#include "runtime/plan_record.h"
#include "runtime/planner.h"

namespace kiln::runtime {

namespace {
double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The process's minor page faults so far (every thread's), or -1 when the OS does not say.
int64_t minor_page_faults() {
  rusage u{};
  return getrusage(RUSAGE_SELF, &u) == 0 ? static_cast<int64_t>(u.ru_minflt) : -1;
}

// Whether the step's kernel is a contraction (a matmul or an attention), whose achieved flops
// compare with the device's contraction rate: from its recorded facts, else analyzed here (a plan
// read back from its record keeps none; a kernel without its body there counts as none).
bool is_contraction(const PlanStep& step) {
  if (step.facts) return step.facts->matmul.has_value() || step.facts->attention.has_value();
  const kir::KernelFacts facts = kir::analyze_kernel(step.kernel);
  return facts.matmul.has_value() || facts.attention.has_value();
}
}  // namespace

Expected<std::unique_ptr<Executor>> Executor::create(std::unique_ptr<Target> target,
                                                     DeviceOptions options) {
  std::unique_ptr<cache::Store> store = open_cache_store(options);
  return std::unique_ptr<Executor>(new Executor(std::move(target), std::move(options), std::move(store)));
}

Executor::Executor(std::unique_ptr<Target> target, DeviceOptions options,
                   std::unique_ptr<cache::Store> store)
    : target_(std::move(target)),
      options_(std::move(options)),
      name_(target_->name()),
      store_(std::move(store)),
      kernels_(*target_, store_.get(), options_.explain_misses, options_.check_mode,
               target_->can_run()),
      pool_(BufferPool::create(options_.persistent_memory,
                               target_->host_memory() ? name_ : "host memory of " + name_)) {
  // Opened whether or not this process tunes: the measured rates are kept there, and the plan
  // keys depend on them, so a process that does not tune plans with the rates a tuning one kept
  // and finds the plans it stored.
  if (!options_.autotune_cache_path.empty() && options_.autotune_cache_path != options_.cache_path) {
    DeviceOptions tune = options_;
    tune.cache_path = options_.autotune_cache_path;
    tune_store_ = open_cache_store(tune);
  }
  if (options_.autotune) {
    decisions_ = std::make_unique<TuneDecisions>(tune_store(), options_.logger,
                                                 std::string(autotune::level_name(options_.autotune_level)));
  }
  if (options_.logger && options_.logger->enabled(LogComponent::memory, LogLevel::verbose))
    pool_->set_fresh_allocation_observer([logger = options_.logger](size_t bytes) {
      logger->log(LogComponent::memory, LogLevel::verbose,
                  fmt::format("allocated a new {} byte buffer", bytes));
    });
}

// Streams, artifacts and device memory go before the target that made them (members are
// destroyed after this body, the target last).
Executor::~Executor() {
  persistent_.clear();
  idle_streams_.clear();
  plans_.clear();
  families_.clear();
}

const passes::DeviceRates& Executor::device_rates() {
  std::call_once(rates_once_, [this] {
    // A target with host memory is the cpu.
    const RatesSource source = target_->host_memory() ? options_.cpu_rates : options_.gpu_rates;
    rates_ = target_->reference_rates();
    if (source == RatesSource::reference) return;
    cache::Store* store = tune_store();
    const cache::KeyParts key = rates_key(*target_);
    if (store)
      if (std::optional<cache::Entry> e = store->get(cache::Table::autotune, key))
        if (std::optional<passes::DeviceRates> kept = rates_from_entry(*e)) {
          rates_ = *kept;
          rates_measured_ = true;
          return;
        }
    auto measured = target_->measure_rates();
    if (!measured) {
      fmt::print(stderr, "kiln: warning: measuring the rates of {} failed ({}); using reference rates\n",
                 name_, measured.error().message);
      return;
    }
    rates_ = *measured;
    rates_measured_ = true;
    log(LogComponent::autotune, fmt::format("measured the rates of {}: {}", name_, rates_.str()));
    if (store && !store->read_only()) store->put(cache::Table::autotune, key, rates_entry(rates_));
  });
  return rates_;
}

const passes::Fuser& Executor::fuser() {
  std::call_once(fuser_once_, [this] {
    cost_ = std::make_unique<passes::CostModel>(
        target_->plans_with_measured_rates() ? device_rates() : target_->reference_rates());
    // One binding less than the device allows: a validating kernel binds its error slot too.
    DeviceOptions fusing = options_;
    if (const std::optional<size_t> limit = target_->max_kernel_buffers())
      fusing.beam.max_kernel_buffers =
          std::min(fusing.beam.max_kernel_buffers, std::max<size_t>(*limit, 2) - 1);
    fuser_ = make_fuser(fusing, *cost_);
    fuser_description_ = describe_fuser(fusing, *fuser_, *cost_);
  });
  return *fuser_;
}

const passes::CostModel& Executor::cost_model() {
  fuser();
  return *cost_;
}

cache::KeyParts Executor::stored_plan_key(const StructuralKey& key) {
  return stored_plan_key(key, options_.autotune ? std::string(autotune::level_name(options_.autotune_level))
                                                : "off");
}
cache::KeyParts Executor::stored_plan_key(const StructuralKey& key, const std::string& tuning) {
  return plan_key(*target_, key.key, planned_with(), options_.check_mode, tuning);
}

cache::KeyParts Executor::stored_template_key(const ShapeFamily& family) {
  return template_key(
      *target_, family.key, planned_with(), options_.check_mode,
      options_.autotune ? std::string(autotune::level_name(options_.autotune_level)) : "off");
}

std::string Executor::planned_with() {
  fuser();
  // A plan holds dynamic kernels or not by the shape policy: static and dynamic plans are kept
  // apart (automatic, the default, adds nothing, so its keys are those of before the policy).
  std::string planned = fuser_description_;
  if (options_.shape_policy != ShapePolicy::automatic)
    planned += options_.shape_policy == ShapePolicy::static_ ? " shapes=static" : " shapes=dynamic";
  if (options_.shape_buckets) planned += " buckets";
  return planned;
}

codegen::TuneParams Executor::schedule(const kir::Kernel& kernel, int* tuned) {
  // A kernel the host cannot hold for benchmarking runs with the default schedule, untuned.
  if (!decisions_ || !autotune::fits_on_host(kernel)) return {};
  const autotune::Level level = options_.autotune_level;
  return decisions_->winner(kernel.name, autotune_key(*target_, kernel, level), [&] {
    const passes::DeviceRates& rates = device_rates();
    // No early stop at the memory-bound roofline for a kernel the last-level cache holds while
    // its candidates are timed (Target::cache_resident_bytes): layernorm's 64 MiB on a 480 MiB
    // L3 ran every candidate under its DRAM bound, so the first round's leader (of 1.44 to 1.57
    // ms) was kept, whichever it was.
    const auto resident = static_cast<double>(target_->cache_resident_bytes());
    const bool cached = resident > 0 && autotune::kernel_bytes(kernel) < resident;
    return target_->tune(kernel, level,
                         cached ? 0.0 : autotune::roofline_ms(kernel, rates.bandwidth, rates.compute_rate));
  }, tuned);
}

namespace {
// The smallest power of two at least n (n >= 1).
int64_t bucket_of(int64_t n) {
  return static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(n, 1))));
}
}  // namespace

std::optional<int64_t> Executor::dynamic_choice(const kir::Kernel& kernel,
                                                const kir::KernelFacts& facts, bool marked,
                                                bool track, uint64_t build,
                                                std::vector<std::string>& reasons) {
  const ShapePolicy policy = options_.shape_policy;
  if (policy == ShapePolicy::static_ || kernel.domain.empty()) return std::nullopt;
  const int64_t extent = kernel.outer_extent();
  const bool buckets = options_.shape_buckets || target_->buckets_dynamic_kernels();
  const int64_t bound = buckets ? bucket_of(extent) : 0;
  kir::Kernel general = kernel;
  general.dynamic_outer = true;
  general.dynamic_bound = bound;
  if (!target_->serves_any_outer_extent(general, facts, kernels_.check_mode())) return std::nullopt;
  if (policy == ShapePolicy::dynamic || marked) {
    if (track && takes_inner_sizes(kernel, general, build, reasons)) return std::nullopt;
    return bound;
  }
  if (!track) return std::nullopt;
  // Automatic: specialized at the first size, generalized at the second (of any bucket).
  general.dynamic_bound = 0;
  std::string text = kir::print_kernel(general, /*with_labels=*/false);
  std::lock_guard lock(shapes_mu_);
  auto [it, fresh] = seen_kernels_.emplace(std::move(text), SeenKernel{extent, false, build});
  if (fresh ||
      (!it->second.generalized && (it->second.extent == extent || it->second.build == build)))
    return std::nullopt;
  if (!it->second.generalized) {
    reasons.push_back(fmt::format(
        "{}: outer extent {} (first compiled at {}): dynamic from now on, "
        "one kernel for every extent{}",
        kernel.name, extent, it->second.extent, buckets ? " of a power-of-two bucket" : ""));
    it->second.generalized = true;
  }
  return bound;
}

// Under `dynamic` a kernel is dynamic along its outer axis from its first size, its inner sizes
// compiled in. Where they change (a slice's end that grows a step), the kernel takes them at run
// time instead (sized_choice, whose slots serve the outer extent too): true once a kernel of its
// form met other inner sizes, the kernel met first noted for sized_choice to generalize with.
namespace {
std::string sizes_text(const kir::Kernel& k);
// Where a kernel was first met, when that was note_sizes' lowering: no run had that size.
constexpr const char* kNotedThere = ", where the graph was read larger to find its sizes";
}  // namespace

bool Executor::takes_inner_sizes(const kir::Kernel& kernel, const kir::Kernel& dynamic,
                                 uint64_t build, std::vector<std::string>& reasons) {
  const std::string key = kir::sizes_key(kernel);
  kir::Kernel unbounded = dynamic;
  unbounded.dynamic_bound = 0;
  std::string text = kir::print_kernel(unbounded, /*with_labels=*/false);
  std::lock_guard lock(shapes_mu_);
  if (sized_kernels_.contains(key)) return true;  // met at other inner sizes (or never dynamic)
  auto it = inner_seen_.find(key);
  if (it == inner_seen_.end()) {
    inner_seen_.emplace(key, InnerSeen{std::move(text), kernel, build});
    return false;
  }
  if (it->second.text == text || it->second.build == build) return false;
  // Only where the target runs such a kernel (GPU targets keep inner sizes: the kernel stays
  // dynamic along its outer axis, one per inner size).
  std::optional<kir::Kernel> general = kir::generalize(kernel, it->second.kernel);
  if (!general ||
      !target_->serves_any_sizes(*general, kir::analyze_kernel(*general), kernels_.check_mode())) {
    // The same kernel but for its inner sizes, which the target compiles in (a matrix product's
    // contraction on the cpu; every inner size on a GPU): --stats says why it compiles again.
    if (general)
      if (std::optional<kir::Kernel> first = kir::match_sizes(*general, it->second.kernel))
        reasons.push_back(fmt::format(
            "{}: {} (met at {}{}): dynamic along its outer axis, code of its own at each inner "
            "size ({} runs this kernel at fixed inner sizes only)",
            kernel.name, sizes_text(*general), sizes_text(*first),
            noted_builds_.contains(it->second.build) ? kNotedThere : "", target_->name()));
    it->second = InnerSeen{std::move(text), kernel, build};
    return false;
  }
  sized_kernels_.emplace(key, SizedKernel{it->second.kernel, it->second.build, nullptr, nullptr});
  return true;
}

namespace {
// "size.0 = 8, size.1 = 0.125" (a float slot as its value).
std::string sizes_text(const kir::Kernel& k) {
  std::string out;
  const std::vector<std::string> values = kir::size_values_text(k);
  for (size_t s = 0; s < values.size(); ++s)
    out += fmt::format("{}size.{} = {}", s ? ", " : "", s, values[s]);
  return out;
}
}  // namespace

std::optional<kir::Kernel> Executor::sized_choice(const kir::Kernel& kernel,
                                                  const kir::KernelFacts& facts, bool track,
                                                  bool size_changed, uint64_t build,
                                                  std::vector<std::string>& reasons) {
  if (options_.shape_policy == ShapePolicy::static_ || kernel.dynamic_outer || kernel.has_sizes())
    return std::nullopt;
  const std::string key = kir::sizes_key(kernel);
  std::unique_lock lock(shapes_mu_);
  auto it = sized_kernels_.find(key);
  if (it == sized_kernels_.end()) {
    if (track) {
      SizedKernel first{kernel, build, nullptr, nullptr};
      first.count_build = build;
      first.in_build = 1;
      sized_kernels_.emplace(key, std::move(first));
    }
    return std::nullopt;
  }
  SizedKernel& seen = it->second;
  // Decided already: kept at its sizes, or an instance of the general kernel where its code runs
  // this size as well as this size's own code would (the same rows kept, no streaming stores
  // chosen by size).
  const auto decided = [&]() -> std::optional<std::optional<kir::Kernel>> {
    if (seen.kept) return std::optional<kir::Kernel>();
    if (!seen.general) return std::nullopt;
    std::optional<kir::Kernel> instance = kir::match_sizes(*seen.general, kernel);
    // Not an instance: a number the general kernel keeps differs here (a size that held one
    // value at the two sizes it was made from: the second of two symbols, or an outer extent
    // that the first call and the second reading shared). Undecided: it generalizes again,
    // with that number a slot too.
    if (!instance) return std::nullopt;
    if (target_->serves_sizes_instance(*seen.general_facts, kernel, facts)) return instance;
    return std::optional<kir::Kernel>();
  };
  // Kept at its sizes: every new size compiles its own, until kRetimeAfter of them have (then
  // twice as many, and so on), when the general kernel is timed again, at this size.
  bool retiming = false;
  if (auto d = decided()) {
    if (!seen.kept || !track || ++seen.kept_sizes < seen.retime_at) return *d;
    retiming = true;
  }
  if (!track) return std::nullopt;
  // Met in this build: another kernel of the plan, no size that changed. A few keep their own
  // code; from the kFormsInOneBuild-th on (each step of an unrolled recurrence, at its offset)
  // they generalize, timed as sizes that changed are.
  if (seen.count_build != build) seen.count_build = build, seen.in_build = 0;
  ++seen.in_build;
  if (!retiming && seen.build == build && seen.in_build < kFormsInOneBuild) return std::nullopt;
  // Float constants alone are sizes only where a size changed since `seen.last` was met: kernels
  // of one build that differ in their floats only are a user's constants.
  std::optional<kir::Kernel> general =
      kir::generalize(kernel, seen.last, size_changed && seen.build != build);
  // Generalizing again (no instance of the general kernel): only to a kernel of as many slots at
  // least. Fewer means a slot's number is the same here and in the kernel met first (a size that
  // came back), and the result would serve fewer sizes than the general kernel did: this size
  // compiles its own, and the general kernel stays.
  std::optional<kir::Kernel> first = general ? kir::match_sizes(*general, seen.last) : std::nullopt;
  if (general && seen.general && general->sizes.size() < seen.general->sizes.size()) {
    if (first)
      reasons.push_back(fmt::format(
          "{}: {} (met at {}): code of its own at this size (its general kernel keeps a number "
          "that differs here, and a kernel general in that number only would serve fewer sizes "
          "than the general kernel of {} run-time sizes does)",
          kernel.name, sizes_text(*general), sizes_text(*first), seen.general->sizes.size()));
    return std::nullopt;
  }
  auto general_facts =
      general ? std::make_shared<const kir::KernelFacts>(kir::analyze_kernel(*general)) : nullptr;
  if (!general || !first ||
      !target_->serves_any_sizes(*general, *general_facts, kernels_.check_mode()) ||
      !target_->serves_sizes_instance(*general_facts, kernel, facts)) {
    // The same kernel but for its sizes, whose code the target cannot run at other sizes (a
    // matrix product's contraction, attention's head width on the cpu): --stats says why it
    // compiles again.
    if (general && first && !retiming)
      reasons.push_back(fmt::format(
          "{}: {} (met at {}{}): code of its own at each size ({} runs this kernel at fixed "
          "sizes only)",
          kernel.name, sizes_text(*general), sizes_text(*first),
          noted_builds_.contains(seen.build) ? kNotedThere : "", target_->name()));
    if (!retiming) {  // another pair of sizes may generalize
      seen.last = kernel;
      seen.build = build;
    }
    return std::nullopt;
  }
  // Timing takes milliseconds: other plans' choices go on meanwhile (entries are never erased,
  // so `seen` stays valid). Another realize may have decided for this kernel by then.
  std::string measured;
  lock.unlock();
  std::optional<std::string> kept = keeps_sizes(*general, kernel, retiming, measured);
  lock.lock();
  const bool noted = noted_builds_.contains(seen.build);
  // Another realize decided meanwhile (a timing again finds the kernel kept: its own).
  if (seen.general || (seen.kept && !retiming))
    if (auto d = decided()) return *d;
  const std::string again =
      retiming ? fmt::format(", timed again after {} sizes compiled their own", seen.kept_sizes)
               : "";
  if (kept) {
    seen.retime_at = retiming ? 2 * seen.retime_at : kRetimeAfter;
    reasons.push_back(fmt::format(
        "{}: {} (first met at {}{}){}: {}; every size compiles its own (timed again once {} "
        "sizes have)",
        kernel.name, sizes_text(*general), sizes_text(*first), noted ? kNotedThere : "", again,
        *kept, seen.retime_at));
    seen.kept = true;
    return std::nullopt;
  }
  seen.kept = false;
  reasons.push_back(fmt::format(
      "{}: {} (first met at {}{}){}: run-time sizes from now on, one kernel for every size{}",
      kernel.name, sizes_text(*general), sizes_text(*first), noted ? kNotedThere : "", again,
      measured));
  seen.general = std::make_shared<const kir::Kernel>(*general);
  // A Kernel copy shares its arena, so the facts name the copy's expressions as well.
  seen.general_facts = std::move(general_facts);
  return general;
}

std::optional<std::string> Executor::keeps_sizes(const kir::Kernel& general,
                                                 const kir::Kernel& special, bool retiming,
                                                 std::string& measured) {
  // Under `dynamic` the user asked for run-time sizes; with autotuning off nothing is timed.
  if (options_.shape_policy != ShapePolicy::automatic || !options_.autotune ||
      !autotune::fits_on_host(special))
    return std::nullopt;
  // The ratio another process measured (a timing differs by a few percent from run to run, and
  // a choice that differed would look up kernels that process never stored).
  cache::Store* store = tune_store();
  const cache::KeyParts key = sizes_decision_key(*target_, general);
  std::optional<double> ratio;
  std::string where;
  if (store && !retiming)
    if (std::optional<cache::Entry> e = store->get(cache::Table::autotune, key))
      if (std::optional<double> kept = ratio_from_entry(*e)) {
        ratio = *kept;
        where = ", as stored in the cache";
      }
  if (!ratio) {
    Expected<std::optional<double>> timed = target_->time_ratio(general, special);
    if (!timed)
      return fmt::format("its code with run-time sizes failed against this size's own: {}",
                         timed.error().message);
    if (!*timed) return std::nullopt;
    ratio = **timed;
    if (store && !store->read_only()) store->put(cache::Table::autotune, key, ratio_entry(*ratio));
  }
  const double limit = options_.shape_max_slowdown;
  if (*ratio > limit)
    return fmt::format(
        "kept at its sizes: with run-time sizes it ran {:.2f}x the time of this size's own "
        "code (shapes.max_slowdown {}{})",
        *ratio, limit, where);
  measured = fmt::format(" (timed at {:.2f}x this size's own code{})", *ratio, where);
  return std::nullopt;
}

PlannerOptions::SizesFn Executor::sizes_fn(bool track, bool size_changed, uint64_t build) {
  if (options_.shape_policy == ShapePolicy::static_) return nullptr;
  return [this, track, size_changed, build](const kir::Kernel& k, const kir::KernelFacts& facts,
                                            std::vector<std::string>& reasons) {
    return sized_choice(k, facts, track, size_changed, build, reasons);
  };
}

namespace {
bool any_marked(const std::vector<const ir::Node*>& inputs) {
  return std::ranges::any_of(inputs,
                             [](const ir::Node* n) { return n->attrs.has(ir::AttrKey::dynamic); });
}
}  // namespace

bool Executor::warms_symbolic(const std::vector<const ir::Node*>& inputs) const {
  return options_.shape_policy != ShapePolicy::static_ && any_marked(inputs);
}

PlannerOptions::DynamicFn Executor::dynamic_fn(const std::vector<const ir::Node*>& inputs,
                                               bool track, uint64_t build) {
  if (options_.shape_policy == ShapePolicy::static_) return nullptr;
  const bool marked = any_marked(inputs);
  return [this, marked, track, build](const kir::Kernel& k, const kir::KernelFacts& facts,
                                      std::vector<std::string>& reasons) {
    return dynamic_choice(k, facts, marked, track, build, reasons);
  };
}

namespace {
// "slice's end changed 3 -> 4" for each attribute of `now` that `before` had otherwise.
void attr_changes(const ir::Node& node, const ir::Attrs& before, const ir::Attrs& now,
                  std::vector<std::string>& out) {
  const auto text_of = [](const ir::Attrs& a, ir::AttrKey k) {
    const ir::AttrValue* v = a.find(k);
    return v ? ir::format_attr_value(*v) : std::string("(none)");
  };
  std::vector<ir::AttrKey> keys;
  for (const auto& [k, v] : before.items()) keys.push_back(k);
  for (const auto& [k, v] : now.items())
    if (!before.has(k)) keys.push_back(k);
  for (ir::AttrKey k : keys)
    if (const std::string was = text_of(before, k), is = text_of(now, k); was != is)
      out.push_back(
          fmt::format("{}'s {} changed {} -> {}", ir::op_name(node.op), ir::attr_name(k), was, is));
}
}  // namespace

std::vector<std::string> Executor::shape_change(const std::vector<const ir::Node*>& outputs,
                                                const StructuralKey& key, bool* dims_changed) {
  // The graph without its shapes: ops, dtypes, ranks and wiring (no shapes, no attributes).
  std::string shapeless;
  std::unordered_map<const ir::Node*, size_t> pos;
  const std::vector<const ir::Node*> order = ir::topo_order(outputs);
  std::vector<ir::Attrs> attrs;
  if (order.size() <= kAttrsKept)
    for (const ir::Node* n : order) attrs.push_back(n->attrs);
  for (const ir::Node* n : order) {
    shapeless += fmt::format("{}:{}:{}(", static_cast<int>(n->op), static_cast<int>(n->dtype), n->shape.size());
    for (const ir::Node* in : n->inputs) shapeless += fmt::format("{},", pos.at(in));
    shapeless += ")";
    pos.emplace(n, pos.size());
  }
  for (const ir::Node* o : outputs) shapeless += fmt::format("|{}", pos.at(o));
  std::vector<ir::Shape> shapes;
  for (const ir::Node* in : key.inputs) shapes.push_back(in->shape);
  std::lock_guard lock(shapes_mu_);
  auto [it, fresh] = seen_graphs_.emplace(std::move(shapeless), SeenGraph{shapes, attrs});
  std::vector<std::string> out;
  *dims_changed = false;
  if (fresh) return out;
  const std::vector<ir::Shape>& before = it->second.inputs;
  for (size_t i = 0; i < shapes.size() && i < before.size(); ++i) {
    if (shapes[i].size() != before[i].size()) continue;
    const std::string& given = key.inputs[i]->attrs.s(ir::AttrKey::name);
    const std::string name = given.empty() ? fmt::format("input {}", i) : fmt::format("input %{}", given);
    const std::vector<std::string> symbols = ir::input_symbols(*key.inputs[i]);
    for (size_t d = 0; d < shapes[i].size(); ++d)
      if (shapes[i][d] != before[i][d])
        out.push_back(fmt::format("new plan: {} dimension {}{} changed {} -> {}", name, d,
                                  symbols[d].empty() ? "" : " (?" + symbols[d] + ")", before[i][d],
                                  shapes[i][d]));
  }
  *dims_changed = !out.empty();
  // The same input shapes: an attribute asked for the new plan (a slice's end that grows, a
  // constant's value). Where input shapes changed, attributes follow them (a reshape's shape).
  if (out.empty() && attrs.size() == it->second.attrs.size()) {
    std::vector<std::string> changes;
    for (size_t n = 0; n < attrs.size(); ++n)
      if (!(attrs[n] == it->second.attrs[n]))
        attr_changes(*order[n], it->second.attrs[n], attrs[n], changes);
    // The same change at several nodes (a key cache and a value cache read to one length) is
    // one line, with the count.
    std::vector<std::pair<std::string, int>> distinct;
    for (const std::string& c : changes) {
      auto same = std::ranges::find(distinct, c, &std::pair<std::string, int>::first);
      if (same == distinct.end())
        distinct.emplace_back(c, 1);
      else
        ++same->second;
    }
    constexpr size_t kShown = 3;
    for (size_t c = 0; c < distinct.size() && c < kShown; ++c)
      out.push_back(fmt::format(
          "new plan: the same input shapes, but {}{}", distinct[c].first,
          distinct[c].second > 1 ? fmt::format(" (at {} nodes)", distinct[c].second) : ""));
    if (distinct.size() > kShown)
      out.push_back(
          fmt::format("new plan: and {} more attributes changed", distinct.size() - kShown));
  }
  it->second = SeenGraph{std::move(shapes), std::move(attrs)};
  return out;
}

Expected<std::shared_ptr<Plan>> Executor::lower(ir::Graph& g,
                                                const std::vector<const ir::Node*>& outputs,
                                                const std::vector<const ir::Node*>& inputs,
                                                bool track, bool note) {
  PlannerOptions po = planner_options(options_, &fuser(), nullptr);
  // Tracked: met at other sizes in a lowering of its own (note_sizes), so a size changed.
  const uint64_t build = track ? ++builds_ : 0;
  if (note && track) {
    std::lock_guard lock(shapes_mu_);
    noted_builds_.insert(build);
  }
  po.dynamic = dynamic_fn(inputs, track, build);
  po.sizes = sizes_fn(track, /*size_changed=*/track, build);
  return build_plan(g, outputs, inputs, po);
}

Expected<std::shared_ptr<Plan>> Executor::build(ir::Graph& g,
                                                const std::vector<const ir::Node*>& outputs,
                                                const std::vector<const ir::Node*>& inputs,
                                                KernelCache& kernels, bool size_changed) {
  int tuned = 0;
  PlannerOptions po = planner_options(options_, &fuser(), &kernels);
  po.source_extension = target_->source_extension();
  const uint64_t build = ++builds_;
  po.dynamic = dynamic_fn(inputs, /*track=*/true, build);
  // A marked input's sizes change by its caller's word: a float constant that differs with
  // them (a mean's 1/n, met at another size by note_sizes) is a size as well.
  po.sizes = sizes_fn(/*track=*/true, size_changed || any_marked(inputs), build);
  if (decisions_)
    po.tune = [&](const kir::Kernel& k) -> Expected<codegen::TuneParams> { return schedule(k, &tuned); };
  auto plan = build_plan(g, outputs, inputs, po);
  if (!plan) return make_error(fmt::format("{}: {}", name_, plan.error().message));
  (*plan)->tuned = tuned;
  return plan;
}

Expected<std::shared_ptr<const Plan>> Executor::plan_for(ir::Graph& g,
                                                         const std::vector<const ir::Node*>& outputs,
                                                         bool* cache_hit) {
  std::string source;
  auto plan = get_plan(g, outputs, structural_key(outputs), &source);
  if (cache_hit) *cache_hit = source == "memory";
  return plan;
}

Expected<std::shared_ptr<const Plan>> Executor::inspect(ir::Graph& g,
                                                        const std::vector<const ir::Node*>& outputs,
                                                        bool compile, bool track) {
  const StructuralKey key = structural_key(outputs);
  auto plan =
      compile ? build(g, outputs, key.inputs, kernels_) : lower(g, outputs, key.inputs, track);
  if (!plan) return std::unexpected(plan.error());
  return std::shared_ptr<const Plan>(std::move(*plan));
}

Expected<std::shared_ptr<const Plan>> Executor::get_plan(ir::Graph& g,
                                                         const std::vector<const ir::Node*>& outputs,
                                                         const StructuralKey& key, std::string* source) {
  {
    std::lock_guard lock(plans_mu_);
    if (std::shared_ptr<const Plan>* kept = plans_.find(key.key)) {
      *source = "memory";
      return *kept;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<cache::KeyParts> disk_key;
  std::shared_ptr<Plan> plan;
  // Another size of a family with a symbolic plan takes that plan at its sizes.
  std::optional<ShapeFamily> family;
  if (options_.shape_policy != ShapePolicy::static_) {
    family = structural_family(outputs);
    if ((plan = symbolic_plan(*family, key, outputs))) *source = "symbolic";
  }
  if (!plan && store_) disk_key = stored_plan_key(key);
  // With KILN_DUMP set every plan is built, so that its dumps are written: a stored plan would
  // skip the steps they show (its kernels still come from the cache).
  if (!plan && store_ && options_.dump_dir.empty()) {
    plan = stored_plan(*disk_key, key, outputs, /*load=*/true);
    // Not tuning, a plan a tuned warm-up stored (`kiln warm --autotune`, or a process with
    // autotune.enabled) is as good: its kernels are the tuned ones, and nothing is tuned here.
    // The most thorough level first.
    for (size_t l = std::size(autotune::kAllLevels); !plan && !options_.autotune && l-- > 0;)
      plan = stored_plan(stored_plan_key(key, std::string(autotune::level_name(autotune::kAllLevels[l]))),
                         key, outputs, /*load=*/true);
    if (plan) {
      *source = "disk";
      log(LogComponent::cache, fmt::format("plan {} from the cache: {} kernels, {} loaded for {}",
                                           disk_key->digest(), plan->steps.size(), plan->loaded, name_));
    }
  }
  if (!plan) {
    bool dims_changed = false;
    std::vector<std::string> changed = shape_change(outputs, key, &dims_changed);
    auto built = build(g, outputs, key.inputs, kernels_, /*size_changed=*/dims_changed);
    if (!built) return std::unexpected(built.error());
    plan = std::move(*built);
    changed.insert(changed.end(), plan->recompile_reasons.begin(), plan->recompile_reasons.end());
    plan->recompile_reasons = std::move(changed);
    for (const std::string& why : plan->recompile_reasons) log(LogComponent::compilation, "recompile: " + why);
    *source = "built";
    log_built_plan(*plan);
    if (store_) store_plan(*disk_key, *plan);
    // The plan outlives the graph it was built from (the API builds one per realize): what
    // points into that graph, the optimized outputs and the fusion groups and reasons (this
    // build's dumps and log are written), goes, as in a plan read back from the cache.
    plan->optimized_outputs.clear();
    plan->fusion.groups.clear();
    plan->fusion.reasons.clear();
    if (family) note_built(*family, plan);
  }
  prefault_slots(*plan);
  plan->plan_ms = ms_between(t0, std::chrono::steady_clock::now());
  // Goes after the lock (with its kernels' code, if nothing else holds them).
  std::optional<std::shared_ptr<const Plan>> evicted;
  std::lock_guard lock(plans_mu_);
  // Two realizes that built the same plan at once keep the first.
  return plans_.put(key.key, std::move(plan), evicted);
}

void Executor::prefault_slots(const Plan& plan) {
  if (!target_->host_memory()) return;
  // At most what the pool keeps cached: more would be returned to the system unused.
  constexpr size_t kMaxPrefaultBytes = size_t{1} << 30;
  constexpr size_t kPage = 4096;
  std::vector<std::shared_ptr<Buffer>> held;
  size_t total = 0;
  // Results made persistent (PersistentMemory::enforced) are fresh memory every run.
  std::vector<bool> skip(plan.slots.size(), false);
  if (pool_->persistent_mode() == PersistentMemory::enforced)
    for (int s : plan.output_slots) skip[static_cast<size_t>(s)] = true;
  for (size_t s = 0; s < plan.slots.size(); ++s) {
    const Slot& slot = plan.slots[s];
    if (slot.input_index >= 0 || skip[s]) continue;
    auto made = pool_->allocate(slot.dtype, slot.shape, "a prefaulted buffer");
    if (!made) return;  // the run reports what it cannot allocate
    const size_t bytes = (*made)->nbytes();
    if (total + bytes > kMaxPrefaultBytes) return;
    total += bytes;
    // One write a page: the fault maps (and zeroes) it, as the run's first store would.
    volatile std::byte* data = (*made)->data();
    for (size_t at = 0; at < bytes; at += kPage) data[at] = std::byte{0};
    held.push_back(std::move(*made));
  }
}

std::shared_ptr<Plan> Executor::symbolic_plan(const ShapeFamily& family, const StructuralKey& key,
                                              const std::vector<const ir::Node*>& outputs) {
  std::vector<PlanTemplate> templates;
  bool look_on_disk = false;
  std::optional<Family> evicted;
  {
    std::lock_guard lock(shapes_mu_);
    Family& f = family_at(family.key, evicted);
    templates = f.templates;
    look_on_disk = store_ && !f.disk_read;
    f.disk_read = true;
  }
  // The first time this process meets the family: the templates another process stored.
  int loaded = 0;
  if (look_on_disk)
    if (std::vector<PlanTemplate> stored = stored_templates(family, &loaded); !stored.empty()) {
      std::optional<Family> gone;
      std::lock_guard lock(shapes_mu_);
      Family& f = family_at(family.key, gone);
      for (PlanTemplate& t : stored)
        if (f.templates.size() < kTemplatesPerFamily) f.templates.push_back(std::move(t));
      templates = f.templates;
    }
  for (const PlanTemplate& t : templates) {
    if (!t.confirmed) continue;
    std::optional<Plan> plan = instantiate_plan(t, family.dims);
    if (!plan) continue;
    // Each dynamic kernel serves its new extent as it would in a plan built now: within its size
    // bucket, and without a size-chosen path (streaming stores; sizes 0 and 1, such as the
    // one-row matrix product's, never instantiate a template).
    size_t k = 0;
    const bool bound = std::ranges::all_of(plan->steps, [&](PlanStep& step) {
      const std::vector<bool>& written_only = t.written_only[k++];
      // A plan `kiln warm` lowered names its kernels by digest only.
      if (!step.artifact && !(step.artifact = kernels_.load(step.kernel_digest))) return false;
      if (!step.kernel.dynamic_outer && !step.kernel.has_sizes()) return true;
      const int64_t extent = step.kernel.outer_extent();
      if (step.kernel.dynamic_bound != 0 && bucket_of(extent) != step.kernel.dynamic_bound)
        return false;
      if (!target_->serves_instance(step.kernel, written_only)) return false;
      auto artifact = kernels_.bind(*step.artifact, step.kernel);
      if (!artifact) return false;
      step.artifact = std::move(*artifact);
      return true;
    });
    // A template read back from the cache is untrusted: its instance is checked as a plan record.
    if (bound && (!t.from_cache || check_plan_wiring(*plan)) &&
        check_plan_fits(*plan, key.inputs, outputs)) {
      log(LogComponent::compilation,
          fmt::format("plan for {}: the symbolic plan of {} kernels at new sizes, nothing built",
                      name_, plan->steps.size()));
      plan->loaded = loaded;
      return std::make_shared<Plan>(std::move(*plan));
    }
  }
  return nullptr;
}

std::vector<PlanTemplate> Executor::stored_templates(const ShapeFamily& family, int* loaded) {
  const cache::KeyParts disk_key = stored_template_key(family);
  std::optional<cache::Entry> e = store_->get(cache::Table::plans, disk_key);
  if (!e) return {};
  auto templates = decode_template_record(e->value);
  if (!templates) {
    store_->warn(fmt::format(
        "cache {}: plans entry {} (symbolic plans) is unusable ({}); they are made again",
        store_->path(), disk_key.digest(), templates.error().message));
    return {};
  }
  std::vector<PlanTemplate> out;
  std::unordered_set<std::string> distinct;  // the kept templates' kernels
  size_t dropped = 0;
  for (PlanTemplate& t : *templates) {
    // The base plan's kernels, each loaded by its digest; a template missing one is dropped.
    auto base = std::make_shared<Plan>(*t.base);
    const bool intact = std::ranges::all_of(base->steps, [&](PlanStep& step) {
      return (step.artifact = kernels_.load(step.kernel_digest)) != nullptr;
    });
    if (!intact) {
      ++dropped;
      continue;
    }
    for (const PlanStep& step : base->steps) distinct.insert(step.kernel_digest);
    t.base = std::move(base);
    out.push_back(std::move(t));
  }
  *loaded = static_cast<int>(distinct.size());
  log(LogComponent::cache,
      fmt::format(
          "{} symbolic plan{} of {} from the cache ({} kernels){}", out.size(),
          out.size() == 1 ? "" : "s", name_, distinct.size(),
          dropped == 0 ? "" : fmt::format(", {} dropped (a kernel is not in the cache)", dropped)));
  return out;
}

Executor::Family& Executor::family_at(const std::string& key, std::optional<Family>& evicted) {
  if (Family* f = families_.find(key)) return *f;
  return families_.put(key, Family{}, evicted);
}

bool Executor::note_built(const ShapeFamily& family, std::shared_ptr<const Plan> plan) {
  std::vector<PlanTemplate> made;
  std::optional<Family> evicted;
  {
    std::lock_guard lock(shapes_mu_);
    Family& f = family_at(family.key, evicted);
    // A template of kernels with run-time sizes serves once this plan, at third sizes, fits it.
    bool confirmed = false;
    for (PlanTemplate& t : f.templates)
      if (!t.confirmed && confirms(t, *plan, family.dims)) confirmed = t.confirmed = true;
    if (f.last && f.last_dims != family.dims)
      if (std::optional<PlanTemplate> t =
              make_plan_template(*f.last, f.last_dims, plan, family.dims)) {
        f.templates.insert(f.templates.begin(), std::move(*t));
        if (f.templates.size() > kTemplatesPerFamily) f.templates.pop_back();
        confirmed = confirmed || f.templates.front().confirmed;
      }
    if (confirmed)
      std::ranges::copy_if(f.templates, std::back_inserter(made),
                           [](const PlanTemplate& t) { return t.confirmed; });
    f.last = std::move(plan);
    f.last_dims = family.dims;
  }
  // The family's templates (with those read back from the cache) for other processes.
  if (made.empty() || !store_ || store_->read_only()) return false;
  std::optional<std::vector<uint8_t>> record = encode_template_record(made);
  if (!record) return false;
  cache::Entry e;
  e.metadata = fmt::format(R"({{"templates": {}, "kernels": {}}})", made.size(),
                           made.front().base->steps.size());
  e.value = std::move(*record);
  return store_->put(cache::Table::plans, stored_template_key(family), e);
}

void Executor::log(LogComponent component, const std::string& message) const {
  if (options_.logger) options_.logger->log(component, LogLevel::verbose, message);
}

void Executor::log_built_plan(const Plan& plan) const {
  if (!options_.logger) return;
  log(LogComponent::fusion,
      fmt::format("{} kernels by {} for {}, estimated {:.1f} µs, planned in {:.2f} ms",
                  plan.steps.size(), plan.fuser, name_, plan.fusion.total_seconds * 1e6, plan.plan_ms));
  for (const passes::FusionReason& r : plan.fusion.reasons)
    log(LogComponent::fusion, fmt::format("%t{} -> %t{}: {}", r.producer->id, r.consumer->id, r.reason));
  if (plan.compiled > 0)
    log(LogComponent::compilation, fmt::format("compiled {} kernels for {} in {:.1f} ms",
                                               plan.compiled, name_, plan.compile_ms));
  if (store_)
    log(LogComponent::cache, fmt::format("{} kernels loaded from the cache, {} compiled for {}",
                                         plan.loaded, plan.compiled, name_));
  // Each reason reads "k0: closest stored entry ... differs in ...".
  for (const std::string& why : plan.miss_reasons) log(LogComponent::cache, "miss " + why);
}

Expected<std::unique_ptr<Stream>> Executor::acquire_stream() {
  std::unique_lock lock(streams_mu_);
  const int limit = std::max(1, options_.max_streams);
  stream_free_.wait(lock, [&] { return !idle_streams_.empty() || streams_out_ < limit; });
  if (++active_ > peak_active_.load()) peak_active_.store(active_);
  if (!idle_streams_.empty()) {
    std::unique_ptr<Stream> s = std::move(idle_streams_.back());
    idle_streams_.pop_back();
    return s;
  }
  ++streams_out_;
  lock.unlock();
  auto s = target_->create_stream();
  if (!s) release_stream(nullptr, false);
  return s;
}

void Executor::release_stream(std::unique_ptr<Stream> stream, bool reusable) {
  {
    std::lock_guard lock(streams_mu_);
    --active_;
    if (reusable && stream) {
      idle_streams_.push_back(std::move(stream));
    } else {
      --streams_out_;  // dropped: a batch that failed may have left it half recorded
    }
  }
  stream_free_.notify_one();
}

std::shared_ptr<const StructuralKey> Executor::structural_key_of(
    const ir::Graph& g, const std::vector<const ir::Node*>& outputs) {
  const uint64_t serial = g.serial();
  {
    std::lock_guard lock(key_memo_mu_);
    for (const KeyMemo& m : key_memo_)
      if (m.graph == serial && m.outputs == outputs) return m.key;
  }
  auto key = std::make_shared<const StructuralKey>(structural_key(outputs));
  std::lock_guard lock(key_memo_mu_);
  key_memo_[key_memo_next_] = KeyMemo{serial, outputs, key};
  key_memo_next_ = (key_memo_next_ + 1) % kKeyMemos;
  return key;
}

Expected<std::vector<std::shared_ptr<Buffer>>> Executor::execute(
    ir::Graph& g, const std::vector<const ir::Node*>& outputs, const Bindings& inputs,
    RunStats* stats, const Donated* donated) {
  if (!target_->can_run())
    return make_error(name_ + ": this target only compiles; it has no device to run kernels on");
  const auto t0 = std::chrono::steady_clock::now();
  // One walk of the graph (or none, for outputs realized lately): the structural key also lists
  // every Input node to check.
  const std::shared_ptr<const StructuralKey> key_of = structural_key_of(g, outputs);
  const StructuralKey& key = *key_of;
  const auto t_key = std::chrono::steady_clock::now();
  if (auto ok = check_bindings(key.inputs, inputs); !ok) return std::unexpected(ok.error());
  std::string source;
  auto plan = get_plan(g, outputs, key, &source);
  if (!plan) return std::unexpected(plan.error());
  if (source != "memory") record_graph(options_.record_dir, outputs, key.inputs, options_.namer);
  const auto t1 = std::chrono::steady_clock::now();
  auto stream = acquire_stream();
  if (!stream) return make_error(fmt::format("{}: {}", name_, stream.error().message));
  Realize r;
  r.time_kernels = stats != nullptr && options_.time_kernels;
  const int64_t faults_before = r.time_kernels ? minor_page_faults() : -1;
  if (donated && !donated->empty() && target_->host_memory()) {
    r.donated.assign((*plan)->slots.size(), false);
    for (size_t s = 0; s < (*plan)->slots.size(); ++s)
      if (const int in = (*plan)->slots[s].input_index; in >= 0)
        r.donated[s] = donated->count(key.inputs[in]) > 0;
  }
  auto results = run_plan(**plan, key, outputs, inputs, **stream, r);
  release_stream(std::move(*stream), results.has_value());
  if (stats) stats->donated = r.written_over;  // a failed run too: donated inputs may be changed
  if (!results) return results;
  fill_run_stats(**plan, source, ms_between(t0, t1), ms_between(t1, std::chrono::steady_clock::now()),
                 stats);
  if (stats) {
    stats->key_ms = ms_between(t0, t_key);
    stats->lookup_ms = ms_between(t_key, t1);
    stats->upload_bytes = r.up;
    stats->download_bytes = r.down;
    stats->device_ms = r.kernel_ms;
    stats->page_faults = -1;
    if (r.time_kernels) {
      if (faults_before >= 0)
        if (const int64_t after = minor_page_faults(); after >= 0)
          stats->page_faults = after - faults_before;
      const passes::DeviceRates& rates = device_rates();
      stats->bandwidth = rates.bandwidth;
      stats->compute_rate = rates.compute_rate;
      stats->matmul_rate = rates.matmul_rate > 0 ? rates.matmul_rate : rates.compute_rate;
      stats->rates_measured = rates_measured_;
      const std::vector<PlanStep>& steps = (*plan)->steps;
      for (size_t i = 0; i < steps.size() && i < stats->groups.size(); ++i) {
        stats->groups[i].bytes = autotune::kernel_bytes(steps[i].kernel);
        stats->groups[i].flops = std::max(0.0, steps[i].flops);
        stats->groups[i].peak_flops =
            is_contraction(steps[i]) ? stats->matmul_rate : stats->compute_rate;
        if (i < r.launch_ms.size()) stats->groups[i].ms = r.launch_ms[i];
      }
    }
  }
  return results;
}

bool is_executor_name(std::string_view name) {
  const std::string_view api = name.substr(0, name.find(':'));
  return name == "cpu" || api == "cuda" || api == "vulkan";
}

Expected<std::unique_ptr<Executor>> open_executor(std::string_view name, DeviceOptions options) {
  std::unique_ptr<Target> target;
  if (name == "cpu") {
    auto cpu = CpuTarget::create({.cpu_target = options.cpu_target, .num_threads = options.num_threads});
    if (!cpu) return std::unexpected(cpu.error());
    target = std::move(*cpu);
  } else {
    auto backend = open_gpu_backend(name, options.nvrtc);
    if (!backend) return make_error(fmt::format("'{}' is not a device kiln compiles for", name));
    if (!*backend) return std::unexpected(backend->error());
    target = std::make_unique<GpuTarget>(std::move(**backend), options.tensor_core_matmul);
  }
  return Executor::create(std::move(target), std::move(options));
}

}  // namespace kiln::runtime
