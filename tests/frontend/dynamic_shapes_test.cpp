// Dynamic shapes (docs/dynamic-shapes.md): kernels that take their outer size at run time, so a
// program that runs one computation at many batch sizes compiles each kernel once; the shape
// policy (static, dynamic, automatic), marked inputs, size buckets, and why a realize compiled.
// Every size's result is checked against the same math on the host, sizes 0 and 1 included.
#include <gtest/gtest.h>

#include <kiln/kiln.h>

#include <unistd.h>
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
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

// A cache file of this process under the temporary directory, removed if there.
std::string fresh_cache_path(const std::string& tag) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("kiln_" + tag + "_" + std::to_string(::getpid()) + ".sqlite"))
                               .string();
  std::filesystem::remove(path);
  return path;
}

std::string one_per_line(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

std::vector<float> values(size_t n, float scale, int seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = scale * static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(seed) * 13) % 23) - 11);
  return v;
}

// One row of attention on the host, in double: softmax(q . k_j * scale) over the `keys` rows of k
// (each `dim` floats, the first at k), times the same rows of v.
std::vector<double> host_attention_row(const float* q, const float* k, const float* v, int64_t keys,
                                       int64_t dim) {
  const double scale = 1 / std::sqrt(static_cast<double>(dim));
  std::vector<double> p(static_cast<size_t>(keys)), out(static_cast<size_t>(dim), 0.0);
  double m = -1e30, z = 0;
  for (int64_t j = 0; j < keys; ++j) {
    double dot = 0;
    for (int64_t d = 0; d < dim; ++d) dot += double{q[d]} * k[j * dim + d];
    p[static_cast<size_t>(j)] = dot * scale;
    m = std::max(m, p[static_cast<size_t>(j)]);
  }
  for (double& x : p) z += x = std::exp(x - m);
  for (int64_t j = 0; j < keys; ++j)
    for (int64_t e = 0; e < dim; ++e)
      out[static_cast<size_t>(e)] += p[static_cast<size_t>(j)] / z * v[j * dim + e];
  return out;
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

// Counts of RealizeStats::plan_source.
struct Sources {
  int built = 0, symbolic = 0, memory = 0, other = 0;
  void add(const std::string& source) {
    (source == "built" ? built : source == "symbolic" ? symbolic : source == "memory" ? memory : other) += 1;
  }
};

TEST(DynamicShapes, OneHundredBatchSizesCompileEachKernelOnce) {
  auto dev = open_cpu({{"shapes.policy", "dynamic"}});
  Mlp mlp(dev);
  int compiled = 0, first = -1;
  Sources plans;
  for (int64_t b = 2; b < 102; ++b) {
    const kiln::RealizeStats s = run_mlp(dev, mlp, b);
    if (first < 0) first = s.compiled;
    compiled += s.compiled;
    plans.add(s.plan_source);
    EXPECT_EQ(s.dynamic_kernels, s.kernels) << "b=" << b;
  }
  EXPECT_GT(first, 0);
  EXPECT_EQ(compiled, first) << "every kernel was compiled at the first size only";
  // Two sizes build a plan each; their symbolic plan serves the other 98.
  EXPECT_EQ(plans.built, 2);
  EXPECT_EQ(plans.symbolic, 98);
  EXPECT_EQ(run_mlp(dev, mlp, 50).plan_source, "memory");  // an instance is kept as any plan
}

// A server meets a new size on most requests: the device keeps the plans used last, at most 256
// (runtime::Executor::kMaxPlans), not one per size it has ever served. A size whose plan went is
// served again from the symbolic plan, with the right values.
TEST(DynamicShapes, PlansKeptAreBoundedAndTheOldestGoFirst) {
  auto dev = open_cpu({{"shapes.policy", "dynamic"}});
  constexpr int64_t kKept = 256;
  auto run = [&](int64_t b) {
    const std::vector<float> xs = values(static_cast<size_t>(b * 4), 0.5f, static_cast<int>(b));
    auto x = kiln::Tensor::from_host(dev, std::span<const float>(xs), {b, 4});
    auto got = kiln::relu(x + x).to_vector<float>();
    EXPECT_TRUE(got.has_value()) << (got ? "" : got.error().message);
    if (got)
      for (size_t i = 0; i < xs.size(); ++i)
        if ((*got)[i] != std::max(0.0f, 2 * xs[i])) {
          ADD_FAILURE() << "b=" << b << " element " << i << ": " << (*got)[i];
          break;
        }
    return dev.last_stats().plan_source;
  };
  Sources plans;
  for (int64_t b = 2; b < 2 + kKept + 8; ++b) plans.add(run(b));
  EXPECT_EQ(plans.built, 2);
  EXPECT_EQ(plans.symbolic, kKept + 6);
  EXPECT_EQ(run(2 + kKept + 7), "memory") << "the newest plan is kept";
  EXPECT_EQ(run(9 + 8), "memory") << "within the newest 256";
  EXPECT_EQ(run(2), "symbolic") << "the oldest plan went";
  EXPECT_EQ(run(2), "memory");
}

// A slice's start and end are sizes of its shape family: a cache read to a length that grows a
// step (its input's shape never changes) and a window that slides over it take the family's
// symbolic plan once three lengths have built it, where each length had made a family and built
// a plan of its own (fusion, lowering, a kernel lookup: 0.40 ms a step where a symbolic plan takes
// 0.075). Both read right at every length.
TEST(DynamicShapes, ASliceWhoseBoundsMoveIsOneFamily) {
  auto dev = open_cpu({{"shapes.policy", "automatic"}});
  const std::vector<float> ys = values(3 * 80, 0.5f, 5);
  auto y = kiln::Tensor::from_host(dev, std::span<const float>(ys), {3, 80});
  const auto check = [&](kiln::Tensor got_t, int64_t start, int64_t len) {
    auto got = got_t.to_vector<float>();
    ASSERT_TRUE(got.has_value()) << got.error().message;
    ASSERT_EQ(got->size(), static_cast<size_t>(3 * len));
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < len; ++j)
        ASSERT_EQ((*got)[static_cast<size_t>(i * len + j)],
                  ys[static_cast<size_t>(i * 80 + start + j)] * 2 + 1)
            << "start " << start << " row " << i << " column " << j;
  };
  Sources growing;
  for (int64_t end = 2; end <= 60; ++end) {
    check(y.slice(1, 0, end) * 2.0 + 1.0, 0, end);
    growing.add(dev.last_stats().plan_source);
  }
  EXPECT_EQ(growing.built, 4) << "two lengths generalize the kernel, a third confirms the template";
  EXPECT_EQ(growing.symbolic, 55);
  Sources sliding;
  for (int64_t start = 2; start <= 40; ++start) {
    check(y.slice(1, start, start + 16) * 2.0 + 1.0, start, 16);
    sliding.add(dev.last_stats().plan_source);
  }
  EXPECT_LE(sliding.built, 4);
  EXPECT_GE(sliding.symbolic, 35);
  // Past the end of the cache the slice clamps to it, and reads the whole row.
  check(y.slice(1, 0, 90) * 2.0 + 1.0, 0, 80);
}

// A pad's widths are sizes of its shape family too: a sequence padded at its end to a length that
// grows a step, or at its start (a prompt padded on the left), its input's shape never changing,
// takes the family's symbolic plan once three widths have built it, where each width had made a
// family and built a plan of its own. The pad's value stays in the family's key: another value
// builds its own plan, and every element is right at every width.
TEST(DynamicShapes, APadWhoseWidthsGrowIsOneFamily) {
  auto dev = open_cpu({{"shapes.policy", "automatic"}});
  const std::vector<float> ys = values(3 * 20, 0.5f, 5);
  auto y = kiln::Tensor::from_host(dev, std::span<const float>(ys), {3, 20});
  // y padded with `before` and `after` columns of `value`, times 2 plus 1.
  const auto check = [&](int64_t before, int64_t after, double value) {
    auto got = (y.pad({0, before}, {0, after}, value) * 2.0 + 1.0).to_vector<float>();
    ASSERT_TRUE(got.has_value()) << got.error().message;
    const int64_t width = before + 20 + after;
    ASSERT_EQ(got->size(), static_cast<size_t>(3 * width));
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < width; ++j) {
        const bool inside = j >= before && j < before + 20;
        const float x =
            inside ? ys[static_cast<size_t>(i * 20 + j - before)] : static_cast<float>(value);
        ASSERT_EQ((*got)[static_cast<size_t>(i * width + j)], x * 2 + 1)
            << "before " << before << " after " << after << " row " << i << " column " << j;
      }
  };
  Sources at_end, at_start;
  for (int64_t after = 2; after <= 40; ++after) {
    check(0, after, 7.0);
    at_end.add(dev.last_stats().plan_source);
  }
  EXPECT_EQ(at_end.built, 4) << "two widths generalize the kernel, a third confirms the template";
  EXPECT_EQ(at_end.symbolic, 35);
  for (int64_t before = 2; before <= 40; ++before) {
    check(before, 3, 7.0);
    at_start.add(dev.last_stats().plan_source);
  }
  EXPECT_LE(at_start.built, 4);
  EXPECT_GE(at_start.symbolic, 35);
  // Another value is another family (built), right at a width its family had met, as are widths
  // of 0 and 1 (specialization facts: no template serves them).
  check(0, 10, -3.0);
  EXPECT_EQ(dev.last_stats().plan_source, "built");
  check(0, 1, 7.0);
  check(0, 0, 7.0);
  check(1, 0, 7.0);
}

// Under `dynamic` a kernel is dynamic along its outer axis from its first size, its inner sizes
// compiled in; a kernel of the same form at other inner sizes (a slice whose end grows a step)
// takes them at run time from then on, as under `automatic`, where it had compiled every step.
TEST(DynamicShapes, UnderTheDynamicPolicyAGrowingInnerSliceCompilesOnce) {
  auto dev = open_cpu({{"shapes.policy", "dynamic"}});
  const std::vector<float> ys = values(3 * 80, 0.5f, 5);
  auto y = kiln::Tensor::from_host(dev, std::span<const float>(ys), {3, 80});
  int later = 0, dynamic = 0;
  for (int64_t end = 1; end <= 40; ++end) {
    auto got = (y.slice(1, 0, end) * 2.0).to_vector<float>();
    ASSERT_TRUE(got.has_value()) << got.error().message;
    if (end > 3) later += dev.last_stats().compiled;
    dynamic = std::max(dynamic, dev.last_stats().dynamic_kernels);
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < end; ++j)
        ASSERT_EQ((*got)[static_cast<size_t>(i * end + j)], ys[static_cast<size_t>(i * 80 + j)] * 2)
            << "end " << end << " row " << i << " column " << j;
  }
  EXPECT_EQ(later, 0) << "every end after the third runs the kernel with run-time sizes";
  EXPECT_EQ(dynamic, 1);
}

