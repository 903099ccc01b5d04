// If, Loop and Scan, imported by specializing them at import (onnx/ops_control.cpp): the branch a
// known condition selects, loops unrolled while their conditions are known, scans unrolled over
// their sequence, with bodies that read the enclosing graph's values; and the errors when a
// condition is not known, a loop runs too long, or subgraphs nest too deep. And sequences
// (import-time lists, onnx/ops_sequence.cpp) in and out of a model, and their errors.
#include <gtest/gtest.h>

#include "interp/reference.h"
#include "onnx/importer.h"
#include "tests/onnx/proto_writer.h"

namespace kiln::onnx {
namespace {

using namespace proto_writer;

// Imports `bytes` with x given as graph input (not a known value), runs the output named `out`
// with the reference interpreter on x, and returns it.
Expected<ir::HostTensor> run(const std::string& bytes, const ir::HostTensor& x, size_t out = 0) {
  ir::Graph g;
  auto m = import_model(g, bytes);
  if (!m) return std::unexpected(m.error());
  std::unordered_map<const ir::Node*, ir::HostTensor> bind;
  for (const auto& [name, node] : m->graph.inputs)
    bind.emplace(node, name == "x" ? x : m->constants.at(name));
  auto values = interp::evaluate_reference({m->graph.outputs.at(out).second}, bind);
  if (!values) return std::unexpected(values.error());
  return (*values)[0];
}

std::vector<double> values_of(const ir::HostTensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get(i));
  return v;
}

// If(cond) { x + 1 } else { x * 2 }: both branches read the graph input x, which is not known.
std::string if_model(bool cond) {
  Msg then_g = graph({node("Add", {"x", "one"}, {"t"}, "add")}, {}, {value_info("t", kFloat, {3})},
                     {f32_tensor("one", {}, {1})}, "then");
  Msg else_g = graph({node("Mul", {"x", "two"}, {"e"}, "mul")}, {}, {value_info("e", kFloat, {3})},
                     {f32_tensor("two", {}, {2})}, "else");
  return model({node("If", {"c"}, {"y"}, "if", {graph_attr("then_branch", then_g), graph_attr("else_branch", else_g)})},
               {value_info("x", kFloat, {3})}, {value_info("y", kFloat, {3})}, {bool_tensor("c", cond)});
}

TEST(OnnxControlFlow, IfImportsTheBranchItsKnownConditionSelects) {
  const ir::HostTensor x = f32({3}, {1, 2, 3});
  auto taken = run(if_model(true), x);
  ASSERT_TRUE(taken) << taken.error().message;
  EXPECT_EQ(values_of(*taken), (std::vector<double>{2, 3, 4}));
  auto other = run(if_model(false), x);
  ASSERT_TRUE(other) << other.error().message;
  EXPECT_EQ(values_of(*other), (std::vector<double>{2, 4, 6}));
}

TEST(OnnxControlFlow, AnUnknownConditionIsUnsupportedAndNamed) {
  Msg then_g = graph({node("Identity", {"x"}, {"t"}, "id")}, {}, {value_info("t", kFloat, {3})});
  std::string bytes = model({node("If", {"c"}, {"y"}, "if", {graph_attr("then_branch", then_g), graph_attr("else_branch", then_g)})},
                            {value_info("x", kFloat, {3}), value_info("c", kBool, {})}, {value_info("y", kFloat, {3})});
  ir::Graph g;
  auto m = import_model(g, bytes);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("onnx: node 0 'if' (If): unsupported: If's condition must be known at import"),
            std::string::npos)
      << m.error().message;
}

// Loop(M, cond, y = x): body(i, c, y) -> (i < stop, y + i, y + i as a scan output).
std::string loop_model(int64_t trips, int64_t stop) {
  Msg body = graph({node("Cast", {"i"}, {"fi"}, "cast", {int_attr("to", kFloat)}),
                    node("Add", {"y_in", "fi"}, {"y_out"}, "add"),
                    node("Identity", {"y_out"}, {"scan"}, "copy"),
                    node("Less", {"i", "stop"}, {"c_out"}, "less")},
                   {value_info("i", kInt64, {}), value_info("c_in", kBool, {}), value_info("y_in", kFloat, {2})},
                   {value_info("c_out", kBool, {}), value_info("y_out", kFloat, {2}), value_info("scan", kFloat, {2})},
                   {i64_tensor("stop", {}, {stop})}, "body");
  return model({node("Loop", {"m", "", "x"}, {"y", "ys"}, "loop", {graph_attr("body", body)})},
               {value_info("x", kFloat, {2})},
               {value_info("y", kFloat, {2}), sym_value_info("ys", kFloat, {"trips", "2"})},
               {i64_tensor("m", {}, {trips})});
}

