// Buffer donation: a result may be written over an operand's buffer when nothing but the realize
// holds that operand (no handle, no other tensor, no DLPack export, kiln's own memory) and the
// kernel reads each element only where it writes it. `w = w - lr * g` then updates w in place, so
// a training step allocates nothing after the first; anything still holding the operand sees it
// unchanged.
#include <dlpack/dlpack.h>
#include <gtest/gtest.h>

#include <kiln/kiln.h>

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace {

kiln::Device open_cpu(std::vector<std::pair<std::string, std::string>> extra = {}) {
  std::vector<std::pair<std::string, std::string>> settings = {
      {"compilation.cache", "none"}, {"autotune.cache", "none"}, {"autotune.enabled", "false"}};
  settings.insert(settings.end(), extra.begin(), extra.end());
  return kiln::Device::open("cpu", kiln::Options{.settings = settings, .use_config = false,
                                                 .config_dir = ""})
      .value();
}

// The address of a realized tensor's buffer (the export is let go at once).
const void* address_of(kiln::Tensor& t) {
  auto dl = t.to_dlpack();
  EXPECT_TRUE(dl.has_value());
  if (!dl) return nullptr;
  const void* data = (*dl)->dl_tensor.data;
  (*dl)->deleter(*dl);
  return data;
}

std::vector<float> iota(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(i % 13) - 0.05f;
  return v;
}

TEST(Donation, AWeightUpdateWritesOverTheWeightsBuffer) {
  auto dev = open_cpu();
  const auto xs = iota(16 * 32, 0.01f), ys = iota(16 * 8, 0.02f);
  auto x = kiln::Tensor::from_host(dev, std::span<const float>(xs), {16, 32});
  auto y = kiln::Tensor::from_host(dev, std::span<const float>(ys), {16, 8});
  auto w = kiln::Tensor::from_host(dev, std::span<const float>(iota(32 * 8, 0.03f)), {32, 8});
  // The same steps on a device where a handle holds every old w, so nothing is donated.
  auto ref_dev = open_cpu();
  auto rx = kiln::Tensor::from_host(ref_dev, std::span<const float>(xs), {16, 32});
  auto ry = kiln::Tensor::from_host(ref_dev, std::span<const float>(ys), {16, 8});
  auto rw = kiln::Tensor::from_host(ref_dev, std::span<const float>(iota(32 * 8, 0.03f)), {32, 8});
  std::vector<kiln::Tensor> held;

  ASSERT_TRUE(w.realize().has_value());
  const void* first = address_of(w);
  for (int step = 0; step < 20; ++step) {
    w = w - kiln::matmul(x.transpose(), kiln::matmul(x, w) - y) * 0.01;
    ASSERT_TRUE(w.realize().has_value());
    EXPECT_EQ(dev.last_stats().donated, 1) << "step " << step;
    EXPECT_EQ(address_of(w), first) << "step " << step;

    held.push_back(rw);
    rw = rw - kiln::matmul(rx.transpose(), kiln::matmul(rx, rw) - ry) * 0.01;
    ASSERT_TRUE(rw.realize().has_value());
    EXPECT_EQ(ref_dev.last_stats().donated, 0);
  }
  // The same kernels ran on the same values: the results agree to the bit.
  EXPECT_EQ(w.to_vector<float>().value(), rw.to_vector<float>().value());
  // And every held old w is what it was when it was computed.
  auto w0 = iota(32 * 8, 0.03f);
  EXPECT_EQ(held.front().to_vector<float>().value(), w0);
}

TEST(Donation, AHandleKeepsItsTensorUnchanged) {
  auto dev = open_cpu();
  auto w = kiln::Tensor::from_host(dev, std::span<const float>(iota(64, 1.f)), {8, 8});
  kiln::Tensor old = w;
  w = w - 1.0;
  ASSERT_TRUE(w.realize().has_value());
  EXPECT_EQ(dev.last_stats().donated, 0);
  const auto before = iota(64, 1.f);
  EXPECT_EQ(old.to_vector<float>().value(), before);
  const auto after = w.to_vector<float>().value();
  for (size_t i = 0; i < after.size(); ++i) EXPECT_EQ(after[i], before[i] - 1.f);
}

TEST(Donation, ATensorReadByAnotherPendingTensorIsNotWrittenOver) {
  auto dev = open_cpu();
  auto w = kiln::Tensor::from_host(dev, std::span<const float>(iota(64, 1.f)), {8, 8});
  ASSERT_TRUE(w.realize().has_value());
  kiln::Tensor later = w * 2.0;  // reads w, realized after the update
  w = w - 1.0;
  ASSERT_TRUE(w.realize().has_value());
  EXPECT_EQ(dev.last_stats().donated, 0);
  const auto before = iota(64, 1.f);
  const auto twice = later.to_vector<float>().value();
  for (size_t i = 0; i < twice.size(); ++i) EXPECT_EQ(twice[i], 2.f * before[i]);
}

// The same through an intermediate of the realize that a handle holds: it keeps its recipe, and
// with it the old w, which a later realize of it reads.
TEST(Donation, AHeldIntermediateKeepsItsOperandUnchanged) {
  auto dev = open_cpu();
  auto w = kiln::Tensor::from_host(dev, std::span<const float>(iota(64, 1.f)), {8, 8});
  ASSERT_TRUE(w.realize().has_value());
  kiln::Tensor mid = w * 2.0;  // computed by the update's realize, but not realized by it
  w = w - mid * 0.25;
  ASSERT_TRUE(w.realize().has_value());
  EXPECT_EQ(dev.last_stats().donated, 0);
  const auto before = iota(64, 1.f);
  const auto twice = mid.to_vector<float>().value();
  for (size_t i = 0; i < twice.size(); ++i) EXPECT_EQ(twice[i], 2.f * before[i]);
}

TEST(Donation, AnExportedBufferIsNotWrittenOver) {
  auto dev = open_cpu();
  auto w = kiln::Tensor::from_host(dev, std::span<const float>(iota(64, 1.f)), {8, 8});
  auto dl = w.to_dlpack();
  ASSERT_TRUE(dl.has_value());
  w = w - 1.0;
  ASSERT_TRUE(w.realize().has_value());
  EXPECT_EQ(dev.last_stats().donated, 0);
  const auto before = iota(64, 1.f);
  const float* data = static_cast<const float*>((*dl)->dl_tensor.data);
  EXPECT_EQ(std::vector<float>(data, data + 64), before);
  (*dl)->deleter(*dl);
}

TEST(Donation, ImportedMemoryIsNeverWrittenOver) {
  auto dev = open_cpu();
  std::vector<float> mine = iota(64, 1.f);
  int64_t shape[] = {8, 8};
  static std::atomic<int> deleted{0};
  auto* managed = new DLManagedTensor{};
  managed->dl_tensor = DLTensor{mine.data(), DLDevice{kDLCPU, 0}, 2, DLDataType{kDLFloat, 32, 1},
                                shape, nullptr, 0};
  managed->deleter = [](DLManagedTensor* m) {
    ++deleted;
    delete m;
  };
  auto w = kiln::Tensor::from_dlpack(dev, managed);
  ASSERT_TRUE(w.ok());
  w = w - 1.0;
  ASSERT_TRUE(w.realize().has_value());
  EXPECT_EQ(dev.last_stats().donated, 0);
  EXPECT_EQ(mine, iota(64, 1.f));
  EXPECT_EQ(deleted.load(), 1);  // the realize dropped the import
}

// Kernels that read an operand's elements elsewhere than where they write (a transpose, a
// reduction over it) must not write over it: their results are exact.
TEST(Donation, KernelsThatReadOtherElementsDoNotWriteOver) {
  auto dev = open_cpu();
  const auto v = iota(64, 1.f);
  auto w = kiln::Tensor::from_host(dev, std::span<const float>(v), {8, 8});
  w = w.transpose() - 1.0;
  ASSERT_TRUE(w.realize().has_value());
  EXPECT_EQ(dev.last_stats().donated, 0);
  auto t = w.to_vector<float>().value();
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) EXPECT_EQ(t[i * 8 + j], v[j * 8 + i] - 1.f);

  auto u = kiln::Tensor::from_host(dev, std::span<const float>(v), {8, 8});
  u = u - u.sum({1}, true);
  ASSERT_TRUE(u.realize().has_value());
  auto r = u.to_vector<float>().value();
  for (int i = 0; i < 8; ++i) {
    float row = 0;
    for (int j = 0; j < 8; ++j) row += v[i * 8 + j];
    for (int j = 0; j < 8; ++j) EXPECT_NEAR(r[i * 8 + j], v[i * 8 + j] - row, 1e-4f);
  }
}