// A device keeps the 256 shape families it met last (each holds a plan and its templates): a
// slice whose step takes a new value each time makes a new family each time (a slice whose end
// grew did too, before its bounds were sizes of its family), which had kept every one. A family
// met within the last 256 keeps its symbolic plan; one pushed out by 256 newer ones builds its
// next size again.
TEST(DynamicShapes, ShapeFamiliesKeptAreBoundedAndTheOldestGoFirst) {
  auto dev = open_cpu({{"shapes.policy", "automatic"}});
  const std::vector<float> ys = values(2 * 600, 0.5f, 9);
  auto y = kiln::Tensor::from_host(dev, std::span<const float>(ys), {2, 600});
  auto relu_of = [&](int64_t b) {
    const std::vector<float> xs = values(static_cast<size_t>(b * 4), 0.5f, static_cast<int>(b));
    auto x = kiln::Tensor::from_host(dev, std::span<const float>(xs), {b, 4});
    auto got = kiln::relu(x + x).to_vector<float>();
    EXPECT_TRUE(got.has_value()) << (got ? "" : got.error().message);
    if (got) {
      EXPECT_EQ((*got)[0], std::max(0.0f, 2 * xs[0])) << "b=" << b;
    }
    return dev.last_stats().plan_source;
  };
  auto other_families = [&](int64_t from, int64_t count) {
    for (int64_t step = from + 1; step < from + 1 + count; ++step) {
      auto got = (y.slice(1, 0, std::nullopt, step) * 2.0).to_vector<float>();
      ASSERT_TRUE(got.has_value()) << got.error().message;
      const int64_t row = (600 + step - 1) / step;
      ASSERT_EQ(got->size(), static_cast<size_t>(2 * row)) << "step " << step;
      ASSERT_EQ((*got)[static_cast<size_t>(row)], ys[600] * 2) << "the second row's first value";
    }
  };
  // Automatic: the first size specialized, the second and third make the symbolic plan.
  EXPECT_EQ(relu_of(2), "built");
  EXPECT_EQ(relu_of(3), "built");
  EXPECT_EQ(relu_of(4), "built");
  EXPECT_EQ(relu_of(5), "symbolic");
  other_families(1, 200);
  EXPECT_EQ(relu_of(6), "symbolic") << "met within the last 256 families";
  other_families(201, 256);
  EXPECT_EQ(relu_of(7), "built") << "256 newer families pushed it out";
  EXPECT_EQ(relu_of(8), "built");
  EXPECT_EQ(relu_of(9), "symbolic");
}

// Under the automatic policy the first size is specialized, the second generalizes the kernels,
// and the third makes the symbolic plan; sizes 0 and 1 are built (size-1 facts), and the sizes
// around them keep their results.
TEST(DynamicShapes, ASymbolicPlanServesEverySizeItCan) {
  auto dev = open_cpu({{"shapes.policy", "automatic"}});
  Mlp mlp(dev);
  std::vector<std::string> sources;
  for (int64_t b : {16, 24, 40, 7, 1, 0, 2, 300, 16}) sources.push_back(run_mlp(dev, mlp, b).plan_source);
  EXPECT_EQ(sources, (std::vector<std::string>{"built", "built", "built", "symbolic", "built", "built",
                                               "symbolic", "symbolic", "memory"}));
}

TEST(DynamicShapes, StaticBuildsAPlanForEverySize) {
  auto dev = open_cpu({{"shapes.policy", "static"}});
  Mlp mlp(dev);
  for (int64_t b : {4, 5, 6, 7}) EXPECT_EQ(run_mlp(dev, mlp, b).plan_source, "built") << "b=" << b;
}

// Under buckets, each bucket's kernels are its own: a symbolic plan serves the sizes of the
// bucket it was made in, and the next bucket makes its own.
TEST(DynamicShapes, SymbolicPlansKeepToTheirBucket) {
  auto dev = open_cpu({{"shapes.policy", "dynamic"}, {"shapes.buckets", "true"}});
  Mlp mlp(dev);
  std::vector<int64_t> built_at;
  for (int64_t b = 5; b <= 24; ++b) {
    const kiln::RealizeStats s = run_mlp(dev, mlp, b);
    if (s.plan_source == "built") built_at.push_back(b);
    else EXPECT_EQ(s.plan_source, "symbolic") << "b=" << b;
  }
  EXPECT_EQ(built_at, (std::vector<int64_t>{5, 6, 9, 10, 17, 18}));
}

TEST(DynamicShapes, SizesZeroAndOneAreCorrect) {
  auto dev = open_cpu({{"shapes.policy", "dynamic"}});
  Mlp mlp(dev);
  for (int64_t b : {5, 1, 0, 1, 3, 0, 64}) run_mlp(dev, mlp, b);
}

// A one-row product takes the matrix-vector path, which keeps every row's accumulators: at size 1
// it stays specialized under every policy, before and after its kernels generalized. Under
// "dynamic" it was made dynamic at once, and so ran the tiled path (examples/gemv.kg: 8.9 ms
// against 1.9).
TEST(DynamicShapes, AOneRowProductStaysSpecializedUnderEveryPolicy) {
  for (const char* policy : {"dynamic", "automatic"}) {
    SCOPED_TRACE(policy);
    auto dev = open_cpu({{"shapes.policy", policy}});
    Mlp mlp(dev);
    const kiln::RealizeStats one = run_mlp(dev, mlp, 1);
    EXPECT_GT(one.kernels, 0);
    EXPECT_EQ(one.dynamic_kernels, 0);
    for (int64_t b : {5, 6}) run_mlp(dev, mlp, b);
    EXPECT_EQ(run_mlp(dev, mlp, 7).dynamic_kernels, run_mlp(dev, mlp, 7).kernels);
    const kiln::RealizeStats again = run_mlp(dev, mlp, 1);
    EXPECT_EQ(again.dynamic_kernels, 0);
    EXPECT_EQ(again.compiled, 0) << "the first plan of size 1, kept";
  }
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

// Two kernels of one form at two sizes in one plan (softmaxes over rows of 8 and of 16) are no
// size that changed: the first realize keeps both specialized and says no recompile. A later
// realize at other widths generalizes them, and says why.
TEST(DynamicShapes, KernelsOfOneFormInOnePlanAreNoRecompile) {
  auto dev = open_cpu({{"shapes.policy", "automatic"}});
  const auto run = [&](int64_t a, int64_t b) {
    const std::vector<float> xs = values(static_cast<size_t>(4 * a), 0.3f, 1);
    const std::vector<float> ys = values(static_cast<size_t>(4 * b), 0.3f, 2);
    auto x = kiln::Tensor::from_host(dev, std::span<const float>(xs), {4, a});
    auto y = kiln::Tensor::from_host(dev, std::span<const float>(ys), {4, b});
    auto sx = kiln::softmax(x, 1), sy = kiln::softmax(y, 1);
    EXPECT_TRUE(kiln::realize({sx, sy}).has_value());
    for (const auto& [t, n] : {std::pair{&sx, a}, std::pair{&sy, b}}) {
      auto v = t->to_vector<float>();
      EXPECT_TRUE(v.has_value());
      if (!v) continue;
      for (int64_t r = 0; r < 4; ++r) {
        double sum = 0;
        for (int64_t j = 0; j < n; ++j) sum += (*v)[r * n + j];
        EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << r << " of " << n;
      }
    }
    return dev.last_stats();
  };
  const kiln::RealizeStats first = run(8, 16);
  EXPECT_EQ(first.compiled, 2);
  EXPECT_EQ(first.dynamic_kernels, 0);
  EXPECT_TRUE(first.recompiles.empty()) << one_per_line(first.recompiles);
  const kiln::RealizeStats later = run(12, 20);
  EXPECT_TRUE(mentions(later.recompiles, "run-time sizes from now on"))
      << one_per_line(later.recompiles);
  EXPECT_EQ(run(24, 40).compiled, 0);
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
  // A name kiln dump writes as ?name and a .kg file reads back: an identifier, not inf or nan.
  for (const char* bad : {"a,b", "%$#", "1abc", "a-b", "%ok", "inf", "nan", "a b"}) {
    auto r = x.mark_dynamic(0, bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().message, "mark_dynamic: '" + std::string(bad) +
                                     "' is not a symbol name (a letter or '_', then letters, "
                                     "digits, '_')");
  }
  for (const char* good : {"_b", "batch_2", "N"})
    EXPECT_TRUE(x.mark_dynamic(0, good).has_value()) << good;
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

// A marked inner axis: an elementwise kernel over [4, s] runs as one axis of 4 * s points and reads
// and writes its buffers at that index, so one kernel serves every s (and, from the third size, one
// symbolic plan); a kernel that reads s in an index (a bias per row, broadcast along s: a dynamic
// one-axis kernel would divide its index by s) takes s as a run-time size of a two-axis kernel
// from the second size on. Every size against the host.
TEST(DynamicShapes, AMarkedInnerAxisOfAnElementwiseKernelCompilesOnce) {
  auto dev = open_cpu({{"shapes.policy", "automatic"}});
  const std::vector<float> bias = {0.5f, -1.f, 2.f, 0.25f};
  const auto tb = kiln::Tensor::from_host(dev, std::span<const float>(bias), {4, 1});
  int flat_compiled = 0, bias_compiled = 0;
  Sources flat_plans;
  for (int64_t n : {2, 3, 5, 9, 17, 33, 4, 64}) {
    const std::vector<float> xs = values(static_cast<size_t>(4 * n), 0.2f, static_cast<int>(n));
    auto x = kiln::Tensor::from_host(dev, std::span<const float>(xs), {4, n});
    ASSERT_TRUE(x.mark_dynamic(1, "s").has_value());
    auto got = (kiln::exp(x * 0.5) - 1.0).to_vector<float>();
    ASSERT_TRUE(got.has_value()) << got.error().message;
    const kiln::RealizeStats flat = dev.last_stats();
    flat_compiled += flat.compiled;
    flat_plans.add(flat.plan_source);
    EXPECT_EQ(flat.dynamic_kernels, flat.kernels) << "n=" << n;
    auto got_b = (x * 2.0 + tb).to_vector<float>();
    ASSERT_TRUE(got_b.has_value()) << got_b.error().message;
    bias_compiled += dev.last_stats().compiled;
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const size_t k = static_cast<size_t>(i * n + j);
        EXPECT_NEAR((*got)[k], std::exp(0.5 * xs[k]) - 1, 1e-5 * (1 + std::exp(0.5 * xs[k]))) << "n=" << n;
        EXPECT_FLOAT_EQ((*got_b)[k], xs[k] * 2.0f + bias[static_cast<size_t>(i)]) << "n=" << n;
      }
  }
  EXPECT_EQ(flat_compiled, 1) << "one kernel for every size of the marked axis";
  EXPECT_EQ(flat_plans.built, 2);
  EXPECT_EQ(flat_plans.symbolic, 6);
  EXPECT_EQ(bias_compiled, 2) << "the row bias: its first size's kernel, then one for every s";
}

// A row that grows (softmax, a sum and a cumsum along the inner axis of x [3, n]): under the
// automatic policy the first size is specialized, the second makes each kernel one with run-time
// sizes (ir/kernel_sizes.h), and every size after runs those kernels, compiling nothing. The plans
// of the second and third sizes make a symbolic plan, which the fourth's confirms (its kernels'
// slots fit lines of n there too): the sizes after that plan nothing either. Every size against
// the host.
TEST(DynamicShapes, AGrowingRowCompilesEachKernelOnce) {
  auto dev = open_cpu({{"shapes.policy", "automatic"}});
  int compiled = 0, first = -1, second = -1;
  Sources plans;
  bool told = false;
  for (int64_t n : {5, 6, 9, 17, 2, 100, 33, 1000, 7, 4097}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<float> xs = values(static_cast<size_t>(3 * n), 0.3f, static_cast<int>(n));
    auto x = kiln::Tensor::from_host(dev, std::span<const float>(xs), {3, n});
    auto soft = kiln::softmax(x, 1);
    auto total = x.sum({1});
    auto running = kiln::cumsum(x * 2.0, 1);
    auto got = kiln::realize({soft, total, running});
    ASSERT_TRUE(got.has_value()) << got.error().message;
    const kiln::RealizeStats st = dev.last_stats();
    if (first < 0) {
      first = st.compiled;
    } else if (second < 0) {
      second = st.compiled;
    } else {
      compiled += st.compiled;
    }
    plans.add(st.plan_source);
    if (second >= 0) {
      EXPECT_EQ(st.dynamic_kernels, st.kernels);
    }
    for (const std::string& r : st.recompiles)
      told = told || r.find("run-time sizes from now on") != std::string::npos;
    auto s = soft.to_vector<float>();
    auto t = total.to_vector<float>();
    auto c = running.to_vector<float>();
    ASSERT_TRUE(s && t && c);
    for (int64_t i = 0; i < 3; ++i) {
      double m = -1e30, z = 0, sum = 0, run = 0;
      for (int64_t j = 0; j < n; ++j) m = std::max(m, double{xs[i * n + j]});
      for (int64_t j = 0; j < n; ++j) z += std::exp(xs[i * n + j] - m), sum += xs[i * n + j];
      EXPECT_NEAR((*t)[i], sum, 1e-4 * (1 + std::abs(sum)));
      for (int64_t j = 0; j < n; ++j) {
        const size_t k = static_cast<size_t>(i * n + j);
        run += 2.0 * xs[k];
        ASSERT_NEAR((*s)[k], std::exp(xs[k] - m) / z, 1e-6) << "row " << i << " column " << j;
        ASSERT_NEAR((*c)[k], run, 1e-4 * (1 + std::abs(run))) << "row " << i << " column " << j;
      }
    }
  }
  EXPECT_GT(first, 0);
  EXPECT_EQ(second, first) << "the second size compiles each kernel once more, with run-time sizes";
  EXPECT_EQ(compiled, 0) << "every size after runs those kernels";
  EXPECT_TRUE(told) << "--stats says which kernels took run-time sizes";
  EXPECT_EQ(plans.built, 4);
  EXPECT_EQ(plans.symbolic, 6);
}

// A kernel slot that is a product of sizes that change: x + xᵀ over x [3, n, n] reads its
// transpose at a stride of n * n a batch. Two plans fit n * n as a line of n as well as any size
// (a symbolic plan made of them alone computed every later size wrong), so their template waits
// for a third plan, which does not fit it: every size plans again (and compiles nothing), and
// every result is right.
TEST(DynamicShapes, ASlotThatIsAProductOfChangingSizesMakesNoSymbolicPlan) {
  auto dev = open_cpu({{"shapes.policy", "automatic"}});
  Sources plans;
  int later = 0, steps = 0;
  for (int64_t n : {2, 3, 4, 5, 6, 7, 9, 12}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<float> xs = values(static_cast<size_t>(3 * n * n), 0.5f, static_cast<int>(n));
    auto x = kiln::Tensor::from_host(dev, std::span<const float>(xs), {3, n, n});
    auto got = (x + x.permute({0, 2, 1})).to_vector<float>();
    ASSERT_TRUE(got.has_value()) << got.error().message;
    plans.add(dev.last_stats().plan_source);
    if (++steps > 2) later += dev.last_stats().compiled;
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j)
          ASSERT_EQ((*got)[static_cast<size_t>((b * n + i) * n + j)],
                    xs[static_cast<size_t>((b * n + i) * n + j)] +
                        xs[static_cast<size_t>((b * n + j) * n + i)])
              << b << " " << i << " " << j;
  }
  EXPECT_EQ(plans.symbolic, 0);
  EXPECT_EQ(plans.built, 8);
  EXPECT_EQ(later, 0) << "the kernel takes its sizes at run time from the second size";
}

