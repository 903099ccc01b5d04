// The lowering script: its steps in order, the verifier between them, every example through it.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "ir/kg.h"
#include "passes/beam_search.h"
#include "passes/cost_model.h"
#include "passes/pipeline.h"
#include "tests/passes/test_support.h"

namespace kiln::passes {
namespace {

using ir::DType;
using ir::Op;
using testing::GraphFixture;
using testing::must;

struct Seen {
  int number;
  std::string step;
  size_t kernels;
};

LoweringOptions with(const Fuser* fuser, bool fold = true, bool verify = true) {
  LoweringOptions o;
  o.fuser = fuser;
  o.fold = fold;
  o.verify = verify;
  return o;
}

FusionPlan groups(std::vector<FusedGroup> gs) {
  FusionPlan plan;
  plan.groups = std::move(gs);
  return plan;
}

std::vector<Seen> run_observed(ir::Graph& g, const Outputs& outputs, LoweringOptions options = {}) {
  std::vector<Seen> seen;
  options.verify = true;
  options.observe = [&](int number, const LoweringStep& step, const Lowering& ir) {
    seen.push_back({number, std::string(step.name), ir.kernels.size()});
  };
  auto lowered = run_lowering(g, outputs, options);
  EXPECT_TRUE(lowered.has_value()) << lowered.error().message;
  return seen;
}

TEST(LoweringScript, StepsRunInOrderAndAreNumbered) {
  std::vector<std::string> names;
  for (const LoweringStep& s : lowering_steps()) names.emplace_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"fold_literals", "fold_views", "cse", "split_concats",
                                             "fuse", "lower", "analyze"}));

  GraphFixture f;
  const ir::Node* x = f.g.input(DType::f32, {4, 8}, "x");
  // x * 1 folds in the first round, so a second round runs and changes nothing.
  const ir::Node* y = must(f.b.softmax(f.bin(Op::Mul, x, f.lit(1)), 1));
  std::vector<Seen> seen = run_observed(f.g, {y});
  std::vector<std::string> order;
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].number, static_cast<int>(i) + 1);
    order.push_back(seen[i].step);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"fold_literals", "fold_views", "cse", "fold_literals",
                                             "fold_views", "cse", "split_concats", "fuse", "lower",
                                             "analyze"}));
  EXPECT_EQ(seen.back().kernels, 3u);  // the first fuser: max, sum and the normalized values
  EXPECT_EQ(seen[seen.size() - 3].kernels, 0u) << "fuse runs before lower";
}

TEST(LoweringScript, WithoutFoldingOnlyCseAndTheConcatSplitRun) {
  GraphFixture f;
  const ir::Node* x = f.g.input(DType::f32, {4}, "x");
  std::vector<Seen> seen =
      run_observed(f.g, {f.bin(Op::Mul, x, f.lit(1))}, with(nullptr, /*fold=*/false));
  ASSERT_EQ(seen.size(), 5u);
  EXPECT_EQ(seen[0].step, "cse");
  EXPECT_EQ(seen[1].step, "split_concats");
  EXPECT_EQ(seen[2].step, "fuse");
  EXPECT_EQ(seen[4].step, "analyze");
}

// A fuser that forgets the first output: the verifier after `fuse` names it.
class ForgetfulFuser final : public Fuser {
 public:
  std::string_view name() const override { return "forgetful"; }
  FusionPlan fuse(const Outputs& outputs) const override {
    FusionPlan plan = make_first_fuser()->fuse(outputs);
    plan.groups.erase(plan.groups.begin());
    return plan;
  }
};

