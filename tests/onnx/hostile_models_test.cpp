// Models whose attributes or constants would make the importer allocate without bound or read
// past a shape: each is a clear error naming the node, never a crash. And opset 20's DFT, whose
// axis moved from an attribute to an input with another default.
#include <gtest/gtest.h>

#include <cmath>

#include "interp/reference.h"
#include "onnx/importer.h"
#include "tests/onnx/proto_writer.h"

namespace kiln::onnx {
namespace {

using namespace proto_writer;

std::string import_error(const std::string& bytes) {
  ir::Graph g;
  auto m = import_model(g, bytes);
  return m ? std::string("imported") : m.error().message;
}

TEST(OnnxHostileModels, HugeComputedTablesAreRefusedBeforeAllocating) {
  // A window of 2^40 samples.
  std::string window = model({node("HannWindow", {"n"}, {"w"}, "hann")}, {}, {value_info("w", kFloat, {4})},
                             {i64_tensor("n", {}, {int64_t(1) << 40})});
  EXPECT_NE(import_error(window).find("onnx: node 0 'hann' (HannWindow): unsupported: the window would hold more than"),
            std::string::npos)
      << import_error(window);
  // A mel matrix whose bin count would overflow.
  std::string mel = model({node("MelWeightMatrix", {"mels", "len", "rate", "lo", "hi"}, {"w"}, "mel")}, {},
                          {value_info("w", kFloat, {4})},
                          {i64_tensor("mels", {}, {INT64_MAX}), i64_tensor("len", {}, {1024}),
                           i64_tensor("rate", {}, {16000}), f32_tensor("lo", {}, {0}), f32_tensor("hi", {}, {8000})});
  EXPECT_NE(import_error(mel).find("unsupported: the mel weight matrix would hold more than"), std::string::npos)
      << import_error(mel);
  // A DFT of length 2^20: two 2^20 x 2^20 matrices.
  std::string dft = model({node("DFT", {"x", "len"}, {"y"}, "dft")}, {value_info("x", kFloat, {1, 4, 1})},
                          {value_info("y", kFloat, {1, 4, 2})}, {i64_tensor("len", {}, {int64_t(1) << 20})});
  EXPECT_NE(import_error(dft).find("unsupported: the DFT's cos and sin matrices would hold more than"),
            std::string::npos)
      << import_error(dft);
  // A ConstantOfShape whose element count overflows int64.
  std::string fill = model({node("ConstantOfShape", {"s"}, {"y"}, "fill")}, {}, {value_info("y", kFloat, {1})},
                           {i64_tensor("s", {2}, {int64_t(1) << 32, int64_t(1) << 32})});
  EXPECT_NE(import_error(fill).find("onnx: node 0 'fill' (ConstantOfShape)"), std::string::npos)
      << import_error(fill);
}

// Resize's and Upsample's output lengths and antialiasing reach come from the model: refused
// before the taps are computed, and a scale that is not finite is an error (it was converted to
// an integer with no value).
TEST(OnnxHostileModels, ResizeRefusesHugeOrNonFiniteOutputs) {
  auto resize = [](std::vector<Msg> attrs, std::vector<Msg> inits, std::vector<std::string> inputs, int opset) {
    return model({node("Resize", inputs, {"y"}, "resize", std::move(attrs))}, {value_info("x", kFloat, {1, 1, 1, 4})},
                 {value_info("y", kFloat, {1})}, std::move(inits), opset);
  };
  const std::string huge = resize({str_attr("mode", "cubic")}, {i64_tensor("sizes", {4}, {1, 1, 1, 1'000'000'000})},
                                  {"x", "", "", "sizes"}, 13);
  EXPECT_NE(import_error(huge).find("onnx: node 0 'resize' (Resize): "), std::string::npos) << import_error(huge);
  EXPECT_NE(import_error(huge).find("1000000000 output positions along one axis"), std::string::npos)
      << import_error(huge);
  const std::string inf = resize({}, {f32_tensor("scales", {4}, {1, 1, 1, INFINITY})}, {"x", "", "scales"}, 13);
  EXPECT_NE(import_error(inf).find("Resize: scale inf must be positive and finite"), std::string::npos)
      << import_error(inf);
  const std::string big_scale = resize({}, {f32_tensor("scales", {4}, {1, 1, 1, 1e30f})}, {"x", "", "scales"}, 13);
  EXPECT_NE(import_error(big_scale).find("unsupported: Resize: scales gives an output length of"), std::string::npos)
      << import_error(big_scale);
  // A tiny scale over a huge crop: few outputs, but each would read 2e9 inputs when antialiased.
  const std::string reach = model(
      {node("Resize", {"x", "roi", "scales"}, {"y"}, "resize",
            {str_attr("mode", "linear"), str_attr("coordinate_transformation_mode", "tf_crop_and_resize"),
             int_attr("antialias", 1)})},
      {value_info("x", kFloat, {1, 10})}, {value_info("y", kFloat, {1})},
      {f32_tensor("roi", {4}, {0, 0, 1, 1e9f}), f32_tensor("scales", {2}, {1, 1e-9f})}, 18);
  EXPECT_NE(import_error(reach).find("resize: antialiasing at scale"), std::string::npos) << import_error(reach);
  const std::string upsample = model({node("Upsample", {"x", "scales"}, {"y"}, "up")}, {value_info("x", kFloat, {1, 4})},
                                     {value_info("y", kFloat, {1})}, {f32_tensor("scales", {2}, {1, 2.5e8f})}, 9);
  EXPECT_NE(import_error(upsample).find("unsupported: Upsample: scale"), std::string::npos) << import_error(upsample);
}

// MaxUnpool's strides, kernel and pads come from the model: each checked before the arithmetic.
TEST(OnnxHostileModels, MaxUnpoolChecksItsAttributes) {
  auto unpool = [](std::vector<int64_t> strides) {
    return model({node("MaxUnpool", {"x", "i"}, {"y"}, "unpool",
                       {ints_attr("kernel_shape", {2}), ints_attr("strides", strides)})},
                 {value_info("x", kFloat, {1, 1, 3}), value_info("i", kInt64, {1, 1, 3})},
                 {value_info("y", kFloat, {1, 1, 6})});
  };
  EXPECT_NE(import_error(unpool({0})).find("kernel 2, stride 0 and pads 0, 0 must be positive"), std::string::npos)
      << import_error(unpool({0}));
  EXPECT_NE(import_error(unpool({int64_t(1) << 62})).find("must be positive (pads non-negative) and at most 2^40"),
            std::string::npos)
      << import_error(unpool({int64_t(1) << 62}));
  EXPECT_EQ(import_error(unpool({2})), "imported");
}

TEST(OnnxHostileModels, EinsumRefusesADotOutsideAnEllipsis) {
  for (const char* eq : {"i.j->ij", "i..j->ij", ".ij->ij", "ij.->ij"}) {
    Msg attr = Msg().bytes(1, "equation").bytes(4, eq).varint(20, 3);
    std::string bytes = model({node("Einsum", {"x"}, {"y"}, "ein", {attr})}, {value_info("x", kFloat, {2, 3})},
                              {value_info("y", kFloat, {2, 3})});
    EXPECT_NE(import_error(bytes).find("a '.' that is not part of '...'"), std::string::npos)
        << eq << ": " << import_error(bytes);
  }
}

// x [1, 4, 8, 1] is 1 where its axis-2 index is 0: the DFT along axis 2 (opset 20's default -2) is
// 1 at every frequency; along axis 1 (the attribute's default before opset 20) it is 4 at
// frequency 0 of column 0 and 0 elsewhere.
TEST(OnnxHostileModels, DftTakesOpset20sDefaultAxis) {
  std::vector<float> xs(32, 0);
  for (int i = 0; i < 4; ++i) xs[i * 8] = 1;
  for (int opset : {17, 20}) {
    std::string bytes = model({node("DFT", {"x"}, {"y"}, "dft")}, {value_info("x", kFloat, {1, 4, 8, 1})},
                              {value_info("y", kFloat, {1, 4, 8, 2})}, {}, opset);
    ir::Graph g;
    auto m = import_model(g, bytes);
    ASSERT_TRUE(m) << m.error().message;
    std::unordered_map<const ir::Node*, ir::HostTensor> bind;
    for (const auto& [name, n] : m->graph.inputs) bind.emplace(n, name == "x" ? f32({1, 4, 8, 1}, xs) : m->constants.at(name));
    auto out = interp::evaluate_reference({m->graph.outputs[0].second}, bind);
    ASSERT_TRUE(out) << out.error().message;
    // y[0, 1, 5, re]: row 1, frequency 5 (axis 2) or column 5 (axis 1).
    EXPECT_NEAR((*out)[0].get((1 * 8 + 5) * 2), opset >= 20 ? 1.0 : 0.0, 1e-5) << "opset " << opset;
    EXPECT_NEAR((*out)[0].get(0), opset >= 20 ? 1.0 : 4.0, 1e-5) << "opset " << opset;
  }
}

}  // namespace
}  // namespace kiln::onnx
