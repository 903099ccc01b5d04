// ONNX models whose inputs have symbolic dimensions (dim_param): each is a size symbol, as a
// `.kg` file's `?b` (docs/dynamic-shapes.md). kiln::Graph (which kiln_graph_load and Python's
// kiln.Graph share) loads such a model without sizes and serves a call at any size, one
// symbolic plan for every batch; `kiln run --dim` sizes it from the command line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "frontend/kg_call.h"
#include "frontend/tensor_impl.h"
#include "kiln/kiln.h"
#include "onnx/importer.h"
#include "tests/onnx/proto_writer.h"
#include "tests/support/shell.h"

namespace kiln::onnx {
namespace {

using namespace proto_writer;
namespace fs = std::filesystem;

// relu(x @ W + b): x [batch, 4], W [4, 3] and b [3] initializers.
constexpr float kW[12] = {0.5f, -1, 0.25f, 2, 0.5f, -0.75f, -1.5f, 1, 0.125f, 0.75f, -0.5f, 1.5f};
constexpr float kB[3] = {0.1f, -0.2f, 0.3f};

// The outputs of the MLP's call at batch b: relu(x @ kW + kB), to 1e-5.
void expect_mlp(const Expected<std::vector<Tensor>>& outs, const std::vector<float>& x, int64_t b) {
  ASSERT_TRUE(outs) << "batch " << b << ": " << outs.error().message;
  Tensor out = (*outs)[0];  // a handle to the same tensor
  auto y = out.to_vector<float>();
  ASSERT_TRUE(y) << "batch " << b << ": " << y.error().message;
  ASSERT_EQ(y->size(), static_cast<size_t>(b * 3));
  for (int64_t r = 0; r < b; ++r)
    for (int64_t c = 0; c < 3; ++c) {
      float want = kB[c];
      for (int64_t k = 0; k < 4; ++k) want += x[r * 4 + k] * kW[k * 3 + c];
      EXPECT_NEAR((*y)[r * 3 + c], std::max(want, 0.0f), 1e-5)
          << "batch " << b << " [" << r << "," << c << "]";
    }
}

std::string mlp_model(const std::string& batch) {
  return model({node("MatMul", {"x", "W"}, {"h"}, "mm"), node("Add", {"h", "b"}, {"z"}, "bias"),
                node("Relu", {"z"}, {"y"}, "relu")},
               {sym_value_info("x", kFloat, {batch, "4"})},
               {sym_value_info("y", kFloat, {batch, "3"})},
               {f32_tensor("W", {4, 3}, std::vector<float>(kW, kW + 12)),
                f32_tensor("b", {3}, std::vector<float>(kB, kB + 3))});
}

fs::path write_model(const std::string& name, const std::string& bytes) {
  const fs::path dir =
      fs::temp_directory_path() / ("kiln_onnx_symbolic_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path path = dir / name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

Device open_cpu() {
  Options options;
  options.settings = {
      {"compilation.cache", "none"}, {"autotune.enabled", "false"}, {"cpu_rates", "reference"}};
  auto device = Device::open("cpu", options);
  EXPECT_TRUE(device) << device.error().message;
  return std::move(*device);
}

TEST(OnnxSymbolicDims, ABatchDimParamIsASizeSymbolAndOneSymbolicPlanServesEveryBatch) {
  const fs::path path = write_model("mlp.onnx", mlp_model("batch"));
  auto graph = Graph::load(path.string());
  ASSERT_TRUE(graph) << graph.error().message;
  ASSERT_EQ(graph->inputs().size(), 1u) << "W and b are bound by the model";
  EXPECT_EQ(graph->inputs()[0].symbols, (std::vector<std::string>{"batch", ""}));
  EXPECT_EQ(graph->inputs()[0].shape, (Shape{1, 4}));
  Device dev = open_cpu();
  // The model's weights are copied to the device once, whatever the sizes it is read again at.
  auto weight_bytes = [&] {
    return detail::TensorImpl::state_of(dev)->device->pool()->persistent_bytes();
  };
  size_t weights_at_first = 0;
  int compiled_after_two = 0;
  std::vector<std::string> sources;
  const std::vector<int64_t> batches = {3, 5, 8, 13, 40, 5, 100};
  for (size_t call = 0; call < batches.size(); ++call) {
    const int64_t b = batches[call];
    std::vector<float> x(b * 4);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 11) / 4.0f - 1.0f;
    auto outs = graph->call(dev, {{"x", Tensor::from_host(dev, x, {b, 4})}});
    expect_mlp(outs, x, b);
    ASSERT_FALSE(HasFatalFailure());
    const RealizeStats s = dev.last_stats();
    EXPECT_EQ(s.dynamic_kernels, s.kernels)
        << "batch " << b << ": the symbol marks the bound tensor";
    if (call >= 2) compiled_after_two += s.compiled;
    sources.push_back(s.plan_source);
    outs->clear();
    if (call == 0) weights_at_first = weight_bytes();
    EXPECT_EQ(weight_bytes(), weights_at_first) << "batch " << b;
  }
  EXPECT_GE(weights_at_first, sizeof kW + sizeof kB);
  // The batch is marked, so the first two sizes make the symbolic plan; each new size after them
  // is instantiated from it, and a size seen before reuses its plan.
  EXPECT_EQ(compiled_after_two, 0);
  EXPECT_EQ(sources[2], "symbolic");
  EXPECT_EQ(sources[3], "symbolic");
  EXPECT_EQ(sources[4], "symbolic");
  EXPECT_EQ(sources[5], "memory");
  EXPECT_EQ(sources[6], "symbolic");
  fs::remove_all(path.parent_path());
}

// A model is read again at each distinct batch size; a server meeting a new size on most requests
// keeps only the readings used last (KgFile::kMaxReadings), not one per size ever served. The
// model's weights stay shared, and a size whose reading went is read again, with right values.
TEST(OnnxSymbolicDims, ReadingsKeptAreBoundedAndTheOldestGoFirst) {
  const fs::path path = write_model("mlp_readings.onnx", mlp_model("batch"));
  auto file = detail::read_kg_file(path.string());
  ASSERT_TRUE(file) << file.error().message;
  Device dev = open_cpu();
  auto run = [&](int64_t b) {
    std::vector<float> x(b * 4);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 5) % 9) / 4.0f - 1.0f;
    const Tensor in = Tensor::from_host(dev, x, {b, 4});
    expect_mlp(detail::call_kg(dev, *file, {}, std::span<const Tensor>(&in, 1)), x, b);
  };
  auto kept = [&] {
    std::lock_guard lock((*file)->mu);
    return (*file)->at_sizes;
  };
  constexpr size_t kKept = detail::KgFile::kMaxReadings;
  for (int64_t b = 2; b < 2 + static_cast<int64_t>(kKept) + 6; ++b) run(b);
  EXPECT_EQ(kept().size(), kKept);
  EXPECT_FALSE(kept().contains(ir::KgSizes{{"batch", 2}})) << "the oldest reading went";
  EXPECT_TRUE(kept().contains(ir::KgSizes{{"batch", 2 + static_cast<int64_t>(kKept) + 5}}));
  run(2);
  EXPECT_TRUE(kept().contains(ir::KgSizes{{"batch", 2}})) << "read again";
  EXPECT_EQ(kept().size(), kKept);
  fs::remove_all(path.parent_path());
}

// A `.kg` file's `?b` marks the tensor a call binds there (the first size's kernels are dynamic
// already), through a marked leaf of its buffer: the caller's tensor itself stays unmarked, so
// that a realize reading it outside the graph specializes as before.
TEST(OnnxSymbolicDims, ACallMarksTheBoundTensorAndLeavesTheCallersAsItIs) {
  auto graph = Graph::parse(
      "kiln.graph v1\ninput %x : f32[?b=4,8]\ninput %w : f32[8]\n%y = mul(%x, %w)\noutput %y\n",
      "mul.kg");
  ASSERT_TRUE(graph) << graph.error().message;
  EXPECT_EQ(graph->inputs()[0].symbols, (std::vector<std::string>{"b", ""}));
  EXPECT_EQ(graph->inputs()[1].symbols, (std::vector<std::string>{""}));
  Device dev = open_cpu();
  Tensor x = Tensor::full(dev, {6, 8}, 2.0), w = Tensor::full(dev, {8}, 3.0);
  ASSERT_TRUE(x.realize());
  auto outs = graph->call(dev, {x, w});
  ASSERT_TRUE(outs) << outs.error().message;
  auto y = (*outs)[0].to_vector<float>();
  ASSERT_TRUE(y) << y.error().message;
  EXPECT_EQ(*y, std::vector<float>(48, 6.0f));
  EXPECT_EQ(dev.last_stats().dynamic_kernels, 1) << "the first size's kernel takes b at run time";
  EXPECT_TRUE(detail::TensorImpl::impl_of(x)->symbols.empty())
      << "the caller's tensor is not marked";
  auto doubled = (x * 2.0).to_vector<float>();
  ASSERT_TRUE(doubled) << doubled.error().message;
  EXPECT_EQ(dev.last_stats().dynamic_kernels, 0) << "x alone is not marked";
}

// Two inputs share the dim_param `n`; a dimension with neither a value nor a name is its own
// symbol (`<input>_<axis>`); a dim_param that is no identifier is written with '_'.
TEST(OnnxSymbolicDims, SymbolsAreSharedByNameAndCheckedAcrossInputs) {
  const std::string bytes =
      model({node("Add", {"a", "c"}, {"s"}, "add"),
             node("Softmax", {"s"}, {"y"}, "soft", {int_attr("axis", -1)})},
            {sym_value_info("a", kFloat, {"n", "seq len"}), sym_value_info("c", kFloat, {"n", ""})},
            {sym_value_info("y", kFloat, {"n", "seq len"})});
  const fs::path path = write_model("softmax.onnx", bytes);
  auto graph = Graph::load(path.string());
  ASSERT_TRUE(graph) << graph.error().message;
  ASSERT_EQ(graph->inputs().size(), 2u);
  EXPECT_EQ(graph->inputs()[0].symbols, (std::vector<std::string>{"n", "seq_len"}));
  EXPECT_EQ(graph->inputs()[1].symbols, (std::vector<std::string>{"n", "c_1"}));
  Device dev = open_cpu();
  for (const auto& [n, m] :
       std::vector<std::pair<int64_t, int64_t>>{{2, 5}, {3, 17}, {1, 1}, {4, 9}}) {
    std::vector<float> a(n * m), c(n * m);
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = static_cast<float>(i % 5) - 2.0f;
      c[i] = static_cast<float>(i % 3) * 0.5f;
    }
    auto outs =
        graph->call(dev, {Tensor::from_host(dev, a, {n, m}), Tensor::from_host(dev, c, {n, m})});
    ASSERT_TRUE(outs) << n << "x" << m << ": " << outs.error().message;
    auto y = (*outs)[0].to_vector<float>();
    ASSERT_TRUE(y) << y.error().message;
    for (int64_t r = 0; r < n; ++r) {
      double top = -1e30, sum = 0;
      for (int64_t j = 0; j < m; ++j) top = std::max<double>(top, a[r * m + j] + c[r * m + j]);
      for (int64_t j = 0; j < m; ++j) sum += std::exp(a[r * m + j] + c[r * m + j] - top);
      for (int64_t j = 0; j < m; ++j)
        EXPECT_NEAR((*y)[r * m + j], std::exp(a[r * m + j] + c[r * m + j] - top) / sum, 1e-6)
            << n << "x" << m << " [" << r << "," << j << "]";
    }
  }
  auto mismatched =
      graph->call(dev, {Tensor::full(dev, {3, 4}, 0.0), Tensor::full(dev, {4, 4}, 0.0)});
  ASSERT_FALSE(mismatched);
  EXPECT_NE(mismatched.error().message.find("size symbol ?n is 3 in input %a but 4 in input %c"),
            std::string::npos)
      << mismatched.error().message;
  fs::remove_all(path.parent_path());
}