// A decoder whose key and value cache grows by reading it to one more row each step: the fused
// attention kernel takes its key count at run time, so it compiles at the first two lengths and
// never after, across key tiles (64 keys) and at a tile's edges, and every length's attention
// equals the host's, written out or as the composite. The queries are one row of 4 heads, one
// row of 2 x 2 heads (batch and heads: the kernel's work units are not its outer extent), and 40
// rows of 2 heads (a chunk of a prompt: two blocks of query rows).
TEST(DynamicShapes, AttentionOverACacheReadToAGrowingLengthCompilesOnce) {
  constexpr int64_t kCtx = 150, kDim = 16;
  const std::vector<std::vector<int64_t>> heads_and_rows = {{4, 1}, {2, 2, 1}, {2, 40}};
  for (const std::vector<int64_t>& layout : heads_and_rows) {
    auto dev = open_cpu({{"shapes.policy", "automatic"}});
    const std::vector<int64_t> batch(layout.begin(), layout.end() - 1);
    const int64_t rows = layout.back();
    int64_t points = 1;
    for (int64_t b : batch) points *= b;
    std::vector<int64_t> cache_shape = batch, q_shape = batch;
    cache_shape.insert(cache_shape.end(), {kCtx, kDim});
    q_shape.insert(q_shape.end(), {rows, kDim});
    const std::vector<float> ks = values(static_cast<size_t>(points * kCtx * kDim), 0.05f, 3);
    const std::vector<float> vs = values(static_cast<size_t>(points * kCtx * kDim), 0.1f, 4);
    auto kt = kiln::Tensor::from_host(dev, std::span<const float>(ks), cache_shape);
    auto vt = kiln::Tensor::from_host(dev, std::span<const float>(vs), cache_shape);
    const int64_t key_axis = static_cast<int64_t>(batch.size());
    const double scale = 1 / std::sqrt(double{kDim});
    for (const bool composite : {false, true}) {
      std::string queries;
      for (int64_t d : q_shape) queries += (queries.empty() ? "" : "x") + std::to_string(d);
      SCOPED_TRACE("queries " + queries + (composite ? ", attention()" : ", softmax(q kT s) v"));
      int later = 0, total = 0, steps = 0, dynamic = 0;
      bool told = false;
      for (int64_t len : {1, 2, 3, 4, 5, 17, 63, 64, 65, 100, 128, 129, 150, 7}) {
        SCOPED_TRACE("keys=" + std::to_string(len));
        const std::vector<float> qs =
            values(static_cast<size_t>(points * rows * kDim), 0.2f, static_cast<int>(len));
        auto q = kiln::Tensor::from_host(dev, std::span<const float>(qs), q_shape);
        auto k = kt.slice(key_axis, 0, len);
        auto v = vt.slice(key_axis, 0, len);
        auto o = composite
                     ? kiln::attention(q, k, v)
                     : kiln::matmul(kiln::softmax(kiln::matmul(q, k.transpose()) * scale, -1), v);
        auto got = o.to_vector<float>();
        ASSERT_TRUE(got.has_value()) << got.error().message;
        const kiln::RealizeStats st = dev.last_stats();
        if (++steps > 3) later += st.compiled;
        total += st.compiled;
        dynamic = std::max(dynamic, st.dynamic_kernels);
        for (const std::string& r : st.recompiles)
          told = told || r.find("run-time sizes from now on") != std::string::npos;
        for (int64_t h = 0; h < points; ++h)
          for (int64_t i = 0; i < rows; ++i) {
            const std::vector<double> want =
                host_attention_row(&qs[static_cast<size_t>((h * rows + i) * kDim)],
                                   &ks[static_cast<size_t>(h * kCtx * kDim)],
                                   &vs[static_cast<size_t>(h * kCtx * kDim)], len, kDim);
            for (int64_t e = 0; e < kDim; ++e)
              ASSERT_NEAR((*got)[static_cast<size_t>((h * rows + i) * kDim + e)],
                          want[static_cast<size_t>(e)], 1e-5)
                  << "batch point " << h << " row " << i << " column " << e;
          }
      }
      EXPECT_EQ(later, 0) << "every length after the third runs the kernel with run-time keys";
      EXPECT_GE(dynamic, 1);
      // The composite lowers to the same kernel: generalized already, it compiles nothing.
      if (composite)
        EXPECT_EQ(total, 0);
      else
        EXPECT_TRUE(told) << "--stats says the attention kernel took run-time sizes";
    }
  }
}

