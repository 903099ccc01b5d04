// build_plan: the lowering script (passes/pipeline.h), then the target's steps: compile each kernel
// with its schedule, wire the buffer slots (DESIGN.md §2).
#include "runtime/planner.h"

#include "autotune/roofline.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "passes/pipeline.h"
#include "runtime/dump_text.h"
#include "runtime/dump_writer.h"
#include "runtime/kernel_cache.h"

namespace kiln::runtime {

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The step's kernel with its schedule (the autotuner's winner), through the kernel cache.
// `kernel_text`: its canonical text, when printed already.
Expected<KernelLookup> compile_step(PlanStep& step, const PlannerOptions& options,
                                    const std::string* kernel_text = nullptr) {
  codegen::TuneParams params;
  if (options.tune) {
    auto tuned = options.tune(step.kernel);
    if (!tuned) return std::unexpected(tuned.error());
    params = *tuned;
  }
  auto got = options.kernels->get(step.kernel, *step.facts, params, kernel_text);
  if (!got) return std::unexpected(got.error());
  step.artifact = got->artifact;
  step.kernel_digest = got->digest;
  return got;
}

// Every step's kernel. Without a tuner (which measures, one kernel at a time), the first step of
// each distinct kernel compiles on up to compile_threads threads (Target::compile is thread-safe),
// and the steps repeating a kernel then find it in memory; counts and errors are taken in step
// order, so they do not depend on the thread count.
Expected<void> compile_steps(Plan& plan, const PlannerOptions& options) {
  std::vector<std::optional<Expected<KernelLookup>>> got(plan.steps.size());
  const int threads = options.tune ? 1 : std::max(1, options.compile_threads);
  if (threads > 1 && plan.steps.size() > 1) {
    std::vector<size_t> firsts;
    std::vector<const std::string*> texts;  // firsts' canonical texts, printed once here
    std::unordered_set<std::string> seen;
    for (size_t k = 0; k < plan.steps.size(); ++k)
      if (auto [at, fresh] = seen.insert(kir::print_kernel(plan.steps[k].kernel, false)); fresh) {
        firsts.push_back(k);
        texts.push_back(&*at);
      }
    std::atomic<size_t> next = 0;
    auto work = [&] {
      for (size_t i = next++; i < firsts.size(); i = next++)
        got[firsts[i]] = compile_step(plan.steps[firsts[i]], options, texts[i]);
    };
    std::vector<std::thread> workers;
    const size_t extra = std::min(firsts.size(), static_cast<size_t>(threads)) - 1;  // firsts >= 1
    try {
      for (size_t t = 0; t < extra; ++t) workers.emplace_back(work);
    } catch (const std::system_error&) {
      // No more threads to be had: the ones started and this one share the work.
    }
    work();
    for (std::thread& w : workers) w.join();
  }
  for (size_t k = 0; k < plan.steps.size(); ++k) {
    if (!got[k]) got[k] = compile_step(plan.steps[k], options);
    if (!*got[k]) return std::unexpected(got[k]->error());
    const KernelLookup& lookup = **got[k];
    if (lookup.source == KernelLookup::Source::compiled) {
      ++plan.compiled;
      plan.compile_ms += lookup.artifact->compile_ms();
    } else if (lookup.source == KernelLookup::Source::disk) {
      ++plan.loaded;
    }
    if (!lookup.miss_reason.empty())
      plan.miss_reasons.push_back(plan.steps[k].kernel.name + ": " + lookup.miss_reason);
  }
  return {};
}

// The output slots, and each temporary released after its last reader (unless it is an output or
// a plan input).
void wire_outputs(Plan& plan, const std::unordered_map<const ir::Node*, int>& slot_of,
                  std::vector<int>& last_reader) {
  for (const ir::Node* o : plan.optimized_outputs) {
    auto it = slot_of.find(o);
    KILN_CHECK(it != slot_of.end()) << "output %t" << o->id << " is computed by no kernel";
    plan.output_slots.push_back(it->second);
  }
  last_reader.resize(plan.slots.size(), -1);
  const std::set<int> keep(plan.output_slots.begin(), plan.output_slots.end());
  for (size_t s = 0; s < plan.slots.size(); ++s)
    if (plan.slots[s].input_index < 0 && !keep.count(static_cast<int>(s)) && last_reader[s] >= 0)
      plan.steps[last_reader[s]].release_after.push_back(static_cast<int>(s));
}

