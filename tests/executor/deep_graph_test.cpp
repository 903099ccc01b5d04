// Graphs deeper than any native stack (issue 15): a chain of 10^6 elementwise ops is parsed,
// printed, fused, lowered, compiled and run without recursion whose depth the graph controls
// (10 000 ops used to overflow the stack in lowering and codegen).
#include <gtest/gtest.h>

#include <string>

#include "ir/builder.h"
#include "ir/kg.h"
#include "runtime/device.h"

namespace kiln::runtime {
namespace {

using ir::DType;

constexpr int kOps = 1'000'000;

// %v_i = add(prev, 1) or mul(prev, 0.5), alternately: x -> (x + 1) / 2, which converges to 1.
std::string chain_text() {
  std::string text = "kiln.graph v1\ninput %x : f32[4]\n";
  std::string prev = "%x";
  for (int i = 0; i < kOps; ++i) {
    const std::string name = "%v" + std::to_string(i);
    text += name + (i % 2 == 0 ? " = add(" : " = mul(") + prev + (i % 2 == 0 ? ", 1.0)\n" : ", 0.5)\n");
    prev = name;
  }
  return text + "output " + prev + "\n";
}

TEST(DeepGraph, AChainOfAMillionOpsRunsAndPrints) {
  ir::Graph g;
  auto kg = ir::read_kg(g, chain_text(), "chain.kg");
  ASSERT_TRUE(kg.has_value()) << kg.error().message;
  const std::string printed = ir::print_kg(*kg);
  EXPECT_NE(printed.find("output %v999999"), std::string::npos);

  DeviceOptions options;
  options.cpu_rates = RatesSource::reference;
  auto dev = open_device("cpu", options);
  ASSERT_TRUE(dev.has_value()) << dev.error().message;
  ir::HostTensor h = ir::HostTensor::zeros(DType::f32, {4});
  for (int i = 0; i < 4; ++i) h.set(i, 10.0 * i - 7);
  const ir::Node* x = kg->inputs[0].second;
  auto out = (*dev)->execute(g, {kg->outputs[0].second}, {{x, (*dev)->pool()->from_host(h).value()}});
  ASSERT_TRUE(out.has_value()) << out.error().message;
  ir::HostTensor y = (*out)[0]->to_host();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y.get(i), 1.0) << i;
}

}  // namespace
}  // namespace kiln::runtime