// Self-attention over a prompt of any length: the query rows and the keys are one run-time size,
// so the fused attention kernel compiles at the first two lengths and never after (its blocks of
// query rows counted at run time: 2 x 3 heads of 1 to 4 blocks), causal or not, and every length
// equals the host's.
TEST(DynamicShapes, SelfAttentionOverAPromptOfAnyLengthCompilesOnce) {
  constexpr int64_t kPoints = 6, kDim = 16;
  for (const bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    auto dev = open_cpu({{"shapes.policy", "automatic"}});
    int later = 0, steps = 0;
    for (int64_t n : {5, 6, 2, 31, 32, 33, 100, 7}) {
      SCOPED_TRACE("n=" + std::to_string(n));
      const auto count = static_cast<size_t>(kPoints * n * kDim);
      const std::vector<float> qs = values(count, 0.3f, static_cast<int>(n));
      const std::vector<float> ks = values(count, 0.3f, static_cast<int>(n) + 1);
      const std::vector<float> vs = values(count, 0.5f, static_cast<int>(n) + 2);
      const kiln::Shape shape{2, 3, n, kDim};
      auto q = kiln::Tensor::from_host(dev, std::span<const float>(qs), shape);
      auto k = kiln::Tensor::from_host(dev, std::span<const float>(ks), shape);
      auto v = kiln::Tensor::from_host(dev, std::span<const float>(vs), shape);
      auto got = kiln::attention(q, k, v, causal).to_vector<float>();
      ASSERT_TRUE(got.has_value()) << got.error().message;
      if (++steps > 2) later += dev.last_stats().compiled;
      for (int64_t h = 0; h < kPoints; ++h)
        for (int64_t i = 0; i < n; ++i) {
          const std::vector<double> want = host_attention_row(
              &qs[static_cast<size_t>((h * n + i) * kDim)], &ks[static_cast<size_t>(h * n * kDim)],
              &vs[static_cast<size_t>(h * n * kDim)], causal ? i + 1 : n, kDim);
          for (int64_t e = 0; e < kDim; ++e)
            ASSERT_NEAR((*got)[static_cast<size_t>((h * n + i) * kDim + e)],
                        want[static_cast<size_t>(e)], 1e-5)
                << "batch point " << h << " row " << i << " column " << e;
        }
    }
    EXPECT_EQ(later, 0) << "every length after the second runs the kernel with run-time sizes";
  }
}

// Attention over a window of 17 keys that slides along a cache: the window's start is a size the
// kernel's loads read at run time (the key count stays 17), so it compiles at the first three
// starts (the first, at 0, lowers without the offset) and never after; it compiled at every
// step before. Every step equals the host's.
TEST(DynamicShapes, AttentionOverASlidingWindowCompilesAtTheFirstStartsOnly) {
  auto dev = open_cpu({{"shapes.policy", "automatic"}});
  constexpr int64_t kHeads = 4, kCtx = 64, kDim = 16, kWindow = 17, kRows = 2;
  const std::vector<float> ks = values(kHeads * kCtx * kDim, 0.1f, 8);
  auto kt = kiln::Tensor::from_host(dev, std::span<const float>(ks), {1, kHeads, kCtx, kDim});
  const std::vector<float> qs = values(kHeads * kRows * kDim, 0.3f, 9);
  auto q = kiln::Tensor::from_host(dev, std::span<const float>(qs), {1, kHeads, kRows, kDim});
  int later = 0, steps = 0;
  for (int64_t s0 = 0; s0 + kWindow <= kCtx; s0 += 3) {
    SCOPED_TRACE("start=" + std::to_string(s0));
    auto w = kt.slice(2, s0, s0 + kWindow);
    auto got = kiln::attention(q, w, w).to_vector<float>();
    ASSERT_TRUE(got.has_value()) << got.error().message;
    if (++steps > 3) later += dev.last_stats().compiled;
    for (int64_t h = 0; h < kHeads; ++h)
      for (int64_t i = 0; i < kRows; ++i) {
        const float* window = &ks[static_cast<size_t>((h * kCtx + s0) * kDim)];
        const std::vector<double> want = host_attention_row(
            &qs[static_cast<size_t>((h * kRows + i) * kDim)], window, window, kWindow, kDim);
        for (int64_t e = 0; e < kDim; ++e)
          ASSERT_NEAR((*got)[static_cast<size_t>((h * kRows + i) * kDim + e)],
                      want[static_cast<size_t>(e)], 1e-5)
              << "head " << h << " row " << i << " column " << e;
      }
  }
  EXPECT_GE(steps, 10);
  EXPECT_EQ(later, 0) << "the window's start is read at run time from the third start on";
}

// A matrix product whose contraction grows is the same kernel at every size, but the cpu runs
// a matmul at fixed sizes only: each size compiles its own, and --stats says why (not only
// which dimension changed).
TEST(DynamicShapes, AKernelKeptAtItsSizesSaysWhyItCompilesAgain) {
  auto dev = open_cpu({{"shapes.policy", "automatic"}});
  for (int64_t n : {5, 6, 7}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<float> xs = values(static_cast<size_t>(4 * n), 0.5f, 1);
    const std::vector<float> ws = values(static_cast<size_t>(n * 3), 0.5f, 2);
    auto x = kiln::Tensor::from_host(dev, std::span<const float>(xs), {4, n});
    auto w = kiln::Tensor::from_host(dev, std::span<const float>(ws), {n, 3});
    auto got = kiln::matmul(x, w).to_vector<float>();
    ASSERT_TRUE(got.has_value()) << got.error().message;
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 3; ++j) {
        double want = 0;
        for (int64_t k = 0; k < n; ++k)
          want += double{xs[static_cast<size_t>(i * n + k)]} * ws[static_cast<size_t>(k * 3 + j)];
        ASSERT_NEAR((*got)[static_cast<size_t>(i * 3 + j)], want, 1e-5);
      }
    const kiln::RealizeStats st = dev.last_stats();
    EXPECT_EQ(st.compiled, 1);
    bool told = false;
    for (const std::string& r : st.recompiles)
      told = told || r.find(
                         "code of its own at each size (cpu runs this kernel at fixed sizes "
                         "only)") != std::string::npos;
    EXPECT_EQ(told, n != 5) << "the first size compiles without a reason; later ones say why";
  }
}

// A mean scales its sum by 1/n, a float constant of the size: the kernel takes it at run time
// as a float slot, so a mean and a layernorm over a growing row compile once more at the second
// size and never after.
// mean and layernorm over x [4, n] on `dev`, checked against the host's; the realize's stats.
kiln::RealizeStats checked_mean_and_layernorm(const kiln::Device& dev, int64_t n) {
  const std::vector<float> xs = values(static_cast<size_t>(4 * n), 0.7f, static_cast<int>(n));
  const std::vector<float> gs = values(static_cast<size_t>(n), 0.2f, 3);
  const std::vector<float> bs = values(static_cast<size_t>(n), 0.1f, 5);
  auto x = kiln::Tensor::from_host(dev, std::span<const float>(xs), {4, n});
  auto gamma = kiln::Tensor::from_host(dev, std::span<const float>(gs), {n});
  auto beta = kiln::Tensor::from_host(dev, std::span<const float>(bs), {n});
  auto mean = x.mean({1});
  auto norm = kiln::layernorm(x, gamma, beta, 1, 1e-5);
  auto got = kiln::realize({mean, norm});
  EXPECT_TRUE(got.has_value()) << got.error().message;
  const kiln::RealizeStats st = dev.last_stats();
  auto m = mean.to_vector<float>();
  auto y = norm.to_vector<float>();
  EXPECT_TRUE(m && y);
  for (int64_t i = 0; m && y && i < 4; ++i) {
    double sum = 0, sq = 0;
    for (int64_t j = 0; j < n; ++j) sum += xs[i * n + j];
    const double mu = sum / static_cast<double>(n);
    for (int64_t j = 0; j < n; ++j) sq += (xs[i * n + j] - mu) * (xs[i * n + j] - mu);
    const double inv = 1.0 / std::sqrt(sq / static_cast<double>(n) + 1e-5);
    EXPECT_NEAR((*m)[i], mu, 1e-5 * (1 + std::abs(mu))) << "n " << n << " row " << i;
    for (int64_t j = 0; j < n; ++j) {
      const size_t k = static_cast<size_t>(i * n + j);
      if (std::abs((*y)[k] - ((xs[k] - mu) * inv * gs[j] + bs[j])) > 1e-4) {
        ADD_FAILURE() << "n " << n << " row " << i << " column " << j << ": " << (*y)[k];
        return st;
      }
    }
  }
  return st;
}

TEST(DynamicShapes, AGrowingRowsMeanAndLayernormCompileEachKernelOnce) {
  auto dev = open_cpu({{"shapes.policy", "automatic"}});
  int later = 0, first = -1;
  Sources plans;
  for (int64_t n : {5, 6, 9, 17, 3, 100, 1000, 7}) {
    const kiln::RealizeStats st = checked_mean_and_layernorm(dev, n);
    if (first < 0)
      first = st.compiled;
    else if (n != 6)
      later += st.compiled;
    plans.add(st.plan_source);
    if (n != 5) {
      EXPECT_EQ(st.dynamic_kernels, st.kernels) << "n " << n;
    }
  }
  EXPECT_GT(first, 0);
  EXPECT_EQ(later, 0) << "every size after the second runs the kernels with run-time sizes";
  // The means' 1/n is a float slot that fits as the reciprocal of n: the plans of 6 and 9 make
  // the symbolic plan, 17's confirms it, and every size after plans nothing.
  EXPECT_EQ(plans.built, 4);
  EXPECT_EQ(plans.symbolic, 4);
}

// The symbolic plan of a mean's growing row, stored: a new device takes it at a size of its own,
// the float slot (1/n) computed for that size.
TEST(DynamicShapes, ASymbolicPlanOfAMeanFromTheCacheServesANewDevice) {
  const std::string path = fresh_cache_path("mean");
  const Settings cache = {{"shapes.policy", "automatic"}, {"compilation.cache", "file=" + path}};
  {
    auto dev = open_cpu(cache);
    for (int64_t n : {5, 6, 9, 17}) checked_mean_and_layernorm(dev, n);
    EXPECT_EQ(checked_mean_and_layernorm(dev, 30).plan_source, "symbolic");
  }
  {
    auto dev = open_cpu(cache);  // a new device: nothing in memory
    for (int64_t n : {40, 3, 257}) {
      const kiln::RealizeStats st = checked_mean_and_layernorm(dev, n);
      EXPECT_EQ(st.plan_source, "symbolic") << "n " << n;
      EXPECT_EQ(st.compiled, 0) << "n " << n;
    }
  }
  std::filesystem::remove(path);
}

// A row sum over x [n, n]: one size is the kernel's outer extent and its rows' length, a slot
// of its run-time sizes. A plan read back from the cache (a symbolic one at a new size, or one
// stored at a size met before) launches as many rows as its own size has: a record once kept
// no domain slots, and such a plan ran the rows of the size its kernel was compiled at (rows past
// them never written; a smaller size wrote past its output).
TEST(DynamicShapes, APlanFromTheCacheLaunchesTheRowsOfItsOwnSize) {
  const std::string path = fresh_cache_path("rows");
  const Settings cache = {{"shapes.policy", "dynamic"}, {"compilation.cache", "file=" + path}};
  const auto run = [](const kiln::Device& dev, int64_t n) {
    std::vector<float> xs(static_cast<size_t>(n * n));
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i % 7 + 1);
    auto x = kiln::Tensor::from_host(dev, std::span<const float>(xs), {n, n});
    auto got = x.sum({1}).to_vector<float>();
    EXPECT_TRUE(got.has_value()) << got.error().message;
    for (int64_t i = 0; got && i < n; ++i) {
      float want = 0;
      for (int64_t j = 0; j < n; ++j) want += xs[static_cast<size_t>(i * n + j)];
      EXPECT_EQ((*got)[static_cast<size_t>(i)], want) << "n " << n << " row " << i;
    }
    return dev.last_stats().plan_source;
  };
  {
    auto dev = open_cpu(cache);
    for (int64_t n : {5, 6, 9}) run(dev, n);  // no symbolic plan yet: a fourth size confirms it
    auto other = open_cpu(cache);             // a new device, the same cache
    EXPECT_EQ(run(other, 9), "disk") << "the plan stored at 9, its kernel compiled at 6";
    run(dev, 17);
    EXPECT_EQ(run(dev, 3), "symbolic");
  }
  auto dev = open_cpu(cache);
  for (int64_t n : {8, 2, 40}) EXPECT_EQ(run(dev, n), "symbolic") << "n " << n;
  std::filesystem::remove(path);
}

