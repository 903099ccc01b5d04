// Dynamic shapes (docs/dynamic-shapes.md): kernels that take their outer size at run time, so a
// program that runs one computation at many batch sizes compiles each kernel once; the shape
// policy (static, dynamic, automatic), marked inputs, size buckets, and why a realize compiled.
// Every size's result is checked against the same math on the host, sizes 0 and 1 included.
#include <gtest/gtest.h>

#include <kiln/kiln.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using Settings = std::vector<std::pair<std::string, std::string>>;

kiln::Device open_cpu(Settings extra) {
  Settings settings = {{"compilation.cache", "none"}, {"autotune.cache", "none"},
                       {"autotune.enabled", "false"},
                       // The reference rates, so the plan (and the kernels counted) is the same on every CPU.
                       {"cpu_rates", "reference"}};
  settings.insert(settings.end(), extra.begin(), extra.end());
  return kiln::Device::open("cpu", kiln::Options{.settings = settings, .use_config = false,
                                                 .config_dir = ""})
      .value();
}

std::vector<float> values(size_t n, float scale, int seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = scale * static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(seed) * 13) % 23) - 11);
  return v;
}

// A two-layer MLP: relu(x @ W1 + b1) @ W2 + b2, x [b, 96], hidden 64, out 10.
struct Mlp {
  static constexpr int64_t kIn = 96, kHidden = 64, kOut = 10;
  std::vector<float> w1 = values(kIn * kHidden, 0.01f, 1), b1 = values(kHidden, 0.1f, 2);
  std::vector<float> w2 = values(kHidden * kOut, 0.02f, 3), b2 = values(kOut, 0.1f, 4);
  kiln::Tensor tw1, tb1, tw2, tb2;

  explicit Mlp(const kiln::Device& dev)
      : tw1(kiln::Tensor::from_host(dev, std::span<const float>(w1), {kIn, kHidden})),
        tb1(kiln::Tensor::from_host(dev, std::span<const float>(b1), {kHidden})),
        tw2(kiln::Tensor::from_host(dev, std::span<const float>(w2), {kHidden, kOut})),
        tb2(kiln::Tensor::from_host(dev, std::span<const float>(b2), {kOut})) {}

  kiln::Tensor operator()(const kiln::Tensor& x) const {
    return kiln::matmul(kiln::relu(kiln::matmul(x, tw1) + tb1), tw2) + tb2;
  }

  std::vector<double> host(const std::vector<float>& x, int64_t b) const {
    std::vector<double> h(static_cast<size_t>(b * kHidden)), y(static_cast<size_t>(b * kOut));
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < kHidden; ++j) {
        double s = b1[j];
        for (int64_t k = 0; k < kIn; ++k) s += double{x[i * kIn + k]} * w1[k * kHidden + j];
        h[i * kHidden + j] = std::max(0.0, s);
      }
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < kOut; ++j) {
        double s = b2[j];
        for (int64_t k = 0; k < kHidden; ++k) s += h[i * kHidden + k] * w2[k * kOut + j];
        y[i * kOut + j] = s;
      }
    return y;
  }
};

// Runs the MLP at batch size b (x marked dynamic when `mark`), checks it, returns the stats.
kiln::RealizeStats run_mlp(const kiln::Device& dev, const Mlp& mlp, int64_t b, bool mark = false) {
  const std::vector<float> xs = values(static_cast<size_t>(b * Mlp::kIn), 0.05f, static_cast<int>(b));
  auto x = kiln::Tensor::from_host(dev, std::span<const float>(xs), {b, Mlp::kIn});
  if (mark) {
    EXPECT_TRUE(x.mark_dynamic(0, "b").has_value());
  }
  auto got = mlp(x).to_vector<float>();
  EXPECT_TRUE(got.has_value()) << (got ? "" : got.error().message);
  if (!got) return {};
  const std::vector<double> want = mlp.host(xs, b);
  EXPECT_EQ(got->size(), want.size()) << "b=" << b;
  for (size_t i = 0; i < want.size() && i < got->size(); ++i)
    if (std::abs((*got)[i] - want[i]) > 1e-4 * (1 + std::abs(want[i]))) {
      ADD_FAILURE() << "b=" << b << " element " << i << ": " << (*got)[i] << " vs " << want[i];
      break;
    }
  return dev.last_stats();
}

