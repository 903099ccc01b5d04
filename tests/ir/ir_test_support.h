// Helpers shared by the graph IR tests: unwrapping builder results and reading `.kg` text.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "ir/builder.h"
#include "ir/kg.h"

namespace kiln::ir::testing {

// The node of a result that must succeed (fails the test and returns nullptr otherwise).
inline const Node* ok(const NodeResult& r) {
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
  return r ? *r : nullptr;
}

// The message of a result that must fail.
template <class T>
std::string err(const Expected<T>& r) {
  EXPECT_FALSE(r.has_value()) << "expected an error";
  return r ? std::string("<no error>") : r.error().message;
}

inline KgGraph read_ok(Graph& g, const std::string& text) {
  auto r = read_kg(g, text, "t.kg");
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message) << "\n" << text;
  return r ? *r : KgGraph{};
}

inline const Node* output(const KgGraph& k, const std::string& name) {
  for (const auto& [n, node] : k.outputs)
    if (n == name) return node;
  ADD_FAILURE() << "no output " << name;
  return nullptr;
}

}  // namespace kiln::ir::testing
