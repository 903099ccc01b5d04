// Graph interning, node ids and the Attrs container.
#include <gtest/gtest.h>

#include "ir/graph.h"

namespace kiln::ir {
namespace {

TEST(GraphInterning, SameNodeTwiceIsTheSamePointer) {
  Graph g;
  const Node* x = g.input(DType::f32, {3, 4}, "x");
  const Node* a = g.make(Op::Exp, DType::f32, {3, 4}, {x}, {});
  size_t size = g.size();
  const Node* b = g.make(Op::Exp, DType::f32, {3, 4}, {x}, {});
  EXPECT_EQ(a, b);
  EXPECT_EQ(g.size(), size);
}

TEST(GraphInterning, AnyDifferingPartGivesANewNode) {
  Graph g;
  const Node* x = g.input(DType::f32, {3, 4}, "x");
  const Node* y = g.input(DType::f32, {3, 4}, "y");
  const Node* base =
      g.make(Op::Sum, DType::f32, {3}, {x}, Attrs{{AttrKey::axes, std::vector<int64_t>{1}}});
  EXPECT_NE(base, g.make(Op::Prod, DType::f32, {3}, {x},
                         Attrs{{AttrKey::axes, std::vector<int64_t>{1}}}));
  EXPECT_NE(base,
            g.make(Op::Sum, DType::f64, {3}, {x}, Attrs{{AttrKey::axes, std::vector<int64_t>{1}}}));
  EXPECT_NE(base,
            g.make(Op::Sum, DType::f32, {4}, {x}, Attrs{{AttrKey::axes, std::vector<int64_t>{1}}}));
  EXPECT_NE(base,
            g.make(Op::Sum, DType::f32, {3}, {y}, Attrs{{AttrKey::axes, std::vector<int64_t>{1}}}));
  EXPECT_NE(base,
            g.make(Op::Sum, DType::f32, {3}, {x}, Attrs{{AttrKey::axes, std::vector<int64_t>{0}}}));
}

TEST(GraphInterning, InputsAreNeverMerged) {
  Graph g;
  const Node* a = g.input(DType::f32, {2}, "x");
  const Node* b = g.input(DType::f32, {2}, "x");
  EXPECT_NE(a, b);
  EXPECT_NE(a->attrs.i(AttrKey::slot), b->attrs.i(AttrKey::slot));
  EXPECT_EQ(a->attrs.s(AttrKey::name), "x");
}

TEST(GraphInterning, IdsFollowCreationAndTopoOrderSortsByThem) {
  Graph g;
  const Node* x = g.input(DType::f32, {2}, "x");
  const Node* e = g.make(Op::Exp, DType::f32, {2}, {x}, {});
  const Node* s = g.make(Op::Add, DType::f32, {2}, {e, x}, {});
  EXPECT_LT(x->id, e->id);
  EXPECT_LT(e->id, s->id);
  std::vector<const Node*> order = topo_order({s, e});
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[0], x);
  EXPECT_EQ(order[1], e);
  EXPECT_EQ(order[2], s);
}

TEST(Attrs, KeptSortedByKeyWhateverTheInsertionOrder) {
  Attrs a{
      {AttrKey::value, 1.5}, {AttrKey::axes, std::vector<int64_t>{0}}, {AttrKey::keepdim, true}};
  ASSERT_EQ(a.items().size(), 3u);
  EXPECT_EQ(a.items()[0].first, AttrKey::axes);
  EXPECT_EQ(a.items()[1].first, AttrKey::keepdim);
  EXPECT_EQ(a.items()[2].first, AttrKey::value);
  Attrs b{
      {AttrKey::keepdim, true}, {AttrKey::value, 1.5}, {AttrKey::axes, std::vector<int64_t>{0}}};
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
}

TEST(Attrs, SetOverwritesAndGettersAreTyped) {
  Attrs a;
  EXPECT_FALSE(a.has(AttrKey::axis));
  EXPECT_EQ(a.find(AttrKey::axis), nullptr);
  a.set(AttrKey::axis, int64_t{2});
  a.set(AttrKey::axis, int64_t{3});
  a.set(AttrKey::to, DType::bf16);
  a.set(AttrKey::name, std::string("w"));
  EXPECT_EQ(a.items().size(), 3u);
  EXPECT_EQ(a.i(AttrKey::axis), 3);
  EXPECT_EQ(a.f(AttrKey::axis), 3.0);  // f() accepts an integer
  EXPECT_EQ(a.dt(AttrKey::to), DType::bf16);
  EXPECT_EQ(a.s(AttrKey::name), "w");
  a.set(AttrKey::shape, std::vector<int64_t>{4, 5});
  EXPECT_EQ(a.ints(AttrKey::shape), (std::vector<int64_t>{4, 5}));
}

TEST(Attrs, DifferentValuesDiffer) {
  Attrs a{{AttrKey::axis, int64_t{1}}};
  Attrs b{{AttrKey::axis, int64_t{2}}};
  Attrs c{{AttrKey::axis, 1.0}};  // same number, different type
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a.hash(), b.hash());
  EXPECT_EQ(attr_name(AttrKey::keepdim), "keepdim");
}

}  // namespace
}  // namespace kiln::ir
