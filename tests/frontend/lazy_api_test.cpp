// The public lazy API: recording, realize, plan reuse, realized values feeding later ops, errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <kiln/kiln.h>
#include <numeric>

namespace {

kiln::Device cpu() {
  static kiln::Device dev = kiln::Device::open("cpu").value();
  return dev;
}

TEST(LazyApi, GeluChainMatchesScalarMath) {
  std::vector<float> a(1000), b(1000), c(1000);
  for (int i = 0; i < 1000; ++i) a[i] = 0.01f * (i - 500), b[i] = 0.5f, c[i] = 0.25f;
  auto ta = kiln::Tensor::from_host(cpu(), std::span<const float>(a), {1000});
  auto tb = kiln::Tensor::from_host(cpu(), std::span<const float>(b), {1000});
  auto tc = kiln::Tensor::from_host(cpu(), std::span<const float>(c), {1000});
  kiln::Tensor y = kiln::gelu(ta * tb + tc);
  auto out = y.to_vector<float>();
  ASSERT_TRUE(out.has_value()) << out.error().message;
  EXPECT_EQ(cpu().last_stats().kernels, 1);
  for (int i = 0; i < 1000; ++i) {
    double x = a[i] * 0.5 + 0.25;
    double want = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    ASSERT_NEAR((*out)[i], want, 1e-5) << i;
  }
}

// kiln::Graph::trace: an arg may be pending when traced (a = x * 2, not realized: its recipe is
// left out, the graph starts at it), an output may be an arg itself, an arg no output reads is
// still an input, and a captured pending value (a full) is recomputed in the graph. Calls replay
// the ops over new args; the traced graph's outputs equal the ops recorded again.
TEST(LazyApi, ATracedGraphStartsAtItsArgsPendingOrNot) {
  std::vector<float> xs = {1, -2, 3, -4}, ws = {0.5f, 0.25f, -1, 2};
  auto x = kiln::Tensor::from_host(cpu(), std::span<const float>(xs), {4});
  auto w = kiln::Tensor::from_host(cpu(), std::span<const float>(ws), {4});
  kiln::Tensor a = x * 2.0;  // pending
  kiln::Tensor unused = kiln::Tensor::from_host(cpu(), std::span<const float>(ws), {2, 2});
  kiln::Tensor ones = kiln::Tensor::full(cpu(), {4}, 1.0);
  kiln::Tensor y = kiln::relu(a * w) + ones;
  auto g = kiln::Graph::trace({y, a}, {a, unused});
  ASSERT_TRUE(g.has_value()) << g.error().message;
  ASSERT_EQ(g->inputs().size(), 2u);
  EXPECT_EQ(g->inputs()[0].name, "arg0");
  EXPECT_EQ(g->inputs()[1].shape, (kiln::Shape{2, 2}));
  EXPECT_EQ(g->outputs(), (std::vector<std::string>{"out0", "out1"}));
  for (float scale : {1.f, -3.f, 0.5f}) {
    std::vector<float> as(4);
    for (int i = 0; i < 4; ++i) as[i] = scale * (i + 1);
    auto arg = kiln::Tensor::from_host(cpu(), std::span<const float>(as), {4});
    auto outs = g->call(cpu(), {arg, unused});
    ASSERT_TRUE(outs.has_value()) << outs.error().message;
    auto got = (*outs)[0].to_vector<float>();
    auto same = (*outs)[1].to_vector<float>();
    ASSERT_TRUE(got.has_value() && same.has_value());
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ((*got)[i], std::max(0.f, as[i] * ws[i]) + 1) << scale << " " << i;
      EXPECT_EQ((*same)[i], as[i]) << "out1 is the arg itself";
    }
  }
  auto bad = kiln::Graph::trace({}, {a});
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("no outputs"), std::string::npos) << bad.error().message;
}

