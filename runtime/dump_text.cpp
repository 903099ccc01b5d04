// The text dumps of a Plan: standalone graphs, fused groups with costs and reasons, kernels, source.
#include "runtime/dump_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <set>
#include <unordered_set>

#include "ir/kg_ops.h"

namespace kiln::runtime {

namespace {

std::string name_of(const ir::Node* n, const ValueNamer& namer) {
  return namer ? namer(n) : default_value_name(n);
}

// The namer's "%name" as a `.kg` name (without the %), or empty when it is not a `.kg`
// identifier.
std::string kg_name(const ir::Node* n, const ValueNamer& namer) {
  std::string name = name_of(n, namer);
  if (name.starts_with("%")) name.erase(0, 1);
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return "";
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') return "";
  return name;
}

// kg_name, or empty when the namer made the name up (%t<id>).
std::string given_name(const ir::Node* n, const ValueNamer& namer) {
  if (name_of(n, namer) == fmt::format("%t{}", n->id)) return "";
  return kg_name(n, namer);
}

void append_group_block(std::string& out, const std::string& kernel,
                        const passes::FusedGroup& group, const passes::GroupCost& cost,
                        const ValueNamer& namer) {
  out += fmt::format("kernel {}\n", kernel);
  for (const ir::Node* n : group.nodes)
    if (is_shown_op(n)) out += fmt::format("  {}\n", node_statement(n, namer));
  std::vector<std::string> reads, writes;
  for (const ir::Node* n : group.inputs) reads.push_back(name_of(n, namer));
  for (const ir::Node* n : group.outputs) writes.push_back(name_of(n, namer));
  out += fmt::format("  reads:  {}\n", reads.empty() ? "-" : fmt::format("{}", fmt::join(reads, " ")));
  out += fmt::format("  writes: {}\n", fmt::join(writes, " "));
  out += fmt::format("  estimate: {:.0f} bytes, {} launch{}, {:.0f} flops, {}\n", cost.bytes,
                     cost.launches, cost.launches == 1 ? "" : "es", cost.flops,
                     format_micros(cost.seconds));
}

}  // namespace

ir::KgGraph standalone_graph(const std::vector<const ir::Node*>& outputs,
                             const std::vector<const ir::Node*>& inputs, const ValueNamer& namer) {
  ir::KgGraph graph;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string name = given_name(inputs[i], namer);
    graph.inputs.emplace_back(name.empty() ? fmt::format("in{}", i) : name, inputs[i]);
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string name = given_name(outputs[i], namer);
    graph.outputs.emplace_back(name.empty() ? fmt::format("out{}", i) : name, outputs[i]);
  }
  // Every other value under the namer's name too, so that this text names each value as the
  // other dumps do (%t<id> included).
  for (const ir::Node* n : ir::topo_order(outputs))
    if (std::string name = kg_name(n, namer); !name.empty()) graph.values.emplace_back(name, n);
  return graph;
}

ir::KgGraph optimized_graph(const Plan& plan, const std::vector<const ir::Node*>& outputs,
                            const std::vector<const ir::Node*>& inputs, const ValueNamer& namer) {
  ir::KgGraph g =
      standalone_graph(plan.optimized_outputs, inputs, optimized_namer(plan, outputs, namer));
  for (size_t i = 0; i < g.outputs.size() && i < outputs.size(); ++i)
    if (std::string name = given_name(outputs[i], namer); !name.empty()) g.outputs[i].first = name;
  return g;
}

ValueNamer optimized_namer(const Plan& plan, const std::vector<const ir::Node*>& outputs,
                           const ValueNamer& namer) {
  return rewritten_namer(plan.optimized_outputs, outputs, namer);
}

ValueNamer rewritten_namer(const std::vector<const ir::Node*>& now,
                           const std::vector<const ir::Node*>& outputs, const ValueNamer& namer) {
  auto base = namer ? namer : ValueNamer(default_value_name);
  std::vector<std::pair<const ir::Node*, std::string>> renamed;
  // An output that optimized to an input keeps the input's name (the printed graph gives the
  // output its own name as an alias of it).
  for (size_t i = 0; i < outputs.size() && i < now.size(); ++i)
    if (now[i]->op != ir::Op::Input) renamed.emplace_back(now[i], base(outputs[i]));
  return [renamed = std::move(renamed), base](const ir::Node* n) {
    for (const auto& [node, name] : renamed)
      if (node == n) return name;
    return base(n);
  };
}

