// The C API (kiln/kiln_c.h) through libkiln.so: the same results as the C++ API for an MLP forward
// pass and a training loop, statuses with messages for each kind of failure, options that reach
// the device, the log callback. The device under test is KILN_TEST_DEVICE (cpu by default;
// ctest runs the suite again on vulkan:0).
#include <gtest/gtest.h>

#include <cmath>

#include <filesystem>

#include <kiln/kiln.h>
#include <kiln/kiln_c.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace {

std::string device_name() {
  const char* name = std::getenv("KILN_TEST_DEVICE");
  return name ? name : "cpu";
}

// Options for tests: no persistent cache (the default, `target`, keeps one beside the
// executable), so every plan is built here, with the reference rates, so that the C and the C++
// devices make the same plans (rates measured by each could differ, and with them the fusion).
kiln_options test_options() {
  kiln_options o = nullptr;
  EXPECT_EQ(kiln_options_create(&o), KILN_OK);
  EXPECT_EQ(kiln_options_set(o, "compilation.cache", "none"), KILN_OK) << kiln_last_error();
  EXPECT_EQ(kiln_options_set(o, "autotune.cache", "none"), KILN_OK) << kiln_last_error();
  EXPECT_EQ(kiln_options_set(o, "autotune.enabled", "false"), KILN_OK) << kiln_last_error();
  EXPECT_EQ(kiln_options_set(o, "cpu_rates", "reference"), KILN_OK) << kiln_last_error();
  EXPECT_EQ(kiln_options_set(o, "gpu_rates", "reference"), KILN_OK) << kiln_last_error();
  return o;
}
const kiln::Options kCxxTestOptions{
    .settings = {{"compilation.cache", "none"},
                 {"autotune.cache", "none"},
                 {"autotune.enabled", "false"},
                 {"cpu_rates", "reference"},
                 {"gpu_rates", "reference"}},
    .use_config = false,
    .config_dir = ""};

// A device of the C API, skipping the test where the device under test is not present.
struct CDevice {
  kiln_device dev = nullptr;
  explicit CDevice(kiln_options options = nullptr) {
    kiln_options own = options ? nullptr : test_options();
    kiln_status s = kiln_device_open(device_name().c_str(), options ? options : own, &dev);
    if (s != KILN_OK) dev = nullptr, error = kiln_last_error();
    kiln_options_release(own);
  }
  ~CDevice() { kiln_device_release(dev); }
  std::string error;
};
#define OPEN_OR_SKIP(d)                                                  \
  if (!(d).dev) {                                                        \
    if (device_name() == "cpu") FAIL() << (d).error;                     \
    GTEST_SKIP() << device_name() << " is not available: " << (d).error; \
  }

// Owns the handles a test makes.
struct Handles {
  std::vector<kiln_tensor> all;
  kiln_tensor keep(kiln_tensor t) {
    all.push_back(t);
    return t;
  }
  ~Handles() {
    for (kiln_tensor t : all) kiln_tensor_release(t);
  }
};

#define C_OK(call) ASSERT_EQ((call), KILN_OK) << kiln_last_error()

std::vector<float> ramp(size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 7) % 13) + offset;
  return v;
}

struct Mlp {
  std::vector<float> x = ramp(8 * 16, 0.1f, -0.6f), w1 = ramp(16 * 32, 0.02f, -0.12f),
                     b1 = ramp(32, 0.01f, 0.f), w2 = ramp(32 * 4, 0.03f, -0.18f);
};

TEST(CApi, VersionAndAbi) {
  EXPECT_EQ(kiln_abi_version(), KILN_C_ABI_VERSION);
  EXPECT_EQ(std::string(kiln_version()), std::to_string(KILN_VERSION_MAJOR) + "." +
                                             std::to_string(KILN_VERSION_MINOR) + "." +
                                             std::to_string(KILN_VERSION_PATCH));
  EXPECT_STREQ(kiln_dtype_name(KILN_BF16), "bf16");
  EXPECT_EQ(kiln_dtype_size(KILN_I64), 8u);
  EXPECT_EQ(kiln_dtype_name(static_cast<kiln_dtype>(42)), nullptr);
  EXPECT_STREQ(kiln_status_name(KILN_ERROR_UNSUPPORTED), "KILN_ERROR_UNSUPPORTED");
}

TEST(CApi, MlpForwardMatchesTheCxxApi) {
  CDevice d;
  OPEN_OR_SKIP(d);
  Mlp m;
  Handles h;
  auto from = [&](const std::vector<float>& v, std::vector<int64_t> shape) {
    kiln_tensor t = nullptr;
    EXPECT_EQ(kiln_tensor_from_host(d.dev, KILN_F32, shape.data(), static_cast<int32_t>(shape.size()),
                                    v.data(), v.size() * sizeof(float), &t),
              KILN_OK)
        << kiln_last_error();
    return h.keep(t);
  };
  kiln_tensor x = from(m.x, {8, 16}), w1 = from(m.w1, {16, 32}), b1 = from(m.b1, {32}),
              w2 = from(m.w2, {32, 4});
  kiln_tensor a, z, r, o, y;
  C_OK(kiln_matmul(x, w1, &a));
  C_OK(kiln_add(h.keep(a), b1, &z));
  C_OK(kiln_relu(h.keep(z), &r));
  C_OK(kiln_matmul(h.keep(r), w2, &o));
  C_OK(kiln_softmax(h.keep(o), -1, &y));
  h.keep(y);
  int32_t rank = 0;
  int64_t dims[2] = {0, 0};
  C_OK(kiln_tensor_rank(y, &rank));
  C_OK(kiln_tensor_shape(y, dims, 2));
  EXPECT_EQ(rank, 2);
  EXPECT_EQ(dims[0], 8);
  EXPECT_EQ(dims[1], 4);
  std::vector<float> got(32);
  C_OK(kiln_tensor_to_host(y, got.data(), got.size() * sizeof(float)));

  auto dev = kiln::Device::open(device_name(), kCxxTestOptions).value();
  auto t = [&](const std::vector<float>& v, kiln::Shape s) {
    return kiln::Tensor::from_host(dev, std::span<const float>(v), std::move(s));
  };
  auto want = kiln::softmax(kiln::matmul(kiln::relu(kiln::matmul(t(m.x, {8, 16}), t(m.w1, {16, 32})) +
                                                    t(m.b1, {32})),
                                         t(m.w2, {32, 4})))
                  .to_vector<float>();
  ASSERT_TRUE(want.has_value()) << want.error().message;
  // One engine behind both APIs: the same plan, so the same bits.
  EXPECT_EQ(got, *want);
  for (int row = 0; row < 8; ++row)
    EXPECT_NEAR(got[row * 4] + got[row * 4 + 1] + got[row * 4 + 2] + got[row * 4 + 3], 1.0, 1e-5);
}