// A model that cannot be read with its symbols at 1 (x [batch, 4] reshaped to [3, -1]) is read at
// the first larger size it reads at (3), and serves the sizes it can; one that reads at none of
// them (reshaped to [3, 5, -1]) fails to load with an error saying where it was read; `kiln run
// --dim` sizes it.
TEST(OnnxSymbolicDims, AModelThatFailsAtOneIsReadAtTheFirstSizeItReadsAt) {
  auto reshape_model = [](const std::string& batch, std::vector<int64_t> to) {
    std::vector<std::string> out_dims;
    for (int64_t d : to) out_dims.push_back(d < 0 ? "" : std::to_string(d));
    const int64_t rank = static_cast<int64_t>(to.size());
    return model({node("Reshape", {"x", "shape"}, {"y"}, "rs")},
                 {sym_value_info("x", kFloat, {batch, "4"})},
                 {sym_value_info("y", kFloat, out_dims)}, {i64_tensor("shape", {rank}, to)});
  };
  const fs::path path = write_model("reshape.onnx", reshape_model("batch", {3, -1}));
  auto graph = Graph::load(path.string());
  ASSERT_TRUE(graph) << graph.error().message;
  EXPECT_EQ(graph->inputs()[0].shape, (Shape{3, 4})) << "read at 3, the first size it reads at";
  Device dev = open_cpu();
  for (int64_t b : {3, 6, 9}) {
    std::vector<float> x(static_cast<size_t>(b * 4));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 5.0f;
    auto outs = graph->call(dev, {Tensor::from_host(dev, x, {b, 4})});
    ASSERT_TRUE(outs) << "batch " << b << ": " << outs.error().message;
    EXPECT_EQ((*outs)[0].shape(), (Shape{3, b * 4 / 3}));
    auto y = (*outs)[0].to_vector<float>();
    ASSERT_TRUE(y) << y.error().message;
    EXPECT_EQ(*y, x) << "batch " << b;
  }
  auto two = graph->call(dev, {Tensor::full(dev, {2, 4}, 0.0)});
  ASSERT_FALSE(two) << "8 elements are not 3 rows";
  EXPECT_NE(two.error().message.find("reshape.onnx"), std::string::npos) << two.error().message;

  const fs::path never = write_model("reshape15.onnx", reshape_model("batch", {3, 5, -1}));
  auto unread = Graph::load(never.string());
  ASSERT_FALSE(unread);
  EXPECT_NE(unread.error().message.find("(a graph reads an ONNX model first with each symbolic "
                                        "input dimension at 1, then at 2, 3, 4, 8, 16, 32, 64, "
                                        "128, 224, 256, 512 while it fails)"),
            std::string::npos)
      << unread.error().message;
  auto run = testing::run_shell(std::string(KILN_BINARY) + " run " + never.string() +
                                " --dim batch=15 --random-inputs --no-autotune 2>&1");
  EXPECT_EQ(run.code, 0) << run.out;
  EXPECT_NE(run.out.find("f32[3,5,4]"), std::string::npos) << run.out;
  // A 3x3 convolution without padding over x [1, 1, h, w]: read at 3, called at 5 x 6.
  const std::vector<float> kernel = {1, 0, -1, 2, 0, -2, 1, 0, -1};
  const fs::path conv = write_model(
      "conv.onnx",
      model({node("Conv", {"x", "k"}, {"y"}, "conv", {ints_attr("kernel_shape", {3, 3})})},
            {sym_value_info("x", kFloat, {"1", "1", "h", "w"})},
            {sym_value_info("y", kFloat, {"1", "1", "", ""})},
            {f32_tensor("k", {1, 1, 3, 3}, kernel)}));
  auto conv_graph = Graph::load(conv.string());
  ASSERT_TRUE(conv_graph) << conv_graph.error().message;
  EXPECT_EQ(conv_graph->inputs()[0].shape, (Shape{1, 1, 3, 3}));
  std::vector<float> image(30);
  for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<float>((i * 7) % 11);
  auto conv_outs = conv_graph->call(dev, {Tensor::from_host(dev, image, {1, 1, 5, 6})});
  ASSERT_TRUE(conv_outs) << conv_outs.error().message;
  EXPECT_EQ((*conv_outs)[0].shape(), (Shape{1, 1, 3, 4}));
  auto conv_y = (*conv_outs)[0].to_vector<float>();
  ASSERT_TRUE(conv_y) << conv_y.error().message;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) {
      float want = 0;
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) want += image[(r + i) * 6 + c + j] * kernel[i * 3 + j];
      EXPECT_EQ((*conv_y)[r * 4 + c], want) << r << "," << c;
    }
  // The same model with a fixed batch of 1 fails as well, with no word of symbols.
  const fs::path fixed = write_model("reshape1.onnx", reshape_model("1", {3, -1}));
  auto plain = Graph::load(fixed.string());
  ASSERT_FALSE(plain);
  EXPECT_EQ(plain.error().message.find("symbolic input dimension"), std::string::npos)
      << plain.error().message;
  fs::remove_all(path.parent_path());
}