// With fusion off, a mean is a row sum and a kernel of its own that scales by 1/n: the scale
// kernel's shape does not change with n, only its float constant. Once the graph's input changed
// size, that constant becomes a float slot too, so every size after the second compiles nothing.
// A constant that changes while no size does (a user's x * c) keeps its own kernel per value.
TEST(DynamicShapes, AnUnfusedMeansScaleTakesItsFloatAtRunTimeOnceTheRowChangedSize) {
  auto dev = open_cpu({{"shapes.policy", "automatic"}, {"fusion.enabled", "false"}});
  int later = 0;
  Sources plans;
  for (int64_t n : {5, 6, 9, 17, 3, 100}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<float> xs = values(static_cast<size_t>(4 * n), 0.7f, static_cast<int>(n));
    auto x = kiln::Tensor::from_host(dev, std::span<const float>(xs), {4, n});
    auto mean = x.mean({1});
    auto got = mean.to_vector<float>();
    ASSERT_TRUE(got.has_value()) << got.error().message;
    const kiln::RealizeStats st = dev.last_stats();
    EXPECT_EQ(st.kernels, 2) << "the sum and the scale, unfused";
    plans.add(st.plan_source);
    if (n == 5 || n == 6) {
      EXPECT_EQ(st.compiled, 2);
    } else {
      later += st.compiled;
    }
    if (n != 5) {
      EXPECT_EQ(st.dynamic_kernels, 2);
    }
    for (int64_t i = 0; i < 4; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += xs[static_cast<size_t>(i * n + j)];
      const double mu = sum / static_cast<double>(n);
      EXPECT_NEAR((*got)[static_cast<size_t>(i)], mu, 1e-5 * (1 + std::abs(mu)));
    }
  }
  EXPECT_EQ(later, 0) << "every size after the second runs the kernels with run-time sizes";
  EXPECT_EQ(plans.built, 4) << "the scale's 1/n fits as a reciprocal of n: 3 and 100 are symbolic";
  EXPECT_EQ(plans.symbolic, 2);

  const std::vector<float> xs = values(32, 0.5f, 1);
  for (double c : {0.5, 0.25, 0.125}) {
    SCOPED_TRACE("c=" + std::to_string(c));
    auto x = kiln::Tensor::from_host(dev, std::span<const float>(xs), {4, 8});
    auto got = (x * c).to_vector<float>();
    ASSERT_TRUE(got.has_value()) << got.error().message;
    const kiln::RealizeStats st = dev.last_stats();
    EXPECT_EQ(st.compiled, 1) << "no size changed: the constant is the user's, compiled in";
    EXPECT_EQ(st.dynamic_kernels, 0);
    for (size_t i = 0; i < xs.size(); ++i)
      ASSERT_EQ((*got)[i], static_cast<float>(xs[i] * c)) << "element " << i;
  }
}

// softmax over x [rows, n] on `dev`, checked against the host's; the realize's stats.
kiln::RealizeStats checked_softmax(const kiln::Device& dev, int64_t rows, int64_t n) {
  const std::vector<float> xs = values(static_cast<size_t>(rows * n), 0.3f, static_cast<int>(n));
  auto x = kiln::Tensor::from_host(dev, std::span<const float>(xs), {rows, n});
  auto got = kiln::softmax(x, 1).to_vector<float>();
  EXPECT_TRUE(got.has_value()) << got.error().message;
  for (int64_t i = 0; got && i < rows; ++i) {
    double m = -1e30, z = 0;
    for (int64_t j = 0; j < n; ++j) m = std::max(m, double{xs[i * n + j]});
    for (int64_t j = 0; j < n; ++j) z += std::exp(xs[i * n + j] - m);
    for (int64_t j = 0; j < n; ++j)
      EXPECT_NEAR((*got)[i * n + j], std::exp(xs[i * n + j] - m) / z, 1e-6) << "n=" << n;
  }
  return dev.last_stats();
}

// Under `automatic` with autotuning on, a row kernel about to take its inner sizes at run time is
// first timed against its size's own code: slower than shapes.max_slowdown, it keeps per-size
// code (each size compiles its own, and --stats says why with the ratio); within it, one kernel
// serves every size. With autotuning off nothing is timed.
TEST(DynamicShapes, TheAutomaticPolicyKeepsPerSizeCodeWhereRunTimeSizesTimeSlower) {
  const auto softmax_at = [](const kiln::Device& dev, int64_t n) {
    return checked_softmax(dev, 32, n);
  };
  const auto said = [](const kiln::RealizeStats& s, const std::string& what) {
    return std::ranges::any_of(
        s.recompiles, [&](const std::string& r) { return r.find(what) != std::string::npos; });
  };
  const Settings tuned = {
      {"shapes.policy", "automatic"}, {"autotune.enabled", "true"}, {"autotune.level", "minimal"}};
  {
    // No code with run-time sizes is 100 times faster than a size's own: kept at every size.
    Settings settings = tuned;
    settings.push_back({"shapes.max_slowdown", "0.01"});
    auto dev = open_cpu(settings);
    EXPECT_GT(softmax_at(dev, 200).compiled, 0);
    const kiln::RealizeStats second = softmax_at(dev, 201);
    EXPECT_GT(second.compiled, 0);
    EXPECT_EQ(second.dynamic_kernels, 0);
    EXPECT_TRUE(said(second, "kept at its sizes: with run-time sizes it ran"))
        << one_per_line(second.recompiles);
    EXPECT_TRUE(said(second, "(shapes.max_slowdown 0.01); every size compiles its own"))
        << one_per_line(second.recompiles);
    EXPECT_TRUE(said(second, "(timed again once 4 sizes have)")) << one_per_line(second.recompiles);
    // Timed again at the 4th size that compiled its own, then at the 8th: one timing at the
    // second size is noisy and unlike later sizes, and keeping a kernel wrongly compiles every
    // size.
    for (int64_t n : {150, 140, 130, 120, 110, 100, 90, 80}) {
      const kiln::RealizeStats later = softmax_at(dev, n);
      EXPECT_GT(later.compiled, 0) << "a kept kernel is compiled at every size (" << n << ")";
      EXPECT_EQ(later.dynamic_kernels, 0);
      if (n == 120 || n == 80) {
        const std::string again = n == 120 ? "timed again after 4 sizes compiled their own: kept"
                                           : "timed again after 8 sizes compiled their own: kept";
        EXPECT_TRUE(said(later, again)) << n << ": " << one_per_line(later.recompiles);
        EXPECT_TRUE(said(later, n == 120 ? "(timed again once 8 sizes have)"
                                         : "(timed again once 16 sizes have)"))
            << n << ": " << one_per_line(later.recompiles);
      } else {
        EXPECT_FALSE(said(later, "ran")) << n << ": not timed";
      }
    }
  }
  {
    // Nor 100 times slower: one kernel for every size after the first.
    Settings settings = tuned;
    settings.push_back({"shapes.max_slowdown", "100"});
    auto dev = open_cpu(settings);
    EXPECT_GT(softmax_at(dev, 200).compiled, 0);
    const kiln::RealizeStats second = softmax_at(dev, 201);
    EXPECT_EQ(second.dynamic_kernels, second.kernels);
    EXPECT_TRUE(said(second, "one kernel for every size (timed at "))
        << one_per_line(second.recompiles);
    const kiln::RealizeStats third = softmax_at(dev, 150);
    EXPECT_EQ(third.compiled, 0);
    EXPECT_EQ(third.dynamic_kernels, third.kernels);
  }
  {
    // Autotuning off: nothing is timed, so the limit does not hold the kernel back.
    auto dev = open_cpu({{"shapes.policy", "automatic"}, {"shapes.max_slowdown", "0.01"}});
    EXPECT_GT(softmax_at(dev, 200).compiled, 0);
    const kiln::RealizeStats second = softmax_at(dev, 201);
    EXPECT_EQ(second.dynamic_kernels, second.kernels);
    EXPECT_FALSE(said(second, "timed at")) << one_per_line(second.recompiles);
    EXPECT_EQ(softmax_at(dev, 150).compiled, 0);
  }
}

// A plan built again at the same input shapes says which attribute asked for it: a slice whose
// end grows (a cache read up to a length), a constant that changed.
TEST(DynamicShapes, ANewPlanAtTheSameInputShapesSaysWhichAttributeChanged) {
  auto dev = open_cpu({{"shapes.policy", "automatic"}});
  const std::vector<float> xs = values(4 * 16, 0.5f, 1);
  auto x = kiln::Tensor::from_host(dev, std::span<const float>(xs), {4, 16});
  std::vector<std::vector<std::string>> lines;
  for (int64_t end : {3, 4}) {
    auto got = (x.slice(1, 0, end) * 2.0).to_vector<float>();
    ASSERT_TRUE(got.has_value()) << got.error().message;
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < end; ++j)
        ASSERT_EQ((*got)[static_cast<size_t>(i * end + j)],
                  xs[static_cast<size_t>(i * 16 + j)] * 2);
    lines.push_back(dev.last_stats().recompiles);
  }
  EXPECT_TRUE(lines[0].empty()) << one_per_line(lines[0]);
  ASSERT_FALSE(lines[1].empty());
  EXPECT_EQ(lines[1][0], "new plan: the same input shapes, but slice's end changed 3 -> 4")
      << one_per_line(lines[1]);
  // Two slices to one new length: one line, with the count.
  for (int64_t end : {5, 6}) {
    auto both =
        kiln::concat({x.slice(1, 0, end), (x + 1.0).slice(1, 0, end)}, 0).to_vector<float>();
    ASSERT_TRUE(both.has_value()) << both.error().message;
    ASSERT_EQ((*both)[static_cast<size_t>(4 * end)], xs[0] + 1) << "the second slice's first row";
  }
  const std::vector<std::string> two = dev.last_stats().recompiles;
  ASSERT_FALSE(two.empty());
  EXPECT_EQ(two[0], "new plan: the same input shapes, but slice's end changed 5 -> 6 (at 2 nodes)")
      << one_per_line(two);
  EXPECT_EQ(
      std::ranges::count_if(two, [](const std::string& l) { return l.starts_with("new plan:"); }),
      1)
      << one_per_line(two);
  (x * 0.5).realize();
  auto quarter = (x * 0.25).to_vector<float>();
  ASSERT_TRUE(quarter.has_value()) << quarter.error().message;
  EXPECT_NE(one_per_line(dev.last_stats().recompiles).find("changed 0.5 -> 0.25"),
            std::string::npos)
      << one_per_line(dev.last_stats().recompiles);
}