// i64 values past 2^53 (where a double has no unit bits) stay exact: an arange's start in its
// kernel, and to_vector<int64_t>; and an arange spanning int64's whole range.
TEST(LazyApi, Int64ValuesPast2To53AreExact) {
  const int64_t big = (int64_t{1} << 53) + 1;
  for (int64_t n : {1, 4, 1000}) {
    auto v = kiln::Tensor::arange(cpu(), big, big + n, 1, kiln::DType::i64).to_vector<int64_t>();
    ASSERT_TRUE(v.has_value()) << v.error().message;
    ASSERT_EQ(v->size(), static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ((*v)[i], big + i) << n << " " << i;
  }
  auto ends = kiln::Tensor::arange(cpu(), INT64_MIN, INT64_MAX, INT64_MAX, kiln::DType::i64)
                  .to_vector<int64_t>();
  ASSERT_TRUE(ends.has_value()) << ends.error().message;
  EXPECT_EQ(*ends, (std::vector<int64_t>{INT64_MIN, -1, INT64_MAX - 1}));
  // In a .kg file: a full's value and a literal operand are exact (not folded through a double).
  auto g = kiln::Graph::parse(R"(kiln.graph v1
input %x : i64[2]
%f = full(shape=[2], value=9007199254740993, dtype=i64)
%y = add(%x, 9007199254740995)
%z = add(%y, %f)
%m = full(shape=[2], value=-9223372036854775808, dtype=i64)
%a = add(%m, 9007199254740993)
%w = sub(%a, 1)
output %z
output %w
)");
  ASSERT_TRUE(g.has_value()) << g.error().message;
  kiln::HostTensor xs = kiln::HostTensor::zeros(kiln::DType::i64, {2});
  xs.set(1, 3);
  auto outs = g->call(cpu(), {kiln::Tensor::from_host(cpu(), xs)});
  ASSERT_TRUE(outs.has_value()) << outs.error().message;
  EXPECT_EQ((*outs)[0].to_vector<int64_t>().value(),
            (std::vector<int64_t>{2 * big + 2, 2 * big + 5}));
  EXPECT_EQ((*outs)[1].to_vector<int64_t>().value(),
            (std::vector<int64_t>{INT64_MIN + big - 1, INT64_MIN + big - 1}));
}

// A tensor realized between the args and the outputs would be captured as it is now, where each
// call must compute it from the args: the trace is refused. One realized before the args were
// made (a weight computed once) is captured, and read at every call.
TEST(LazyApi, ATraceRefusesAValueRealizedAfterItsArgs) {
  std::vector<float> xs = {1, 2, 3}, ws = {1, 2, 4};
  auto w = kiln::Tensor::from_host(cpu(), std::span<const float>(ws), {3});
  kiln::Tensor w2 = w * 2.0;
  ASSERT_TRUE(w2.realize().has_value());  // before the arg: a constant of the trace
  auto x = kiln::Tensor::from_host(cpu(), std::span<const float>(xs), {3});
  kiln::Tensor h = x * 2.0 + x;
  ASSERT_TRUE(h.realize().has_value());  // after the arg: computed from it
  auto stale = kiln::Graph::trace({h * w2}, {x});
  ASSERT_FALSE(stale.has_value());
  EXPECT_NE(stale.error().message.find("f32[3] tensor that was realized after the args were made"),
            std::string::npos)
      << stale.error().message;
  auto g = kiln::Graph::trace({(x * 3.0) * w2}, {x});
  ASSERT_TRUE(g.has_value()) << g.error().message;
  std::vector<float> ys = {10, 20, 30};
  auto y = kiln::Tensor::from_host(cpu(), std::span<const float>(ys), {3});
  auto outs = g->call(cpu(), {y});
  ASSERT_TRUE(outs.has_value()) << outs.error().message;
  EXPECT_EQ((*outs)[0].to_vector<float>().value(), (std::vector<float>{60, 240, 720}));
}

// kiln::gather is fused like a view: the lookup, the scaling and the activation are one kernel.
TEST(LazyApi, EmbeddingLookupAndActivationAreOneKernel) {
  std::vector<float> table(64 * 8);
  for (size_t i = 0; i < table.size(); ++i) table[i] = 0.01f * static_cast<float>(i);
  std::vector<int64_t> ids = {5, 63, -1, 0, 7, 100};
  auto tt = kiln::Tensor::from_host(cpu(), std::span<const float>(table), {64, 8});
  auto ti = kiln::Tensor::from_host(cpu(), std::span<const int64_t>(ids), {2, 3});
  auto out = kiln::tanh(kiln::gather(tt, ti, 0) * 0.5).to_vector<float>();
  ASSERT_TRUE(out.has_value()) << out.error().message;
  EXPECT_EQ(cpu().last_stats().kernels, 1);
  const int rows[] = {5, 63, 63, 0, 7, 63};  // -1 wraps to 63, 100 clamps to 63
  for (int p = 0; p < 6; ++p)
    for (int k = 0; k < 8; ++k)
      ASSERT_NEAR((*out)[p * 8 + k], std::tanh(0.5 * table[rows[p] * 8 + k]), 1e-5)
          << p << " " << k;
  auto picked = kiln::gather_elements(tt, ti.reshape({6, 1}), 0).to_vector<float>();
  ASSERT_TRUE(picked.has_value()) << picked.error().message;
  for (int p = 0; p < 6; ++p) EXPECT_EQ((*picked)[p], table[rows[p] * 8]) << p;
}

// A scatter of computed updates, then an activation: one kernel on cpu (the scatter's fold per
// element with its producers and reader fused), values against a loop over the updates.
TEST(LazyApi, ScatterAddAndActivationAreOneKernel) {
  std::vector<float> x(4 * 6), u(4 * 9);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * static_cast<float>(i);
  for (size_t i = 0; i < u.size(); ++i) u[i] = 0.01f * static_cast<float>(i) - 0.1f;
  std::vector<int32_t> ids(4 * 9);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 5) % 15) - 7;
  auto tx = kiln::Tensor::from_host(cpu(), std::span<const float>(x), {4, 6});
  auto tu = kiln::Tensor::from_host(cpu(), std::span<const float>(u), {4, 9});
  auto ti = kiln::Tensor::from_host(cpu(), std::span<const int32_t>(ids), {4, 9});
  auto out = kiln::tanh(kiln::scatter_elements(tx, ti, tu * 2.0, 1, "add")).to_vector<float>();
  ASSERT_TRUE(out.has_value()) << out.error().message;
  EXPECT_EQ(cpu().last_stats().kernels, 1);
  std::vector<double> want(x.begin(), x.end());
  for (int r = 0; r < 4; ++r)
    for (int k = 0; k < 9; ++k) {
      int j = ids[r * 9 + k];
      if (j < 0) j += 6;
      if (j >= 0 && j < 6) want[r * 6 + j] += 2.0 * u[r * 9 + k];
    }
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR((*out)[i], std::tanh(want[i]), 1e-5) << i;
}