PlanCosts plan_costs(const Plan& plan, const passes::CostModel& model) {
  return fusion_costs(plan.fusion, model);
}

PlanCosts fusion_costs(const passes::FusionPlan& fusion, const passes::CostModel& model) {
  PlanCosts costs;
  if (fusion.costs.size() == fusion.groups.size()) {
    costs.groups = fusion.costs;
  } else {
    for (const passes::FusedGroup& group : fusion.groups) costs.groups.push_back(model.estimate(group));
  }
  for (const passes::GroupCost& c : costs.groups) costs.total_seconds += c.seconds;
  return costs;
}

std::vector<passes::FusionReason> boundary_reasons(const passes::FusionPlan& fusion) {
  std::vector<passes::FusionReason> reasons = fusion.reasons;
  std::set<std::pair<uint32_t, uint32_t>> recorded;
  for (const passes::FusionReason& r : reasons) recorded.emplace(r.producer->id, r.consumer->id);
  for (const passes::FusedGroup& group : fusion.groups) {
    std::unordered_set<const ir::Node*> inside(group.nodes.begin(), group.nodes.end());
    for (const ir::Node* n : group.nodes) {
      for (const ir::Node* p : n->inputs) {
        ir::OpKind kind = ir::op_kind(p->op);
        if (inside.contains(p) || kind == ir::OpKind::Input || kind == ir::OpKind::Source) continue;
        if (recorded.emplace(p->id, n->id).second)
          reasons.push_back({p, n, "no reason recorded by the fuser"});
      }
    }
  }
  return reasons;
}

bool is_shown_op(const ir::Node* n) {
  return n->op != ir::Op::Input && !(n->op == ir::Op::Full && n->shape.empty());
}

std::string node_statement(const ir::Node* n, const ValueNamer& namer) {
  std::vector<std::string> parts;
  for (const ir::Node* in : n->inputs)
    parts.push_back(is_shown_op(in) || in->op == ir::Op::Input ? name_of(in, namer)
                                                               : ir::format_literal(in));
  const ir::KgOpSpec& spec = ir::kg_op_of(n);
  for (const ir::KgAttrSpec& a : spec.attrs) {
    auto key = ir::attr_key_of(a.name);
    if (const ir::AttrValue* v = key ? n->attrs.find(*key) : nullptr)
      parts.push_back(fmt::format("{}={}", a.name, ir::format_attr_value(*v)));
  }
  return fmt::format("{} = {}({}) : {}{}", name_of(n, namer), spec.name, fmt::join(parts, ", "),
                     ir::dtype_name(n->dtype), ir::shape_str(n->shape));
}

std::string reason_line(const passes::FusionReason& r, const ValueNamer& namer) {
  return fmt::format("{} -> {}: {}", name_of(r.producer, namer), name_of(r.consumer, namer), r.reason);
}

namespace {

// `group` computing `extra` too (each node once, by id), writing `outputs`; it reads what its
// nodes take from outside (sources are recomputed, as the fusers do).
passes::FusedGroup with_nodes(const passes::FusedGroup& group,
                              const std::vector<const ir::Node*>& extra,
                              std::vector<const ir::Node*> outputs) {
  std::set<const ir::Node*, bool (*)(const ir::Node*, const ir::Node*)> nodes(
      [](const ir::Node* a, const ir::Node* b) { return a->id < b->id; });
  nodes.insert(group.nodes.begin(), group.nodes.end());
  nodes.insert(extra.begin(), extra.end());
  passes::FusedGroup g;
  g.outputs = std::move(outputs);
  std::unordered_set<const ir::Node*> read;
  for (const ir::Node* n : nodes)
    for (const ir::Node* in : n->inputs)
      if (!nodes.contains(in) && ir::op_kind(in->op) != ir::OpKind::Source &&
          read.insert(in).second)
        g.inputs.push_back(in);
  g.nodes.assign(nodes.begin(), nodes.end());
  return g;
}

// The nodes of `group` that `n` is computed from, `n` included.
std::vector<const ir::Node*> computed_from(const ir::Node* n, const passes::FusedGroup& group) {
  const std::unordered_set<const ir::Node*> inside(group.nodes.begin(), group.nodes.end());
  std::vector<const ir::Node*> out, stack{n};
  std::unordered_set<const ir::Node*> seen{n};
  while (!stack.empty()) {
    const ir::Node* x = stack.back();
    stack.pop_back();
    out.push_back(x);
    for (const ir::Node* in : x->inputs)
      if (inside.contains(in) && seen.insert(in).second) stack.push_back(in);
  }
  return out;
}

}  // namespace