// A kernel that writes two results may write each over its own operand: a decoder's step that
// writes one row of a layer's key and value caches, `k = where(here, row, k)` and the same for v,
// in one kernel, updates both caches in their own memory.
TEST(Donation, TwoCachesWrittenByOneKernelAreBothUpdatedInPlace) {
  auto dev = open_cpu();
  auto ref_dev = open_cpu();
  const std::vector<int32_t> rows_v = {0, 1, 2, 3, 4, 5, 6, 7};
  auto rows = kiln::Tensor::from_host(dev, std::span<const int32_t>(rows_v), {8, 1});
  auto ref_rows = kiln::Tensor::from_host(ref_dev, std::span<const int32_t>(rows_v), {8, 1});
  auto k = kiln::Tensor::from_host(dev, std::span<const float>(iota(8 * 4, 1.f)), {8, 4});
  auto v = kiln::Tensor::from_host(dev, std::span<const float>(iota(8 * 4, 2.f)), {8, 4});
  auto rk = kiln::Tensor::from_host(ref_dev, std::span<const float>(iota(8 * 4, 1.f)), {8, 4});
  auto rv = kiln::Tensor::from_host(ref_dev, std::span<const float>(iota(8 * 4, 2.f)), {8, 4});
  std::vector<kiln::Tensor> held;
  ASSERT_TRUE(kiln::realize({k, v}).has_value());
  const void* k_at = address_of(k);
  const void* v_at = address_of(v);
  for (int32_t pos = 0; pos < 8; ++pos) {
    const std::vector<float> row = iota(4, 0.5f * static_cast<float>(pos + 1));
    auto step = [&](const kiln::Device& d, const kiln::Tensor& r, kiln::Tensor& kk, kiln::Tensor& vv) {
      auto at = kiln::Tensor::from_host(d, std::span<const int32_t>(&pos, 1), {1});
      auto x = kiln::Tensor::from_host(d, std::span<const float>(row), {1, 4});
      auto here = kiln::eq(r, at);
      kk = kiln::where(here, x * 3.0, kk);
      vv = kiln::where(here, x - 1.0, vv);
      return kiln::realize({kk, vv});
    };
    ASSERT_TRUE(step(dev, rows, k, v).has_value());
    EXPECT_EQ(dev.last_stats().kernels, 1) << "pos " << pos;
    EXPECT_EQ(dev.last_stats().donated, 2) << "pos " << pos;
    EXPECT_EQ(address_of(k), k_at) << "pos " << pos;
    EXPECT_EQ(address_of(v), v_at) << "pos " << pos;
    held.push_back(rk);
    held.push_back(rv);
    ASSERT_TRUE(step(ref_dev, ref_rows, rk, rv).has_value());
    EXPECT_EQ(ref_dev.last_stats().donated, 0);
  }
  EXPECT_EQ(k.to_vector<float>().value(), rk.to_vector<float>().value());
  EXPECT_EQ(v.to_vector<float>().value(), rv.to_vector<float>().value());
  EXPECT_EQ(held.front().to_vector<float>().value(), iota(8 * 4, 1.f));  // held: unchanged
}

