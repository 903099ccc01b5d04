// Dumps of what a realize would run: the graph (a `.kg` file's, or the recipes of pending
// tensors) planned by the device's executor and shown with the runtime's text dumps, as
// `kiln dump` shows them.
#include "frontend/inspect.h"
#include "frontend/kg_call.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <unordered_map>
#include <unordered_set>

#include "ir/kg.h"
#include "runtime/dump_text.h"
#include "runtime/executor.h"
#include "runtime/structural_key.h"
#include "tensor_impl.h"

namespace kiln::detail {

namespace {

constexpr std::array<std::string_view, 5> kStages = {"graph", "groups", "kernels", "analyze",
                                                     "source"};

Expected<runtime::Executor*> executor_of(const std::shared_ptr<DeviceState>& state) {
  if (!state) return make_error("the device is not open");
  auto* executor = dynamic_cast<runtime::Executor*>(state->device.get());
  if (!executor)
    return make_error(
        fmt::format("the {} device interprets graphs and builds no kernels to dump; "
                    "dump on cpu, vulkan:N or cuda:N",
                    state->name));
  return executor;
}

Expected<void> check_stage(std::string_view stage) {
  if (is_dump_stage(stage)) return {};
  return make_error(
      fmt::format("unknown dump stage '{}' (graph, groups, kernels, analyze, source)", stage));
}

// `track`: the kernels are chosen as a realize would (Executor::inspect), after note_sizes.
Expected<std::string> render(runtime::Executor& executor, ir::Graph& g, const Nodes& outputs,
                             const runtime::ValueNamer& names, std::string_view stage, bool why,
                             bool track = false) {
  auto inspected = executor.inspect(g, outputs, /*compile=*/stage == "source", track);
  if (!inspected) return std::unexpected(inspected.error());
  // The executor names values with its device's namer (%t<id>: the ids of `g`); these are the
  // caller's names, in each kernel's values and parameters.
  runtime::Plan plan = **inspected;
  const runtime::ValueNamer namer = runtime::optimized_namer(plan, outputs, names);
  std::unordered_map<std::string, const ir::Node*> by_default_name;
  std::vector<const ir::Node*> roots = plan.optimized_outputs;
  roots.insert(roots.end(), outputs.begin(), outputs.end());
  for (const ir::Node* n : ir::topo_order(roots))
    by_default_name.emplace(runtime::default_value_name(n), n);
  for (size_t k = 0; k < plan.steps.size(); ++k) {
    if (k < plan.fusion.groups.size())
      plan.steps[k].values = runtime::group_values(plan.fusion.groups[k], namer);
    for (kir::Param& p : plan.steps[k].kernel.params)
      if (auto it = by_default_name.find(p.label); it != by_default_name.end())
        p.label = namer(it->second);
  }
  if (stage == "graph")
    return ir::print_kg(
        runtime::optimized_graph(plan, outputs, runtime::structural_key(outputs).inputs, names));
  if (stage == "groups") return runtime::groups_text(plan, namer, executor.cost_model(), why);
  if (stage == "kernels") return runtime::kernels_text(plan, runtime::structural_key(outputs).inputs);
  if (stage == "analyze") return runtime::facts_text(plan);
  return runtime::source_text(plan, executor.target().source_extension());
}

// A pending tensor's recipe, copied under DeviceState::mu (realize publishes under it).
struct Recipe {
  std::shared_ptr<TensorImpl> tensor;
  std::vector<std::shared_ptr<TensorImpl>> deps;
  BuildFn build;  // null: realized, an input of the dump
};

// The recipes `roots` depend on, operands before users (iterative: any chain length fits). The
// tensors in `leaves` are taken as realized (no recipe), pending or not.
std::vector<Recipe> recipes(DeviceState& dev, const std::vector<std::shared_ptr<TensorImpl>>& roots,
                            const std::unordered_set<const TensorImpl*>& leaves = {}) {
  std::vector<Recipe> order;
  std::unordered_set<const TensorImpl*> seen;
  struct Frame {
    Recipe recipe;
    size_t next = 0;
  };
  std::vector<Frame> stack;
  std::lock_guard lock(dev.mu);
  auto visit = [&](std::shared_ptr<TensorImpl> t) {
    if (!seen.insert(t.get()).second) return;
    if (t->buffer || leaves.count(t.get())) {
      order.push_back({std::move(t), {}, nullptr});
      return;
    }
    Recipe r{t, t->deps, t->build};
    stack.push_back({std::move(r), 0});
  };
  for (const auto& root : roots) {
    visit(root);
    while (!stack.empty()) {
      Frame& top = stack.back();
      if (top.next < top.recipe.deps.size()) {
        visit(top.recipe.deps[top.next++]);  // may grow the stack: `top` is not used after this
        continue;
      }
      order.push_back(std::move(top.recipe));
      stack.pop_back();
    }
  }
  return order;
}

// Records `order` (recipes()) into `b`'s graph, each tensor's node into `node_of`: a realized
// tensor's is `leaf(recipe)`, a pending one's its build over its operands' nodes. A tensor with a
// node already (trace_kg's args) keeps it.
template <class Leaf>
Expected<void> record(const std::vector<Recipe>& order, ir::Builder& b,
                      std::unordered_map<const TensorImpl*, const ir::Node*>& node_of, Leaf leaf) {
  for (const Recipe& r : order) {
    if (node_of.count(r.tensor.get())) continue;
    if (!r.build) {
      node_of[r.tensor.get()] = leaf(r);
      continue;
    }
    Nodes operands;
    for (const auto& d : r.deps) operands.push_back(node_of.at(d.get()));
    ir::NodeResult n = r.build(b, operands);
    // Checked when recorded, on inputs of the same dtypes and shapes.
    if (!n) return make_error("an op checked when it was recorded failed: " + n.error().message);
    node_of[r.tensor.get()] = *n;
  }
  return {};
}

}  // namespace

bool is_dump_stage(std::string_view stage) {
  return std::find(kStages.begin(), kStages.end(), stage) != kStages.end();
}

Expected<std::string> dump_kg(const Device& device, const KgFile& file, std::string_view stage,
                              bool why) {
  if (auto ok = check_stage(stage); !ok) return std::unexpected(ok.error());
  auto executor = executor_of(TensorImpl::state_of(device));
  if (!executor) return std::unexpected(executor.error());
  // As its first call does: an inner size symbol's kernels take their sizes at run time.
  note_kg_inner_sizes(device, file);
  // The file's graph is shared and never changed (planning adds nodes): plan a copy.
  ir::Graph g;
  std::vector<const ir::Node*> inputs, outputs;
  for (const auto& [name, node] : file.kg.inputs)
    inputs.push_back(g.input(node->dtype, node->shape, "", ir::input_symbols_attr(ir::input_symbols(*node))));
  for (const auto& [name, node] : file.kg.outputs) outputs.push_back(node);
  const auto copy = copy_kg(file, outputs, g, inputs);
  ir::KgGraph names;
  for (size_t i = 0; i < inputs.size(); ++i)
    names.inputs.emplace_back(file.kg.inputs[i].first, inputs[i]);
  for (const auto& [name, node] : file.kg.outputs) names.outputs.emplace_back(name, copy.at(node));
  for (const auto& [name, node] : file.kg.values)
    if (auto it = copy.find(node); it != copy.end()) names.values.emplace_back(name, it->second);
  for (const ir::Node*& out : outputs) out = copy.at(out);
  return render(**executor, g, outputs, runtime::kg_value_namer(names), stage, why,
                /*track=*/!file.kg.sizes.empty());
}

Expected<std::string> dump_tensors(const std::vector<Tensor>& tensors, std::string_view stage,
                                   bool why) {
  if (auto ok = check_stage(stage); !ok) return std::unexpected(ok.error());
  if (tensors.empty()) return make_error("no tensors to dump");
  std::vector<std::shared_ptr<TensorImpl>> roots;
  for (const Tensor& t : tensors) {
    if (const Error* e = t.error()) return std::unexpected(*e);
    const auto& impl = TensorImpl::impl_of(t);
    if (!roots.empty() && impl->dev != roots.front()->dev)
      return make_error(fmt::format(
          "tensor {} lives on another device than the ones before it ({}); dump each device's "
          "tensors apart",
          roots.size(), two_devices(roots.front()->dev->name, impl->dev->name)));
    roots.push_back(impl);
  }
  const std::shared_ptr<DeviceState>& state = roots.front()->dev;
  auto executor = executor_of(state);
  if (!executor) return std::unexpected(executor.error());
  ir::Graph g;
  ir::Builder b(g);
  std::unordered_map<const TensorImpl*, const ir::Node*> node_of;
  auto recorded = record(recipes(*state, roots), b, node_of, [&](const Recipe& r) {
    std::string symbols;
    {
      std::lock_guard lock(state->mu);
      symbols = ir::input_symbols_attr(r.tensor->symbols);
    }
    return g.input(r.tensor->dtype, r.tensor->shape, "", std::move(symbols));
  });
  if (!recorded) return std::unexpected(recorded.error());
  Nodes outputs;
  for (const auto& t : roots) outputs.push_back(node_of.at(t.get()));
  return render(**executor, g, outputs, nullptr, stage, why);
}

Expected<std::shared_ptr<const KgFile>> trace_kg(const std::vector<Tensor>& outputs,
                                                 const std::vector<Tensor>& args) {
  if (outputs.empty()) return make_error("no outputs to trace");
  std::shared_ptr<DeviceState> state;
  const auto impl_of = [&](const Tensor& t, std::string_view what,
                           size_t i) -> Expected<std::shared_ptr<TensorImpl>> {
    if (const Error* e = t.error())
      return make_error(fmt::format("{} {}: {}", what, i, e->message));
    const std::shared_ptr<TensorImpl>& impl = TensorImpl::impl_of(t);
    if (!impl) return make_error(fmt::format("{} {} is an empty tensor", what, i));
    if (!state) state = impl->dev;
    if (impl->dev != state)
      return make_error(fmt::format("{} {} lives on another device than the ones before it ({})",
                                    what, i, two_devices(state->name, impl->dev->name)));
    return impl;
  };
  std::vector<std::shared_ptr<TensorImpl>> roots;
  for (size_t i = 0; i < outputs.size(); ++i) {
    auto impl = impl_of(outputs[i], "output", i);
    if (!impl) return std::unexpected(impl.error());
    roots.push_back(std::move(*impl));
  }
  auto file = std::make_shared<KgFile>();
  ir::Graph& g = file->graph;
  std::unordered_map<const TensorImpl*, const ir::Node*> node_of;
  std::unordered_set<const TensorImpl*> leaves;
  for (size_t i = 0; i < args.size(); ++i) {
    auto impl = impl_of(args[i], "arg", i);
    if (!impl) return std::unexpected(impl.error());
    if (!leaves.insert(impl->get()).second) {
      const size_t first = static_cast<size_t>(
          std::ranges::find_if(args,
                               [&](const Tensor& t) { return TensorImpl::impl_of(t) == *impl; }) -
          args.begin());
      return make_error(fmt::format("arg {} is arg {} again: each arg is one input", i, first));
    }
    const ir::Node* in = g.input((*impl)->dtype, (*impl)->shape, "", "");
    node_of[impl->get()] = in;
    file->kg.inputs.emplace_back(fmt::format("arg{}", i), in);
  }
  ir::Builder b(g);
  // A tensor realized after the args were made (the traced code called realize() or read a
  // value) may have been computed from them: its value would be captured, as it is now, where
  // each call must compute it from its args. Refused, rather than replaying stale values.
  uint64_t newest_arg = 0;
  for (const Tensor& a : args) newest_arg = std::max(newest_arg, TensorImpl::impl_of(a)->made);
  std::optional<Error> stale;
  std::vector<ir::NamedNode> captured;
  auto recorded = record(recipes(*state, roots, leaves), b, node_of, [&](const Recipe& r) {
    if (!args.empty() && r.tensor->computed > newest_arg && !stale)
      stale = Error{fmt::format(
          "the outputs read a {}{} tensor that was realized after the args were made (the traced "
          "code realized it, or read its value): a trace records ops, so its value would be "
          "replayed as it is now. Realize after the traced code, or pass that tensor as an arg",
          ir::dtype_name(r.tensor->dtype), ir::shape_str(r.tensor->shape))};
    const ir::Node* in = g.input(r.tensor->dtype, r.tensor->shape, "", "");
    captured.emplace_back(fmt::format("captured{}", captured.size()), in);
    file->captured.push_back(TensorImpl::handle(r.tensor));
    return in;
  });
  if (!recorded) return std::unexpected(recorded.error());
  if (stale) return std::unexpected(*stale);
  file->kg.inputs.insert(file->kg.inputs.end(), captured.begin(), captured.end());
  for (size_t i = 0; i < roots.size(); ++i)
    file->kg.outputs.emplace_back(fmt::format("out{}", i), node_of.at(roots[i].get()));
  return file;
}

}  // namespace kiln::detail