TEST(OnnxControlFlow, LoopsUnrollUntilTheirTripCountOrCondition) {
  const ir::HostTensor x = f32({2}, {10, 20});
  // Three trips: y = x + 0 + 1 + 2, and the scan output holds each step's y.
  auto y = run(loop_model(3, 100), x, 0);
  ASSERT_TRUE(y) << y.error().message;
  EXPECT_EQ(values_of(*y), (std::vector<double>{13, 23}));
  auto ys = run(loop_model(3, 100), x, 1);
  ASSERT_TRUE(ys) << ys.error().message;
  EXPECT_EQ(ys->shape, (ir::Shape{3, 2}));
  EXPECT_EQ(values_of(*ys), (std::vector<double>{10, 20, 11, 21, 13, 23}));
  // The body's condition (i < 1) stops it after iteration 1, before the trip count.
  auto early = run(loop_model(100, 1), x, 1);
  ASSERT_TRUE(early) << early.error().message;
  EXPECT_EQ(values_of(*early), (std::vector<double>{10, 20, 11, 21}));
}

TEST(OnnxControlFlow, ALoopTooLongToUnrollIsUnsupported) {
  ir::Graph g;
  auto m = import_model(g, loop_model(1'000'000, 1'000'000));
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("unsupported: Loop runs more than 4096 iterations"), std::string::npos)
      << m.error().message;
}

TEST(OnnxControlFlow, ErrorsInsideABodySayWhere) {
  Msg body = graph({node("Frobnicate", {"y_in"}, {"y_out"}, "frob")},
                   {value_info("i", kInt64, {}), value_info("c_in", kBool, {}), value_info("y_in", kFloat, {2})},
                   {value_info("c_in", kBool, {}), value_info("y_out", kFloat, {2})}, {}, "body");
  std::string bytes = model({node("Loop", {"m", "", "x"}, {"y"}, "loop", {graph_attr("body", body)})},
                            {value_info("x", kFloat, {2})}, {value_info("y", kFloat, {2})}, {i64_tensor("m", {}, {2})});
  ir::Graph g;
  auto m = import_model(g, bytes);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find(
                "onnx: node 0 'loop' (Loop) body, iteration 0: node 0 'frob' (Frobnicate): unsupported: op Frobnicate"),
            std::string::npos)
      << m.error().message;
}