// Whether every load of the parameters bound to `input_slot` in `step` reads the element its
// point stores: the kernel has one store to `param`, over a domain of the output's element count
// (so each point writes its own element, once); each load of the input that this store's value
// reads has that store's index (hash-consed: one expression), and no other store reads the input
// at all (it might run after this one wrote over the element). Then a point reads only what it
// alone writes, before writing it. A kernel that writes a layer's key and value caches at once,
// `where(here, row, k)` and `where(here, row, v)`, updates both in place.
bool loads_match_store(const PlanStep& step, const InPlace& ip) {
  const kir::Kernel& k = step.kernel;
  const auto own = std::ranges::find(k.stores, ip.param, &kir::Store::buf);
  if (own == k.stores.end() || std::count_if(k.stores.begin(), k.stores.end(), [&](const kir::Store& s) {
        return s.buf == ip.param;
      }) != 1)
    return false;
  int64_t points = 1;
  for (int64_t d : k.domain) points *= d;
  if (points != ir::shape_numel(k.params[ip.param].shape)) return false;
  auto reads_input = [&](const kir::Expr* e) {
    return e->kind == kir::ExprKind::Load && step.args[e->buf] == ip.input_slot;
  };
  // The expressions the stores in `stores` reach (kernel_exprs walks a kernel's stores).
  auto reached = [&](std::vector<kir::Store> stores) {
    kir::Kernel part;
    part.stores = std::move(stores);
    return kir::kernel_exprs(part);
  };
  for (const kir::Expr* e : reached({*own}))
    if (reads_input(e) && e->args[0] != own->index) return false;
  std::vector<kir::Store> others;
  for (const kir::Store& s : k.stores)
    if (&s != &*own) others.push_back(s);
  return others.empty() || std::ranges::none_of(reached(std::move(others)), reads_input);
}

// Each step's in-place candidates (PlanStep::in_place), once the outputs are wired.
void find_in_place(Plan& plan) {
  for (size_t k = 0; k < plan.steps.size(); ++k) {
    PlanStep& step = plan.steps[k];
    for (size_t p = 0; p < step.args.size(); ++p) {
      if (!step.kernel.params[p].output) continue;
      for (size_t q = 0; q < step.args.size(); ++q) {
        const InPlace ip{static_cast<int>(p), step.args[q]};
        if (step.kernel.params[q].output || plan.slots[ip.input_slot].input_index < 0) continue;
        const bool seen = std::any_of(step.in_place.begin(), step.in_place.end(), [&](const InPlace& o) {
          return o.input_slot == ip.input_slot;
        });
        if (!seen && in_place_fits(plan, k, ip) && loads_match_store(step, ip)) step.in_place.push_back(ip);
      }
    }
  }
}

}  // namespace

bool in_place_fits(const Plan& plan, size_t step_index, const InPlace& ip) {
  const int n = static_cast<int>(plan.slots.size());
  if (step_index >= plan.steps.size()) return false;
  const PlanStep& step = plan.steps[step_index];
  if (ip.param < 0 || ip.param >= static_cast<int>(step.args.size()) ||
      !step.kernel.params[ip.param].output || ip.input_slot < 0 || ip.input_slot >= n)
    return false;
  const Slot& in = plan.slots[ip.input_slot];
  const Slot& out = plan.slots[step.args[ip.param]];
  if (in.input_index < 0 || in.dtype != out.dtype || in.shape != out.shape) return false;
  if (std::find(plan.output_slots.begin(), plan.output_slots.end(), ip.input_slot) !=
      plan.output_slots.end())
    return false;
  for (size_t k = step_index + 1; k < plan.steps.size(); ++k)
    if (std::find(plan.steps[k].args.begin(), plan.steps[k].args.end(), ip.input_slot) !=
        plan.steps[k].args.end())
      return false;
  return true;
}

ValueNamer kg_value_namer(const ir::KgGraph& graph) {
  auto names = std::make_shared<std::unordered_map<const ir::Node*, std::string>>();
  for (const auto& [name, node] : graph.inputs) (*names)[node] = "%" + name;
  for (const auto& [name, node] : graph.outputs) names->emplace(node, "%" + name);
  for (const auto& [name, node] : graph.values) names->emplace(node, "%" + name);
  return [names](const ir::Node* n) {
    auto it = names->find(n);
    return it != names->end() ? it->second : default_value_name(n);
  };
}

std::string default_value_name(const ir::Node* n) {
  if (n->op == ir::Op::Input && !n->attrs.s(ir::AttrKey::name).empty())
    return "%" + n->attrs.s(ir::AttrKey::name);
  return fmt::format("%t{}", n->id);
}

