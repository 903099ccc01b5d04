// The reference on graphs made by ir::Builder: composites and the canonical node forms it emits.
#include <cmath>

#include "ir/builder.h"
#include "tests/runtime/reference_test_util.h"

namespace kiln::testing {
namespace {

// Unwraps a builder result, failing the test with its message.
const Node* ok(const ir::NodeResult& r) {
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
  return r ? *r : nullptr;
}

TEST(ReferenceBuilder, SoftmaxAndLogSoftmaxOfRows) {
  RefGraph r;
  ir::Builder b(r.g);
  const std::vector<double> v = {1, 2, 3, -1, 0, 4};
  const Node* x = r.input(tensor(DType::f64, {2, 3}, v));
  std::vector<double> soft, logsoft;
  for (int i = 0; i < 2; ++i) {
    double total = 0;
    for (int j = 0; j < 3; ++j) total += std::exp(v[i * 3 + j]);
    for (int j = 0; j < 3; ++j) {
      soft.push_back(std::exp(v[i * 3 + j]) / total);
      logsoft.push_back(v[i * 3 + j] - std::log(total));
    }
  }
  expect_near(r.eval(ok(b.softmax(x, -1))), soft, 1e-14);
  expect_near(r.eval(ok(b.log_softmax(x, 1))), logsoft, 1e-14);
}

TEST(ReferenceBuilder, MeanAndLayernorm) {
  RefGraph r;
  ir::Builder b(r.g);
  const std::vector<double> v = {1, 2, 3, 4, 6, 11};
  const Node* x = r.input(tensor(DType::f64, {2, 3}, v));
  expect_near(r.eval(ok(b.mean(x, std::vector<int64_t>{1}, false))), {2, 7}, 1e-15);
  expect_near(r.eval(ok(b.mean(x, std::nullopt, false))), {27.0 / 6}, 1e-15);
  const Node* gamma = r.input(tensor(DType::f64, {3}, {1, 2, 0.5}), "gamma");
  const Node* beta = r.input(tensor(DType::f64, {3}, {0, 1, -1}), "beta");
  std::vector<double> want;
  const double g[] = {1, 2, 0.5}, be[] = {0, 1, -1};
  for (int i = 0; i < 2; ++i) {
    double mu = 0, var = 0;
    for (int j = 0; j < 3; ++j) mu += v[i * 3 + j] / 3;
    for (int j = 0; j < 3; ++j) var += (v[i * 3 + j] - mu) * (v[i * 3 + j] - mu) / 3;
    for (int j = 0; j < 3; ++j)
      want.push_back((v[i * 3 + j] - mu) / std::sqrt(var + 1e-5) * g[j] + be[j]);
  }
  expect_near(r.eval(ok(b.layernorm(x, gamma, beta, -1, 1e-5))), want, 1e-12);
}

TEST(ReferenceBuilder, MatmulOfVectorsFollowsNumpy) {
  RefGraph r;
  ir::Builder b(r.g);
  const Node* u = r.input(tensor(DType::f32, {3}, {1, 2, 3}), "u");
  const Node* m = r.input(tensor(DType::f32, {3, 2}, {1, 0, 0, 1, 1, 1}), "m");
  const Node* dot = ok(b.matmul(u, u));
  EXPECT_EQ(dot->shape, Shape{});
  expect_values(r.eval(dot), {14});
  const Node* vm = ok(b.matmul(u, m));
  EXPECT_EQ(vm->shape, Shape{2});
  expect_values(r.eval(vm), {4, 5});
}

TEST(ReferenceBuilder, PythonSlicesAndRolls) {
  RefGraph r;
  ir::Builder b(r.g);
  std::vector<double> v;
  for (int i = 0; i < 6; ++i) v.push_back(i);
  const Node* x = r.input(tensor(DType::i32, {6}, v));
  expect_values(r.eval(ok(b.slice(x, 0, -2, std::nullopt, 1))), {4, 5});                // x[-2:]
  expect_values(r.eval(ok(b.slice(x, 0, std::nullopt, std::nullopt, -2))), {5, 3, 1});  // x[::-2]
  expect_values(r.eval(ok(b.slice(x, 0, 1, -1, 2))), {1, 3});                           // x[1:-1:2]
  expect_values(r.eval(ok(b.roll(x, {-1}, {0}))), {1, 2, 3, 4, 5, 0});
}

TEST(ReferenceBuilder, AttentionMatchesLoops) {
  RefGraph r;
  ir::Builder b(r.g);
  const std::vector<double> qv = {1, 0, 0, 1}, kv = {1, 1, 0, 2, 2, 0}, vv = {1, 2, 3, 4, 5, 6};
  const Node* q = r.input(tensor(DType::f64, {2, 2}, qv), "q");
  const Node* k = r.input(tensor(DType::f64, {3, 2}, kv), "k");
  const Node* v = r.input(tensor(DType::f64, {3, 2}, vv), "v");
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    std::vector<double> want;
    const double scale = 1 / std::sqrt(2.0);
    for (int i = 0; i < 2; ++i) {
      double w[3], total = 0;
      for (int j = 0; j < 3; ++j) {
        const bool masked = causal && j > i;  // query i sees keys 0..i (top-left aligned)
        w[j] =
            masked ? 0 : std::exp(scale * (qv[i * 2] * kv[j * 2] + qv[i * 2 + 1] * kv[j * 2 + 1]));
        total += w[j];
      }
      for (int d = 0; d < 2; ++d) {
        double acc = 0;
        for (int j = 0; j < 3; ++j) acc += w[j] / total * vv[j * 2 + d];
        want.push_back(acc);
      }
    }
    expect_near(r.eval(ok(b.attention(q, k, v, causal, std::nullopt))), want, 1e-14);
  }
}

}  // namespace
}  // namespace kiln::testing