// The importer without a size for a symbolic dimension says which, and how to give one.
TEST(OnnxSymbolicDims, AnUnsizedSymbolicDimensionIsAnErrorNamingIt) {
  ir::Graph g;
  auto m = import_model(g, mlp_model("batch"));
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find(
                "graph input 'x' has the symbolic dimension 'batch' ([batch,4]): give it a "
                "size (--dim batch=N) or a value"),
            std::string::npos)
      << m.error().message;
  ImportOptions sized;
  sized.sizes = {{"batch", 6}};
  ir::Graph g2;
  auto ok = import_model(g2, mlp_model("batch"), sized);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->graph.sizes, (std::vector<std::pair<std::string, int64_t>>{{"batch", 6}}));
  EXPECT_EQ(ir::input_symbols(*ok->graph.inputs[0].second),
            (std::vector<std::string>{"batch", ""}));
  EXPECT_EQ(ok->graph.inputs[0].second->shape, (ir::Shape{6, 4}));
}

// An input shape kiln cannot take (a negative dim_value, more than 2^59 elements, declared or
// sized so) is an import error naming the input, not an abort or an allocation failure later;
// a name that two nodes define is an error too (ONNX assigns each name once).
TEST(OnnxSymbolicDims, AShapeKilnCannotTakeOrANameDefinedTwiceIsAnImportError) {
  const auto relu = [](Msg x) {
    return model({node("Relu", {"x"}, {"y"}, "relu")}, {std::move(x)},
                 {sym_value_info("y", kFloat, {})}, {});
  };
  const std::pair<std::string, std::string> cases[] = {
      {relu(value_info("x", kFloat, {-3})), "graph input 'x': shape [-3] has a negative extent -3"},
      {relu(value_info("x", kFloat, {int64_t{1} << 62, 4})),
       "graph input 'x': shape [4611686018427387904,4] has too many elements (kiln indexes at most "
       "2^59)"},
      {model({node("Relu", {"x"}, {"y"}, "relu"), node("Neg", {"x"}, {"y"}, "neg")},
             {value_info("x", kFloat, {3})}, {value_info("y", kFloat, {3})}, {}),
       "output 'y' is already defined in this graph (ONNX assigns each name once)"},
  };
  for (const auto& [bytes, message] : cases) {
    ir::Graph g;
    auto m = import_model(g, bytes);
    ASSERT_FALSE(m) << message;
    EXPECT_NE(m.error().message.find(message), std::string::npos) << m.error().message;
  }
  ImportOptions huge;
  huge.sizes = {{"batch", int64_t{1} << 60}};
  ir::Graph g;
  auto m = import_model(g, mlp_model("batch"), huge);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("graph input 'x': shape [1152921504606846976,4] has too many "
                                   "elements"),
            std::string::npos)
      << m.error().message;
}

