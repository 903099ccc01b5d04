// The ONNX importer on small models written here byte by byte: what it builds, and its errors
// (unsupported op or attribute, malformed bytes, inputs of the wrong shape, unknown operands).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <tuple>

#include "interp/reference.h"
#include "onnx/importer.h"
#include "tests/onnx/proto_writer.h"
#include "tests/support/shell.h"
#include "tools/npy.h"

namespace kiln::onnx {
namespace {

using namespace proto_writer;

TEST(OnnxImporter, AddsAnInitializerWithBroadcasting) {
  std::string bytes = model({node("Add", {"x", "w"}, {"y"}, "add0")},
                            {value_info("x", kFloat, {2, 3})}, {value_info("y", kFloat, {2, 3})},
                            {f32_tensor("w", {3}, {10, 20, 30})});
  ir::Graph g;
  auto m = import_model(g, bytes);
  ASSERT_TRUE(m) << m.error().message;
  ASSERT_EQ(m->graph.outputs.size(), 1u);
  EXPECT_EQ(m->graph.outputs[0].second->shape, (ir::Shape{2, 3}));
  ASSERT_EQ(m->graph.inputs.size(), 2u);  // x, then the initializer w
  EXPECT_EQ(m->graph.inputs[0].first, "x");
  EXPECT_EQ(m->graph.inputs[1].first, "w");
  ASSERT_TRUE(m->constants.contains("w"));
  std::unordered_map<const ir::Node*, ir::HostTensor> bind{
      {m->graph.inputs[0].second, f32({2, 3}, {1, 2, 3, 4, 5, 6})},
      {m->graph.inputs[1].second, m->constants.at("w")}};
  auto out = interp::evaluate_reference({m->graph.outputs[0].second}, bind);
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ((*out)[0].get(0), 11);
  EXPECT_EQ((*out)[0].get(5), 36);
}

TEST(OnnxImporter, FoldsShapeComputationsAtImport) {
  // y = Reshape(x, Concat(Shape(x)[0:1], [-1])) : shape arithmetic evaluated at import.
  Msg minus1;
  minus1.varint(1, 1).varint(2, kInt64).bytes(8, "m1");
  int64_t v = -1;
  minus1.bytes(9, std::string_view(reinterpret_cast<const char*>(&v), 8));
  std::string bytes = model(
      {node("Shape", {"x"}, {"s"}, "shape", {int_attr("end", 1)}),
       node("Constant", {}, {"c"}, "const", {Msg().bytes(1, "value").msg(5, minus1).varint(20, 4)}),
       node("Concat", {"s", "c"}, {"t"}, "concat", {int_attr("axis", 0)}),
       node("Reshape", {"x", "t"}, {"y"}, "reshape")},
      {value_info("x", kFloat, {2, 3, 4})}, {unshaped_value_info("y", kFloat)});
  ir::Graph g;
  auto m = import_model(g, bytes);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->graph.outputs[0].second->shape, (ir::Shape{2, 12}));
  EXPECT_EQ(m->graph.inputs.size(), 1u);  // nothing but x: the shape was folded away
}

// Folding keeps int64 exact past 2^53: INT64_MAX, a slice's "to the end", through Concat and
// Split is still INT64_MAX (it wrapped to INT64_MIN through a double, an empty slice), and a sum
// of initializers past 2^53 is the exact sum.
TEST(OnnxImporter, FoldingKeepsInt64PastTwoTo53Exact) {
  std::string bytes = model(
      {node("Concat", {"s", "e"}, {"se"}, "cat", {int_attr("axis", 0)}),
       node("Split", {"se"}, {"s2", "e2"}, "split", {int_attr("axis", 0)}),
       node("Slice", {"x", "s2", "e2", "ax"}, {"y"}, "slice"),
       node("Add", {"a", "b"}, {"c"}, "add")},
      {value_info("x", kFloat, {6})}, {value_info("y", kFloat, {5}), value_info("c", kInt64, {2})},
      {i64_tensor("s", {1}, {1}), i64_tensor("e", {1}, {INT64_MAX}), i64_tensor("ax", {1}, {0}),
       i64_tensor("a", {2}, {(int64_t{1} << 53) + 1, INT64_MAX}), i64_tensor("b", {2}, {2, 1})},
      /*opset=*/13);
  ir::Graph g;
  auto m = import_model(g, bytes);
  ASSERT_TRUE(m) << m.error().message;
  ASSERT_EQ(m->graph.outputs.size(), 2u);
  EXPECT_EQ(m->graph.outputs[0].second->shape, (ir::Shape{5}));
  std::unordered_map<const ir::Node*, ir::HostTensor> bind;
  for (const auto& [name, node] : m->graph.inputs)
    bind.emplace(node, name == "x" ? f32({6}, {0, 1, 2, 3, 4, 5}) : m->constants.at(name));
  auto out =
      interp::evaluate_reference({m->graph.outputs[0].second, m->graph.outputs[1].second}, bind);
  ASSERT_TRUE(out) << out.error().message;
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ((*out)[0].get(i), i + 1) << i;
  int64_t sums[2] = {0, 0};
  std::memcpy(sums, (*out)[1].bytes.data(), sizeof sums);
  EXPECT_EQ(sums[0], (int64_t{1} << 53) + 3);
  EXPECT_EQ(sums[1], INT64_MIN);  // wraps, as the kernels' i64 arithmetic does
}

TEST(OnnxImporter, UnsupportedOpNamesOpAndNode) {
  std::string bytes = model({node("Relu", {"x"}, {"r"}, "first"), node("Frobnicate", {"r"}, {"y"}, "frob")},
                            {value_info("x", kFloat, {4})}, {value_info("y", kFloat, {4})});
  ir::Graph g;
  auto m = import_model(g, bytes);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().message, "onnx: node 1 'frob' (Frobnicate): unsupported: op Frobnicate (opset 17)");
}

TEST(OnnxImporter, UnsupportedAttributeIsNamed) {
  std::string bytes = model({node("Relu", {"x"}, {"y"}, "r", {int_attr("frobnication", 3)})},
                            {value_info("x", kFloat, {4})}, {value_info("y", kFloat, {4})});
  ir::Graph g;
  auto m = import_model(g, bytes);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().message, "onnx: node 0 'r' (Relu): unsupported: attribute 'frobnication' of Relu");
}

// An attribute of another type than the op's (onnx.checker refuses it) is an error naming both:
// read as the field the importer wants, it was a 0 (LeakyRelu's alpha given as INT 1 ran as a
// Relu; Softmax's axis given as a STRING ran over axis 0).
TEST(OnnxImporter, AnAttributeOfAnotherTypeIsAnError) {
  const Msg alpha_int = int_attr("alpha", 1);
  const Msg axis_string = Msg().bytes(1, "axis").bytes(4, "zz").varint(20, 3);
  const Msg axes_int = int_attr("perm", 1);
  const struct {
    Msg node;
    std::string message;
  } cases[] = {
      {node("LeakyRelu", {"x"}, {"y"}, "l", {alpha_int}),
       "onnx: node 0 'l' (LeakyRelu): attribute 'alpha' is INT, expected FLOAT"},
      {node("Softmax", {"x"}, {"y"}, "s", {axis_string}),
       "onnx: node 0 's' (Softmax): attribute 'axis' is STRING, expected INT"},
      {node("Transpose", {"x"}, {"y"}, "t", {axes_int}),
       "onnx: node 0 't' (Transpose): attribute 'perm' is INT, expected INTS"},
  };
  for (const auto& c : cases) {
    ir::Graph g;
    auto m = import_model(
        g, model({c.node}, {value_info("x", kFloat, {4})}, {value_info("y", kFloat, {4})}));
    ASSERT_FALSE(m) << c.message;
    EXPECT_EQ(m.error().message, c.message);
  }
  // An attribute whose type is left unset (0, as old exporters wrote it) is read as any.
  Msg untyped = Msg().bytes(1, "alpha");
  const float half = 0.5f;
  untyped.b += char(0x15);  // field 2 (f), wire type 5; no field 20 (type)
  untyped.b.append(reinterpret_cast<const char*>(&half), 4);
  ir::Graph g;
  auto unset =
      import_model(g, model({node("LeakyRelu", {"x"}, {"y"}, "l", {untyped})},
                            {value_info("x", kFloat, {4})}, {value_info("y", kFloat, {4})}));
  EXPECT_TRUE(unset) << unset.error().message;
}

