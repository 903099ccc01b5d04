// The shared text dumps and KILN_DUMP from the C++ API: reproducer naming, boundaries, files.
#include <gtest/gtest.h>

#include <cstdlib>

#include "ir/builder.h"
#include "ir/kg.h"
#include "runtime/dump_text.h"
#include "runtime/dump_writer.h"
#include "runtime/planner.h"
#include "tests/dump/run_kiln.h"

namespace kiln::dump_test {
namespace {

namespace fs = std::filesystem;

// y = (a - sum(a, axis 1)) * bias, with `a` unnamed as a framework would record it.
struct Recorded {
  ir::Graph g;
  const ir::Node* a;
  const ir::Node* bias;
  const ir::Node* y;
  Recorded() {
    ir::Builder b(g);
    a = g.input(ir::DType::f32, {4, 8});
    bias = g.input(ir::DType::f32, {8}, "bias");
    const ir::Node* s = *b.reduce(ir::Op::Sum, a, std::vector<int64_t>{1}, true);
    const ir::Node* d = *b.binary(ir::Op::Sub, a, s);
    y = *b.binary(ir::Op::Mul, d, bias);
  }
};

TEST(DumpText, StandaloneGraphNamesUnnamedInputsByPosition) {
  Recorded r;
  ir::KgGraph kg = runtime::standalone_graph({r.y}, {r.a, r.bias}, nullptr);
  std::string text = ir::print_kg(kg);
  EXPECT_EQ(text,
            "kiln.graph v1\n"
            "input %in0 : f32[4,8]\n"
            "input %bias : f32[8]\n"
            // Unnamed values keep the name every other dump and message gives them: %t<id>.
            "%t2 = sum(%in0, axes=[1], keepdim=true)\n"
            "%t3 = sub(%in0, %t2)\n"
            "%out0 = mul(%t3, %bias)\n"
            "output %out0\n");
  ir::Graph g2;
  auto back = ir::read_kg(g2, text, "repro.kg");
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(ir::print_kg(*back), text);
}

TEST(DumpText, BoundariesWithoutAReasonAreListedOnce) {
  Recorded r;
  auto plan = runtime::build_plan(r.g, {r.y}, {r.a, r.bias}, runtime::PlannerOptions{});
  ASSERT_TRUE(plan.has_value()) << plan.error().message;
  passes::FusionPlan fusion = (*plan)->fusion;
  fusion.reasons.clear();
  std::vector<passes::FusionReason> found = runtime::boundary_reasons(fusion);
  ASSERT_EQ(fusion.groups.size() > 1, !found.empty());
  for (const passes::FusionReason& reason : found) {
    EXPECT_EQ(reason.reason, "no reason recorded by the fuser");
    EXPECT_EQ(reason.producer->op, ir::Op::Sum);
  }
  if (found.empty()) return;
  // A recorded reason replaces the placeholder, in the fuser's order.
  fusion.reasons.push_back({found[0].producer, found[0].consumer, "reduce axes differ"});
  std::vector<passes::FusionReason> again = runtime::boundary_reasons(fusion);
  ASSERT_EQ(again.size(), found.size());
  EXPECT_EQ(again[0].reason, "reduce axes differ");
}

TEST(DumpText, NodeStatementPrintsLiteralsAttributesAndType) {
  ir::Graph g;
  ir::Builder b(g);
  const ir::Node* x = g.input(ir::DType::f32, {2, 3}, "x");
  const ir::Node* two = *b.scalar(2.5, ir::DType::f32);
  const ir::Node* y = *b.binary(ir::Op::Mul, x, two);
  const ir::Node* p = *b.permute(y, {1, 0});
  runtime::ValueNamer namer = [&](const ir::Node* n) { return n == y ? std::string("%y") : runtime::default_value_name(n); };
  EXPECT_EQ(runtime::node_statement(y, namer), "%y = mul(%x, 2.5) : f32[2,3]");
  EXPECT_EQ(runtime::node_statement(p, namer), "%t" + std::to_string(p->id) + " = permute(%y, dims=[1,0]) : f32[3,2]");
  EXPECT_FALSE(runtime::is_shown_op(two));
  EXPECT_FALSE(runtime::is_shown_op(x));
}

// PlannerOptions::dump_dir (DeviceOptions::dump_dir, KILN_DUMP read at the edge): every build
// writes there; the environment variable alone does not reach a planner built by hand.
TEST(DumpText, EveryPlanBuildWritesIntoItsDumpDirectory) {
  fs::path dir = fs::temp_directory_path() / ("kiln_dump_api_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  Recorded r;
  ::setenv("KILN_DUMP", dir.c_str(), 1);
  auto unset = runtime::build_plan(r.g, {r.y}, {r.a, r.bias}, runtime::PlannerOptions{});
  ::unsetenv("KILN_DUMP");
  ASSERT_TRUE(unset.has_value());
  EXPECT_FALSE(fs::exists(dir)) << "no layer reads the environment";
  runtime::PlannerOptions options;
  options.dump_dir = dir.string();
  auto plan = runtime::build_plan(r.g, {r.y}, {r.a, r.bias}, options);
  auto plan2 = runtime::build_plan(r.g, {r.y}, {r.a, r.bias}, options);
  ASSERT_TRUE(plan && plan2);
  std::string repro = read_text(dir / "graph-0001.kg");
  EXPECT_EQ(repro.rfind("kiln.graph v1\ninput %in0 : f32[4,8]\ninput %bias : f32[8]\n", 0), 0u) << repro;
  EXPECT_EQ(read_text(dir / "graph-0002.kg"), repro);
  EXPECT_EQ(read_text(dir / "graph-0001.kernels.txt"), runtime::kernels_text(**plan));
  EXPECT_NE(read_text(dir / "graph-0001.groups.txt").find("\nwhy ("), std::string::npos);
  EXPECT_TRUE(fs::exists(dir / "graph-0001.optimized.kg"));
  EXPECT_FALSE(fs::exists(dir / "graph-0001.source.ll")) << "the plan was not compiled";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::dump_test