TEST(LoweringScript, TheVerifierNamesTheStepThatBrokeTheIr) {
  GraphFixture f;
  const ir::Node* x = f.g.input(DType::f32, {4}, "x");
  const ir::Node* y = f.un(Op::Exp, x);
  ForgetfulFuser forgetful;
  auto broken = run_lowering(f.g, {y}, with(&forgetful));
  ASSERT_FALSE(broken.has_value());
  EXPECT_EQ(
      broken.error().message,
      fmt::format("after step 5, fuse: the IR is malformed: no group writes the output %t{} (Exp)",
                  y->id));
  // Unverified, the same script goes on and lowers nothing.
  auto unchecked = run_lowering(f.g, {y}, with(&forgetful, true, /*verify=*/false));
  ASSERT_TRUE(unchecked.has_value());
  EXPECT_TRUE(unchecked->kernels.empty());
}

TEST(VerifyFusion, FindsUnsoundPlans) {
  GraphFixture f;
  const ir::Node* x = f.g.input(DType::f32, {4}, "x");
  const ir::Node* a = f.un(Op::Exp, x);
  const ir::Node* b = f.un(Op::Log, a);
  FusionPlan twice = groups({{{a}, {a}, {x}}, {{a}, {a}, {x}}});
  EXPECT_EQ(verify_fusion({a}, twice).error().message,
            fmt::format("groups 0 and 1 both write %t{} (Exp)", a->id));
  FusionPlan unready = groups({{{b}, {b}, {a}}, {{a}, {a}, {x}}});
  EXPECT_EQ(verify_fusion({b}, unready).error().message,
            fmt::format("group 0 reads %t{} (Exp), which no earlier group writes", a->id));
  FusionPlan unread = groups({{{b}, {b}, {x}}});
  EXPECT_EQ(verify_fusion({b}, unread).error().message,
            fmt::format(
                "group 0 computes %t{} (Log) from %t{} (Exp), which it neither computes nor reads",
                b->id, a->id));
  FusionPlan foreign = groups({{{a}, {b}, {x}}});
  EXPECT_EQ(verify_fusion({b}, foreign).error().message,
            fmt::format("group 0 writes %t{} (Log), which it does not compute", b->id));
  FusionPlan sound = groups({{{a}, {a}, {x}}, {{b}, {b}, {a}}});
  EXPECT_TRUE(verify_fusion({b}, sound).has_value());
}

// Every example graph goes through the script with the verifier after every step, with the first
// fuser and the beam fuser.
TEST(LoweringScript, EveryExampleVerifiesAfterEveryStep) {
  CostModel model(DeviceRates::reference_cpu());
  auto beam = make_beam_fuser(model);
  auto first = make_first_fuser();
  int graphs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(KILN_SOURCE_DIR "/examples")) {
    if (entry.path().extension() != ".kg") continue;
    for (const Fuser* fuser : {first.get(), beam.get()}) {
      ir::Graph g;
      auto kg = ir::read_kg_file(g, entry.path().string());
      ASSERT_TRUE(kg.has_value()) << kg.error().message;
      Outputs outputs;
      for (const auto& [name, node] : kg->outputs) outputs.push_back(node);
      std::vector<Seen> seen = run_observed(g, outputs, with(fuser));
      ASSERT_FALSE(seen.empty()) << entry.path();
      EXPECT_EQ(seen.back().step, "analyze") << entry.path();
    }
    ++graphs;
  }
  EXPECT_GE(graphs, 10);
}

size_t selects_in(const kir::Kernel& k) {
  size_t n = 0;
  for (const kir::Expr* e : kir::kernel_exprs(k))
    n += e->kind == kir::ExprKind::Alu && e->alu == kir::Alu::Where;
  return n;
}