// An input that the op does not take (ONNX ops have fixed arities) is a model error: ignored,
// Add(x, x, y) computed x + x and Where(c, c, c, a, b) gave a bool result.
TEST(OnnxImporter, AnInputTheOpDoesNotTakeIsAnError) {
  ir::Graph g;
  auto m = import_model(g, model({node("Add", {"x", "x", "y"}, {"z"}, "add")},
                                 {value_info("x", kFloat, {4}), value_info("y", kFloat, {4})},
                                 {value_info("z", kFloat, {4})}));
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().message, "onnx: node 0 'add' (Add): input 2 ('y') is not one Add takes");
  ir::Graph g2;
  auto ok = import_model(g2, model({node("Add", {"x", "y"}, {"z"}, "add")},
                                   {value_info("x", kFloat, {4}), value_info("y", kFloat, {4})},
                                   {value_info("z", kFloat, {4})}));
  EXPECT_TRUE(ok) << ok.error().message;
}

// Operand values ONNX rules out are errors that say which: a negative Split length (8 and -2 add
// up to 6, and the parts came out as [6] and [0]), OneHot's depth of -1 (an empty result) or NaN
// (a size of -2^63 in a reshape's message).
TEST(OnnxImporter, SplitLengthsAndOneHotDepthMustBePositive) {
  ir::Graph g;
  auto split = import_model(
      g, model({node("Split", {"x", "s"}, {"a", "b"}, "split")}, {value_info("x", kFloat, {6})},
               {value_info("a", kFloat, {}), value_info("b", kFloat, {})},
               {i64_tensor("s", {2}, {8, -2})}, 13));
  ASSERT_FALSE(split);
  EXPECT_EQ(split.error().message,
            "onnx: node 0 'split' (Split): 'split' holds -2, a negative length");
  for (float depth : {-1.0f, 0.0f, std::nanf("")}) {
    ir::Graph h;
    auto one_hot =
        import_model(h, model({node("OneHot", {"i", "d", "v"}, {"y"}, "oh")},
                              {value_info("i", kInt64, {3})}, {unshaped_value_info("y", kFloat)},
                              {f32_tensor("d", {}, {depth}), f32_tensor("v", {2}, {0, 1})}, 11));
    ASSERT_FALSE(one_hot) << depth;
    EXPECT_EQ(one_hot.error().message,
              fmt::format("onnx: node 0 'oh' (OneHot): depth is {}; it must be a positive number",
                          depth));
  }
}

TEST(OnnxImporter, PadModesAreCheckedAgainstTheOpset) {
  auto error_of = [](std::string_view mode_name, int opset) {
    Msg mode = Msg().bytes(1, "mode").bytes(4, mode_name).varint(20, 3);
    std::string bytes = model({node("Pad", {"x", "p"}, {"y"}, "pad", {mode})},
                              {value_info("x", kFloat, {4}), value_info("p", kInt64, {2})},
                              {value_info("y", kFloat, {6})}, {}, opset);
    ir::Graph g;
    auto m = import_model(g, bytes);
    return m ? std::string("imported") : m.error().message;
  };
  EXPECT_EQ(error_of("wrap", 17),
            "onnx: node 0 'pad' (Pad): Pad mode 'wrap' is opset 19's, not 17's");
  EXPECT_EQ(
      error_of("circular", 19),
      "onnx: node 0 'pad' (Pad): Pad: unknown mode 'circular' (constant, edge, reflect, wrap)");
}

TEST(OnnxImporter, MalformedBytesAreAClearError) {
  ir::Graph g;
  auto truncated = import_model(g, std::string("\x3a\x20\x0a", 3));
  ASSERT_FALSE(truncated);
  EXPECT_EQ(truncated.error().message,
            "onnx: malformed protobuf: length runs past the end of the message in ModelProto at byte 2");
  auto text = import_model(g, "this is not a model");
  ASSERT_FALSE(text);
  EXPECT_NE(text.error().message.find("onnx: malformed protobuf"), std::string::npos) << text.error().message;
  auto empty = import_model(g, "");
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().message, "onnx: not an ONNX model: the ModelProto has no graph");
}

TEST(OnnxImporter, InputOfTheWrongShapeIsAnError) {
  std::string bytes = model({node("Relu", {"x"}, {"y"}, "r")}, {value_info("x", kFloat, {2, 3})},
                            {value_info("y", kFloat, {2, 3})});
  ImportOptions options;
  options.input_values.emplace("x", f32({3, 3}, std::vector<float>(9, 1)));
  ir::Graph g;
  auto m = import_model(g, bytes, options);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().message, "onnx: graph input 'x': expected f32[2,3], got f32[3,3]");
}

TEST(OnnxImporter, ShapeOperandMustBeKnown) {
  std::string bytes = model({node("Reshape", {"x", "s"}, {"y"}, "rs")},
                            {value_info("x", kFloat, {2, 3}), value_info("s", kInt64, {1})},
                            {value_info("y", kFloat, {6})});
  ir::Graph g;
  auto m = import_model(g, bytes);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().message,
            "onnx: node 0 'rs' (Reshape): unsupported: input 1 's' (shape) must be known at import: "
            "a constant, an initializer or a graph input given a value");
}

TEST(OnnxImporter, BuilderRuleBreaksAreUnsupportedNotWrong) {
  // Exp of an integer: kiln's exp takes floats only.
  std::string bytes = model({node("Exp", {"x"}, {"y"}, "e")}, {value_info("x", kInt64, {4})},
                            {value_info("y", kInt64, {4})});
  ir::Graph g;
  auto m = import_model(g, bytes);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("onnx: node 0 'e' (Exp): unsupported: "), std::string::npos)
      << m.error().message;
}

