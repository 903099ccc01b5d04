// Builder::call, the `.kg` entry: dispatch by name, literal operands, attribute validation and
// defaults.
#include <cmath>

#include "tests/ir/ir_test_support.h"

namespace kiln::ir {
namespace {

using testing::err;
using testing::ok;
using I = std::vector<int64_t>;

class BuilderCall : public ::testing::Test {
 protected:
  Graph g;
  Builder b{g};
  const Node* x = g.input(DType::f32, {3, 4}, "x");
  const Node* i = g.input(DType::i32, {3, 4}, "i");
};

TEST_F(BuilderCall, MaxAndMinDispatchOnOperandCount) {
  const Node* bin = ok(b.call("max", {x, x}, {}));
  EXPECT_EQ(bin->op, Op::Max);
  const Node* red = ok(b.call("max", {x}, Attrs{{AttrKey::axes, I{1}}}));
  EXPECT_EQ(red->op, Op::ReduceMax);
  EXPECT_EQ(red->shape, (Shape{3}));
  EXPECT_EQ(ok(b.call("min", {x}, {}))->op, Op::ReduceMin);
  EXPECT_EQ(err(b.call("max", {x, x, x}, {})), "max: expected 1 or 2 operands, got 3");
  EXPECT_EQ(err(b.call("max", {x, x}, Attrs{{AttrKey::axes, I{1}}})),
            "max: unknown attribute 'axes'");
}

TEST_F(BuilderCall, LiteralsTakeTheDtypeOfTheTensorOperand) {
  const Node* a = ok(b.call("add", {i, 2.0}, {}));
  EXPECT_EQ(a->inputs[1], ok(b.scalar(2, DType::i32)));
  const Node* c = ok(b.call("sub", {3.0, x}, {}));
  EXPECT_EQ(c->inputs[0], ok(b.scalar(3, DType::f32)));
  const Node* p = g.input(DType::boolean, {4}, "p");
  const Node* w = ok(b.call("where", {p, 1.0, i}, {}));
  EXPECT_EQ(w->inputs[1], ok(b.scalar(1, DType::i32)));
  const Node* w2 = ok(b.call("where", {1.0, x, -INFINITY}, {}));
  EXPECT_EQ(w2->inputs[0], ok(b.scalar(1, DType::boolean)));
  EXPECT_EQ(w2->inputs[2], ok(b.scalar(-INFINITY, DType::f32)));
  EXPECT_EQ(ok(b.call("exp", {1.0}, {}))->dtype, DType::f32);
  EXPECT_EQ(err(b.call("add", {i, 0.5}, {})),
            "add: literal 0.5 is not representable in i32 (expected an integer)");
}

TEST_F(BuilderCall, AttributeValidation) {
  EXPECT_EQ(err(b.call("reshape", {x}, {})), "reshape: missing attribute 'shape'");
  EXPECT_EQ(err(b.call("add", {x, x}, Attrs{{AttrKey::axis, int64_t{0}}})),
            "add: unknown attribute 'axis'");
  EXPECT_EQ(err(b.call("sum", {x}, Attrs{{AttrKey::axes, int64_t{1}}})),
            "sum: attribute 'axes' must be a list of integers, got 1");
  EXPECT_EQ(err(b.call("cast", {x}, Attrs{{AttrKey::to, int64_t{1}}})),
            "cast: attribute 'to' must be a dtype (f32 f64 f16 bf16 i32 i64 i8 u8 bool), got 1");
  EXPECT_EQ(err(b.call("slice", {x}, Attrs{{AttrKey::axis, 1.5}})),
            "slice: attribute 'axis' must be an integer, got 1.5");
  EXPECT_EQ(err(b.call("sum", {x}, Attrs{{AttrKey::keepdim, int64_t{1}}})),
            "sum: attribute 'keepdim' must be true or false, got 1");
  EXPECT_EQ(err(b.call("exp", {x, x}, {})), "exp: expected 1 operand, got 2");
  EXPECT_EQ(err(b.call("concat", {}, Attrs{{AttrKey::axis, int64_t{0}}})),
            "concat: expected at least 1 operand, got 0");
  EXPECT_EQ(err(b.call("foo", {x}, {})), "unknown op 'foo'");
  EXPECT_EQ(err(b.call("input", {}, {})), "unknown op 'input'");
  // Float attributes accept integers.
  EXPECT_TRUE(b.call(
      "pad", {x},
      Attrs{{AttrKey::before, I{0, 1}}, {AttrKey::after, I{0, 0}}, {AttrKey::value, int64_t{2}}}));
}

TEST_F(BuilderCall, Defaults) {
  // slice: start/end None, step 1
  EXPECT_EQ(ok(b.call("slice", {x}, Attrs{{AttrKey::axis, int64_t{1}}})),
            ok(b.slice(x, 1, std::nullopt, std::nullopt, 1)));
  // reductions: all axes, keepdim false
  EXPECT_EQ(ok(b.call("sum", {x}, {})), ok(b.reduce(Op::Sum, x, std::nullopt, false)));
  EXPECT_EQ(ok(b.call("mean", {x}, {})), ok(b.mean(x, std::nullopt, false)));
  EXPECT_EQ(ok(b.call("argmin", {x}, Attrs{{AttrKey::axis, int64_t{0}}})),
            ok(b.arg_reduce(Op::ArgMin, x, 0, false)));
  // pad value 0
  EXPECT_EQ(ok(b.call("pad", {x}, Attrs{{AttrKey::before, I{1, 0}}, {AttrKey::after, I{0, 0}}})),
            ok(b.pad(x, {1, 0}, {0, 0}, 0)));
  // softmax / log_softmax axis -1, layernorm axis -1 eps 1e-5, attention non-causal 1/sqrt(D)
  EXPECT_EQ(ok(b.call("softmax", {x}, {})), ok(b.softmax(x, -1)));
  EXPECT_EQ(ok(b.call("log_softmax", {x}, {})), ok(b.log_softmax(x, 1)));
  EXPECT_EQ(ok(b.call("layernorm", {x, 1.0, 0.0}, {})),
            ok(b.layernorm(x, ok(b.scalar(1, DType::f32)), ok(b.scalar(0, DType::f32)), -1, 1e-5)));
  EXPECT_EQ(ok(b.call("attention", {x, x, x}, {})), ok(b.attention(x, x, x, false, 0.5)));
  // clip: the clip row, literal bounds in x's dtype; trilu k 0, upper
  const Node* lo = ok(b.scalar(-1, DType::f32));
  const Node* hi = ok(b.scalar(1, DType::f32));
  const Node* clipped = ok(b.call("clip", {x, -1.0, 1.0}, {}));
  EXPECT_EQ(clipped, ok(b.clip(x, lo, hi)));
  EXPECT_EQ(clipped->op, Op::Clip);
  EXPECT_EQ(ok(b.clip(x, lo, nullptr)), ok(b.binary(Op::Max, x, lo)));  // one bound: max or min
  EXPECT_EQ(ok(b.clip(x, nullptr, hi)), ok(b.binary(Op::Min, x, hi)));
  EXPECT_EQ(ok(b.call("trilu", {x}, {})), ok(b.trilu(x, 0, true)));
  // arange start 0 step 1 dtype i32; full dtype f32
  EXPECT_EQ(ok(b.call("arange", {}, Attrs{{AttrKey::end, int64_t{5}}})),
            ok(b.arange(0, 5, 1, DType::i32)));
  EXPECT_EQ(ok(b.call("full", {}, Attrs{{AttrKey::shape, I{2}}, {AttrKey::value, 1.0}})),
            ok(b.full({2}, 1, DType::f32)));
}

TEST_F(BuilderCall, EveryPrimitiveByName) {
  const Node* p = g.input(DType::boolean, {3, 4}, "p");
  EXPECT_EQ(ok(b.call("cast", {x}, Attrs{{AttrKey::to, DType::f16}}))->op, Op::Cast);
  EXPECT_EQ(ok(b.call("not", {p}, {}))->op, Op::Not);
  EXPECT_EQ(ok(b.call("gelu", {x}, {}))->op, Op::Gelu);
  EXPECT_EQ(ok(b.call("ne", {x, x}, {}))->op, Op::Ne);
  EXPECT_EQ(ok(b.call("prod", {x}, {}))->op, Op::Prod);
  EXPECT_EQ(ok(b.call("permute", {x}, Attrs{{AttrKey::dims, I{1, 0}}}))->op, Op::Permute);
  EXPECT_EQ(ok(b.call("expand", {x}, Attrs{{AttrKey::shape, I{2, 3, 4}}}))->op, Op::Expand);
  EXPECT_EQ(ok(b.call("concat", {x, x}, Attrs{{AttrKey::axis, int64_t{0}}}))->shape, (Shape{6, 4}));
  EXPECT_EQ(ok(b.call("flip", {x}, Attrs{{AttrKey::axes, I{0}}}))->op, Op::Flip);
  EXPECT_EQ(ok(b.call("roll", {x}, Attrs{{AttrKey::shifts, I{1}}, {AttrKey::axes, I{0}}}))->op,
            Op::Roll);
  EXPECT_EQ(ok(b.call("unfold", {x},
                      Attrs{{AttrKey::dim, int64_t{1}},
                            {AttrKey::size, int64_t{2}},
                            {AttrKey::step, int64_t{2}}}))
                ->shape,
            (Shape{3, 2, 2}));
  EXPECT_EQ(ok(b.call("matmul", {x, ok(b.permute(x, {1, 0}))}, {}))->shape, (Shape{3, 3}));
  const Node* ids = g.input(DType::i64, {5}, "ids");
  EXPECT_EQ(ok(b.call("gather", {x, ids}, Attrs{{AttrKey::axis, int64_t{-1}}}))->shape,
            (Shape{3, 5}));
  EXPECT_EQ(ok(b.call("gather_elements", {x, ok(b.reshape(ids, {5, 1}))},
                      Attrs{{AttrKey::axis, int64_t{0}}}))
                ->shape,
            (Shape{5, 1}));
  // A literal index takes the data's dtype, like every literal: integer data only.
  EXPECT_EQ(
      ok(b.call("gather", {ok(b.cast(x, DType::i64)), 2.0}, Attrs{{AttrKey::axis, int64_t{0}}}))
          ->shape,
      (Shape{4}));
  EXPECT_EQ(err(b.call("gather", {x, 2.0}, Attrs{{AttrKey::axis, int64_t{0}}})),
            "gather: indices must be i32 or i64, got f32[]");
  EXPECT_EQ(err(b.call("gather", {x, ids}, {})), "gather: missing attribute 'axis'");
}

}  // namespace
}  // namespace kiln::ir