// A kernel with run-time sizes in the persistent cache: a new device runs a stored plan of it
// (its sizes in the record), and generalizes its own first two sizes to the stored kernel.
TEST(DynamicShapes, AKernelWithRunTimeSizesFromTheCacheServesANewDevice) {
  const std::string path = fresh_cache_path("sizes");
  const Settings cache = {{"shapes.policy", "automatic"}, {"compilation.cache", "file=" + path}};
  const auto run = [](const kiln::Device& dev, int64_t n) { return checked_softmax(dev, 3, n); };
  {
    auto dev = open_cpu(cache);
    EXPECT_GT(run(dev, 5).compiled, 0);
    const kiln::RealizeStats s = run(dev, 6);  // generalized: compiled with run-time sizes
    EXPECT_GT(s.compiled, 0);
    EXPECT_EQ(s.dynamic_kernels, s.kernels);
  }
  {
    auto dev = open_cpu(cache);          // a new device: nothing in memory
    kiln::RealizeStats s = run(dev, 6);  // the stored plan, bound to its sizes
    EXPECT_EQ(s.plan_source, "disk");
    EXPECT_EQ(s.compiled, 0);
    EXPECT_EQ(s.dynamic_kernels, s.kernels);
    EXPECT_GT(run(dev, 40).compiled, 0);  // its first size here: specialized
    s = run(dev, 41);                     // generalized to the stored kernel
    EXPECT_EQ(s.compiled, 0);
    EXPECT_EQ(s.dynamic_kernels, s.kernels);
    EXPECT_EQ(run(dev, 100).compiled, 0);
  }
  std::filesystem::remove(path);
}

// Under the static policy a growing row compiles its kernels at every size, as before.
TEST(DynamicShapes, AGrowingRowUnderTheStaticPolicyCompilesEverySize) {
  auto dev = open_cpu({{"shapes.policy", "static"}});
  int compiled = 0;
  for (int64_t n : {5, 6, 9}) {
    const std::vector<float> xs = values(static_cast<size_t>(3 * n), 0.3f, static_cast<int>(n));
    auto x = kiln::Tensor::from_host(dev, std::span<const float>(xs), {3, n});
    ASSERT_TRUE(kiln::softmax(x, 1).to_vector<float>().has_value());
    compiled += dev.last_stats().compiled;
    EXPECT_EQ(dev.last_stats().dynamic_kernels, 0);
  }
  EXPECT_GE(compiled, 3);
}

// A dynamic kernel in the persistent cache serves another process's other sizes.
TEST(DynamicShapes, ADynamicKernelFromTheCacheServesAnotherSize) {
  const std::string path = fresh_cache_path("dynamic");
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

// The symbolic plan one process made is stored in the persistent cache with its kernels: another
// process (a new device) serves its first size from it, building and compiling nothing, under the
// dynamic and the automatic policy; sizes 0 and 1 are still built.
TEST(DynamicShapes, ASymbolicPlanFromTheCacheServesANewProcess) {
  for (const char* policy : {"dynamic", "automatic"}) {
    const std::string path = fresh_cache_path("symbolic");
    const Settings cache = {{"shapes.policy", policy}, {"compilation.cache", "file=" + path}};
    {
      auto dev = open_cpu(cache);
      Mlp mlp(dev);
      // Under dynamic the first two sizes make the symbolic plan; under automatic, the second
      // generalizes the kernels and the third makes it.
      const bool automatic = std::string(policy) == "automatic";
      for (int64_t b : {12, 30, 44})
        EXPECT_EQ(run_mlp(dev, mlp, b).plan_source, b < 44 || automatic ? "built" : "symbolic")
            << policy << " b=" << b;
      EXPECT_EQ(run_mlp(dev, mlp, 57).plan_source, "symbolic") << policy;
    }
    {
      auto dev = open_cpu(cache);  // a new device: nothing in memory
      Mlp mlp(dev);
      const kiln::RealizeStats s = run_mlp(dev, mlp, 77);
      EXPECT_EQ(s.plan_source, "symbolic") << policy;
      EXPECT_EQ(s.compiled, 0) << policy;
      EXPECT_EQ(s.dynamic_kernels, s.kernels) << policy;
      EXPECT_EQ(run_mlp(dev, mlp, 5).plan_source, "symbolic") << policy;
      EXPECT_EQ(run_mlp(dev, mlp, 1).plan_source, "built") << policy;
      EXPECT_EQ(run_mlp(dev, mlp, 0).plan_source, "built") << policy;
      EXPECT_EQ(run_mlp(dev, mlp, 300).plan_source, "symbolic") << policy;
    }
    {
      // The static policy keeps its plans apart: it builds.
      auto dev = open_cpu({{"shapes.policy", "static"}, {"compilation.cache", "file=" + path}});
      Mlp mlp(dev);
      EXPECT_EQ(run_mlp(dev, mlp, 77).plan_source, "built") << policy;
    }
    std::filesystem::remove(path);
  }
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

// A graph whose size symbol is on an inner axis compiles its kernels once, at its first call:
// the call reads the graph again with ?n one larger and lowers it (nothing compiled), so the
// first size's kernels take n at run time already (a mean's 1/n too). Under the static policy
// every size compiles its own.
TEST(DynamicShapes, AGraphsInnerSymbolCompilesItsKernelsOnceFromTheFirstCall) {
  for (const char* policy : {"automatic", "dynamic", "static"}) {
    SCOPED_TRACE(policy);
    auto dev = open_cpu({{"shapes.policy", policy}});
    auto graph = kiln::Graph::parse(
        "kiln.graph v1\n"
        "input %x : f32[4,?n=10]\n"
        "%y = softmax(%x, axis=1)\n"
        "%m = mean(%x, axes=[1])\n"
        "output %y\n"
        "output %m\n",
        "inner.kg");
    ASSERT_TRUE(graph.has_value()) << graph.error().message;
    const bool fixed = std::string(policy) == "static";
    int first = -1, later = 0;
    Sources plans;
    for (int64_t n : {10, 11, 5, 6, 9, 17, 3}) {
      const std::vector<float> xs = values(static_cast<size_t>(4 * n), 0.5f, static_cast<int>(n));
      auto out =
          graph->call(dev, {kiln::Tensor::from_host(dev, std::span<const float>(xs), {4, n})});
      ASSERT_TRUE(out.has_value()) << out.error().message;
      ASSERT_TRUE(kiln::realize(*out).has_value());
      const kiln::RealizeStats st = dev.last_stats();
      plans.add(st.plan_source);
      if (first < 0) {
        first = st.compiled;
        if (!fixed) {
          EXPECT_EQ(st.dynamic_kernels, st.kernels) << "run-time sizes from the first call";
          ASSERT_FALSE(st.recompiles.empty());
          EXPECT_NE(st.recompiles[0].find("(first met at size.0 = 11"), std::string::npos)
              << st.recompiles[0];
        }
      } else {
        later += st.compiled;
      }
      auto y = (*out)[0].to_vector<float>();
      auto m = (*out)[1].to_vector<float>();
      ASSERT_TRUE(y && m);
      for (int64_t i = 0; i < 4; ++i) {
        double top = -1e30, z = 0, sum = 0;
        for (int64_t j = 0; j < n; ++j) top = std::max(top, double{xs[i * n + j]});
        for (int64_t j = 0; j < n; ++j) z += std::exp(xs[i * n + j] - top), sum += xs[i * n + j];
        EXPECT_NEAR((*m)[i], sum / static_cast<double>(n), 1e-6) << "n " << n;
        for (int64_t j = 0; j < n; ++j)
          ASSERT_NEAR((*y)[i * n + j], std::exp(xs[i * n + j] - top) / z, 1e-6) << "n " << n;
      }
    }
    EXPECT_GT(first, 0);
    if (fixed) {
      EXPECT_GT(later, 0) << "every size its own kernels";
    } else {
      EXPECT_EQ(later, 0) << "the first call's kernels serve every size";
      EXPECT_EQ(plans.symbolic, 4) << "10, 11 and 5 built; 5 confirms the template of 10 and 11";
    }
  }
}

// Two symbols, an outer and an inner one: the first call's kernels take both at run time (the
// graph is read again with each one larger), so a call at other sizes of both compiles nothing.
TEST(DynamicShapes, AGraphsOuterAndInnerSymbolsCompileItsKernelsOnce) {
  auto dev = open_cpu({{"shapes.policy", "automatic"}});
  auto graph = kiln::Graph::parse(
      "kiln.graph v1\n"
      "input %x : f32[?b=3,?n=10]\n"
      "%y = softmax(%x, axis=1)\n"
      "output %y\n",
      "two.kg");
  ASSERT_TRUE(graph.has_value()) << graph.error().message;
  int later = 0;
  for (const auto& [b, n] : std::vector<std::pair<int64_t, int64_t>>{
           {3, 10}, {5, 11}, {2, 7}, {8, 9}, {3, 40}, {17, 10}, {4, 4}}) {
    const std::vector<float> xs = values(static_cast<size_t>(b * n), 0.5f, static_cast<int>(b + n));
    auto out = graph->call(dev, {kiln::Tensor::from_host(dev, std::span<const float>(xs), {b, n})});
    ASSERT_TRUE(out.has_value()) << out.error().message;
    auto y = (*out)[0].to_vector<float>();
    ASSERT_TRUE(y.has_value()) << y.error().message;
    if (b != 3 || n != 10) later += dev.last_stats().compiled;
    for (int64_t i = 0; i < b; ++i) {
      double top = -1e30, z = 0;
      for (int64_t j = 0; j < n; ++j) top = std::max(top, double{xs[i * n + j]});
      for (int64_t j = 0; j < n; ++j) z += std::exp(xs[i * n + j] - top);
      for (int64_t j = 0; j < n; ++j)
        ASSERT_NEAR((*y)[i * n + j], std::exp(xs[i * n + j] - top) / z, 1e-6) << b << "x" << n;
    }
  }
  EXPECT_EQ(later, 0) << "the first call's kernel serves every ?b and ?n";
}

// A symbol without a size in the file (`?n`, not `?n=8`) loads: the graph reads it first at 1 (or
// the first size it reads at, for a reshape to [3, -1]), and every call reads it again at its
// tensors' sizes. An error that no size avoids (an unknown op) reads as it would anyway.
TEST(DynamicShapes, AGraphWhoseSymbolHasNoSizeLoadsAndServesEverySize) {
  auto dev = open_cpu({});
  auto graph = kiln::Graph::parse(
      "kiln.graph v1\n"
      "input %x : f32[4,?n]\n"
      "%y = softmax(%x, axis=1)\n"
      "output %y\n",
      "unsized.kg");
  ASSERT_TRUE(graph.has_value()) << graph.error().message;
  ASSERT_EQ(graph->inputs().size(), 1u);
  EXPECT_EQ(graph->inputs()[0].shape, (kiln::Shape{4, 1}));
  EXPECT_EQ(graph->inputs()[0].symbols, (std::vector<std::string>{"", "n"}));
  for (int64_t n : {5, 6, 9, 17, 3, 1}) {
    const std::vector<float> xs = values(static_cast<size_t>(4 * n), 0.5f, static_cast<int>(n));
    auto out = graph->call(dev, {kiln::Tensor::from_host(dev, std::span<const float>(xs), {4, n})});
    ASSERT_TRUE(out.has_value()) << out.error().message;
    auto got = (*out)[0].to_vector<float>();
    ASSERT_TRUE(got.has_value());
    for (int64_t i = 0; i < 4; ++i) {
      double m = -1e30, z = 0;
      for (int64_t j = 0; j < n; ++j) m = std::max(m, double{xs[i * n + j]});
      for (int64_t j = 0; j < n; ++j) z += std::exp(xs[i * n + j] - m);
      for (int64_t j = 0; j < n; ++j)
        ASSERT_NEAR((*got)[i * n + j], std::exp(xs[i * n + j] - m) / z, 1e-6) << "n " << n;
    }
  }
  auto wide = kiln::Graph::parse(
      "kiln.graph v1\n"
      "input %x : f32[4,?n]\n"
      "%y = reshape(%x, shape=[3,-1])\n"
      "output %y\n",
      "wide.kg");
  ASSERT_TRUE(wide.has_value()) << wide.error().message;
  EXPECT_EQ(wide->inputs()[0].shape, (kiln::Shape{4, 3}));
  auto unknown = kiln::Graph::parse(
      "kiln.graph v1\ninput %x : f32[4,?n]\n%y = foo(%x)\noutput %y\n", "foo.kg");
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().message, "foo.kg:3:6: error: unknown op 'foo'");
  // A mistake past a reshape that reads at 3 only: the reading that got furthest names it.
  auto later = kiln::Graph::parse(
      "kiln.graph v1\n"
      "input %x : f32[4,?n]\n"
      "%y = reshape(%x, shape=[3,-1])\n"
      "%z = foo(%y)\n"
      "output %z\n",
      "later.kg");
  ASSERT_FALSE(later.has_value());
  EXPECT_EQ(later.error().message, "later.kg:4:6: error: unknown op 'foo'");
  auto never = kiln::Graph::parse(
      "kiln.graph v1\ninput %x : f32[4,?n]\n%y = reshape(%x, shape=[7,5,-1])\noutput %y\n",
      "never.kg");
  ASSERT_FALSE(never.has_value());
  EXPECT_NE(
      never.error().message.find("cannot reshape [4,1] (4 elements) into [7,5,-1] (a graph "
                                 "reads a size symbol without a size first at 1, then at 2, "),
      std::string::npos)
      << never.error().message;
  EXPECT_NE(never.error().message.find("write a size it reads at in the file, ?name=N)"),
            std::string::npos)
      << never.error().message;
}

}  // namespace