// MaxPool's Indices against a direct loop over each window (ONNX's reference: the first element
// in row-major window order, inside the input, that is greater than every earlier one), with
// ties, -inf borders, pads, strides, dilations, ceil_mode and both storage orders.
TEST(OnnxImporter, MaxPoolIndicesAreTheFirstMaximumInsideTheInput) {
  const int64_t N = 2, C = 2, H = 5, W = 6;
  std::vector<float> xs(N * C * H * W);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = float((i * 7) % 5);  // many ties
  for (int64_t i = 0; i < W; ++i) xs[i] = -INFINITY;  // a row of -inf at the border of image 0
  struct Case {
    std::vector<int64_t> k, s, d, pads;
    int64_t ceil, order;
  };
  for (const Case& t : {Case{{3, 2}, {2, 1}, {1, 2}, {1, 0, 1, 1}, 1, 0}, Case{{3, 2}, {2, 1}, {1, 2}, {1, 0, 1, 1}, 1, 1},
                        Case{{2, 2}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 0, 0}, Case{{3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 0, 1}}) {
    SCOPED_TRACE(::testing::Message() << "kernel " << t.k[0] << "x" << t.k[1] << " ceil " << t.ceil << " order " << t.order);
    std::vector<int64_t> out(2);
    for (int a = 0; a < 2; ++a) {
      const int64_t n = a ? W : H, ext = (t.k[a] - 1) * t.d[a] + 1, span = n + t.pads[a] + t.pads[2 + a] - ext;
      out[a] = t.ceil ? (span + t.s[a] - 1) / t.s[a] + 1 : span / t.s[a] + 1;
      if (t.ceil && (out[a] - 1) * t.s[a] >= n + t.pads[a]) --out[a];
    }
    std::string bytes = model(
        {node("MaxPool", {"x"}, {"y", "i"}, "pool",
              {ints_attr("kernel_shape", t.k), ints_attr("strides", t.s), ints_attr("dilations", t.d),
               ints_attr("pads", t.pads), int_attr("ceil_mode", t.ceil), int_attr("storage_order", t.order)})},
        {value_info("x", kFloat, {N, C, H, W})},
        {value_info("y", kFloat, {N, C, out[0], out[1]}), value_info("i", kInt64, {N, C, out[0], out[1]})});
    ir::Graph g;
    auto m = import_model(g, bytes);
    ASSERT_TRUE(m) << m.error().message;
    auto got = interp::evaluate_reference({m->graph.outputs[0].second, m->graph.outputs[1].second},
                                          {{m->graph.inputs[0].second, f32({N, C, H, W}, xs)}});
    ASSERT_TRUE(got) << got.error().message;
    ASSERT_EQ((*got)[1].shape, (ir::Shape{N, C, out[0], out[1]}));
    int64_t o = 0;
    for (int64_t nc = 0; nc < N * C; ++nc)
      for (int64_t oh = 0; oh < out[0]; ++oh)
        for (int64_t ow = 0; ow < out[1]; ++ow, ++o) {
          float best = 0;
          int64_t at = -1;
          for (int64_t kh = 0; kh < t.k[0]; ++kh)
            for (int64_t kw = 0; kw < t.k[1]; ++kw) {
              const int64_t h = oh * t.s[0] - t.pads[0] + kh * t.d[0], w = ow * t.s[1] - t.pads[1] + kw * t.d[1];
              if (h < 0 || h >= H || w < 0 || w >= W) continue;
              const float v = xs[nc * H * W + h * W + w];
              if (at < 0 || v > best) best = v, at = nc * H * W + (t.order ? h + w * H : h * W + w);
            }
          ASSERT_EQ((*got)[0].get(o), best) << "element " << o;
          ASSERT_EQ((*got)[1].get(o), at) << "element " << o;
        }
  }
}

// DFT against the sum it is, on what the suite's cases leave out: a real signal zero-padded to a
// longer dft_length with onesided output, and a complex one truncated to a shorter length along
// axis 2; an axis that names the real/imaginary axis is an error.
TEST(OnnxImporter, DftPadsTruncatesAndKeepsOneSide) {
  struct Case {
    std::vector<int64_t> shape;  // [batch, signal..., 1|2]
    int64_t axis, length, onesided;
  };
  for (const Case& t : {Case{{2, 5, 1}, 1, 8, 1}, Case{{1, 3, 6, 2}, 2, 4, 0}}) {
    SCOPED_TRACE(::testing::Message() << "axis " << t.axis << " length " << t.length);
    const int64_t n = t.shape[t.axis], cplx = t.shape.back(), bins = t.onesided ? t.length / 2 + 1 : t.length;
    std::vector<int64_t> out_shape = t.shape;
    out_shape[t.axis] = bins;
    out_shape.back() = 2;
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    std::vector<float> xs(numel);
    for (int64_t i = 0; i < numel; ++i) xs[i] = float((i * 5) % 7) - 3;
    Msg len;
    len.varint(2, kInt64).bytes(8, "len");
    len.bytes(9, std::string_view(reinterpret_cast<const char*>(&t.length), 8));
    std::string bytes = model({node("DFT", {"x", "len"}, {"y"}, "dft", {int_attr("axis", t.axis), int_attr("onesided", t.onesided)})},
                              {value_info("x", kFloat, t.shape)}, {value_info("y", kFloat, out_shape)}, {len});
    ir::Graph g;
    auto m = import_model(g, bytes);
    ASSERT_TRUE(m) << m.error().message;
    std::unordered_map<const ir::Node*, ir::HostTensor> bind;
    for (const auto& [name, input] : m->graph.inputs)
      bind.emplace(input, name == "x" ? f32(ir::Shape(t.shape.begin(), t.shape.end()), xs) : m->constants.at(name));
    auto got = interp::evaluate_reference({m->graph.outputs[0].second}, bind);
    ASSERT_TRUE(got) << got.error().message;
    ASSERT_EQ((*got)[0].shape, ir::Shape(out_shape.begin(), out_shape.end()));
    // Strides of x's axes (the signal axis named `axis`), outer = everything before it.
    int64_t inner = 1;
    for (size_t d = t.axis + 1; d < t.shape.size(); ++d) inner *= t.shape[d];
    const int64_t outer = numel / (n * inner), rest = inner / cplx;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t r = 0; r < rest; ++r)
        for (int64_t k = 0; k < bins; ++k) {
          double re = 0, im = 0;
          for (int64_t j = 0; j < std::min(n, t.length); ++j) {
            const int64_t at = (o * n + j) * inner + r * cplx;
            const double a = xs[at], b = cplx == 2 ? xs[at + 1] : 0, th = 2 * M_PI * double(j * k) / double(t.length);
            re += a * std::cos(th) + b * std::sin(th);
            im += b * std::cos(th) - a * std::sin(th);
          }
          const int64_t y = ((o * bins + k) * rest + r) * 2;
          EXPECT_NEAR((*got)[0].get(y), re, 1e-4) << "bin " << k;
          EXPECT_NEAR((*got)[0].get(y + 1), im, 1e-4) << "bin " << k;
        }
  }
  std::string bad = model({node("DFT", {"x"}, {"y"}, "dft", {int_attr("axis", 2)})},
                          {value_info("x", kFloat, {1, 4, 2})}, {unshaped_value_info("y", kFloat)});
  ir::Graph g;
  auto m = import_model(g, bad);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("onnx: node 0 'dft' (DFT): axis 2 is not a signal axis of rank 3"), std::string::npos)
      << m.error().message;
}