// Scan over x [4, 2] along axis 0, last row first: body(s, row) -> (s + row, s + row), the scan
// output stacked along axis 1.
TEST(OnnxControlFlow, ScanRunsItsDirectionsAndAxes) {
  Msg body = graph({node("Add", {"s_in", "row"}, {"s_out"}, "add"), node("Identity", {"s_out"}, {"o"}, "copy")},
                   {value_info("s_in", kFloat, {2}), value_info("row", kFloat, {2})},
                   {value_info("s_out", kFloat, {2}), value_info("o", kFloat, {2})}, {}, "body");
  std::string bytes = model(
      {node("Scan", {"s0", "x"}, {"s", "out"}, "scan",
            {graph_attr("body", body), int_attr("num_scan_inputs", 1), ints_attr("scan_input_directions", {1}),
             ints_attr("scan_output_axes", {1})})},
      {value_info("x", kFloat, {4, 2})}, {value_info("s", kFloat, {2}), value_info("out", kFloat, {2, 4})},
      {f32_tensor("s0", {2}, {0, 100})});
  const ir::HostTensor x = f32({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto s = run(bytes, x, 0);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(values_of(*s), (std::vector<double>{16, 120}));
  auto out = run(bytes, x, 1);
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(out->shape, (ir::Shape{2, 4}));
  // Running sums of rows 3, 2, 1, 0, each a column.
  EXPECT_EQ(values_of(*out), (std::vector<double>{7, 12, 15, 16, 108, 114, 118, 120}));
}

TEST(OnnxControlFlow, SubgraphsNestedTooDeepAreAParseError) {
  const Msg leaf = graph({node("Identity", {"x"}, {"t"}, "id")}, {}, {value_info("t", kFloat, {3})});
  Msg inner = leaf;
  for (int depth = 0; depth < 20; ++depth)
    inner = graph({node("If", {"c"}, {"t"}, "if", {graph_attr("then_branch", inner), graph_attr("else_branch", leaf)})},
                  {}, {value_info("t", kFloat, {3})});
  Msg top = Msg().varint(1, 8).msg(8, Msg().bytes(1, "").varint(2, 17)).msg(7, inner);
  ir::Graph g;
  auto m = import_model(g, top.b);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("subgraphs nested deeper than 16 levels"), std::string::npos) << m.error().message;
}

// SequenceConstruct(x, x + 1, x * 2), then SequenceInsert at 1 and SequenceErase of the last:
// the output sequence's tensors are outputs named y[0], y[1], y[2]; SequenceAt(-1) and
// SequenceLength read it.
TEST(OnnxSequences, ASequenceOutputIsItsTensorsByFlatName) {
  std::string bytes = model(
      {node("Add", {"x", "one"}, {"x1"}, "add"), node("Mul", {"x", "two"}, {"x2"}, "mul"),
       node("SequenceConstruct", {"x", "x1", "x2"}, {"s"}, "make"),
       node("SequenceInsert", {"s", "x2", "pos"}, {"s2"}, "insert"),
       node("SequenceErase", {"s2"}, {"y"}, "erase"), node("SequenceAt", {"y", "last"}, {"at"}, "at"),
       node("SequenceLength", {"y"}, {"n"}, "length")},
      {value_info("x", kFloat, {2})},
      {seq_value_info("y", kFloat), value_info("at", kFloat, {2}), value_info("n", kInt64, {})},
      {f32_tensor("one", {}, {1}), f32_tensor("two", {}, {2}), i64_tensor("pos", {}, {1}), i64_tensor("last", {}, {-1})});
  ir::Graph g;
  auto m = import_model(g, bytes);
  ASSERT_TRUE(m) << m.error().message;
  std::vector<std::string> names;
  for (const auto& [name, node] : m->graph.outputs) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"y[0]", "y[1]", "y[2]", "at", "n"}));
  ASSERT_TRUE(m->output_structures.contains("y"));
  EXPECT_EQ(flat_names("y", m->output_structures.at("y")), (std::vector<std::string>{"y[0]", "y[1]", "y[2]"}));
  const ir::HostTensor x = f32({2}, {3, 4});
  std::vector<std::vector<double>> want = {{3, 4}, {6, 8}, {4, 5}, {4, 5}, {3}};
  for (size_t i = 0; i < want.size(); ++i) {
    auto v = run(bytes, x, i);
    ASSERT_TRUE(v) << v.error().message;
    EXPECT_EQ(values_of(*v), want[i]) << names[i];
  }
}

TEST(OnnxSequences, SequenceInputsAreGivenFlatAndMisuseIsNamed) {
  std::string bytes = model({node("SequenceAt", {"s", "pos"}, {"y"}, "at")}, {seq_value_info("s", kFloat)},
                            {value_info("y", kFloat, {2})}, {i64_tensor("pos", {}, {1})});
  ir::Graph g;
  // Without its value, a sequence input cannot be imported.
  auto missing = import_model(g, bytes);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("graph input 's' is a sequence: give its value"), std::string::npos)
      << missing.error().message;
  // Given as s[0], s[1]: they are the graph's inputs, and SequenceAt(1) reads s[1].
  ImportOptions options;
  options.input_structures["s"] = Structure{TypeKind::sequence, {Structure{}, Structure{}}};
  options.input_values["s[0]"] = f32({2}, {1, 2});
  options.input_values["s[1]"] = f32({2}, {3, 4});
  auto m = import_model(g, bytes, options);
  ASSERT_TRUE(m) << m.error().message;
  ASSERT_EQ(m->graph.inputs.size(), 2u);
  EXPECT_EQ(m->graph.inputs[1].first, "s[1]");
  EXPECT_EQ(m->graph.outputs[0].second, m->graph.inputs[1].second);
  // A position past the end, and a sequence where a tensor belongs, are errors naming the node.
  options.input_structures["s"].items.pop_back();
  auto short_seq = import_model(g, bytes, options);
  ASSERT_FALSE(short_seq);
  EXPECT_NE(short_seq.error().message.find("onnx: node 0 'at' (SequenceAt): position 1 is out of range for a sequence of 1"),
            std::string::npos)
      << short_seq.error().message;
  std::string misuse = model({node("Relu", {"s"}, {"y"}, "relu")}, {seq_value_info("s", kFloat)},
                             {value_info("y", kFloat, {2})});
  auto wrong_kind = import_model(g, misuse, options);
  ASSERT_FALSE(wrong_kind);
  EXPECT_NE(wrong_kind.error().message.find("'s' is a sequence where a tensor is expected"), std::string::npos)
      << wrong_kind.error().message;
}

}  // namespace
}  // namespace kiln::onnx
