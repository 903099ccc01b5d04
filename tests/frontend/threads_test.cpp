// Lazy tensors shared by threads: recording and realizing the same tensors concurrently.
// KILN_THREAD_TRIALS sets the trial count of the looped tests (default keeps ctest fast).
#include <gtest/gtest.h>

#include <kiln/kiln.h>
#include <atomic>
#include <cstdlib>
#include <latch>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int64_t kN = 64;

int trials() {
  const char* v = std::getenv("KILN_THREAD_TRIALS");
  return v ? std::max(1, std::atoi(v)) : 200;
}

kiln::Device& cpu() {
  static kiln::Device dev = kiln::Device::open("cpu").value();
  return dev;
}

std::vector<float> iota_from(float start) {
  std::vector<float> v(kN);
  for (int64_t i = 0; i < kN; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

// Empty when `got` holds f(x) + add for x = iota_from(start), f(x) = x * 3 + 1.
std::string mismatch(const kiln::Expected<std::vector<float>>& got, float start, float add) {
  if (!got) return got.error().message;
  for (int64_t i = 0; i < kN; ++i) {
    float want = (start + static_cast<float>(i)) * 3.f + 1.f + add;
    if ((*got)[i] != want)
      return "element " + std::to_string(i) + ": " + std::to_string((*got)[i]) +
             " != " + std::to_string(want);
  }
  return "";
}

kiln::Tensor f_of_fresh_x(float start) {
  std::vector<float> x = iota_from(start);
  return kiln::Tensor::from_host(cpu(), std::span<const float>(x), {kN}) * 3.0 + 1.0;
}

// Runs `a` and `b` on two threads released at the same moment; returns their messages.
template <class A, class B>
std::pair<std::string, std::string> race(A a, B b) {
  std::latch start(2);
  std::string ra, rb;
  std::thread ta([&] { start.arrive_and_wait(), ra = a(); });
  std::thread tb([&] { start.arrive_and_wait(), rb = b(); });
  ta.join();
  tb.join();
  return {ra, rb};
}

// The reported race: one thread realizes y while the other records y + 1 and realizes it.
TEST(SharedTensorThreads, RealizeWhileAnotherThreadRecordsOnTheSameTensor) {
  const int n = trials();
  for (int trial = 0; trial < n; ++trial) {
    float start = static_cast<float>(trial % 1000);
    kiln::Tensor y = f_of_fresh_x(start);
    auto [ra, rb] = race([&] { return mismatch(y.to_vector<float>(), start, 0); },
                         [&] { return mismatch((y + 1.0).to_vector<float>(), start, 1); });
    ASSERT_EQ(ra, "") << "trial " << trial << ", thread realizing y";
    ASSERT_EQ(rb, "") << "trial " << trial << ", thread realizing y + 1";
  }
}

// Both threads realize the same tensor: both get the result, and it is one buffer.
TEST(SharedTensorThreads, TwoThreadsRealizeTheSameTensor) {
  const int n = trials();
  for (int trial = 0; trial < n; ++trial) {
    float start = static_cast<float>(trial % 1000);
    kiln::Tensor y = f_of_fresh_x(start);
    auto [ra, rb] = race([&] { return mismatch(y.to_vector<float>(), start, 0); },
                         [&] { return mismatch(y.to_vector<float>(), start, 0); });
    ASSERT_EQ(ra, "") << "trial " << trial << ", first thread";
    ASSERT_EQ(rb, "") << "trial " << trial << ", second thread";
  }
}

// Many threads record (and realize) on one device at once, some ops reading a tensor shared by
// all of them that one of them realizes midway.
TEST(SharedTensorThreads, ManyThreadsRecordOnOneDevice) {
  constexpr int kThreads = 8;
  const int rounds = std::max(1, trials() / 10);
  for (int round = 0; round < rounds; ++round) {
    float base = static_cast<float>(round);
    kiln::Tensor shared = f_of_fresh_x(base);
    std::latch start(kThreads);
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        start.arrive_and_wait();
        if (t == 0) {
          errors[t] = mismatch(shared.to_vector<float>(), base, 0);
          return;
        }
        // Recorded op by op, interleaving with the other threads' recording.
        kiln::Tensor own = f_of_fresh_x(base + static_cast<float>(t)) - shared;
        for (int k = 0; k < t; ++k) own = own + 1.0;
        // own = 3t + t everywhere; added to shared it is f(x) + 4t.
        errors[t] = mismatch((own + shared).to_vector<float>(), base, 4.f * static_cast<float>(t));
      });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t)
      ASSERT_EQ(errors[t], "") << "round " << round << ", thread " << t;
  }
}

}  // namespace