// Einsum against a brute-force sum over every assignment of its labels (letters only; an
// ellipsis case is checked against the same equation with letters in its place): diagonals,
// traces, implicit outputs, three operands, broadcasting ellipses; and its errors.
TEST(OnnxImporter, EinsumMatchesTheSumItWrites) {
  struct Case {
    std::string equation, letters;  // `letters`: the equation for the brute force
    std::vector<std::vector<int64_t>> shapes;
  };
  const std::vector<Case> cases = {
      {"ii->i", "ii->i", {{3, 3}}},
      {"ii", "ii->", {{4, 4}}},
      {"ij,jk,kl->il", "ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}}},
      {"bij,bkj", "bij,bkj->ik", {{2, 3, 4}, {2, 5, 4}}},  // implicit: b occurs twice, so it is summed
      {"iij->ji", "iij->ji", {{3, 3, 2}}},
      {"...ij,...jk->...ik", "zij,zjk->zik", {{2, 3, 4}, {2, 4, 5}}},
      {"...ij,jk", "zyij,jk->zyik", {{2, 3, 2, 4}, {4, 3}}},
      {"i,j->ij", "i,j->ij", {{3}, {4}}},
  };
  for (const Case& t : cases) {
    SCOPED_TRACE(t.equation);
    std::vector<Msg> inputs;
    std::vector<std::string> names;
    for (size_t i = 0; i < t.shapes.size(); ++i) {
      names.push_back("x" + std::to_string(i));
      inputs.push_back(value_info(names.back(), kFloat, t.shapes[i]));
    }
    Msg eq;
    eq.bytes(1, "equation").bytes(4, t.equation).varint(20, 3);
    std::string bytes = model({node("Einsum", names, {"y"}, "einsum", {eq})}, inputs,
                              {unshaped_value_info("y", kFloat)}, {}, 12);
    ir::Graph g;
    auto m = import_model(g, bytes);
    ASSERT_TRUE(m) << m.error().message;
    std::unordered_map<const ir::Node*, ir::HostTensor> bind;
    std::vector<ir::HostTensor> xs;
    for (size_t i = 0; i < t.shapes.size(); ++i) {
      ir::HostTensor x = ir::HostTensor::zeros(ir::DType::f32, ir::Shape(t.shapes[i].begin(), t.shapes[i].end()));
      for (int64_t k = 0; k < x.numel(); ++k) x.set(k, double((k * 3 + int64_t(i) * 5) % 7) - 3);
      bind.emplace(m->graph.inputs[i].second, x);
      xs.push_back(std::move(x));
    }
    auto got = interp::evaluate_reference({m->graph.outputs[0].second}, bind);
    ASSERT_TRUE(got) << got.error().message;
    // The brute force over t.letters.
    const size_t arrow = t.letters.find("->");
    std::vector<std::string> terms;
    for (size_t start = 0;;) {
      const size_t comma = t.letters.find(',', start);
      terms.push_back(t.letters.substr(start, (comma == std::string::npos ? arrow : comma) - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    const std::string out = t.letters.substr(arrow + 2);
    std::map<char, int64_t> extent;
    for (size_t i = 0; i < terms.size(); ++i)
      for (size_t a = 0; a < terms[i].size(); ++a) extent[terms[i][a]] = t.shapes[i][a];
    ir::Shape out_shape;
    for (char ch : out) out_shape.push_back(extent.at(ch));
    ASSERT_EQ((*got)[0].shape, out_shape);
    std::vector<double> want(size_t(ir::shape_numel(out_shape)), 0.0);
    std::vector<char> labels;
    for (const auto& [ch, n] : extent) labels.push_back(ch);
    std::map<char, int64_t> at;
    for (char ch : labels) at[ch] = 0;
    for (bool more = true; more;) {
      double p = 1;
      for (size_t i = 0; i < terms.size(); ++i) {
        int64_t flat = 0;
        for (size_t a = 0; a < terms[i].size(); ++a) flat = flat * t.shapes[i][a] + at[terms[i][a]];
        p *= xs[i].get(flat);
      }
      int64_t o = 0;
      for (char ch : out) o = o * extent[ch] + at[ch];
      want[size_t(o)] += p;
      more = false;
      for (size_t k = labels.size(); k-- > 0;) {
        if (++at[labels[k]] < extent[labels[k]]) {
          more = true;
          break;
        }
        at[labels[k]] = 0;
      }
    }
    for (size_t k = 0; k < want.size(); ++k) ASSERT_NEAR((*got)[0].get(int64_t(k)), want[k], 1e-4) << "element " << k;
  }
  for (const auto& [equation, shapes, error] :
       std::vector<std::tuple<std::string, std::vector<std::vector<int64_t>>, std::string>>{
           {"ij,jk->ik", {{2, 3}, {4, 5}}, "label 'j' has extents 3 and 4"},
           {"ij->ik", {{2, 3}}, "output label 'k' is in no input"},
           {"ijk->i", {{2, 3}}, "term 'ijk' has 3 labels for an operand of 2 axes"},
           {"ij,jk", {{2, 3}}, "equation 'ij,jk' has 2 terms for 1 inputs"}}) {
    std::vector<Msg> inputs;
    std::vector<std::string> names;
    for (size_t i = 0; i < shapes.size(); ++i) {
      names.push_back("x" + std::to_string(i));
      inputs.push_back(value_info(names.back(), kFloat, shapes[i]));
    }
    Msg eq;
    eq.bytes(1, "equation").bytes(4, equation).varint(20, 3);
    ir::Graph g;
    auto m = import_model(g, model({node("Einsum", names, {"y"}, "e", {eq})}, inputs,
                                   {unshaped_value_info("y", kFloat)}, {}, 12));
    ASSERT_FALSE(m) << equation;
    EXPECT_NE(m.error().message.find("onnx: node 0 'e' (Einsum): " + error), std::string::npos) << m.error().message;
  }
}

// A per-axis scale must have one value per index of its axis; the error names the operand.
TEST(OnnxImporter, QuantizeLinearScalesMatchTheirAxis) {
  std::string bytes = model({node("QuantizeLinear", {"x", "s"}, {"y"}, "q", {int_attr("axis", 1)})},
                            {value_info("x", kFloat, {2, 3})}, {value_info("y", 2, {2, 3})},
                            {f32_tensor("s", {2}, {0.5f, 0.25f})}, 13);
  ir::Graph g;
  auto m = import_model(g, bytes);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("onnx: node 0 'q' (QuantizeLinear): y_scale has shape [2]: expected a "
                                   "scalar or 3 values along axis 1"),
            std::string::npos)
      << m.error().message;
}

// RNN, GRU and LSTM against their equations computed here in f64, on what the suite's cases leave
// out: both directions, GRU's linear_before_reset, LSTM's Y_c with peepholes, clip and a
// sequence_lens entry shorter than the sequence, RNN reversed with a parameterized activation
// and layout 1; and the error for a short sequence in a reverse direction.
TEST(OnnxImporter, RecurrentLayersMatchTheirEquations) {
  constexpr int kInt32 = 6;
  const int64_t T = 3, N = 2, I = 3, H = 2;
  auto values = [](int64_t n, int seed) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) v[size_t(k)] = float(((k * 7 + seed * 3) % 11) - 5) / 8.0f;
    return v;
  };
  auto sigmoid = [](double v) { return 1 / (1 + std::exp(-v)); };
  struct Case {
    std::string op, direction;
    int64_t layout;
    std::vector<Msg> attrs;
    bool lens;  // sequence_lens {T, 1}
  };
  std::vector<Case> cases;
  cases.push_back({"GRU", "bidirectional", 0, {int_attr("linear_before_reset", 1)}, false});
  Msg clip;
  clip.bytes(1, "clip").varint(20, 1);
  {
    float v = 0.5f;
    clip.b += char(0x15);  // field 2 (f), wire type 5
    clip.b.append(reinterpret_cast<const char*>(&v), 4);
  }
  cases.push_back({"LSTM", "forward", 0, {clip}, true});
  Msg acts, alphas;
  acts.bytes(1, "activations").bytes(9, "LeakyRelu").varint(20, 8);
  {
    float v = 0.2f;
    alphas.bytes(1, "activation_alpha").varint(20, 6);
    alphas.b += char(0x3d);  // field 7 (floats), wire type 5
    alphas.b.append(reinterpret_cast<const char*>(&v), 4);
  }
  cases.push_back({"RNN", "reverse", 1, {acts, alphas}, false});
  for (const Case& t : cases) {
    SCOPED_TRACE(t.op + " " + t.direction);
    const int64_t G = t.op == "RNN" ? 1 : t.op == "GRU" ? 3 : 4, D = t.direction == "bidirectional" ? 2 : 1;
    const bool lstm = t.op == "LSTM";
    std::vector<float> x = values(T * N * I, 1), w = values(D * G * H * I, 2), r = values(D * G * H * H, 3),
                       b = values(D * 2 * G * H, 4), h0 = values(D * N * H, 5), c0 = values(D * N * H, 6),
                       p = values(D * 3 * H, 7);
    const std::vector<int32_t> lens = {int32_t(T), 1};
    std::vector<std::string> in{"X", "W", "R", "B", t.lens ? "L" : "", "H0"};
    std::vector<Msg> infos{value_info("X", kFloat, t.layout ? std::vector<int64_t>{N, T, I} : std::vector<int64_t>{T, N, I}),
                           value_info("W", kFloat, {D, G * H, I}), value_info("R", kFloat, {D, G * H, H}),
                           value_info("B", kFloat, {D, 2 * G * H}),
                           value_info("H0", kFloat, t.layout ? std::vector<int64_t>{N, D, H} : std::vector<int64_t>{D, N, H})};
    if (t.lens) infos.push_back(value_info("L", kInt32, {N}));
    if (lstm) {
      in.insert(in.end(), {"C0", "P"});
      infos.push_back(value_info("C0", kFloat, {D, N, H}));
      infos.push_back(value_info("P", kFloat, {D, 3 * H}));
    }
    std::vector<Msg> attrs = t.attrs;
    attrs.push_back(int_attr("hidden_size", H));
    attrs.push_back(int_attr("layout", t.layout));
    attrs.push_back(Msg().bytes(1, "direction").bytes(4, t.direction).varint(20, 3));
    std::vector<std::string> outs{"Y", "Y_h"};
    if (lstm) outs.push_back("Y_c");
    std::vector<Msg> out_infos;
    for (const std::string& o : outs) out_infos.push_back(unshaped_value_info(o, kFloat));
    ir::Graph g;
    auto m = import_model(g, model({node(t.op, in, outs, "cell", attrs)}, infos, out_infos, {}, 14));
    ASSERT_TRUE(m) << m.error().message;
    // Data in each input's layout.
    std::vector<float> x_in = x, h0_in = h0;
    if (t.layout)
      for (int64_t s = 0; s < T; ++s)
        for (int64_t n = 0; n < N; ++n)
          for (int64_t i = 0; i < I; ++i) x_in[size_t((n * T + s) * I + i)] = x[size_t((s * N + n) * I + i)];
    if (t.layout)
      for (int64_t d = 0; d < D; ++d)
        for (int64_t n = 0; n < N; ++n)
          for (int64_t j = 0; j < H; ++j) h0_in[size_t((n * D + d) * H + j)] = h0[size_t((d * N + n) * H + j)];
    std::map<std::string, ir::HostTensor> data;
    auto put = [&](const std::string& name, ir::Shape shape, const std::vector<float>& v) { data[name] = f32(shape, v); };
    put("X", t.layout ? ir::Shape{N, T, I} : ir::Shape{T, N, I}, x_in);
    put("W", {D, G * H, I}, w);
    put("R", {D, G * H, H}, r);
    put("B", {D, 2 * G * H}, b);
    put("H0", t.layout ? ir::Shape{N, D, H} : ir::Shape{D, N, H}, h0_in);
    put("C0", {D, N, H}, c0);
    put("P", {D, 3 * H}, p);
    ir::HostTensor l = ir::HostTensor::zeros(ir::DType::i32, {N});
    for (int64_t n = 0; n < N; ++n) l.set(n, lens[size_t(n)]);
    data["L"] = l;
    std::unordered_map<const ir::Node*, ir::HostTensor> bind;
    for (const auto& [name, node] : m->graph.inputs) bind.emplace(node, data.at(name));
    std::vector<const ir::Node*> roots;
    for (const auto& [name, node] : m->graph.outputs) roots.push_back(node);
    auto got = interp::evaluate_reference(roots, bind);
    ASSERT_TRUE(got) << got.error().message;
    // The equations, in [seq, dir, batch, hidden] order.
    std::vector<double> y(static_cast<size_t>(T * D * N * H), 0.0), yh(static_cast<size_t>(D * N * H)), yc(static_cast<size_t>(D * N * H));
    auto act = [&](double v) { return t.op == "RNN" ? (v > 0 ? v : 0.2 * v) : std::tanh(v); };
    auto clipped = [&](double v) { return lstm ? std::clamp(v, -0.5, 0.5) : v; };
    for (int64_t d = 0; d < D; ++d)
      for (int64_t n = 0; n < N; ++n) {
        std::vector<double> hs(static_cast<size_t>(H)), cs(static_cast<size_t>(H));
        for (int64_t j = 0; j < H; ++j) hs[size_t(j)] = h0[size_t((d * N + n) * H + j)], cs[size_t(j)] = c0[size_t((d * N + n) * H + j)];
        const bool reverse = t.direction == "reverse" || d == 1;
        for (int64_t step = 0; step < T; ++step) {
          const int64_t s = reverse ? T - 1 - step : step;
          if (t.lens && s >= lens[size_t(n)]) continue;  // state kept, output stays 0
          // pre[g][j]: W x + Wb and R h + Rb, apart (GRU's linear_before_reset needs Rh h + Rbh alone)
          std::vector<double> wx(static_cast<size_t>(G * H)), rh(static_cast<size_t>(G * H));
          for (int64_t k = 0; k < G * H; ++k) {
            double a = b[size_t(d * 2 * G * H + k)], c = b[size_t(d * 2 * G * H + G * H + k)];
            for (int64_t i = 0; i < I; ++i) a += w[size_t((d * G * H + k) * I + i)] * x[size_t((s * N + n) * I + i)];
            for (int64_t i = 0; i < H; ++i) c += r[size_t((d * G * H + k) * H + i)] * hs[size_t(i)];
            wx[size_t(k)] = a, rh[size_t(k)] = c;
          }
          std::vector<double> next(static_cast<size_t>(H));
          for (int64_t j = 0; j < H; ++j) {
            auto pre = [&](int64_t gate) { return wx[size_t(gate * H + j)] + rh[size_t(gate * H + j)]; };
            if (t.op == "RNN") {
              next[size_t(j)] = act(pre(0));
            } else if (t.op == "GRU") {
              const double z = sigmoid(pre(0)), rt = sigmoid(pre(1));
              const double hh = std::tanh(wx[size_t(2 * H + j)] + rt * rh[size_t(2 * H + j)]);
              next[size_t(j)] = (1 - z) * hh + z * hs[size_t(j)];
            } else {
              const double pi = p[size_t(d * 3 * H + j)], po = p[size_t(d * 3 * H + H + j)], pf = p[size_t(d * 3 * H + 2 * H + j)];
              const double i = sigmoid(clipped(pre(0) + pi * cs[size_t(j)]));
              const double f = sigmoid(clipped(pre(2) + pf * cs[size_t(j)]));
              const double c = std::tanh(clipped(pre(3)));
              cs[size_t(j)] = f * cs[size_t(j)] + i * c;
              const double o = sigmoid(clipped(pre(1) + po * cs[size_t(j)]));
              next[size_t(j)] = o * std::tanh(cs[size_t(j)]);
            }
          }
          hs = next;
          for (int64_t j = 0; j < H; ++j) y[size_t(((s * D + d) * N + n) * H + j)] = hs[size_t(j)];
        }
        for (int64_t j = 0; j < H; ++j) yh[size_t((d * N + n) * H + j)] = hs[size_t(j)], yc[size_t((d * N + n) * H + j)] = cs[size_t(j)];
      }
    auto check = [&](const ir::HostTensor& out, const std::vector<double>& want, auto index, const char* name) {
      ASSERT_EQ(out.numel(), int64_t(want.size())) << name;
      for (int64_t k = 0; k < out.numel(); ++k) EXPECT_NEAR(out.get(index(k)), want[size_t(k)], 1e-5) << name << " " << k;
    };
    // Y in [seq, dir, batch, hidden] (layout 1: [batch, seq, dir, hidden]); Y_h, Y_c [dir, batch, hidden].
    check((*got)[0], y, [&](int64_t k) {
      const int64_t j = k % H, n = k / H % N, d = k / (H * N) % D, s = k / (H * N * D);
      return t.layout ? ((n * T + s) * D + d) * H + j : k;
    }, "Y");
    check((*got)[1], yh, [&](int64_t k) {
      const int64_t j = k % H, n = k / H % N, d = k / (H * N);
      return t.layout ? (n * D + d) * H + j : k;
    }, "Y_h");
    if (lstm) check((*got)[2], yc, [](int64_t k) { return k; }, "Y_c");
  }
  // A reverse direction with a sequence shorter than the input's is not imported.
  ir::Graph g;
  auto m = import_model(
      g, model({node("LSTM", {"X", "W", "R", "", "L"}, {"Y"}, "cell",
                     {int_attr("hidden_size", H),
                      Msg().bytes(1, "direction").bytes(4, "reverse").varint(20, 3)})},
               {value_info("X", kFloat, {T, N, I}), value_info("W", kFloat, {1, 4 * H, I}),
                value_info("R", kFloat, {1, 4 * H, H}), value_info("L", kInt32, {N})},
               {unshaped_value_info("Y", kFloat)}, {}, 14));
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("unsupported: sequence_lens shorter than the sequence in a reverse direction"),
            std::string::npos)
      << m.error().message;
}

