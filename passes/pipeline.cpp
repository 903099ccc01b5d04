// The lowering script (passes/pipeline.h): the steps, the verifier between them, the observer.
#include "passes/pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/kernel_facts.h"
#include "ir/verify.h"

namespace kiln::passes {

namespace {

constexpr LoweringStep kSteps[] = {
    {"fold_literals", IrLevel::graph,
     "literal folding and identities (x*1, x+0, where of a literal)"},
    {"fold_views", IrLevel::graph, "chains of views collapse, identity views go"},
    {"cse", IrLevel::graph, "structurally equal subgraphs merge"},
    {"split_concats", IrLevel::graph,
     "a concat of more than 16 operands becomes a tree of concats of at most 16"},
    {"fuse", IrLevel::groups, "the fuser partitions the graph into groups, one per kernel"},
    {"lower", IrLevel::kernels, "each group becomes a kernel: loads, ALU ops, reductions, stores"},
    {"analyze", IrLevel::facts,
     "what backends ask of each kernel: free variables, matmul pattern, row reuse, loop cuts"},
};

const LoweringStep& step_named(std::string_view name) {
  for (const LoweringStep& s : kSteps)
    if (s.name == name) return s;
  KILN_CHECK(false) << "no lowering step '" << name << "'";
  return kSteps[0];
}

// Numbers the steps as they run, verifies what each left and shows it to the observer.
class Script {
 public:
  Script(const LoweringOptions& options, Lowering& ir) : options_(options), ir_(ir) {}

  Expected<void> after(std::string_view name) {
    const LoweringStep& step = step_named(name);
    ++number_;
    if (options_.verify)
      if (auto ok = verify(step.produces); !ok)
        return make_error(fmt::format("after step {}, {}: the IR is malformed: {}", number_,
                                      step.name, ok.error().message));
    if (options_.observe) options_.observe(number_, step, ir_);
    return {};
  }

 private:
  Expected<void> verify(IrLevel level) const {
    switch (level) {
      case IrLevel::graph:
        return ir::verify_graph(ir_.outputs);
      case IrLevel::groups:
        return verify_fusion(ir_.outputs, ir_.fusion);
      case IrLevel::kernels:
        for (const LoweredKernel& k : ir_.kernels)
          if (auto ok = kir::verify_kernel(k.kernel); !ok) return ok;
        return {};
      case IrLevel::facts:
        for (const LoweredKernel& k : ir_.kernels) {
          if (!k.facts) return make_error(fmt::format("kernel {} has no facts", k.kernel.name));
          if (auto ok = kir::verify_facts(k.kernel, *k.facts); !ok) return ok;
        }
        return {};
    }
    return {};
  }

  const LoweringOptions& options_;
  Lowering& ir_;
  int number_ = 0;
};

std::string node_text(const ir::Node* n) {
  return fmt::format("%t{} ({})", n->id, ir::op_enum_name(n->op));
}

bool recomputed(const ir::Node* n) {
  return ir::op_kind(n->op) == ir::OpKind::Source;
}

}  // namespace

std::span<const LoweringStep> lowering_steps() {
  return kSteps;
}

const Fuser& default_fuser() {
  static const std::unique_ptr<Fuser> fuser = make_first_fuser();
  return *fuser;
}

Expected<void> verify_fusion(const Outputs& outputs, const FusionPlan& fusion) {
  if (!fusion.costs.empty() && fusion.costs.size() != fusion.groups.size())
    return make_error(
        fmt::format("{} groups but {} cost estimates", fusion.groups.size(), fusion.costs.size()));
  std::unordered_map<const ir::Node*, size_t> writer;  // node -> the group that writes it
  for (size_t k = 0; k < fusion.groups.size(); ++k) {
    const FusedGroup& group = fusion.groups[k];
    if (group.outputs.empty()) return make_error(fmt::format("group {} writes nothing", k));
    const std::unordered_set<const ir::Node*> inside(group.nodes.begin(), group.nodes.end());
    const std::unordered_set<const ir::Node*> reads(group.inputs.begin(), group.inputs.end());
    for (const ir::Node* in : group.inputs) {
      auto w = writer.find(in);
      if (in->op != ir::Op::Input && w == writer.end())
        return make_error(
            fmt::format("group {} reads {}, which no earlier group writes", k, node_text(in)));
    }
    for (const ir::Node* n : group.nodes)
      for (const ir::Node* operand : n->inputs)
        if (!inside.contains(operand) && !reads.contains(operand) && !recomputed(operand))
          return make_error(
              fmt::format("group {} computes {} from {}, which it neither computes nor reads", k,
                          node_text(n), node_text(operand)));
    for (const ir::Node* o : group.outputs) {
      if (!inside.contains(o))
        return make_error(
            fmt::format("group {} writes {}, which it does not compute", k, node_text(o)));
      if (auto [it, fresh] = writer.emplace(o, k); !fresh)
        return make_error(
            fmt::format("groups {} and {} both write {}", it->second, k, node_text(o)));
    }
  }
  for (const ir::Node* o : outputs)
    if (o->op != ir::Op::Input && !writer.contains(o))
      return make_error(fmt::format("no group writes the output {}", node_text(o)));
  return {};
}

Expected<Lowering> run_lowering(ir::Graph& g, const Outputs& outputs,
                                const LoweringOptions& options) {
  Lowering ir;
  ir.outputs = outputs;
  Script script(options, ir);

  // Graph IR: fold_literals, fold_views, cse, in rounds until one changes nothing.
  OptimizeOptions simplify{.fold = options.fold,
                           .after_step = [&](std::string_view step, const Outputs& now) {
                             ir.outputs = now;
                             return script.after(step);
                           }};
  auto simplified = optimize_steps(g, outputs, simplify);
  if (!simplified) return std::unexpected(simplified.error());
  ir.outputs = *simplified;
  ir.outputs = split_wide_concats(g, ir.outputs);
  if (auto ok = script.after("split_concats"); !ok) return std::unexpected(ok.error());

  // Fused groups.
  const Fuser& fuser = options.fuser ? *options.fuser : default_fuser();
  ir.fusion = fuser.fuse(ir.outputs);
  if (auto ok = script.after("fuse"); !ok) return std::unexpected(ok.error());

  // Kernel IR.
  for (size_t k = 0; k < ir.fusion.groups.size(); ++k) {
    auto lowered = lower_group(ir.fusion.groups[k], fmt::format("k{}", k));
    if (!lowered) return std::unexpected(lowered.error());
    if (options.label)
      for (size_t p = 0; p < lowered->params.size(); ++p)
        lowered->kernel.params[p].label = options.label(lowered->params[p]);
    ir.kernels.push_back(std::move(*lowered));
  }
  if (auto ok = script.after("lower"); !ok) return std::unexpected(ok.error());

  // What backends ask of each kernel, once, for codegen and the dumps.
  for (LoweredKernel& k : ir.kernels)
    k.facts = std::make_shared<const kir::KernelFacts>(kir::analyze_kernel(k.kernel));
  if (auto ok = script.after("analyze"); !ok) return std::unexpected(ok.error());
  return ir;
}

}  // namespace kiln::passes