// Masked updates written over their operand (where(m, f(w), w) and where(m, w, f(w)), the mask
// per element): the elements the mask keeps are left as they were, the others change, as on a
// device where a handle holds every old w.
TEST(Donation, AMaskedUpdateWrittenOverItsOperandChangesOnlyTheMaskedElements) {
  auto dev = open_cpu();
  auto ref_dev = open_cpu();
  const auto init = iota(1000, 0.1f);
  auto w = kiln::Tensor::from_host(dev, std::span<const float>(init), {10, 100});
  auto rw = kiln::Tensor::from_host(ref_dev, std::span<const float>(init), {10, 100});
  std::vector<kiln::Tensor> held;
  ASSERT_TRUE(w.realize().has_value());
  const void* at = address_of(w);
  for (int step = 0; step < 6; ++step) {
    const float t = 0.2f * static_cast<float>(step % 3);
    auto update = [&](const kiln::Device& d, kiln::Tensor& x) {
      auto th = kiln::Tensor::from_host(d, std::span<const float>(&t, 1), {1});
      x = step % 2 == 0 ? kiln::where(kiln::gt(x, th), x * 0.5 - 0.01, x)
                        : kiln::where(kiln::gt(x, th), x, x + 0.3);
      return x.realize();
    };
    held.push_back(rw);
    ASSERT_TRUE(update(ref_dev, rw).has_value());
    EXPECT_EQ(ref_dev.last_stats().donated, 0);
    ASSERT_TRUE(update(dev, w).has_value());
    EXPECT_EQ(dev.last_stats().donated, 1) << "step " << step;
    EXPECT_EQ(address_of(w), at) << "step " << step;
    EXPECT_EQ(w.to_vector<float>().value(), rw.to_vector<float>().value()) << "step " << step;
  }
  EXPECT_EQ(held.front().to_vector<float>().value(), init);
}