// A marked batch axis: the second and third sizes compile nothing, and the stats say the
// kernels are dynamic (the cpu; other targets specialize every size).
TEST(CApi, AMarkedAxisServesEveryBatchSize) {
  CDevice d;
  OPEN_OR_SKIP(d);
  Handles h;
  const std::vector<float> w = ramp(16 * 4, 0.02f, -0.1f);
  const int64_t wshape[] = {16, 4};
  kiln_tensor tw = nullptr;
  C_OK(kiln_tensor_from_host(d.dev, KILN_F32, wshape, 2, w.data(), w.size() * sizeof(float), &tw));
  h.keep(tw);
  int compiled = 0;
  for (int64_t b : {6, 9, 31, 7}) {
    const std::vector<float> x = ramp(static_cast<size_t>(b * 16), 0.1f, -0.5f);
    const int64_t xshape[] = {b, 16};
    kiln_tensor tx = nullptr, y = nullptr;
    C_OK(kiln_tensor_from_host(d.dev, KILN_F32, xshape, 2, x.data(), x.size() * sizeof(float), &tx));
    C_OK(kiln_tensor_mark_dynamic(h.keep(tx), 0, "batch"));
    C_OK(kiln_matmul(tx, tw, &y));
    std::vector<float> got(static_cast<size_t>(b * 4));
    C_OK(kiln_tensor_to_host(h.keep(y), got.data(), got.size() * sizeof(float)));
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        double want = 0;
        for (int64_t k = 0; k < 16; ++k) want += double{x[i * 16 + k]} * w[k * 4 + j];
        EXPECT_NEAR(got[i * 4 + j], want, 1e-4 * (1 + std::abs(want)));
      }
    kiln_realize_stats s{};
    int32_t dynamic = -1;
    C_OK(kiln_device_last_stats(d.dev, &s));
    C_OK(kiln_device_last_dynamic_kernels(d.dev, &dynamic));
    const char* source = nullptr;
    C_OK(kiln_device_last_plan_source(d.dev, &source));
    if (b != 6) compiled += s.compiled;
    EXPECT_EQ(dynamic, s.kernels) << b;
    size_t length = 0;
    C_OK(kiln_device_last_recompiles(d.dev, nullptr, 0, &length));
    std::string lines(length + 1, 'x');
    C_OK(kiln_device_last_recompiles(d.dev, lines.data(), lines.size(), nullptr));
    EXPECT_EQ(lines.back(), '\0');
    lines.pop_back();
    if (b == 9) {
      // The new size's plan is built, and says which dimension changed.
      EXPECT_NE(lines.find("dimension 0 (?batch) changed 6 -> 9"), std::string::npos) << lines;
      char cut[8];
      C_OK(kiln_device_last_recompiles(d.dev, cut, sizeof cut, &length));
      EXPECT_EQ(std::string(cut), lines.substr(0, 7)) << "cut to fit, NUL-terminated";
      EXPECT_EQ(length, lines.size());
    } else if (b == 6) {
      EXPECT_EQ(lines, "") << "the first size compiles for no earlier one";
    }
    if (device_name() == "cpu") {
      // The first two sizes of a marked input build plans; the others take their symbolic plan.
      EXPECT_STREQ(source, b == 6 || b == 9 ? "built" : "symbolic") << b;
    } else {
      // A GPU's dynamic kernels serve a power-of-two bucket: 6, 9 and 31 compile theirs, and 7
      // takes 6's (its plan is built: one plan of a bucket makes no symbolic plan).
      EXPECT_STREQ(source, "built") << b;
      if (b == 7) {
        EXPECT_EQ(s.compiled, 0);
      } else {
        EXPECT_GT(s.compiled, 0) << b;
      }
    }
  }
  const char* source = nullptr;
  EXPECT_EQ(kiln_device_last_plan_source(nullptr, &source), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_device_last_plan_source(d.dev, nullptr), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_device_last_recompiles(nullptr, nullptr, 0, nullptr), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_device_last_recompiles(d.dev, nullptr, 4, nullptr), KILN_ERROR_INVALID_ARGUMENT);
  if (device_name() == "cpu") {
    EXPECT_EQ(compiled, 0);
  }
  kiln_tensor t = h.keep(nullptr);
  EXPECT_EQ(kiln_tensor_mark_dynamic(tw, 2, nullptr), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("axis 2 is out of range"), std::string::npos);
  EXPECT_EQ(std::string(kiln_last_error()).rfind("kiln_tensor_mark_dynamic: ", 0), 0u)
      << kiln_last_error();  // the function's name, not its lambda's "operator()
  EXPECT_EQ(kiln_tensor_mark_dynamic(t, 0, nullptr), KILN_ERROR_INVALID_ARGUMENT);
}

// Linear regression by gradient descent, one realize per step: w -= lr * x^T (x w - y) / n.
// kiln_graph_input_symbol names each symbolic axis of a graph's inputs ("" for a fixed one).
TEST(CApi, GraphInputSymbolsNameEachSymbolicAxis) {
  kiln_graph g = nullptr;
  C_OK(kiln_graph_parse(
      "kiln.graph v1\ninput %x : f32[?b=4,8]\ninput %w : f32[8]\n%y = mul(%x, %w)\noutput %y\n",
      "mul.kg", &g));
  const char* symbol = nullptr;
  C_OK(kiln_graph_input_symbol(g, 0, 0, &symbol));
  EXPECT_STREQ(symbol, "b");
  C_OK(kiln_graph_input_symbol(g, 0, 1, &symbol));
  EXPECT_STREQ(symbol, "");
  C_OK(kiln_graph_input_symbol(g, 1, 0, &symbol));
  EXPECT_STREQ(symbol, "");
  EXPECT_EQ(kiln_graph_input_symbol(g, 0, 2, &symbol), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("axis 2 is out of range for input 0, of rank 2"),
            std::string::npos)
      << kiln_last_error();
  EXPECT_EQ(kiln_graph_input_symbol(g, 2, 0, &symbol), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_graph_input_symbol(g, 0, 0, nullptr), KILN_ERROR_INVALID_ARGUMENT);
  kiln_graph_release(g);
}

TEST(CApi, TrainingLoopMatchesTheCxxApi) {
  CDevice d;
  OPEN_OR_SKIP(d);
  const std::vector<float> xs = ramp(64 * 8, 0.1f, -0.5f), ys = ramp(64, 0.2f, -1.f);
  const std::vector<float> w0(8, 0.f);
  const int steps = 20;
  const int64_t xshape[2] = {64, 8}, yshape[2] = {64, 1}, wshape[2] = {8, 1};

  kiln_tensor x, y, w;
  C_OK(kiln_tensor_from_host(d.dev, KILN_F32, xshape, 2, xs.data(), xs.size() * 4, &x));
  C_OK(kiln_tensor_from_host(d.dev, KILN_F32, yshape, 2, ys.data(), ys.size() * 4, &y));
  C_OK(kiln_tensor_from_host(d.dev, KILN_F32, wshape, 2, w0.data(), w0.size() * 4, &w));
  kiln_tensor xt;
  C_OK(kiln_transpose(x, &xt));
  for (int step = 0; step < steps; ++step) {
    Handles h;
    kiln_tensor p, e, g, gs, next;
    C_OK(kiln_matmul(x, w, &p));
    C_OK(kiln_sub(h.keep(p), y, &e));
    C_OK(kiln_matmul(xt, h.keep(e), &g));
    C_OK(kiln_mul_scalar(h.keep(g), 0.05 / 64, &gs));
    C_OK(kiln_sub(w, h.keep(gs), &next));
    C_OK(kiln_tensor_realize(next));
    kiln_tensor_release(w);
    w = next;
  }
  std::vector<float> got(8);
  C_OK(kiln_tensor_to_host(w, got.data(), 32));
  for (kiln_tensor t : {x, y, w, xt}) kiln_tensor_release(t);

  auto dev = kiln::Device::open(device_name(), kCxxTestOptions).value();
  auto tx = kiln::Tensor::from_host(dev, std::span<const float>(xs), {64, 8});
  auto ty = kiln::Tensor::from_host(dev, std::span<const float>(ys), {64, 1});
  auto tw = kiln::Tensor::from_host(dev, std::span<const float>(w0), {8, 1});
  for (int step = 0; step < steps; ++step) {
    tw = tw - kiln::matmul(tx.transpose(), kiln::matmul(tx, tw) - ty) * (0.05 / 64);
    ASSERT_TRUE(tw.realize().has_value());
  }
  auto want = tw.to_vector<float>();
  ASSERT_TRUE(want.has_value()) << want.error().message;
  EXPECT_EQ(got, *want);
  // It learned: the loss fell.
  auto loss = [&](const std::vector<float>& wv) {
    double sum = 0;
    for (int i = 0; i < 64; ++i) {
      double p = 0;
      for (int j = 0; j < 8; ++j) p += double{xs[i * 8 + j]} * wv[j];
      sum += (p - ys[i]) * (p - ys[i]);
    }
    return sum;
  };
  EXPECT_LT(loss(got), 0.95 * loss(w0));
}