// `kiln run model.onnx --dim batch=N --random-inputs`: the output at that size; a --dim that
// names no symbolic dimension is an error.
TEST(OnnxSymbolicDims, KilnRunSizesAModelWithDim) {
  const fs::path path = write_model("cli.onnx", mlp_model("batch"));
  auto run = testing::run_shell(std::string(KILN_BINARY) + " run " + path.string() +
                                " --dim batch=6 --random-inputs --no-autotune --stats 2>&1");
  ASSERT_EQ(run.code, 0) << run.out;
  EXPECT_NE(run.out.find("f32[6,3]"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("1 of 1 kernel dynamic"), std::string::npos) << run.out;
  auto bad = testing::run_shell(std::string(KILN_BINARY) + " run " + path.string() +
                                " --dim batch=6 --dim nope=3 --random-inputs 2>&1");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("--dim nope=3: " + path.string() +
                         " has no symbolic input dimension 'nope' (its symbols: batch)"),
            std::string::npos)
      << bad.out;
  auto unsized = testing::run_shell(std::string(KILN_BINARY) + " run " + path.string() +
                                    " --random-inputs 2>&1");
  EXPECT_NE(unsized.code, 0);
  EXPECT_NE(unsized.out.find("--dim batch=N"), std::string::npos) << unsized.out;
  fs::remove_all(path.parent_path());
}

