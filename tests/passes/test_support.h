// Helpers shared by the passes tests: unwrapping builder results and running lowered groups.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <utility>
#include <vector>

#include "ir/builder.h"
#include "passes/fuser.h"
#include "passes/lower.h"
#include "tests/passes/kernel_eval.h"

namespace kiln::testing {

// A builder result the test needs; a failure stops the test binary with the builder's message.
inline const ir::Node* must(const ir::NodeResult& r) {
  if (!r) {
    ADD_FAILURE() << "builder error: " << r.error().message;
    std::abort();
  }
  return *r;
}

// A graph and its builder with shorthands for the ops the passes tests build most.
struct GraphFixture {
  ir::Graph g;
  ir::Builder b{g};
  const ir::Node* un(ir::Op op, const ir::Node* x) { return must(b.unary(op, x)); }
  const ir::Node* bin(ir::Op op, const ir::Node* l, const ir::Node* r) {
    return must(b.binary(op, l, r));
  }
  const ir::Node* lit(double v, ir::Shape shape = {}) { return must(b.full(shape, v, ir::DType::f32)); }
  const ir::Node* red(ir::Op op, const ir::Node* x, int64_t axis) {
    return must(b.reduce(op, x, std::vector<int64_t>{axis}, true));
  }
};

// Fuses `out` alone with the first fuser (it must give exactly one group), lowers it, runs it on
// `inputs` (by node) and returns the output buffer.
inline Buffer run_one_group(const ir::Node* out,
                            const std::vector<std::pair<const ir::Node*, Buffer>>& inputs) {
  passes::FusionPlan plan = passes::make_first_fuser()->fuse({out});
  EXPECT_EQ(plan.groups.size(), 1u);
  if (plan.groups.size() != 1) return {};
  auto lowered = passes::lower_group(plan.groups[0], "k");
  EXPECT_TRUE(lowered) << (lowered ? "" : lowered.error().message);
  if (!lowered) return {};
  std::vector<Buffer> bufs(lowered->params.size());
  for (size_t i = 0; i < lowered->params.size(); ++i)
    for (const auto& [node, data] : inputs)
      if (node == lowered->params[i]) bufs[i] = data;
  std::string err = run_kernel(lowered->kernel, bufs);
  EXPECT_EQ(err, "") << kir::print_kernel(lowered->kernel);
  return bufs.back();
}

// Runs every group of `plan` in order, buffers passed between groups by node; returns the
// buffer of each output.
inline std::vector<Buffer> run_fusion_plan(
    const passes::FusionPlan& plan, const passes::Outputs& outputs,
    const std::vector<std::pair<const ir::Node*, Buffer>>& inputs) {
  std::vector<std::pair<const ir::Node*, Buffer>> values = inputs;
  auto find = [&](const ir::Node* n) -> Buffer* {
    for (auto& [node, data] : values)
      if (node == n) return &data;
    return nullptr;
  };
  for (const passes::FusedGroup& group : plan.groups) {
    auto lowered = passes::lower_group(group, "k");
    EXPECT_TRUE(lowered) << (lowered ? "" : lowered.error().message);
    if (!lowered) return {};
    std::vector<Buffer> bufs(lowered->params.size());
    for (size_t i = 0; i < group.inputs.size(); ++i) {
      Buffer* b = find(group.inputs[i]);
      EXPECT_NE(b, nullptr) << "group input %" << group.inputs[i]->id << " is not ready";
      if (b) bufs[i] = *b;
    }
    std::string err = run_kernel(lowered->kernel, bufs);
    EXPECT_EQ(err, "") << kir::print_kernel(lowered->kernel);
    for (size_t i = 0; i < group.outputs.size(); ++i)
      values.push_back({group.outputs[i], bufs[group.inputs.size() + i]});
  }
  std::vector<Buffer> results;
  for (const ir::Node* o : outputs) results.push_back(find(o) ? *find(o) : Buffer{});
  return results;
}

// Runs the first fuser's plan for `outputs` (see run_fusion_plan).
inline std::vector<Buffer> run_plan(const passes::Outputs& outputs,
                                    const std::vector<std::pair<const ir::Node*, Buffer>>& inputs) {
  return run_fusion_plan(passes::make_first_fuser()->fuse(outputs), outputs, inputs);
}

// 0, 1, 2, ... n-1 as doubles.
inline Buffer iota(int64_t n, double start = 0) {
  Buffer b(static_cast<size_t>(n));
  for (size_t i = 0; i < b.size(); ++i) b[i] = start + static_cast<double>(i);
  return b;
}

// Whether group g holds node n.
inline bool holds(const passes::FusedGroup& g, const ir::Node* n) {
  return std::find(g.nodes.begin(), g.nodes.end(), n) != g.nodes.end();
}

}  // namespace kiln::testing