// A weight update whose old weights no handle holds is written over their memory on the cpu, and
// kiln_device_last_donated says so; held by a handle, they are kept and nothing is donated.
TEST(CApi, LastDonatedCountsResultsWrittenInPlace) {
  CDevice d;
  OPEN_OR_SKIP(d);
  const std::vector<float> w0 = ramp(16, 0.25f, -1.f);
  const int64_t shape[1] = {16};
  kiln_tensor w;
  C_OK(kiln_tensor_from_host(d.dev, KILN_F32, shape, 1, w0.data(), w0.size() * 4, &w));
  C_OK(kiln_tensor_realize(w));
  for (const bool held : {true, false}) {
    kiln_tensor next;
    C_OK(kiln_mul_scalar(w, 0.5, &next));
    if (!held) kiln_tensor_release(w);  // only `next` holds the old w now
    C_OK(kiln_tensor_realize(next));
    int32_t donated = -1;
    C_OK(kiln_device_last_donated(d.dev, &donated));
    EXPECT_EQ(donated, !held && device_name() == "cpu" ? 1 : 0) << (held ? "held" : "released");
    if (held) kiln_tensor_release(w);
    w = next;
  }
  std::vector<float> got(16);
  C_OK(kiln_tensor_to_host(w, got.data(), 64));
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], w0[i] * 0.25f) << i;
  kiln_tensor_release(w);
  int32_t n = 0;
  EXPECT_EQ(kiln_device_last_donated(nullptr, &n), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_device_last_donated(d.dev, nullptr), KILN_ERROR_INVALID_ARGUMENT);
}