bool mentions(const std::vector<std::string>& lines, const std::string& text) {
  return std::ranges::any_of(lines, [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

TEST(DynamicShapes, OneHundredBatchSizesCompileEachKernelOnce) {
  auto dev = open_cpu({{"shapes.policy", "dynamic"}});
  Mlp mlp(dev);
  int compiled = 0, first = -1;
  for (int64_t b = 2; b < 102; ++b) {
    const kiln::RealizeStats s = run_mlp(dev, mlp, b);
    if (first < 0) first = s.compiled;
    compiled += s.compiled;
    EXPECT_EQ(s.dynamic_kernels, s.kernels) << "b=" << b;
  }
  EXPECT_GT(first, 0);
  EXPECT_EQ(compiled, first) << "every kernel was compiled at the first size only";
}

TEST(DynamicShapes, SizesZeroAndOneAreCorrect) {
  auto dev = open_cpu({{"shapes.policy", "dynamic"}});
  Mlp mlp(dev);
  for (int64_t b : {5, 1, 0, 1, 3, 0, 64}) run_mlp(dev, mlp, b);
}

TEST(DynamicShapes, StaticCompilesEverySize) {
  auto dev = open_cpu({{"shapes.policy", "static"}});
  Mlp mlp(dev);
  for (int64_t b : {4, 5, 6}) {
    const kiln::RealizeStats s = run_mlp(dev, mlp, b);
    EXPECT_GT(s.compiled, 0) << "b=" << b;
    EXPECT_EQ(s.dynamic_kernels, 0);
  }
}

TEST(DynamicShapes, AutomaticSpecializesFirstAndGeneralizesOnTheFirstChange) {
  auto dev = open_cpu({{"shapes.policy", "automatic"}});
  Mlp mlp(dev);
  const kiln::RealizeStats first = run_mlp(dev, mlp, 16);
  EXPECT_GT(first.compiled, 0);
  EXPECT_EQ(first.dynamic_kernels, 0);
  EXPECT_TRUE(first.recompiles.empty());
  EXPECT_EQ(run_mlp(dev, mlp, 16).compiled, 0);  // the same size: the same plan

  const kiln::RealizeStats second = run_mlp(dev, mlp, 24);
  EXPECT_GT(second.compiled, 0);
  EXPECT_EQ(second.dynamic_kernels, second.kernels);
  EXPECT_TRUE(mentions(second.recompiles, "dimension 0 changed 16 -> 24")) << testing::PrintToString(second.recompiles);
  EXPECT_TRUE(mentions(second.recompiles, "dynamic from now on")) << testing::PrintToString(second.recompiles);

  for (int64_t b : {40, 7, 100}) {
    const kiln::RealizeStats s = run_mlp(dev, mlp, b);
    EXPECT_EQ(s.compiled, 0) << "b=" << b;
    EXPECT_EQ(s.dynamic_kernels, s.kernels);
    EXPECT_FALSE(mentions(s.recompiles, "dynamic from now on"));
  }
  EXPECT_EQ(run_mlp(dev, mlp, 16).compiled, 0);  // the first size keeps its specialized plan
}

TEST(DynamicShapes, AMarkedInputIsDynamicAtOnce) {
  auto dev = open_cpu({{"shapes.policy", "automatic"}});
  Mlp mlp(dev);
  const kiln::RealizeStats first = run_mlp(dev, mlp, 16, /*mark=*/true);
  EXPECT_GT(first.compiled, 0);
  EXPECT_EQ(first.dynamic_kernels, first.kernels);
  for (int64_t b : {17, 3, 50}) EXPECT_EQ(run_mlp(dev, mlp, b, /*mark=*/true).compiled, 0) << "b=" << b;
}

TEST(DynamicShapes, MarkingUnderTheStaticPolicyChangesNothing) {
  auto dev = open_cpu({{"shapes.policy", "static"}});
  Mlp mlp(dev);
  EXPECT_EQ(run_mlp(dev, mlp, 16, /*mark=*/true).dynamic_kernels, 0);
  EXPECT_GT(run_mlp(dev, mlp, 17, /*mark=*/true).compiled, 0);
}

TEST(DynamicShapes, BucketsCompileOncePerPowerOfTwo) {
  auto dev = open_cpu({{"shapes.policy", "dynamic"}, {"shapes.buckets", "true"}});
  Mlp mlp(dev);
  std::vector<int64_t> compiled_at;
  for (int64_t b = 5; b <= 40; ++b)
    if (run_mlp(dev, mlp, b).compiled > 0) compiled_at.push_back(b);
  // Buckets (4, 8], (8, 16], (16, 32], (32, 64]: compiled at the first size of each.
  EXPECT_EQ(compiled_at, (std::vector<int64_t>{5, 9, 17, 33}));
}

TEST(DynamicShapes, MarkDynamicRejectsABadAxisOrName) {
  auto dev = open_cpu({});
  const std::vector<float> xs(6, 1.f);
  auto x = kiln::Tensor::from_host(dev, std::span<const float>(xs), {2, 3});
  auto bad_axis = x.mark_dynamic(2);
  ASSERT_FALSE(bad_axis.has_value());
  EXPECT_NE(bad_axis.error().message.find("axis 2 is out of range"), std::string::npos) << bad_axis.error().message;
  EXPECT_FALSE(x.mark_dynamic(0, "a,b").has_value());
  EXPECT_TRUE(x.mark_dynamic(-1, "n").has_value());
}

// Elementwise chains and row reductions of every size from 0 to 33 (vector tails, one-axis
// kernels, rows) through one dynamic kernel each, against the host.
TEST(DynamicShapes, ElementwiseAndRowKernelsServeEverySize) {
  auto dev = open_cpu({{"shapes.policy", "dynamic"}});
  int compiled = 0;
  for (int64_t n = 0; n <= 33; ++n) {
    const std::vector<float> xs = values(static_cast<size_t>(n * 5), 0.1f, static_cast<int>(n));
    auto x = kiln::Tensor::from_host(dev, std::span<const float>(xs), {n, 5});
    auto y = kiln::exp(x * 0.5) + 1.0;             // [n, 5], one axis after collapsing
    auto r = kiln::softmax(x, 1);                  // rows
    auto got_y = y.to_vector<float>();
    const int c1 = dev.last_stats().compiled;
    auto got_r = r.to_vector<float>();
    compiled += c1 + dev.last_stats().compiled;
    ASSERT_TRUE(got_y && got_r);
    for (int64_t i = 0; i < n; ++i) {
      double m = -1e30, s = 0;
      for (int64_t j = 0; j < 5; ++j) m = std::max(m, double{xs[i * 5 + j]});
      for (int64_t j = 0; j < 5; ++j) s += std::exp(xs[i * 5 + j] - m);
      for (int64_t j = 0; j < 5; ++j) {
        const size_t k = static_cast<size_t>(i * 5 + j);
        EXPECT_NEAR((*got_y)[k], std::exp(0.5 * xs[k]) + 1, 1e-5 * (2 + std::exp(0.5 * xs[k])));
        EXPECT_NEAR((*got_r)[k], std::exp(xs[k] - m) / s, 1e-6);
      }
    }
  }
  // Sizes 0 and 1 may take kernels of their own; every other size shares them.
  EXPECT_LE(compiled, 6);
}

// A dynamic kernel in the persistent cache serves another process's other sizes.
TEST(DynamicShapes, ADynamicKernelFromTheCacheServesAnotherSize) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("kiln_dynamic_" + std::to_string(::getpid()) + ".sqlite"))
                               .string();
  std::filesystem::remove(path);
  const Settings cache = {{"shapes.policy", "dynamic"}, {"compilation.cache", "file=" + path}};
  {
    auto dev = open_cpu(cache);
    Mlp mlp(dev);
    EXPECT_GT(run_mlp(dev, mlp, 12).compiled, 0);
    EXPECT_EQ(run_mlp(dev, mlp, 30).compiled, 0);
  }
  {
    auto dev = open_cpu(cache);  // a new device: nothing in memory
    Mlp mlp(dev);
    EXPECT_EQ(run_mlp(dev, mlp, 30).compiled, 0);  // its plan from the cache, bound to 30
    EXPECT_EQ(run_mlp(dev, mlp, 77).compiled, 0);  // a new plan, its kernels from the cache
  }
  {
    // The static policy does not take the dynamic plans stored under the same graph.
    auto dev = open_cpu({{"shapes.policy", "static"}, {"compilation.cache", "file=" + path}});
    Mlp mlp(dev);
    const kiln::RealizeStats s = run_mlp(dev, mlp, 30);
    EXPECT_GT(s.compiled, 0);
    EXPECT_EQ(s.dynamic_kernels, 0);
  }
  std::filesystem::remove(path);
}

}  // namespace

