// A long-running program's memory: a training-style loop (matmul, softmax, a weight update, one
// realize per step) holds only what its live tensors need, so its resident size stops growing
// once its plan is cached. (Before each realize built its own graph, every step added nodes to a
// device-wide graph that was never freed: 93 MB over 20000 steps of this loop.)
#include <gtest/gtest.h>

#include <kiln/kiln.h>

#include <fstream>
#include <span>
#include <string>
#include <vector>

namespace {

long resident_kib() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key)
    if (key == "VmRSS:") {
      long kib = 0;
      status >> kib;
      return kib;
    }
  return -1;
}

TEST(LongRunning, ATrainingLoopsMemoryStaysFlat) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer holds freed memory back (quarantine), so the resident size grows";
#endif
  auto dev = kiln::Device::open(
                 "cpu", kiln::Options{.settings = {{"compilation.cache", "none"},
                                                   {"autotune.cache", "none"},
                                                   {"autotune.enabled", "false"}},
                                      .use_config = false, .config_dir = ""})
                 .value();
  std::vector<float> xs(16 * 32), ws(32 * 8, 0.02f);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = 0.01f * static_cast<float>(i % 17);
  auto x = kiln::Tensor::from_host(dev, std::span<const float>(xs), {16, 32});
  auto w = kiln::Tensor::from_host(dev, std::span<const float>(ws), {32, 8});
  auto step = [&] {
    auto p = kiln::softmax(kiln::matmul(x, w));
    w = w - kiln::matmul(x.transpose(), p - 0.125) * 0.01;
    ASSERT_TRUE(w.realize().has_value());
  };
  for (int i = 0; i < 2000; ++i) step();  // plans built, pools and allocator warm
  const long before = resident_kib();
  for (int i = 0; i < 20000; ++i) step();
  const long after = resident_kib();
  ASSERT_GT(before, 0);
  // 20000 steps that kept even 100 bytes each would add 2 MB.
  EXPECT_LT(after - before, 1024) << "resident size grew from " << before << " KiB to " << after
                                  << " KiB over 20000 steps";
  EXPECT_EQ(dev.last_stats().compiled, 0);
  EXPECT_TRUE(dev.last_stats().plan_cache_hit);
}

}  // namespace