// Where another result of the same kernel reads the operand too, no result may take its memory:
// that result could be computed after the operand's element was written over.
TEST(Donation, AnOperandThatAnotherResultReadsIsNotWrittenOver) {
  auto dev = open_cpu();
  const auto v = iota(64, 1.f);
  auto w = kiln::Tensor::from_host(dev, std::span<const float>(v), {64});
  ASSERT_TRUE(w.realize().has_value());
  auto a = w * 2.0;
  auto b = w + 1.0;
  w = kiln::Tensor();
  ASSERT_TRUE(kiln::realize({a, b}).has_value());
  EXPECT_EQ(dev.last_stats().kernels, 1);
  EXPECT_EQ(dev.last_stats().donated, 0);
  auto av = a.to_vector<float>().value(), bv = b.to_vector<float>().value();
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(av[i], v[i] * 2.f) << i;
    EXPECT_EQ(bv[i], v[i] + 1.f) << i;
  }
}

// A training step after the first takes no new memory from the system: the update writes over
// the weights, and intermediates come from the pool.
TEST(Donation, ATrainingStepAllocatesNothingAfterTheFirst) {
  static std::atomic<int> fresh{0};
  kiln::set_log_callback([](std::string_view, std::string_view, std::string_view message) {
    if (message.find("allocated a new") != std::string_view::npos) ++fresh;
  });
  auto dev = open_cpu({{"memory.logger.level", "verbose"}, {"memory.logger.targets", "log"}});
  const auto xs = iota(16 * 32, 0.01f);
  auto x = kiln::Tensor::from_host(dev, std::span<const float>(xs), {16, 32});
  auto w = kiln::Tensor::from_host(dev, std::span<const float>(iota(32 * 8, 0.02f)), {32, 8});
  auto step = [&] {
    w = w - kiln::matmul(x.transpose(), kiln::softmax(kiln::matmul(x, w)) - 0.125) * 0.01;
    ASSERT_TRUE(w.realize().has_value());
  };
  step();
  const int after_first = fresh.load();
  EXPECT_GT(after_first, 0);  // the first step's intermediates are new memory
  for (int i = 0; i < 50; ++i) step();
  EXPECT_EQ(fresh.load(), after_first);
  EXPECT_EQ(dev.last_stats().donated, 1);
  kiln::set_log_callback(nullptr);
}

// The candidates are part of a stored plan: a process that finds the plan on disk donates too.
TEST(Donation, APlanReadFromTheCacheWritesInPlace) {
  const std::string cache = ::testing::TempDir() + "kiln_donation_" + std::to_string(getpid()) + ".sqlite";
  std::remove(cache.c_str());
  for (int process = 0; process < 2; ++process) {
    auto dev = open_cpu({{"compilation.cache", "file=" + cache}});
    auto w = kiln::Tensor::from_host(dev, std::span<const float>(iota(64, 1.f)), {8, 8});
    w = w * 0.5 - 1.0;
    ASSERT_TRUE(w.realize().has_value());
    EXPECT_EQ(dev.last_stats().donated, 1) << "process " << process;
    // The second process compiles nothing: its plan and kernel come from the file.
    EXPECT_EQ(dev.last_stats().compiled == 0, process == 1) << "process " << process;
  }
  std::remove(cache.c_str());
}

}  // namespace