std::string boundary_estimates(const passes::FusionReason& r, const passes::FusionPlan& fusion,
                               const passes::CostModel& model, const ValueNamer& namer) {
  int producer = -1, consumer = -1;
  for (size_t k = 0; k < fusion.groups.size(); ++k) {
    const passes::FusedGroup& g = fusion.groups[k];
    if (producer < 0 && std::ranges::count(g.outputs, r.producer)) producer = static_cast<int>(k);
    if (consumer < 0 && std::ranges::count(g.nodes, r.consumer) &&
        std::ranges::count(g.inputs, r.producer))
      consumer = static_cast<int>(k);
  }
  if (producer < 0 || consumer < 0 || producer == consumer) return "";
  const passes::FusedGroup& p = fusion.groups[producer];
  const passes::FusedGroup& c = fusion.groups[consumer];
  const double apart_p = model.estimate(p).seconds, apart_c = model.estimate(c).seconds;
  if (p.outputs[0]->shape == c.outputs[0]->shape) {
    std::vector<const ir::Node*> outputs = p.outputs;
    outputs.insert(outputs.end(), c.outputs.begin(), c.outputs.end());
    const double one = model.estimate(with_nodes(c, p.nodes, outputs)).seconds;
    return fmt::format("apart: k{} {} + k{} {} = {}; as one kernel: {}", producer,
                       format_micros(apart_p), consumer, format_micros(apart_c),
                       format_micros(apart_p + apart_c), format_micros(one));
  }
  // Kernels of different shapes cannot merge: the alternative is recomputing the value.
  const double again =
      model.estimate(with_nodes(c, computed_from(r.producer, p), c.outputs)).seconds;
  return fmt::format("k{} reading {}: {}; recomputing it there: {}", consumer,
                     name_of(r.producer, namer), format_micros(apart_c), format_micros(again));
}

std::string reason_line(const passes::FusionReason& r, const ValueNamer& namer,
                        const passes::FusionPlan& fusion, const passes::CostModel& model) {
  std::string estimates = boundary_estimates(r, fusion, model, namer);
  return reason_line(r, namer) + (estimates.empty() ? "" : " (" + estimates + ")");
}

std::string format_micros(double seconds) { return fmt::format("{:.3f} µs", seconds * 1e6); }

std::string groups_text(const Plan& plan, const ValueNamer& namer, const passes::CostModel& model,
                        bool why) {
  KILN_CHECK(plan.fusion.groups.size() == plan.steps.size())
      << plan.fusion.groups.size() << " groups but " << plan.steps.size() << " steps";
  std::vector<std::string> names;
  for (const PlanStep& step : plan.steps) names.push_back(step.kernel.name);
  return fusion_text(plan.fusion, plan.fuser, names, namer, model, why);
}

std::string fusion_text(const passes::FusionPlan& fusion, std::string_view fuser,
                        const std::vector<std::string>& kernel_names, const ValueNamer& namer,
                        const passes::CostModel& model, bool why) {
  PlanCosts costs = fusion_costs(fusion, model);
  std::string out = fmt::format("# fuser: {}\n", fuser);
  if (fusion.costs.size() != fusion.groups.size())
    out += fmt::format("# costs: estimated by the dump ({}), the fuser recorded none\n",
                       model.rates().str());
  for (size_t k = 0; k < fusion.groups.size(); ++k) {
    out += "\n";
    append_group_block(out, k < kernel_names.size() ? kernel_names[k] : fmt::format("k{}", k),
                       fusion.groups[k], costs.groups[k], namer);
  }
  size_t n = fusion.groups.size();
  out += fmt::format("\ntotal: {} kernel{}, estimated {}\n", n, n == 1 ? "" : "s",
                     format_micros(costs.total_seconds));
  if (why) {
    std::vector<passes::FusionReason> reasons = boundary_reasons(fusion);
    out += fmt::format("\nwhy ({} kernel boundar{}):\n", reasons.size(),
                       reasons.size() == 1 ? "y" : "ies");
    for (const passes::FusionReason& r : reasons)
      out += reason_line(r, namer, fusion, model) + "\n";
  }
  return out;
}