// A recurrence is unrolled at import, one copy of the cell a step: a declared sequence of 10^12
// steps allocated its step list first (std::bad_alloc, the process aborted) and 10^9 grew to 9.5
// GB while unrolling. More than kMaxUnrolled steps is unsupported, as a Loop's or Scan's are.
TEST(OnnxImporter, ARecurrenceTooLongToUnrollIsUnsupported) {
  for (const std::string op : {"RNN", "GRU", "LSTM"}) {
    for (int64_t steps : {int64_t{4097}, int64_t{1'000'000'000'000}}) {
      SCOPED_TRACE(op + " " + std::to_string(steps));
      const int64_t G = op == "RNN" ? 1 : op == "GRU" ? 3 : 4;
      std::vector<Msg> infos{value_info("X", kFloat, {steps, 1, 2}),
                             value_info("W", kFloat, {1, G * 3, 2}),
                             value_info("R", kFloat, {1, G * 3, 3})};
      ir::Graph g;
      auto m = import_model(
          g, model({node(op, {"X", "W", "R"}, {"Y"}, "cell", {int_attr("hidden_size", 3)})}, infos,
                   {unshaped_value_info("Y", kFloat)}, {}, 14));
      ASSERT_FALSE(m);
      EXPECT_NE(
          m.error().message.find(fmt::format("unsupported: {} runs {} steps, more than 4096 (kiln "
                                             "unrolls recurrences at import)",
                                             op, steps)),
          std::string::npos)
          << m.error().message;
    }
  }
}