namespace {

// A graph with a size symbol is called at the sizes of the tensors bound to it; a symbol bound
// to two sizes is an error naming both inputs.
TEST(DynamicShapes, AGraphWithASizeSymbolServesEverySize) {
  auto dev = open_cpu({});
  auto graph = kiln::Graph::parse("kiln.graph v1\n"
                                  "input %x : f32[?n=4,3]\n"
                                  "input %t : f32[?n,3]\n"
                                  "%s = add(%x, %t)\n"
                                  "%y = reshape(%s, shape=[?n,3,1])\n"
                                  "output %y\n",
                                  "sym.kg");
  ASSERT_TRUE(graph.has_value()) << graph.error().message;
  for (int64_t n : {4, 7, 0, 1}) {
    const std::vector<float> xs = values(static_cast<size_t>(n * 3), 0.5f, 1), ts = values(static_cast<size_t>(n * 3), 0.25f, 2);
    auto out = graph->call(dev, {{"x", kiln::Tensor::from_host(dev, std::span<const float>(xs), {n, 3})},
                                 {"t", kiln::Tensor::from_host(dev, std::span<const float>(ts), {n, 3})}});
    ASSERT_TRUE(out.has_value()) << out.error().message;
    EXPECT_EQ((*out)[0].shape(), (kiln::Shape{n, 3, 1}));
    auto got = (*out)[0].to_vector<float>();
    ASSERT_TRUE(got.has_value());
    for (size_t i = 0; i < xs.size(); ++i) EXPECT_EQ((*got)[i], xs[i] + ts[i]) << "n=" << n;
  }
  const std::vector<float> five(15, 1.f), six(18, 1.f);
  auto bad = graph->call(dev, {kiln::Tensor::from_host(dev, std::span<const float>(five), {5, 3}),
                               kiln::Tensor::from_host(dev, std::span<const float>(six), {6, 3})});
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message, "size symbol ?n is 5 in input %x but 6 in input %t");
}

}  // namespace
