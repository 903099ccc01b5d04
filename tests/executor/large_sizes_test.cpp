// Sizes past 2^31 (issue 15): sums over more elements than one f32 accumulator counts exactly,
// from a broadcast source (no memory needed), are exact on every device; shapes past what kiln
// indexes (2^59 elements) are refused by the builder with a message.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "runtime/device.h"
#include "tests/support/must.h"

namespace kiln::runtime {
namespace {

using ir::DType;
using ir::Op;
using tests::must;

// sum and mean of x (one f32 value) broadcast to `shape`, over every axis.
std::vector<double> sum_and_mean(const std::string& device, const ir::Shape& shape, float x) {
  ir::Graph g;
  ir::Builder b(g);
  const ir::Node* in = g.input(DType::f32, {1}, "x");
  const ir::Node* wide = must(b.expand(in, shape));
  const ir::Node* sum = must(b.reduce(Op::Sum, wide, std::nullopt, false));
  const ir::Node* mean = must(b.mean(wide, std::nullopt, false));
  DeviceOptions options;
  options.cpu_rates = options.gpu_rates = RatesSource::reference;
  auto dev = open_device(device, options);
  if (!dev) return {};
  ir::HostTensor h = ir::HostTensor::zeros(DType::f32, {1});
  h.set(0, x);
  auto out = (*dev)->execute(g, {sum, mean}, {{in, (*dev)->pool()->from_host(h).value()}});
  KILN_CHECK(out.has_value()) << out.error().message;
  return {(*out)[0]->to_host().get(0), (*out)[1]->to_host().get(0)};
}

void check_large_sums(const std::string& device) {
  // 1.5e9 ones: one accumulator per lane stopped at 2^24 (the sum came out as 2^30).
  for (const ir::Shape& shape : {ir::Shape{1'500'000'000}, ir::Shape{3'000'000'000},
                                 ir::Shape{100'000, 30'000}, ir::Shape{3, 1'000'000'000}}) {
    const double n = static_cast<double>(ir::shape_numel(shape));
    std::vector<double> r = sum_and_mean(device, shape, 1.0f);
    if (r.empty()) GTEST_SKIP() << device << " is not available";
    EXPECT_EQ(r[0], static_cast<double>(static_cast<float>(n))) << device << ir::shape_str(shape);
    EXPECT_EQ(r[1], 1.0) << device << ir::shape_str(shape);
  }
  // A value that is not a power of two. The cpu adds its f32 block sums in f64; a GPU thread adds
  // them in f32 (1.5e-4 relative here on lavapipe), and one accumulator would be off by far more
  // (the sum stops growing at 2^24 * 0.1 per lane).
  std::vector<double> r = sum_and_mean(device, {2'200'000'000}, 0.1f);
  const double exact = 2.2e9 * static_cast<double>(0.1f);
  const double rel = device == "cpu" ? 1e-5 : 1e-3;
  EXPECT_NEAR(r[0], exact, exact * rel) << device;
  EXPECT_NEAR(r[1], static_cast<double>(0.1f), 0.1 * rel) << device;
}

TEST(LargeSizes, SumsPast2To31AreExactOnCpu) { check_large_sums("cpu"); }
TEST(LargeSizes, SumsPast2To31AreExactOnVulkan) { check_large_sums("vulkan:0"); }

TEST(LargeSizes, ShapesPastWhatKilnIndexesAreRefused) {
  ir::Graph g;
  ir::Builder b(g);
  const ir::Node* x = g.input(DType::f32, {1}, "x");
  for (const ir::Shape& shape : {ir::Shape{int64_t{1} << 60}, ir::Shape{INT64_MAX},
                                 ir::Shape{int64_t{1} << 30, int64_t{1} << 30}}) {
    ir::NodeResult r = b.expand(x, shape);
    ASSERT_FALSE(r.has_value()) << ir::shape_str(shape);
    EXPECT_NE(r.error().message.find("has too many elements (kiln indexes at most 2^59)"),
              std::string::npos)
        << r.error().message;
  }
  EXPECT_TRUE(b.expand(x, {int64_t{1} << 59}).has_value()) << "2^59 elements is the limit";
  EXPECT_FALSE(b.arange(0, (int64_t{1} << 59) + 1, 1, DType::i64).has_value());
}

}  // namespace
}  // namespace kiln::runtime
