// Helpers for the reference interpreter tests: nodes made directly with Graph::make following
// the node attribute contract of ir/builder.h, tensors from value lists, one-output evaluation.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <unordered_map>
#include <vector>

#include "interp/reference.h"
#include "ir/graph.h"
#include "kiln/host_tensor.h"

namespace kiln::testing {

using ir::AttrKey;
using ir::Attrs;
using ir::DType;
using ir::HostTensor;
using ir::Node;
using ir::Op;
using ir::Shape;

inline HostTensor tensor(DType dtype, Shape shape, const std::vector<double>& values) {
  HostTensor t = HostTensor::zeros(dtype, std::move(shape));
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel()) << "test tensor literal size";
  for (size_t i = 0; i < values.size() && static_cast<int64_t>(i) < t.numel(); ++i)
    t.set(static_cast<int64_t>(i), values[i]);
  return t;
}

inline std::vector<double> values_of(const HostTensor& t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t.get(i));
  return out;
}

// Builds a graph with bound inputs and evaluates one output node.
class RefGraph {
 public:
  const Node* input(const HostTensor& t, std::string name = "x") {
    const Node* n = g.input(t.dtype, t.shape, std::move(name));
    bound[n] = t;
    return n;
  }
  const Node* make(Op op, DType dtype, Shape shape, std::vector<const Node*> inputs,
                   Attrs attrs = {}) {
    return g.make(op, dtype, std::move(shape), std::move(inputs), std::move(attrs));
  }
  // Evaluates `n`, checks its dtype and shape, and returns its elements.
  std::vector<double> eval(const Node* n) {
    auto r = interp::evaluate_reference({n}, bound);
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
    if (!r) return {};
    EXPECT_EQ(r->size(), 1u);
    EXPECT_EQ((*r)[0].dtype, n->dtype);
    EXPECT_EQ((*r)[0].shape, n->shape);
    return values_of((*r)[0]);
  }
  // The error message of evaluating `n` (empty if it succeeded).
  std::string error(const Node* n) {
    auto r = interp::evaluate_reference({n}, bound);
    return r ? std::string() : r.error().message;
  }

  ir::Graph g;
  std::unordered_map<const Node*, HostTensor> bound;
};

// Element-by-element comparison where NaN equals NaN and floats agree to a relative 1e-15.
inline void expect_values(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i]) continue;  // exact, infinities included
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i << ": " << got[i];
    } else {
      EXPECT_NEAR(got[i], want[i], 1e-15 * std::max(1.0, std::fabs(want[i]))) << "element " << i;
    }
  }
}

// Element-by-element comparison within an absolute tolerance (for composites whose
// expansion order differs from the test's formula).
inline void expect_near(const std::vector<double>& got, const std::vector<double>& want,
                        double tolerance) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tolerance) << "element " << i;
}

}  // namespace kiln::testing