TEST(CApi, FailuresReturnAStatusAndAMessage) {
  CDevice d;
  OPEN_OR_SKIP(d);
  Handles h;
  const float three[3] = {1, 2, 3}, four[4] = {1, 2, 3, 4};
  const int64_t s3 = 3, s4 = 4;
  kiln_tensor a, b;
  C_OK(kiln_tensor_from_host(d.dev, KILN_F32, &s3, 1, three, sizeof three, &a));
  C_OK(kiln_tensor_from_host(d.dev, KILN_F32, &s4, 1, four, sizeof four, &b));
  h.keep(a), h.keep(b);

  kiln_tensor out = reinterpret_cast<kiln_tensor>(0x1);  // untouched on failure
  EXPECT_EQ(kiln_add(a, b, &out), KILN_ERROR_INVALID_OPERATION);
  EXPECT_NE(std::string(kiln_last_error()).find("kiln_add"), std::string::npos) << kiln_last_error();
  EXPECT_NE(std::string(kiln_last_error()).find("[3]"), std::string::npos) << kiln_last_error();
  EXPECT_EQ(out, reinterpret_cast<kiln_tensor>(0x1));

  EXPECT_EQ(kiln_add(a, nullptr, &out), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("NULL"), std::string::npos);
  EXPECT_EQ(kiln_exp(a, nullptr), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_tensor_from_host(d.dev, KILN_F32, &s4, 1, three, sizeof three, &out),
            KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("12 bytes given for f32[4], which takes 16"),
            std::string::npos)
      << kiln_last_error();
  const int64_t negative = -2;
  EXPECT_EQ(kiln_full(d.dev, KILN_F32, &negative, 1, 0, &out), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_full(d.dev, static_cast<kiln_dtype>(9), &s3, 1, 0, &out), KILN_ERROR_INVALID_ARGUMENT);
  float small[2];
  EXPECT_EQ(kiln_tensor_to_host(a, small, sizeof small), KILN_ERROR_INVALID_ARGUMENT);
  int64_t dims[1];
  EXPECT_EQ(kiln_tensor_shape(a, dims, 0), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(out, reinterpret_cast<kiln_tensor>(0x1));

  EXPECT_EQ(kiln_cumsum(a, 1, 0, 0, &out), KILN_ERROR_INVALID_OPERATION);
  EXPECT_NE(std::string(kiln_last_error()).find("cumsum: axis 1 is out of range for shape [3]"),
            std::string::npos)
      << kiln_last_error();
  EXPECT_EQ(kiln_cumsum(nullptr, 0, 0, 0, &out), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(out, reinterpret_cast<kiln_tensor>(0x1));
  kiln_tensor sums = nullptr;
  C_OK(kiln_cumsum(b, -1, 1, 1, &sums));  // exclusive, reverse: 2+3+4, 3+4, 4, 0
  h.keep(sums);
  float got[4];
  C_OK(kiln_tensor_to_host(sums, got, sizeof got));
  EXPECT_EQ(std::vector<float>(got, got + 4), (std::vector<float>{9, 7, 4, 0}));

  kiln_device none = nullptr;
  EXPECT_EQ(kiln_device_open("vulkan:99", nullptr, &none), KILN_ERROR_DEVICE);
  EXPECT_NE(std::string(kiln_last_error()).find("vulkan"), std::string::npos) << kiln_last_error();
  EXPECT_EQ(none, nullptr);

  // The message is per thread: a failure elsewhere does not replace this thread's.
  const std::string mine = kiln_last_error();
  std::thread([] { kiln_tensor t; kiln_exp(nullptr, &t); }).join();
  EXPECT_EQ(std::string(kiln_last_error()), mine);
}

// An embedding lookup and a torch.gather through the C API, with negative and out-of-range
// indices (wrapped once, then clamped), and the errors of bad indices.
TEST(CApi, GatherAndGatherElements) {
  CDevice d;
  OPEN_OR_SKIP(d);
  Handles h;
  const float table[6] = {0, 1, 10, 11, 20, 21};  // [3,2]
  const int64_t ids[4] = {2, -1, 7, -5};
  const int32_t cols[3] = {1, -2, 9};  // [3,1]
  const int64_t ts[2] = {3, 2}, is = 4, cs[2] = {3, 1};
  kiln_tensor t, i, c, e, g, bad;
  C_OK(kiln_tensor_from_host(d.dev, KILN_F32, ts, 2, table, sizeof table, &t));
  C_OK(kiln_tensor_from_host(d.dev, KILN_I64, &is, 1, ids, sizeof ids, &i));
  C_OK(kiln_tensor_from_host(d.dev, KILN_I32, cs, 2, cols, sizeof cols, &c));
  h.keep(t), h.keep(i), h.keep(c);
  C_OK(kiln_gather(t, i, 0, &e));
  h.keep(e);
  int64_t dims[2] = {0, 0};
  C_OK(kiln_tensor_shape(e, dims, 2));
  EXPECT_EQ(dims[0], 4);
  EXPECT_EQ(dims[1], 2);
  float rows[8];
  C_OK(kiln_tensor_to_host(e, rows, sizeof rows));
  // rows 2, 2 (-1 + 3), 2 (7 clamped), 0 (-5 + 3 = -2 clamped)
  EXPECT_EQ(std::vector<float>(rows, rows + 8), (std::vector<float>{20, 21, 20, 21, 20, 21, 0, 1}));
  C_OK(kiln_gather_elements(t, c, -1, &g));
  h.keep(g);
  float picked[3];
  C_OK(kiln_tensor_to_host(g, picked, sizeof picked));
  EXPECT_EQ(std::vector<float>(picked, picked + 3), (std::vector<float>{1, 10, 21}));

  bad = reinterpret_cast<kiln_tensor>(0x1);
  EXPECT_EQ(kiln_gather(t, t, 0, &bad), KILN_ERROR_INVALID_OPERATION);
  EXPECT_NE(std::string(kiln_last_error()).find("gather: indices must be i32 or i64, got f32[3,2]"),
            std::string::npos)
      << kiln_last_error();
  EXPECT_EQ(kiln_gather_elements(t, i, 0, &bad), KILN_ERROR_INVALID_OPERATION);
  EXPECT_NE(std::string(kiln_last_error()).find("differ in rank"), std::string::npos)
      << kiln_last_error();
  EXPECT_EQ(kiln_gather(t, nullptr, 0, &bad), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(bad, reinterpret_cast<kiln_tensor>(0x1));
}

// ONNX TopK through the C API: values and i64 indices, ties to the lower index, largest and
// smallest along a negative axis; errors set neither out-handle.
TEST(CApi, TopKGivesValuesAndIndices) {
  CDevice d;
  OPEN_OR_SKIP(d);
  Handles h;
  const float data[8] = {3, 1, 4, 1, 5, 9, 2, 6};  // [2,4]
  const int64_t ds[2] = {2, 4};
  kiln_tensor x, v, i, sv, si;
  C_OK(kiln_tensor_from_host(d.dev, KILN_F32, ds, 2, data, sizeof data, &x));
  h.keep(x);
  C_OK(kiln_topk(x, 2, -1, 1, 1, &v, &i));
  h.keep(v), h.keep(i);
  float values[4];
  int64_t indices[4];
  C_OK(kiln_tensor_to_host(v, values, sizeof values));
  C_OK(kiln_tensor_to_host(i, indices, sizeof indices));
  EXPECT_EQ(std::vector<float>(values, values + 4), (std::vector<float>{4, 3, 9, 6}));
  EXPECT_EQ(std::vector<int64_t>(indices, indices + 4), (std::vector<int64_t>{2, 0, 1, 3}));
  C_OK(kiln_topk(x, 3, 1, 0, 0, &sv, &si));  // smallest: the two 1s in index order
  h.keep(sv), h.keep(si);
  int64_t low[6];
  C_OK(kiln_tensor_to_host(si, low, sizeof low));
  EXPECT_EQ(std::vector<int64_t>(low, low + 6), (std::vector<int64_t>{1, 3, 0, 2, 0, 3}));

  kiln_tensor bad_v = reinterpret_cast<kiln_tensor>(0x1), bad_i = bad_v;
  EXPECT_EQ(kiln_topk(x, 5, -1, 1, 1, &bad_v, &bad_i), KILN_ERROR_INVALID_OPERATION);
  EXPECT_NE(std::string(kiln_last_error())
                .find("topk_indices: k = 5 is out of range [0, 4] for axis 1 of shape [2,4]"),
            std::string::npos)
      << kiln_last_error();
  EXPECT_EQ(kiln_topk(x, 1, 2, 1, 1, &bad_v, &bad_i), KILN_ERROR_INVALID_OPERATION);
  EXPECT_EQ(kiln_topk(nullptr, 1, 0, 1, 1, &bad_v, &bad_i), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_topk(x, 1, 0, 1, 1, nullptr, &bad_i), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(bad_v, reinterpret_cast<kiln_tensor>(0x1));
  EXPECT_EQ(bad_i, reinterpret_cast<kiln_tensor>(0x1));
}

TEST(CApi, Resize) {
  CDevice d;
  OPEN_OR_SKIP(d);
  Handles h;
  const float row[3] = {0, 10, 20};  // [1,3]
  const int64_t shape[2] = {1, 3}, up[2] = {1, 6}, down[2] = {1, 2};
  kiln_tensor x, n, l, bad;
  C_OK(kiln_tensor_from_host(d.dev, KILN_F32, shape, 2, row, sizeof row, &x));
  h.keep(x);
  // NULL names: nearest, half_pixel, round_prefer_floor (each input position twice).
  C_OK(kiln_resize(x, up, 2, nullptr, nullptr, nullptr, &n));
  h.keep(n);
  float six[6];
  C_OK(kiln_tensor_to_host(n, six, sizeof six));
  EXPECT_EQ(std::vector<float>(six, six + 6), (std::vector<float>{0, 0, 10, 10, 20, 20}));
  C_OK(kiln_resize(x, down, 2, "linear", "align_corners", nullptr, &l));
  h.keep(l);
  float two[2];
  C_OK(kiln_tensor_to_host(l, two, sizeof two));
  EXPECT_EQ(std::vector<float>(two, two + 2), (std::vector<float>{0, 20}));

  bad = reinterpret_cast<kiln_tensor>(0x1);
  EXPECT_EQ(kiln_resize(x, up, 2, "area", nullptr, nullptr, &bad), KILN_ERROR_INVALID_OPERATION);
  EXPECT_NE(std::string(kiln_last_error()).find("resize: unknown mode 'area'"), std::string::npos)
      << kiln_last_error();
  EXPECT_EQ(kiln_resize(x, up, 1, nullptr, nullptr, nullptr, &bad), KILN_ERROR_INVALID_OPERATION);
  EXPECT_NE(std::string(kiln_last_error()).find("resize: 1 sizes for x of shape [1,3]"), std::string::npos)
      << kiln_last_error();
  EXPECT_EQ(kiln_resize(x, nullptr, 2, nullptr, nullptr, nullptr, &bad), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(bad, reinterpret_cast<kiln_tensor>(0x1));
}

TEST(CApi, TriluAndClip) {
  CDevice d;
  OPEN_OR_SKIP(d);
  Handles h;
  const float m[6] = {1, 2, 3, 4, 5, 6};  // [2,3]
  const int64_t shape[2] = {2, 3}, one = 1;
  const float bound = 4.5f;
  kiln_tensor x, hi, u, l, c, bad;
  C_OK(kiln_tensor_from_host(d.dev, KILN_F32, shape, 2, m, sizeof m, &x));
  C_OK(kiln_tensor_from_host(d.dev, KILN_F32, &one, 1, &bound, sizeof bound, &hi));
  h.keep(x), h.keep(hi);
  C_OK(kiln_trilu(x, 0, 1, &u));
  h.keep(u);
  float got[6];
  C_OK(kiln_tensor_to_host(u, got, sizeof got));
  EXPECT_EQ(std::vector<float>(got, got + 6), (std::vector<float>{1, 2, 3, 0, 5, 6}));
  C_OK(kiln_trilu(x, -1, 0, &l));
  h.keep(l);
  C_OK(kiln_tensor_to_host(l, got, sizeof got));
  EXPECT_EQ(std::vector<float>(got, got + 6), (std::vector<float>{0, 0, 0, 4, 0, 0}));
  C_OK(kiln_clip(x, nullptr, hi, &c));  // no lower bound
  h.keep(c);
  C_OK(kiln_tensor_to_host(c, got, sizeof got));
  EXPECT_EQ(std::vector<float>(got, got + 6), (std::vector<float>{1, 2, 3, 4, 4.5f, 4.5f}));

  bad = reinterpret_cast<kiln_tensor>(0x1);
  EXPECT_EQ(kiln_trilu(hi, 0, 1, &bad), KILN_ERROR_INVALID_OPERATION);
  EXPECT_NE(std::string(kiln_last_error()).find("trilu: needs a tensor of rank 2 or more, got [1]"),
            std::string::npos)
      << kiln_last_error();
  EXPECT_EQ(kiln_clip(nullptr, nullptr, nullptr, &bad), KILN_ERROR_INVALID_ARGUMENT);
}

// numpy put_along_axis for "none" (the last of duplicate indices wins), a loop for "add"; a
// wrapped negative index and an out-of-range one (dropped).
TEST(CApi, ScatterElements) {
  CDevice d;
  OPEN_OR_SKIP(d);
  Handles h;
  const float data[6] = {0, 1, 10, 11, 20, 21};  // [3,2]
  const int64_t ids[4] = {2, -1, 2, 5};          // [2,2]
  const float upd[4] = {100, 200, 300, 400};     // [2,2]
  const int64_t ds[2] = {3, 2}, is[2] = {2, 2};
  kiln_tensor x, i, u, none, add, bad;
  C_OK(kiln_tensor_from_host(d.dev, KILN_F32, ds, 2, data, sizeof data, &x));
  C_OK(kiln_tensor_from_host(d.dev, KILN_I64, is, 2, ids, sizeof ids, &i));
  C_OK(kiln_tensor_from_host(d.dev, KILN_F32, is, 2, upd, sizeof upd, &u));
  h.keep(x), h.keep(i), h.keep(u);
  C_OK(kiln_scatter_elements(x, i, u, 0, nullptr, &none));
  h.keep(none);
  float out[6];
  C_OK(kiln_tensor_to_host(none, out, sizeof out));
  // column 0: rows 2 (100) then 2 again (300, the last wins); column 1: row 2 (200), 5 dropped
  EXPECT_EQ(std::vector<float>(out, out + 6), (std::vector<float>{0, 1, 10, 11, 300, 200}));
  C_OK(kiln_scatter_elements(x, i, u, -2, "add", &add));
  h.keep(add);
  C_OK(kiln_tensor_to_host(add, out, sizeof out));
  EXPECT_EQ(std::vector<float>(out, out + 6), (std::vector<float>{0, 1, 10, 11, 420, 221}));

  bad = reinterpret_cast<kiln_tensor>(0x1);
  EXPECT_EQ(kiln_scatter_elements(x, i, u, 0, "sum", &bad), KILN_ERROR_INVALID_OPERATION);
  EXPECT_NE(std::string(kiln_last_error())
                .find("scatter_elements: reduction must be none, add, mul, max or min, got 'sum'"),
            std::string::npos)
      << kiln_last_error();
  EXPECT_EQ(kiln_scatter_elements(x, u, u, 0, "none", &bad), KILN_ERROR_INVALID_OPERATION);
  EXPECT_NE(std::string(kiln_last_error()).find("indices must be i32 or i64"), std::string::npos)
      << kiln_last_error();
  EXPECT_EQ(kiln_scatter_elements(x, i, nullptr, 0, "none", &bad), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(bad, reinterpret_cast<kiln_tensor>(0x1));
}

TEST(CApi, OptionsAreCheckedWhenSetAndReachTheDevice) {
  kiln_options o = test_options();
  EXPECT_EQ(kiln_options_set(o, "autotune.levle", "full"), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("did you mean autotune.level?"), std::string::npos)
      << kiln_last_error();
  EXPECT_EQ(kiln_options_set(o, "autotune.level", "fast"), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("minimal, balanced, extensive, full"), std::string::npos)
      << kiln_last_error();
  EXPECT_EQ(kiln_options_set(o, "threads", "-1"), KILN_ERROR_INVALID_ARGUMENT);
  C_OK(kiln_options_set(o, "threads", "1"));
  EXPECT_EQ(kiln_options_set(o, "cpu_rates", "fast"), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("expected measured or reference"), std::string::npos)
      << kiln_last_error();
  C_OK(kiln_options_set(o, "fusion.enabled", "false"));

  // Three elementwise ops: one kernel fused, three without fusion.
  auto kernels = [](kiln_options options) {
    CDevice d(options);
    EXPECT_NE(d.dev, nullptr) << d.error;
    if (!d.dev) return -1;
    Handles h;
    const int64_t n = 1000;
    kiln_tensor x, a, b, c;
    EXPECT_EQ(kiln_arange(d.dev, 0, n, 1, KILN_F32, &x), KILN_OK);
    EXPECT_EQ(kiln_exp(h.keep(x), &a), KILN_OK);
    EXPECT_EQ(kiln_mul(h.keep(a), x, &b), KILN_OK);
    EXPECT_EQ(kiln_sqrt(h.keep(b), &c), KILN_OK);
    EXPECT_EQ(kiln_tensor_realize(h.keep(c)), KILN_OK) << kiln_last_error();
    kiln_realize_stats s{};
    EXPECT_EQ(kiln_device_last_stats(d.dev, &s), KILN_OK);
    return s.kernels;
  };
  if (device_name() == "cpu") {
    EXPECT_EQ(kernels(nullptr), 1);
    EXPECT_EQ(kernels(o), 3);
  }
  kiln_options_release(o);
}

struct Lines {
  std::mutex mu;
  std::vector<std::string> seen;
};
void collect(const char* component, const char* level, const char* message, void* user) {
  auto* lines = static_cast<Lines*>(user);
  std::lock_guard lock(lines->mu);
  lines->seen.push_back(std::string(component) + "/" + level + ": " + message);
}

TEST(CApi, TheLogTargetCallsTheCallback) {
  Lines lines;
  kiln_set_log_callback(collect, &lines);
  kiln_options o = test_options();
  C_OK(kiln_options_set(o, "fusion.beam_search.logger.targets", "log"));
  C_OK(kiln_options_set(o, "fusion.beam_search.logger.level", "verbose"));
  {
    CDevice d(o);
    OPEN_OR_SKIP(d);
    kiln_tensor x, y;
    C_OK(kiln_arange(d.dev, 0, 100, 1, KILN_F32, &x));
    C_OK(kiln_sin(x, &y));
    C_OK(kiln_tensor_realize(y));
    kiln_tensor_release(x), kiln_tensor_release(y);
  }
  kiln_set_log_callback(nullptr, nullptr);
  kiln_options_release(o);
  std::lock_guard lock(lines.mu);
  ASSERT_FALSE(lines.seen.empty());
  EXPECT_EQ(lines.seen[0].rfind("fusion/verbose: 1 kernels by beam for " + device_name(), 0), 0u) << lines.seen[0];
}

// A graph with two inputs and two outputs that share a value (%d).
constexpr const char* kMeanVar = R"(kiln.graph v1
input %x : f32[4,8]
input %s : f32[]
%m = mean(%x, axes=[1], keepdim=true)
%d = sub(%x, %m)
%sq = mul(%d, %d)
%var = mean(%sq, axes=[1], keepdim=true)
%scaled = mul(%d, %s)
output %var
output %scaled
)";

// Text that kiln handed out, freed with kiln_string_release.
struct Text {
  char* text = nullptr;
  ~Text() { kiln_string_release(text); }
  std::string str() const { return text ? text : ""; }
};

TEST(CApi, GraphFilesAreCalledOnTensorsByInputName) {
  CDevice d;
  OPEN_OR_SKIP(d);
  kiln_graph g = nullptr;
  C_OK(kiln_graph_parse(kMeanVar, "mean_var.kg", &g));
  int32_t inputs = 0, outputs = 0;
  C_OK(kiln_graph_counts(g, &inputs, &outputs));
  EXPECT_EQ(inputs, 2);
  EXPECT_EQ(outputs, 2);
  const char* name = nullptr;
  kiln_dtype dtype = KILN_BOOL;
  int32_t rank = -1;
  C_OK(kiln_graph_input(g, 0, &name, &dtype, &rank));
  EXPECT_STREQ(name, "x");
  EXPECT_EQ(dtype, KILN_F32);
  EXPECT_EQ(rank, 2);
  int64_t dims[2] = {0, 0};
  C_OK(kiln_graph_input_shape(g, 0, dims, 2));
  EXPECT_EQ(dims[0], 4);
  EXPECT_EQ(dims[1], 8);
  C_OK(kiln_graph_input(g, 1, &name, nullptr, &rank));
  EXPECT_STREQ(name, "s");
  EXPECT_EQ(rank, 0);
  C_OK(kiln_graph_output(g, 1, &name));
  EXPECT_STREQ(name, "scaled");

  Handles h;
  const std::vector<float> xs = ramp(32, 0.25f, -1.f);
  const float s = 3.f;
  const int64_t xshape[2] = {4, 8};
  kiln_tensor x, sc;
  C_OK(kiln_tensor_from_host(d.dev, KILN_F32, xshape, 2, xs.data(), xs.size() * 4, &x));
  C_OK(kiln_tensor_from_host(d.dev, KILN_F32, nullptr, 0, &s, sizeof s, &sc));
  h.keep(x), h.keep(sc);
  // Bound by name, in another order than declared; the graph is released before its tensors.
  const char* names[2] = {"%s", "x"};
  const kiln_tensor bound[2] = {sc, x};
  kiln_tensor outs[2] = {nullptr, nullptr};
  C_OK(kiln_graph_call(d.dev, g, names, bound, 2, outs, 2));
  kiln_graph_release(g);
  h.keep(outs[0]), h.keep(outs[1]);
  C_OK(kiln_realize(outs, 2));
  kiln_realize_stats stats{};
  C_OK(kiln_device_last_stats(d.dev, &stats));
  std::vector<float> var(4), scaled(32);
  C_OK(kiln_tensor_to_host(outs[0], var.data(), var.size() * 4));
  C_OK(kiln_tensor_to_host(outs[1], scaled.data(), scaled.size() * 4));
  for (int r = 0; r < 4; ++r) {
    double mean = 0, sq = 0;
    for (int c = 0; c < 8; ++c) mean += xs[r * 8 + c] / 8.0;
    for (int c = 0; c < 8; ++c) {
      const double dev = xs[r * 8 + c] - mean;
      sq += dev * dev / 8.0;
      EXPECT_NEAR(scaled[r * 8 + c], dev * s, 1e-5) << r << "," << c;
    }
    EXPECT_NEAR(var[r], sq, 1e-5) << r;
  }
  // Realized in one request, one plan for both: a kernel per output shape at most.
  EXPECT_GE(stats.kernels, 1);
  EXPECT_LE(stats.kernels, 2);
}

// kiln_graph_trace: y = exp(x * w) + x and its row sums, traced over x with w captured (and its
// handle released), called on new x again and again: each call gives what the ops give, and the
// graph's one input is x (arg0). Bad traces and calls say what is wrong: nothing to trace, NULLs,
// an arg given twice, a tensor of another shape, a call on another device than the captured w's.
TEST(CApi, TracedGraphsReplayWhatWasRecordedOverNewArguments) {
  CDevice d;
  OPEN_OR_SKIP(d);
  Handles h;
  const int64_t shape[2] = {3, 4};
  const std::vector<float> ws = ramp(12, 0.05f, -0.3f);
  kiln_tensor x0, w, prod, e, y, sums;
  const std::vector<float> x0s = ramp(12, 0.1f, -0.5f);
  C_OK(kiln_tensor_from_host(d.dev, KILN_F32, shape, 2, x0s.data(), x0s.size() * 4, &x0));
  C_OK(kiln_tensor_from_host(d.dev, KILN_F32, shape, 2, ws.data(), ws.size() * 4, &w));
  h.keep(x0);
  C_OK(kiln_mul(x0, w, &prod));
  C_OK(kiln_exp(h.keep(prod), &e));
  C_OK(kiln_add(h.keep(e), x0, &y));
  const int64_t axis = 1;
  C_OK(kiln_sum(h.keep(y), &axis, 1, 0, &sums));
  h.keep(sums);
  const kiln_tensor outs[2] = {y, sums};
  kiln_graph g = nullptr;
  C_OK(kiln_graph_trace(outs, 2, &x0, 1, &g));
  kiln_tensor_release(w);  // the graph holds it
  int32_t inputs = 0, outputs = 0;
  C_OK(kiln_graph_counts(g, &inputs, &outputs));
  EXPECT_EQ(inputs, 1);
  EXPECT_EQ(outputs, 2);
  const char* name = nullptr;
  C_OK(kiln_graph_input(g, 0, &name, nullptr, nullptr));
  EXPECT_STREQ(name, "arg0");
  C_OK(kiln_graph_output(g, 1, &name));
  EXPECT_STREQ(name, "out1");
  for (int call = 0; call < 4; ++call) {
    const std::vector<float> xs = ramp(12, 0.07f * (call + 1), 0.2f * call - 0.4f);
    kiln_tensor x, got[2] = {nullptr, nullptr};
    C_OK(kiln_tensor_from_host(d.dev, KILN_F32, shape, 2, xs.data(), xs.size() * 4, &x));
    h.keep(x);
    C_OK(kiln_graph_call(d.dev, g, nullptr, &x, 1, got, 2));
    h.keep(got[0]), h.keep(got[1]);
    C_OK(kiln_realize(got, 2));
    std::vector<float> ys(12), row(3);
    C_OK(kiln_tensor_to_host(got[0], ys.data(), ys.size() * 4));
    C_OK(kiln_tensor_to_host(got[1], row.data(), row.size() * 4));
    for (int r = 0; r < 3; ++r) {
      double sum = 0;
      for (int c = 0; c < 4; ++c) {
        const double want =
            std::exp(static_cast<double>(xs[r * 4 + c]) * ws[r * 4 + c]) + xs[r * 4 + c];
        EXPECT_NEAR(ys[r * 4 + c], want, 1e-5 * (1 + std::abs(want)))
            << call << ": " << r << "," << c;
        sum += want;
      }
      EXPECT_NEAR(row[r], sum, 1e-4 * (1 + std::abs(sum))) << call << ": row " << r;
    }
  }

  kiln_graph bad = reinterpret_cast<kiln_graph>(0x1);  // untouched on failure
  EXPECT_EQ(kiln_graph_trace(outs, 0, &x0, 1, &bad), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("nothing to trace"), std::string::npos)
      << kiln_last_error();
  EXPECT_EQ(kiln_graph_trace(nullptr, 1, &x0, 1, &bad), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_graph_trace(outs, 2, nullptr, 1, &bad), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_graph_trace(outs, 2, &x0, 1, nullptr), KILN_ERROR_INVALID_ARGUMENT);
  const kiln_tensor twice[2] = {x0, x0};
  EXPECT_EQ(kiln_graph_trace(outs, 2, twice, 2, &bad), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("arg 1 is arg 0 again"), std::string::npos)
      << kiln_last_error();
  EXPECT_EQ(bad, reinterpret_cast<kiln_graph>(0x1));

  const int64_t other[2] = {4, 3};
  kiln_tensor wrong, got[2] = {nullptr, nullptr};
  C_OK(kiln_tensor_from_host(d.dev, KILN_F32, other, 2, x0s.data(), x0s.size() * 4, &wrong));
  h.keep(wrong);
  EXPECT_EQ(kiln_graph_call(d.dev, g, nullptr, &wrong, 1, got, 2), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("input %arg0 is declared f32[3,4]"),
            std::string::npos)
      << kiln_last_error();
  CDevice other_device;
  OPEN_OR_SKIP(other_device);
  kiln_tensor elsewhere;
  C_OK(kiln_tensor_from_host(other_device.dev, KILN_F32, shape, 2, x0s.data(), x0s.size() * 4,
                             &elsewhere));
  EXPECT_EQ(kiln_graph_call(other_device.dev, g, nullptr, &elsewhere, 1, got, 2),
            KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("its captured tensors"), std::string::npos)
      << kiln_last_error();
  kiln_tensor_release(elsewhere);
  kiln_graph_release(g);
}

// An ONNX model through kiln_graph_load: its initializers (the weight and bias of a Linear) are
// bound by the graph, so the caller sees and binds the one data input; with x = 0 every row of the
// result is the bias.
TEST(CApi, OnnxModelsLoadWithTheirInitializersBound) {
  const char* path = "/usr/share/libonnx-testdata/data/pytorch-converted/test_Linear/model.onnx";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "libonnx-testdata is not installed";
  CDevice d;
  OPEN_OR_SKIP(d);
  kiln_graph g = nullptr;
  C_OK(kiln_graph_load(path, &g));
  int32_t inputs = 0, outputs = 0;
  C_OK(kiln_graph_counts(g, &inputs, &outputs));
  EXPECT_EQ(inputs, 1);
  EXPECT_EQ(outputs, 1);
  const char* name = nullptr;
  int32_t rank = 0;
  C_OK(kiln_graph_input(g, 0, &name, nullptr, &rank));
  EXPECT_STREQ(name, "0");  // as the model names it
  ASSERT_EQ(rank, 2);
  EXPECT_EQ(kiln_graph_input(g, 1, &name, nullptr, &rank), KILN_ERROR_INVALID_ARGUMENT) << "in1 is a weight";
  int64_t dims[2] = {0, 0};
  C_OK(kiln_graph_input_shape(g, 0, dims, 2));
  Handles h;
  const std::vector<float> zeros(dims[0] * dims[1], 0.f);
  kiln_tensor x, y = nullptr;
  C_OK(kiln_tensor_from_host(d.dev, KILN_F32, dims, 2, zeros.data(), zeros.size() * 4, &x));
  h.keep(x);
  C_OK(kiln_graph_call(d.dev, g, nullptr, &x, 1, &y, 1));
  h.keep(y);
  kiln_graph_release(g);
  C_OK(kiln_realize(&y, 1));
  int64_t ydims[2] = {0, 0};
  int32_t yrank = 0;
  C_OK(kiln_tensor_rank(y, &yrank));
  ASSERT_EQ(yrank, 2);
  C_OK(kiln_tensor_shape(y, ydims, 2));
  std::vector<float> out(ydims[0] * ydims[1]);
  C_OK(kiln_tensor_to_host(y, out.data(), out.size() * 4));
  double norm = 0;
  for (int64_t r = 0; r < ydims[0]; ++r)
    for (int64_t c = 0; c < ydims[1]; ++c) {
      EXPECT_EQ(out[r * ydims[1] + c], out[c]) << r << "," << c;
      norm += std::abs(out[c]);
    }
  EXPECT_GT(norm, 0) << "the bias is not all zero";
  kiln_graph bad = nullptr;
  EXPECT_EQ(kiln_graph_load("/nonexistent/m.onnx", &bad), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("/nonexistent/m.onnx"), std::string::npos) << kiln_last_error();
}

TEST(CApi, GraphFailuresSayWhatTheGraphExpects) {
  CDevice d;
  OPEN_OR_SKIP(d);
  kiln_graph g = reinterpret_cast<kiln_graph>(0x1);  // untouched on failure
  EXPECT_EQ(kiln_graph_load("/nonexistent/g.kg", &g), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(kiln_last_error()).rfind("kiln_graph_load: ", 0), 0u) << kiln_last_error();
  EXPECT_NE(std::string(kiln_last_error()).find("/nonexistent/g.kg"), std::string::npos) << kiln_last_error();
  EXPECT_EQ(kiln_graph_parse("kiln.graph v1\ninput %x : f32[4]\n%y = exp(%z)\noutput %y\n", "bad.kg", &g),
            KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("bad.kg:3:"), std::string::npos) << kiln_last_error();
  EXPECT_EQ(g, reinterpret_cast<kiln_graph>(0x1));
  EXPECT_EQ(kiln_graph_parse(nullptr, nullptr, &g), KILN_ERROR_INVALID_ARGUMENT);

  C_OK(kiln_graph_parse(kMeanVar, nullptr, &g));
  Handles h;
  const int64_t xshape[2] = {4, 8}, wrong[2] = {8, 4};
  kiln_tensor x, s, transposed, f64;
  C_OK(kiln_full(d.dev, KILN_F32, xshape, 2, 1.0, &x));
  C_OK(kiln_full(d.dev, KILN_F32, nullptr, 0, 2.0, &s));
  C_OK(kiln_full(d.dev, KILN_F32, wrong, 2, 1.0, &transposed));
  C_OK(kiln_full(d.dev, KILN_F64, nullptr, 0, 2.0, &f64));
  h.keep(x), h.keep(s), h.keep(transposed), h.keep(f64);
  kiln_tensor outs[2] = {nullptr, nullptr};
  auto call = [&](std::vector<const char*> names, std::vector<kiln_tensor> in, int32_t capacity = 2) {
    kiln_status st = kiln_graph_call(d.dev, g, names.empty() ? nullptr : names.data(), in.data(),
                                     static_cast<int32_t>(in.size()), outs, capacity);
    return std::make_pair(st, std::string(kiln_last_error()));
  };
  auto [st, msg] = call({"x", "t"}, {x, s});
  EXPECT_EQ(st, KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("no input %t (its inputs: %x: f32[4,8], %s: f32[])"), std::string::npos) << msg;
  std::tie(st, msg) = call({"x", "x"}, {x, x});
  EXPECT_NE(msg.find("input %x is bound twice"), std::string::npos) << msg;
  std::tie(st, msg) = call({"x", "s"}, {transposed, s});
  EXPECT_NE(msg.find("input %x is declared f32[4,8], the tensor bound to it is f32[8,4]"), std::string::npos) << msg;
  std::tie(st, msg) = call({}, {x, f64});
  EXPECT_NE(msg.find("input %s is declared f32[], the tensor bound to it is f64[]"), std::string::npos) << msg;
  std::tie(st, msg) = call({}, {x});
  EXPECT_NE(msg.find("the graph takes 2 inputs"), std::string::npos) << msg;
  std::tie(st, msg) = call({}, {x, s}, 1);
  EXPECT_NE(msg.find("capacity 1 is less than the graph's 2 outputs"), std::string::npos) << msg;
  EXPECT_EQ(outs[0], nullptr);
  EXPECT_EQ(outs[1], nullptr);
  const char* name = nullptr;
  EXPECT_EQ(kiln_graph_input(g, 2, &name, nullptr, nullptr), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("input index 2 is out of range (the graph has 2)"),
            std::string::npos) << kiln_last_error();
  EXPECT_EQ(kiln_graph_output(g, -1, &name), KILN_ERROR_INVALID_ARGUMENT);
  int64_t dims[1];
  EXPECT_EQ(kiln_graph_input_shape(g, 0, dims, 1), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(name, nullptr);

  // Inputs of another device.
  CDevice other;
  ASSERT_NE(other.dev, nullptr) << other.error;
  kiln_tensor elsewhere;
  C_OK(kiln_full(other.dev, KILN_F32, xshape, 2, 1.0, &elsewhere));
  h.keep(elsewhere);
  std::tie(st, msg) = call({}, {elsewhere, s});
  EXPECT_EQ(st, KILN_ERROR_INVALID_OPERATION);
  EXPECT_NE(msg.find("inputs[0] lives on another device than the call's"), std::string::npos)
      << msg;
  kiln_graph_release(g);
}

TEST(CApi, GraphDumpsShowWhatARealizeRuns) {
  CDevice d;
  OPEN_OR_SKIP(d);
  kiln_graph g;
  C_OK(kiln_graph_parse(kMeanVar, "mean_var.kg", &g));
  Text groups, graph, kernels, source;
  C_OK(kiln_graph_dump(d.dev, g, "groups", 1, &groups.text));
  C_OK(kiln_graph_dump(d.dev, g, "graph", 0, &graph.text));
  C_OK(kiln_graph_dump(d.dev, g, "kernels", 0, &kernels.text));
  C_OK(kiln_graph_dump(d.dev, g, "source", 0, &source.text));
  // Values keep the file's names, in every stage.
  EXPECT_NE(groups.str().find("kernel k0"), std::string::npos) << groups.str();
  EXPECT_NE(groups.str().find("%var = "), std::string::npos) << groups.str();
  EXPECT_NE(groups.str().find("why ("), std::string::npos) << groups.str();
  EXPECT_NE(graph.str().find("input %x : f32[4,8]"), std::string::npos) << graph.str();
  EXPECT_NE(graph.str().find("output %scaled"), std::string::npos) << graph.str();
  EXPECT_NE(kernels.str().find("# %x"), std::string::npos) << kernels.str();
  EXPECT_NE(source.str().find("parameters: %x"), std::string::npos) << source.str();
  if (device_name() == "cpu") {
    EXPECT_NE(source.str().find("define void @"), std::string::npos) << source.str();
  }

  char* none = nullptr;
  EXPECT_EQ(kiln_graph_dump(d.dev, g, "ptx", 0, &none), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("unknown stage 'ptx' (graph, groups, kernels, analyze, source)"),
            std::string::npos) << kiln_last_error();
  EXPECT_EQ(none, nullptr);
  kiln_options o = test_options();
  kiln_device reference = nullptr;
  C_OK(kiln_device_open("reference", o, &reference));
  kiln_options_release(o);
  EXPECT_EQ(kiln_graph_dump(reference, g, "groups", 0, &none), KILN_ERROR_DEVICE);
  EXPECT_NE(std::string(kiln_last_error()).find("the reference device interprets graphs and builds no kernels"),
            std::string::npos) << kiln_last_error();
  kiln_device_release(reference);
  kiln_graph_release(g);
}

// Tensors of two devices in one kiln_realize are operands it does not take: the status says so
// (INVALID_OPERATION, as an op's two devices are), the message names both, and nothing runs.
TEST(CApi, RealizeOfTwoDevicesIsAnInvalidOperation) {
  CDevice d;
  OPEN_OR_SKIP(d);
  kiln_options o = test_options();
  kiln_device other = nullptr;
  C_OK(kiln_device_open("reference", o, &other));
  kiln_options_release(o);
  Handles h;
  const int64_t shape[1] = {4};
  kiln_tensor a, b, ea, eb;
  C_OK(kiln_full(d.dev, KILN_F32, shape, 1, 0.5, &a));
  C_OK(kiln_full(other, KILN_F32, shape, 1, 0.25, &b));
  C_OK(kiln_exp(h.keep(a), &ea));
  C_OK(kiln_exp(h.keep(b), &eb));
  h.keep(ea), h.keep(eb);
  const kiln_tensor both[2] = {ea, eb};
  EXPECT_EQ(kiln_realize(both, 2), KILN_ERROR_INVALID_OPERATION);
  EXPECT_NE(std::string(kiln_last_error())
                .find("kiln_realize: tensors[0] and tensors[1] live on two devices ('" +
                      device_name() + "' and 'reference')"),
            std::string::npos)
      << kiln_last_error();
  // Each device's tensors apart run.
  C_OK(kiln_realize(both, 1));
  C_OK(kiln_realize(both + 1, 1));
  float got[4] = {};
  C_OK(kiln_tensor_to_host(eb, got, sizeof got));
  for (const float g : got) EXPECT_FLOAT_EQ(g, std::exp(0.25f));
  kiln_device_release(other);
}

// Two devices opened apart under one name are two devices: an op, kiln_realize, kiln_dump and
// kiln_graph_call each give KILN_ERROR_INVALID_OPERATION and say that both have that name.
TEST(CApi, TwoDevicesOfOneNameAreOneErrorEverywhere) {
  CDevice d, twin;
  OPEN_OR_SKIP(d);
  OPEN_OR_SKIP(twin);
  Handles h;
  const int64_t shape[1] = {4};
  kiln_tensor a, b, sum;
  C_OK(kiln_full(d.dev, KILN_F32, shape, 1, 0.5, &a));
  C_OK(kiln_full(twin.dev, KILN_F32, shape, 1, 0.25, &b));
  h.keep(a), h.keep(b);
  const std::string both = "both named '" + device_name() + "', opened apart";
  const auto expect = [&](kiln_status st, const std::string& start) {
    EXPECT_EQ(st, KILN_ERROR_INVALID_OPERATION) << kiln_last_error();
    const std::string msg = kiln_last_error();
    EXPECT_EQ(msg.rfind(start, 0), 0u) << msg;
    EXPECT_NE(msg.find(both), std::string::npos) << msg;
  };
  expect(kiln_add(a, b, &sum), "kiln_add: operands live on different devices");
  const kiln_tensor pair[2] = {a, b};
  expect(kiln_realize(pair, 2), "kiln_realize: tensors[0] and tensors[1] live on two devices");
  char* text = nullptr;
  expect(kiln_dump(pair, 2, "groups", 0, &text),
         "kiln_dump: tensors[0] and tensors[1] live on two devices");
  EXPECT_EQ(text, nullptr);
  kiln_graph g = nullptr;
  C_OK(kiln_graph_parse("kiln.graph v1\ninput %x : f32[4]\n%y = exp(%x)\noutput %y\n", "e.kg", &g));
  kiln_tensor out = nullptr;
  expect(kiln_graph_call(d.dev, g, nullptr, &b, 1, &out, 1),
         "kiln_graph_call: inputs[0] lives on another device than the call's");
  EXPECT_EQ(out, nullptr);
  // On its own device the same call runs.
  C_OK(kiln_graph_call(twin.dev, g, nullptr, &b, 1, &out, 1));
  float got[4] = {};
  C_OK(kiln_tensor_to_host(h.keep(out), got, sizeof got));
  for (const float v : got) EXPECT_FLOAT_EQ(v, std::exp(0.25f));
  kiln_graph_release(g);
}

TEST(CApi, TensorDumpsShowThePendingWorkAndRealizeNothing) {
  CDevice d;
  OPEN_OR_SKIP(d);
  Handles h;
  const int64_t shape[2] = {16, 32};
  kiln_tensor x, e, s, y;
  C_OK(kiln_full(d.dev, KILN_F32, shape, 2, 0.5, &x));
  C_OK(kiln_tensor_realize(h.keep(x)));
  C_OK(kiln_exp(x, &e));
  C_OK(kiln_softmax(h.keep(e), -1, &s));
  C_OK(kiln_add(h.keep(s), x, &y));
  h.keep(y);
  kiln_realize_stats before{}, after{};
  C_OK(kiln_device_last_stats(d.dev, &before));
  Text groups, graph;
  C_OK(kiln_dump(&y, 1, "groups", 0, &groups.text));
  C_OK(kiln_dump(&y, 1, "graph", 0, &graph.text));
  // The realized %x is an input; the pending exp, softmax and add are ops of the kernels.
  EXPECT_NE(graph.str().find("input %"), std::string::npos) << graph.str();
  EXPECT_NE(graph.str().find("exp("), std::string::npos) << graph.str();
  EXPECT_NE(groups.str().find("kernel k0"), std::string::npos) << groups.str();
  C_OK(kiln_device_last_stats(d.dev, &after));
  EXPECT_EQ(before.kernels, after.kernels);
  EXPECT_EQ(before.run_ms, after.run_ms);  // no realize ran
  // It still realizes, to the values the dump described.
  std::vector<float> got(16 * 32);
  C_OK(kiln_tensor_to_host(y, got.data(), got.size() * 4));
  EXPECT_NEAR(got[0], 0.5 + 1.0 / 32, 1e-6);

  char* none = nullptr;
  EXPECT_EQ(kiln_dump(&y, 0, "groups", 0, &none), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_dump(nullptr, 1, "groups", 0, &none), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_dump(&y, 1, nullptr, 0, &none), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(none, nullptr);
}

TEST(CApi, TheCapsuleDestructorDoesNothingOutsidePython) {
  // No Python in this process: the destructor finds no Python C API and leaves the pointer alone
  // (tests/python/test_dlpack.py checks what it does inside Python).
  std::vector<unsigned char> not_a_capsule(64, 0xab);
  kiln_dlpack_capsule_destructor(not_a_capsule.data());
  kiln_dlpack_capsule_destructor(nullptr);
  EXPECT_EQ(not_a_capsule, std::vector<unsigned char>(64, 0xab));
}

}  // namespace