std::vector<std::string> slot_names(const Plan& plan, const std::vector<const ir::Node*>& outputs,
                                    const ValueNamer& namer) {
  std::vector<std::string> names(plan.slots.size());
  for (const PlanStep& step : plan.steps)
    for (size_t p = 0; p < step.args.size(); ++p)
      if (step.kernel.params[p].output && names[step.args[p]].empty())
        names[step.args[p]] = step.kernel.params[p].label;
  for (size_t o = 0; o < plan.output_slots.size() && o < outputs.size(); ++o)
    names[plan.output_slots[o]] = namer ? namer(outputs[o]) : default_value_name(outputs[o]);
  return names;
}

Expected<std::shared_ptr<Plan>> build_plan(ir::Graph& g, const std::vector<const ir::Node*>& outputs,
                                           const std::vector<const ir::Node*>& inputs,
                                           const PlannerOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  auto plan = std::make_shared<Plan>();
  plan->fuser = std::string((options.fuser ? *options.fuser : passes::default_fuser()).name());
  PlanDump dump(options.dump_dir, outputs, inputs, options.namer, plan->fuser);

  // Optimized outputs keep the names of the values they replace.
  ValueNamer namer = [&](const ir::Node* n) {
    for (size_t i = 0; i < outputs.size(); ++i)
      if (i < plan->optimized_outputs.size() && plan->optimized_outputs[i] == n)
        return options.namer ? options.namer(outputs[i]) : default_value_name(outputs[i]);
    return options.namer ? options.namer(n) : default_value_name(n);
  };
  passes::LoweringOptions script;
  script.fuser = options.fuser;
  script.verify = options.verify_ir;
  // Parameters carry the names every dump and message uses (labels are not part of any key).
  script.label = [&](const ir::Node* n) { return namer(n); };
  script.observe = [&](int number, const passes::LoweringStep& step, const passes::Lowering& ir) {
    plan->optimized_outputs = ir.outputs;  // the namer's view of the outputs so far
    dump.lowering_step(number, step, ir);
  };
  auto lowered = passes::run_lowering(g, outputs, script);
  if (!lowered) return std::unexpected(lowered.error());
  plan->optimized_outputs = lowered->outputs;
  plan->fusion = std::move(lowered->fusion);
  const passes::FusionPlan& fusion = plan->fusion;

  // Compile: each kernel with its schedule (the autotuner's winner), through the kernel cache.
  std::unordered_map<const ir::Node*, int> slot_of;
  auto new_slot = [&](const ir::Node* n, int input_index) {
    plan->slots.push_back(Slot{n->dtype, n->shape, input_index});
    return slot_of[n] = static_cast<int>(plan->slots.size()) - 1;
  };
  for (size_t i = 0; i < inputs.size(); ++i) new_slot(inputs[i], static_cast<int>(i));
  std::vector<int> last_reader;
  for (size_t k = 0; k < fusion.groups.size(); ++k) {
    passes::LoweredKernel& kernel = lowered->kernels[k];
    PlanStep step;
    for (const ir::Node* p : kernel.params) {
      auto it = slot_of.find(p);
      step.args.push_back(it != slot_of.end() ? it->second : new_slot(p, -1));
    }
    step.values = group_values(fusion.groups[k], namer, &step.num_ops);
    step.kernel = std::move(kernel.kernel);
    step.facts = std::move(kernel.facts);
    std::optional<int64_t> bound;
    if (options.dynamic) bound = options.dynamic(step.kernel, *step.facts, plan->recompile_reasons);
    if (bound) {
      step.kernel.dynamic_outer = true;
      step.kernel.dynamic_bound = *bound;
    } else if (options.sizes) {
      if (std::optional<kir::Kernel> sized =
              options.sizes(step.kernel, *step.facts, plan->recompile_reasons)) {
        step.kernel = std::move(*sized);
        step.facts = std::make_shared<const kir::KernelFacts>(kir::analyze_kernel(step.kernel));
      }
    }
    step.flops = autotune::kernel_work(step.kernel).flops;
    last_reader.resize(plan->slots.size(), -1);
    for (size_t i = 0; i < step.args.size(); ++i)
      if (!step.kernel.params[i].output) last_reader[step.args[i]] = static_cast<int>(k);
    plan->steps.push_back(std::move(step));
  }
  if (options.kernels)
    if (auto ok = compile_steps(*plan, options); !ok) return std::unexpected(ok.error());
  if (options.kernels && dump.active())
    dump.executor_step("compile", options.source_extension, source_text(*plan, options.source_extension));

  wire_outputs(*plan, slot_of, last_reader);
  find_in_place(*plan);
  if (dump.active()) dump.executor_step("slots", "txt", slots_text(*plan));
  plan->plan_ms = ms_since(t0);
  dump.finish(*plan, options.source_extension);
  return plan;
}

}  // namespace kiln::runtime