TEST(LazyApi, RepeatedGraphHitsThePlanCache) {
  float first = 0;
  for (int step = 0; step < 3; ++step) {
    std::vector<float> x(64, static_cast<float>(step + 1));
    auto t = kiln::Tensor::from_host(cpu(), std::span<const float>(x), {8, 8});
    auto y = kiln::softmax(t * 3.0 + 1.0).sum({1});
    auto v = y.to_vector<float>();
    ASSERT_TRUE(v.has_value()) << v.error().message;
    EXPECT_NEAR((*v)[0], 1.0, 1e-5);
    kiln::RealizeStats s = cpu().last_stats();
    if (step == 0) {
      first = static_cast<float>(s.kernels);
    } else {
      EXPECT_TRUE(s.plan_cache_hit) << "step " << step;
      EXPECT_EQ(s.compiled, 0);
      EXPECT_EQ(s.kernels, first);
    }
  }
}

TEST(LazyApi, RealizedTensorsFeedLaterOpsWithoutRecompute) {
  std::vector<float> x(16);
  std::iota(x.begin(), x.end(), 0.f);
  auto t = kiln::Tensor::from_host(cpu(), std::span<const float>(x), {4, 4});
  auto a = t * 2.0;
  ASSERT_TRUE(a.realize().has_value());
  auto b = a.transpose() + a;  // reads a's buffer
  auto v = b.to_vector<float>();
  ASSERT_TRUE(v.has_value()) << v.error().message;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ((*v)[i * 4 + j], 2 * x[j * 4 + i] + 2 * x[i * 4 + j]);
  // A consumer recorded before `a` was realized also reads the buffer.
  auto u = t * 2.0;
  auto w = (u + 1.0).to_vector<float>();
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ((*w)[5], 11.f);
}