// A graph's signature that onnx.checker refuses is an error naming what: an input or output
// listed twice, an opset newer than the importer knows, an output computed with another dtype,
// rank or (with fixed inputs) extent than the model declares.
TEST(OnnxImporter, AGraphSignatureThatDisagreesIsAnError) {
  const auto error = [](const std::string& bytes, const ImportOptions& options = {}) {
    ir::Graph g;
    auto m = import_model(g, bytes, options);
    return m ? std::string("imported") : m.error().message;
  };
  const std::vector<Msg> relu{node("Relu", {"x"}, {"y"}, "r")};
  EXPECT_EQ(error(model(relu, {value_info("x", kFloat, {2})}, {value_info("y", kFloat, {2})})),
            "imported");
  EXPECT_EQ(error(model(relu, {value_info("x", kFloat, {2}), value_info("x", kFloat, {2})},
                        {value_info("y", kFloat, {2})})),
            "onnx: graph input 'x' is listed twice");
  EXPECT_EQ(error(model(relu, {value_info("x", kFloat, {2})},
                        {value_info("y", kFloat, {2}), value_info("y", kFloat, {2})})),
            "onnx: graph output 'y' is listed twice");
  EXPECT_EQ(
      error(model(relu, {value_info("x", kFloat, {2})}, {value_info("y", kFloat, {2})}, {}, 23)),
      "imported");
  EXPECT_EQ(
      error(model(relu, {value_info("x", kFloat, {2})}, {value_info("y", kFloat, {2})}, {}, 30)),
      "onnx: unsupported: the model imports opset 30 of the default domain; kiln imports "
      "opsets 1 to 23");
  EXPECT_EQ(error(model(relu, {value_info("x", kFloat, {2})}, {value_info("y", kInt64, {2})})),
            "onnx: graph output 'y' is declared i64[2], but the graph computes f32[2]");
  EXPECT_EQ(error(model(relu, {value_info("x", kFloat, {2})}, {value_info("y", kFloat, {2, 1})})),
            "onnx: graph output 'y' is declared f32[2,1], but the graph computes f32[2]");
  EXPECT_EQ(error(model(relu, {value_info("x", kFloat, {2})}, {value_info("y", kFloat, {3})})),
            "onnx: graph output 'y' is declared f32[3], but the graph computes f32[2]");
  // A symbolic output dimension, or an output of unknown type, declares nothing to compare.
  EXPECT_EQ(
      error(model(relu, {value_info("x", kFloat, {2})}, {sym_value_info("y", kFloat, {"n"})})),
      "imported");
  EXPECT_EQ(error(model(relu, {value_info("x", kFloat, {2})}, {sym_value_info("y", 0, {""})})),
            "imported");
  // With a symbolic input an exporter's fixed output extent may be one trace's: not compared.
  ImportOptions sized;
  sized.sizes = {{"n", 2}};
  EXPECT_EQ(error(model(relu, {sym_value_info("x", kFloat, {"n"})}, {value_info("y", kFloat, {5})}),
                  sized),
            "imported");
}