// A little-endian f32 .npy of `shape` holding 0, 1, 2, ... (scaled by 1/8).
fs::path write_npy(const fs::path& path, const std::vector<int64_t>& shape) {
  std::string dims;
  int64_t n = 1;
  for (int64_t d : shape) dims += std::to_string(d) + ",", n *= d;
  if (shape.size() > 1) dims.pop_back();
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out << "\x93NUMPY" << '\x01' << '\x00';
  const uint16_t len = static_cast<uint16_t>(header.size());
  out.write(reinterpret_cast<const char*>(&len), 2);
  out << header;
  for (int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(i) / 8;
    out.write(reinterpret_cast<const char*>(&v), 4);
  }
  return path;
}

// `kiln run model.onnx --input x=x.npy` keeps the model's symbols, sized by the bound file: the
// kernels `kiln warm --dim` compiled serve it (before, the bound value specialized the graph and
// every kernel missed), and an input left to --random-inputs takes the size the bound one gives.
TEST(OnnxSymbolicDims, KilnRunTakesSizesFromBoundInputsAndHitsWarmedKernels) {
  const fs::path path = write_model("warmed.onnx", mlp_model("batch"));
  const fs::path dir = path.parent_path();
  const std::string cache = "file=" + (dir / "warm.sqlite").string();
  const std::string kiln = std::string(KILN_BINARY);
  auto warm = testing::run_shell(kiln + " warm " + path.string() + " --cache " + cache +
                                 " --no-autotune --dim batch=7 2>&1");
  ASSERT_EQ(warm.code, 0) << warm.out;
  const fs::path x = write_npy(dir / "x.npy", {7, 4});
  auto run =
      testing::run_shell("KILN_COMPILATION_CACHE=" + cache + " " + kiln + " run " + path.string() +
                         " --input x=" + x.string() + " --no-autotune --stats 2>&1");
  ASSERT_EQ(run.code, 0) << run.out;
  EXPECT_NE(run.out.find("f32[7,3]"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find(" 0 misses"), std::string::npos) << run.out;
  // x's batch sizes z, which --random-inputs fills.
  const std::string two = model(
      {node("Add", {"x", "z"}, {"y"}, "add")},
      {sym_value_info("x", kFloat, {"batch", "4"}), sym_value_info("z", kFloat, {"batch", "4"})},
      {sym_value_info("y", kFloat, {"batch", "4"})});
  const fs::path two_path = write_model("two.onnx", two);
  auto partial =
      testing::run_shell(kiln + " run " + two_path.string() + " --input x=" + x.string() +
                         " --random-inputs --no-autotune 2>&1");
  ASSERT_EQ(partial.code, 0) << partial.out;
  EXPECT_NE(partial.out.find("%y : f32[7,4]"), std::string::npos) << partial.out;
  // A bound file of another rank than declared is still an error naming both.
  const fs::path flat = write_npy(dir / "flat.npy", {28});
  auto bad =
      testing::run_shell(kiln + " run " + path.string() + " --input x=" + flat.string() + " 2>&1");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("f32[28]"), std::string::npos) << bad.out;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::onnx