TEST(LazyApi, ShapeErrorsAreValuesThatPropagate) {
  std::vector<float> x(12, 1.f), y(5, 1.f);
  auto a = kiln::Tensor::from_host(cpu(), std::span<const float>(x), {3, 4});
  auto b = kiln::Tensor::from_host(cpu(), std::span<const float>(y), {5});
  auto bad = a + b;
  EXPECT_FALSE(bad.ok());
  auto worse = kiln::exp(bad) * 2.0;
  auto r = worse.to_vector<float>();
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message, "add: shapes [3,4] and [5] do not broadcast");
}

// A tensor names its device, an op's error tensor too; two devices of one name are two.
TEST(LazyApi, ATensorNamesItsDevice) {
  std::vector<float> x(4, 1.f);
  auto a = kiln::Tensor::from_host(cpu(), std::span<const float>(x), {4});
  auto bad = a + kiln::Tensor::from_host(cpu(), std::span<const float>(x), {2, 3});
  ASSERT_TRUE(a.device() && bad.device());
  EXPECT_TRUE(*a.device() == cpu());
  EXPECT_TRUE(*bad.device() == cpu());
  EXPECT_EQ(a.device()->name(), "cpu");
  auto other = kiln::Device::open("cpu", kiln::Options{});
  ASSERT_TRUE(other.has_value()) << other.error().message;
  EXPECT_FALSE(*other == cpu());
  auto b = kiln::Tensor::from_host(*other, std::span<const float>(x), {4});
  EXPECT_FALSE(*b.device() == *a.device());
  auto both = kiln::realize({a * 2.0, b * 2.0});
  ASSERT_FALSE(both.has_value());
  EXPECT_EQ(both.error().message,
            "realize: tensor 1 lives on another device than the ones before it (both named "
            "'cpu', opened apart); realize each device's tensors apart");
  // An op and a dump of them say the same.
  auto sum = (a + b).to_vector<float>();
  ASSERT_FALSE(sum.has_value());
  EXPECT_EQ(sum.error().message,
            "operands live on different devices (both named 'cpu', opened apart)");
  EXPECT_FALSE(kiln::Tensor().device().has_value());
}

// What the C API checks at its door, the C++ API checks too: a DType cast from an integer, a
// negative extent or more than 64 axes are errors naming the op, not an abort at realize or an
// allocation failure; a scalar operand that the dtype cannot hold names the op it is given to.
TEST(LazyApi, BadDtypesShapesAndScalarsAreErrorsNamingTheOp) {
  const auto bad = static_cast<kiln::DType>(99);
  const auto message = [](kiln::Tensor t) {
    auto r = t.to_vector<float>();
    return r ? std::string("no error") : r.error().message;
  };
  EXPECT_EQ(message(kiln::Tensor::full(cpu(), {2}, 0.0, bad)), "full: 99 is not a kiln dtype");
  EXPECT_EQ(message(kiln::Tensor::arange(cpu(), 0, 3, 1, bad)), "arange: 99 is not a kiln dtype");
  std::vector<float> xs(6, 1.f);
  auto x = kiln::Tensor::from_host(cpu(), std::span<const float>(xs), {2, 3});
  EXPECT_EQ(message(x.cast(bad)), "cast: 99 is not a kiln dtype");
  EXPECT_EQ(message(kiln::Tensor::from_host(cpu(), kiln::HostTensor{bad, {0}, {}})),
            "from_host: 99 is not a kiln dtype");
  EXPECT_EQ(message(kiln::Tensor::from_host(cpu(), std::span<const float>(xs), {-2, -3})),
            "from_host: shape [-2,-3] has a negative extent -2");
  const std::vector<int64_t> deep(65, 1);
  const std::vector<float> one = {1.f};
  EXPECT_NE(message(kiln::Tensor::from_host(cpu(), std::span<const float>(one), deep))
                .find("(65 axes) has more than the 64 axes kiln takes"),
            std::string::npos);
  EXPECT_NE(message(x.reshape(deep)).find("reshape: shape [1,1,"), std::string::npos);
  std::vector<int32_t> is = {1, 2};
  auto i = kiln::Tensor::from_host(cpu(), std::span<const int32_t>(is), {2});
  EXPECT_EQ(message(i + 0.5), "add: scalar 0.5 is not representable in i32 (expected an integer)");
  EXPECT_EQ(message(kiln::clip(i, 0.5, 2.0)),
            "clip: scalar 0.5 is not representable in i32 (expected an integer)");
  // Tensors of two devices realized together: which one, and both devices.
  auto ref = kiln::Device::open("reference").value();
  auto elsewhere = kiln::Tensor::full(ref, {2}, 1.0, kiln::DType::f32);
  auto both = kiln::realize({x, elsewhere});
  ASSERT_FALSE(both.has_value());
  EXPECT_EQ(both.error().message,
            "realize: tensor 1 lives on another device than the ones before it ('cpu' and "
            "'reference'); realize each device's tensors apart");
}

