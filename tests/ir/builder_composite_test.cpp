// The composites expand into the exact primitive structure the fuser and reference rely on.
#include <cmath>

#include "tests/ir/ir_test_support.h"

namespace kiln::ir {
namespace {

using testing::err;
using testing::ok;

class Composites : public ::testing::Test {
 protected:
  Graph g;
  Builder b{g};
  const Node* in(DType t, Shape s) { return g.input(t, std::move(s)); }
};

// Asserts `n` is `op` and returns it (nullptr on mismatch so that the caller stops).
const Node* expect_op(const Node* n, Op op) {
  EXPECT_NE(n, nullptr);
  if (!n) return nullptr;
  EXPECT_EQ(op_enum_name(n->op), op_enum_name(op));
  return n->op == op ? n : nullptr;
}

TEST_F(Composites, SoftmaxIsMaxExpSumDiv) {
  const Node* x = in(DType::f32, {4, 8});
  const Node* y = expect_op(ok(b.softmax(x, -1)), Op::Div);
  ASSERT_TRUE(y);
  const Node* e = expect_op(y->inputs[0], Op::Exp);
  const Node* s = expect_op(y->inputs[1], Op::Sum);
  ASSERT_TRUE(e && s);
  EXPECT_EQ(s->inputs[0], e);
  EXPECT_EQ(s->attrs.ints(AttrKey::axes), std::vector<int64_t>{1});
  EXPECT_TRUE(s->attrs.b(AttrKey::keepdim));
  const Node* d = expect_op(e->inputs[0], Op::Sub);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->inputs[0], x);
  const Node* m = expect_op(d->inputs[1], Op::ReduceMax);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->inputs[0], x);
  EXPECT_EQ(m->shape, (Shape{4, 1}));
  EXPECT_EQ(y->shape, x->shape);
  EXPECT_EQ(err(b.softmax(in(DType::i32, {3}), 0)), "softmax: needs a floating dtype, got i32");
  EXPECT_EQ(err(b.softmax(x, 2)), "softmax: axis 2 is out of range for shape [4,8]");
}

TEST_F(Composites, LogSoftmaxSharesTheShiftedInput) {
  const Node* x = in(DType::f64, {3, 5});
  const Node* y = expect_op(ok(b.log_softmax(x, 0)), Op::Sub);
  ASSERT_TRUE(y);
  const Node* d = expect_op(y->inputs[0], Op::Sub);
  const Node* lse = expect_op(y->inputs[1], Op::Log);
  ASSERT_TRUE(d && lse);
  const Node* s = expect_op(lse->inputs[0], Op::Sum);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->attrs.ints(AttrKey::axes), std::vector<int64_t>{0});
  const Node* e = expect_op(s->inputs[0], Op::Exp);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->inputs[0], d);
  EXPECT_EQ(expect_op(d->inputs[1], Op::ReduceMax)->inputs[0], x);
}

TEST_F(Composites, LayernormFollowsTheDesign) {
  const Node* x = in(DType::f32, {6, 16});
  const Node* gamma = in(DType::f32, {16});
  const Node* beta = in(DType::f32, {16});
  const Node* y = expect_op(ok(b.layernorm(x, gamma, beta, -1, 1e-5)), Op::Add);
  ASSERT_TRUE(y);
  EXPECT_EQ(y->inputs[1], beta);
  const Node* scaled = expect_op(y->inputs[0], Op::Mul);
  ASSERT_TRUE(scaled);
  EXPECT_EQ(scaled->inputs[1], gamma);
  const Node* nrm = expect_op(scaled->inputs[0], Op::Mul);
  ASSERT_TRUE(nrm);
  const Node* d = expect_op(nrm->inputs[0], Op::Sub);
  const Node* r = expect_op(nrm->inputs[1], Op::Rsqrt);
  ASSERT_TRUE(d && r);
  EXPECT_EQ(d->inputs[0], x);
  EXPECT_EQ(d->inputs[1], ok(b.mean(x, std::vector<int64_t>{1}, true)));
  const Node* ve = expect_op(r->inputs[0], Op::Add);
  ASSERT_TRUE(ve);
  EXPECT_EQ(ve->inputs[1], ok(b.scalar(1e-5, DType::f32)));
  const Node* sq = ok(b.binary(Op::Mul, d, d));
  EXPECT_EQ(ve->inputs[0], ok(b.mean(sq, std::vector<int64_t>{1}, true)));
}