namespace {

// Graphs of one input x [b, 6] at sizes that make a symbolic plan (2, 3), use it (5, 9, 17, 33,
// 4, 64) and leave it (1, 0), each size against the reference interpreter. `symbolic` says
// whether the graph's plan follows b (its kernels dynamic, its sizes affine in b). A graph whose
// kernels read b in an index (a reduction over it, a slice, pad, flip or concat along it, a
// transpose) takes b as a run-time size of those kernels from the second size on; its plans at
// 3 and 5 make a symbolic plan that 9's confirms, and 17, 33, 4 and 64 use it. A slice from row
// 1 (its end b, a size of the family; its kernel dynamic along its rows, no run-time sizes) makes
// a symbolic plan at 3 and 5 with nothing to confirm, and 9 to 64 use it (at 2 it takes one row,
// a size-1 fact).
TEST(DynamicShapes, SymbolicPlansMatchTheReferenceAtEverySize) {
  auto dev = open_cpu({{"shapes.policy", "dynamic"}});
  auto ref = kiln::Device::open("reference", kiln::Options{.settings = {}, .use_config = false,
                                                            .config_dir = ""})
                 .value();
  const std::vector<float> wv = values(6 * 5, 0.1f, 9), gv = values(6, 0.2f, 3), bv = values(6, 0.1f, 4);
  struct Case {
    const char* name;
    int symbolic;  // sizes that take the symbolic plan, of 10
    std::function<kiln::Tensor(const kiln::Device&, const kiln::Tensor&, int64_t)> f;
  };
  const std::vector<Case> cases = {
      {"elementwise", 6,
       [](auto&, const kiln::Tensor& x, int64_t) { return kiln::exp(x * 0.5) + 1.0; }},
      {"softmax", 6, [](auto&, const kiln::Tensor& x, int64_t) { return kiln::softmax(x, 1); }},
      {"layernorm", 6,
       [&](const kiln::Device& d, const kiln::Tensor& x, int64_t) {
         return kiln::layernorm(x, kiln::Tensor::from_host(d, std::span<const float>(gv), {6}),
                                kiln::Tensor::from_host(d, std::span<const float>(bv), {6}));
       }},
      {"row sum", 6, [](auto&, const kiln::Tensor& x, int64_t) { return x.sum({1}); }},
      {"argmax", 6, [](auto&, const kiln::Tensor& x, int64_t) { return x.argmax(1); }},
      {"cumsum", 6, [](auto&, const kiln::Tensor& x, int64_t) { return kiln::cumsum(x, 1); }},
      {"inner slice", 6,
       [](auto&, const kiln::Tensor& x, int64_t) { return x.slice(1, 1, 5) * 3.0; }},
      {"reshapes", 6,
       [](auto&, const kiln::Tensor& x, int64_t b) {
         return (x.reshape({b * 6}) + 1.0).reshape({b, 3, 2}).sum({2});
       }},
      {"mlp", 6,
       [&](const kiln::Device& d, const kiln::Tensor& x, int64_t) {
         return kiln::relu(kiln::matmul(x, kiln::Tensor::from_host(d, std::span<const float>(wv), {6, 5})));
       }},
      {"batch sum", 4, [](auto&, const kiln::Tensor& x, int64_t) { return x.sum({0}); }},
      {"batch slice", 5,
       [](auto&, const kiln::Tensor& x, int64_t) { return x.slice(0, 1, std::nullopt); }},
      {"batch concat", 4,
       [](auto&, const kiln::Tensor& x, int64_t) {
         return kiln::concat({x, x * 2.0}, 0);
       }},
      {"batch pad", 4,
       [](auto&, const kiln::Tensor& x, int64_t) {
         return x.pad({1, 0}, {2, 0}, 7.0);
       }},
      {"batch flip", 4, [](auto&, const kiln::Tensor& x, int64_t) { return x.flip({0}) - 1.0; }},
      {"transpose", 4, [](auto&, const kiln::Tensor& x, int64_t) { return x.transpose() * 2.0; }},
  };
  for (const Case& c : cases) {
    Sources plans;
    for (int64_t b : {2, 3, 5, 9, 1, 0, 17, 33, 4, 64}) {
      const std::vector<float> xs = values(static_cast<size_t>(b * 6), 0.3f, static_cast<int>(b));
      auto got = c.f(dev, kiln::Tensor::from_host(dev, std::span<const float>(xs), {b, 6}), b).to_host();
      plans.add(dev.last_stats().plan_source);
      auto want = c.f(ref, kiln::Tensor::from_host(ref, std::span<const float>(xs), {b, 6}), b).to_host();
      ASSERT_TRUE(got.has_value() && want.has_value()) << c.name << " b=" << b;
      ASSERT_EQ(got->shape, want->shape) << c.name << " b=" << b;
      const int64_t n = got->numel();
      for (int64_t i = 0; i < n; ++i) {
        const double g = got->get(i), w = want->get(i);
        if (std::abs(g - w) > 1e-5 * (1 + std::abs(w))) {
          ADD_FAILURE() << c.name << " b=" << b << " element " << i << ": " << g << " vs " << w;
          break;
        }
      }
    }
    EXPECT_EQ(plans.symbolic, c.symbolic) << c.name;
    EXPECT_EQ(plans.symbolic + plans.built, 10) << c.name;
  }
}

}  // namespace

namespace {

// An output of 16 MiB or more is written with streaming stores chosen by its size
// (codegen/cpu/streaming_stores.h): a symbolic plan, whose dynamic kernel stores as it does at
// every size, does not serve it; the size is built, its kernel specialized.
TEST(DynamicShapes, AnOutputLargeEnoughToStreamLeavesTheSymbolicPlan) {
  auto dev = open_cpu({{"shapes.policy", "dynamic"}});
  for (int64_t b : {2, 3, 5, 4096 + 7}) {
    const std::vector<float> xs = values(static_cast<size_t>(b * 1024), 0.25f, static_cast<int>(b));
    auto x = kiln::Tensor::from_host(dev, std::span<const float>(xs), {b, 1024});
    auto got = (x * 2.0 + 1.0).to_vector<float>();
    ASSERT_TRUE(got.has_value()) << got.error().message;
    const kiln::RealizeStats s = dev.last_stats();
    if (b < 4096) {
      EXPECT_EQ(s.plan_source, b < 5 ? "built" : "symbolic") << "b=" << b;
      EXPECT_EQ(s.dynamic_kernels, 1) << "b=" << b;
    } else {
      EXPECT_EQ(s.plan_source, "built") << "b=" << b;
      EXPECT_EQ(s.dynamic_kernels, 0) << "b=" << b;
    }
    for (size_t i = 0; i < xs.size(); ++i)
      if ((*got)[i] != xs[i] * 2.0f + 1.0f) {
        ADD_FAILURE() << "b=" << b << " element " << i;
        break;
      }
  }
}

}  // namespace