// to_vector<T> of an i64 tensor is exact for every integer T (long long and uint64_t too, where
// a double would round 2^53 + 1); a float past an integer T saturates and NaN gives 0; bool works.
TEST(LazyApi, ToVectorConvertsIntegersExactlyAndFloatsWithoutUndefinedCasts) {
  const std::vector<int64_t> big = {(int64_t{1} << 53) + 1, INT64_MAX, -3};
  auto t = kiln::Tensor::from_host(cpu(), std::span<const int64_t>(big), {3});
  EXPECT_EQ(t.to_vector<long long>().value(),
            (std::vector<long long>{(1LL << 53) + 1, INT64_MAX, -3}));
  EXPECT_EQ(t.to_vector<uint64_t>().value(),
            (std::vector<uint64_t>{(uint64_t{1} << 53) + 1, uint64_t{INT64_MAX}, uint64_t(-3)}));
  EXPECT_EQ(t.to_vector<bool>().value(), (std::vector<bool>{true, true, true}));
  const std::vector<float> fs = {1e30f, -1e30f, NAN, 2.75f, -2.75f};
  auto f = kiln::Tensor::from_host(cpu(), std::span<const float>(fs), {5});
  EXPECT_EQ(f.to_vector<int32_t>().value(), (std::vector<int32_t>{INT32_MAX, INT32_MIN, 0, 2, -2}));
  EXPECT_EQ(f.to_vector<bool>().value(), (std::vector<bool>{true, true, true, true, true}));
}

// kiln::cumsum: one kernel whose scan reads its operand through the fused elementwise producer;
// every exclusive/reverse combination of an integer running sum, exactly; a bad axis names itself.
TEST(LazyApi, CumSumRunsOneKernelPerScan) {
  std::vector<int32_t> x(12);
  for (int i = 0; i < 12; ++i) x[i] = (i * 5) % 7 - 3;
  auto t = kiln::Tensor::from_host(cpu(), std::span<const int32_t>(x), {3, 4});
  auto fwd = kiln::cumsum(t * t, 1).to_vector<int32_t>();
  ASSERT_TRUE(fwd.has_value()) << fwd.error().message;
  EXPECT_EQ(cpu().last_stats().kernels, 1);
  for (bool exclusive : {false, true})
    for (bool reverse : {false, true}) {
      auto got = kiln::cumsum(t, -2, exclusive, reverse).to_vector<int32_t>();
      ASSERT_TRUE(got.has_value()) << got.error().message;
      for (int c = 0; c < 4; ++c) {
        int acc = 0;
        for (int s = 0; s < 3; ++s) {
          const int r = reverse ? 2 - s : s;
          const int before = acc;
          acc += x[r * 4 + c];
          EXPECT_EQ((*got)[r * 4 + c], exclusive ? before : acc) << r << "," << c;
        }
      }
    }
  int acc = 0;
  for (int c = 0; c < 4; ++c) EXPECT_EQ((*fwd)[4 + c], acc += x[4 + c] * x[4 + c]);
  auto bad = kiln::cumsum(t, 2).to_vector<int32_t>();
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message, "cumsum: axis 2 is out of range for shape [3,4]");
}