std::vector<std::string> group_values(const passes::FusedGroup& group, const ValueNamer& namer,
                                      int* num_ops) {
  std::set<const ir::Node*, bool (*)(const ir::Node*, const ir::Node*)> nodes(
      [](const ir::Node* a, const ir::Node* b) { return a->id < b->id; });
  nodes.insert(group.nodes.begin(), group.nodes.end());
  nodes.insert(group.outputs.begin(), group.outputs.end());
  std::vector<std::string> values;
  for (const ir::Node* n : nodes) {
    if (n->op == ir::Op::Input || n->op == ir::Op::Full) continue;
    values.push_back(name_of(n, namer));
    ir::OpKind kind = ir::op_kind(n->op);
    if (num_ops && !ir::is_view(n->op) && kind != ir::OpKind::Source) ++*num_ops;
  }
  return values;
}

namespace {
// The size symbols of the plan input that input parameter `p` of `step` reads (ir::input_symbols);
// empty for an output or a parameter that reads what another kernel wrote.
std::vector<std::string> param_symbols(const Plan& plan, const PlanStep& step, size_t p,
                                       const std::vector<const ir::Node*>& inputs) {
  if (p >= step.args.size() || step.kernel.params[p].output) return {};
  const int slot = step.args[p];
  if (slot < 0 || static_cast<size_t>(slot) >= plan.slots.size()) return {};
  const int input = plan.slots[static_cast<size_t>(slot)].input_index;
  if (input < 0 || static_cast<size_t>(input) >= inputs.size()) return {};
  return ir::input_symbols(*inputs[static_cast<size_t>(input)]);
}
}  // namespace

std::vector<std::string> size_symbols(const Plan& plan, const PlanStep& step,
                                      const std::vector<const ir::Node*>& inputs) {
  const kir::Kernel& k = step.kernel;
  std::vector<std::string> names(k.sizes.size());
  for (size_t p = 0; p < k.params.size(); ++p) {
    const kir::Param& param = k.params[p];
    if (param.shape_slots.empty()) continue;
    const std::vector<std::string> symbols = param_symbols(plan, step, p, inputs);
    for (size_t a = 0; a < param.shape_slots.size() && a < symbols.size(); ++a) {
      const int32_t s = param.shape_slots[a];
      if (s >= 0 && static_cast<size_t>(s) < names.size() && names[s].empty() && !symbols[a].empty())
        names[static_cast<size_t>(s)] = "?" + symbols[a];
    }
  }
  const std::vector<ir::DType> dtypes = kir::size_dtypes(k);
  for (size_t s = 0; s < names.size(); ++s) {
    if (dtypes[s] == ir::DType::i64 || !names[s].empty()) continue;
    // One over a named slot's value, where every slot of that value has the same name (two
    // symbols of one size say nothing of which it is).
    const double value = std::bit_cast<double>(k.sizes[s]);
    std::string of;
    for (size_t t = 0; t < names.size(); ++t)
      if (dtypes[t] == ir::DType::i64 && k.sizes[t] != 0 &&
          1.0 / static_cast<double>(k.sizes[t]) == value) {
        const bool named = names[t].size() > 1 && names[t][0] == '?';
        if (!named || (!of.empty() && of != names[t])) {
          of = "!";
          break;
        }
        of = names[t];
      }
    if (!of.empty() && of != "!") names[s] = "1/" + of;
  }
  return names;
}

namespace {
// A dynamic kernel's outer axis (printed `?`): the size symbol of the leading axis of a plan input
// that an input parameter of the kernel's rank and outer extent reads, "" where none has.
std::string outer_symbol(const Plan& plan, const PlanStep& step,
                         const std::vector<const ir::Node*>& inputs) {
  const kir::Kernel& k = step.kernel;
  if (!k.dynamic_outer) return "";
  for (size_t p = 0; p < k.params.size(); ++p) {
    const kir::Param& param = k.params[p];
    // Of the kernel's rank and leading extent (a broadcast operand's leading axis is another).
    if (param.shape.size() != k.domain.size() || param.shape.empty() ||
        param.shape[0] != k.outer_extent())
      continue;
    const std::vector<std::string> symbols = param_symbols(plan, step, p, inputs);
    if (!symbols.empty() && !symbols[0].empty()) return "?" + symbols[0];
  }
  // A kernel reading none (it reads what other kernels wrote): the one symbol of a leading axis of
  // the plan's inputs whose size is its outer extent, where only one is.
  std::string found;
  for (const ir::Node* input : inputs) {
    const std::vector<std::string> symbols = ir::input_symbols(*input);
    if (symbols.empty() || symbols[0].empty() || input->shape.empty() ||
        input->shape[0] != k.outer_extent())
      continue;
    if (!found.empty() && found != "?" + symbols[0]) return "";
    found = "?" + symbols[0];
  }
  return found;
}
}  // namespace