// `kiln run model.onnx --input name=x.npy` and `kiln dump model.onnx`, on a model from the suite.
TEST(OnnxCli, RunsAndDumpsAnOnnxModel) {
  const std::string dir = "/usr/share/libonnx-testdata/data/node/test_add_bcast";
  ASSERT_TRUE(std::filesystem::exists(dir + "/model.onnx")) << "install libonnx-testdata";
  auto tmp = std::filesystem::temp_directory_path() / ("kiln_onnx_cli_" + std::to_string(::getpid()));
  std::filesystem::create_directories(tmp);
  ir::HostTensor x = ir::HostTensor::zeros(ir::DType::f32, {3, 4, 5});
  ir::HostTensor y = ir::HostTensor::zeros(ir::DType::f32, {5});
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, i);
  for (int64_t i = 0; i < y.numel(); ++i) y.set(i, 100 * i);
  ASSERT_TRUE(tools::write_npy((tmp / "x.npy").string(), x));
  ASSERT_TRUE(tools::write_npy((tmp / "y.npy").string(), y));
  auto run = testing::run_shell(std::string(KILN_BINARY) + " run " + dir + "/model.onnx --input x=" +
                                (tmp / "x.npy").string() + " --input y=" + (tmp / "y.npy").string() +
                                " --out " + tmp.string() + " 2>&1");
  ASSERT_EQ(run.code, 0) << run.out;
  auto sum = tools::read_npy((tmp / "sum.npy").string());
  ASSERT_TRUE(sum) << sum.error().message;
  EXPECT_EQ(sum->shape, (ir::Shape{3, 4, 5}));
  EXPECT_EQ(sum->get(7), 7 + 200);
  auto dump = testing::run_shell(std::string(KILN_BINARY) + " dump " + dir + "/model.onnx --stage graph 2>&1");
  ASSERT_EQ(dump.code, 0) << dump.out;
  EXPECT_NE(dump.out.find("add("), std::string::npos) << dump.out;
  auto missing = testing::run_shell(std::string(KILN_BINARY) + " run " + dir + "/model.onnx 2>&1");
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.out.find("missing input '%x'"), std::string::npos) << missing.out;
  std::filesystem::remove_all(tmp);
}

// ScatterElements' max and min reductions (opset 18; the node suite has no such case) and
// ScatterND's, with a negative index that wraps onto a duplicate: ONNX's examples and a loop.
TEST(OnnxImporter, ScatterReductionsMaxAndMin) {
  auto str_attr = [](std::string_view name, std::string_view v) {
    return Msg().bytes(1, name).bytes(4, v).varint(20, 3);
  };
  auto i64 = [](ir::Shape shape, std::vector<int64_t> v) {
    ir::HostTensor t = ir::HostTensor::zeros(ir::DType::i64, shape);
    std::memcpy(t.bytes.data(), v.data(), v.size() * 8);
    return t;
  };
  struct Case {
    std::string op, reduction;
    ir::Shape x, idx, upd;
    std::vector<float> xs;
    std::vector<int64_t> is;
    std::vector<float> us, want;
  };
  const Case cases[] = {
      {"ScatterElements", "max", {1, 5}, {1, 2}, {1, 2}, {1, 2, 3, 4, 5}, {1, 1}, {1.1f, 2.1f},
       {1, 2.1f, 3, 4, 5}},
      {"ScatterElements", "min", {1, 5}, {1, 2}, {1, 2}, {1, 2, 3, 4, 5}, {1, -4}, {1.1f, 2.1f},
       {1, 1.1f, 3, 4, 5}},
      {"ScatterND", "max", {4}, {3, 1}, {3}, {1, 2, 3, 4}, {3, -1, 0}, {10, 2, -5}, {1, 2, 3, 10}},
      {"ScatterND", "min", {4}, {3, 1}, {3}, {1, 2, 3, 4}, {3, -1, 0}, {10, 2, -5}, {-5, 2, 3, 2}},
  };
  for (const Case& t : cases) {
    SCOPED_TRACE(t.op + " " + t.reduction);
    std::vector<Msg> attrs{str_attr("reduction", t.reduction)};
    if (t.op == "ScatterElements") attrs.push_back(int_attr("axis", 1));
    std::string bytes = model({node(t.op, {"x", "i", "u"}, {"y"}, "s", attrs)},
                              {value_info("x", kFloat, t.x), value_info("i", kInt64, t.idx),
                               value_info("u", kFloat, t.upd)},
                              {value_info("y", kFloat, t.x)}, {}, 18);
    ir::Graph g;
    auto m = import_model(g, bytes);
    ASSERT_TRUE(m) << m.error().message;
    auto got = interp::evaluate_reference(
        {m->graph.outputs[0].second}, {{m->graph.inputs[0].second, f32(t.x, t.xs)},
                                       {m->graph.inputs[1].second, i64(t.idx, t.is)},
                                       {m->graph.inputs[2].second, f32(t.upd, t.us)}});
    ASSERT_TRUE(got) << got.error().message;
    for (size_t k = 0; k < t.want.size(); ++k) EXPECT_EQ((*got)[0].get(k), t.want[k]) << k;
  }
}

// A one-node model on the reference: its first output for inputs `xs` (bound in order).
std::vector<double> run_node(const std::string& op, int elem, std::vector<ir::HostTensor> xs,
                             std::vector<Msg> attrs = {}) {
  std::vector<std::string> names;
  std::vector<Msg> inputs;
  for (size_t i = 0; i < xs.size(); ++i) {
    names.push_back(fmt::format("x{}", i));
    inputs.push_back(value_info(names.back(), elem, xs[i].shape));
  }
  std::string bytes = model({node(op, names, {"y"}, "n", std::move(attrs))}, inputs,
                            {unshaped_value_info("y", elem)}, {}, /*opset=*/17);
  ir::Graph g;
  auto m = import_model(g, bytes);
  EXPECT_TRUE(m) << m.error().message;
  if (!m) return {};
  std::unordered_map<const ir::Node*, ir::HostTensor> bind;
  for (size_t i = 0; i < xs.size(); ++i) bind.emplace(m->graph.inputs[i].second, xs[i]);
  auto out = interp::evaluate_reference({m->graph.outputs[0].second}, bind);
  EXPECT_TRUE(out) << out.error().message;
  std::vector<double> v;
  if (out)
    for (int64_t i = 0; i < (*out)[0].numel(); ++i) v.push_back((*out)[0].get(i));
  return v;
}

ir::HostTensor typed(ir::DType t, std::vector<double> v) {
  ir::HostTensor h = ir::HostTensor::zeros(t, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) h.set(static_cast<int64_t>(i), v[i]);
  return h;
}

// Integer Div truncates and Mod(fmod=1) keeps the dividend's sign at the type's minimum too
// (|INT_MIN| overflowed: int8 -128 / 2 was 64, fmod(-128, 3) was -1).
TEST(OnnxNumerics, IntegerDivAndFmodAtTheTypesMinimum) {
  constexpr int kInt8 = 3, kInt32 = 6;
  using D = std::vector<double>;
  EXPECT_EQ(run_node("Div", kInt8,
                     {typed(ir::DType::i8, {-128, -128, 127, -7, 7}),
                      typed(ir::DType::i8, {2, 3, -128, 2, -2})}),
            (D{-64, -42, 0, -3, -3}));
  EXPECT_EQ(run_node("Div", kInt32,
                     {typed(ir::DType::i32, {-2147483648.0, -2147483648.0}),
                      typed(ir::DType::i32, {2, 3})}),
            (D{-1073741824, -715827882}));
  EXPECT_EQ(
      run_node("Mod", kInt8,
               {typed(ir::DType::i8, {-128, 5, 127, -7}), typed(ir::DType::i8, {3, -128, -128, 2})},
               {int_attr("fmod", 1)}),
      (D{-2, 5, 127, -1}));
}