// kiln::topk: the indices are one kernel whose selection reads its operand through the fused
// elementwise producer, the values a second (a gather at the indices); rows with ties and NaN
// against a stable sort (NaN above every number); k out of range names itself.
TEST(LazyApi, TopKGivesValuesAndIndices) {
  const float nan = std::nanf("");
  std::vector<float> x = {2, nan, -1, 2, 0, nan, 7, -1,  //
                          1, 1,   1,  0, 5, 5,   -3, 5};
  auto t = kiln::Tensor::from_host(cpu(), std::span<const float>(x), {2, 8});
  for (bool largest : {true, false})
    for (int64_t k : {0, 1, 3, 8}) {
      auto [values, indices] = kiln::topk(t, k, -1, largest);
      auto vi = indices.to_vector<int64_t>();
      auto vv = values.to_vector<float>();
      ASSERT_TRUE(vi.has_value()) << vi.error().message;
      ASSERT_TRUE(vv.has_value()) << vv.error().message;
      ASSERT_EQ(vi->size(), static_cast<size_t>(2 * k));
      for (int r = 0; r < 2; ++r) {
        std::vector<int64_t> order(8);
        std::iota(order.begin(), order.end(), 0);
        const auto before = [&](int64_t a, int64_t b) {
          const float u = x[r * 8 + a], w = x[r * 8 + b];
          if (std::isnan(u) || std::isnan(w)) return largest ? !std::isnan(w) : !std::isnan(u);
          return largest ? u > w : u < w;
        };
        std::stable_sort(order.begin(), order.end(), before);
        for (int64_t j = 0; j < k; ++j) {
          EXPECT_EQ((*vi)[r * k + j], order[j])
              << "largest " << largest << " k " << k << " row " << r;
          const float want = x[r * 8 + order[j]], got = (*vv)[r * k + j];
          EXPECT_TRUE(got == want || (std::isnan(got) && std::isnan(want)))
              << got << " vs " << want;
        }
      }
    }
  auto [sq, sq_idx] = kiln::topk(t * t, 2, 1, true);
  ASSERT_TRUE(sq_idx.to_vector<int64_t>().has_value());
  EXPECT_EQ(cpu().last_stats().kernels, 1);  // the indices alone: one kernel, the square fused
  auto [bad_values, bad] = kiln::topk(t, 9);
  auto r = bad.to_vector<int64_t>();
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message,
            "topk_indices: k = 9 is out of range [0, 8] for axis 1 of shape [2,8]");
}

TEST(LazyApi, UnknownDeviceIsAnError) {
  auto d = kiln::Device::open("tpu:0");
  ASSERT_FALSE(d.has_value());
  // The list names the GPU devices present too (vulkan:0 where lavapipe is installed).
  EXPECT_TRUE(d.error().message.starts_with("unknown device 'tpu:0' (available: cpu, reference"))
      << d.error().message;
}

TEST(LazyApi, ReferenceDeviceAgreesWithCpu) {
  auto ref = kiln::Device::open("reference").value();
  std::vector<float> x(40);
  for (int i = 0; i < 40; ++i) x[i] = std::sin(i * 0.3f);
  auto run = [&](const kiln::Device& d) {
    auto t = kiln::Tensor::from_host(d, std::span<const float>(x), {5, 8});
    return kiln::layernorm(t, kiln::Tensor::full(d, {8}, 2.0), kiln::Tensor::full(d, {8}, 0.5))
        .to_vector<float>()
        .value();
  };
  auto a = run(cpu()), b = run(ref);
  for (int i = 0; i < 40; ++i) EXPECT_NEAR(a[i], b[i], 1e-5);
}

}  // namespace