// A concat of 2000 pieces (an unrolled recurrence's steps, stacked): lowered as one kernel, every
// element was a chain of 1999 selects over 2000 loads (O(n^2) work) in a kernel of 2001 buffers.
// After split_concats, with every fuser, no kernel selects more than kConcatFanIn - 1 times per
// element, and none reads more than kMaxGroupBuffers buffers; the graph keeps its output.
TEST(LoweringScript, AWideConcatIsATreeOfNarrowOnes) {
  CostModel model(DeviceRates::reference_cpu());
  auto beam = make_beam_fuser(model);
  auto first = make_first_fuser();
  auto unfused = make_unfused();
  for (const Fuser* fuser : {beam.get(), first.get(), unfused.get()}) {
    SCOPED_TRACE(fuser->name());
    GraphFixture f;
    std::vector<const ir::Node*> pieces;
    for (int i = 0; i < 2000; ++i)
      pieces.push_back(f.un(Op::Exp, f.g.input(DType::f32, {1, 2, 16}, fmt::format("x{}", i))));
    const ir::Node* y = must(f.b.concat(pieces, 0));
    auto lowered = run_lowering(f.g, {y}, with(fuser));
    ASSERT_TRUE(lowered.has_value()) << lowered.error().message;
    ASSERT_EQ(lowered->outputs.size(), 1u);
    EXPECT_EQ(lowered->outputs[0]->shape, (ir::Shape{2000, 2, 16}));
    size_t selects = 0;
    for (const LoweredKernel& k : lowered->kernels) {
      const size_t inputs =
          static_cast<size_t>(std::count_if(k.kernel.params.begin(), k.kernel.params.end(),
                                            [](const kir::Param& p) { return !p.output; }));
      EXPECT_LE(k.kernel.params.size(), kMaxKernelBuffers) << k.kernel.name << " reads " << inputs;
      const size_t outputs = k.kernel.params.size() - inputs;
      EXPECT_LE(selects_in(k.kernel), outputs * (kConcatFanIn - 1)) << k.kernel.name;
      selects += selects_in(k.kernel);
    }
    // 125 concats of 16, 8 of those (the last of 13), and the root of 8: 125 * 15 + 7 * 15 + 12
    // + 7.
    EXPECT_EQ(selects, 125u * 15 + 7 * 15 + 12 + 7);
  }
  // A narrow concat of a narrow concat along one axis stays one kernel: concat(concat(a, b), c).
  GraphFixture f;
  const ir::Node* a = f.g.input(DType::f32, {2, 3}, "a");
  const ir::Node* inner = must(f.b.concat({a, f.un(Op::Exp, a)}, 0));
  const ir::Node* outer = must(f.b.concat({inner, f.un(Op::Neg, a)}, 0));
  auto first_fuser = make_first_fuser();
  auto lowered = run_lowering(f.g, {outer}, with(first_fuser.get()));
  ASSERT_TRUE(lowered.has_value()) << lowered.error().message;
  ASSERT_EQ(lowered->kernels.size(), 1u);
  EXPECT_EQ(selects_in(lowered->kernels[0].kernel), 2u);
}

// A matrix product whose right operand is all one constant (a slice of padding, 0.5 throughout):
// the matmul pattern's operand is that constant, which the kernel holds without a name. The
// facts' verifier took it for another kernel's expression (a random-graph fuzz seed, 27, of the
// inner-axis families).
TEST(LoweringScript, AMatmulOfAConstantOperandVerifies) {
  constexpr std::string_view kText = R"(kiln.graph v1
input %x : f32[1,9,2]
input %y : f32[1,9,2]
%p = pad(%y, before=[0,0,2], after=[0,0,2], value=0.5)
%s = slice(%p, axis=2, start=4, end=6, step=1)
%t = permute(%s, dims=[0,2,1])
%m = matmul(%x, %t)
%o = tanh(%m)
output %o
)";
  CostModel model(DeviceRates::reference_cpu());
  auto beam = make_beam_fuser(model);
  ir::Graph g;
  auto kg = ir::read_kg(g, kText, "constant_operand.kg");
  ASSERT_TRUE(kg.has_value()) << kg.error().message;
  auto lowered = run_lowering(g, kg->output_nodes(), with(beam.get()));
  ASSERT_TRUE(lowered.has_value()) << lowered.error().message;
  bool matmul = false;
  for (const LoweredKernel& k : lowered->kernels) matmul = matmul || k.facts->matmul.has_value();
  EXPECT_TRUE(matmul) << "the product is recognized as a matmul, its operand the constant";
}

}  // namespace
}  // namespace kiln::passes