namespace {

// Two dimensions that change together: an elementwise kernel over x [b, b] runs one axis of b * b
// points, which the sizes of two plans (4 and 9 points) would fit as 5 * b - 6. The instances keep
// the kernel's point count equal to its buffers' element count, so no template serves b = 5 or 7
// (they are built, their kernel the same dynamic one) and every size's result is right.
TEST(DynamicShapes, APointCountThatIsAProductOfChangingSizesIsNotFitted) {
  auto dev = open_cpu({{"shapes.policy", "dynamic"}});
  int compiled = 0;
  for (int64_t b : {2, 3, 5, 7}) {
    const std::vector<float> xs = values(static_cast<size_t>(b * b), 0.25f, static_cast<int>(b));
    auto x = kiln::Tensor::from_host(dev, std::span<const float>(xs), {b, b});
    auto got = (kiln::exp(x) * 2.0).to_vector<float>();
    ASSERT_TRUE(got.has_value()) << got.error().message;
    EXPECT_EQ(dev.last_stats().plan_source, "built") << "b=" << b;
    compiled += dev.last_stats().compiled;
    for (size_t i = 0; i < xs.size(); ++i)
      if (std::abs((*got)[i] - 2 * std::exp(xs[i])) > 1e-5 * 2 * std::exp(xs[i])) {
        ADD_FAILURE() << "b=" << b << " element " << i << ": " << (*got)[i];
        break;
      }
  }
  EXPECT_EQ(compiled, 1) << "one dynamic kernel for every size";
}

}  // namespace

// On a GPU (vulkan:0, Mesa's lavapipe here; CUDA takes the same source), a dynamic kernel's text
// is written at its size bucket's bound and takes the outer extent at run time (a push constant,
// CUDA's last argument), its launch sized to the extent: each kernel compiles once per
// power-of-two bucket, and a kernel compiled in one process serves another size of its bucket in
// the next. Every size against the host: a row kernel (softmax) and a two-axis elementwise one
// with vector lanes along its inner axis.
TEST(DynamicShapes, GpuKernelsTakeTheOuterExtentAtRunTime) {
  const std::string path = fresh_cache_path("gpu_dynamic");
  const auto open_vulkan = [&] {
    return kiln::Device::open("vulkan:0",
                              kiln::Options{.settings = {{"compilation.cache", "file=" + path},
                                                         {"autotune.cache", "none"},
                                                         {"autotune.enabled", "false"},
                                                         {"shapes.policy", "dynamic"}},
                                            .use_config = false,
                                            .config_dir = ""});
  };
  auto opened = open_vulkan();
  if (!opened) GTEST_SKIP() << "vulkan:0 is not available: " << opened.error().message;
  constexpr int64_t kRow = 37, kInner = 8;
  const std::vector<float> w = values(kInner, 0.25f, 9);
  // Runs both graphs at n; returns the kernels compiled.
  const auto run = [&](kiln::Device& dev, int64_t n) {
    const auto tw = kiln::Tensor::from_host(dev, std::span<const float>(w), {kInner});
    const std::vector<float> xs = values(static_cast<size_t>(n * kRow), 0.1f, static_cast<int>(n));
    const std::vector<float> zs =
        values(static_cast<size_t>(n * kInner), 0.2f, static_cast<int>(n) + 1);
    auto x = kiln::Tensor::from_host(dev, std::span<const float>(xs), {n, kRow});
    auto z = kiln::Tensor::from_host(dev, std::span<const float>(zs), {n, kInner});
    auto got_r = kiln::softmax(x * 0.5 + 1.0, 1).to_vector<float>();
    const kiln::RealizeStats rs = dev.last_stats();
    auto got_e = (kiln::exp(z) * tw).to_vector<float>();
    const kiln::RealizeStats es = dev.last_stats();
    EXPECT_TRUE(got_r && got_e) << "n=" << n;
    if (!got_r || !got_e) return 0;
    EXPECT_EQ(rs.dynamic_kernels, rs.kernels) << "n=" << n;
    EXPECT_EQ(es.dynamic_kernels, es.kernels) << "n=" << n;
    for (int64_t i = 0; i < n; ++i) {
      double m = -1e30, s = 0;
      for (int64_t j = 0; j < kRow; ++j) m = std::max(m, 0.5 * xs[i * kRow + j] + 1);
      for (int64_t j = 0; j < kRow; ++j) s += std::exp(0.5 * xs[i * kRow + j] + 1 - m);
      for (int64_t j = 0; j < kRow; ++j) {
        const size_t k = static_cast<size_t>(i * kRow + j);
        EXPECT_NEAR((*got_r)[k], std::exp(0.5 * xs[k] + 1 - m) / s, 1e-6)
            << "n=" << n << " k=" << k;
      }
      for (int64_t j = 0; j < kInner; ++j) {
        const size_t k = static_cast<size_t>(i * kInner + j);
        const double want = std::exp(double{zs[k]}) * w[static_cast<size_t>(j)];
        EXPECT_NEAR((*got_e)[k], want, 1e-5 * (1 + std::abs(want))) << "n=" << n << " k=" << k;
      }
    }
    return rs.compiled + es.compiled;
  };
  const std::vector<int64_t> sizes = {2, 3, 5, 6, 7, 8, 9, 12, 16, 33, 100, 65};
  std::vector<int64_t> buckets;
  int compiled = 0, per_bucket = -1;
  {
    auto dev = std::move(*opened);
    for (int64_t n : sizes) {
      const int c = run(dev, n);
      const auto bucket = static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(n)));
      if (std::ranges::find(buckets, bucket) == buckets.end()) {
        buckets.push_back(bucket);
        if (per_bucket < 0) per_bucket = c;
        EXPECT_EQ(c, per_bucket) << "n=" << n << ": a new bucket compiles its kernels";
      } else {
        EXPECT_EQ(c, 0) << "n=" << n << ": the bucket's kernels serve it";
      }
      compiled += c;
    }
  }
  EXPECT_EQ(per_bucket, 2);
  EXPECT_EQ(compiled, per_bucket * static_cast<int>(buckets.size()));
  {
    // A new process: the stored dynamic kernels of bucket 8 (compiled at n = 5) serve n = 6.
    auto dev = open_vulkan();
    ASSERT_TRUE(dev.has_value()) << dev.error().message;
    EXPECT_EQ(run(*dev, 6), 0);
  }
  std::filesystem::remove(path);
}

// A one-axis elementwise kernel on a GPU (vulkan:0) takes four vector lanes by its bucket's bound
// (codegen/gpu/gpu_source.cpp, write_elementwise): the sizes of one bucket that leave 1, 2, 3 and
// 0 points past the last whole unit of four each match the host, from one compiled kernel.
TEST(DynamicShapes, AOneAxisGpuKernelMovesVectorsAndItsRaggedTail) {
  auto opened =
      kiln::Device::open("vulkan:0", kiln::Options{.settings = {{"compilation.cache", "none"},
                                                                {"autotune.enabled", "false"},
                                                                {"shapes.policy", "dynamic"}},
                                                   .use_config = false,
                                                   .config_dir = ""});
  if (!opened) GTEST_SKIP() << "vulkan:0 is not available: " << opened.error().message;
  kiln::Device& dev = *opened;
  int compiled = 0;
  for (const int64_t n : {65537, 65538, 65539, 65540, 100003, 131072}) {
    const std::vector<float> xs = values(static_cast<size_t>(n), 1.0f, static_cast<int>(n));
    auto x = kiln::Tensor::from_host(dev, std::span<const float>(xs), {n});
    auto got = (kiln::exp(x) * 2.0 + 1.0).to_vector<float>();
    ASSERT_TRUE(got.has_value()) << "n=" << n << ": " << got.error().message;
    const kiln::RealizeStats st = dev.last_stats();
    EXPECT_EQ(st.kernels, 1) << "n=" << n;
    EXPECT_EQ(st.dynamic_kernels, 1) << "n=" << n;
    compiled += st.compiled;
    ASSERT_EQ(got->size(), static_cast<size_t>(n));
    int64_t wrong = 0, first = -1;
    for (int64_t i = 0; i < n; ++i) {
      const double want = std::exp(double{xs[static_cast<size_t>(i)]}) * 2 + 1;
      if (std::abs((*got)[static_cast<size_t>(i)] - want) > 1e-5 * (1 + std::abs(want))) {
        if (first < 0) first = i;
        ++wrong;
      }
    }
    EXPECT_EQ(wrong, 0) << "n=" << n << ": first wrong point " << first;
  }
  EXPECT_EQ(compiled, 1) << "one kernel for the bucket (65536, 131072]";
}

// The MLP on a GPU (vulkan:0): its tiled matmuls, bias and relu take the batch at run time too,
// so 2..40 compile its kernels once per power-of-two bucket, and within a bucket the graph's
// symbolic plan serves the sizes after the first two. Every size against the host.
TEST(DynamicShapes, AnMlpOnAGpuCompilesEachKernelOncePerBucket) {
  auto opened =
      kiln::Device::open("vulkan:0", kiln::Options{.settings = {{"compilation.cache", "none"},
                                                                {"autotune.cache", "none"},
                                                                {"autotune.enabled", "false"},
                                                                {"shapes.policy", "dynamic"}},
                                                   .use_config = false,
                                                   .config_dir = ""});
  if (!opened) GTEST_SKIP() << "vulkan:0 is not available: " << opened.error().message;
  auto dev = std::move(*opened);
  Mlp mlp(dev);
  std::vector<int64_t> buckets;
  int per_bucket = -1;
  Sources plans;
  for (int64_t b = 2; b <= 40; ++b) {
    const kiln::RealizeStats s = run_mlp(dev, mlp, b);
    EXPECT_EQ(s.dynamic_kernels, s.kernels) << "b=" << b;
    plans.add(s.plan_source);
    const auto bucket = static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(b)));
    if (std::ranges::find(buckets, bucket) != buckets.end()) {
      EXPECT_EQ(s.compiled, 0) << "b=" << b << ": its bucket's kernels serve it";
      continue;
    }
    buckets.push_back(bucket);
    EXPECT_GT(s.compiled, 0) << "b=" << b;
    if (bucket >= 8 && per_bucket < 0) per_bucket = s.compiled;  // both matmuls tiled from 8 on
    if (bucket >= 8) {
      EXPECT_EQ(s.compiled, per_bucket) << "b=" << b;
    }
  }
  EXPECT_EQ(buckets, (std::vector<int64_t>{2, 4, 8, 16, 32, 64}));
  // A bucket's first two sizes are built; the rest (of 39 sizes, 6 buckets) from its symbolic plan.
  EXPECT_EQ(plans.built, 11);
  EXPECT_EQ(plans.symbolic, 28);
}