TEST_F(Composites, LayernormAlignsAffineWithAnInnerAxis) {
  const Node* x = in(DType::f32, {2, 5, 3});
  const Node* gamma = in(DType::f32, {5});
  const Node* y = ok(b.layernorm(x, gamma, ok(b.scalar(0, DType::f32)), 1, 1e-3));
  ASSERT_TRUE(y);
  EXPECT_EQ(y->shape, x->shape);
  const Node* scaled = y->inputs[0];
  const Node* g2 = expect_op(scaled->inputs[1], Op::Reshape);
  ASSERT_TRUE(g2);
  EXPECT_EQ(g2->shape, (Shape{5, 1}));
  EXPECT_EQ(g2->inputs[0], gamma);
  EXPECT_EQ(err(b.layernorm(x, in(DType::f32, {3}), gamma, 1, 1e-5)),
            "layernorm: gamma shape [3] does not match axis 1 of x [2,5,3] (expected [5] or [])");
  EXPECT_EQ(err(b.layernorm(x, gamma, in(DType::f16, {5}), 1, 1e-5)),
            "layernorm: beta dtype f16 does not match x dtype f32");
}

TEST_F(Composites, AttentionWithoutMask) {
  const Node* q = in(DType::f32, {2, 4, 8});
  const Node* k = in(DType::f32, {2, 6, 8});
  const Node* v = in(DType::f32, {2, 6, 5});
  const Node* out = expect_op(ok(b.attention(q, k, v, false, std::nullopt)), Op::Matmul);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->shape, (Shape{2, 4, 5}));
  EXPECT_EQ(out->inputs[1], v);
  const Node* p = expect_op(out->inputs[0], Op::Div);  // the softmax
  ASSERT_TRUE(p);
  const Node* m = p->inputs[0]->inputs[0]->inputs[1];  // exp(s - max(s)): the max
  const Node* s = expect_op(m->inputs[0], Op::Mul);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->inputs[1], ok(b.scalar(1.0 / std::sqrt(8.0), DType::f32)));
  const Node* qk = expect_op(s->inputs[0], Op::Matmul);
  ASSERT_TRUE(qk);
  EXPECT_EQ(qk->inputs[0], q);
  const Node* kt = expect_op(qk->inputs[1], Op::Permute);
  ASSERT_TRUE(kt);
  EXPECT_EQ(kt->attrs.ints(AttrKey::dims), (std::vector<int64_t>{0, 2, 1}));
}

TEST_F(Composites, CausalAttentionMasksKeysAfterTheQuery) {
  const Node* q = in(DType::f32, {3, 4});
  const Node* k = in(DType::f32, {5, 4});
  const Node* out = ok(b.attention(q, k, k, true, 0.5));
  ASSERT_TRUE(out);
  const Node* p = out->inputs[0];
  const Node* w = expect_op(p->inputs[0]->inputs[0]->inputs[0], Op::Where);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->inputs[2], ok(b.scalar(-INFINITY, DType::f32)));
  EXPECT_EQ(w->inputs[1]->inputs[1], ok(b.scalar(0.5, DType::f32)));
  // mask = ge(reshape(arange(Lq), [Lq,1]), reshape(arange(Lk), [1,Lk])): query i sees keys j <= i.
  const Node* mask = expect_op(w->inputs[0], Op::Ge);
  ASSERT_TRUE(mask);
  EXPECT_EQ(mask->shape, (Shape{3, 5}));
  EXPECT_EQ(mask->inputs[0], ok(b.reshape(ok(b.arange(0, 3, 1, DType::i32)), {3, 1})));
  EXPECT_EQ(mask->inputs[1], ok(b.reshape(ok(b.arange(0, 5, 1, DType::i32)), {1, 5})));
}

TEST_F(Composites, AttentionErrors) {
  const Node* q = in(DType::f32, {4, 8});
  EXPECT_EQ(
      err(b.attention(q, in(DType::f32, {6, 16}), in(DType::f32, {6, 8}), false, std::nullopt)),
      "attention: head dims of q [4,8] and k [6,16] differ (8 vs 16)");
  EXPECT_EQ(
      err(b.attention(q, in(DType::f32, {6, 8}), in(DType::f32, {5, 8}), false, std::nullopt)),
      "attention: key lengths of k [6,8] and v [5,8] differ (6 vs 5)");
  EXPECT_EQ(err(b.attention(in(DType::f32, {8}), q, q, false, std::nullopt)),
            "attention: q, k and v must be at least 2-D, got [8], [4,8] and [4,8]");
  const Node* i = in(DType::i32, {4, 8});
  EXPECT_EQ(err(b.attention(i, i, i, false, std::nullopt)),
            "attention: needs a floating dtype, got i32");
  EXPECT_EQ(err(b.attention(in(DType::f32, {2, 4, 8}), in(DType::f32, {3, 4, 8}), q, false, 1.0)),
            "attention: batch dimensions of q [2,4,8], k [3,4,8] and v [4,8] do not broadcast");
}

}  // namespace
}  // namespace kiln::ir