// The float functions ONNX defines and kiln composes: no overflow in an intermediate where the
// result is finite, no cancellation for negative or tiny arguments, and round and fmod keep
// infinities as C does.
TEST(OnnxNumerics, CompositesStayAccurateAtExtremeArguments) {
  const double inf = std::numeric_limits<double>::infinity();
  const auto near = [](const std::vector<double>& got, const std::vector<double>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      if (std::isinf(want[i]) || std::isnan(want[i])) {
        EXPECT_TRUE(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i])))
            << i << ": got " << got[i] << " want " << want[i];
        continue;
      }
      EXPECT_LE(std::abs(got[i] - want[i]), 2e-6 * std::max(std::abs(want[i]), 1e-30))
          << i << ": got " << got[i] << " want " << want[i];
    }
  };
  const std::vector<double> xs = {-1e30, -1e4, -1000, -1e-6, 0.5, 2e19, 1e-8};
  std::vector<double> asinh_want, sinh_in = {-89, -1e-4, 0.5, 3, 89}, sinh_want, cosh_want;
  for (double x : xs) asinh_want.push_back(std::asinh(static_cast<float>(x)));
  for (double x : sinh_in) sinh_want.push_back(std::sinh(x)), cosh_want.push_back(std::cosh(x));
  near(run_node("Asinh", kFloat, {typed(ir::DType::f32, xs)}), asinh_want);
  near(run_node("Sinh", kFloat, {typed(ir::DType::f32, sinh_in)}), sinh_want);
  near(run_node("Cosh", kFloat, {typed(ir::DType::f32, sinh_in)}), cosh_want);
  const std::vector<double> ac = {1, 1.0001, 2, 1e20, 0.5};
  std::vector<double> acosh_want;
  for (double x : ac) acosh_want.push_back(std::acosh(static_cast<float>(x)));
  near(run_node("Acosh", kFloat, {typed(ir::DType::f32, ac)}), acosh_want);
  const std::vector<double> at = {-0.999, -1e-7, 0.5, 1, 2};
  std::vector<double> atanh_want;
  for (double x : at) atanh_want.push_back(std::atanh(static_cast<float>(x)));
  near(run_node("Atanh", kFloat, {typed(ir::DType::f32, at)}), atanh_want);
  const std::vector<double> sp = {-100, -20, -1e-3, 0, 5, 89, 1000};
  std::vector<double> sp_want;
  for (double x : sp)
    sp_want.push_back(x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)));
  near(run_node("Softplus", kFloat, {typed(ir::DType::f32, sp)}), sp_want);
  near(run_node("Round", kFloat, {typed(ir::DType::f32, {inf, -inf, 2.5, -3.5, 1e30})}),
       {inf, -inf, 2, -4, static_cast<float>(1e30)});
  near(run_node("Mod", kFloat,
                {typed(ir::DType::f32, {5, -5, 7.5, -7.5, 3}),
                 typed(ir::DType::f32, {inf, inf, 2, 2, 0})},
                {int_attr("fmod", 1)}),
       {5, -5, 1.5, -1.5, std::numeric_limits<double>::quiet_NaN()});
}

// Reductions over an empty tensor are ONNX's identities (they were refused as unsupported).
TEST(OnnxNumerics, EmptyReductionsAreTheIdentities) {
  const double inf = std::numeric_limits<double>::infinity();
  const ir::HostTensor empty = ir::HostTensor::zeros(ir::DType::f32, {0, 3});
  using D = std::vector<double>;
  EXPECT_EQ(
      run_node("ReduceMax", kFloat, {empty}, {ints_attr("axes", {0}), int_attr("keepdims", 0)}),
      (D{-inf, -inf, -inf}));
  EXPECT_EQ(
      run_node("ReduceMin", kFloat, {empty}, {ints_attr("axes", {0}), int_attr("keepdims", 0)}),
      (D{inf, inf, inf}));
  EXPECT_EQ(
      run_node("ReduceProd", kFloat, {empty}, {ints_attr("axes", {0}), int_attr("keepdims", 0)}),
      (D{1, 1, 1}));
  EXPECT_EQ(run_node("ReduceSum", kFloat, {empty}), (D{0}));  // every axis, kept: [1, 1]
  EXPECT_EQ(run_node("ReduceLogSumExp", kFloat, {empty}, {ints_attr("axes", {0})}),
            (D{-inf, -inf, -inf}));
  EXPECT_EQ(run_node("ReduceMax", kFloat, {empty}, {ints_attr("axes", {1})}), D{});  // [0, 1]
  constexpr int kInt32 = 6;
  EXPECT_EQ(run_node("ReduceMax", kInt32, {ir::HostTensor::zeros(ir::DType::i32, {2, 0})},
                     {ints_attr("axes", {1}), int_attr("keepdims", 0)}),
            (D{-2147483648.0, -2147483648.0}));
}

// Inputs that share a dim_param and are given values of two sizes for it: an error naming both.
TEST(OnnxImporter, ADimParamGivenTwoSizesIsAnError) {
  std::string bytes =
      model({node("Relu", {"x"}, {"y"}, "r1"), node("Relu", {"z"}, {"w"}, "r2")},
            {sym_value_info("x", kFloat, {"n", "4"}), sym_value_info("z", kFloat, {"n"})},
            {sym_value_info("y", kFloat, {"n", "4"}), sym_value_info("w", kFloat, {"n"})});
  ImportOptions options;
  options.input_values.emplace("x", ir::HostTensor::zeros(ir::DType::f32, {3, 4}));
  options.input_values.emplace("z", ir::HostTensor::zeros(ir::DType::f32, {2}));
  ir::Graph g;
  auto m = import_model(g, bytes, options);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().message,
            "onnx: the symbolic dimension 'n' is 3 in input 'x' but 2 in input 'z' (z[n])");
  options.input_values.at("z") = ir::HostTensor::zeros(ir::DType::f32, {3});
  ir::Graph g2;
  EXPECT_TRUE(import_model(g2, bytes, options));
}

// `kiln run --out DIR` keeps every output inside DIR: an ONNX name with '/' or '..' is written
// with '_' (torch exports name tensors "/model/Relu_output_0").
TEST(OnnxCli, OutputNamesStayInsideTheOutDirectory) {
  auto tmp =
      std::filesystem::temp_directory_path() / ("kiln_onnx_out_" + std::to_string(::getpid()));
  std::filesystem::remove_all(tmp);
  std::filesystem::create_directories(tmp);
  std::string bytes = model(
      {node("Relu", {"x"}, {"/model/Relu_output_0"}, "r1"), node("Neg", {"x"}, {"../up"}, "r2")},
      {value_info("x", kFloat, {2})},
      {value_info("/model/Relu_output_0", kFloat, {2}), value_info("../up", kFloat, {2})});
  { std::ofstream(tmp / "m.onnx", std::ios::binary) << bytes; }
  ASSERT_TRUE(tools::write_npy((tmp / "x.npy").string(), f32({2}, {-1, 2})));
  auto run = testing::run_shell(std::string(KILN_BINARY) + " run " + (tmp / "m.onnx").string() +
                                " --input x=" + (tmp / "x.npy").string() + " --out " +
                                (tmp / "out").string() + " --no-autotune 2>&1");
  ASSERT_EQ(run.code, 0) << run.out;
  auto relu = tools::read_npy((tmp / "out" / "_model_Relu_output_0.npy").string());
  ASSERT_TRUE(relu) << relu.error().message;
  EXPECT_EQ(relu->get(1), 2);
  EXPECT_TRUE(std::filesystem::exists(tmp / "out" / ".._up.npy"));
  EXPECT_FALSE(std::filesystem::exists(tmp / "up.npy"));
  std::filesystem::remove_all(tmp);
}

}  // namespace
}  // namespace kiln::onnx