std::string kernels_text(const Plan& plan, const std::vector<const ir::Node*>& inputs) {
  std::string out = fmt::format("# {} kernel{}\n", plan.steps.size(), plan.steps.size() == 1 ? "" : "s");
  for (const PlanStep& step : plan.steps) {
    std::vector<std::string> symbols = size_symbols(plan, step, inputs);
    const std::string outer = outer_symbol(plan, step, inputs);
    out += kernel_block(step.kernel, step.values, symbols, outer);
  }
  return out;
}

std::string facts_text(const Plan& plan) {
  std::string out =
      fmt::format("# {} kernel{}\n", plan.steps.size(), plan.steps.size() == 1 ? "" : "s");
  for (const PlanStep& step : plan.steps)
    out += fmt::format("\n# {}: {}\n{}", step.kernel.name, fmt::join(step.values, " "),
                       step.facts ? kir::facts_text(step.kernel, *step.facts) : "");
  return out;
}

std::string kernel_block(const kir::Kernel& kernel, const std::vector<std::string>& values,
                         const std::vector<std::string>& symbols, const std::string& outer) {
  std::vector<std::string> named;
  if (!outer.empty()) named.push_back("? is " + outer);
  for (size_t s = 0; s < symbols.size(); ++s)
    if (!symbols[s].empty()) named.push_back(fmt::format("size.{} is {}", s, symbols[s]));
  return fmt::format("\n# {}: {}\n{}{}", kernel.name, fmt::join(values, " "),
                     named.empty() ? "" : fmt::format("# {}\n", fmt::join(named, ", ")),
                     kir::print_kernel(kernel));
}

std::string slots_text(const Plan& plan) {
  std::string out =
      fmt::format("# {} slot{}\n", plan.slots.size(), plan.slots.size() == 1 ? "" : "s");
  for (size_t s = 0; s < plan.slots.size(); ++s) {
    const Slot& slot = plan.slots[s];
    out += fmt::format("s{}: {}{}{}\n", s, ir::dtype_name(slot.dtype), ir::shape_str(slot.shape),
                       slot.input_index >= 0 ? fmt::format(" input {}", slot.input_index) : "");
  }
  out += fmt::format("\n# {} step{}\n", plan.steps.size(), plan.steps.size() == 1 ? "" : "s");
  for (const PlanStep& step : plan.steps) {
    std::vector<std::string> args;
    for (size_t p = 0; p < step.args.size(); ++p)
      args.push_back(
          fmt::format("{}s{}", step.kernel.params[p].output ? "out " : "", step.args[p]));
    out += fmt::format("{}({})", step.kernel.name, fmt::join(args, ", "));
    if (!step.release_after.empty())
      out += fmt::format(" then release s{}", fmt::join(step.release_after, " s"));
    for (const InPlace& ip : step.in_place)
      out += fmt::format(" (s{} may be written over s{} when it is donated)", step.args[ip.param],
                         ip.input_slot);
    out += "\n";
  }
  std::vector<std::string> outs;
  for (int s : plan.output_slots) outs.push_back(fmt::format("s{}", s));
  out += fmt::format("\noutputs: {}\n", fmt::join(outs, " "));
  return out;
}

std::string parameters_line(const PlanStep& step) {
  std::vector<std::string> labels;
  for (const kir::Param& p : step.kernel.params) labels.push_back(p.label);
  return fmt::format("parameters: {}", fmt::join(labels, " "));
}

std::string step_header(const PlanStep& step, std::string_view comment) {
  const std::string summary = step.artifact ? step.artifact->summary() : std::string();
  return fmt::format("\n{0} {1}: {2}\n{0} {3}\n{4}", comment, step.kernel.name,
                     fmt::join(step.values, " "), parameters_line(step),
                     summary.empty() ? "" : fmt::format("{} {}\n", comment, summary));
}

std::string_view comment_marker(std::string_view extension) {
  return extension == "ll" || extension == "spvasm" ? ";" : "//";
}

std::string source_text(const Plan& plan, std::string_view extension) {
  const std::string_view c = comment_marker(extension);
  std::string out =
      fmt::format("{} {} kernel{}\n", c, plan.steps.size(), plan.steps.size() == 1 ? "" : "s");
  for (const PlanStep& step : plan.steps) {
    KILN_CHECK(step.artifact) << "source_text needs a compiled plan (" << step.kernel.name << ")";
    out += step_header(step, c) + step.artifact->source();
  }
  return out;
}

}  // namespace kiln::runtime
